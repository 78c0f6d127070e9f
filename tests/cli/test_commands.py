"""The ``geogpvae`` command end to end: impute, info, predict, plot, demo, exit codes, signals.

Most runs go through ``main([...])`` in this process (fast); a few start ``python -m
geogpvae`` to check the real entry point, SIGTERM handling and a SIGKILL during the write.
Training is kept tiny: a few epochs on 16 x 16 grids with small networks.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import geogpvae
from geogpvae.api import GPVAEImputer
from geogpvae.cli import common as cli_common
from geogpvae.cli import files as cli_files
from geogpvae.cli import impute as cli_impute
from geogpvae.cli import info as cli_info
from geogpvae.cli import jobs, main
from geogpvae.cli import settings as cli_settings
from geogpvae.datasets import make_gaussian_field
from geogpvae.engine.selection import KL_FACTORS
from geogpvae.errors import TrainingWarning

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "--option",
    "encoder_hidden=[16,16]",
    "--option",
    "decoder_hidden=[16,16]",
    "--option",
    "samples=8",
    "--option",
    "calibrate=false",
]
TINY = ["--neighbours", "4", "--epochs", "3", *SMALL, "-q"]


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    # the short training budgets of these tests are on purpose: their TrainingWarning is
    # ignored, as pyproject.toml's filter does in this process
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore:epochs="}


def _write(ds: xr.Dataset, path: Path) -> Path:
    geogpvae.to_netcdf(ds, path)
    return path


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no message on stderr"
    return err[-1]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A gridded and a scattered file, and one tiny imputation of the grid with its model."""
    root = tmp_path_factory.mktemp("cli")
    grid = _write(make_gaussian_field((16, 16), seed=0), root / "grid.nc")
    points = _write(make_gaussian_field(n_points=150, seed=1), root / "points.nc")
    out, model = root / "grid_filled.nc", root / "grid.pt"
    assert main(["impute", str(grid), str(out), *TINY, "--save-model", str(model)]) == 0
    return {"root": root, "grid": grid, "points": points, "out": out, "model": model}


# =========================================================================== basics
def test_version_through_python_m():
    res = subprocess.run(
        [sys.executable, "-m", "geogpvae", "--version"],
        check=False,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,  # a hang guard, not a speed limit
    )
    assert res.returncode == 0
    assert res.stdout.strip().startswith(f"geogpvae {geogpvae.__version__}")


