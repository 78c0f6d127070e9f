"""A corpus of awkward and malformed inputs through the xarray API.

Every case asserts its exact outcome: either a result whose observed values are bit-for-bit
those of the input (and an input left unmodified), or a specific error type whose message
names the variable or coordinate and says what to do. Errors must come before training: the
engine's training loop is replaced by one that fails the test if it is ever reached.

Fields are tiny (at most a few hundred cells) and trained for one epoch, so the whole corpus
runs in seconds.
"""

from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import geogpvae
from geogpvae.datasets import make_gaussian_field
from geogpvae.engine.core import GPVAEEngine
from geogpvae.errors import CoordinateWarning, InputError
from geogpvae.fields.stacking import prepare_field

KW = {"neighbours": 4, "epochs": 1, "progress": False}


# --------------------------------------------------------------------------- helpers
def gauss(shape: tuple[int, ...] = (8, 8), seed: int = 0) -> xr.Dataset:
    return make_gaussian_field(shape, seed=seed)


@pytest.fixture
def no_training(monkeypatch):
    """Make any start of training fail the test: bad input must be refused before it."""

    def boom(*args, **kwargs):
        raise AssertionError("training started on input that should have been refused")

    monkeypatch.setattr(sys.modules[GPVAEEngine.__module__], "train", boom)


def assert_observed_exact(ds_in: xr.Dataset, out: xr.Dataset, names: list[str]) -> None:
    """Observed values come back bit-for-bit; holes inside the grid are filled and finite."""
    for name in names:
        src = np.asarray(ds_in[name].values)
        got = np.asarray(out[name].transpose(*ds_in[name].dims).values)
        observed = ~np.isnan(src.astype(np.float64))
        back = src[observed].astype(got.dtype)
        assert np.array_equal(got[observed], back), name
        assert got[observed].tobytes() == back.tobytes(), name
        assert np.isfinite(got).all(), f"{name} has holes left"
        flags = np.asarray(out[name + "_imputed"].transpose(*ds_in[name].dims).values)
        assert np.array_equal(flags, np.where(observed, 0, 1)), name


def run_ok(ds: xr.Dataset, names: list[str], **kw) -> xr.Dataset:
    before = ds.copy(deep=True)
    out = geogpvae.impute(ds, **{**KW, **kw})
    xr.testing.assert_identical(ds, before)  # the input is not modified
    for name in ds.data_vars:  # values, not only metadata
        assert np.asarray(ds[name].values).tobytes() == np.asarray(before[name].values).tobytes()
    assert_observed_exact(ds, out, names)
    return out


# --------------------------------------------------------------------------- accepted inputs
def _cast(dtype):
    def make():
        ds = gauss()
        if np.issubdtype(np.dtype(dtype), np.integer):
            ds["v0"] = (ds.v0.fillna(0) * 100).astype(dtype)  # all observed
            return ds, {"vars": ["v0", "v1"]}, ["v0", "v1"]
        ds["v0"] = ds.v0.astype(dtype)
        return ds, {}, ["v0", "v1", "v2"]

    return make


def _descending():
    return gauss().isel(x=slice(None, None, -1), y=slice(None, None, -1)), {}, ["v0", "v1"]


def _non_monotonic():
    return gauss().isel(x=[0, 3, 1, 2, 7, 5, 4, 6]), {}, ["v0", "v1"]


def _uneven():
    ds = gauss()
    return ds.assign_coords(x=ds.x ** 2), {}, ["v0", "v1", "v2"]


def _duplicated_sites():
    rng = np.random.default_rng(1)
    x, y = rng.uniform(size=30), rng.uniform(size=30)
    x[5], y[5] = x[4], y[4]
    x[9], y[9] = x[8], y[8]
    v = rng.normal(size=30)
    v[::4] = np.nan
    v[5] = v[4] + 1.0  # two different values at one place
    ds = xr.Dataset({"v": ("site", v)}, coords={"x": ("site", x), "y": ("site", y)})
    return ds, {}, ["v"]


