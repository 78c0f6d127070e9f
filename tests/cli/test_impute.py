"""``geogpvae impute`` end to end: gridded and scattered files, what the output records, the
warnings passed on in the command's words."""

from __future__ import annotations

import json
import warnings

import numpy as np
import xarray as xr
from cli_helpers import SMALL, TINY

from geogpvae.api import GPVAEImputer
from geogpvae.cli import main
from geogpvae.errors import TrainingWarning


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


def test_a_short_budget_is_warned_about_in_the_command_s_words(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    with warnings.catch_warnings():  # pyproject.toml ignores it in the rest of the suite
        warnings.simplefilter("always", TrainingWarning)
        assert main(["impute", str(data["grid"]), str(out), *TINY[:-1]]) == 0
    err = capsys.readouterr().err
    assert ("geogpvae: warning: --epochs 3 is under half of the 1000 epochs the default budget trains on 256 "
            "locations") in err and "leave --epochs out for the default budget" in err
    assert "epochs=" not in err and "None" not in err
