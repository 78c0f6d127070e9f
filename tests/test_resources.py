"""Honest resources: the memory estimate counts the neighbour blocks, a run that cannot fit is
refused before training, declared sizes are checked before anything is read, and the metric's
warm-up stays within an explicit epoch budget."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field
from geogpvae.errors import InputError

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30
SMALL = {"encoder_hidden": (16, 16), "decoder_hidden": (16, 16), "samples": 8, "calibrate": False}


def _sites(n: int = 600) -> xr.Dataset:
    return make_gaussian_field(n_points=n, n_vars=2, seed=0)


def test_info_counts_the_neighbour_blocks(tmp_path, capsys):
    """600 sites: H = 200 peaked at 2.1 GB and H = 500 at 11.1 GB, where info said 1.0 and 2.4 MiB."""
    path = tmp_path / "sites.nc"
    geogpvae.to_netcdf(_sites(), path)
    totals = {}
    for h, measured in ((200, 2.1e9), (500, 11.1e9)):
        assert main(["info", str(path), "--neighbours", str(h), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        totals[h] = info["memory_bytes"]["total"]
        assert measured / 1.5 <= totals[h] <= 1.5 * measured, (h, totals[h])
        assert info["seconds"] > 0 and info["memory_available_bytes"] > 0


def test_the_time_estimate_scales_with_the_speed_check(monkeypatch, tmp_path, capsys):
    from geogpvae.engine import resources
    from geogpvae.engine.config import GPVAEConfig

    cfg = GPVAEConfig()
    base = resources.estimate_seconds(cfg, 5000, 3, 2, cores=2)
    slow = resources.estimate_seconds(cfg, 5000, 3, 2, cores=2, speed=3.0)
    assert slow - resources.FIXED_SECONDS == pytest.approx(3.0 * (base - resources.FIXED_SECONDS))
    # a machine whose rounds take twice the reference's seconds reads 2
    clock = iter(np.arange(0, 100, 2 * resources.SPEED_CHECK_SECONDS))
    monkeypatch.setattr(resources.time, "perf_counter", lambda: next(clock))
    assert resources.speed_check() == pytest.approx(2.0)
    monkeypatch.undo()
    assert 0.05 <= resources.speed_check() <= 50
    path = tmp_path / "sites.nc"
    geogpvae.to_netcdf(_sites(200), path)
    monkeypatch.setattr(resources, "speed_check", lambda: 4.0)  # a busy node
    monkeypatch.setattr(resources, "_cores", lambda config: 1 if config.threads == 1 else 2)
    assert resources.fit_speed(GPVAEConfig(threads=1)) == 8.0  # one thread of two: half the check's pace
    assert resources.fit_speed(GPVAEConfig()) == 4.0
    monkeypatch.setattr(resources, "_cores", lambda config: 2)
    assert main(["info", str(path), "--option", "threads=2"]) == 0
    text = capsys.readouterr().out
    assert "on 2 CPU cores here (a speed check just now ran 4.0 times slower than an idle two-core" in text
    assert main(["info", str(path), "--option", "threads=2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["speed_factor"] == 4.0 and info["cores"] == 2
    idle = resources.estimate_seconds(GPVAEConfig(threads=2), 200, 2, 2, speed=1.0)
    assert info["seconds"] == pytest.approx(resources.FIXED_SECONDS + 4.0 * (idle - resources.FIXED_SECONDS), abs=0.1)


def test_estimate_follows_batch_and_prediction_chunks():
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.resources import estimate_peak_memory, memory_parts

    # 2,000,000 grid points at H = 500 were "about 7.8 GiB": the prediction's blocks alone are far more
    assert estimate_peak_memory(GPVAEConfig(neighbours=500), 2_000_000, 1, 2) > 64 * GIB
    cfg = GPVAEConfig(neighbours=200)
    small, large = memory_parts(cfg, 5000, 3, 2), memory_parts(cfg.replace(batch_size=1024), 5000, 3, 2)
    assert cfg.batch_for(5000) == 256 and large["training"] > 3.5 * small["training"]  # B x (H + 1)^2 blocks
    assert memory_parts(cfg.replace(dtype="float64"), 5000, 3, 2)["training"] > 1.9 * small["training"]


def test_estimate_uses_the_engine_chunk_sizes():
    from geogpvae.engine import core, predict, resources

    def default(fn, name):
        return inspect.signature(fn).parameters[name].default

    assert resources.NEIGHBOUR_CHUNK == default(predict.neighbour_posterior, "chunk")
    assert resources.DECODE_CHUNK == default(predict.predictive_moments, "chunk")
    assert resources.PREDICT_CHUNK == core.PREDICT_CHUNK


_CHILD = """
import json, sys, numpy as np
from geogpvae.datasets.synthetic import make_field
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.resources import estimate_peak_memory
f = make_field(np.random.default_rng(1).random((300, 2)), n_vars=3, rng=0)
open("/proc/self/clear_refs", "w").write("5")
eng = GPVAEEngine(epochs=1, neighbours=50, threads=1, progress=False).fit(f.points, f.values)
eng.predict()
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
print(json.dumps([estimate_peak_memory(eng.config, 300, 3, 2), peak]))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
def test_estimate_is_within_a_factor_of_the_measured_peak():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    res = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    estimate, peak = json.loads(res.stdout.strip().splitlines()[-1])
    assert peak / 1.5 <= estimate <= 1.5 * peak, (estimate, peak)