def _constant():
    ds = gauss()
    ds["v0"] = ds.v0.where(ds.v0.isnull(), 3.25)
    return ds, {}, ["v0", "v1", "v2"]


def _single_observed():
    ds = gauss()
    v = np.full((8, 8), np.nan)
    v[2, 5] = 1.5
    ds["v0"] = (("y", "x"), v)
    return ds, {}, ["v0", "v1"]


def _lonlat(lon, lat):
    def make():
        ds = gauss().rename(x="lon", y="lat").assign_coords(lon=lon, lat=lat)
        ds.lon.attrs["units"] = "degrees_east"
        ds.lat.attrs["units"] = "degrees_north"
        return ds, {}, ["v0", "v1"]

    return make


def _one_point_dim():
    return gauss().expand_dims(z=[5.0]), {}, ["v0", "v1"]


def _five_d():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(2, 2, 2, 3, 4))
    v[v > 0.8] = np.nan
    coords = {d: np.arange(n, dtype=float) for d, n in zip("abcyx", v.shape)}
    return xr.Dataset({"v": (tuple("abcyx"), v)}, coords=coords), {}, ["v"]


def _all_nan_layer():
    ds = gauss().expand_dims(z=[1.0, 2.0, 3.0]).copy(deep=True)
    ds["v0"][1] = np.nan
    ds["v1"][:, 3] = np.nan
    return ds, {}, ["v0", "v1", "v2"]


def _dask():
    pytest.importorskip("dask")
    return gauss().chunk({"x": 3}), {}, ["v0", "v1", "v2"]


def _extreme_but_finite():
    ds = gauss()
    ds["v0"] = ds.v0 * 1e100
    ds["v1"] = ds.v1 * 1e-100
    return ds, {}, ["v0", "v1", "v2"]


def _time_axis():
    ds = gauss().rename(y="time").assign_coords(time=pd.date_range("2001-01-01", periods=8))
    return ds, {}, ["v0", "v1"]


def _log_positive():
    ds = gauss()
    ds["v0"] = np.exp(ds.v0)
    return ds, {"transforms": {"v0": "log"}}, ["v0", "v1"]


def _masked_nan_coordinate():
    ds = gauss()
    x = ds.x.values.copy()
    x[7] = np.nan
    mask = xr.DataArray(np.arange(8) < 7, dims="x")
    return ds.assign_coords(x=x), {"mask": mask, "vars": ["v0"]}, []


def _valid_range_respected():
    ds = gauss()
    ds.v0.attrs["valid_range"] = np.array([-10.0, 10.0])
    ds.v0.attrs["missing_value"] = -9999.0  # declared, but no cell holds it
    return ds, {}, ["v0", "v1", "v2"]


ACCEPTED = {
    "float16": _cast(np.float16),
    "float32": _cast(np.float32),
    "int16 all observed": _cast(np.int16),
    "int64 all observed": _cast(np.int64),
    "uint8 all observed": _cast(np.uint8),
    "descending coordinates": _descending,
    "non-monotonic coordinate": _non_monotonic,
    "uneven spacing": _uneven,
    "duplicated sites": _duplicated_sites,
    "constant variable": _constant,
    "single observed value": _single_observed,
    "dateline": _lonlat(np.array([170, 175, 180, -175, -170, -165, -160, -155.0]),
                        np.linspace(-10, 10, 8)),
    "north pole": _lonlat(np.linspace(0, 315, 8), np.linspace(55, 90, 8)),
    "south pole": _lonlat(np.linspace(-180, 135, 8), np.linspace(-90, -55, 8)),
    "one-point dim": _one_point_dim,
    "5-D": _five_d,
    "all-NaN layers": _all_nan_layer,
    "dask chunks": _dask,
    "values 1e100 and 1e-100": _extreme_but_finite,
    "time axis": _time_axis,
    "log transform": _log_positive,
    "NaN coordinate outside mask": _masked_nan_coordinate,
    "valid_range and unused missing_value": _valid_range_respected,
}


