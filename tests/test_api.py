"""impute() and GPVAEImputer end to end: layouts, masks, transforms, dask, save/load, CF files."""

from __future__ import annotations

import copy
import json
import socket
import warnings

import numpy as np
import pytest
import torch
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import geogpvae
from geogpvae import GPVAEImputer, impute
from geogpvae.datasets import load_jura, make_gaussian_field
from geogpvae.engine.core import GPVAEEngine
from geogpvae.errors import CoordinateWarning, InputError, TrainingWarning

FAST = dict(
    neighbours=8, encoder_hidden=(32, 32), decoder_hidden=(32, 32), samples=16, progress=False
)
TINY = dict(
    neighbours=4,
    encoder_hidden=(8,),
    decoder_hidden=(8,),
    samples=4,
    calibrate=False,
    progress=False,
    epochs=1,
)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    )


def _check_output(ds: xr.Dataset, out: xr.Dataset, names, domain=None) -> None:
    """The conventions every imputed Dataset follows."""
    for name in names:
        v, orig = out[name], ds[name]
        assert v.dims == orig.dims and v.dtype == orig.dtype
        observed = orig.notnull().values
        assert _same_bits(v.values[observed], orig.values[observed])
        inside = np.ones(v.shape, bool) if domain is None else domain.transpose(*v.dims).values
        assert np.isfinite(v.values[inside]).all()
        assert np.isnan(v.values[~inside & ~observed]).all()
        std, flag = out[name + "_std"].values, out[name + "_imputed"].values
        assert (std[observed] == 0).all() and (std[~observed & inside] > 0).all()
        np.testing.assert_array_equal(flag, np.where(observed, 0, np.where(inside, 1, -127)))
        assert v.attrs["ancillary_variables"].split()[-2:] == [name + "_std", name + "_imputed"]
    for name in ds.data_vars:
        if name not in names:
            xr.testing.assert_identical(out[name], ds[name])
    for name in ds.coords:
        xr.testing.assert_identical(out[name], ds[name])
    assert {k: out.attrs[k] for k in ds.attrs if k != "history"} == {
        k: v for k, v in ds.attrs.items() if k != "history"
    }


@pytest.fixture(scope="module")
def grid():
    return make_gaussian_field((14, 12), missing=0.4, seed=3)


@pytest.fixture(scope="module")
def sites():
    return make_gaussian_field(n_points=120, missing=0.4, seed=4, units="km")


@pytest.fixture(scope="module")
def fitted(sites):
    return GPVAEImputer(epochs=5, **FAST).fit(sites)


# ------------------------------------------------------------------ layouts
def test_grid_2d_imputed_and_input_untouched(grid):
    before = grid.copy(deep=True)
    out = impute(grid, epochs=5, **FAST)
    xr.testing.assert_identical(grid, before)
    _check_output(grid, out, ["v0", "v1", "v2"])
    assert list(out.dims) == list(grid.dims)
    line = out.attrs["history"].splitlines()[0]
    assert "impute(vars=['v0', 'v1', 'v2'], engine='spa', neighbours=8, epochs=5, seed=0" in line
    assert out.attrs["geogpvae_epochs"] == 5 and out.attrs["geogpvae_kernel"] == "matern32"
    assert json.loads(out.attrs["geogpvae_config"])["neighbours"] == 8
    # what the fit chose from the data: beta="auto"'s factor and the variables whose gaps cluster
    assert out.attrs["geogpvae_kl_factor"] in (1.0, 0.5, 0.2)
    assert json.loads(out.attrs["geogpvae_clustered_gaps"]) == []  # values dropped at random


_FACTORS = ("geogpvae_variance_factor_observed", "geogpvae_variance_factor_unobserved")


def test_output_records_what_calibration_did(fitted, sites, tmp_path):
    """Each v_std carries its variable's variance factors (row 0: locations with observed values
    of their own, row 1: none) and the globals the sources predict_mode="auto" chose; both
    survive a netCDF file, and predict() at new locations carries them too."""
    eng = fitted.engine_
    assert eng.calibration_.shape == (2, 3) and (eng.calibration_[0] != eng.calibration_[1]).any()
    out = fitted.impute(sites)
    path = geogpvae.to_netcdf(out, tmp_path / "calibrated.nc")
    grid = xr.Dataset(coords={"x": np.linspace(0, 1, 3), "y": np.linspace(0, 1, 4)})
    new = fitted.predict(grid)
    with geogpvae.open_dataset(path) as back:
        for ds in (out, back, new):
            for j, v in enumerate(fitted.vars_):
                attrs = ds[f"{v}_std"].attrs
                assert all(isinstance(attrs[a], float) for a in _FACTORS)
                assert [attrs[a] for a in _FACTORS] == [eng.calibration_[0, j], eng.calibration_[1, j]]
                assert not any(a.startswith("geogpvae_variance") for a in ds[v].attrs)
            assert json.loads(ds.attrs["geogpvae_predict_mode_chosen"]) == eng.predict_mode_
            assert json.loads(ds.attrs["geogpvae_noise_chosen"]) == {
                r: dict(zip(fitted.vars_, v)) for r, v in eng.noise_.items()}
    assert set(eng.predict_mode_) == {"observed", "unobserved"}
    assert set(eng.noise_) == {"observed", "unobserved"}


