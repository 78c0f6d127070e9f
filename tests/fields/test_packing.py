"""A packed input (int16 codes with scale_factor) keeps its packing only where that is harmless."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.fields import cf
from geogpvae.fields.packing import STEP_SHARE, kept_fill, kept_packing
from geogpvae.fields.valid import unpacked_bounds

ERA5 = {"dtype": np.dtype("int16"), "scale_factor": 0.002, "add_offset": 280.0,
        "_FillValue": np.int16(-32767), "missing_value": np.int16(-32767)}


def _decoded(codes: np.ndarray, encoding=ERA5) -> np.ndarray:
    """Values as xarray decodes them from ``codes``."""
    raw = xr.Variable(("cell",), codes.astype(encoding["dtype"]),
                      attrs={k: v for k, v in encoding.items() if k != "dtype"})
    return np.asarray(xr.conventions.decode_cf_variable("v", raw).values)


def _case(n=200, hole_every=4, seed=0):
    rng = np.random.default_rng(seed)
    data = _decoded(rng.integers(-30000, 30000, n))
    observed = np.ones(n, bool)
    observed[::hole_every] = False
    imputed = ~observed
    data[imputed] = 280.0 + rng.normal(0, 20, imputed.sum())  # continuous fills
    std = np.where(imputed, 0.5, 0.0)
    return data, std, observed, imputed


def test_era5_packing_kept_where_its_step_is_far_below_the_fills_std():
    data, std, observed, imputed = _case()
    packing = kept_packing(ERA5, data, std, observed, imputed)
    assert packing is not None and packing["dtype"] == np.dtype("int16")
    assert packing["scale_factor"] == 0.002 and packing["add_offset"] == 280.0
    # the step must be at most a tenth of the smallest std of a fill
    std[np.flatnonzero(imputed)[3]] = 0.002 / STEP_SHARE * 0.99
    assert kept_packing(ERA5, data, std, observed, imputed) is None
    std[np.flatnonzero(imputed)[3]] = 0.002 / STEP_SHARE
    assert kept_packing(ERA5, data, std, observed, imputed) is not None


def test_codes_widen_to_int32_out_of_range_and_never_land_on_the_fill_value():
    data, std, observed, imputed = _case()
    first = np.flatnonzero(imputed)[0]
    data[first] = 280.0 + 0.002 * 40000  # beyond int16's codes
    assert kept_packing(ERA5, data, std, observed, imputed)["dtype"] == np.dtype("int32")
    data[first] = 280.0 + 0.002 * -32767  # a fill whose code is the fill value: read back as missing
    assert kept_packing(ERA5, data, std, observed, imputed) is None


def test_no_packing_kept_for_unpacked_or_unsigned_or_inexact_inputs():
    data, std, observed, imputed = _case()
    assert kept_packing({"dtype": np.dtype("int16")}, data, std, observed, imputed) is None
    # whole-number counts stored as plain int16: fills are not whole numbers, whatever their std
    counts = np.where(observed, np.round(data - 200.0), data - 200.0)
    assert kept_packing({"dtype": np.dtype("int16")}, counts, std * 100, observed, imputed) is None
    assert kept_packing({**ERA5, "_Unsigned": "true"}, data, std, observed, imputed) is None
    assert kept_packing({"dtype": np.dtype("float32"), "scale_factor": 0.002}, data, std,
                        observed, imputed) is None
    off_grid = data.copy()
    off_grid[np.flatnonzero(observed)[5]] += 0.0007  # an observed value the packing cannot hold
    assert kept_packing(ERA5, off_grid, std, observed, imputed) is None


def test_dask_backed_predictions_are_written_unpacked_with_nan_as_fill():
    """Whether a packing or a fill value can be kept depends on every value: a lazy output keeps neither."""
    pytest.importorskip("dask")
    data, std, observed, _ = _case(n=60)
    values = xr.DataArray(np.where(observed, data, np.nan).reshape(6, 10), dims=("lat", "lon"))
    values.encoding = dict(ERA5)
    eager = cf.imputation_variables("t2m", values, data.reshape(6, 10), std.reshape(6, 10))
    lazy = cf.imputation_variables("t2m", values, xr.DataArray(data.reshape(6, 10), dims=values.dims).chunk(
        {"lat": 3}), std.reshape(6, 10))
    assert eager["t2m"].encoding["dtype"] == np.dtype("int16")  # in memory the packing is kept
    for key in ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value"):
        assert key not in lazy["t2m"].encoding and key not in lazy["t2m_std"].encoding, key
    np.testing.assert_array_equal(lazy["t2m"].values, eager["t2m"].values)
    np.testing.assert_array_equal(lazy["t2m_std"].values, eager["t2m_std"].values)


def test_imputation_variables_carry_the_packing_and_a_float32_std():
    data, std, observed, _ = _case(n=60)
    values = xr.DataArray(np.where(observed, data, np.nan).reshape(6, 10), dims=("lat", "lon"))
    values.encoding = dict(ERA5)
    out = cf.imputation_variables("t2m", values, data.reshape(6, 10), std.reshape(6, 10))
    assert out["t2m"].encoding["dtype"] == np.dtype("int16")
    assert out["t2m"].encoding["scale_factor"] == 0.002
    assert out["t2m_std"].encoding["dtype"] == np.dtype("float32")
    assert out["t2m"].dtype == np.float64  # in memory, the decoded values as before


def test_a_packed_file_comes_back_packed_with_its_observed_values_exact(tmp_path):
    rng = np.random.default_rng(3)
    lat, lon = np.linspace(60, 40, 14), np.linspace(-10, 12, 16)
    field = 285 + 8 * np.cos(np.radians(lat))[:, None] * np.sin(np.radians(4 * lon))[None, :]
    field = field + rng.normal(0, 0.3, field.shape)
    field[rng.random(field.shape) < 0.3] = np.nan
    codes_range = np.array([-5000, 5000], np.int16)  # CF: a packed variable's bounds are codes
    ds = xr.Dataset({"t2m": (("lat", "lon"), field, {"units": "K", "valid_range": codes_range})},
                    coords={"lat": ("lat", lat, {"units": "degrees_north"}),
                            "lon": ("lon", lon, {"units": "degrees_east"})})
    source = tmp_path / "era5.nc"
    ds.to_netcdf(source, encoding={"t2m": {"dtype": "int16", "scale_factor": 0.002,
                                           "add_offset": 285.0, "_FillValue": -32767}})
    with geogpvae.open_dataset(source) as opened:
        given = opened.load()
    out = geogpvae.impute(given, vars=["t2m"], epochs=40, neighbours=6, progress=False, seed=0)
    target = tmp_path / "filled.nc"
    geogpvae.to_netcdf(out, target)
    with xr.open_dataset(target, decode_cf=False) as raw:
        assert raw.t2m.dtype == np.int16 and raw.t2m_std.dtype == np.float32
    with xr.open_dataset(target) as back:
        seen = given.t2m.notnull().values
        np.testing.assert_array_equal(back.t2m.values[seen], given.t2m.values[seen])  # bit for bit
        holes = ~seen
        assert back.t2m.notnull().values[holes].all()
        np.testing.assert_allclose(back.t2m.values[holes], out.t2m.values[holes], rtol=0, atol=0.001)
        assert float(out.t2m_std.values[holes].min()) >= 0.002 / STEP_SHARE
        np.testing.assert_array_equal(back.t2m.attrs["valid_range"], codes_range)
    # predictions are never packed: their bounds are in kelvin
    imp = geogpvae.GPVAEImputer(epochs=40, neighbours=6, progress=False, seed=0).fit(given)
    pred = imp.predict(given[["lat", "lon"]].isel(lat=slice(0, 3)))
    np.testing.assert_allclose(pred.t2m.attrs["valid_range"], [275.0, 295.0])
    assert pred.t2m.notnull().all()


def test_a_packing_too_coarse_for_the_fills_is_dropped():
    data, std, observed, imputed = _case()
    std[imputed] = 0.001  # half the step
    values = xr.DataArray(np.where(observed, data, np.nan), dims=("cell",))
    values.encoding = dict(ERA5)
    out = cf.imputation_variables("t2m", values, data, std)
    assert not {"dtype", "scale_factor", "add_offset"} & set(out["t2m"].encoding)
    assert "dtype" not in out["t2m_std"].encoding


def test_valid_bounds_given_in_codes_follow_the_values_when_the_packing_is_dropped():
    data, std, observed, imputed = _case()
    std[imputed] = 0.001  # too small for the step: the packing goes
    values = xr.DataArray(np.where(observed, data, np.nan), dims=("cell",),
                          attrs={"valid_range": np.array([-32000, 32000], np.int16), "units": "K"})
    values.encoding = dict(ERA5)
    v = cf.imputation_variables("t2m", values, data, std)["t2m"]
    np.testing.assert_array_equal(v.attrs["valid_range"], [280.0 - 64.0, 280.0 + 64.0])
    assert v.attrs["valid_range"].dtype == np.float64
    std[imputed] = 0.5  # kept packing: the bounds stay in codes
    kept = cf.imputation_variables("t2m", values, data, std)["t2m"]
    np.testing.assert_array_equal(kept.attrs["valid_range"], [-32000, 32000])
    # a negative step swaps the ends; unpacked inputs keep theirs
    swapped = unpacked_bounds({"valid_min": 0, "valid_max": 10}, {"scale_factor": -2.0}, np.dtype("float32"))
    assert (swapped["valid_min"], swapped["valid_max"]) == (-20.0, 0.0)
    assert unpacked_bounds({"valid_min": 3}, {"dtype": "int16"}, np.dtype("float64")) == {"valid_min": 3}


def test_cells_left_empty_read_back_as_missing_when_the_input_had_no_fill_value(tmp_path):
    data, std, observed, _ = _case(n=60)
    values = xr.DataArray(np.where(observed, data, np.nan), dims=("cell",))
    values.encoding = {k: v for k, v in ERA5.items() if k not in ("_FillValue", "missing_value")}
    domain = np.ones(60, bool)
    domain[:8] = False  # outside the domain: holes there stay empty (land)
    out = cf.imputation_variables("t2m", values, data, std, domain=domain)
    assert out["t2m"].encoding["_FillValue"] == np.iinfo(np.int16).min
    geogpvae.to_netcdf(xr.Dataset(out), tmp_path / "t2m.nc")
    back = xr.open_dataset(tmp_path / "t2m.nc")
    empty = ~observed & ~domain
    assert empty.any() and back.t2m.isnull().values[empty].all()
    np.testing.assert_array_equal(back.t2m.values[observed], data[observed])


def test_a_fill_xarray_would_code_as_the_fill_value_drops_the_packing():
    # float32 values are encoded in float32 by xarray: a fill just above -32767 codes can land
    # on the fill value -32768 and would read back as missing
    enc = {"dtype": np.dtype("int16"), "scale_factor": np.float32(0.001), "add_offset": np.float32(20.0),
           "_FillValue": np.int16(-32768)}
    step = np.spacing(np.float32(12.767))
    candidates = (np.float32(20 - 32.767) + np.arange(-2000, 2000) * step).astype(np.float32)
    coded = np.asarray(xr.conventions.encode_cf_variable(xr.Variable(("c",), candidates, encoding=dict(enc))).values)
    fill = candidates[coded == -32768][-1]  # the largest value xarray codes as the fill value
    observed_codes = xr.Variable(("c",), np.array([-19000, -18000, -17000], np.int16),
                                 attrs={k: v for k, v in enc.items() if k != "dtype"})
    seen = np.asarray(xr.conventions.decode_cf_variable("v", observed_codes).values)
    data = np.r_[seen, fill].astype(np.float32)
    observed = np.array([True, True, True, False])
    assert kept_packing(enc, data, np.full(4, np.float32(0.5)), observed, ~observed) is None
    ok = data.copy()
    ok[3] = np.float32(10.0)
    assert kept_packing(enc, ok, np.full(4, np.float32(0.5)), observed, ~observed) is not None


def test_a_negative_step_turns_a_lower_bound_in_codes_into_an_upper_one():
    out = unpacked_bounds({"valid_min": np.int16(0)}, {"scale_factor": -0.5, "add_offset": 10.0}, np.dtype("float64"))
    assert out == {"valid_max": 10.0}


def test_an_unpacked_float32_file_keeps_its_fill_value_in_the_imputed_file(tmp_path):
    rng = np.random.default_rng(4)
    y, x = np.arange(8.0), np.arange(11.0)
    field = (np.sin(x / 3)[None, :] + np.cos(y / 4)[:, None]).astype(np.float32)
    field[rng.random(field.shape) < 0.25] = np.nan
    land = np.zeros(field.shape, bool)
    land[:2, :3] = True  # outside the domain: stays empty, written as -999
    field[land] = np.nan
    source = tmp_path / "sst.nc"
    xr.Dataset({"sst": (("y", "x"), field)}, coords={"y": y, "x": x}).to_netcdf(
        source, encoding={"sst": {"dtype": "float32", "_FillValue": np.float32(-999.0)}})
    with geogpvae.open_dataset(source) as opened:
        given = opened.load()
    mask = xr.DataArray(~land, dims=("y", "x"), coords={"y": y, "x": x})
    out = geogpvae.impute(given, vars=["sst"], mask=mask, epochs=5, neighbours=4, progress=False, seed=0)
    target = tmp_path / "filled.nc"
    geogpvae.to_netcdf(out, target)
    with xr.open_dataset(target, decode_cf=False) as raw:
        for name in ("sst", "sst_std"):
            assert raw[name].dtype == np.float32 and raw[name].attrs["_FillValue"] == np.float32(-999.0)
            assert (raw[name].values[land] == -999.0).all()
    with xr.open_dataset(target) as back:
        seen = given.sst.notnull().values
        np.testing.assert_array_equal(back.sst.values[seen], given.sst.values[seen])
        assert back.sst.isnull().values[land].all() and back.sst.notnull().values[~land].all()
        assert back.sst_std.isnull().values[land].all()


def test_a_fill_value_is_kept_only_when_no_value_would_read_back_as_missing():
    values = np.array([1.0, 2.5, np.nan])
    f32 = np.dtype(np.float32)
    assert kept_fill({"_FillValue": np.float32(-999)}, f32, values) == {"_FillValue": np.float32(-999)}
    assert kept_fill({"missing_value": -999.0}, f32, values) == {"_FillValue": -999.0, "missing_value": -999.0}
    assert kept_fill({"_FillValue": np.float32(-999)}, f32, np.array([1.0, -999.0])) == {}  # a value equal to it
    assert kept_fill({"_FillValue": np.nan}, f32, values) == {}  # NaN is the default anyway
    assert kept_fill({"_FillValue": -999.0, "missing_value": 1e20}, f32, values) == {}  # two of them
    one = kept_fill({"_FillValue": np.float32(1e20), "missing_value": 1e20}, f32, values)  # one, in two precisions
    assert one == {"_FillValue": np.float32(1e20), "missing_value": np.float32(1e20)}
    assert kept_fill({"_FillValue": np.int8(-1), "_Unsigned": "true"}, f32, values) == {"_FillValue": 255.0}
    assert kept_fill({"_FillValue": np.int8(-1)}, f32, values) == {"_FillValue": -1.0}  # signed: -1 is -1
    assert kept_fill({"_FillValue": 0.1}, f32, values) == {}  # not the same number in float32
    assert kept_fill({"_FillValue": np.int16(-9999)}, np.dtype(np.float64), values) == {"_FillValue": -9999.0}
    assert kept_fill({}, f32, values) == {}
    assert kept_fill({"_FillValue": np.int16(-32767), "scale_factor": 0.01}, f32, values) == {}  # a code
