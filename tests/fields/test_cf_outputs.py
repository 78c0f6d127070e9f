"""Every kind of output geogpvae writes passes the CF-1.8 checker and opens in the usual tools.

One test per output kind: Jura (scattered sites), SPE10 (a 3-D reservoir grid with
log-modelled permeability), the ``demo`` command and a prediction on a new grid. The models
are tiny (few epochs, small networks): these tests check metadata, not accuracy.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae import plot
from geogpvae.cli import main
from geogpvae.datasets import MILLIDARCY, load_jura, load_spe10, make_gaussian_field
from geogpvae.fields.labelling import point_geometry

FAST = {"neighbours": 6, "encoder_hidden": (16, 16), "decoder_hidden": (16, 16), "samples": 8,
        "progress": False}


@pytest.fixture(scope="module")
def checker():
    pytest.importorskip("compliance_checker")
    from compliance_checker.suite import CheckSuite

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        CheckSuite.load_all_available_checkers()

    def failures(path: Path) -> list[tuple[int, str, list[str]]]:
        cs = CheckSuite()
        nc = cs.load_dataset(str(path))
        try:
            (_, (groups, errors)), = cs.run_all(nc, ["cf:1.8"], skip_checks=[]).items()
        finally:
            nc.close()
        assert errors == {}, f"the checker crashed: {errors}"
        out = []

        def walk(items):
            for r in items:
                if r.value is not None and r.value[0] < r.value[1]:
                    out.append((r.weight, r.name, r.msgs))
                walk(r.children)

        walk(groups)
        return out

    return failures


def _assert_clean(checker, path: Path) -> None:
    """No error and no warning: every scored CF-1.8 check passes."""
    assert checker(path) == []


def _cdo_reads(path: Path) -> str:
    cdo = shutil.which("cdo")
    if cdo is None:
        pytest.skip("cdo not on PATH (Debian/Ubuntu: apt-get install cdo)")
    res = subprocess.run([cdo, "-s", "sinfon", str(path)], capture_output=True, text=True,
                         timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert "Unsupported array structure" not in res.stderr, res.stderr
    return res.stdout


def _hide(ds: xr.Dataset, names, fraction=0.5, seed=0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    out = ds.copy()
    for name in names:
        out[name] = ds[name].where(rng.random(ds[name].shape) >= fraction)
    return out


# ------------------------------------------------------------------ the four output kinds
def test_jura_output_is_a_cf_point_collection(data_dir, tmp_path, checker):
    jura = load_jura(data_dir)
    ds = jura.assign(Cd=jura.Cd.where(jura.split != "validation"))
    out = geogpvae.impute(ds, vars=["Cd", "Ni", "Zn"], epochs=2, **FAST)
    path = geogpvae.to_netcdf(out, tmp_path / "jura.nc")
    _assert_clean(checker, path)
    with xr.open_dataset(path) as back:
        assert back.attrs["featureType"] == "point"
        assert back.x.attrs["standard_name"] == "projection_x_coordinate"
        assert "axis" not in back.x.attrs  # CF keeps axis for coordinate variables
        assert back.Cd_imputed.sum() == 100
    assert "Cd_imputed" in _cdo_reads(path)


def test_spe10_output_has_udunits_permeability_and_projection_axes(data_dir, tmp_path, checker):
    spe = load_spe10(data_dir=data_dir, downsample=8).isel(z=slice(0, 4))
    ds = _hide(spe, ["porosity", "kx"])
    out = geogpvae.impute(ds, vars=["porosity", "kx"], transforms={"kx": "log"}, epochs=2, **FAST)
    path = geogpvae.to_netcdf(out, tmp_path / "spe10.nc")
    _assert_clean(checker, path)
    with xr.open_dataset(path) as back:
        assert back.kx.attrs["units"] == back.kx_std.attrs["units"] == MILLIDARCY
        assert "(mD)" in back.kx.attrs["long_name"]
        assert back.x.attrs["standard_name"] == "projection_x_coordinate"
        assert back.y.attrs["standard_name"] == "projection_y_coordinate"
        assert "featureType" not in back.attrs
    assert "kx_imputed" in _cdo_reads(path)


def test_demo_output_passes(tmp_path, checker, monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    path = tmp_path / "demo.nc"
    assert main(["demo", str(path), "--shape", "12,12", "--epochs", "2", "-q"]) == 0
    capsys.readouterr()
    _assert_clean(checker, path)
    import netCDF4

    with netCDF4.Dataset(path) as nc:  # plain char attributes, as the other tools write them
        text = {k: nc.getncattr(k) for k in nc.ncattrs() if isinstance(nc.getncattr(k), str)}
    assert text and all(v.isascii() for v in text.values()), {k: v for k, v in text.items() if not v.isascii()}
    assert text["geogpvae_coordinates"] == "y multiplied by 11; x multiplied by 11"  # modelled in grid steps


def test_prediction_on_a_new_grid_passes(tmp_path, checker):
    ds = make_gaussian_field((16, 16), n_vars=2, seed=1)
    imp = geogpvae.GPVAEImputer(epochs=2, **FAST).fit(ds)
    grid = xr.Dataset(coords={"y": np.linspace(0, 1, 5), "x": np.linspace(0, 1, 7)})
    for c in ("x", "y"):
        grid[c].attrs = dict(ds[c].attrs)
    pred = imp.predict(grid)
    assert pred.attrs["title"] == "v0, v1 predicted by geogpvae"
    path = geogpvae.to_netcdf(pred, tmp_path / "predict.nc")
    _assert_clean(checker, path)


def test_scattered_synthetic_output_round_trips_as_points(tmp_path, checker):
    ds = make_gaussian_field(n_points=60, n_vars=2, seed=2)
    out = geogpvae.impute(ds, epochs=2, **FAST)
    path = geogpvae.to_netcdf(out, tmp_path / "points.nc")
    _assert_clean(checker, path)
    with xr.open_dataset(path) as back:
        assert back.attrs["featureType"] == "point"
        # the file is read back as scattered data: x and y are still found as coordinates
        again = geogpvae.impute(back.drop_vars([v for v in back.data_vars if "_" in v]),
                                epochs=1, **FAST)
    assert again.attrs["geogpvae_coordinates"] == out.attrs["geogpvae_coordinates"]


def test_bare_lon_lat_survey_comes_back_labelled_as_cf_points(tmp_path, checker):
    # lon/lat found by their names alone: the output says what they are, in CF terms
    rng = np.random.default_rng(5)
    v = rng.normal(size=40)
    v[::7] = np.nan
    ds = xr.Dataset({"v": ("site", v, {"units": "mg kg-1", "long_name": "cadmium"})},
                    coords={"lon": ("site", rng.uniform(5, 7, 40)),
                            "lat": ("site", rng.uniform(46, 47, 40), {"units": "degree_north"})})
    out = geogpvae.impute(ds, epochs=1, **FAST)
    assert out.attrs["title"] == "v imputed by geogpvae" and "title" not in ds.attrs  # none given
    titled = geogpvae.impute(ds.assign_attrs(title="a survey"), epochs=1, **FAST)
    assert titled.attrs["title"] == "a survey"  # a title given is kept
    assert out.lon.attrs == {"standard_name": "longitude", "units": "degrees_east"}
    assert out.lat.attrs == {"standard_name": "latitude", "units": "degree_north"}  # kept as given
    assert ds.lon.attrs == {}  # the input is not modified
    path = geogpvae.to_netcdf(out, tmp_path / "survey.nc")
    _assert_clean(checker, path)
    with xr.open_dataset(path) as back:
        assert back.attrs["featureType"] == "point"


# ------------------------------------------------------------------ the rule itself
def test_point_geometry_leaves_grids_and_declared_features_alone():
    grid = make_gaussian_field((6, 5), n_vars=1)
    assert point_geometry(grid) is grid
    pts = make_gaussian_field(n_points=10, n_vars=1)
    declared = pts.assign_attrs(featureType="trajectory")
    assert point_geometry(declared) is declared
    marked = point_geometry(pts)
    assert marked.attrs["featureType"] == "point" and "featureType" not in pts.attrs
    # the input keeps its attributes
    assert pts.x.attrs.get("axis") == "X" and "axis" not in marked.x.attrs
    # an auxiliary coordinate without a standard name keeps its axis (it is how it is found)
    bare = pts.assign_coords(x=("site", pts.x.values, {"axis": "X", "units": "km"}))
    assert point_geometry(bare).x.attrs["axis"] == "X"


def test_millidarcy_reads_md_in_figures():
    assert plot.pretty_units(MILLIDARCY) == "mD"
    da = xr.DataArray([1.0], attrs={"long_name": "permeability in x (mD)", "units": MILLIDARCY})
    assert plot.label_for(da) == "permeability in x (mD)"
    da = xr.DataArray([1.0], attrs={"long_name": "permeability in x", "units": MILLIDARCY})
    assert plot.label_for(da) == "permeability in x [mD]"
