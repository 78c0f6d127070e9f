"""Datasets to engine arrays and back: layouts, coordinates, masks, transforms (no training)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import xarray as xr

from geogpvae.datasets import make_gaussian_field
from geogpvae.errors import CoordinateWarning, InputError
from geogpvae.fields import stacking, variables
from geogpvae.fields.geometry import EARTH_RADIUS_KM, Geometry, sphere_positions
from geogpvae.fields.stacking import prepare_field


def _grid(dims=("y", "x"), sizes=(4, 5), seed=0, coords=True, missing=0.3):
    rng = np.random.default_rng(seed)
    shape = tuple(sizes)
    data = {}
    for name in ("a", "b"):
        v = rng.normal(size=shape)
        v[rng.random(shape) < missing] = np.nan
        data[name] = (dims, v, {"units": "1"})
    c = (
        {
            d: (d, np.sort(rng.uniform(0, 10, n)), {"units": "m"})
            for d, n in zip(dims, shape, strict=True)
        }
        if coords
        else {}
    )
    return xr.Dataset(data, coords=c)


def _sites(n=30, seed=0, lonlat=True):
    rng = np.random.default_rng(seed)
    coords = {
        "x": ("site", rng.uniform(0, 5, n), {"units": "km"}),
        "y": ("site", rng.uniform(0, 5, n), {"units": "km"}),
    }
    if lonlat:
        coords["lon"] = ("site", 6.8 + rng.uniform(0, 0.05, n), {"units": "degrees_east"})
        coords["lat"] = ("site", 47.1 + rng.uniform(0, 0.05, n), {"units": "degrees_north"})
    cd = rng.lognormal(0, 0.5, n)
    cd[:5] = np.nan
    return xr.Dataset(
        {
            "Cd": ("site", cd, {"units": "mg kg-1"}),
            "Ni": ("site", rng.normal(20, 5, n), {"units": "mg kg-1"}),
            "Rock": (
                "site",
                rng.integers(1, 4, n).astype(np.int8),
                {"flag_values": np.array([1, 2, 3], np.int8), "flag_meanings": "a b c"},
            ),
        },
        coords=coords,
    )


# ------------------------------------------------------------------ gridded layouts
def test_grid_2d_stacks_in_c_order_with_coordinates():
    ds = _grid()
    f = prepare_field(ds)
    assert f.names == ["a", "b"] and f.dims == ("y", "x") and f.shape == (4, 5)
    yy, xx = np.meshgrid(ds.y.values, ds.x.values, indexing="ij")
    np.testing.assert_array_equal(f.x, np.stack([yy.ravel(), xx.ravel()], 1))
    np.testing.assert_array_equal(f.values[:, 0], ds.a.values.ravel())
    assert f.geometry.names == ["y", "x"] and f.x.dtype == np.float64


def test_grid_3d_dims_in_any_order_descending_irregular():
    ds = _grid(dims=("z", "y", "x"), sizes=(3, 4, 5))
    ds = ds.assign_coords(z=("z", [30.0, 12.5, 1.0], {"units": "m"}))  # descending, uneven
    turned = ds.transpose("x", "z", "y")
    a, b = prepare_field(ds), prepare_field(turned)
    assert b.dims == ("x", "z", "y")
    # the same cells with the same coordinates, only in another order
    rows_a = {tuple(r[[2, 0, 1]]): v for r, v in zip(a.x, a.values[:, 0], strict=True)}
    for r, v in zip(b.x, b.values[:, 0], strict=True):
        got = rows_a[tuple(r[[0, 1, 2]])]
        assert (np.isnan(got) and np.isnan(v)) or got == v
    assert b.geometry.names == ["x", "z", "y"]
    np.testing.assert_array_equal(np.unique(a.x[:, 0]), [1.0, 12.5, 30.0])


def test_grid_dim_without_coordinate_uses_positions_with_warning():
    ds = _grid(coords=False)
    with pytest.warns(CoordinateWarning) as caught:
        f = prepare_field(ds)
    assert [str(w.message)[:34] for w in caught] == [
        f"dim {d!r} has no coordinate variable" for d in ("y", "x")
    ]
    assert caught[0].filename == __file__  # attributed to the caller, not to geogpvae
    np.testing.assert_array_equal(np.unique(f.x[:, 0]), np.arange(4.0))
    assert [a.kind for a in f.geometry.axes] == ["index", "index"]
    # naming a dim in coords= uses its positions without complaint
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = prepare_field(ds, coords=["x", "y"])
    assert g.geometry.names == ["x", "y"]


def test_dim_without_coordinate_names_the_2d_coordinate_left_unused():
    # well logs whose measured depth differs per well: a 2-D (well, depth) coordinate beside a
    # dim 'depth' without one; the warning must name it and the coords= that uses it
    rng = np.random.default_rng(0)
    md = 1500.0 + 2.0 * np.arange(6)[None, :] + rng.uniform(0, 300, (4, 1))
    ds = xr.Dataset(
        {"phi": (("well", "depth"), rng.normal(size=(4, 6)), {"units": "1"})},
        coords={"x": ("well", rng.uniform(0, 5000, 4), {"standard_name": "projection_x_coordinate", "units": "m"}),
                "y": ("well", rng.uniform(0, 5000, 4), {"standard_name": "projection_y_coordinate", "units": "m"}),
                "md": (("well", "depth"), md, {"units": "m", "positive": "down"})})
    with pytest.warns(CoordinateWarning) as caught:
        f = prepare_field(ds)
    assert f.geometry.names == ["x", "y", "depth"]
    (message,) = [str(w.message) for w in caught]
    assert "dim 'depth' has no coordinate variable" in message
    assert "coordinate 'md' ('well', 'depth') lies on it" in message
    assert "coords=['x', 'y', 'md'] (--coords x,y,md)" in message
    assert "assign_coords" not in message  # it has one: naming it is the fix
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert prepare_field(ds, coords=["x", "y", "md"]).geometry.names == ["x", "y", "md"]


def test_grid_dim_with_unrecognised_coordinate_uses_it():
    ds = _grid(dims=("layer", "x"), sizes=(3, 4)).assign_coords(layer=("layer", [1.0, 2.0, 4.0]))
    f = prepare_field(ds)
    assert f.geometry.names == ["x", "layer"]  # detected ones first, then the grid's others
    np.testing.assert_array_equal(np.unique(f.x[:, 1]), [1.0, 2.0, 4.0])


def test_mixed_layout_station_time_series():
    rng = np.random.default_rng(1)
    t = np.array(["2020-01-01", "2020-01-03", "2020-01-10"], dtype="datetime64[ns]")
    ds = xr.Dataset(
        {"v": (("time", "site"), rng.normal(size=(3, 4)))},
        coords={"time": t, "x": ("site", rng.random(4)), "y": ("site", rng.random(4))},
    )
    f = prepare_field(ds)
    assert f.geometry.names == ["time", "x", "y"]
    np.testing.assert_array_equal(np.unique(f.x[:, 0]), [0.0, 2.0, 9.0])


# ------------------------------------------------------------------ scattered layouts
def test_scattered_prefers_projected_xy_over_lonlat_and_skips_flags():
    ds = _sites()
    f = prepare_field(ds)
    assert f.names == ["Cd", "Ni"]  # Rock is a flag variable
    assert f.geometry.names == ["x", "y"] and f.x.shape == (30, 2)
    np.testing.assert_array_equal(f.x[:, 0], ds.x.values)
    g = prepare_field(ds, coords=["lon", "lat"])
    assert [a.kind for a in g.geometry.axes] == ["sphere"] and g.x.shape == (30, 3)


def test_scattered_without_coordinates_is_refused_with_advice():
    ds = _sites().drop_vars(["x", "y", "lon", "lat"]).assign_coords(site=np.arange(30))
    with pytest.raises(InputError, match=r"coords=\[") as err:
        prepare_field(ds)
    assert "'site'" in str(err.value)
    f = prepare_field(ds, coords="site")  # the user may choose the index
    assert f.x.shape == (30, 1)


def test_data_variable_coordinates_only_when_named():
    ds = _sites(lonlat=False).reset_coords(["x", "y"])  # x, y as data variables
    with pytest.raises(InputError, match="no coordinates found"):
        prepare_field(ds, ["Cd", "Ni"])
    f = prepare_field(ds, coords=["x", "y"])  # named: used, and not imputed
    assert f.names == ["Cd", "Ni"] and f.geometry.names == ["x", "y"]


def test_table_columns_lon_lat_are_named_in_the_refusal():
    # pandas' df.to_xarray(): a RangeIndex 'index' coordinate, lon and lat as data variables
    table = _sites(lonlat=True).drop_vars(["x", "y"]).reset_coords(["lon", "lat"])
    table = table.rename(site="index").assign_coords(index=np.arange(30))
    for var in ("lon", "lat"):
        table[var].attrs = {}  # a CSV column has no units
    with pytest.raises(InputError, match=r"data variables \['lon', 'lat'\] look like coordinates") as err:
        prepare_field(table, ["Cd", "Ni"])
    assert "coords=['lon', 'lat']" in str(err.value) and "coords=['x', 'y']" not in str(err.value)
    f = prepare_field(table, ["Cd", "Ni"], coords=["lon", "lat"])  # the advice works
    assert [a.kind for a in f.geometry.axes] == ["sphere"]


def test_an_unrecognised_coordinate_of_scattered_sites_is_warned_of():
    # soil samples at one place and two depths, the depth in a column named depth_cm
    ds = _sites(lonlat=False).assign_coords(depth_cm=("site", np.tile([10.0, 30.0], 15)))
    with pytest.warns(CoordinateWarning, match=r"\['depth_cm'\] on 'site' not used.*coords=\['x', 'y', 'depth_cm'\]"):
        f = prepare_field(ds)
    assert f.geometry.names == ["x", "y"]  # the detection itself is unchanged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(ds.drop_vars("depth_cm").assign_coords(site=np.arange(30)))  # an index: no word


def test_duplicate_locations_are_kept_as_separate_points():
    ds = _sites(lonlat=False)
    ds = ds.assign_coords(
        x=ds.x.copy(data=np.repeat(ds.x.values[::2], 2)),
        y=ds.y.copy(data=np.repeat(ds.y.values[::2], 2)),
    )
    f = prepare_field(ds)
    assert f.x.shape == (30, 2) and len(np.unique(f.x, axis=0)) == 15
    np.testing.assert_array_equal(f.values[:, 1], ds.Ni.values)


# ------------------------------------------------------------------ lon/lat and time
def test_sphere_positions_across_dateline_and_near_pole():
    pos = sphere_positions(
        np.array([179.9, -179.9, 0.0, 180.0]), np.array([0.0, 0.0, 89.9, 89.9])
    )
    np.testing.assert_allclose(np.linalg.norm(pos, axis=1), EARTH_RADIUS_KM)
    dateline = np.linalg.norm(pos[0] - pos[1])
    pole = np.linalg.norm(pos[2] - pos[3])
    great_circle = EARTH_RADIUS_KM * np.deg2rad(0.2)
    assert abs(dateline - great_circle) < 1e-3 * great_circle  # ~22 km, not 359.8 degrees
    assert abs(pole - great_circle) < 1e-3 * great_circle


def _rotated_grid() -> xr.Dataset:
    """A CORDEX-like rotated-pole grid: rlat/rlon (grid_latitude/grid_longitude, axis Y/X) and
    the true lat/lon as 2-D auxiliary coordinates, the rotated sphere turned by a rotation."""
    rlat, rlon = np.linspace(-20.0, 20.0, 9), np.linspace(-25.0, 15.0, 11)
    la, lo = np.meshgrid(np.radians(rlat), np.radians(rlon), indexing="ij")
    unit = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
    tilt, turn = np.radians(50.75), np.radians(18.0)  # a pole at 39.25 N, turned about z
    rx = np.array([[np.cos(tilt), 0, -np.sin(tilt)], [0, 1, 0], [np.sin(tilt), 0, np.cos(tilt)]])
    rz = np.array([[np.cos(turn), -np.sin(turn), 0], [np.sin(turn), np.cos(turn), 0], [0, 0, 1]])
    true = unit @ (rz @ rx).T
    lat, lon = np.degrees(np.arcsin(true[..., 2])), np.degrees(np.arctan2(true[..., 1], true[..., 0]))
    values = np.sin(la * 5) + np.cos(lo * 3)
    values[2:4, 3:6] = np.nan
    return xr.Dataset(
        {"tas": (("rlat", "rlon"), values, {"units": "K", "grid_mapping": "rotated_pole"}),
         "rotated_pole": ((), 0, {"grid_mapping_name": "rotated_latitude_longitude",
                                  "grid_north_pole_latitude": 39.25, "grid_north_pole_longitude": -162.0})},
        coords={"rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees", "axis": "Y"}),
                "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees", "axis": "X"}),
                "lat": (("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
                "lon": (("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"})})


def test_a_rotated_pole_grid_is_on_the_sphere():
    # rlat/rlon are latitude and longitude about a moved pole: the model's distances are the
    # great-circle distances of the true lat/lon (not degrees taken as flat x/y), and the true
    # 2-D lat/lon, the same places, are left without a warning
    ds = _rotated_grid()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoordinateWarning)
        f = prepare_field(ds, ["tas"])
    assert [a.kind for a in f.geometry.axes] == ["sphere"] and f.geometry.names == ["rlon", "rlat"]
    true = sphere_positions(ds.lon.values.ravel(), ds.lat.values.ravel())
    model = np.linalg.norm(f.x[:, None] - f.x[None], axis=-1)
    great = np.linalg.norm(true[:, None] - true[None], axis=-1)
    np.testing.assert_allclose(model / model.max(), great / great.max(), atol=1e-5)


def test_lonlat_grid_neighbours_across_dateline():
    lon = np.array([178.0, 179.0, 179.9, -179.9, -179.0, -178.0])
    ds = xr.Dataset(
        {"v": (("lat", "lon"), np.ones((2, 6)))},
        coords={
            "lat": ("lat", [10.0, 11.0], {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
        },
    )
    f = prepare_field(ds)
    assert f.geometry.axes[0].kind == "sphere" and f.x.shape == (12, 3)
    d = np.linalg.norm(f.x[2] - f.x, axis=1)  # from (10N, 179.9E)
    nearest = int(np.argsort(d)[1])
    assert lon[nearest % 6] == -179.9  # the next point is across the dateline


def test_curvilinear_lonlat_and_latitude_range():
    lon = np.array([[0.0, 1.0], [0.5, 1.5]])
    lat = np.array([[60.0, 60.0], [61.0, 61.0]])
    ds = xr.Dataset(
        {"v": (("j", "i"), np.ones((2, 2)))},
        coords={"lon": (("j", "i"), lon), "lat": (("j", "i"), lat)},
    )
    f = prepare_field(ds)
    np.testing.assert_allclose(f.x, sphere_positions(lon.ravel(), lat.ravel()))
    bad = ds.assign_coords(lat=(("j", "i"), lat + 40))
    with pytest.raises(InputError, match=r"'lat' has values outside \[-90, 90\]"):
        prepare_field(bad)


def test_time_becomes_days_since_earliest_and_keeps_origin():
    t = np.array(["2021-03-02T12:00", "2021-03-01", "2021-03-05"], dtype="datetime64[ns]")
    ds = xr.Dataset({"v": (("time", "x"), np.ones((3, 2)))}, coords={"time": t, "x": [0.0, 1.0]})
    f = prepare_field(ds, coord_scale={"time": 2.0})
    axis = f.geometry.axes[0]
    assert axis.kind == "time" and axis.origin.startswith("2021-03-01T00:00")
    np.testing.assert_allclose(np.unique(f.x[:, 0]), [0.0, 3.0, 8.0])  # 0, 1.5, 4 days x 2
    later = ds.assign_coords(time=t + np.timedelta64(1, "D"))
    g = stacking.stack_field(later, ["v"], f.geometry, {"v": None})
    np.testing.assert_allclose(np.unique(g.x[:, 0]), [2.0, 5.0, 10.0])  # same origin


def test_times_and_numbers_are_not_taken_for_each_other():
    """NumPy reads the number 60 as 60 ns after 1970, and a date as nanoseconds since 1970."""
    t = np.array(["2021-03-01", "2021-03-02", "2021-03-05"], dtype="datetime64[ns]")
    ds = xr.Dataset({"v": (("time", "x"), np.ones((3, 2)))}, coords={"time": t, "x": [0.0, 1.0]})
    f = prepare_field(ds)
    for numbers in (np.arange(60, 62), np.arange(60.0, 62.0)):
        with pytest.raises(InputError, match=r"'time' holds (int|float)64 values, but the model was trained on dates"):
            stacking.locations(xr.Dataset(coords={"time": numbers, "x": [0.0]}), f.geometry)
    x, _, _ = stacking.locations(xr.Dataset(coords={"time": ["2021-03-04"], "x": [0.0]}), f.geometry)
    assert x[0, 0] == 3.0  # dates as text are still read as dates
    plain = prepare_field(ds.assign_coords(time=[0.0, 1.0, 4.0]))
    with pytest.raises(InputError, match=r"'time' holds datetime64\[ns\] values, but the model was trained on plain numbers"):
        stacking.locations(xr.Dataset(coords={"time": t[:1], "x": [0.0]}), plain.geometry)
    cftime = pytest.importorskip("cftime")
    noleap = np.array([cftime.DatetimeNoLeap(2001, 3, 1)], dtype=object)
    with pytest.raises(InputError, match=r"'time' holds object values, but the model was trained on plain numbers"):
        stacking.locations(xr.Dataset(coords={"time": noleap, "x": [0.0]}), plain.geometry)


def test_longitudes_and_latitudes_in_radians_are_refused():
    ds = _sites(lonlat=True).drop_vars(["x", "y"])
    f = prepare_field(ds)
    assert f.geometry.axes[0].kind == "sphere"
    radians = ds.assign_coords(lon=np.radians(ds.lon).assign_attrs(units="radians"))
    with pytest.raises(InputError, match=r"'lon' is in 'radians', but longitudes and latitudes are taken in degrees"):
        prepare_field(radians)
    with pytest.raises(InputError, match=r"'lon' is in 'radians'"):
        stacking.locations(radians[["lon", "lat"]], f.geometry)
    with pytest.raises(InputError, match=r"'lon' is in 'ddd'"):  # only dd itself is GIS's degrees
        prepare_field(ds.assign_coords(lon=ds.lon.assign_attrs(units="ddd")))
    for units in ("degrees_east", "degree_E", "°E", "ºE", "decimal degrees", "DD"):
        prepare_field(ds.assign_coords(lon=ds.lon.assign_attrs(units=units)))


def test_cftime_coordinate():
    cftime = pytest.importorskip("cftime")
    t = [cftime.DatetimeNoLeap(2001, 2, 28), cftime.DatetimeNoLeap(2001, 3, 1)]
    ds = xr.Dataset({"v": (("time", "x"), np.ones((2, 2)))}, coords={"time": t, "x": [0.0, 1.0]})
    f = prepare_field(ds)
    assert f.geometry.axes[0].kind == "cftime" and f.geometry.axes[0].calendar == "noleap"
    np.testing.assert_allclose(np.unique(f.x[:, 0]), [0.0, 1.0])


# ------------------------------------------------------------------ scaling
def test_coord_scale_multiplies_and_is_checked():
    ds = _grid(dims=("z", "y", "x"), sizes=(2, 3, 3))
    f = prepare_field(ds, coord_scale={"z": 10.0})
    np.testing.assert_allclose(np.unique(f.x[:, 0]), 10 * ds.z.values)
    with pytest.raises(InputError, match=r"coord_scale names \['depth'\]"):
        prepare_field(ds, coord_scale={"depth": 2.0})
    with pytest.raises(InputError, match="positive number"):
        prepare_field(ds, coord_scale={"z": -1.0})
    sites = _sites()
    g = prepare_field(sites, coords=["lon", "lat"], coord_scale={"lat": 2.0})
    np.testing.assert_allclose(np.linalg.norm(g.x, axis=1), 2 * EARTH_RADIUS_KM)
    with pytest.raises(InputError, match="different scales"):
        prepare_field(sites, coords=["lon", "lat"], coord_scale={"lat": 2.0, "lon": 3.0})


def test_geometry_round_trips_through_plain_values():
    ds = _sites()
    f = prepare_field(ds, coords=["lon", "lat"], coord_scale={"lon": 0.5})
    assert Geometry.from_dict(f.geometry.to_dict()) == f.geometry
    assert "sphere" in f.geometry.describe()


# ------------------------------------------------------------------ variables, masks, transforms
def test_detection_limit_text_is_named_with_what_to_decide():
    # a lab's CSV column: numbers, blank cells and below-detection-limit values such as '<0.1'
    ds = _sites(lonlat=False)
    ds["Pb"] = ("site", np.array(["", "12.5", "<0.1"] * 10, dtype=object))
    with pytest.raises(TypeError, match=r"text such as '<0\.1'.*detection limit.*half the limit"):
        variables.select_variables(ds, ["Cd", "Pb"])
    with pytest.warns(CoordinateWarning, match=r"Pb \(object, text such as '<0\.1'\).*detection limit"):
        assert variables.select_variables(ds) == ["Cd", "Ni"]


def test_sample_numbers_of_a_table_are_not_imputed_by_default():
    # pandas' df.to_xarray() keeps a table's sample_id column as a data variable: by default it
    # would enter the model as a variable
    ds = _sites(lonlat=False).assign(sample_id=("site", np.arange(1001, 1031)))
    with pytest.warns(CoordinateWarning, match=r"not imputing \['sample_id'\]: integers increasing along 'site'"):
        assert variables.select_variables(ds) == ["Cd", "Ni"]
    assert variables.select_variables(ds, ["Cd", "sample_id"]) == ["Cd", "sample_id"]  # named: taken
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts = np.random.default_rng(0).integers(0, 50, 30)  # integers that are data, not numbers of rows
        assert variables.select_variables(ds.assign(sample_id=("site", counts))) == ["Cd", "Ni", "sample_id"]
        assert variables.select_variables(ds[["sample_id"]]) == ["sample_id"]  # nothing else: kept


def test_a_complete_variable_named_like_a_coordinate_is_imputed_with_a_word_on_coordinates():
    # a table's depth column read as a data variable: modelled as a variable, not as where the
    # values lie; the warning says how to make it a coordinate
    ds = _sites(lonlat=False)
    depth = ds.assign(depth=("site", np.repeat([0.0, 20.0, 40.0], 10), {"units": "cm"}))
    with pytest.warns(CoordinateWarning, match=r"the data variables \['depth'\] are complete and named like coordinates.*ds.set_coords\(\['depth'\]\)"):
        assert variables.select_variables(depth) == ["Cd", "Ni", "depth"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert variables.select_variables(depth, ["Cd", "depth"]) == ["Cd", "depth"]  # named: no word
        gaps = depth.assign(depth=depth.depth.where(depth.site > 0))  # a missing depth: measured
        assert variables.select_variables(gaps) == ["Cd", "Ni", "depth"]
        assert variables.select_variables(depth[["depth"]]) == ["depth"]  # nothing else
        named = ds.assign(level=("site", np.ones(30), {"standard_name": "depth"}), thick=("site", np.ones(30)))
        with pytest.warns(CoordinateWarning, match=r"\['level'\]"):
            variables.select_variables(named)
        assert prepare_field(depth.set_coords("depth"), ["Cd"]).x.shape == (30, 3)  # then a coordinate
    grid = _grid().assign(depth=("x", np.arange(5.0)))  # beside a gridded variable: left out, not imputed
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert "depth" not in variables.select_variables(grid)
    assert seen and not any("named like coordinates" in str(w.message) for w in seen)


def test_default_variables_skip_outputs_bounds_and_other_dims():
    ds = _grid()
    ds["a_std"] = ds.a.fillna(0.0)
    ds["a_imputed"] = ds.a.notnull().astype(np.int8)
    ds["y_bnds"] = (("y", "nv"), np.zeros((4, 2)))
    ds["y"].attrs["bounds"] = "y_bnds"
    ds["label"] = (("y", "x"), np.full((4, 5), "s"))
    ds["orography"] = ("x", np.ones(5))
    with pytest.warns(CoordinateWarning, match="left out orography"):
        assert variables.select_variables(ds) == ["a", "b"]
    with pytest.raises(TypeError, match="'label' has dtype"):
        variables.select_variables(ds, ["a", "label"])
    with pytest.raises(InputError, match="available: a, b"):
        variables.select_variables(ds, ["c"])
    tie = xr.Dataset({"p": ("i", [1.0]), "q": ("j", [1.0])})
    with pytest.raises(InputError, match="different dims"):
        variables.select_variables(tie)


def test_mask_as_dataarray_and_as_name():
    ds = _grid()
    inside = ds.x > 4.0
    f = prepare_field(ds, mask=inside)
    assert f.domain.shape == (4, 5) and f.domain.sum() == 4 * int(inside.sum())
    assert f.x.shape[0] == f.domain.sum() and (f.x[:, 1] > 4.0).all()
    g = prepare_field(ds.assign(inside=inside), mask="inside")  # bool: never imputed itself
    np.testing.assert_array_equal(f.domain, g.domain)
    h = prepare_field(ds.assign(keep=inside.astype(np.int8)), mask="keep")  # 0/1: not imputed
    assert h.names == ["a", "b"]
    with pytest.raises(InputError, match="must lie on the variables' dims"):
        prepare_field(ds, mask=xr.DataArray([True, False], dims="other"))
    with pytest.raises(InputError, match="mask 'nope' is not a variable"):
        prepare_field(ds, mask="nope")


def test_nonfinite_coordinates_named_only_inside_the_domain():
    ds = _sites(lonlat=False)
    x = ds.x.values.copy()
    x[3] = np.nan
    bad = ds.assign_coords(x=ds.x.copy(data=x))
    with pytest.raises(InputError, match="coordinate 'x' is NaN or infinite at 1 of"):
        prepare_field(bad)
    keep = xr.DataArray(np.isfinite(x), dims="site")
    f = prepare_field(bad, mask=keep)
    assert f.x.shape == (29, 2) and np.isfinite(f.x).all()


def test_transforms_parsed_and_checked():
    assert variables.parse_transforms({"Cd": "LOG", "Ni": "identity"}, ["Cd", "Ni"]) == {
        "Cd": "log",
        "Ni": None,
    }
    assert variables.parse_transforms("log", ["Cd"]) == {"Cd": "log"}
    with pytest.raises(InputError, match="unknown transform 'sqrt' for 'Cd'"):
        variables.parse_transforms({"Cd": "sqrt"}, ["Cd"])
    with pytest.raises(InputError, match="not imputed"):
        variables.parse_transforms({"Zn": "log"}, ["Cd"])
    ds = _sites()
    ds["Ni"][0] = -1.0
    with pytest.raises(
        InputError, match=r"cannot log-transform 'Ni': 1 observed values .*minimum -1"
    ):
        prepare_field(ds, transforms={"Ni": "log"})
    f = prepare_field(ds, transforms={"Cd": "log"})
    np.testing.assert_array_equal(f.log, [True, False])


# ------------------------------------------------------------------ dask and new locations
def test_dask_backed_input_gives_the_same_field():
    pytest.importorskip("dask")
    ds = _grid(dims=("z", "y", "x"), sizes=(3, 4, 5))
    lazy = ds.chunk({"z": 1})
    a, b = prepare_field(ds), prepare_field(lazy)
    np.testing.assert_array_equal(a.x, b.x)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.fingerprint() == b.fingerprint()
    assert lazy.a.chunks is not None  # the input stays lazy


def test_locations_on_a_grid_and_on_a_template():
    f = prepare_field(_sites(lonlat=False))
    grid = xr.Dataset(coords={"y": ("y", [0.0, 1.0, 2.0]), "x": ("x", [0.5, 1.5])})
    x, dims, _ = stacking.locations(grid, f.geometry)
    assert dims == ("y", "x") and x.shape == (6, 2)  # the order the grid gives, not the geometry's
    np.testing.assert_array_equal(x[::2, 0], 0.5)  # columns stay in geometry order: x, then y
    np.testing.assert_array_equal(x[:2, 1], 0.0)
    tmpl = xr.DataArray(np.zeros((3, 2)), dims=("y", "x"), coords=grid.coords)
    x2, dims2, _ = stacking.locations(tmpl, f.geometry)
    assert dims2 == ("y", "x") and x2.shape == (6, 2)
    with pytest.raises(InputError, match="lack coordinate 'y'"):
        stacking.locations(xr.Dataset(coords={"x": [0.0]}), f.geometry)


# --------------------------------------------------------------------------- cell steps
def _reservoir(steps=(0.6096, 3.048, 6.096), sizes=(4, 6, 5), seed=1):
    rng = np.random.default_rng(seed)
    dims = ("z", "y", "x")
    coords = {d: (d, (np.arange(n) + 0.5) * s, {"units": "m"}) for d, n, s in zip(dims, sizes, steps)}
    v = rng.normal(size=sizes)
    v[rng.random(sizes) < 0.3] = np.nan
    return xr.Dataset({"phi": (dims, v)}, coords=coords)


def test_regular_grid_in_metres_is_modelled_in_cell_steps():
    ds = _reservoir()
    field = prepare_field(ds, "phi")
    scales = {a.names[0]: a.scale for a in field.geometry.axes}
    assert scales == pytest.approx({"z": 1 / 0.6096, "y": 1 / 3.048, "x": 1 / 6.096})
    # neighbouring cells are one unit apart along every axis
    for j in range(3):
        steps = np.diff(np.unique(field.x[:, j]))
        np.testing.assert_allclose(steps, 1.0, rtol=1e-9)
    assert "multiplied by 0.164" in field.geometry.describe()  # the scale is shown to the user


def test_coord_scale_changes_the_axes_it_names_and_empty_mapping_disables_cell_steps():
    ds = _reservoir()
    plain = prepare_field(ds, "phi", coord_scale={})
    np.testing.assert_allclose(np.diff(np.unique(plain.x[:, 0])), 0.6096, rtol=1e-9)
    stretched = prepare_field(ds, "phi", coord_scale={"z": 10.0})
    scales = {a.names[0]: a.scale for a in stretched.geometry.axes}
    # z as asked (its metres times 10); y and x keep the cell-step default
    assert scales == pytest.approx({"z": 10.0, "y": 1 / 3.048, "x": 1 / 6.096})
    every = prepare_field(ds, "phi", coord_scale={"z": 10.0, "y": 1.0, "x": 1.0})
    assert {a.names[0]: a.scale for a in every.geometry.axes} == {"z": 10.0, "y": 1.0, "x": 1.0}


def test_cell_steps_only_for_even_plain_number_grids():
    uneven = _reservoir()
    uneven = uneven.assign_coords(x=("x", np.array([0.0, 1.0, 3.0, 4.0, 9.0]), {"units": "m"}))
    assert all(a.scale == 1.0 for a in prepare_field(uneven, "phi").geometry.axes)
    # scattered sites keep their units
    rng = np.random.default_rng(0)
    sites = xr.Dataset(
        {"cd": ("site", rng.normal(size=30))},
        coords={"x": ("site", rng.uniform(0, 5, 30)), "y": ("site", rng.uniform(0, 5, 30))},
    )
    sites["cd"][:5] = np.nan
    assert all(a.scale == 1.0 for a in prepare_field(sites, "cd").geometry.axes)
    # a time axis keeps days, and the other axes keep their units with it
    t = xr.Dataset(
        {"sst": (("time", "y"), rng.normal(size=(4, 6)))},
        coords={"time": ("time", np.arange(4) * np.timedelta64(6, "h") + np.datetime64("2020-01-01")),
                "y": ("y", np.arange(6) * 25.0, {"units": "km"})},
    )
    t["sst"][0, 0] = np.nan
    assert all(a.scale == 1.0 for a in prepare_field(t, "sst").geometry.axes)


def test_a_log_transform_is_proposed_for_heavy_tails_unless_the_user_chose():
    rng = np.random.default_rng(1)
    kx = np.exp(rng.normal(0.0, 2.5, 300))  # 1st to 99th percentile: about 5.6 decades
    thickness = rng.uniform(3.0, 5000.0, 300)  # 3.2 decades: kept linear without a word
    phi = kx / kx.max()
    phi[0] = 0.0  # a zero: no log transform possible, none proposed
    ds = xr.Dataset({"kx": ("site", kx), "thickness": ("site", thickness), "phi": ("site", phi)},
                    coords={"x": ("site", rng.uniform(0, 1, 300)), "y": ("site", rng.uniform(0, 1, 300))})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prepare_field(ds)
    (text,) = [str(w.message) for w in seen]
    assert text.startswith("kx: positive values spanning 5.") and "transforms={'kx': 'log'}" in text
    assert "transforms={'kx': None} to keep it linear" in text
    for chosen in ({"kx": None}, {"kx": "log"}, "none"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            prepare_field(ds, transforms=chosen)


def _ocean_months(land=True):
    rng = np.random.default_rng(0)
    v = rng.normal(size=(4, 10, 12))
    if land:
        v[:, 2:5, 3:6] = np.nan  # 9 of 120 places never observed: land
    v[rng.random(v.shape) < 0.1] = np.nan
    sea = np.ones((10, 12), np.int8)
    sea[2:5, 3:6] = 0
    return xr.Dataset(
        {"sst": (("time", "lat", "lon"), v), "sea": (("lat", "lon"), sea)},
        coords={"time": np.datetime64("2020-01-01") + np.arange(4).astype("timedelta64[D]") * 30,
                "lat": ("lat", np.linspace(10, 0, 10), {"units": "degrees_north"}),
                "lon": ("lon", np.linspace(0, 11, 12), {"units": "degrees_east"})})


def test_places_never_observed_at_any_time_get_a_warning_naming_a_mask():
    ds = _ocean_months()
    with pytest.warns(UserWarning, match=r"9 of the 120 \(lat, lon\) places \(8%\) have no value at any time: "
                                         r".*mask='sea' / --mask-var sea"):
        prepare_field(ds, ["sst"])
    # a mask the other way round (ERA5's land-sea mask is 1 on land) is proposed as its complement,
    # and an unrelated integer variable is not proposed at all
    lsm = ds.drop_vars("sea").assign(lsm=1 - ds.sea)
    with pytest.warns(UserWarning, match=r"mask=ds\['lsm'\] == 0\)"):
        prepare_field(lsm, ["sst"])
    # ROMS keeps its mask as floats of 0 and 1 (mask_rho), often as a coordinate
    roms = ds.drop_vars("sea").assign_coords(mask_rho=ds.sea.astype("float64"))
    with pytest.warns(UserWarning, match=r"mask='mask_rho' / --mask-var mask_rho"):
        prepare_field(roms, ["sst"])
    basins = ds.drop_vars("sea").assign(basin=(("lat", "lon"), np.arange(120).reshape(10, 12) % 3))
    with pytest.warns(UserWarning, match=r"True where values belong; on the command line --mask-var NAME\)"):
        prepare_field(basins, ["sst"])
    depth = ds.drop_vars("sea").assign(h=ds.sea * 2.5)  # floats other than 0 and 1 (a depth, 0 on land): no mask
    with pytest.warns(UserWarning, match=r"True where values belong; on the command line --mask-var NAME\)"):
        prepare_field(depth, ["sst"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(ds, ["sst"], mask="sea")  # a mask that leaves them out: nothing to say
        prepare_field(ds.isel(time=0), ["sst"])  # no time axis: a gap like any other
        prepare_field(_ocean_months(land=False), ["sst"])
    # numbers marked as time the CF way (World Ocean Atlas' "months since", left undecoded)
    for attrs in ({"axis": "T"}, {"standard_name": "time", "units": "months since 1955-01-01"}):
        months = ds.rename(time="t").assign_coords(t=("t", np.arange(4.0), attrs))  # not named time
        with pytest.warns(UserWarning, match=r"9 of the 120 \(lat, lon\) places \(8%\) have no value at any t:"):
            prepare_field(months, ["sst"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numbers along t without those attributes are no time axis
        prepare_field(ds.rename(time="t").assign_coords(t=("t", np.arange(4.0))), ["sst"])


def test_places_inside_a_mask_with_no_value_at_any_time_are_reported_not_filled_silently():
    """A mask that keeps a persistent gap (a satellite's pole hole inside the ocean): the places it
    keeps with no value at any time are counted among the places inside the mask only."""
    ds = _ocean_months()  # 9 land places of 120, never observed
    with pytest.warns(UserWarning, match=r"9 of the 120 \(lat, lon\) places inside the mask \(8%\) have no value "
                                         r"at any time: they are filled from other places alone.*leave them out of the mask"):
        prepare_field(ds, ["sst"], mask=xr.ones_like(ds.sea, dtype=bool))
    # a hole of 4 sea places inside a mask of the 111 sea places; the 9 land places do not count
    hole = ds.sst.where(~((ds.lat < 1.5) & (ds.lon > 9.5)))
    with pytest.warns(UserWarning, match=r"4 of the 111 \(lat, lon\) places inside the mask \(4%\)") as record:
        field = prepare_field(ds.assign(sst=hole), ["sst"], mask="sea")
    assert not any("pass a mask" in str(w.message) for w in record)
    assert np.isnan(field.values).any(axis=1).sum() >= 4 * 4  # the hole reaches the engine, to be filled
    # a mask that moves (an ice edge): places inside it at one time only count as inside
    first = xr.DataArray(np.arange(4) == 0, dims="time")
    with pytest.warns(UserWarning, match=r"9 of the 120 \(lat, lon\) places inside the mask"):
        prepare_field(ds, ["sst"], mask=(ds.sea != 0) | first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(ds, ["sst"], mask=(ds.sea != 0) & ~first)  # never inside: not counted


def test_degrees_west_or_south_are_refused_with_the_conversion():
    """Read as east, longitudes counted westward would mirror the map; the message's fix works."""
    ds = _sites(lonlat=True).drop_vars(["x", "y"])
    east = prepare_field(ds)
    west = ds.assign_coords(lon=(-ds.lon).assign_attrs(units="degrees_west"))
    with pytest.raises(InputError, match=r"'lon' is in 'degrees_west', but geogpvae reads degrees east") as err:
        prepare_field(west)
    fix = re.search(r"ds\.assign_coords\(.*\)\}\)", str(err.value)).group(0)
    fixed = prepare_field(eval(fix, {"ds": west}))  # the message's own code
    np.testing.assert_allclose(fixed.x, east.x)
    for units in ("degreeW", "degreesW", "degree_W"):
        with pytest.raises(InputError, match="reads degrees east"):
            prepare_field(ds.assign_coords(lon=(-ds.lon).assign_attrs(units=units)))
    with pytest.raises(InputError, match="reads degrees north"):
        prepare_field(ds.assign_coords(lat=(-ds.lat).assign_attrs(units="degreeS")))
    prepare_field(ds.assign_coords(lat=ds.lat.assign_attrs(units="degrees")))  # plain degrees: north
    with pytest.raises(InputError, match=r"'lat' is in 'degrees_south'"):
        stacking.locations(ds.assign_coords(lat=(-ds.lat).assign_attrs(units="degrees_south"))[["lon", "lat"]],
                           east.geometry)


def test_coordinates_that_leave_dims_out_are_warned_about():
    # a (time, level, y, x) field with coordinates named for y and x only: its 6 cells at each
    # place become repeats of one location; the default coordinates span every dim
    ds = make_gaussian_field((6, 5), missing=0.0, seed=3)
    v = np.stack([np.stack([ds.v0.values + k + t for k in range(3)]) for t in range(2)])
    v[0][np.random.default_rng(0).random(v[0].shape) < 0.3] = np.nan  # the second time step complete
    cube = xr.Dataset({"v": (("time", "level", "y", "x"), v)},
                      coords={"time": [0.0, 1.0], "level": [0.0, 0.5, 1.0], "y": ds.y.values, "x": ds.x.values})
    with pytest.warns(UserWarning, match=r"none of the coordinates \(y, x\) varies along time \(2\), level \(3\): "
                      r"the 6 cells at each place .* \(coordinates y, x, time, level\)"):
        prepare_field(cube, ["v"], coords=["y", "x"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(cube, ["v"])
