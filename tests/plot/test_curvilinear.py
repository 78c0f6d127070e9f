"""Curvilinear grids on a map (geogpvae/plot/curvilinear.py): cells or points, and NEMO's
placeholder cells without a position."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from figure_helpers import FLAG_ATTRS, _curvilinear, _drawn, _scatter, mesh, panels
from matplotlib.collections import PathCollection, QuadMesh

from geogpvae import plot


def test_field_map_curvilinear_grid_drawn_as_cells_at_its_lon_lat():
    # 2-D lon/lat on (y, x), as regional climate and ocean models write them: the cells are
    # drawn on a map around their centres (corners midway between them), crossing the
    # dateline as one piece, not on the grid's index axes
    pytest.importorskip("cartopy")
    from cartopy.mpl.geoaxes import GeoAxes

    j, i = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    lon, lat = 179.5 + 0.2 * i + 0.05 * j, 45 + 0.15 * j - 0.03 * i
    ds, flag = _curvilinear(np.where(lon > 180, lon - 360, lon), lat)
    fig, axs = _drawn(ds)
    assert all(isinstance(ax, GeoAxes) for ax in axs)
    mesh = next(c for c in axs[0].collections if isinstance(c, QuadMesh) and c.get_gid() == "imputed")
    corners = mesh.get_coordinates()  # (ny + 1, nx + 1, 2), longitudes on one arc
    assert corners.shape == (6, 8, 2)
    assert np.ptp(corners[..., 0]) < 3  # one arc across the dateline, either side of it
    inner = 179.5 + 0.2 * (i[1:, 1:] - 0.5) + 0.05 * (j[1:, 1:] - 0.5)
    np.testing.assert_allclose(_turns(corners[1:-1, 1:-1, 0] - inner), 0.0, atol=1e-9)
    np.testing.assert_allclose(_turns(corners[0, 0, 0] - (179.5 - 0.1 - 0.025)), 0.0, atol=1e-9)
    np.testing.assert_allclose(corners[0, 0, 1], 45 - 0.075 + 0.015)
    np.testing.assert_allclose(mesh.get_array().ravel(), ds.v.values.ravel())
    # the hidden block is outlined along its cells' sides: 3 + 3 + 2 + 2 of them
    outline = next(c for c in axs[0].collections if c.get_gid() == "outline")
    assert len(outline.get_segments()) == 10
    std = next(c for c in axs[1].collections if isinstance(c, QuadMesh) and c.get_gid() == "std")
    assert np.ma.count(std.get_array()) == int(flag.sum())
    assert "lon" in ds.coords and ds.v.dims == ("y", "x")  # the input is not modified
    fig.canvas.draw()


@pytest.mark.parametrize("case", ["global", "NaN centres"])
def test_field_map_curvilinear_grid_drawn_as_points_where_cells_cannot_be(case):
    # a global grid (its seam, or the fold of a tripolar grid) or one with NaN centres (land
    # in some ocean models) is drawn as points at the centres that exist
    pytest.importorskip("cartopy")
    j, i = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    lon, lat = (-180 + 60 * i + 2 * j, -60 + 30 * j) if case == "global" else (5 + 0.2 * i, 45 + 0.15 * j + 0 * i)
    lat = lat.astype(float)
    if case == "NaN centres":
        lon = lon.astype(float)
        lon[0, 0] = lat[0, 0] = np.nan
    ds, flag = _curvilinear(lon, lat)
    fig, axs = _drawn(ds)
    assert not [c for c in axs[0].collections if isinstance(c, QuadMesh)]
    drawn = _scatter(axs[0], "imputed").get_offsets()
    np.testing.assert_allclose(_turns(drawn[:, 0] - lon[flag == 1]), 0.0, atol=1e-9)
    np.testing.assert_allclose(drawn[:, 1], lat[flag == 1])
    fig.canvas.draw()


def _nemo_like(where=(slice(3, 8), slice(10, 16))):
    """20 x 30 cells over 40..10 W, 30..50 N as NEMO writes them, a 5 x 6 block of eliminated
    land at nav_lon = nav_lat = 0 with no data, and the block's cell mask."""
    j, i = np.meshgrid(np.arange(20), np.arange(30), indexing="ij")
    lon = -40.0 + 30.0 * i / 29 + 0.1 * j
    lat = 30.0 + 20.0 * j / 19 - 0.05 * i
    block = np.zeros(lon.shape, dtype=bool)
    block[where] = True
    lon, lat = np.where(block, 0.0, lon), np.where(block, 0.0, lat)
    sst = np.where(block, np.nan, 15.0 + np.sin(np.radians(4 * lon)) + 0.3 * (50.0 - lat))
    ds = xr.Dataset({"sst": (("y", "x"), sst, {"units": "degC"})},
                    coords={"nav_lon": (("y", "x"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
                            "nav_lat": (("y", "x"), lat, {"standard_name": "latitude", "units": "degrees_north"})})
    return ds, block


def _placeholder_warnings(record):
    return [str(w.message) for w in record if "placeholders for cells without a position" in str(w.message)]


@pytest.mark.parametrize("where", [(slice(3, 8), slice(10, 16)), (slice(15, 20), slice(0, 6))],
                         ids=["inside", "in a corner"])
def test_field_map_leaves_nemo_placeholder_cells_blank_without_streaks(where):
    # NEMO's eliminated land domains (nav_lon = nav_lat = 0): no cell is drawn reaching for
    # (0 N, 0 E); the grid is drawn as cells with those cells left out, and a warning says so
    pytest.importorskip("cartopy")
    ds, block = _nemo_like(where)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "sst")
    (text,) = _placeholder_warnings(record)
    assert text.startswith("30 cells of the curvilinear grid have longitude and latitude both exactly 0")
    assert "NEMO" in text and "left blank" in text
    drawn = mesh(panels(fig)[0])
    corners = drawn.get_coordinates()  # (21, 31, 2)
    assert corners.shape == (21, 31, 2)
    # every corner within a cell of the grid's own extent: none pulled towards (0, 0)
    lon, lat = ds.nav_lon.values[~block], ds.nav_lat.values[~block]
    assert lon.min() - 1 < corners[..., 0].min() and corners[..., 0].max() < lon.max() + 1
    assert lat.min() - 1 < corners[..., 1].min() and corners[..., 1].max() < lat.max() + 1
    # no quadrilateral much wider or taller than the grid's cells (about 1 degree)
    assert np.abs(np.diff(corners, axis=0)).max() < 2.5 and np.abs(np.diff(corners, axis=1)).max() < 2.5
    values = drawn.get_array()
    assert np.ma.getmaskarray(values).reshape(block.shape)[block].all()
    np.testing.assert_allclose(np.ma.compressed(values), ds.sst.values[~block])
    domain = next(c for c in panels(fig)[0].collections if c.get_gid() == "domain")
    assert np.ma.getmaskarray(domain.get_array()).reshape(block.shape)[block].all()  # white, not grey
    fig.canvas.draw()
    with warnings.catch_warnings(record=True) as record:  # once per process
        warnings.simplefilter("always")
        plot.field_map(ds, "sst")
    assert not _placeholder_warnings(record)


def test_field_map_leaves_imputed_placeholder_cells_blank_in_every_panel():
    # imputed without a mask, the placeholders were filled (flag 1, a std): still no position
    pytest.importorskip("cartopy")
    ds, block = _nemo_like()
    flag = np.where(block, 1, 0).astype(np.int8)
    flag[12:14, 20:23] = 1  # a genuine hole, imputed
    ds = ds.assign(sst=ds.sst.fillna(17.0), sst_std=(("y", "x"), np.where(flag == 1, 0.2, 0.0)),
                   sst_imputed=(("y", "x"), flag, FLAG_ATTRS))
    fig, axs = _drawn(ds.rename(sst="v", sst_std="v_std", sst_imputed="v_imputed"))
    for ax in axs:
        assert np.ma.getmaskarray(mesh(ax).get_array()).reshape(block.shape)[block].all()
    assert np.ma.count(mesh(axs[1]).get_array()) == 6  # the std of the genuine hole only
    domain = next(c for c in axs[0].collections if c.get_gid() == "domain")
    np.testing.assert_array_equal(np.ma.getmaskarray(domain.get_array()).reshape(block.shape), block)
    outline = next(c for c in axs[0].collections if c.get_gid() == "outline")
    assert len(outline.get_segments()) == 10  # around the genuine hole only: 3 + 3 + 2 + 2 sides
    fig.canvas.draw()


def test_field_map_of_a_grid_really_crossing_0n_0e_is_untouched():
    pytest.importorskip("cartopy")
    j, i = np.meshgrid(np.arange(-10, 11), np.arange(-12, 13), indexing="ij")
    lon, lat = 0.5 * i.astype(float), 0.5 * j.astype(float)
    ds, _ = _curvilinear(lon, lat)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "v")
    assert not _placeholder_warnings(record)
    np.testing.assert_allclose(mesh(panels(fig)[0]).get_array().ravel(), ds.v.values.ravel())