# --------------------------------------------------------------------------- refused up front
def _short_of_memory(monkeypatch, nbytes: int = 100 * 2**20) -> None:
    monkeypatch.setattr("geogpvae.engine.resources.available_memory", lambda: nbytes)


def _no_training(*args, **kwargs):
    raise AssertionError("a run that cannot fit must be refused before training")


def test_a_run_that_cannot_fit_is_refused_before_training(monkeypatch):
    from geogpvae.engine import core

    _short_of_memory(monkeypatch)
    monkeypatch.setattr(core.GPVAEEngine, "fit", _no_training)
    imputer = geogpvae.GPVAEImputer(neighbours=200, epochs=1, device="cpu", progress=False)
    with pytest.raises(InputError, match=r"would need about .* GiB .* but 100\.0 MiB is available; lower "
                                         r"neighbours \(--neighbours\) or batch_size"):
        imputer.fit(_sites())
    with pytest.raises(InputError, match="would need about"):
        geogpvae.impute(_sites(), neighbours=200, epochs=1, device="cpu", progress=False)


def test_a_run_that_fits_is_not_refused(monkeypatch):
    _short_of_memory(monkeypatch, 64 * GIB)
    imputer = geogpvae.GPVAEImputer(neighbours=4, epochs=1, device="cpu", progress=False, **SMALL)
    assert imputer.prepare(_sites(100)).values.shape == (100, 2)


def test_impute_command_refuses_before_training(tmp_path, monkeypatch, capsys):
    from geogpvae.engine import core

    path = tmp_path / "sites.nc"
    geogpvae.to_netcdf(_sites(), path)
    _short_of_memory(monkeypatch)
    monkeypatch.setattr(core.GPVAEEngine, "fit", _no_training)
    assert main(["impute", str(path), str(tmp_path / "out.nc"), "--neighbours", "200", "--epochs", "1",
                 "--device", "cpu", "-q"]) == 2
    assert "available; lower neighbours (--neighbours)" in capsys.readouterr().err
    assert not (tmp_path / "out.nc").exists()


