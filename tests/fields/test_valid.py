"""CF valid bounds: read in the values' units, fills kept inside them, attributes unpacked."""

from __future__ import annotations

import netCDF4
import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.datasets.synthetic import make_gaussian_field
from geogpvae.fields.valid import clip_fills, valid_bounds


def test_valid_bounds_in_the_values_units():
    assert valid_bounds({}, {}) == (None, None)
    assert valid_bounds({"valid_range": [0, 10], "valid_max": 5}, {}) == (0.0, 5.0)  # valid_max wins
    assert valid_bounds({"valid_min": -100}, {"scale_factor": 0.5, "add_offset": 3.0}) == (-47.0, None)
    assert valid_bounds({"valid_range": [0, 10]}, {"scale_factor": -2.0}) == (-20.0, 0.0)


def test_fills_outside_the_valid_range_are_set_to_the_nearest_bound_with_a_warning():
    data = np.array([0.5, -0.2, 0.3, 1.4, -3.0, 0.9])
    filled = np.array([False, True, True, True, False, False])
    with pytest.warns(UserWarning, match=r"rain: 1 below 0 and 1 above 1 of its 3 fills lay outside"):
        clip_fills("rain", data, filled, {"valid_range": np.array([0.0, 1.0])}, {})
    # fills moved to the bounds; observed values (even the refused kind) never touched
    np.testing.assert_array_equal(data, [0.5, 0.0, 0.3, 1.0, -3.0, 0.9])


def _rain():
    ds = make_gaussian_field((20, 20), missing=0.4, seed=1)
    v = np.maximum(ds.v0.values, 0.0) * 3  # zeros over about half the field
    return ds.assign(rain=(ds.v0.dims, v, {"valid_min": 0.0, "units": "mm"}))


def test_a_valid_min_is_kept_by_every_fill_and_readers_hide_none(tmp_path):
    ds = _rain()
    with pytest.warns(UserWarning, match=r"rain: \d+ below 0 of its \d+ fills"):
        out = geogpvae.impute(ds, vars=["rain"], epochs=30, neighbours=6, progress=False, seed=0)
    assert float(out.rain.min()) == 0.0
    seen = ds.rain.notnull().values
    np.testing.assert_array_equal(out.rain.values[seen], ds.rain.values[seen])
    target = tmp_path / "rain.nc"
    geogpvae.to_netcdf(out, target)
    with netCDF4.Dataset(target) as f:  # applies valid_min, unlike xarray
        assert np.ma.count_masked(f["rain"][:]) == 0


def test_predictions_at_new_sites_keep_the_valid_min_too():
    imp = geogpvae.GPVAEImputer(epochs=30, neighbours=6, progress=False, seed=0).fit(_rain()[["rain"]])
    grid = xr.Dataset(coords={"y": np.linspace(0, 1, 15), "x": np.linspace(0, 1, 15)})
    with pytest.warns(UserWarning, match=r"rain: \d+ below 0"):
        pred = imp.predict(grid)
    assert float(pred.rain.min()) == 0.0



def test_a_value_at_a_bound_given_in_codes_with_a_float32_step_is_inside():
    # sea-ice concentration as OSI SAF stores it: int32 codes, float32 step 0.01, valid_max 10000
    enc = {"dtype": np.dtype("int32"), "scale_factor": np.float32(0.01)}
    codes = xr.Variable(("c",), np.array([0, 5000, 10000], np.int32), attrs={"scale_factor": np.float32(0.01)})
    decoded = np.asarray(xr.conventions.decode_cf_variable("ice", codes).values)
    low, high = valid_bounds({"valid_min": 0, "valid_max": 10000}, enc)
    assert low == decoded[0] and high == float(decoded[2])  # 100 % is not above the bound