def test_no_calibration_attributes_without_calibration(grid, tmp_path):
    out = impute(grid, **TINY)  # calibrate=False
    path = geogpvae.to_netcdf(out, tmp_path / "raw.nc")
    with geogpvae.open_dataset(path) as back:
        for ds in (out, back):
            assert "geogpvae_predict_mode_chosen" not in ds.attrs
            assert "geogpvae_noise_chosen" not in ds.attrs
            for v in ("v0", "v1", "v2"):
                assert not set(_FACTORS) & set(ds[f"{v}_std"].attrs)
            floats = [a for a in ds.attrs.values() if isinstance(a, float)]
            assert np.isfinite(floats).all()


def test_results_do_not_depend_on_the_units_of_the_coordinates():
    """The same survey in km and in m: the kernel learns the same lengthscales (in each unit)."""
    ds = make_gaussian_field(n_points=150, missing=0.4, seed=3)
    in_m = ds.assign_coords(x=ds.x * 1000.0, y=ds.y * 1000.0)
    fits = [GPVAEImputer(seed=0, progress=False, epochs=20, beta=1.0).fit(d) for d in (ds, in_m)]
    outs = [f.impute(d) for f, d in zip(fits, (ds, in_m))]
    ls = [f.engine_.model.kernel.lengthscale.detach().numpy() for f in fits]
    np.testing.assert_allclose(ls[1], 1000.0 * ls[0], rtol=1e-3)
    for v in ds.data_vars:
        np.testing.assert_allclose(outs[1][v].values, outs[0][v].values, atol=5e-3)
        np.testing.assert_allclose(outs[1][f"{v}_std"].values, outs[0][f"{v}_std"].values, atol=5e-3)


def test_grid_3d_other_dim_order_descending_irregular_scaled():
    ds = make_gaussian_field((4, 6, 5), missing=0.4, seed=5, n_vars=2)
    ds = ds.assign_coords(
        z=("z", [40.0, 25.0, 21.0, 3.0], ds.z.attrs),  # descending, uneven
        y=("y", [0.0, 0.1, 0.15, 0.5, 0.55, 1.0], ds.y.attrs),
    )
    ds = ds.transpose("x", "z", "y")
    ds["v1"] = ds.v1.transpose("y", "x", "z")  # variables need not share a dim order
    out = impute(ds, epochs=5, coord_scale={"z": 0.02}, **FAST)
    _check_output(ds, out, ["v0", "v1"])
    assert out.v0.dims == ("x", "z", "y") and out.v1_std.dims == ("y", "x", "z")
    assert "z multiplied by 0.02" in out.attrs["geogpvae_coordinates"]


def test_scattered_with_duplicate_locations(sites):
    ds = sites.isel(site=slice(0, 60))
    dup = ds.assign_coords(
        x=ds.x.copy(data=np.repeat(ds.x.values[:30], 2)),
        y=ds.y.copy(data=np.repeat(ds.y.values[:30], 2)),
    )
    out = impute(dup, epochs=5, **FAST)
    _check_output(dup, out, ["v0", "v1", "v2"])