# --------------------------------------------------------------------------- declared sizes
def _declaring(path: Path, shape: tuple[int, int], dtype: str = "f4") -> Path:
    """A small NetCDF file declaring a variable of ``shape`` whose values were never written."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", shape[0])
        nc.createDimension("x", shape[1])
        nc.createVariable("y", "f8", ("y",))[:] = np.arange(shape[0], dtype=float)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(shape[1], dtype=float)
        nc.createVariable("v", dtype, ("y", "x"), chunksizes=(min(shape[0], 1024), min(shape[1], 1024)))
    return path


def test_info_checks_declared_sizes_before_reading(tmp_path, monkeypatch, capsys):
    """494 kB declaring 30,000 x 30,000 float32 made info allocate 3.35 GiB."""
    path = _declaring(tmp_path / "big.nc", (30_000, 30_000))
    assert path.stat().st_size < 10**6
    _short_of_memory(monkeypatch, 2 * GIB)
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert "declares 3.4 GiB of variables to read (v (y 30000 x x 30000) float32 (3.4 GiB))" in err
    assert "2.0 GiB of memory is available" in err


def test_api_checks_declared_sizes_before_reading(tmp_path):
    """A variable larger than any machine's memory is refused, not read."""
    path = _declaring(tmp_path / "huge.nc", (1_000_000, 1_000_000), "f8")
    with xr.open_dataset(path) as ds:
        with pytest.raises(InputError, match=r"declares 7\.3 TiB of variables .* choose fewer variables"):
            geogpvae.GPVAEImputer(neighbours=4, epochs=1, progress=False).prepare(ds)
        assert not ds["v"].variable._in_memory


# --------------------------------------------------------------------------- warm-up budget
@pytest.mark.parametrize("epochs", [1, 2])
def test_warm_up_stays_within_an_explicit_epoch_budget(monkeypatch, epochs):
    """Every warm-up round (each at least one epoch) ran, three epochs for ``epochs=1``."""
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine import core
    from geogpvae.engine.metric import warmup_epochs

    rounds = []
    monkeypatch.setattr(core.GPVAEEngine, "_warm_fit",
                        lambda self, x, values: rounds.append(1) or np.array([[4.0, 1.0]]))
    field = make_field(grid_points((12, 12), 1 / 11), n_vars=2, rng=0)
    eng = core.GPVAEEngine(epochs=epochs, neighbours=4, progress=False, **SMALL).fit(field.points, field.values)
    assert rounds and len(rounds) * warmup_epochs(eng.config, 144) <= epochs


@pytest.mark.parametrize("n, k", [(200, 2), (3000, 3)])
def test_file_sizes_are_estimated_on_the_high_side(tmp_path, n, k):
    from geogpvae.engine.core import GPVAEEngine
    from geogpvae.engine.resources import file_bytes
    from geogpvae.fields.torch_files import atomic_torch_save

    rng = np.random.default_rng(0)
    x, y = rng.random((n, 2)), rng.normal(size=(n, k))
    y[rng.random(y.shape) < 0.3] = np.nan
    engine = GPVAEEngine(neighbours=10, epochs=2, progress=False).fit(x, y)
    model = atomic_torch_save(engine.state_dict(include_data=True), tmp_path / "model.pt").stat().st_size
    checkpoint = atomic_torch_save(engine.checkpoint(), tmp_path / "job.ckpt").stat().st_size
    estimate = file_bytes(engine.config, n, k, 2)
    assert 1.0 <= estimate["model"] / model <= 1.3
    assert 1.0 <= estimate["checkpoint"] / checkpoint <= 1.3


def test_a_prediction_too_large_for_memory_is_refused_before_reading_locations(monkeypatch):
    from geogpvae.engine import core

    imputer = geogpvae.GPVAEImputer(neighbours=4, epochs=1, device="cpu", progress=False, **SMALL).fit(_sites(60))
    grid = xr.Dataset(coords={"x": np.linspace(0, 1, 20_000), "y": np.linspace(0, 1, 20_000)})  # 4e8 locations
    monkeypatch.setattr(core.GPVAEEngine, "predict", _no_training)
    with pytest.raises(InputError, match=r"predicting at 400,000,000 locations would need about .* GiB"):
        imputer.predict(grid)
    small = xr.Dataset(coords={"x": np.linspace(0, 1, 5), "y": np.linspace(0, 1, 5)})
    monkeypatch.undo()
    assert imputer.predict(small)[imputer.vars_[0]].shape == (5, 5)


def test_plot_checks_declared_sizes_before_reading(tmp_path, monkeypatch, capsys):
    path = _declaring(tmp_path / "big.nc", (30_000, 30_000))
    _short_of_memory(monkeypatch, 2 * GIB)
    assert main(["plot", str(path), "--var", "v", "-o", str(tmp_path / "map.png")]) == 2
    assert "declares 3.4 GiB of variables to read" in capsys.readouterr().err
    assert not (tmp_path / "map.png").exists()
