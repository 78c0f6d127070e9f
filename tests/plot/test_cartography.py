"""Map data found offline, never downloaded, and the fallback without cartopy
(geogpvae/plot/cartography.py)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from figure_helpers import assert_masked_equal, make_global, make_sites, make_volume, mesh, panels

from geogpvae import plot


def test_missing_natural_earth_warns_once_and_never_downloads(no_map_data,
                                                             _no_network_and_fresh_warnings):
    calls = _no_network_and_fresh_warnings
    assert plot.find_map_shapefile() is None
    ds, _ = make_global()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig1 = plot.field_map(ds, "tas")
        fig1.canvas.draw()
        fig2 = plot.field_map(ds, "tas")
        fig2.canvas.draw()
    messages = [str(w.message) for w in caught if "Natural Earth" in str(w.message)]
    assert len(messages) == 1
    assert "coastlines" in messages[0] and "CARTOPY_DATA_DIR" in messages[0]
    assert len(messages[0]) < 200 and "\n" not in messages[0]  # a short line, not the search paths
    assert calls == []
    assert all(c.get_gid() != "coastlines" for ax in fig1.axes for c in ax.artists + ax.collections)


def _write_lines(path, lines):
    import shapefile  # pyshp, a dependency of cartopy

    path.parent.mkdir(parents=True, exist_ok=True)
    with shapefile.Writer(str(path), shapeType=shapefile.POLYLINE) as w:
        w.field("name", "C")
        for line in lines:
            w.line([line])
            w.record("line")


def test_natural_earth_found_offline_is_drawn(no_map_data, _no_network_and_fresh_warnings):
    pytest.importorskip("shapefile")
    base = no_map_data / "data_dir" / "shapefiles" / "natural_earth"
    _write_lines(base / "physical" / "ne_10m_coastline.shp",
                 [[(6.0, 46.5), (7.5, 47.6)]])
    _write_lines(base / "cultural" / "ne_10m_admin_0_boundary_lines_land.shp",
                 [[(6.5, 47.5), (7.2, 47.0)]])
    assert plot.find_map_shapefile("coastline", "physical", ("10m",)) is not None
    ds, _ = make_sites()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "zn", std=False)
        fig.canvas.draw()
    assert not [w for w in caught if "Natural Earth" in str(w.message)]
    gids = {a.get_gid() for a in panels(fig)[0].get_children()}
    assert {"coastlines", "borders"} <= gids
    assert _no_network_and_fresh_warnings == []


def test_gshhs_coastline_is_a_fallback(no_map_data, _no_network_and_fresh_warnings):
    """Debian's python-cartopy-data ships only GSHHS coarse coastlines, no Natural Earth."""
    pytest.importorskip("shapefile")
    _write_lines(no_map_data / "repo_data_dir" / "shapefiles" / "gshhs" / "c" / "GSHHS_c_L1.shp",
                 [[(0.0, 0.0), (90.0, 30.0)]])
    ds, _ = make_global()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "tas", std=False)
        fig.canvas.draw()
    gids = {a.get_gid() for a in panels(fig)[0].get_children()}
    assert "coastlines" in gids and "borders" not in gids
    messages = [str(w.message) for w in caught if "Natural Earth" in str(w.message)]
    assert len(messages) == 1 and "no borders on the map" in messages[0]
    assert _no_network_and_fresh_warnings == []


def test_map_data_dirs_include_debian_location(monkeypatch):
    dirs = [str(d) for d in plot.map_data_dirs()]
    assert "/usr/share/cartopy" in dirs and "/usr/share/cartopy/data" in dirs
    monkeypatch.setenv("CARTOPY_DATA_DIR", "/somewhere/cartopy")
    assert "/somewhere/cartopy" in [str(d) for d in plot.map_data_dirs()]


def test_field_map_without_cartopy_falls_back(monkeypatch):
    for name in [m for m in list(sys.modules) if m == "cartopy" or m.startswith("cartopy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cartopy", None)  # import cartopy -> ImportError
    ds, truth = make_global()
    sites, _ = make_sites()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot.field_map(ds, "tas", truth=truth)
        fig2 = plot.field_map(sites, "zn")
    notes = [w for w in caught if "cartopy" in str(w.message)]
    assert len(notes) == 1
    axs = panels(fig)
    assert len(axs) == 4 and all(not hasattr(ax, "projection") for ax in axs)
    assert_masked_equal(mesh(axs[0]).get_array(), ds["tas"].isel(time=0).values)
    assert panels(fig2)[0].get_xlabel().startswith("longitude")
    fig.canvas.draw()
    # everything else still works
    vol, vtruth = make_volume()
    plot.layers(vol, "kx", truth=vtruth)
    plot.uncertainty(vol, "kx", truth=vtruth)


def test_module_import_does_not_import_cartopy():
    code = (
        "import sys, geogpvae.plot, geogpvae.accessor; "
        "assert 'cartopy' not in sys.modules, 'cartopy imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
