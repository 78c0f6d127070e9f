"""Placeholder cells of NEMO-like curvilinear grids: found from lon/lat, warned about before imputation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from geogpvae.fields.placeholders import placeholder_cells
from geogpvae.fields.stacking import prepare_field

BLOCK = (slice(3, 8), slice(10, 16))  # 5 x 6 cells of an eliminated land domain


def nemo_like(times: int = 0, seed: int = 0) -> xr.Dataset:
    """20 x 30 cells of a slightly rotated regional grid over 40..10 W, 30..50 N, as NEMO writes
    it: 2-D nav_lon/nav_lat on (y, x), with a 5 x 6 block at lon = lat = 0 and no data there."""
    j, i = np.meshgrid(np.arange(20), np.arange(30), indexing="ij")
    lon = -40.0 + 30.0 * i / 29 + 0.1 * j
    lat = 30.0 + 20.0 * j / 19 - 0.05 * i
    lon[BLOCK] = lat[BLOCK] = 0.0
    rng = np.random.default_rng(seed)
    shape = ((times,) if times else ()) + lon.shape
    sst = 15.0 + np.sin(np.radians(4 * lon)) + 0.3 * (50.0 - lat) + 0.1 * rng.normal(size=shape)
    sst[rng.random(shape) < 0.2] = np.nan
    sst[..., BLOCK[0], BLOCK[1]] = np.nan
    dims = (("time_counter",) if times else ()) + ("y", "x")
    coords = {"nav_lon": (("y", "x"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
              "nav_lat": (("y", "x"), lat, {"standard_name": "latitude", "units": "degrees_north"})}
    if times:
        coords["time_counter"] = np.datetime64("2020-01-01") + np.arange(times).astype("timedelta64[D]")
    return xr.Dataset({"sst": (dims, sst, {"units": "degC"})}, coords=coords)


def test_the_finder_returns_exactly_the_block_of_placeholders():
    ds = nemo_like()
    expected = np.zeros((20, 30), dtype=bool)
    expected[BLOCK] = True
    found = placeholder_cells(ds.nav_lon, ds.nav_lat)
    assert found.dtype == bool and found.shape == (20, 30)
    np.testing.assert_array_equal(found, expected)
    # two blocks, one on the grid's edge, are found alike
    lon, lat = ds.nav_lon.values.copy(), ds.nav_lat.values.copy()
    lon[15:, :4] = lat[15:, :4] = 0.0
    expected[15:, :4] = True
    np.testing.assert_array_equal(placeholder_cells(lon, lat), expected)


@pytest.mark.parametrize("step", [0.25, 1.0, 5.0])
def test_a_grid_genuinely_crossing_0n_0e_reports_nothing(step):
    # a regional grid centred on (0 N, 0 E): its middle cell lies there, between neighbours
    # one step away; a rotated one too, and one with the equator and meridian as whole rows
    j, i = np.meshgrid(np.arange(-10, 11), np.arange(-12, 13), indexing="ij")
    lon, lat = step * i, step * j
    assert ((lon == 0) & (lat == 0)).sum() == 1
    assert not placeholder_cells(lon, lat).any()
    assert not placeholder_cells(lon + 0.3 * lat, lat - 0.2 * lon).any()
    # placeholders of an eliminated domain elsewhere in that grid are still found, and only
    # they: not the cells of the prime meridian next to them (longitude 0, latitude not)
    lon, lat = lon.astype(float), lat.astype(float)
    lon[:4, 8:13] = lat[:4, 8:13] = 0.0
    found = placeholder_cells(lon, lat)
    assert found[:4, 8:13].all() and found.sum() == 20


def test_large_grids_read_the_grid_step_from_a_sample_of_rows_and_columns(monkeypatch):
    """Past STEP_SAMPLE cells the median step comes from every k-th row and column: the same
    block is found."""
    from geogpvae.fields import placeholders

    ds = nemo_like()
    monkeypatch.setattr(placeholders, "STEP_SAMPLE", 40)  # k = 3 on the 20 x 30 grid
    found = placeholder_cells(ds.nav_lon, ds.nav_lat)
    assert found[BLOCK].all() and found.sum() == 30


def test_nothing_to_tell_placeholders_by():
    assert not placeholder_cells(np.zeros((4, 5)), np.zeros((4, 5))).any()  # every cell at (0, 0)
    lon, lat = np.full((4, 5), np.nan), np.full((4, 5), np.nan)
    lon[1, 1] = lat[1, 1] = 0.0  # no finite neighbour
    assert not placeholder_cells(lon, lat).any()
    with pytest.raises(ValueError, match="2-D arrays of one shape"):
        placeholder_cells(np.zeros(5), np.zeros(5))


def test_prepare_field_warns_of_placeholders_without_a_mask_and_keeps_quiet_with_one():
    ds = nemo_like()
    with pytest.warns(UserWarning, match=r"^30 cells \(y, x\) have nav_lon = nav_lat = 0 exactly, .*no value: "
                                         r"placeholders .*NEMO.*filled as if they lay at 0 N, 0 E\. .*tmask") as seen:
        field = prepare_field(ds, ["sst"])
    (text,) = [str(w.message) for w in seen if "placeholders" in str(w.message)]
    assert field.values.shape[0] == 600  # without a mask every cell is a location
    fix = text.rsplit("mask=", 1)[1]
    mask = eval(fix, {"ds": ds})  # the message's own mask
    assert int((~mask).sum()) == 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(ds, ["sst"], mask=mask)
        prepare_field(ds, ["sst"], mask=(ds.nav_lon != 0) | (ds.nav_lat != 0))
    # a mask that keeps them in the domain leaves them to be filled at (0, 0): still said
    with pytest.warns(UserWarning, match="30 cells"):
        prepare_field(ds, ["sst"], mask=xr.ones_like(ds.nav_lat, dtype=bool))


def test_prepare_field_warns_with_a_time_axis_too():
    ds = nemo_like(times=3)
    with pytest.warns(UserWarning) as seen:
        prepare_field(ds, ["sst"])
    texts = [str(w.message) for w in seen]
    assert any(t.startswith("30 cells (y, x) have nav_lon = nav_lat = 0") for t in texts)
    # one warning per cause: the placeholders are not counted again as places never observed ...
    assert not any("have no value at any" in t for t in texts)
    # ... while land that has a position still is
    land = ds.copy(deep=True)
    land["sst"][:, 12:18, 0:5] = np.nan  # 30 more cells, never observed, at their own positions
    with pytest.warns(UserWarning) as seen:
        prepare_field(land, ["sst"])
    texts = [str(w.message) for w in seen]
    assert any(t.startswith("30 cells (y, x) have nav_lon") for t in texts)
    (never,) = [t for t in texts if " of the 600 (y, x) places" in t]
    count = int(never.split(" ", 1)[0])  # the land, and a few cells missing at random each time
    assert 30 <= count < 30 + 10 and "have no value at any time_counter" in never
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(ds, ["sst"], mask=(ds.nav_lon != 0) | (ds.nav_lat != 0))


def test_cells_at_0n_0e_that_hold_values_are_no_placeholders():
    ds = nemo_like()
    filled = ds.copy(deep=True)
    filled["sst"][BLOCK] = 20.0  # observed values: these cells are data, not placeholders
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_field(filled, ["sst"])
    # one of them observed is enough to keep quiet about it, but not about the rest
    one = ds.copy(deep=True)
    one["sst"][3, 10] = 20.0
    with pytest.warns(UserWarning, match=r"^29 cells \(y, x\)"):
        prepare_field(one, ["sst"])
