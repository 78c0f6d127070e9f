"""``plot.field_map`` (geogpvae/plot/maps.py): scattered sites, grids, projections, the dateline,
the slice drawn and the layout."""

from __future__ import annotations

import warnings

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr
from figure_helpers import (
    _empty_fields,
    _scatter,
    assert_masked_equal,
    colorbars,
    inches,
    make_global,
    make_sites,
    make_spe10_like,
    make_volume,
    mesh,
    panels,
    predicted_grid,
)
from matplotlib.collections import QuadMesh
from matplotlib.colors import LogNorm

from geogpvae import plot


def central_lon(crs):
    params = crs.proj4_params
    return params.get("lon_0", params.get("pm"))


def test_field_map_scattered_xy_points_and_markers():
    ds, truth = make_sites()
    fig = plot.field_map(ds, "zn", truth=truth, coords="xy")
    axs = panels(fig)
    assert [ax.get_gid() for ax in axs] == ["imputed", "truth", "std", "error"]
    flag = ds["zn_imputed"].values
    xy = np.column_stack([ds["x"].values, ds["y"].values])
    obs, imp = _scatter(axs[0], "observed"), _scatter(axs[0], "imputed")
    np.testing.assert_array_equal(obs.get_offsets(), xy[flag == 0])
    np.testing.assert_array_equal(imp.get_offsets(), xy[flag == 1])
    np.testing.assert_allclose(obs.get_array(), ds["zn"].values[flag == 0])
    np.testing.assert_allclose(imp.get_array(), ds["zn"].values[flag == 1])
    # distinct markers, and imputed ones with a black edge
    assert not np.allclose(obs.get_paths()[0].vertices.shape, imp.get_paths()[0].vertices.shape) \
        or not np.allclose(obs.get_paths()[0].vertices, imp.get_paths()[0].vertices)
    np.testing.assert_allclose(imp.get_edgecolor()[0][:3], 0.0)
    assert obs.get_clim() == imp.get_clim() == _scatter(axs[1], "imputed").get_clim()
    # std and error only at imputed sites
    np.testing.assert_allclose(_scatter(axs[2], "imputed").get_array(),
                               ds["zn_std"].values[flag == 1])
    np.testing.assert_allclose(
        _scatter(axs[3], "imputed").get_array(),
        np.abs(ds["zn"].values - truth.values)[flag == 1],
    )
    (legend,) = axs[0].figure.legends  # under the colour bars, where it covers no site
    texts = [t.get_text() for t in legend.get_texts()]
    assert any(t.startswith("observed") for t in texts)
    assert any(t.startswith("imputed") for t in texts)
    assert axs[0].get_aspect() == 1.0  # x and y both in km
    assert "[mg kg\u207b\u00b9]" in colorbars(fig)["colorbar:value"].get_xlabel()  # mg kg-1
    assert "zinc" in colorbars(fig)["colorbar:value"].get_xlabel()


def test_field_map_scattered_outside_domain_and_std_off():
    ds, _ = make_sites()
    flag = ds["zn_imputed"].values.copy()
    flag[:2] = -127
    ds["zn_imputed"].values[:] = flag
    ds["zn"].values[:2] = np.nan
    fig = plot.field_map(ds, "zn", std=False, coords="xy")
    axs = panels(fig)
    assert [ax.get_gid() for ax in axs] == ["imputed"]
    out = _scatter(axs[0], "outside")
    np.testing.assert_array_equal(out.get_offsets()[:, 0], ds["x"].values[:2])
    assert len(colorbars(fig)) == 1


def test_field_map_scattered_lonlat_on_geoaxes():
    pytest.importorskip("cartopy")
    from cartopy.mpl.geoaxes import GeoAxes

    ds, _ = make_sites()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # map data may be missing here
        fig = plot.field_map(ds, "zn")
    axs = panels(fig)
    assert all(isinstance(ax, GeoAxes) for ax in axs)
    assert type(axs[0].projection).__name__ == "LambertAzimuthalEqualArea"
    flag = ds["zn_imputed"].values
    np.testing.assert_allclose(
        _scatter(axs[0], "imputed").get_offsets(),
        np.column_stack([ds["lon"].values, ds["lat"].values])[flag == 1],
    )
    fig.canvas.draw()