def test_field_map_leaves_nemo_placeholders_out_of_the_points_of_a_grid_drawn_as_points():
    # a grid drawn as points (here for a NaN centre) draws none at the placeholders, nor at
    # the NaN centre
    pytest.importorskip("cartopy")
    ds, block = _nemo_like()
    ds.nav_lon.values[0, 0] = ds.nav_lat.values[0, 0] = np.nan
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "sst")
    assert len(_placeholder_warnings(record)) == 1
    ax = panels(fig)[0]
    assert not [c for c in ax.collections if isinstance(c, QuadMesh)]
    offsets = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])
    placed = ~block
    placed[0, 0] = False
    assert len(offsets) == int(placed.sum()) and np.isfinite(offsets).all()
    assert not ((offsets[:, 0] == 0) & (offsets[:, 1] == 0)).any()
    np.testing.assert_allclose(np.sort(offsets[:, 1]), np.sort(ds.nav_lat.values[placed]))
    fig.canvas.draw()


@pytest.mark.parametrize("case", ["cells", "points", "command"])
def test_one_map_searches_a_grid_for_placeholder_cells_once(case, monkeypatch, tmp_path, capsys):
    # the search reads the whole grid (large for a global ocean model): one map runs it once,
    # drawn as cells or as points (a NaN centre), by field_map or by geogpvae plot; and the
    # warning still names the line that asked for the map
    pytest.importorskip("cartopy")
    from geogpvae.fields import placeholders
    from geogpvae.plot import curvilinear

    calls = []

    def counted(lon, lat, **kwargs):
        calls.append(np.shape(lon))
        return placeholders.placeholder_cells(lon, lat, **kwargs)

    monkeypatch.setattr(curvilinear, "placeholder_cells", counted)
    ds, block = _nemo_like()
    if case == "points":
        ds.nav_lon.values[0, 0] = ds.nav_lat.values[0, 0] = np.nan
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if case == "command":
            from geogpvae.cli import main

            ds.to_netcdf(tmp_path / "nemo.nc")
            assert main(["plot", str(tmp_path / "nemo.nc"), "--var", "sst", "-o", str(tmp_path / "a.png")]) == 0
        else:
            fig = plot.field_map(ds, "sst")
            drawn = [c for c in panels(fig)[0].collections if isinstance(c, (QuadMesh, PathCollection))]
            assert drawn and all(isinstance(c, QuadMesh if case == "cells" else PathCollection) for c in drawn)
    assert calls == [block.shape]
    if case == "command":  # the command shows warnings on stderr
        (warned,) = [t for t in capsys.readouterr().err.splitlines() if "without a position" in t]
        assert warned.startswith(f"geogpvae: warning: {int(block.sum())} cells of the curvilinear grid")
        return
    (warned,) = [w for w in record if "placeholders for cells without a position" in str(w.message)]
    assert str(warned.message).startswith(f"{int(block.sum())} cells of the curvilinear grid")
    assert warned.filename == __file__


def _turns(dlon):
    """Longitude differences brought into [-180, 180): 0 for the same meridian."""
    return np.mod(np.asarray(dlon) + 180.0, 360.0) - 180.0