def test_lonlat_time_grid_across_the_dateline():
    rng = np.random.default_rng(0)
    lon = np.array([176.0, 178.0, 179.5, -179.5, -178.0, -176.0])
    time = np.array(["2000-01-01", "2000-01-02", "2000-01-05"], dtype="datetime64[ns]")
    base = np.sin(np.deg2rad(lon * 10))[None, None, :] + np.arange(4)[None, :, None] * 0.3
    sst = base + 0.1 * np.arange(3)[:, None, None] + 0.05 * rng.normal(size=(3, 4, 6))
    sst[rng.random(sst.shape) < 0.3] = np.nan
    ds = xr.Dataset(
        {
            "sst": (
                ("time", "lat", "lon"),
                sst,
                {"units": "K", "standard_name": "sea_surface_temperature"},
            )
        },
        coords={
            "time": ("time", time, {"standard_name": "time"}),
            "lat": (
                "lat",
                [60.0, 61.0, 62.0, 63.0],
                {"units": "degrees_north", "standard_name": "latitude"},
            ),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
    )
    out = impute(ds, epochs=5, **FAST)
    _check_output(ds, out, ["sst"])
    coords = out.attrs["geogpvae_coordinates"]
    assert "time as days since 2000-01-01" in coords and "lon/lat as km on a sphere" in coords
    assert out.sst_std.attrs["standard_name"] == "sea_surface_temperature standard_error"


# ------------------------------------------------------------------ domain, transforms
def test_mask_cells_are_neither_used_nor_filled(grid):
    inside = grid.x < 0.6
    a = impute(grid, mask=inside, epochs=5, **FAST)
    _check_output(grid, a, ["v0", "v1", "v2"], domain=inside.broadcast_like(grid.v0))
    # as a variable name: the same, and the mask variable passes through
    b = impute(grid.assign(inside=inside.broadcast_like(grid.v0)), mask="inside", epochs=5, **FAST)
    for v in ("v0", "v0_std", "v0_imputed"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    assert b.inside.dtype == bool
    # observed values outside the domain do not enter training
    changed = grid.copy(deep=True)
    changed["v0"] = grid.v0.where(inside, grid.v0 * 100 + 5)
    c = impute(changed, mask=inside, epochs=5, **FAST)
    inner = inside.broadcast_like(grid.v0).values
    np.testing.assert_array_equal(a.v1.values[inner], c.v1.values[inner])
    np.testing.assert_array_equal(a.v0_std.values[inner], c.v0_std.values[inner])


def test_log_transform_gives_positive_values_and_attrs(grid):
    ds = grid.assign(k=np.exp(grid.v0).assign_attrs(units="mD", long_name="permeability"))
    out = impute(ds, ["k", "v1"], transforms={"k": "log"}, epochs=5, **FAST)
    _check_output(ds, out, ["k", "v1"])
    assert (out.k.values > 0).all()
    assert (
        out.k.attrs["geogpvae_transform"] == "log"
        and out.k.attrs["geogpvae_point_estimate"] == "mean"
    )
    assert out.k_std.attrs["geogpvae_transform"] == "log"
    assert "geogpvae_transform" not in out.v1.attrs
    assert json.loads(out.attrs["geogpvae_transform"]) == {"k": "log"}


# ------------------------------------------------------------------ dask, accessor
def test_dask_input_same_result_as_in_memory(grid):
    pytest.importorskip("dask")
    lazy = grid.chunk({"y": 5}).assign(w=(("y", "x"), np.ones((14, 12))))
    lazy["w"] = lazy.w.chunk({"y": 7})
    eager = lazy.compute()
    # one thread each: the default count follows the machine's load, which differs between the calls
    a = impute(lazy, ["v0", "v1", "v2"], epochs=5, threads=1, **FAST)
    b = impute(eager, ["v0", "v1", "v2"], epochs=5, threads=1, **FAST)
    assert a.w.chunks is not None  # untouched variables stay lazy
    assert lazy.v0.chunks is not None  # the input was not loaded in place
    assert a.v0.chunks == lazy.v0.chunks and a.v1_std.chunks == lazy.v1.chunks  # predicted when computed
    a.attrs["history"] = b.attrs["history"] = ""
    a = a.compute()
    for name in ("v0", "v1", "v2"):  # observed values and flags exactly; fills to float32 round-off
        observed = b[f"{name}_imputed"] == 0
        xr.testing.assert_identical(a[name].where(observed), b[name].where(observed))
        xr.testing.assert_allclose(a[name], b[name], rtol=1e-6, atol=1e-7)
        xr.testing.assert_allclose(a[f"{name}_std"], b[f"{name}_std"], rtol=1e-6, atol=1e-7)
        for var in (name, f"{name}_std"):  # attributes and coordinates as in memory
            xr.testing.assert_identical(a[var].copy(data=b[var].values), b[var])
    xr.testing.assert_identical(a.drop_vars(["v0", "v1", "v2", "v0_std", "v1_std", "v2_std"]),
                                b.drop_vars(["v0", "v1", "v2", "v0_std", "v1_std", "v2_std"]))


def test_accessor_is_the_same_call(grid):
    # one thread each: the default count follows the machine's load, which differs between the calls
    a = grid.gpvae.impute(["v0", "v1"], epochs=3, threads=1, **FAST)
    b = impute(grid, ["v0", "v1"], epochs=3, threads=1, **FAST)
    a.attrs["history"] = b.attrs["history"] = ""
    xr.testing.assert_identical(a, b)


# ------------------------------------------------------------------ the imputer
def test_imputer_history_engine_and_training_field(fitted, sites):
    assert isinstance(fitted.engine_, GPVAEEngine)
    assert fitted.history["epoch"] == [1, 2, 3, 4, 5] and len(fitted.history["loss"]) == 5
    out = fitted.impute(sites)
    np.testing.assert_array_equal(out.v0.values, impute(sites, epochs=5, **FAST).v0.values)


def test_the_training_field_is_recognised_in_any_order_and_through_float32(grid, monkeypatch):
    """A transposed, re-sorted or float32 copy of the training Dataset gets the fitted
    posterior, as the Dataset itself does; a field that differs in one value does not."""
    grid = grid.assign(v1=grid.v1 + 1000.0)  # exp(1000) overflows: only log columns are exponentiated
    imp = GPVAEImputer(epochs=3, **FAST).fit(grid, ["v0", "v1"])
    calls = []
    predict = imp.engine_.predict
    monkeypatch.setattr(imp.engine_, "predict", lambda *a, **k: calls.append(a) or predict(*a, **k))
    ref = imp.impute(grid)
    f32 = grid.astype("float32").assign_coords(x=grid.x.astype("float32"), y=grid.y.astype("float32"))
    copies = {"transposed": grid.transpose("x", "y"), "re-sorted": grid.isel(x=slice(None, None, -1)),
              "float32": f32}
    for name, copied in copies.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            out = imp.impute(copied).transpose(*ref.v0.dims).sortby("x")
        for v in ("v0", "v0_std", "v1", "v1_std"):
            np.testing.assert_allclose(out[v].values, ref[v].values, rtol=1e-6, atol=1e-6, err_msg=name)
    assert calls == [()] * 4  # every copy took the training field's posterior
    other = grid.copy(deep=True)
    other["v1"].values[np.unravel_index(np.flatnonzero(grid.v1.notnull())[0], grid.v1.shape)] += 0.5
    imp.impute(other.transpose("x", "y"))
    assert len(calls[-1]) == 2  # imputed as a new field, from its own values


def test_imputer_fills_a_new_field(fitted, sites):
    other = make_gaussian_field(n_points=90, missing=0.5, seed=11, units="km")
    out = fitted.impute(other)
    _check_output(other, out, ["v0", "v1", "v2"])
    with pytest.raises(InputError, match=r"variables \['v2'\] \(used by the model\) are not in"):
        fitted.impute(other.drop_vars("v2"))


def test_predict_on_a_grid_from_scattered_training(fitted):
    grid = xr.Dataset(
        coords={
            "y": ("y", np.linspace(0, 1, 4), {"units": "km", "long_name": "y"}),
            "x": ("x", np.linspace(0, 1, 5), {"units": "km", "long_name": "x"}),
        }
    )
    pred = fitted.predict(grid)
    assert set(pred.data_vars) == {f"v{i}{s}" for i in range(3) for s in ("", "_std")}
    # the dims come back in the order the grid gives them: (y, x) here, (x, y) below
    assert pred.v0.dims == ("y", "x") and pred.v0.shape == (4, 5)
    assert fitted.predict(xr.Dataset(coords={"x": grid.x, "y": grid.y})).v0.dims == ("x", "y")
    assert np.isfinite(pred.v0).all() and (pred.v0_std > 0).all()
    assert pred.v0.attrs["ancillary_variables"] == "v0_std"
    xr.testing.assert_identical(pred.x, grid.x)
    # a DataArray template: its values are ignored, its dim order kept (Monte Carlo noise is
    # drawn in location order, so another order gives slightly different means)
    same = xr.DataArray(np.ones((4, 5)), dims=("y", "x"), coords=grid.coords)
    np.testing.assert_array_equal(fitted.predict(same).v0.values, pred.v0.values)
    turned = fitted.predict(same.transpose("x", "y"))
    assert turned.v0.dims == ("x", "y")
    np.testing.assert_allclose(turned.v0.transpose("y", "x").values, pred.v0.values, atol=0.2)



def test_predict_warns_when_every_location_is_far_from_the_training_data(fitted):
    # the sites span 0..1 km; a grid in metres without a units attribute lies 1000 times off:
    # every location gets the model's prior, the same value everywhere
    metres = xr.Dataset(coords={"x": np.linspace(250, 1000, 4), "y": np.linspace(250, 1000, 3)})
    with pytest.warns(CoordinateWarning, match=r"every location lies far outside .*x: the locations span "
                      r"250 to 1000, the training data 0.008214 to 0.9984 km.*metres for kilometres"):
        fitted.predict(metres)
    # a grid reaching well past the sites but overlapping them, or a point just beyond: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoordinateWarning)
        fitted.predict(xr.Dataset(coords={"x": np.linspace(-2, 3, 6), "y": np.linspace(-2, 3, 6)}))
        fitted.predict(xr.Dataset(coords={"x": [1.9], "y": [0.5]}))


def test_predict_gives_unlabelled_coordinates_the_training_units(fitted):
    # a grid built from bare numbers is in the training data's units (km): the output says so,
    # in a file and on a map's axes; the caller's grid is left as it was
    grid = xr.Dataset(coords={"x": np.linspace(0, 1, 5), "y": ("y", np.linspace(0, 1, 4), {"units": "km", "axis": "Y"})})
    pred = fitted.predict(grid)
    assert pred.x.attrs == {"units": "km"} and grid.x.attrs == {}
    assert pred.y.attrs == {"units": "km", "axis": "Y"}

def test_a_fitted_grid_model_on_stacked_slices_and_other_grids(grid):
    imp = GPVAEImputer(**TINY).fit(grid)
    # slices along a dim the model has no coordinate for would be taken as the same locations
    days = xr.concat([grid, grid + 5.0], dim="time").assign_coords(time=[0, 1])
    with pytest.raises(InputError, match=r"dim 'time' \(2 long\) along which none of the model's coordinates \(y, x\)"):
        imp.impute(days)
    imp.impute(days.isel(time=[0]))  # one slice: nothing mixed
    # predict keeps a Dataset variable's dim order (it followed the model's axes)
    turned = grid.transpose("x", "y")
    assert imp.predict(turned).v0.dims == ("x", "y") and imp.predict(grid).v0.dims == grid.v0.dims
    with pytest.raises(InputError, match=r"coordinates are scalars"):
        imp.predict(xr.Dataset(coords={"x": 0.5, "y": 0.5}))
    with pytest.raises(InputError, match=r"drop them from the locations to predict at"):  # predict takes no mask
        imp.predict(xr.Dataset(coords={"x": ("site", [0.5, np.nan]), "y": ("site", [0.5, 0.5])}))
    # the imputer's own mask on another grid: the message says so and how to go on
    masked = GPVAEImputer(mask=grid.x < grid.x.median(), **TINY).fit(grid)
    other = make_gaussian_field((9, 8), missing=0.4, seed=5)
    with pytest.raises(InputError, match=r"the imputer's mask \(given when it was made\) does not fit .*mask=None"):
        masked.impute(other)
    assert masked.impute(other, mask=None).v0.notnull().all()


def test_a_model_with_time_imputes_one_time_step_and_named_coordinates_keep_their_choice():
    rng = np.random.default_rng(2)
    values = rng.normal(size=(6, 9, 8))
    values[rng.random(values.shape) < 0.3] = np.nan
    ds = xr.Dataset({"v": (("time", "y", "x"), values)},
                    coords={"time": np.arange(6.0), "y": np.arange(9.0), "x": np.arange(8.0)})
    imp = GPVAEImputer(**TINY).fit(ds)
    # a scalar time (isel) is every location's time: the same values as the slice of the whole
    one = imp.impute(ds.isel(time=2))
    assert one.v.dims == ("y", "x") and one.v.notnull().all()
    np.testing.assert_allclose(imp.predict(ds.isel(time=2)).v.values, imp.predict(ds).v.isel(time=2).values,
                               atol=1e-5)
    # fitted on y, x only by the user's choice: its own time dim stays duplicate points
    flat = GPVAEImputer(coords=["y", "x"], **TINY).fit(ds)
    assert flat.impute(ds).v.notnull().all()


def test_numpy_seeds_are_seeds_and_bad_ones_are_refused(grid):
    a = impute(grid, seed=np.int64(2), **TINY)
    np.testing.assert_array_equal(a.v0.values, impute(grid, seed=2, **TINY).v0.values)
    for bad in (-1, 1.5, None):
        with pytest.raises(ValueError, match=r"seed must be an integer >= 0"):
            GPVAEImputer(seed=bad).engine_config()
    with pytest.raises(ValueError, match=r"seed must be below 2\*\*63"):
        GPVAEImputer(seed=2**64).fit(grid)
    assert GPVAEImputer(**{**TINY, "encoder_hidden": np.array([8, 8])}).engine_config().encoder_hidden == (8, 8)


def test_save_load_identical_predictions(fitted, sites, tmp_path):
    path = fitted.save(tmp_path / "model.pt")
    assert torch.load(path, weights_only=True)["format"] == "geogpvae-imputer"  # plain values only
    loaded = GPVAEImputer.load(path, progress=False)
    grid = xr.Dataset(coords={"x": np.linspace(0, 1, 6), "y": np.linspace(0, 1, 3)})
    xr.testing.assert_identical(
        loaded.predict(grid).drop_attrs(), fitted.predict(grid).drop_attrs()
    )
    a, b = fitted.impute(sites), loaded.impute(sites)
    for v in ("v0", "v0_std", "v2", "v2_std"):
        assert _same_bits(a[v].values, b[v].values)
    assert loaded.vars_ == fitted.vars_ and loaded.dims_ == fitted.dims_ == ("site",)
    assert loaded.history == fitted.history
    assert set(a.attrs) == set(b.attrs)  # e.g. geogpvae_clustered_gaps, once lost on loading
    # history and geogpvae_threads record each call's time and machine load, not the model
    for key in set(a.attrs) - {"history", "geogpvae_threads"}:
        np.testing.assert_array_equal(a.attrs[key], b.attrs[key], err_msg=key)
    # never overwritten unless asked; the file stays as it was
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        loaded.save(path)
    assert path.read_bytes() == before
    loaded.save(path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temporary file left


def test_save_keeps_attrs_and_transform(tmp_path, grid):
    ds = grid.assign(
        k=np.exp(grid.v0).assign_attrs(
            units="mD", valid_min=np.float32(0.0), flag_like=np.array([1, 2], np.int16)
        )
    )
    imp = GPVAEImputer(transforms={"k": "log"}, coord_scale={"x": 2.0}, epochs=2, **FAST).fit(
        ds, ["k", "v1"]
    )
    loaded = GPVAEImputer.load(imp.save(tmp_path / "k.pt"))
    attrs = loaded.predict(grid[["x", "y"]]).k.attrs
    assert attrs["units"] == "mD" and attrs["valid_min"].dtype == np.float32
    assert attrs["flag_like"].dtype == np.int16 and attrs["geogpvae_point_estimate"] == "mean"
    assert loaded.geometry_ == imp.geometry_ and loaded.transforms == {"k": "log"}
    # a file saved before valid bounds were kept in the values' units: they may be packed codes,
    # so they are left out rather than applied to the predictions
    path = tmp_path / "older.pt"
    imp.save(path)
    state = torch.load(path, weights_only=True)
    del state["fitted"]["bounds_in_values"]
    torch.save(state, path)
    older = GPVAEImputer.load(path).predict(grid[["x", "y"]]).k.attrs
    assert "valid_min" not in older and older["units"] == "mD"


def test_model_of_a_time_series_field_loads_and_predicts(tmp_path):
    # the time axis's origin is saved as plain text: a numpy string would make the model file
    # unloadable by the safe loader, found only when predict is called
    ds = make_gaussian_field((4, 5, 5), n_vars=1, seed=0, dims=["time", "y", "x"])
    ds = ds.assign_coords(time=np.arange("2020-01-01", "2020-01-05", dtype="datetime64[D]").astype("datetime64[ns]"))
    imp = GPVAEImputer(epochs=2, **FAST).fit(ds)
    assert type(imp.geometry_.axes[0].origin) is str
    loaded = GPVAEImputer.load(imp.save(tmp_path / "t.pt"))
    where = xr.Dataset(coords={"time": ds.time.values[:2], "y": ds.y.values[:3], "x": ds.x.values[:3]})
    np.testing.assert_array_equal(loaded.predict(where).v0.values, imp.predict(where).v0.values)


def test_an_imputed_output_is_not_imputed_again():
    # its holes hold predictions: imputing it again would mark every value observed, std 0,
    # and lose which values were data
    ds = make_gaussian_field((8, 8), missing=0.3, seed=1, n_vars=2)
    out = impute(ds, ["v0", "v1"], **TINY)
    with pytest.raises(InputError, match=r"v0, v1 already went through impute \(v0_imputed is present\)"):
        impute(out, **TINY)
    reopened = out.assign(v0=out.v0.where(out.v0_imputed != 1))[["v0", "v1"]]  # as the message says
    assert reopened.v0.isnull().sum() == ds.v0.isnull().sum()
    nothing_filled = ds.assign(v2_imputed=xr.zeros_like(ds.v0, dtype="int8"), v2=ds.v0.fillna(0.0),
                               v2_std=xr.zeros_like(ds.v0))
    impute(nothing_filled, ["v2"], **TINY)  # flags that mark nothing: nothing to lose
    # a v_std of the user's own (no flags beside it) would be replaced by the output's
    own = ds.assign(v0_std=ds.v0 * 0 + 0.1)
    with pytest.raises(InputError, match=r"the input has a variable v0_std of its own.*rename it"):
        impute(own, ["v0", "v1"], **TINY)
    impute(own, ["v1"], **TINY)  # v0 left out: its v0_std passes through


# ------------------------------------------------------------------ bad input
def _bad_cases():
    def base():
        return make_gaussian_field((6, 5), missing=0.3, seed=2, n_vars=2)

    def with_label():
        ds = base()
        ds["label"] = (("y", "x"), np.full((6, 5), "a"))
        return ds

    def with_profile():
        return base().assign(p=("x", np.ones(5)))

    def empty_var():
        ds = base()
        ds["v1"] = ds.v1 * np.nan
        return ds

    def nan_coord():
        ds = base()
        return ds.assign_coords(x=ds.x.copy(data=np.r_[ds.x.values[:-1], np.nan]))

    def no_coords():
        return xr.Dataset({"a": ("site", [1.0, np.nan, 3.0] * 5)})

    def negative():
        ds = base()
        return ds.assign(v0=ds.v0 - 10)

    def inf_value():
        ds = base()
        return ds.assign(v0=ds.v0.fillna(np.inf))

    only_left = xr.DataArray(np.arange(5) < 2, dims="x")
    return {
        "unknown variable": (
            base,
            dict(vars=["v0", "Cd"]),
            InputError,
            r"'Cd' is not a data variable.*available: v0, v1",
        ),
        "non-numeric": (with_label, dict(vars=["v0", "label"]), TypeError, "'label' has dtype"),
        "different dims": (with_profile, dict(vars=["v0", "p"]), InputError, "different dims"),
        "no observed value": (empty_var, {}, InputError, "'v1' has no observed value"),
        "none inside mask": (
            lambda: base().assign(v1=base().v1.where(~only_left)),
            dict(mask=only_left),
            InputError,
            "'v1' has no observed value inside the mask",
        ),
        "nan coordinate": (nan_coord, {}, InputError, "coordinate 'x' is NaN or infinite at 6 of"),
        "too few points": (
            base,
            dict(neighbours=30),
            InputError,
            r"30 locations .* neighbours \+ 1 = 31",
        ),
        "unknown engine": (base, dict(engine="gp"), ValueError, "unknown engine 'gp'"),
        "unknown kernel": (base, dict(kernel="sinc"), ValueError, "unknown kernel 'sinc'"),
        "unknown option": (base, dict(neighbors=3), ValueError, "unknown option"),
        "unknown transform": (
            base,
            dict(transforms={"v0": "sqrt"}),
            InputError,
            "unknown transform 'sqrt'",
        ),
        "log of negatives": (
            negative,
            dict(transforms={"v0": "log"}),
            InputError,
            r"cannot log-transform 'v0': \d+ observed values are <= 0 \(minimum -",
        ),
        "no coordinates": (no_coords, {}, InputError, r"coords=\["),
        "infinite value": (inf_value, {}, InputError, r"'v0' has \d+ infinite values"),
        "unknown coordinate": (
            base,
            dict(coords=["x", "depth"]),
            InputError,
            "coordinate 'depth' is not in",
        ),
        "unknown mask": (base, dict(mask="land"), InputError, "mask 'land' is not a variable"),
    }


BAD = _bad_cases()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_refused_before_training(case, monkeypatch):
    make, kwargs, error, match = BAD[case]

    def no_training(*args, **kw):
        raise AssertionError("training started")

    monkeypatch.setattr(GPVAEEngine, "fit", no_training)
    ds = make()
    before = copy.deepcopy(ds)
    options = {**FAST, "epochs": 1, **kwargs}
    with pytest.raises(error, match=match):
        impute(ds, **options)
    xr.testing.assert_identical(ds, before)


def test_unfitted_imputer_refuses_and_writes_nothing(tmp_path):
    imp = GPVAEImputer(**FAST)
    with pytest.raises(RuntimeError, match="not trained"):
        imp.save(tmp_path / "m.pt")
    with pytest.raises(RuntimeError, match="not trained"):
        imp.predict(xr.Dataset(coords={"x": [0.0]}))
    with pytest.raises(AttributeError, match="not trained"):  # so that hasattr(imp, "epochs_run_") is False
        imp.epochs_run_
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "junk.pt").write_bytes(b"")
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a geogpvae imputer"):
        GPVAEImputer.load(tmp_path / "other.pt")


def test_the_imputer_follows_the_scikit_learn_parameter_contract(grid):
    from sklearn.base import clone

    mask = grid.x < 0.5
    imp = GPVAEImputer(engine="no such engine", kernel="gauss", mask=mask, transforms={"v0": "log"})
    assert imp.mask is mask and imp.get_params()["kernel"] == "gauss"  # stored as given, checked by fit
    clone(imp)  # (clone checks that every argument is stored as the same object)
    assert not any(hasattr(imp, a) for a in ("engine_", "config_", "vars_", "geometry_", "epochs_run_"))
    assert imp.history == {} and "not fitted" in repr(imp)
    with pytest.raises(ValueError, match="unknown engine"):
        imp.fit(grid)
    with pytest.raises(ValueError, match="invalid parameter 'neighbors'.*neighbours"):
        imp.set_params(neighbors=4)
    imp.set_params(engine="spa", kernel="matern52", mask=None, transforms=None, **TINY)
    twin = clone(imp)
    assert twin.get_params() == imp.get_params() and twin is not imp
    imp.fit(grid)
    assert imp.config_.kernel == "matern52" and imp.vars_ == ["v0", "v1", "v2"] and imp.epochs_run_ == 1
    assert not hasattr(clone(imp), "engine_")
    assert imp.set_params(neighbours=6).fit(grid).config_.neighbours == 6
    with pytest.warns(FutureWarning, match="transform= is now called transforms="):
        out = impute(grid, ["v0"], transform={"v0": None}, **TINY)
    assert "transforms={'v0': None}" in out.attrs["history"]
    with pytest.raises(ValueError, match="unknown option.*colour.*known options: .*beta"):
        impute(grid, colour="red", **TINY)
    with pytest.raises(TypeError, match="transform"):
        GPVAEImputer(transform="log")


# ------------------------------------------------------------------ bit-exact observed values
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    observed=hnp.arrays(bool, (5, 6, 2)),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_observed_values_are_returned_bit_for_bit(observed, dtype, seed):
    observed[0, 0] = True  # every variable has an observed value
    rng = np.random.default_rng(seed)
    # each variable in its own units (1e-8 to 1e8), its values over four orders of magnitude
    unit = 10.0 ** rng.integers(-8, 8, size=2)
    raw = (rng.normal(size=(5, 6, 2)) * 10.0 ** rng.integers(-2, 3, size=(5, 6, 2)) * unit).astype(dtype)
    values = np.where(observed, raw, np.nan).astype(dtype)
    ds = xr.Dataset(
        {f"v{j}": (("y", "x"), values[..., j]) for j in range(2)},
        coords={"y": np.arange(5.0), "x": np.linspace(0, 1, 6)},
    )
    out = impute(ds, **TINY)
    for j in range(2):
        v = out[f"v{j}"].values
        assert v.dtype == dtype
        assert _same_bits(v[observed[..., j]], values[..., j][observed[..., j]])
        assert np.isfinite(v).all()


# ------------------------------------------------------------------ CF file round trip
@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:2]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.delenv("CF_STANDARD_NAME_TABLE", raising=False)


def _high_failures(results):
    out = []

    def walk(items):
        for r in items:
            if r.value is not None and r.value[0] < r.value[1] and r.weight == 3:
                out.append((r.name, r.msgs))
            walk(r.children)

    walk(results)
    return out


def _cf_grid() -> xr.Dataset:
    """A CF-clean (z, y, x) input: projected coordinates with standard names and units."""
    ds = make_gaussian_field((3, 7, 6), missing=0.4, seed=8, extent=(20.0, 700.0, 600.0), units="m")
    for d, sn in (
        ("x", "projection_x_coordinate"),
        ("y", "projection_y_coordinate"),
        ("z", "depth"),
    ):
        ds[d].attrs["standard_name"] = sn
    ds.z.attrs["positive"] = "down"
    return ds.assign(k=np.exp(ds.v0).assign_attrs(units="m2", long_name="permeability"))


def test_netcdf_round_trip_passes_the_cf_checker(tmp_path, offline):
    pytest.importorskip("compliance_checker")
    from compliance_checker.suite import CheckSuite

    ds = _cf_grid()
    out = impute(ds, ["k", "v1"], transforms={"k": "log"}, mask=ds.x < 500, epochs=3, **FAST)
    path = geogpvae.to_netcdf(out, tmp_path / "g.nc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        CheckSuite.load_all_available_checkers()
    cs = CheckSuite()
    nc = cs.load_dataset(str(path))
    try:
        ((_, (groups, errors)),) = cs.run_all(nc, ["cf:1.8"], skip_checks=[]).items()
        assert errors == {} and _high_failures(groups) == []
    finally:
        nc.close()
    with geogpvae.open_dataset(path) as back:
        for v in ("k", "k_std", "k_imputed", "v1", "v1_std", "v1_imputed", "v2"):
            assert _same_bits(back[v].values, out[v].values), v
            assert back[v].attrs["long_name"] == out[v].attrs["long_name"]
        assert back.attrs["history"] == out.attrs["history"]


# ------------------------------------------------------------------ accuracy
def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


def test_accuracy_and_coverage_on_a_synthetic_field():
    ds, truth = make_gaussian_field((30, 30), missing=0.5, seed=0, return_truth=True)
    out = impute(ds, epochs=40, **FAST)
    errs, base, z = [], [], []
    for v in ds.data_vars:
        hidden = ds[v].isnull().values
        t = truth[v].values[hidden]
        errs.append(out[v].values[hidden] - t)
        base.append(float(ds[v].mean()) - t)
        z.append(np.abs(out[v].values[hidden] - t) / out[f"{v}_std"].values[hidden])
    rmse, rmse_mean = _rmse(np.concatenate(errs), 0), _rmse(np.concatenate(base), 0)
    coverage = float(np.mean(np.concatenate(z) < 1.959964))
    assert rmse < 0.7 * rmse_mean, (rmse, rmse_mean)
    assert 0.85 <= coverage <= 0.99, coverage


@pytest.mark.data
def test_jura_cd_at_validation_sites(data_dir):
    jura = load_jura(data_dir)
    validation = (jura.split == "validation").values
    truth = jura.Cd.values[validation]
    hidden = jura.assign(Cd=jura.Cd.where(~(jura.split == "validation")))
    out = impute(hidden, neighbours=10, progress=False)  # package defaults: 1000 full-batch steps
    assert list(out.Cd_imputed.values[validation]) == [1] * 100
    rmse = _rmse(out.Cd.values[validation], truth)
    mean_predictor = _rmse(np.nanmean(hidden.Cd.values), truth)
    assert abs(mean_predictor - 0.695) < 0.001
    assert rmse < mean_predictor, (rmse, mean_predictor)


def test_grid_in_metres_trains_in_cell_steps_and_new_grids_use_the_same_scales(tmp_path):
    base = make_gaussian_field((6, 10, 8), missing=0.4, seed=5)
    steps = {"z": 0.6, "y": 3.0, "x": 6.0}  # thin layers, wide cells, as in a reservoir model
    ds = base.assign_coords({d: base[d] * 0 + np.arange(base.sizes[d]) * s for d, s in steps.items()})
    for d in steps:
        ds[d].attrs["units"] = "m"
    imp = GPVAEImputer(epochs=2, **FAST).fit(ds)
    scales = {a.names[0]: a.scale for a in imp.geometry_.axes}
    assert scales == pytest.approx({d: 1 / s for d, s in steps.items()})
    # a finer grid is scaled with the training steps, not its own
    fine = xr.Dataset(coords={"z": np.arange(0, 3.0, 0.3), "y": [0.0, 1.5, 3.0], "x": [0.0, 6.0]})
    loaded = GPVAEImputer.load(imp.save(tmp_path / "m.pt"), progress=False)
    assert {a.names[0]: a.scale for a in loaded.geometry_.axes} == scales
    xr.testing.assert_identical(loaded.predict(fine).drop_attrs(), imp.predict(fine).drop_attrs())


def test_predict_on_coordinates_alone_keeps_the_training_dim_order(grid):
    # a lon/lat model lists its coordinates (lon, lat); a grid of coordinates alone, with no
    # variable to set the order, comes back as the field was: (lat, lon)
    field = grid.rename(x="lon", y="lat").assign_coords(
        lon=np.linspace(5.0, 8.0, grid.sizes["x"]), lat=np.linspace(45.0, 48.0, grid.sizes["y"])
    )
    field.lon.attrs["units"], field.lat.attrs["units"] = "degrees_east", "degrees_north"
    imp = GPVAEImputer(**TINY).fit(field)
    assert imp.geometry_.names == ["lon", "lat"] and field.v0.dims == ("lat", "lon")
    new = xr.Dataset(coords={"lon": ("lon", [5.5, 6.5, 7.5], field.lon.attrs),
                             "lat": ("lat", [45.5, 46.5], field.lat.attrs)})
    assert imp.predict(new).v0.dims == ("lat", "lon")
    # a dim the training field lacks (scattered sites) follows those it shares: none here
    sites = xr.Dataset(coords={"lon": ("site", [5.5, 6.0]), "lat": ("site", [46.0, 47.0])})
    assert imp.predict(sites).v0.dims == ("site",)


def test_impute_warns_of_nemo_placeholder_cells_and_keeps_observed_values():
    # NEMO's eliminated land domains (nav_lon = nav_lat = 0, no data): without a mask they would
    # be filled as places at 0 N, 0 E, and a warning says so; with the mask it proposes, they are
    # left out (NaN); observed values come back unchanged either way
    j, i = np.meshgrid(np.arange(20), np.arange(30), indexing="ij")
    lon, lat = -40.0 + 30.0 * i / 29 + 0.1 * j, 30.0 + 20.0 * j / 19 - 0.05 * i
    lon[3:8, 10:16] = lat[3:8, 10:16] = 0.0
    rng = np.random.default_rng(0)
    sst = 15.0 + np.sin(np.radians(4 * lon)) + 0.3 * (50.0 - lat) + 0.1 * rng.normal(size=lon.shape)
    sst[rng.random(sst.shape) < 0.2] = np.nan
    sst[3:8, 10:16] = np.nan
    ds = xr.Dataset({"sst": (("y", "x"), sst)},
                    coords={"nav_lon": (("y", "x"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
                            "nav_lat": (("y", "x"), lat, {"standard_name": "latitude", "units": "degrees_north"})})
    with pytest.warns(UserWarning, match=r"30 cells \(y, x\) have nav_lon = nav_lat = 0 exactly"):
        out = impute(ds, vars=["sst"], seed=0, **TINY)
    observed = np.isfinite(sst)
    assert _same_bits(out.sst.values[observed], sst[observed])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", TrainingWarning)  # TINY's budget
        masked = impute(ds, vars=["sst"], mask=(ds.nav_lon != 0) | (ds.nav_lat != 0), seed=0, **TINY)
    assert _same_bits(masked.sst.values[observed], sst[observed])
    assert np.isnan(masked.sst.values[3:8, 10:16]).all() and np.isfinite(masked.sst.values[~observed & (lat != 0)]).all()