@pytest.mark.parametrize("case", list(ACCEPTED), ids=list(ACCEPTED))
def test_accepted(case):
    ds, kw, names = ACCEPTED[case]()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoordinateWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        out = run_ok(ds, names, **kw)
    if case == "NaN coordinate outside mask":  # observed values outside the domain kept
        v = ds.v0.values
        got = out.v0.values
        outside = ~np.isnan(v[:, 7])
        assert np.array_equal(got[outside, 7], v[outside, 7])
        assert np.isnan(got[~outside, 7]).all()
        assert_observed_exact(ds.isel(x=slice(0, 7)), out.isel(x=slice(0, 7)), ["v0"])


@pytest.mark.parametrize("log", [False, True])
def test_constant_variable_filled_with_its_value_and_no_spread(log):
    # a variable with one value everywhere it is seen: its gaps get that value, std 0, and the
    # other variables are imputed as usual (before: gaps filled some tenths off, own units)
    ds, _, names = _constant()
    with pytest.warns(UserWarning, match=r"v0: all \d+ observed values are 3.25: its gaps are filled"):
        out = run_ok(ds, names, transforms={"v0": "log"} if log else None)
    gaps = ds.v0.isnull().values
    assert gaps.any()
    assert (out.v0.values[gaps] == 3.25).all()
    assert (out.v0_std.values[gaps] == 0).all()
    assert (out.v1_std.values[ds.v1.isnull().values] > 0).all()