def test_field_map_global_grid_descending_lat():
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs
    from cartopy.mpl.geoaxes import GeoAxes

    ds, truth = make_global()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = plot.field_map(ds, "tas", truth=truth, isel={"time": 1})
    axs = panels(fig)
    assert [ax.get_gid() for ax in axs] == ["imputed", "truth", "std", "error"]
    assert all(isinstance(ax, GeoAxes) for ax in axs)
    proj = axs[0].projection
    assert isinstance(proj, ccrs.PlateCarree)
    # central longitude midway between outer cell edges (-1.25, 358.75): no cell on the seam
    assert central_lon(proj) == pytest.approx(178.75)
    v = ds["tas"].isel(time=1).values
    flag = ds["tas_imputed"].isel(time=1).values
    assert_masked_equal(mesh(axs[0]).get_array(), v)
    assert_masked_equal(mesh(axs[1]).get_array(), truth.isel(time=1).values)
    assert_masked_equal(mesh(axs[2]).get_array(),
                        np.where(flag == 1, ds["tas_std"].isel(time=1).values, np.nan))
    # no cell was split across the map seam
    assert not any(type(c).__name__ == "PolyQuadMesh" for ax in axs for c in ax.collections)
    assert "time = 2001-02-15" in fig.get_suptitle()
    assert "[K]" in colorbars(fig)["colorbar:value"].get_xlabel()
    fig.canvas.draw()


def test_field_map_grid_across_the_dateline():
    pytest.importorskip("cartopy")
    lon = np.r_[np.arange(160.0, 180.0, 2.5), np.arange(-180.0, -159.0, 2.5)]
    ds, _ = make_global(lon=lon)
    ds = ds.sel(lat=slice(30, -30))
    ds["tas"] = ds["tas"] * 0 + ds["lon"] + 0 * ds["lat"]  # value = stored longitude
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = plot.field_map(ds, "tas", std=False)
    ax = panels(fig)[0]
    assert abs(central_lon(ax.projection)) == pytest.approx(180.0)
    m = mesh(ax)
    corners = m.get_coordinates()
    edge_lon = corners[0, :, 0]
    assert np.all(np.diff(edge_lon) > 0)  # one contiguous run, 158.75 .. 201.25
    assert edge_lon[0] == pytest.approx(158.75) and edge_lon[-1] == pytest.approx(201.25)
    centre_lon = 0.5 * (edge_lon[:-1] + edge_lon[1:])
    arr = m.get_array()
    # each column shows the value stored for its longitude (modulo 360)
    np.testing.assert_allclose(np.mod(np.asarray(arr)[0], 360), np.mod(centre_lon, 360))
    fig.canvas.draw()


def test_field_map_title_gives_an_index_for_a_dim_without_coordinate():
    # (well, depth) logs whose depth dim has no coordinate (a per-well md beside it): the map at
    # the first depth said "depth = 0", read as a depth of 0
    rng = np.random.default_rng(0)
    flag = (rng.random((6, 5)) < 0.3).astype(np.int8)
    wells = xr.Dataset(
        {"phi": (("well", "depth"), rng.uniform(0.1, 0.3, (6, 5)), {"units": "1"}),
         "phi_std": (("well", "depth"), 0.02 * flag), "phi_imputed": (("well", "depth"), flag)},
        coords={"x": ("well", rng.uniform(0, 5000, 6), {"standard_name": "projection_x_coordinate", "units": "m"}),
                "y": ("well", rng.uniform(0, 5000, 6), {"standard_name": "projection_y_coordinate", "units": "m"})})
    fig = plot.field_map(wells, "phi", isel={"depth": 2})
    assert "depth index 2" in fig.get_suptitle() and "depth = " not in fig.get_suptitle()


