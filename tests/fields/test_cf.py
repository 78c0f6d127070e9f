"""Tests of geogpvae.fields.cf: CF metadata of imputation results."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from geogpvae.fields import cf


def _field(dtype=np.float64, seed=0, shape=(4, 5), attrs=None):
    rng = np.random.default_rng(seed)
    values = rng.normal(10.0, 3.0, shape).astype(dtype)
    values[rng.random(shape) < 0.35] = np.nan
    values.flat[0] = np.nan  # at least one hole
    values.flat[1] = 7.25  # at least one observation
    da = xr.DataArray(
        values,
        dims=("y", "x"),
        coords={"y": np.arange(shape[0]) * 10.0, "x": np.arange(shape[1]) * 10.0},
        name="Cd",
        attrs={"units": "mg kg-1", "long_name": "cadmium concentration",
               "standard_name": "mass_fraction_of_cadmium_in_soil", "_FillValue": -9999.0,
               "comment": "topsoil"} if attrs is None else attrs,
    )
    da.encoding = {"dtype": np.dtype("int16"), "scale_factor": 0.01, "_FillValue": -32768,
                   "zlib": True, "source": "in.nc"}
    return da


def _model(da, value=3.5, sd=0.5):
    filled = np.full(da.shape, value, dtype=np.float64)
    std = np.full(da.shape, sd, dtype=np.float64)
    return filled, std


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 8: np.uint64, 2: np.uint16}[a.dtype.itemsize])


# ----------------------------------------------------------------------------- attributes
def test_attributes_exactly_as_specified():
    da = _field()
    out = cf.imputation_variables("Cd", da, *_model(da))
    assert list(out) == ["Cd", "Cd_std", "Cd_imputed"]
    v, s, f = out["Cd"], out["Cd_std"], out["Cd_imputed"]

    assert v.attrs == {
        "units": "mg kg-1",
        "long_name": "cadmium concentration",
        "standard_name": "mass_fraction_of_cadmium_in_soil",
        "comment": "topsoil",
        "ancillary_variables": "Cd_std Cd_imputed",
    }
    assert s.attrs == {
        "long_name": "standard deviation of cadmium concentration",
        "standard_name": "mass_fraction_of_cadmium_in_soil standard_error",
        "units": "mg kg-1",
    }
    assert set(f.attrs) == {"long_name", "standard_name", "flag_values", "flag_meanings"}
    assert f.attrs["long_name"] == "imputation flag of cadmium concentration"
    assert f.attrs["standard_name"] == "status_flag"
    assert f.attrs["flag_meanings"] == "observed imputed no_value"
    fv = f.attrs["flag_values"]
    assert isinstance(fv, np.ndarray) and fv.dtype == np.int8 and fv.tolist() == [0, 1, -127]
    assert f.dtype == np.int8
    assert f.encoding["_FillValue"] is None  # -127 is a flag value: plain xarray reads int8 back
    # packing of the input must not be applied to continuous predictions
    assert not {"dtype", "scale_factor", "_FillValue"} & set(v.encoding)
    assert v.encoding["zlib"] is True
    for arr in out.values():
        assert arr.dims == da.dims
        xr.testing.assert_identical(arr.coords.to_dataset(), da.coords.to_dataset())


def test_name_used_when_no_long_name_and_no_standard_name():
    da = _field(attrs={"units": "m"})
    out = cf.imputation_variables("depth_to_water", da.rename("depth_to_water"), *_model(da))
    assert out["depth_to_water_std"].attrs == {
        "long_name": "standard deviation of depth_to_water", "units": "m"}
    assert out["depth_to_water_imputed"].attrs["long_name"] == (
        "imputation flag of depth_to_water")
    assert out["depth_to_water"].attrs == {
        "units": "m", "ancillary_variables": "depth_to_water_std depth_to_water_imputed"}


def test_no_second_standard_name_modifier():
    da = _field(attrs={"standard_name": "air_temperature number_of_observations", "units": "1"})
    out = cf.imputation_variables("n", da, *_model(da))
    assert "standard_name" not in out["n_std"].attrs


def test_existing_ancillary_variables_merged():
    da = _field(attrs={"units": "K", "ancillary_variables": "Cd_qc Cd_std"})
    out = cf.imputation_variables("Cd", da, *_model(da))
    assert out["Cd"].attrs["ancillary_variables"] == "Cd_qc Cd_std Cd_imputed"


def test_transform_attribute_on_value_and_std_only():
    da = _field()
    out = cf.imputation_variables("Cd", da, *_model(da), transform="log")
    assert out["Cd"].attrs["geogpvae_transform"] == "log"
    assert out["Cd_std"].attrs["geogpvae_transform"] == "log"
    assert "geogpvae_transform" not in out["Cd_imputed"].attrs
    no = cf.imputation_variables("Cd", da, *_model(da))
    assert "geogpvae_transform" not in no["Cd"].attrs


def test_location_attributes_copied():
    da = _field(attrs={"units": "m", "grid_mapping": "crs"})
    da.encoding["coordinates"] = "lat lon"
    out = cf.imputation_variables("h", da, *_model(da))
    for key in ("h", "h_std", "h_imputed"):
        assert out[key].attrs["grid_mapping"] == "crs"
        assert out[key].encoding["coordinates"] == "lat lon"


def test_temperature_std_is_a_difference():
    da = _field(attrs={"units": "K", "standard_name": "air_temperature",
                       "units_metadata": "temperature: on_scale"})
    out = cf.imputation_variables("tas", da, *_model(da))
    assert out["tas"].attrs["units_metadata"] == "temperature: on_scale"
    assert out["tas_std"].attrs["units_metadata"] == "temperature: difference"


def test_explicit_attrs_override():
    da = _field()
    out = cf.imputation_variables("Cd", da, *_model(da), attrs={"units": "ppm"})
    assert out["Cd"].attrs == {"units": "ppm", "ancillary_variables": "Cd_std Cd_imputed"}
    assert out["Cd_std"].attrs["units"] == "ppm"


# ----------------------------------------------------------------------------- values
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_std_and_flags(dtype):
    da = _field(dtype)
    filled, std = _model(da, value=1.0 / 3.0, sd=0.25)
    out = cf.imputation_variables("Cd", da, filled, std)
    v, s, f = (out[k].values for k in ("Cd", "Cd_std", "Cd_imputed"))
    obs = ~np.isnan(da.values)
    assert v.dtype == dtype and s.dtype == dtype
    np.testing.assert_array_equal(_bits(v[obs]), _bits(da.values[obs]))
    assert np.all(v[~obs] == np.asarray(1.0 / 3.0, dtype=dtype))
    assert np.all(s[obs] == 0.0) and np.all(s[~obs] == 0.25)
    assert np.all(f[obs] == 0) and np.all(f[~obs] == 1)


def test_observed_values_bit_exact_even_for_odd_float32():
    # -0.0, denormals, extremes: copied from the original array, never through float64
    # arithmetic or a model round trip.
    odd = np.array([-0.0, 1e-45, -1e-40, np.finfo(np.float32).max, np.nan, 3.4028235e38,
                    1.17549435e-38, np.nan], dtype=np.float32)
    da = xr.DataArray(odd, dims="site", name="v")
    out = cf.imputation_variables("v", da, np.zeros(8), np.ones(8))
    obs = ~np.isnan(odd)
    np.testing.assert_array_equal(_bits(out["v"].values[obs]), _bits(odd[obs]))
    assert np.signbit(out["v"].values[0])


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
        elements={"allow_infinity": False},
    )
)
def test_property_observed_bits_preserved(values):
    da = xr.DataArray(values, dims=[f"d{i}" for i in range(values.ndim)], name="v")
    filled = np.full(values.shape, 2.0)
    std = np.full(values.shape, 0.5)
    out = cf.imputation_variables("v", da, filled, std)
    obs = ~np.isnan(values)
    v = out["v"].values
    assert v.dtype == values.dtype
    np.testing.assert_array_equal(_bits(v[obs]), _bits(values[obs]))
    assert not np.isnan(v).any()  # every hole inside the (whole) domain is filled
    assert np.array_equal(out["v_imputed"].values == 1, ~obs)


def test_integer_input_becomes_float64_exactly():
    vals = np.array([[1, 2**40 + 3], [-7, 2**31 - 1]], dtype=np.int64)
    da = xr.DataArray(vals, dims=("y", "x"), name="count", attrs={"units": "1"})
    out = cf.imputation_variables("count", da, np.zeros((2, 2)), np.ones((2, 2)))
    assert out["count"].dtype == np.float64
    assert out["count"].values.astype(np.int64).tolist() == vals.tolist()
    assert (out["count_imputed"].values == 0).all() and (out["count_std"].values == 0).all()


def test_integer_beyond_float64_precision_refused():
    da = xr.DataArray(np.array([2**53 + 1], dtype=np.int64), dims="i", name="n")
    with pytest.raises(ValueError, match="2\\*\\*53"):
        cf.imputation_variables("n", da, [0.0], [0.0])


def test_domain_mask():
    vals = np.array([1.0, np.nan, np.nan, 4.0, np.nan])
    inside = np.array([True, True, False, False, True])
    da = xr.DataArray(vals, dims="site", name="v")
    out = cf.imputation_variables("v", da, np.full(5, 9.0), np.full(5, 2.0), domain=inside)
    v, s, f = (out[k].values for k in ("v", "v_std", "v_imputed"))
    # observed cells are kept even outside the domain; holes outside stay empty
    np.testing.assert_array_equal(v, [1.0, 9.0, np.nan, 4.0, 9.0])
    np.testing.assert_array_equal(s, [0.0, 2.0, np.nan, 0.0, 2.0])
    assert f.tolist() == [0, 1, -127, 0, 1]
    assert np.array_equal(np.isnan(v), np.isnan(s))
    assert np.array_equal(np.isnan(v), f == cf.FLAG_FILL_VALUE)


def test_explicit_imputed_mask_and_unfilled_hole():
    vals = np.array([1.0, np.nan, np.nan])
    da = xr.DataArray(vals, dims="site", name="v")
    out = cf.imputation_variables("v", da, [0.0, 5.0, np.nan], [0.0, 1.0, np.nan],
                                  imputed=[False, True, False])
    assert out["v_imputed"].values.tolist() == [0, 1, -127]
    np.testing.assert_array_equal(out["v"].values, [1.0, 5.0, np.nan])


def test_dataarray_inputs_in_other_dim_order():
    da = _field()
    filled = xr.DataArray(np.full(da.shape, 1.5).T, dims=("x", "y"))
    std = xr.DataArray(np.full(da.shape, 0.1).T, dims=("x", "y"))
    out = cf.imputation_variables("Cd", da, filled, std)
    assert (out["Cd"].values[np.isnan(da.values)] == 1.5).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"imputed": "observed"}, "observed cells"),
        ({"filled": np.nan}, "non-finite value"),
        ({"std": -1.0}, "negative std"),
        ({"std": np.inf}, "non-finite or negative std"),
        ({"domain": "outside"}, "outside the domain"),
        ({"shape": True}, "shape"),
    ],
)
def test_invalid_inputs(kwargs, match):
    vals = np.array([1.0, np.nan, 3.0])
    da = xr.DataArray(vals, dims="site", name="v")
    filled = np.full(3, kwargs.get("filled", 2.0))
    std = np.full(3, kwargs.get("std", 1.0))
    imputed = None
    domain = None
    if kwargs.get("imputed") == "observed":
        imputed = [True, True, False]
    if kwargs.get("domain") == "outside":
        imputed = [False, True, False]
        domain = [True, False, True]
    if kwargs.get("shape"):
        filled = np.full(4, 2.0)
    with pytest.raises(ValueError, match=match):
        cf.imputation_variables("v", da, filled, std, imputed, domain)


def test_non_numeric_refused():
    da = xr.DataArray(np.array(["a", "b"]), dims="i", name="s")
    with pytest.raises(TypeError):
        cf.imputation_variables("s", da, [0.0, 0.0], [0.0, 0.0])


def test_input_not_modified():
    da = _field(np.float32)
    before = da.copy(deep=True)
    enc = copy.deepcopy(da.encoding)
    cf.imputation_variables("Cd", da, *_model(da), transform="log")
    xr.testing.assert_identical(da, before)
    assert da.encoding == enc


# ----------------------------------------------------------------------------- flags
def test_restore_flag_variables_after_decoding():
    flag = np.array([0, 1, -127], dtype=np.int8)
    decoded = xr.Dataset({"v_imputed": ("i", np.array([0.0, 1.0, np.nan], dtype=np.float32),
                                        {"flag_values": np.array([0, 1], np.int8),
                                         "flag_meanings": "observed imputed"})})
    decoded["v_imputed"].encoding = {"dtype": np.dtype("int8"), "_FillValue": np.int8(-127)}
    decoded["other"] = ("i", np.array([1.0, np.nan, 2.0], dtype=np.float32))
    decoded["other"].encoding = {"dtype": np.dtype("int8"), "_FillValue": np.int8(-127)}
    out = cf.restore_flag_variables(decoded)
    assert out["v_imputed"].dtype == np.int8
    assert out["v_imputed"].values.tolist() == flag.tolist()
    # an earlier version's flag (fill -127) comes back as outputs are made now: -127 a flag value
    assert out["v_imputed"].encoding["_FillValue"] is None
    assert out["v_imputed"].attrs["flag_values"].tolist() == [0, 1, -127]
    assert out["v_imputed"].attrs["flag_meanings"] == "observed imputed no_value"
    assert out["other"].dtype == np.float32  # not a flag variable: left alone
    assert decoded["v_imputed"].dtype == np.float32  # input untouched


# ----------------------------------------------------------------------------- dask-backed predictions
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_dask_backed_predictions_give_the_same_variables_block_by_block(dtype):
    da_mod = pytest.importorskip("dask.array")
    values = _field(np.float64, seed=3, shape=(7, 9))
    if dtype is np.int32:  # integers: every cell observed but those outside the domain
        values = xr.DataArray(np.arange(63, dtype=dtype).reshape(7, 9), dims=("y", "x"), name="n")
    else:
        values = values.astype(dtype)
    values.encoding = {"zlib": True, "chunksizes": (7, 3), "source": "in.nc"}
    rng = np.random.default_rng(0)
    filled, std = rng.normal(10, 3, values.shape), rng.uniform(0.1, 1, values.shape)
    domain = np.ones(values.shape, dtype=bool)
    domain[0, :4] = False
    eager = cf.imputation_variables("v", values, filled, std, domain=domain, transform="log")
    lazy = cf.imputation_variables("v", values, da_mod.from_array(filled, chunks=(3, 4)), std, domain=domain,
                                   transform="log")
    for name, var in eager.items():
        assert lazy[name].chunks == ((3, 3, 1), (4, 4, 1)), name
        assert lazy[name].dtype == var.dtype
        xr.testing.assert_identical(lazy[name].compute(), var)
        assert lazy[name].encoding == var.encoding


def test_dask_backed_predictions_are_checked_when_computed():
    da_mod = pytest.importorskip("dask.array")
    da = _field(shape=(6, 8))
    filled, std = _model(da)
    filled[da.isnull().values.nonzero()[0][0], da.isnull().values.nonzero()[1][0]] = np.inf
    out = cf.imputation_variables("Cd", da, da_mod.from_array(filled, chunks=3), std)  # no work yet
    with pytest.raises(ValueError, match="non-finite value"):
        out["Cd"].compute()
    with pytest.raises(ValueError, match="has shape"):
        cf.imputation_variables("Cd", da, da_mod.zeros((6, 7), chunks=3), std)