def test_negative_constant_filled_without_a_numeric_warning():
    # a constant below zero (not log-modelled) must not reach a logarithm on its way out
    ds = gauss()
    ds["v0"] = ds.v0.where(ds.v0.isnull(), -2.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(UserWarning, match="observed values are -2.5"):
            out = run_ok(ds, ["v0", "v1"])
    assert (out.v0.values[ds.v0.isnull().values] == -2.5).all()


def test_one_or_two_observed_values_warn_and_keep_a_spread():
    # one value says nothing about a variable's spread: no std-0 certainty, and a warning
    ds = gauss()
    v = np.full((8, 8), np.nan)
    v[2, 5] = -1.5
    ds["v0"] = (("y", "x"), v)
    with pytest.warns(UserWarning, match=r"v0 has only 1 observed value\(s\), too few to learn its spread"):
        out = run_ok(ds, ["v0", "v1"])
    assert (out.v0_std.values[np.isnan(v)] > 0).all()


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("unit", [1e-170, 1e170])
def test_tiny_and_huge_units_keep_their_spread(unit, log):
    # squares of such values leave float64's range; fills and spreads must scale with the unit
    ds = gauss()
    kw = {"transforms": {"v0": "log"}} if log else {}
    if log:
        ds = ds.assign(v0=np.exp(ds.v0))
    ref = run_ok(ds, ["v0"], **kw)
    scaled = ds.assign(v0=ds.v0 * unit)
    out = run_ok(scaled, ["v0"], **kw)
    gaps = ds.v0.isnull().values
    np.testing.assert_allclose(out.v0.values[gaps] / unit, ref.v0.values[gaps], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.v0_std.values[gaps] / unit, ref.v0_std.values[gaps], rtol=1e-3)


def test_object_and_complex_variables_are_skipped_by_name():
    ds = gauss()
    ds["label"] = (("y", "x"), np.full((8, 8), "a", dtype=object))
    ds["wave"] = ds.v2.astype(np.complex128) * (1 + 1j)
    ds["wet"] = ds.v0 > 0
    before = ds.copy(deep=True)
    with pytest.warns(CoordinateWarning) as record:
        out = geogpvae.impute(ds, **KW)
    text = " ".join(str(w.message) for w in record)
    assert re.search(r"not imputing label \(object, text such as 'a'\), wave \(complex128\), wet \(bool\)", text)
    xr.testing.assert_identical(ds, before)
    xr.testing.assert_identical(out.label, ds.label)
    xr.testing.assert_identical(out.wave, ds.wave)
    assert "wave_std" not in out and "label_imputed" not in out
    assert_observed_exact(ds, out, ["v0", "v1", "v2"])


# --------------------------------------------------------------------------- refused inputs
def _outlier(value, n=1):
    def make():
        ds = gauss()
        ds["v1"][0, 0] = value
        if n > 1:
            ds["v1"][0, 3] = -value
        return ds, {}
    return make


def _with_attrs(**attrs):
    def make():
        ds = gauss()
        ds["v1"] = ds.v1.fillna(-9999.0)
        ds.v1.attrs.update(attrs)
        return ds, {}
    return make


def _packed_raw():
    ds = gauss()
    ds["v1"] = (ds.v1.fillna(0) / 0.01).round().astype(np.int16)
    ds.v1.attrs.update(scale_factor=0.01, add_offset=0.0)
    return ds, {}


def _outside_valid_range():
    ds = gauss()
    ds["v1"][2, 2] = 99.0
    ds.v1.attrs["valid_max"] = 50.0
    return ds, {}


def _complex_named():
    ds = gauss()
    ds["v1"] = ds.v1.astype(np.complex64)
    return ds, {"vars": ["v0", "v1"]}


def _nat_time():
    t = pd.date_range("2000-01-01", periods=8).values.copy()
    t[3] = np.datetime64("NaT")
    return gauss().rename(y="time").assign_coords(time=t), {}


def _nan_coordinate():
    ds = gauss()
    x = ds.x.values.copy()
    x[2] = np.nan
    return ds.assign_coords(x=x), {}


def _inf_value():
    ds = gauss()
    ds["v1"][1, 1] = np.inf
    return ds, {}


def _all_nan_variable():
    ds = gauss()
    ds["v1"][:] = np.nan
    return ds, {}


def _latitude_out_of_range():
    ds, kw, _ = _lonlat(np.linspace(0, 70, 8), np.linspace(80, 100, 8))()
    return ds, kw


def _named(ds_change, **kw):
    def make():
        return ds_change(gauss()), kw
    return make


def _option(**kw):
    def make():
        return gauss(), kw
    return make


REFUSED = {
    # (make, error type, patterns the message must contain)
    "outlier 1e160": (_outlier(1e160), InputError, [r"v1", r"1e\+160", r"dwarf the rest",
                                                    r"set the outlying values to NaN"]),
    "outliers +-1e155": (_outlier(1e155, 2), InputError, [r"v1", r"dwarf"]),
    "outlier 1e9": (_outlier(1e9), InputError, [r"v1", r"1e\+09", r"dwarf"]),
    "value 1e305": (_outlier(1e305), InputError, [r"v1", r"1e\+305", r"float64 limit"]),
    "infinite value": (_inf_value, InputError, [r"'v1'", r"infinite", r"NaN"]),
    "all-NaN variable": (_all_nan_variable, InputError, [r"'v1'", r"no observed value",
                                                         r"leave it out"]),
    "undecoded _FillValue": (_with_attrs(_FillValue=-9999.0), InputError,
                             [r"'v1'", r"_FillValue -9999", r"mask_and_scale=True",
                              r"decode_cf"]),
    "undecoded missing_value": (_with_attrs(missing_value=np.array([-9999.0, -8888.0])),
                                InputError, [r"'v1'", r"missing_value -9999", r"decode_cf"]),
    "undecoded int fill": (_with_attrs(_FillValue=np.int16(-9999)), InputError,
                           [r"'v1'", r"_FillValue", r"where"]),
    "packed ints not decoded": (_packed_raw, InputError, [r"'v1'", r"packed", r"scale_factor",
                                                          r"decode_cf"]),
    "outside valid_max": (_outside_valid_range, InputError, [r"'v1'", r"valid range",
                                                             r"1 values", r"NaN"]),
    "complex named": (_complex_named, TypeError, [r"'v1'", r"complex", r"real"]),
    "NaT time": (_nat_time, InputError, [r"'time'", r"NaT", r"mask="]),
    "NaN coordinate": (_nan_coordinate, InputError, [r"'x'", r"NaN", r"mask="]),
    "latitude > 90": (_latitude_out_of_range, InputError, [r"'lat'", r"\[-90, 90\]"]),
    "unknown variable": (_option(vars=["nope"]), InputError, [r"'nope'", r"available: v0"]),
    "string variable named": (_named(lambda d: d.assign(s=d.v0.astype(str)), vars=["s"]),
                              TypeError, [r"'s'", r"not a number"]),
    "bool variable named": (_named(lambda d: d.assign(b=d.v0 > 0), vars=["b"]), TypeError,
                            [r"'b'", r"bool"]),
    "datetime variable named": (
        _named(lambda d: d.assign(t=(("y", "x"), np.full((8, 8), np.datetime64("2000-01-01",
                                                                               "ns")))),
               vars=["t"]), TypeError, [r"'t'", r"datetime64"]),
    "log of negatives": (_option(transforms={"v0": "log"}), InputError,
                         [r"'v0'", r"<= 0", r"no transform"]),
    "unknown transform": (_option(transforms="sqrt"), InputError, [r"'sqrt'", r"'log'"]),
    "too few locations": (_option(neighbours=80), InputError, [r"64 locations", r"neighbours",
                                                                r"63 or fewer"]),
    "epochs=0": (_option(epochs=0), ValueError, [r"epochs", r"untrained", r"positive"]),
    "epochs=-1": (_option(epochs=-1), ValueError, [r"epochs", r"positive"]),
    "device tpu": (_option(device="tpu"), ValueError, [r"'tpu'", r"'cpu'", r"'cuda'"]),
    "device misspelt": (_option(device="gpu0"), ValueError, [r"'gpu0'", r"cuda:N"]),
    "unknown engine": (_option(engine="nngp"), ValueError, [r"engine", r"'nngp'", r"spa"]),
    "a retired option": (_option(members=2), ValueError,
                         [r"the option members is no longer available", r"members=1", r"got members=2"]),
    "hidden widths as text": (_option(encoder_hidden="64,64"), TypeError,
                              [r"encoder_hidden must be a list of integers", r"got '64,64'"]),
    "hidden widths not whole": (_option(decoder_hidden=[64.5]), TypeError, [r"decoder_hidden", r"\[64\.5\]"]),
    "context as text": (_option(context="16"), TypeError,
                        [r"context must be an integer or a list of integers", r"got '16'"]),
    "retired extra": (_option(extra={"selection_score": "mean"}), ValueError,
                      [r"the option extra is no longer available"]),
    "different dims": (_named(lambda d: d.assign(w=d.v0.isel(x=0)), vars=["v0", "w"]),
                       InputError, [r"'w'", r"different dims"]),
    "variable twice": (_option(vars=["v0", "v0"]), InputError, [r"twice"]),
    "mask unknown": (_option(mask="nope"), InputError,
                     [r"'nope'", r"data variables: v0, v1, v2; coordinates other than the dims: none\)"]),
    "scattered without coordinates": (
        lambda: (xr.Dataset({"v": ("site", np.r_[np.arange(9.0), np.nan])}), {}), InputError,
        [r"coords="]),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_refused_before_training(case, no_training):
    make, error, patterns = REFUSED[case]
    ds, kw = make()
    before = ds.copy(deep=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error) as info:
            geogpvae.impute(ds, **{**KW, **kw})
    message = str(info.value)
    assert "\n" not in message
    for pattern in patterns:
        assert re.search(pattern, message), (pattern, message)
    xr.testing.assert_identical(ds, before)


def test_dataarray_refused(no_training):
    with pytest.raises(TypeError, match=r"to_dataset"):
        geogpvae.impute(gauss().v0, **KW)


def test_outlier_refused_before_training_through_the_imputer(no_training):
    ds, _ = _outlier(1e160)()
    with pytest.raises(InputError, match="v1: a few observed values as large as 1e\\+160 dwarf"):
        geogpvae.GPVAEImputer(**KW).fit(ds)


def test_engine_refuses_complex_values_and_far_new_values(no_training):
    x = np.random.default_rng(0).uniform(size=(20, 2))
    with pytest.raises(InputError, match="complex"):
        GPVAEEngine(neighbours=4, epochs=1, progress=False).fit(x, np.ones((20, 1)) * (1 + 2j))


# --------------------------------------------------------------------------- coordinates
def _sites(seed: int, n: int = 16) -> xr.Dataset:
    """A Gaussian field at scattered sites (a grid, jittered), coordinates in metres."""
    ds = gauss((n, n), seed=seed).stack(site=("y", "x")).reset_index("site")
    ds = ds.drop_vars([c for c in ("y", "x") if c in ds.coords])
    jitter = np.random.default_rng(seed).uniform(-0.1, 0.1, size=(2, n * n)) / (n - 1)
    yy, xx = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    return ds.assign_coords(x=("site", (xx.ravel() + jitter[0]) * 1000.0),
                            y=("site", (yy.ravel() + jitter[1]) * 1000.0))


def test_large_coordinate_offset_costs_nothing():
    """Projected coordinates near 1e8 m give the same imputation as the same sites near 0."""
    ds = _sites(3)
    truth = ds.copy(deep=True)
    hide = np.random.default_rng(0).uniform(size=ds.sizes["site"]) < 0.3
    ds["v0"] = ds.v0.where(~hide)
    kw = {**KW, "epochs": 20, "vars": ["v0", "v1"]}
    far = ds.assign_coords(x=ds.x + 1e8, y=ds.y - 3e8)
    a = geogpvae.impute(ds, **kw)
    b = geogpvae.impute(far, **kw)
    held = hide & ~np.isnan(truth.v0.values)
    rmse_a = float(np.sqrt(np.mean((a.v0.values[held] - truth.v0.values[held]) ** 2)))
    rmse_b = float(np.sqrt(np.mean((b.v0.values[held] - truth.v0.values[held]) ** 2)))
    # float32 coordinates near 1e8 are quantised to 8 m (sites ~67 m apart): without
    # centring in float64 the RMSE differs in the third digit
    assert rmse_b == pytest.approx(rmse_a, rel=1e-5)
    np.testing.assert_allclose(b.v0.values, a.v0.values, rtol=1e-4, atol=1e-4)


def test_offset_model_predicts_at_new_locations(tmp_path):
    ds = gauss((10, 10), seed=4)
    kw = {**KW, "coord_scale": {}}
    near = ds.assign_coords(x=ds.x * 1000.0, y=ds.y * 1000.0)
    far = ds.assign_coords(x=ds.x * 1000.0 + 5e8, y=ds.y * 1000.0 + 5e8)
    a = geogpvae.GPVAEImputer(**kw).fit(near)
    b = geogpvae.GPVAEImputer(**kw).fit(far)
    b.save(tmp_path / "m.pt")
    b = geogpvae.GPVAEImputer.load(tmp_path / "m.pt")
    grid_a = xr.Dataset(coords={"x": np.linspace(0, 1000, 7), "y": np.linspace(0, 1000, 5)})
    grid_b = grid_a.assign_coords(x=grid_a.x + 5e8, y=grid_a.y + 5e8)
    pa, pb = a.predict(grid_a), b.predict(grid_b)
    # Centred in float64, the two coordinate sets differ only by float64 round-off, which 1000
    # full-batch steps amplify to a few 1e-2 (the one-step model's gap source is the combined one, which
    # passes them on); coordinates cast to float32 around 5e8 (steps of
    # ~30 m against a 111 m grid) miss by far more than this tolerance.
    np.testing.assert_allclose(pb.v0.values, pa.v0.values, rtol=0, atol=0.1)


def test_new_locations_in_other_units_refused(tmp_path):
    ds = gauss((8, 8), seed=2)
    ds.x.attrs["units"], ds.y.attrs["units"] = "m", "m"
    model = geogpvae.GPVAEImputer(**KW).fit(ds)
    model.save(tmp_path / "m.pt")
    grid = xr.Dataset(coords={"x": np.linspace(0, 7, 4), "y": np.linspace(0, 7, 3)})
    for m in (model, geogpvae.GPVAEImputer.load(tmp_path / "m.pt")):
        same = m.predict(grid.assign_coords(x=grid.x.assign_attrs(units=" metres")))  # m, spelled out
        unlabelled = m.predict(grid)  # no units attribute: taken as the training units
        np.testing.assert_array_equal(same.v0.values, unlabelled.v0.values)
        with pytest.raises(InputError, match=r"'x' is in 'km', but the model was trained on 'm'"):
            m.predict(grid.assign_coords(x=grid.x.assign_attrs(units="km")))


def test_dim_labelled_with_strings_uses_positions_and_says_so():
    ds = gauss((6, 8), seed=3).rename(y="station").drop_vars("station")
    ds = ds.assign_coords(station=[f"st{i}" for i in range(6)])
    with pytest.warns(CoordinateWarning, match=r"'station' is labelled with <U3 values \(e.g. 'st0'\)"):
        out = run_ok(ds, ["v0"])
    assert out.station.values.tolist() == ds.station.values.tolist()
    with pytest.warns(CoordinateWarning, match="no coordinate variable"):
        plain = run_ok(ds.drop_vars("station"), ["v0"])
    np.testing.assert_array_equal(out.v0.values, plain.v0.values)  # the same positions


# --------------------------------------------------------------------------- files
def _write_raw(ds: xr.Dataset, path, **encoding) -> None:
    ds.to_netcdf(path, encoding=encoding)


def test_packed_int16_file_decoded_by_default(tmp_path):
    ds = gauss()
    path = tmp_path / "packed.nc"
    _write_raw(ds, path, v1={"dtype": "int16", "scale_factor": 0.001, "add_offset": 1.0,
                             "_FillValue": -32767})
    with geogpvae.open_dataset(path) as opened:
        run_ok(opened.load(), ["v0", "v1", "v2"])


@pytest.mark.parametrize("how", ["mask_and_scale", "decode_cf"])
def test_undecoded_file_refused(tmp_path, how, no_training):
    ds = gauss()
    path = tmp_path / "packed.nc"
    _write_raw(ds, path, v1={"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32767})
    with xr.open_dataset(path, **{how: False}) as raw, pytest.raises(
            InputError, match=r"'v1' is still packed .*decode_cf"):
        geogpvae.impute(raw, **KW)


def test_fill_value_file_opened_raw_refused(tmp_path, no_training):
    ds = gauss()
    path = tmp_path / "fill.nc"
    _write_raw(ds, path, v1={"_FillValue": -9999.0})
    with xr.open_dataset(path, mask_and_scale=False) as raw, pytest.raises(
            InputError, match=r"'v1' holds its _FillValue -9999 at \d+ cells"):
        geogpvae.impute(raw, **KW)


@pytest.mark.parametrize("cut", [0, 100, 2000, -100])
def test_truncated_netcdf_is_bad_input(tmp_path, cut):
    full = tmp_path / "full.nc"
    geogpvae.to_netcdf(gauss((30, 30)), full)
    data = full.read_bytes()
    bad = tmp_path / "bad.nc"
    bad.write_bytes(data[: cut if cut >= 0 else len(data) + cut])
    with pytest.raises(ValueError, match=re.escape(str(bad))) as info:
        geogpvae.open_dataset(bad)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- properties
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.tuples(st.integers(3, 7), st.integers(3, 7)),
    dtype=st.sampled_from([np.float32, np.float64]),
    exponent=st.integers(-30, 30),
    offset=st.sampled_from([0.0, -1e3, 1e6]),
    missing=st.floats(0.1, 0.8),
    seed=st.integers(0, 2**16),
)
def test_observed_values_always_exact(shape, dtype, exponent, offset, missing, seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=shape) * 10.0**exponent + offset * 10.0**exponent
    v[rng.uniform(size=shape) < missing] = np.nan
    v.flat[rng.integers(v.size)] = (rng.normal() + offset) * 10.0**exponent  # one observed at least
    ds = xr.Dataset({"v": (("y", "x"), v.astype(dtype))},
                    coords={"y": np.arange(shape[0]) * 2.5, "x": np.arange(shape[1]) * 1.5})
    run_ok(ds, ["v"], neighbours=3)


@settings(max_examples=20, deadline=None)
@given(fill=st.one_of(st.sampled_from([-9999.0, -999.0, 9.96921e36, 1e20, -32767.0]),
                      st.floats(-1e30, 1e30, allow_nan=False)),
       key=st.sampled_from(["_FillValue", "missing_value"]))
def test_undecoded_fill_never_taken_as_data(fill, key):
    ds = gauss()
    ds["v2"] = ds.v2.fillna(fill)
    ds.v2.attrs[key] = fill
    with pytest.raises(InputError, match=rf"'v2' holds its {key}"):
        prepare_field(ds)


# --------------------------------------------------------------------------- model files
@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.pt"
    geogpvae.GPVAEImputer(**KW).fit(gauss()).save(path)
    return path


def _torch_file(obj):
    def make(path, saved):
        import torch

        torch.save(obj, path)
    return make


class _Gadget:
    """Not a plain value: weights_only loading refuses it."""


def _truncated(path, saved):
    data = saved.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _stripped(path, saved):
    import torch

    state = torch.load(saved, weights_only=True)
    del state["fitted"]["geometry"]
    torch.save(state, path)


BAD_MODELS = {
    "empty": (lambda p, s: p.write_bytes(b""), r"the file is empty"),
    "truncated": (_truncated, r"damaged or truncated"),
    "text": (lambda p, s: p.write_text("not a model\n"), r"not a file written by torch.save"),
    "random bytes": (lambda p, s: p.write_bytes(np.random.default_rng(0).bytes(3000)),
                     r"not a file written by torch.save"),
    "pickled object": (_torch_file({"format": "geogpvae-imputer", "x": _Gadget()}),
                       r"Python objects other than tensors"),
    "other torch file": (_torch_file({"weights": [1, 2, 3]}), r"not a geogpvae imputer file"),
    "entry missing": (_stripped, r"damaged or incompatible .*geometry"),
}


@pytest.mark.parametrize("case", list(BAD_MODELS), ids=list(BAD_MODELS))
def test_bad_model_file_one_clear_line(case, saved_model, tmp_path):
    from geogpvae.errors import UnreadableFileError

    make, pattern = BAD_MODELS[case]
    path = tmp_path / "bad.pt"
    make(path, saved_model)
    with pytest.raises(UnreadableFileError) as info:
        geogpvae.GPVAEImputer.load(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert re.search(pattern, message), message
    assert "weights_only=False" not in message and "weights_only" not in message


def test_model_file_missing_or_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "none.pt"))):
        geogpvae.GPVAEImputer.load(tmp_path / "none.pt")
    with pytest.raises(IsADirectoryError, match="folder"):
        geogpvae.GPVAEImputer.load(tmp_path)


def test_model_loaded_on_unknown_device(saved_model):
    with pytest.raises(ValueError, match=r"unknown device 'tpu'"):
        geogpvae.GPVAEImputer.load(saved_model, device="tpu")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="CUDA is available here")
def test_model_loaded_on_missing_cuda(saved_model):
    with pytest.raises(InputError, match=r"device 'cuda' is not available here; .*'cpu'"):
        geogpvae.GPVAEImputer.load(saved_model, device="cuda")


def test_bad_checkpoint_one_clear_line(tmp_path):
    from geogpvae.cli.jobs import CheckpointError, load_checkpoint

    path = tmp_path / "job.ckpt"
    _torch_file({"format": "x", "o": _Gadget()})(path, None)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, {})
    message = str(info.value)
    assert str(path) in message and "--overwrite" in message and "weights_only" not in message
