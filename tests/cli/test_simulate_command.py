"""``geogpvae simulate``: realisations written to NetCDF, from a new fit or a saved model
(geogpvae/cli/simulate.py)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from cli_helpers import TINY, _error_line, _no_training

from geogpvae.cli import main


def _values(path, name="v0"):
    with xr.open_dataset(path) as ds:
        return ds[name].load(), ds.attrs.copy()


def test_trains_and_writes_realisations(data, tmp_path):
    out = tmp_path / "draws.nc"
    assert main(["simulate", str(data["grid"]), str(out), "-n", "3", "--vars", "v0,v1", *TINY]) == 0
    draws, attrs = _values(out)
    with xr.open_dataset(data["grid"]) as ds:
        observed = ds.v0.load()
    assert draws.dims == ("realization", "y", "x") and list(draws.realization.values) == [0, 1, 2]
    assert draws.realization.attrs["standard_name"] == "realization"
    seen = observed.notnull().values
    for r in range(3):  # observed values bit for bit; holes filled, and differently in each draw
        assert np.array_equal(draws.values[r][seen], observed.values[seen])
        assert np.isfinite(draws.values[r]).all()
    assert not np.allclose(draws.values[0][~seen], draws.values[1][~seen])
    assert attrs["geogpvae_realizations"].startswith("3 joint draws, numbers 0-2")
    assert "simulate" in attrs["geogpvae_command"]


def test_saved_model_draws_the_same_realisations_in_parts(data, tmp_path, monkeypatch):
    """Realisation i of a seed does not depend on -n or --first, and --model trains nothing."""
    from geogpvae.api import GPVAEImputer

    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    whole, part = tmp_path / "whole.nc", tmp_path / "part.nc"
    model = str(data["model"])
    assert main(["simulate", str(data["grid"]), str(whole), "-n", "3", "--model", model, "-q"]) == 0
    assert main(["simulate", str(data["grid"]), str(part), "-n", "2", "--first", "1", "--model", model,
                 "-q"]) == 0
    a, _ = _values(whole, "v2")
    b, _ = _values(part, "v2")
    assert list(b.realization.values) == [1, 2]
    np.testing.assert_array_equal(a.sel(realization=[1, 2]).values, b.values)
    other, job = tmp_path / "other.nc", tmp_path / "job.toml"
    job.write_text("seed = 7\n")  # a seed from the config file counts as given
    assert main(["simulate", str(data["grid"]), str(other), "-n", "1", "--config", str(job), "--model", model,
                 "-q"]) == 0
    c, attrs = _values(other, "v2")
    assert not np.array_equal(c.values[0], a.values[0]) and attrs["geogpvae_realizations"].endswith("seed 7")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give the number of realisations"),
        (["-n", "0"], "realizations must be at least 1"),
        (["-n", "2", "--first", "-1"], "first must be 0 or more"),
        (["-n", "2", "--model", "MODEL", "--epochs", "4"], "drop --epochs"),
        (["-n", "2", "--model", "MODEL", "--vars", "v0"], "drop --vars"),
        (["-n", "2", "--model", "MODEL", "--config", "JOB"], "drop --engine"),
    ],
)
def test_bad_requests_are_refused_before_any_work(data, tmp_path, capsys, monkeypatch, extra, message):
    from geogpvae.api import GPVAEImputer

    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    out = tmp_path / "out.nc"
    job = tmp_path / "job.toml"
    job.write_text('engine = "hpa"\n')
    extra = [{"MODEL": str(data["model"]), "JOB": str(job)}.get(e, e) for e in extra]
    assert main(["simulate", str(data["grid"]), str(out), *extra, "-q"]) == 2
    assert message in _error_line(capsys)
    assert not out.exists()


def test_saved_model_refuses_another_field(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    assert main(["simulate", str(data["points"]), str(out), "-n", "2", "--model", str(data["model"]), "-q"]) == 2
    assert "realisations are drawn of the field the model was fitted on" in _error_line(capsys)
    assert not out.exists()


def test_impute_refuses_a_realisation_count(data, tmp_path, capsys):
    config = tmp_path / "job.toml"
    config.write_text("realizations = 5\n")
    out = tmp_path / "out.nc"
    assert main(["impute", str(data["grid"]), str(out), "--config", str(config), *TINY]) == 2
    assert "drawn by 'geogpvae simulate'" in _error_line(capsys)
    assert not out.exists()