def test_field_map_projected_grid_plain_axes():
    ds, truth = make_volume()
    layer = ds.isel(z=0)
    fig = plot.field_map(layer, "kx", truth=truth.isel(z=0))
    axs = panels(fig)
    assert all(not hasattr(ax, "projection") for ax in axs)
    assert all(isinstance(mesh(ax).norm, LogNorm) for ax in axs)
    assert axs[0].get_aspect() == 1.0
    assert_masked_equal(mesh(axs[0]).get_array(), layer["kx"].values)
    assert "z = 3 m" in fig.get_suptitle()
    # the imputed cells are outlined along cell edges on the field panel only
    outline = [c for c in axs[0].collections if c.get_gid() == "outline"]
    assert len(outline) == 1
    assert not [c for c in axs[1].collections if c.get_gid() == "outline"]
    segments = outline[0].get_segments()
    xe = np.r_[0.0, 20.0 * np.arange(1, 13)]
    ye = np.r_[0.0, 10.0 * np.arange(1, 23)]
    for seg in segments:  # every segment is one cell edge
        (x0, y0), (x1, y1) = seg
        assert np.isclose(x0, xe).any() and np.isclose(y0, ye).any()
        assert (x0 == x1) != (y0 == y1)


def test_field_map_projection_by_name():
    pytest.importorskip("cartopy")
    ds, _ = make_sites()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig = plot.field_map(ds, "zn", std=False, projection="Mercator")
    assert type(panels(fig)[0].projection).__name__ == "Mercator"
    with pytest.raises(ValueError):
        plot.field_map(ds, "zn", projection="Nonsense")


def test_render_volume_and_sites_to_png(tmp_path):
    ds, truth = make_volume()
    sites, site_truth = make_sites()
    figs = {
        "layers": plot.layers(ds, "kx", layer=[1, 6], truth=truth),
        "sites": plot.field_map(sites, "zn", truth=site_truth, coords="xy"),
    }
    for name, fig in figs.items():
        path = tmp_path / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        assert path.stat().st_size > 10_000
        image = mpimg.imread(path)
        assert image.ndim == 3 and image[..., :3].std() > 0.05


def test_field_map_equal_aspect_height_leaves_room_for_titles():
    ds, _ = predicted_grid(ny=117, nx=97)  # the Jura grid: 5.85 km tall, 4.85 km wide
    tall = make_spe10_like().isel(z=1)
    for data, var in ((ds, "Cd"), (tall, "kx")):
        fig = plot.field_map(data, var)
        fig.canvas.draw()
        width, height = fig.get_size_inches()
        suptitle = inches(fig, fig._suptitle)
        for ax in panels(fig):
            assert inches(fig, ax.title).y1 <= suptitle.y0 - 0.02  # titles clear the suptitle
            # the panel is as tall as the data's aspect says, and the box fits it
            pos = ax.get_position()
            (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
            assert pos.height * height == pytest.approx(
                pos.width * width * abs(y1 - y0) / abs(x1 - x0), rel=0.01)
        # and the figure has no more than a sliver of height to spare
        used = fig.get_tightbbox(fig.canvas.get_renderer())
        assert height - used.height < 0.3


def test_an_empty_slice_names_the_first_slice_with_values():
    ds = _empty_fields()["volume"]
    ds["v"][2, 1:3] = 1.5
    with pytest.raises(ValueError, match=r"no value in the slice drawn \(z = 0\).*isel=\{'z': 2\}"):
        plot.field_map(ds, "v")
    fig = plot.field_map(ds, "v", isel={"z": 2})
    mesh = next(c for c in fig.axes[0].collections if isinstance(c, QuadMesh))
    assert np.ma.count(mesh.get_array()) == 10
    plt.close(fig)


def test_field_map_refuses_an_isel_it_would_ignore():
    """A misspelt or spatial dim in ``isel`` used to be ignored: the first slice was drawn."""
    ds = _empty_fields()["volume"]
    ds["v"][:] = 1.0
    with pytest.raises(ValueError, match=r"isel: 'zz' is not a dim of 'v' to slice; the dims to slice are 'z'"):
        plot.field_map(ds, "v", isel={"zz": 1})
    with pytest.raises(ValueError, match=r"isel: 'x' is drawn on the map, not sliced"):
        plot.field_map(ds, "v", isel={"x": 1})
    plt.close(plot.field_map(ds, "v", isel={"z": 1}))
    line = _empty_fields()["line"].fillna(1.0)
    with pytest.raises(ValueError, match=r"isel: 'v' is a 1-D field, drawn as a profile"):
        plot.field_map(line, "v", isel={"x": 1})
