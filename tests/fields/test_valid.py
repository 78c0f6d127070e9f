"""CF valid bounds: read in the values' units, fills kept inside them, attributes unpacked."""

from __future__ import annotations

import netCDF4
import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.datasets.synthetic import make_gaussian_field
from geogpvae.fields.valid import clip_fills, undecoded_fills, valid_bounds


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



def test_the_clipping_warning_names_the_std_variable_and_no_log_model_for_a_bounded_fraction():
    # sea-ice concentration, 0-100 %: open water at 0 pulls fills below it
    data = np.array([0.0, -4.0, 50.0, 100.0])
    filled = np.array([False, True, False, False])
    with pytest.warns(UserWarning) as caught:
        clip_fills("sic", data, filled, {"valid_min": 0.0, "valid_max": 100.0}, {})
    text = str(caught[0].message)
    assert "sic_std is unchanged" in text and "v_std" not in text
    assert "transforms='log'" not in text  # a log model cannot keep fills under 100 %
    with pytest.warns(UserWarning, match=r"rain_std is unchanged.*transforms='log'"):
        clip_fills("rain", np.array([-1.0]), np.array([True]), {"valid_min": 0.0}, {})

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


def _model_output(tmp_path):
    """float32 SST whose missing_value 1e20 is a float64 attribute (no _FillValue), as model output
    often is: xarray leaves the float32 1e20 cells undecoded. Land (x < 3) and a patch at sea."""
    ds = make_gaussian_field((16, 14), missing=0.0, seed=2)
    sst = (ds.v0.values + 20.0).astype(np.float32)
    land, patch = np.zeros(sst.shape, bool), np.zeros(sst.shape, bool)
    land[:, :3], patch[5:9, 6:10] = True, True
    sst[land | patch] = np.float32(1e20)
    path = tmp_path / "model.nc"
    with netCDF4.Dataset(path, "w") as nc:
        for dim, size in ds.sizes.items():
            nc.createDimension(dim, size)
            nc.createVariable(dim, "f8", (dim,))[:] = ds[dim].values
        var = nc.createVariable("sst", "f4", tuple(ds.v0.dims))
        var.setncattr("missing_value", np.float64(1e20))
        var.set_auto_maskandscale(False)
        var[:] = sst
        nc.createVariable("sea", "i1", tuple(ds.v0.dims))[:] = (~land).astype(np.int8)
    return path, land, patch


def test_fill_cells_xarray_leaves_undecoded_are_missing_not_values(tmp_path):
    path, land, patch = _model_output(tmp_path)
    with xr.open_dataset(path) as opened:
        ds = opened.load()
    assert float(ds.sst.max()) > 1e19  # xarray's decoding missed them
    assert undecoded_fills(ds.sst, ds.sst.values).sum() == (land | patch).sum()
    assert not undecoded_fills(xr.DataArray(ds.sst.values), ds.sst.values).any()  # no fill declared: values
    with pytest.warns(UserWarning, match=r"sst: 16 values equal its fill value 1e\+20 in float32, which xarray left"):
        out = geogpvae.impute(ds, vars=["sst"], mask="sea", epochs=5, neighbours=6, progress=False, seed=0)
    seen = ~(land | patch)
    np.testing.assert_array_equal(out.sst.values[seen].view(np.uint32), ds.sst.values[seen].view(np.uint32))
    assert np.isfinite(out.sst.values[patch]).all() and float(out.sst.values[patch].max()) < 100
    assert (out.sst_imputed.values[patch] == 1).all() and np.isnan(out.sst.values[land]).all()
    target = tmp_path / "filled.nc"
    geogpvae.to_netcdf(out, target)
    with xr.open_dataset(target) as back:  # nothing reads back as a value of 1e20
        assert float(back.sst.max()) < 100 and back.sst.isnull().values[land].all()