@pytest.mark.parametrize("command", ["impute", "info", "validate", "predict", "plot", "demo"])
def test_help_has_examples(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"geogpvae {command}" in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "choose a command" in _error_line(capsys)


# =========================================================================== impute
def test_impute_gridded(data):
    src = xr.open_dataset(data["grid"])
    with xr.open_dataset(data["out"]) as out:
        for v in ("v0", "v1", "v2"):
            observed = src[v].notnull().values
            np.testing.assert_array_equal(out[v].values[observed], src[v].values[observed])
            assert np.isfinite(out[v].values).all()
            assert (out[f"{v}_std"].values[~observed] > 0).all()
            assert set(np.unique(out[f"{v}_imputed"].values)) == {0, 1}
        assert out.attrs["geogpvae_command"].startswith("geogpvae impute ")
        assert int(out.attrs["geogpvae_neighbours"]) == 4
        # calibrate=false: no calibration to record
        assert "geogpvae_predict_mode_chosen" not in out.attrs
        assert not [a for a in out.v0_std.attrs if a.startswith("geogpvae_variance_factor")]
    assert data["model"].is_file()
    src.close()


def test_impute_records_the_calibration_in_the_file(data, tmp_path):
    out, model = tmp_path / "calibrated.nc", tmp_path / "calibrated.pt"
    job = ["--neighbours", "4", "--epochs", "3", *SMALL[:6], "-q"]  # SMALL without calibrate=false
    assert main(["impute", str(data["grid"]), str(out), *job, "--save-model", str(model)]) == 0
    engine = GPVAEImputer.load(model).engine_
    with xr.open_dataset(out) as ds:
        for j, v in enumerate(("v0", "v1", "v2")):
            attrs = ds[f"{v}_std"].attrs
            assert attrs["geogpvae_variance_factor_observed"] == engine.calibration_[0, j]
            assert attrs["geogpvae_variance_factor_unobserved"] == engine.calibration_[1, j]
        assert json.loads(ds.attrs["geogpvae_predict_mode_chosen"]) == engine.predict_mode_
        assert json.loads(ds.attrs["geogpvae_noise_chosen"]) == {
            r: dict(zip(("v0", "v1", "v2"), v)) for r, v in engine.noise_.items()}


def test_impute_scattered_with_named_vars_and_coords(data, tmp_path):
    out = tmp_path / "pts.nc"
    args = ["impute", str(data["points"]), str(out), "--vars", "v0,v2", "--coords", "x,y", *TINY]
    assert main(args) == 0
    with xr.open_dataset(out) as ds:
        assert {"v0_std", "v2_std"} <= set(ds.data_vars) and "v1_std" not in ds.data_vars
        assert ds.v0.dims == ("site",) and np.isfinite(ds.v0.values).all()


def test_two_fill_values_of_a_variable_not_imputed_are_not_relayed(data, tmp_path, capsys):
    """xarray warns of a variable with both _FillValue and missing_value; `impute --vars` passes
    the warning on only for the variables it imputes."""
    import netCDF4

    path = tmp_path / "two_fills.nc"
    with xr.open_dataset(data["grid"]) as ds:
        ds.load().to_netcdf(path, encoding={n: {"_FillValue": -999.0} for n in ("v1", "v2")})
    with netCDF4.Dataset(path, "a") as f:
        for name in ("v1", "v2"):
            f[name].setncattr("missing_value", np.float64(1e20))  # beside _FillValue -999
    job = [a for a in TINY if a != "-q"]
    assert main(["impute", str(path), str(tmp_path / "o.nc"), "--vars", "v0,v1", *job, "--progress", "none"]) == 0
    told = [line for line in capsys.readouterr().err.splitlines() if "multiple fill values" in line]
    assert any("'v1'" in t for t in told) and not any("'v2'" in t for t in told)


def test_config_file_with_flags_overriding_it(data, tmp_path):
    sub = tmp_path / "job"
    sub.mkdir()
    config = sub / "job.toml"
    config.write_text(
        textwrap.dedent(f"""
        input = "{data["grid"]}"
        output = "from_config.nc"      # relative to the config file's folder
        vars = ["v0", "v1"]
        neighbours = 6
        epochs = 2
        [options]
        samples = 8
        calibrate = false
        encoder_hidden = [16, 16]
        decoder_hidden = [16, 16]
        coord_scale = {{ x = 2.0 }}
        batch_size = 128
    """)
    )
    argv = [
        "impute",
        "--config",
        str(config),
        "--neighbours",
        "5",
        "--option",
        "batch_size=64",
        "-q",
    ]
    assert main(argv) == 0
    with xr.open_dataset(sub / "from_config.nc") as ds:
        assert int(ds.attrs["geogpvae_neighbours"]) == 5  # the flag wins
        assert int(ds.attrs["geogpvae_epochs"]) == 2  # from the file
        config_used = json.loads(ds.attrs["geogpvae_config"])
        assert config_used["batch_size"] == 64 and config_used["samples"] == 8
        assert "x \u00d7 2" in ds.attrs["geogpvae_coordinates"]
        assert "v2_std" not in ds.data_vars


def test_option_values_are_toml_or_json_literals():
    assert cli_settings.parse_option("batch_size=512") == {"batch_size": 512}
    assert cli_settings.parse_option("encoder_hidden=[64, 64]") == {"encoder_hidden": [64, 64]}
    assert cli_settings.parse_option("coord_scale={z = 5}") == {"coord_scale": {"z": 5}}
    assert cli_settings.parse_option('coord_scale={"z": 5}') == {"coord_scale": {"z": 5}}
    assert cli_settings.parse_option("coord_scale.z=5.5") == {"coord_scale": {"z": 5.5}}
    assert cli_settings.parse_option("kernel=matern52") == {"kernel": "matern52"}
    assert cli_settings.parse_option("lengthscale=null") == {"lengthscale": None}
    assert cli_settings.parse_option("calibrate=false") == {"calibrate": False}


@pytest.mark.parametrize(
    "case, words",
    [
        ("unknown_var", ["'nope'", "available: v0, v1, v2"]),
        ("missing_file", ["not found"]),
        ("missing_pattern", ["no file matches"]),
        ("bad_option", ["unknown option", "foo"]),
        ("bad_option_syntax", ["KEY=VALUE"]),
        ("bad_option_value", ["batch_size"]),
        ("bad_selection_score", ["unknown selection_score 'rmse'", "auto, nll, mean"]),
        ("extra_not_a_table", ["extra must be a table", "--option extra.selection_score=mean"]),
        ("extra_misspelt", ["unknown extra option(s) selection_scor", "did you mean selection_score?"]),
        ("widths_as_text", ["encoder_hidden must be a list of integers", "--option encoder_hidden=[...]"]),
        ("seed_twice", ["seed is given twice", "--seed 5 and --option seed=3", "give it once"]),
        ("seed_twice_in_file", ["seed is given twice", "seed = 1 and [options] seed = 2"]),
        ("out_exists", ["already exists", "--overwrite"]),
        ("out_is_in", ["is the input file", "never writes over"]),
        ("out_links_to_in", ["is the input file"]),
        ("no_folder", ["does not exist"]),
        ("bad_engine", ["invalid choice", "--engine"]),
        ("bad_config_key", ["unknown key", "colour"]),
        ("resume_without_folder", ["--resume needs --checkpoint-dir"]),
        ("too_few_points", ["fewer than neighbours + 1"]),
        ("only_output", ["input file(s) and then the output"]),
        ("cuda_missing", ["cuda"]),
    ],
)
def test_bad_input_exits_2_with_one_line(case, words, data, tmp_path, capsys, monkeypatch):
    grid = str(data["grid"])
    out = tmp_path / "out.nc"
    args = {
        "unknown_var": [grid, str(out), "--vars", "v0,nope"],
        "missing_file": [str(tmp_path / "absent.nc"), str(out)],
        "missing_pattern": [str(tmp_path / "none*.nc"), str(out)],
        "bad_option": [grid, str(out), "--option", "foo=1"],
        "bad_option_syntax": [grid, str(out), "--option", "batch_size"],
        "bad_option_value": [grid, str(out), "--option", "batch_size=-3"],
        "bad_selection_score": [grid, str(out), "--option", "extra.selection_score=rmse"],
        "extra_not_a_table": [grid, str(out), "--option", "extra={selection_score=mean}"],
        "extra_misspelt": [grid, str(out), "--option", "extra.selection_scor=mean"],
        "widths_as_text": [grid, str(out), "--option", "encoder_hidden=64,64"],
        "seed_twice": [grid, str(out), "--seed", "5", "--option", "seed=3"],
        "seed_twice_in_file": [grid, str(out), "--config", str(tmp_path / "seeds.toml")],
        "out_exists": [grid, str(data["out"])],
        "out_is_in": [grid, grid, "--overwrite"],
        "out_links_to_in": [grid, str(tmp_path / "link.nc"), "--overwrite"],
        "no_folder": [grid, str(tmp_path / "no" / "out.nc")],
        "bad_engine": [grid, str(out), "--engine", "krige"],
        "bad_config_key": [grid, str(out), "--config", str(tmp_path / "bad.toml")],
        "resume_without_folder": [grid, str(out), "--resume"],
        "too_few_points": [grid, str(out), "--neighbours", "300"],
        "only_output": [str(out)],
        "cuda_missing": [grid, str(out), "--device", "cuda"],
    }[case]
    if case == "out_links_to_in":
        (tmp_path / "link.nc").symlink_to(grid)
    if case == "bad_config_key":
        (tmp_path / "bad.toml").write_text('colour = "red"\n')
    if case == "seed_twice_in_file":
        (tmp_path / "seeds.toml").write_text("seed = 1\n[options]\nseed = 2\n")
    if case == "cuda_missing" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    before = data["out"].stat().st_mtime_ns
    assert main(["impute", *args, "--epochs", "1", "-q"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geogpvae: error: "), err
    for word in words:
        assert word in lines[0]
    assert "Traceback" not in err
    assert not out.exists()
    assert data["out"].stat().st_mtime_ns == before


def _no_training(*args, **kwargs):
    raise AssertionError("bad input must be refused before training")


def test_debug_shows_the_traceback(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    assert main(["impute", str(data["grid"]), str(out), "--vars", "nope", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_other_failures_exit_1(data, tmp_path, capsys, monkeypatch):
    def explode(*args, **kwargs):
        raise FloatingPointError("training diverged at epoch 2")

    monkeypatch.setattr(GPVAEImputer, "fit_field", explode)
    assert main(["impute", str(data["grid"]), str(tmp_path / "o.nc"), *TINY]) == 1
    assert "training diverged" in _error_line(capsys)
    assert not (tmp_path / "o.nc").exists()


def test_overwrite_only_when_asked(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    out.write_bytes(b"old")
    args = ["impute", str(data["grid"]), str(out), *TINY]
    assert main(args) == 2
    assert out.read_bytes() == b"old"
    # a file that is not a finished output is neither skipped nor replaced
    assert main([*args, "--skip-existing"]) == 2
    assert "not a finished output" in _error_line(capsys)
    assert out.read_bytes() == b"old"
    assert main([*args, "--overwrite"]) == 0
    assert out.read_bytes()[:4] == b"\x89HDF"
    written = out.read_bytes()
    assert main([*args, "--skip-existing"]) == 0
    assert out.read_bytes() == written


@pytest.mark.parametrize("content", ["empty", "truncated", "foreign"])
def test_skip_existing_refuses_an_unfinished_output(data, tmp_path, capsys, monkeypatch, content):
    """A resubmitted array must not take a broken or foreign OUT for a finished one."""
    out = tmp_path / "out.nc"
    if content == "foreign":
        xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(out)
    else:
        xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(out, engine="netcdf4")
        whole = out.read_bytes()
        out.write_bytes(b"" if content == "empty" else whole[: len(whole) // 2])
    before = out.read_bytes()
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    assert main(["impute", str(data["grid"]), str(out), *TINY, "--skip-existing"]) == 2
    line = _error_line(capsys)
    assert "not a finished output" in line and "--overwrite" in line
    assert ("geogpvae_version" in line) == (content == "foreign")
    assert out.read_bytes() == before


# =========================================================================== checkpoints
def _interrupt_at(monkeypatch, epoch: int) -> None:
    """Send this process SIGTERM after ``epoch`` (as a scheduler would)."""
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):
        original(self, engine)
        if engine.train_state.epoch == epoch:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)


def test_checkpoint_belongs_to_its_job(data, tmp_path, capsys, monkeypatch):
    out, ck = tmp_path / "out.nc", tmp_path / "ck"
    args = [
        "impute",
        str(data["grid"]),
        str(out),
        "--neighbours",
        "4",
        "--epochs",
        "5",
        *SMALL,
        "--checkpoint-dir",
        str(ck),
        "--checkpoint-every",
        "100",
        "-q",
    ]
    _interrupt_at(monkeypatch, 4)  # beta="auto" chooses during epochs 1-3, epoch 4 is the first saved
    assert main(args) == 128 + signal.SIGTERM
    assert "stopped by SIGTERM after epoch 4 of 5" in _error_line(capsys)
    assert not out.exists()
    (ckpt,) = ck.glob("*.ckpt")
    payload = torch.load(ckpt, weights_only=True)
    assert payload["format"] == jobs.CHECKPOINT_FORMAT
    assert payload["checkpoint"]["train"]["epoch"] == 4
    assert payload["checkpoint"]["engine"]["kl_factor"] in (1.0, 0.5, 0.2)
    assert payload["job"]["vars"] == ["v0", "v1", "v2"]
    monkeypatch.undo()

    assert main(args) == 2  # neither --resume nor --overwrite
    assert "pass --resume" in _error_line(capsys)
    assert main([*args, "--seed", "7", "--resume"]) == 2
    line = _error_line(capsys)
    assert "different job" in line and "seed 0 -> 7" in line
    assert main([*args, "--resume"]) == 0
    assert out.exists() and not ckpt.exists()


def _wait_for(
    pattern: str, folder: Path, proc: subprocess.Popen, timeout: float = 600
) -> list[Path]:
    # the timeout only guards against a hang: a loaded machine may be slow to get there
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(folder.glob(pattern))
        if found:
            return found
        time.sleep(0.05)
    return list(folder.glob(pattern))


def test_sigterm_then_resume_equals_uninterrupted_run(data, tmp_path):
    out, ck, ref = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "ref.nc"
    job = ["--neighbours", "4", "--epochs", "80", *SMALL, "--seed", "3", "-q"]
    args = [
        "impute",
        str(data["grid"]),
        str(out),
        *job,
        "--checkpoint-dir",
        str(ck),
        "--checkpoint-every",
        "1",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "geogpvae", *args],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found = _wait_for("*.ckpt", ck, proc)
        assert found and proc.poll() is None, "the job ended before it could be interrupted"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=600)  # a hang guard
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert rc == 143, err
    assert "stopped by SIGTERM" in err and "--resume" in err
    assert not out.exists()
    saved = torch.load(found[0], weights_only=True)["checkpoint"]["train"]["epoch"]
    assert 1 <= saved < 80

    assert main([*args, "--resume"]) == 0
    assert not found[0].exists()
    assert main(["impute", str(data["grid"]), str(ref), *job]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(ref) as b:
        for name in a.data_vars:
            np.testing.assert_allclose(a[name].values, b[name].values, atol=1e-5, rtol=0)


_KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import geogpvae.fields.io as io
    from geogpvae.cli import main

    original = io._write_netcdf

    def stalling(ds, tmp, engine):
        original(ds, tmp, engine)   # the temporary file is complete but not renamed yet
        print("STALLING", flush=True)
        time.sleep(120)

    io._write_netcdf = stalling
    sys.exit(main(sys.argv[1:]))
    """
)


def test_sigkill_during_the_write_leaves_no_output(data, tmp_path):
    out = tmp_path / "out.nc"
    script = tmp_path / "run.py"
    script.write_text(_KILL_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), "impute", str(data["grid"]), str(out), *TINY],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line, deadline = "", time.monotonic() + 600  # a hang guard, not a speed limit
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if line.strip() == "STALLING" or not line:
                    break
        assert line.strip() == "STALLING", proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert not out.exists()
    assert len(list(tmp_path.glob(".out.nc.*.tmp"))) == 1  # only the hidden temporary file


# =========================================================================== job arrays
def test_job_array_task_processes_its_file(data, tmp_path, monkeypatch):
    tiles, outs = tmp_path / "tiles", tmp_path / "filled"
    tiles.mkdir()
    outs.mkdir()
    for i, name in enumerate(["c", "a", "b"]):
        _write(make_gaussian_field((10, 10), seed=10 + i), tiles / f"{name}.nc")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    args = ["impute", str(tiles / "*.nc"), str(outs / "{stem}_{index}.nc"), *TINY]
    assert main(args) == 0
    assert sorted(p.name for p in outs.iterdir()) == ["b_1.nc"]  # sorted: a, b, c
    assert main([*args, "--task-index", "3"]) == 2


def test_job_array_with_outputs_beside_its_inputs_imputes_each_input_once(tmp_path, monkeypatch):
    # outputs of earlier tasks match the input pattern: they are left out of the sorted list,
    # so the list does not shift and every input is imputed, once
    for i in range(3):
        _write(make_gaussian_field((8, 8), seed=20 + i), tmp_path / f"t{i}.nc")
    for task in range(3):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", str(task))
        assert main(["impute", str(tmp_path / "t*.nc"), str(tmp_path / "{stem}_f.nc"), *TINY]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.nc")) == ["t0.nc", "t0_f.nc", "t1.nc", "t1_f.nc", "t2.nc", "t2_f.nc"]
    files = sorted(str(p) for p in tmp_path.glob("*.nc"))
    with pytest.warns(UserWarning, match=r"leaving out input .*t1_f.nc: it is the output of another input"):
        kept = cli_files.drop_own_outputs(files, str(tmp_path / "{stem}_f.nc"))
    assert [Path(f).name for f in kept] == ["t0.nc", "t1.nc", "t2.nc"]
    # an output written to the same name as its input is not "another input's output"
    assert cli_files.drop_own_outputs(kept, str(tmp_path / "{name}")) == kept


def test_task_selection_and_output_names():
    files = ["a.nc", "b.nc", "c.nc"]
    assert cli_files.select_task(files, None, None, {}) == (files, None)
    assert cli_files.select_task(files, 2, None, {}) == (["c.nc"], 2)
    assert cli_files.select_task(files, None, None, {"SLURM_ARRAY_TASK_ID": "0"}) == (["a.nc"], 0)
    # one file, or files combined along a dim: the array id does not pick
    assert cli_files.select_task(["a.nc"], None, None, {"SLURM_ARRAY_TASK_ID": "4"}) == (["a.nc"], None)
    assert cli_files.select_task(files, None, "time", {"SLURM_ARRAY_TASK_ID": "1"}) == (files, None)
    with pytest.raises(cli_common.UsageError, match="concat-dim"):
        cli_files.select_task(files, 1, "time", {})
    with pytest.raises(cli_common.UsageError, match="outside 0..2"):
        cli_files.select_task(files, 3, None, {})
    assert cli_files.format_output("out/{stem}_f.nc", ["in/x.nc"], 4) == "out/x_f.nc"
    assert cli_files.format_output("o_{index:03d}.nc", ["x.nc"], 4) == "o_004.nc"
    assert cli_files.format_output("plain.nc", files, None) == "plain.nc"
    with pytest.raises(cli_common.UsageError, match="placeholder"):
        cli_files.format_output("{date}.nc", ["x.nc"], 0)
    with pytest.raises(cli_common.UsageError, match="no task index"):
        cli_files.format_output("{index}.nc", ["x.nc"], None)


# =========================================================================== info
def _climate_file(path: Path) -> Path:
    rng = np.random.default_rng(0)
    t2m = rng.normal(280, 5, (3, 6, 8))
    t2m[rng.random(t2m.shape) < 0.25] = np.nan
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
            "land": (
                ("lat", "lon"),
                (rng.random((6, 8)) < 0.5).astype("int8"),
                {"flag_values": np.array([0, 1], "int8"), "flag_meanings": "sea land"},
            ),
        },
        coords={
            "time": np.array(["2020-01-01", "2020-01-02", "2020-01-04"], dtype="datetime64[ns]"),
            "lat": ("lat", np.linspace(40, 45, 6), {"units": "degrees_north"}),
            "lon": ("lon", np.linspace(5, 12, 8), {"units": "degrees_east"}),
        },
    )
    return _write(ds, path)


def test_info_describes_variables_coordinates_and_memory(tmp_path, capsys):
    path = _climate_file(tmp_path / "t2m.nc")
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layout"] == "gridded" and info["locations"] == 3 * 6 * 8
    assert list(info["variables"]) == ["t2m"]
    with xr.open_dataset(path) as ds:
        expected = float(ds.t2m.isnull().mean())
    assert info["variables"]["t2m"]["missing"] == pytest.approx(expected)
    assert "flag" in info["other_variables"]["land"]
    roles = {c["name"]: c["role"] for c in info["coordinates"]}
    assert roles == {"time": "time", "lat": "lat", "lon": "lon"}
    assert info["x"]["columns"] == 4  # days + 3 sphere columns
    assert "days since" in info["x"]["description"] and "sphere" in info["x"]["description"]
    assert info["memory_bytes"]["total"] > 8 * 144 * 4
    assert info["engine"]["epochs"] == 1000 and info["engine"]["default_epochs"] is None

    assert main(["info", str(path), "--neighbours", "8", "--option", "epochs=400"]) == 0
    text = capsys.readouterr().out
    assert "400 epochs of batches of 144, float32 (under half of the default budget's 1000 epochs)" in text
    for word in (
        "gridded",
        "t2m [K]",
        "missing",
        "(not imputed) land",
        "8 neighbours",
        "memory estimate",
        "an estimate",
    ):
        assert word in text


def test_info_says_which_places_have_no_value_at_any_time(tmp_path, capsys):
    """As impute would warn: land places never observed, and the mask variable that leaves them out."""
    with xr.open_dataset(_climate_file(tmp_path / "t2m.nc")) as ds:
        ds = ds.load()
    land = ds.land.values.astype(bool)
    t2m = ds.t2m.values.copy()
    t2m[0][~land] = 280.0  # every sea place observed once
    t2m[:, land] = np.nan
    path = _write(ds.assign(t2m=(ds.t2m.dims, t2m, ds.t2m.attrs), sea=1 - ds.land), tmp_path / "sea.nc")
    assert main(["info", str(path), "--json"]) == 0
    never = json.loads(capsys.readouterr().out)["never_observed"]
    assert never["places"] == ["lat", "lon"] and never["of"] == 48 and never["count"] == land.sum()
    assert main(["info", str(path)]) == 0
    assert re.search(rf"note: {land.sum()} of the 48 \(lat, lon\) places \(\d+%\) have no value at any "
                     r"time: .*mask=ds\['land'\] == 0", capsys.readouterr().out)
    assert main(["info", str(path), "--mask-var", "sea", "--json"]) == 0  # the mask leaves them out
    assert json.loads(capsys.readouterr().out)["never_observed"] is None
    assert main(["info", str(path), "--mask-var", "land"]) == 0  # the wrong way round: all of them inside
    assert f"note: {land.sum()} of the {land.sum()} (lat, lon) places inside the mask (100%)" in capsys.readouterr().out


def test_info_on_an_imputed_file_says_impute_would_refuse_it(data, capsys):
    assert main(["info", str(data["out"]), "--json"]) == 0
    imputed = json.loads(capsys.readouterr().out)["already_imputed"]
    assert imputed and set(imputed) <= {"v0", "v1", "v2"}
    assert main(["info", str(data["out"])]) == 0
    assert "already went through impute" in capsys.readouterr().out
    assert main(["info", str(data["grid"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["already_imputed"] == []


def test_info_calls_a_series_a_grid_and_sites_scattered(tmp_path, capsys):
    level = np.sin(np.arange(20.0))
    level[3:6] = np.nan
    series = _write(xr.Dataset({"level": ("time", level)}, coords={"time": np.arange(20.0)}), tmp_path / "s.nc")
    sites = _write(xr.Dataset({"v": ("site", level)}, coords={"x": ("site", level * 0 + np.arange(20.0)),
                                                              "y": ("site", np.arange(20.0) ** 2)}), tmp_path / "p.nc")
    layouts = []
    for path in (series, sites):
        assert main(["info", str(path), "--json"]) == 0
        layouts.append(json.loads(capsys.readouterr().out)["layout"])
    assert layouts == ["gridded", "scattered"]


def test_a_reader_that_stops_early_is_not_an_error(data, capsys, monkeypatch):
    import geogpvae.cli.parser as cli_parser

    def closed(args, argv):
        raise BrokenPipeError(32, "Broken pipe")  # as print() into `| head` raises

    monkeypatch.setattr(cli_parser, "cmd_info", closed)
    monkeypatch.setattr("geogpvae.cli.dispatch._quiet_stdout", lambda: None)
    assert main(["info", str(data["grid"])]) == 141
    assert capsys.readouterr().err == ""


def test_memory_estimate_grows_with_the_field():
    small = cli_info.estimate_memory(1000, 1000, 2, 3, 20, 1)
    big = cli_info.estimate_memory(10_000, 10_000, 2, 3, 20, 1)
    assert big["total"] == pytest.approx(10 * small["total"])
    assert small["total"] == small["field"] + small["model"] + small["outputs"]
    # x (N, D) and values (N, K) in float64 are part of it
    assert small["field"] >= 8 * 1000 * (2 + 3)


# =========================================================================== predict, plot, demo
def test_predict_at_new_locations(data, tmp_path, capsys):
    coords = _write(
        xr.Dataset(coords={"y": np.linspace(0, 1, 5), "x": np.linspace(0, 1, 7)}),
        tmp_path / "grid.nc",
    )
    out = tmp_path / "pred.nc"
    assert main(["predict", str(data["model"]), str(coords), str(out), "-q"]) == 0
    with xr.open_dataset(out) as ds:
        assert {"v0", "v0_std", "v2", "v2_std"} <= set(ds.data_vars)
        assert ds.v0.dims == ("y", "x") and ds.v0.shape == (5, 7)
        assert np.isfinite(ds.v0.values).all() and (ds.v0_std.values > 0).all()
    assert main(["predict", str(data["grid"]), str(coords), str(tmp_path / "p2.nc")]) == 2
    assert "is not a readable geogpvae model file" in _error_line(capsys)
    assert main(["predict", str(data["model"]), str(coords), str(coords), "--overwrite"]) == 2


@pytest.mark.parametrize(
    "extra, name",
    [([], "map.png"), (["--layer", "1"], "layers.pdf"), (["--uncertainty"], "std.png")],
)
def test_plot_writes_a_figure(extra, name, data, tmp_path):
    fig = tmp_path / name
    assert main(["plot", str(data["out"]), "--var", "v1", *extra, "-o", str(fig), "-q"]) == 0
    magic = b"\x89PNG" if name.endswith(".png") else b"%PDF"
    assert fig.read_bytes()[:4] == magic
    assert list(tmp_path.glob(".*.tmp")) == []


def test_plot_of_a_one_dimensional_file_is_a_profile(tmp_path):
    import pandas as pd

    days = pd.date_range("2024-01-01", periods=40)
    level = np.sin(np.arange(40) / 5.0)
    level[12:18] = np.nan
    src = tmp_path / "series.nc"
    xr.Dataset({"level": ("time", level, {"units": "m"})}, coords={"time": days}).to_netcdf(src)
    out, fig = tmp_path / "filled.nc", tmp_path / "level.png"
    assert main(["impute", str(src), str(out), "--epochs", "3", "--neighbours", "4", "-q"]) == 0
    assert main(["plot", str(out), "-o", str(fig), "-q"]) == 0
    assert fig.read_bytes()[:4] == b"\x89PNG"


def test_plot_isel_of_one_station_draws_its_series(tmp_path, capsys):
    # a (time, station) network: --isel station=N is that station's series, said as a profile
    rng = np.random.default_rng(0)
    level = np.sin(np.arange(30)[:, None] / 4.0 + np.arange(5)) + 0.1 * rng.normal(size=(30, 5))
    level[10:15, 2] = np.nan
    src = tmp_path / "net.nc"
    xr.Dataset({"level": (("time", "station"), level, {"units": "m"})},
               coords={"time": np.arange(30.0), "x": ("station", np.arange(5.0)),
                       "y": ("station", np.arange(5.0) ** 2)}).to_netcdf(src)
    out, fig = tmp_path / "filled.nc", tmp_path / "s2.png"
    assert main(["impute", str(src), str(out), "--epochs", "3", "--neighbours", "4", "-q"]) == 0
    capsys.readouterr()
    assert main(["plot", str(out), "--isel", "station=2", "-o", str(fig)]) == 0
    assert fig.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {fig} (profile of level)" in capsys.readouterr().err


def test_plot_of_a_time_series_of_maps_slices_along_time(tmp_path, capsys):
    """A (time, y, x) output has no z: the default layers run along its first non-horizontal dim."""
    rng = np.random.default_rng(0)
    value = rng.standard_normal((3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    src = tmp_path / "series_filled.nc"
    xr.Dataset({"v": (("time", "y", "x"), value), "v_std": (("time", "y", "x"), 0.1 * flag),
                "v_imputed": (("time", "y", "x"), flag)},
               coords={"time": np.arange(3.0), "y": np.arange(5.0), "x": np.arange(6.0)}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    assert "(layers of v along time)\n" in capsys.readouterr().err  # 1-D coordinates: no map hint
    assert main(["plot", str(src), "--layer", "2,3", "-o", str(tmp_path / "b.png")]) == 0
    assert "along time" in capsys.readouterr().err
    assert main(["plot", str(src), "--axis", "y", "-o", str(tmp_path / "c.png")]) == 0
    assert "(layers of v along y)" in capsys.readouterr().err


def test_layers_of_a_curvilinear_grid_say_how_to_draw_a_map(tmp_path, capsys):
    """(time, y, x) with 2-D lon/lat, as NEMO writes: the default layers are drawn in grid steps,
    and the message says that --map draws the map."""
    rng = np.random.default_rng(1)
    j, i = np.meshgrid(np.arange(5.0), np.arange(6.0), indexing="ij")
    value = rng.standard_normal((3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    src = tmp_path / "nemo_filled.nc"
    xr.Dataset({"sst": (("time", "y", "x"), value), "sst_std": (("time", "y", "x"), 0.1 * flag),
                "sst_imputed": (("time", "y", "x"), flag)},
               coords={"time": np.arange(3.0),
                       "nav_lon": (("y", "x"), -30.0 + i + 0.1 * j, {"standard_name": "longitude"}),
                       "nav_lat": (("y", "x"), 40.0 + j - 0.1 * i, {"standard_name": "latitude"})}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    err = capsys.readouterr().err
    assert "(layers of sst along time); drawn in grid steps: 'sst' has 2-D longitudes and latitudes " \
           "(nav_lon, nav_lat), and --map draws them on a map (--isel time=N picks the time)" in err
    assert main(["plot", str(src), "--map", "-o", str(tmp_path / "b.png")]) == 0
    assert "grid steps" not in capsys.readouterr().err
    # with coordinates of their own on y and x (a polar stereographic grid in metres), the layers
    # are drawn in those, not in grid steps
    with xr.open_dataset(src) as ds:
        projected = ds.assign_coords(y=("y", 25e3 * np.arange(5.0), {"units": "m"}),
                                     x=("x", 25e3 * np.arange(6.0), {"units": "m"})).load()
    projected.to_netcdf(tmp_path / "stereo.nc")
    assert main(["plot", str(tmp_path / "stereo.nc"), "-o", str(tmp_path / "c.png")]) == 0
    assert "(layers of sst along time); drawn in its y/x coordinates: 'sst' has 2-D" in capsys.readouterr().err


def test_plot_of_a_four_dimensional_file_draws_layers_along_its_vertical_axis(tmp_path, capsys):
    """(time, depth, y, x): layers along the depth (axis="Z"), at one time step: the first, or
    the one --isel names; --isel can fix only the dims a layer cannot show."""
    rng = np.random.default_rng(1)
    value = rng.standard_normal((2, 3, 5, 6))
    flag = (rng.random(value.shape) < 0.3).astype(np.int8)
    dims = ("time", "depth", "y", "x")
    src = tmp_path / "ocean_filled.nc"
    xr.Dataset({"v": (dims, value), "v_std": (dims, 0.1 * flag), "v_imputed": (dims, flag)},
               coords={"time": np.arange(2.0), "depth": ("depth", [5.0, 15.0, 30.0], {"axis": "Z", "units": "m"}),
                       "y": np.arange(5.0), "x": np.arange(6.0)}).to_netcdf(src)
    capsys.readouterr()
    assert main(["plot", str(src), "-o", str(tmp_path / "a.png")]) == 0
    assert "(layers of v along depth, time=0)" in capsys.readouterr().err
    assert main(["plot", str(src), "--layer", "2", "--isel", "time=1", "-o", str(tmp_path / "b.png")]) == 0
    assert "(layers of v along depth, time=1)" in capsys.readouterr().err
    assert main(["plot", str(src), "--layer", "1", "--isel", "time=2", "-o", str(tmp_path / "c.png")]) == 2
    assert "--isel time=2: time has 2 positions (0 to 1)" in _error_line(capsys)
    assert main(["plot", str(src), "--layer", "1", "--isel", "y=0", "-o", str(tmp_path / "d.png")]) == 2
    assert "--isel can fix only time" in _error_line(capsys)
    assert main(["plot", str(src), "--axis", "dpeth", "-o", str(tmp_path / "e.png")]) == 2
    assert "--axis dpeth: not a dim of 'v' (dims time, depth, y, x)" in _error_line(capsys)
    with xr.open_dataset(src) as ds:  # a dim named depth, without attributes, is vertical too
        plain = ds.load().assign_coords(depth=("depth", [5.0, 15.0, 30.0]))
    plain.to_netcdf(tmp_path / "plain.nc")
    assert main(["plot", str(tmp_path / "plain.nc"), "-o", str(tmp_path / "f.png")]) == 0
    assert "(layers of v along depth, time=0)" in capsys.readouterr().err


def test_plot_isel_picks_the_slice_of_a_map(tmp_path, capsys, monkeypatch):
    from geogpvae import plot

    value = np.arange(60.0).reshape(3, 4, 5)
    value[0] = np.nan
    src = tmp_path / "series_filled.nc"
    xr.Dataset({"v": (("time", "y", "x"), value), "v_std": (("time", "y", "x"), np.zeros_like(value))},
               coords={"time": np.arange(3.0), "y": np.arange(4.0), "x": np.arange(5.0)}).to_netcdf(src)
    seen = []
    real = plot.field_map
    monkeypatch.setattr(plot, "field_map", lambda *a, **k: seen.append((k.get("isel"), k.get("outline_holes")))
                        or real(*a, **k))
    assert main(["plot", str(src), "--isel", "time=2", "-o", str(tmp_path / "a.png"), "-q"]) == 0
    assert main(["plot", str(src), "--isel", "time=2", "--no-outlines", "-o", str(tmp_path / "c.png"), "-q"]) == 0
    assert seen == [({"time": 2}, True), ({"time": 2}, False)]  # outlines hide dense grids: they can go
    assert main(["plot", str(src), "--uncertainty", "--no-outlines", "-o", str(tmp_path / "d.png")]) == 2
    assert "--no-outlines is an option of maps" in _error_line(capsys)
    # the library's advice comes back in the command's words
    assert main(["plot", str(src), "--map", "-o", str(tmp_path / "b.png")]) == 2
    assert "the first slice with values is --isel time=1" in _error_line(capsys)
    assert main(["plot", str(src), "--isel", "tmie=2", "-o", str(tmp_path / "b.png")]) == 2
    assert "--isel: 'tmie' is not a dim of 'v' to slice" in _error_line(capsys)
    assert main(["plot", str(src), "--isel", "time=1", "--uncertainty", "-o", str(tmp_path / "b.png")]) == 2
    assert main(["plot", str(src), "--isel", "time", "-o", str(tmp_path / "b.png")]) == 2
    assert "DIM=INDEX" in _error_line(capsys)
    assert not (tmp_path / "b.png").exists()


def test_plot_refuses_bad_requests(data, tmp_path, capsys):
    fig = tmp_path / "f.png"
    assert main(["plot", str(data["out"]), "--var", "zz", "-o", str(fig)]) == 2
    assert "'zz'" in _error_line(capsys)
    assert main(["plot", str(data["out"]), "-o", str(tmp_path / "f.xyz")]) == 2
    assert "format" in _error_line(capsys)
    assert main(["plot", str(data["out"]), "--map", "--layer", "1", "-o", str(fig)]) == 2
    assert not fig.exists()


def test_a_short_budget_is_warned_about_in_the_command_s_words(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    with warnings.catch_warnings():  # pyproject.toml ignores it in the rest of the suite
        warnings.simplefilter("always", TrainingWarning)
        assert main(["impute", str(data["grid"]), str(out), *TINY[:-1]]) == 0
    err = capsys.readouterr().err
    assert ("geogpvae: warning: --epochs 3 is under half of the 1000 epochs the default budget trains on 256 "
            "locations") in err and "leave --epochs out for the default budget" in err
    assert "epochs=" not in err and "None" not in err


def test_demo_scores_and_writes(tmp_path, capsys):
    out = tmp_path / "demo.nc"
    args = ["demo", str(out), "--shape", "12,12", "--epochs", "3", *SMALL, "--progress", "none"]
    assert main(args) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "mean-fill RMSE" in text and "coverage" in text and "RMSE" in text.splitlines()[-1]
    # the demo's quick budget is said in its first line, not warned about
    assert "3 epochs (the default budget: 1000)" in captured.err and "warning" not in captured.err
    with xr.open_dataset(out) as ds:
        assert {"v0", "v0_std", "v0_imputed"} <= set(ds.data_vars)
    assert main(args) == 2  # exists


def test_a_stop_before_the_first_epoch_does_not_promise_a_resume(tmp_path):
    early = str(jobs.JobInterrupted(signal.SIGINT, tmp_path / "a.ckpt", 0, 236))
    assert "before the first training epoch" in early and "starts again from the beginning" in early
    assert "--resume to continue" not in early
    later = str(jobs.JobInterrupted(signal.SIGINT, tmp_path / "a.ckpt", 80, 236))
    assert "after epoch 80 of 236" in later and "run again with --resume to continue" in later


def test_a_signal_in_a_beta_candidate_never_announces_the_end_of_training(data, tmp_path, capsys, monkeypatch):
    # with --epochs 1 each candidate trains the job's whole count of epochs; a signal after the
    # second candidate's says the epoch is finishing, not that training is over
    second = KL_FACTORS[1]
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):
        original(self, engine)
        if getattr(engine.selection_, "factor", None) == second:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    args = ["impute", str(data["grid"]), str(tmp_path / "out.nc"), "--neighbours", "4", "--epochs", "1", *SMALL,
            "--checkpoint-dir", str(tmp_path / "ck"), "--progress", "none"]
    assert main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "received SIGTERM: finishing the current epoch, then stopping" in err, err
    assert "training is finished" not in err


def test_a_signal_in_the_second_model_stops_it_without_announcing_the_end(data, tmp_path, capsys,
                                                                                      monkeypatch):
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):  # a signal in the second model's first epoch: the first one's end was no end
        original(self, engine)
        member = engine.member_in_training_
        if member is not None and member.train_state.epoch == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    args = ["impute", str(data["grid"]), str(tmp_path / "out.nc"), "--neighbours", "4", "--epochs", "12", *SMALL,
            "--option", "members=2", "--checkpoint-dir", str(tmp_path / "ck"), "--progress", "none"]
    assert main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "training is finished" not in err, err
    assert "in member 2 of 2, during the KL-weight selection" in err.strip().splitlines()[-1]
    assert not (tmp_path / "out.nc").exists()


def test_a_stop_in_the_second_member_resumes_it_where_it_stood(data, tmp_path, capsys, monkeypatch):
    out, ck, whole = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "whole.nc"
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):  # a signal in the second model's epoch 6, after its selection
        original(self, engine)
        member = engine.member_in_training_
        if member is not None and member.selection_ is None and member.train_state.epoch == 6:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    args = ["impute", str(data["grid"]), str(out), "--neighbours", "4", "--epochs", "12", *SMALL,
            "--option", "members=2", "--checkpoint-dir", str(ck), "--checkpoint-every", "3"]
    assert main([*args, "-q"]) == 128 + signal.SIGTERM
    line = _error_line(capsys)
    assert "stopped by SIGTERM in member 2 of 2, after epoch 6 of 12" in line, line
    (ckpt,) = ck.glob("*.ckpt")
    saved = torch.load(ckpt, weights_only=True)["checkpoint"]
    assert saved["train"]["done"] and saved["members"]["current"]["train"]["epoch"] == 6
    monkeypatch.undo()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    said = capsys.readouterr()
    assert "member 2 of 2, after epoch 6" in said.out + said.err
    assert main(["impute", str(data["grid"]), str(whole), "--neighbours", "4", "--epochs", "12", *SMALL,
                 "--option", "members=2", "-q"]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:  # as if never stopped
        for name in ("v0", "v0_std"):
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-5, atol=1e-6)
    assert not ckpt.exists()


def test_a_signal_before_the_first_epoch_stops_after_it_with_a_checkpoint(data, tmp_path, capsys, monkeypatch):
    # a stop is asked for only after an epoch, so even a signal that comes while the data are
    # read leaves one epoch's checkpoint, and --resume carries on from it
    out, ck, whole = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "whole.nc"
    real = cli_impute._train

    def signalled_early(imputer, field, resume, after_epoch, should_stop):
        os.kill(os.getpid(), signal.SIGTERM)  # before any epoch has trained
        return real(imputer, field, resume, after_epoch, should_stop)

    monkeypatch.setattr(cli_impute, "_train", signalled_early)
    args = ["impute", str(data["grid"]), str(out), "--neighbours", "4", "--epochs", "6", *SMALL,
            "--checkpoint-dir", str(ck), "--option", "beta=1"]
    assert main([*args, "-q"]) == 128 + signal.SIGTERM
    line = _error_line(capsys)
    assert "after epoch 1 of 6" in line and "run again with --resume to continue" in line, line
    (ckpt,) = ck.glob("*.ckpt")
    assert torch.load(ckpt, weights_only=True)["checkpoint"]["train"]["epoch"] == 1
    monkeypatch.undo()
    assert main([*args, "--resume", "-q"]) == 0
    assert main(["impute", str(data["grid"]), str(whole), "--neighbours", "4", "--epochs", "6", *SMALL,
                 "--option", "beta=1", "-q"]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:  # as if never stopped
        np.testing.assert_allclose(a["v0"].values, b["v0"].values, rtol=1e-5, atol=1e-6)
    assert not ckpt.exists()


def test_a_stop_during_the_selection_resumes_it_where_it_stood(data, tmp_path, capsys, monkeypatch):
    out, ck, whole = tmp_path / "out.nc", tmp_path / "ck", tmp_path / "whole.nc"
    second = KL_FACTORS[1]
    original = cli_impute._Checkpointer.after_epoch

    def after_epoch(self, engine):  # a signal in the second candidate's last epoch
        original(self, engine)
        if getattr(engine.selection_, "factor", None) == second and engine.train_state.epoch == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(cli_impute._Checkpointer, "after_epoch", after_epoch)
    # every 3 epochs: each candidate's epoch 3 is saved, the second's over the first's
    args = ["impute", str(data["grid"]), str(out), "--neighbours", "4", "--epochs", "12", *SMALL,
            "--checkpoint-dir", str(ck), "--checkpoint-every", "3"]
    assert main([*args, "-q"]) == 128 + signal.SIGTERM
    line = _error_line(capsys)
    assert f"during the KL-weight selection (beta x{second:g}, epoch 3 of 3)" in line
    assert "run again with --resume to continue" in line
    (ckpt,) = ck.glob("*.ckpt")
    saved = torch.load(ckpt, weights_only=True)["checkpoint"]
    assert set(saved["selection"]["scores"]) == {KL_FACTORS[0]} and saved["selection"]["factor"] == second
    monkeypatch.undo()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    said = capsys.readouterr()
    assert f"in the KL-weight selection (beta x{second:g} after epoch 3; 1 candidate scored)" in said.out + said.err
    assert main(["impute", str(data["grid"]), str(whole), "--neighbours", "4", "--epochs", "12", *SMALL, "-q"]) == 0
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:  # as if never stopped
        for name in ("v0", "v0_std"):
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-5, atol=1e-6)
        assert a.attrs["geogpvae_kl_factor"] == b.attrs["geogpvae_kl_factor"]
    assert not ckpt.exists()
