"""Tests of geogpvae.plot: what is drawn, not only that a call returns."""

from __future__ import annotations

import itertools
import subprocess
import sys
import warnings

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.colors import LogNorm

from geogpvae import plot
from geogpvae.plot import cartography, style

FLAG_ATTRS = {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": "observed imputed"}


# --------------------------------------------------------------------------------------
# synthetic data following the conventions of geogpvae.impute
# --------------------------------------------------------------------------------------


def make_volume(seed: int = 0, descending_y: bool = False):
    """A (z, y, x) = (6, 22, 12) SPE10-like volume: log-marked kx, linear porosity.

    Returns the imputed Dataset and the truth Dataset.
    """
    rng = np.random.default_rng(seed)
    nz, ny, nx = 6, 22, 12
    x = 10.0 + 20.0 * np.arange(nx)
    y = 5.0 + 10.0 * np.arange(ny)
    if descending_y:
        y = y[::-1]
    z = 3.0 + 0.6 * np.arange(nz)
    zz, yy, xx = np.meshgrid(z, y, x, indexing="ij")
    log_k = 2.0 + np.sin(xx / 60.0) + np.cos(yy / 45.0) + 0.2 * zz + 0.3 * rng.normal(size=zz.shape)
    kx_true = np.exp(log_k)
    phi_true = 0.12 + 0.05 * np.tanh(log_k - 3.0) + 0.005 * rng.normal(size=zz.shape)
    flag = np.where(rng.random(zz.shape) < 0.4, 1, 0).astype(np.int8)
    flag[:, :3, :2] = -127  # outside the domain
    inside = flag >= 0
    imputed = flag == 1

    kx = np.where(inside, kx_true, np.nan)
    kx[imputed] = kx_true[imputed] * np.exp(0.3 * rng.normal(size=imputed.sum()))
    kx_std = np.where(inside, 0.0, np.nan)
    kx_std[imputed] = kx[imputed] * rng.uniform(0.2, 0.6, imputed.sum())
    phi = np.where(inside, phi_true, np.nan)
    phi[imputed] += 0.01 * rng.normal(size=imputed.sum())
    phi_std = np.where(inside, 0.0, np.nan)
    phi_std[imputed] = rng.uniform(0.005, 0.02, imputed.sum())

    coords = {
        "z": ("z", z, {"units": "m", "long_name": "depth", "positive": "down"}),
        "y": ("y", y, {"units": "m", "long_name": "y"}),
        "x": ("x", x, {"units": "m", "long_name": "x"}),
    }
    dims = ("z", "y", "x")
    ds = xr.Dataset(coords=coords)
    for name, val, sd, long_name, units, extra in (
        ("kx", kx, kx_std, "permeability in x", "mD", {"geogpvae_transform": "log"}),
        ("porosity", phi, phi_std, "porosity", "1", {}),
    ):
        ds[name] = (dims, val, {"units": units, "long_name": long_name,
                                "ancillary_variables": f"{name}_std {name}_imputed", **extra})
        ds[f"{name}_std"] = (dims, sd, {"units": units, "long_name": f"std of {long_name}"})
        ds[f"{name}_imputed"] = (dims, flag.copy(), dict(FLAG_ATTRS))
    truth = xr.Dataset(
        {"kx": (dims, kx_true), "porosity": (dims, phi_true)},
        coords={k: v[:2] for k, v in coords.items()},
    )
    return ds, truth


def make_sites(n: int = 80, seed: int = 1):
    """A Jura-like scattered set: ``site`` dim, x/y in km and lon/lat near 6.85 E 47.14 N."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.3, 5.2, n)
    y = rng.uniform(0.5, 5.9, n)
    lon = 6.85 + (x - 2.5) / (111.32 * np.cos(np.deg2rad(47.14)))
    lat = 47.14 + (y - 3.0) / 110.57
    truth = 50.0 + 20.0 * np.sin(x) + 10.0 * np.cos(y) + rng.normal(0, 2, n)
    flag = np.where(rng.random(n) < 0.3, 1, 0).astype(np.int8)
    flag[:3] = 1
    flag[3:6] = 0
    value = truth.copy()
    imputed = flag == 1
    value[imputed] += rng.normal(0, 3, imputed.sum())
    sd = np.where(imputed, rng.uniform(1.5, 5.0, n), 0.0)
    ds = xr.Dataset(
        {
            "zn": ("site", value, {"units": "mg kg-1", "long_name": "zinc",
                                   "ancillary_variables": "zn_std zn_imputed"}),
            "zn_std": ("site", sd, {"units": "mg kg-1"}),
            "zn_imputed": ("site", flag, dict(FLAG_ATTRS)),
        },
        coords={
            "site": np.arange(n),
            "x": ("site", x, {"units": "km", "long_name": "x"}),
            "y": ("site", y, {"units": "km", "long_name": "y"}),
            "lon": ("site", lon, {"units": "degrees_east", "standard_name": "longitude"}),
            "lat": ("site", lat, {"units": "degrees_north", "standard_name": "latitude"}),
        },
    )
    return ds, xr.DataArray(truth, dims="site")


def make_global(lon=None, seed: int = 2):
    """A (time, lat, lon) grid, lat descending, lon 0..357.5 by default."""
    rng = np.random.default_rng(seed)
    lat = np.arange(87.5, -90.0, -5.0)
    lon = np.arange(0.0, 360.0, 2.5) if lon is None else np.asarray(lon, dtype=float)
    time = np.array(["2001-01-15", "2001-02-15"], dtype="datetime64[ns]")
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    base = 288.0 - 30.0 * np.sin(np.deg2rad(la)) ** 2 + 3.0 * np.cos(np.deg2rad(lo))
    truth = np.stack([base, base + 1.0])
    flag = np.where(rng.random(truth.shape) < 0.3, 1, 0).astype(np.int8)
    value = truth + np.where(flag == 1, rng.normal(0, 0.5, truth.shape), 0.0)
    sd = np.where(flag == 1, rng.uniform(0.2, 1.0, truth.shape), 0.0)
    dims = ("time", "lat", "lon")
    ds = xr.Dataset(
        {
            "tas": (dims, value, {"units": "K", "long_name": "near-surface air temperature",
                                  "standard_name": "air_temperature",
                                  "ancillary_variables": "tas_std tas_imputed"}),
            "tas_std": (dims, sd, {"units": "K"}),
            "tas_imputed": (dims, flag, dict(FLAG_ATTRS)),
        },
        coords={
            "time": time,
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
    )
    return ds, xr.DataArray(truth, dims=dims)


# --------------------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_network_and_fresh_warnings(monkeypatch):
    """No test may download anything; each test sees the once-per-process warnings anew."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"download attempted: {args!r}")

    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    try:
        import cartopy.io
        from cartopy.io import shapereader

        monkeypatch.setattr(cartopy.io, "urlopen", refuse)
        # geogpvae looks for files itself: cartopy's downloaders must never be consulted
        for cls in (cartopy.io.Downloader, shapereader.NEShpDownloader,
                    shapereader.GSHHSShpDownloader):
            for name in ("path", "acquire_resource", "_urlopen"):
                if name in vars(cls):
                    monkeypatch.setattr(cls, name, refuse)
    except ImportError:
        pass
    monkeypatch.setattr(style, "_WARNED", set())
    yield calls
    plt.close("all")


@pytest.fixture
def no_map_data(monkeypatch, tmp_path):
    """cartopy's data folders point at empty directories."""
    cartopy = pytest.importorskip("cartopy")
    for key in ("pre_existing_data_dir", "data_dir", "repo_data_dir"):
        d = tmp_path / key
        d.mkdir()
        monkeypatch.setitem(cartopy.config, key, d)
    monkeypatch.delenv("CARTOPY_DATA_DIR", raising=False)
    monkeypatch.setattr(cartography, "_SYSTEM_DATA_DIRS", ())
    return tmp_path


def panels(fig):
    """Axes with a gid that is not a colourbar's, in drawing order."""
    return [ax for ax in fig.axes if ax.get_gid() and not ax.get_gid().startswith("colorbar")]


def colorbars(fig):
    return {ax.get_gid(): ax for ax in fig.axes if (ax.get_gid() or "").startswith("colorbar")}


def mesh(ax):
    """The QuadMesh that carries the panel's data (the one with the panel's gid)."""
    found = [c for c in ax.collections if isinstance(c, QuadMesh) and c.get_gid() == ax.get_gid()]
    assert len(found) == 1
    return found[0]


def assert_masked_equal(drawn, expected):
    """Same values where ``expected`` is finite, masked exactly where it is not."""
    drawn = np.ma.asarray(drawn)
    expected = np.asarray(expected, dtype=float)
    assert drawn.shape == expected.shape
    np.testing.assert_array_equal(np.ma.getmaskarray(drawn), ~np.isfinite(expected))
    ok = np.isfinite(expected)
    np.testing.assert_allclose(np.asarray(drawn)[ok], expected[ok])


def central_lon(crs):
    params = crs.proj4_params
    return params.get("lon_0", params.get("pm"))


def is_colorbar_axes(ax):
    return ax.get_label() == "<colorbar>"


# --------------------------------------------------------------------------------------
# helpers: limits and norms
# --------------------------------------------------------------------------------------


def test_robust_limits_percentiles_and_nan():
    a = np.arange(101.0)
    b = np.array([np.nan, 1e6])
    lo, hi = plot.robust_limits(a, percentiles=(1, 99))
    assert (lo, hi) == pytest.approx((1.0, 99.0))
    lo, hi = plot.robust_limits(a, b, percentiles=(0, 100))
    assert (lo, hi) == (0.0, 1e6)
    assert plot.robust_limits(np.full(3, np.nan)) == (0.0, 1.0)
    lo, hi = plot.robust_limits(np.full(4, 2.0))
    assert lo < 2.0 < hi
    ma = np.ma.masked_greater(a, 50)
    assert plot.robust_limits(ma, percentiles=(0, 100)) == (0.0, 50.0)


def test_robust_limits_log_ignore_non_positive():
    lo, hi = plot.robust_limits(np.array([-1.0, 0.0, 1.0, 10.0, 100.0]), percentiles=(0, 100),
                                log=True)
    assert (lo, hi) == pytest.approx((1.0, 100.0))
    norm = plot.make_norm(0.0, 50.0, log=True)
    assert isinstance(norm, LogNorm) and norm.vmin > 0 and norm.vmax == 50.0
    assert not isinstance(plot.make_norm(0.0, 1.0), LogNorm)


def test_label_for_uses_long_name_and_units():
    da = xr.DataArray([1.0], attrs={"long_name": "permeability in x", "units": "mD"}, name="kx")
    assert plot.label_for(da) == "permeability in x [mD]"
    assert plot.label_for(xr.DataArray([1.0], name="a_b")) == "a b"


# --------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------


def test_layers_panels_and_drawn_data():
    ds, truth = make_volume()
    fig = plot.layers(ds, "porosity", layer=[1, 6], truth=truth)  # layer numbers, from 1
    axs = panels(fig)
    assert [ax.get_gid() for ax in axs] == ["observed", "imputed", "truth", "std", "error"] * 2
    assert set(colorbars(fig)) == {"colorbar:value", "colorbar:uncertainty"}
    assert len([ax for ax in fig.axes if not is_colorbar_axes(ax)]) == 10
    for row, k in enumerate([0, 5]):
        v = ds["porosity"].isel(z=k).values
        flag = ds["porosity_imputed"].isel(z=k).values
        sd = ds["porosity_std"].isel(z=k).values
        t = truth["porosity"].isel(z=k).values
        expected = {
            "observed": np.where(flag == 0, v, np.nan),
            "imputed": v,
            "truth": t,
            "std": np.where(flag == 1, sd, np.nan),
            "error": np.where(flag == 1, np.abs(v - t), np.nan),
        }
        for ax in axs[5 * row: 5 * row + 5]:
            assert_masked_equal(mesh(ax).get_array(), expected[ax.get_gid()])
    # holes really are holes: the observed panel masks every imputed and outside cell
    obs = mesh(axs[0]).get_array()
    assert np.ma.count_masked(obs) == np.sum(ds["porosity_imputed"].isel(z=0).values != 0)
    # under each panel, the domain in grey: masked (white) exactly outside the domain
    for ax in axs[:5]:
        domain = [c for c in ax.collections if c.get_gid() == "domain"]
        assert len(domain) == 1
        np.testing.assert_array_equal(np.ma.getmaskarray(domain[0].get_array()),
                                      ds["porosity_imputed"].isel(z=0).values == -127)
        assert domain[0].get_zorder() < mesh(ax).get_zorder()


def test_layers_shared_limits_and_norms():
    ds, truth = make_volume()
    fig = plot.layers(ds, "kx", layer=[2, 3, 4], truth=truth)
    axs = panels(fig)
    values = [mesh(ax) for ax in axs if ax.get_gid() in ("observed", "imputed", "truth")]
    uncert = [mesh(ax) for ax in axs if ax.get_gid() in ("std", "error")]
    assert len(values) == 9 and len(uncert) == 6
    assert len({m.get_clim() for m in values}) == 1
    assert len({m.get_clim() for m in uncert}) == 1
    assert all(isinstance(m.norm, LogNorm) for m in values + uncert)
    assert values[0].get_clim()[0] > 0

    fig = plot.layers(ds, "porosity", layer=[2, 3])
    meshes = [mesh(ax) for ax in panels(fig)]
    assert not any(isinstance(m.norm, LogNorm) for m in meshes)
    # the std scale follows the data (robust limits of the imputed cells), not 0
    stds = np.concatenate([np.ma.compressed(meshes[i].get_array()) for i in (2, 5)])
    lo, _ = meshes[2].get_clim()
    assert lo == pytest.approx(np.percentile(stds, 1.0), rel=1e-6) and lo > 0.0

    fig = plot.layers(ds, "kx", layer=2, log=False)
    assert not any(isinstance(mesh(ax).norm, LogNorm) for ax in panels(fig))
    fig = plot.layers(ds, "porosity", layer=2, log=True)
    assert all(isinstance(mesh(ax).norm, LogNorm) for ax in panels(fig))


def test_layers_row_sharing_gives_row_limits():
    ds, _ = make_volume()
    fig = plot.layers(ds, "kx", layer=[1, 6], share="row")
    axs = panels(fig)
    assert len(colorbars(fig)) == 0 or True  # gids are reused per row
    cbs = [ax for ax in fig.axes if is_colorbar_axes(ax)]
    assert len(cbs) == 4
    row0 = {mesh(ax).get_clim() for ax in axs[:2]}
    row1 = {mesh(ax).get_clim() for ax in axs[3:5]}
    assert len(row0) == 1 and len(row1) == 1 and row0 != row1


def test_layers_colorbar_labels_and_titles():
    ds, truth = make_volume()
    fig = plot.layers(ds, "kx", layer=6, truth=truth)
    cbs = colorbars(fig)
    value_label = cbs["colorbar:value"].get_xlabel()
    assert "permeability in x" in value_label and "[mD]" in value_label
    assert "[mD]" in cbs["colorbar:uncertainty"].get_xlabel()
    assert "std" in cbs["colorbar:uncertainty"].get_xlabel()
    for ax in panels(fig):
        title = ax.get_title()
        assert "layer 6" in title  # 1-based
        assert "z = 6 m" in title  # coordinate value: 3.0 + 0.6 * 5
    fig = plot.layers(ds, "kx", layer=1)
    assert all("layer 1 (z = 3 m)" in ax.get_title() for ax in panels(fig))
    assert len(panels(fig)) == 3  # observed, imputed, std


def test_layers_orientation_follows_coordinates():
    ds, _ = make_volume(descending_y=True)
    # a field equal to its y coordinate tells where each row was drawn
    ds["porosity"] = ds["porosity"] * 0 + ds["y"]
    fig = plot.layers(ds, "porosity", layer=1)
    ax = panels(fig)[1]
    m = mesh(ax)
    corners = m.get_coordinates()  # (ny + 1, nx + 1, 2) cell corners
    centre_y = 0.5 * (corners[:-1, :-1, 1] + corners[1:, 1:, 1])
    centre_x = 0.5 * (corners[:-1, :-1, 0] + corners[1:, 1:, 0])
    arr = m.get_array()
    ok = ~np.ma.getmaskarray(arr)
    np.testing.assert_allclose(np.asarray(arr)[ok], centre_y[ok])
    np.testing.assert_allclose(centre_x[0], ds["x"].values)
    bottom, top = ax.get_ylim()
    assert bottom < top  # y increases upwards although stored descending
    left, right = ax.get_xlim()
    assert left < right
    assert ax.get_aspect() == 1.0  # x and y both in m

    # a vertical section: depth (positive down) increases downwards, free aspect
    ds2, _ = make_volume()
    ds2["porosity"] = ds2["porosity"] * 0 + ds2["z"]
    fig = plot.layers(ds2, "porosity", layer=4, axis="y")
    ax = panels(fig)[1]
    m = mesh(ax)
    corners = m.get_coordinates()
    centre_z = 0.5 * (corners[:-1, :-1, 1] + corners[1:, 1:, 1])
    arr = m.get_array()
    ok = ~np.ma.getmaskarray(arr)
    np.testing.assert_allclose(np.asarray(arr)[ok], centre_z[ok])
    bottom, top = ax.get_ylim()
    assert bottom > top  # inverted: deeper is lower
    assert ax.get_aspect() == "auto"
    # a vertical section is not a layer: the title gives where it is, not a layer number
    assert "layer" not in ax.get_title() and "y = 35 m" in ax.get_title()
    assert ax.get_xlabel().startswith("x") and panels(fig)[0].get_ylabel().startswith("depth")


def test_layer_numbers_and_coordinate_values_select_the_same_layers():
    ds, _ = make_volume()  # z = 3.0, 3.6, ..., 6.0 m
    da = ds["kx"]
    assert plot.layer_positions(da, "z", [1, 6]) == [0, 5]
    assert plot.layer_positions(da, "z", [3.6, 4.75]) == [1, 3]  # nearest, within half a cell
    assert plot.layer_positions(da, "z", None) == [0]
    spe = make_spe10_like()  # layer coordinate 1, 3, 5, ...
    assert plot.layer_positions(spe["kx"], "z", [1, 21]) == [0, 10]
    with pytest.raises(ValueError, match="numbered 1 to"):
        plot.layer_positions(spe["kx"], "z", 2)  # an even layer was dropped by downsampling
    a = plot.layers(spe, "kx", layer=21)
    b = plot.layers(spe, "kx", layer=float(spe.z[10]))
    assert [ax.get_title() for ax in panels(a)] == [ax.get_title() for ax in panels(b)]


def test_layers_bad_requests():
    ds, _ = make_volume()
    for bad in (7, 0, -1, [1, 9]):
        with pytest.raises(ValueError, match="numbered 1 to 6"):
            plot.layers(ds, "kx", layer=bad)
    with pytest.raises(ValueError, match="z value from 3 to 6 m"):
        plot.layers(ds, "kx", layer=9.5)  # a depth outside the grid
    with pytest.raises(ValueError):
        plot.layers(ds, "kx", axis="t")
    with pytest.raises(KeyError):
        plot.layers(ds, "nope")


def test_layers_of_a_2d_field():
    ds, _ = make_volume()
    two_d = ds.isel(z=2)
    fig = plot.layers(two_d, "porosity")
    assert [ax.get_gid() for ax in panels(fig)] == ["observed", "imputed", "std"]
    assert all("z = 4.2 m" in ax.get_title() for ax in panels(fig))  # the scalar coordinate
    assert_masked_equal(mesh(panels(fig)[1]).get_array(), two_d["porosity"].values)
    # a layer asked of a field without layers is an error, not the whole field drawn
    with pytest.raises(ValueError, match=r"'porosity' is a 2-D field .* one layer with no others along 'z'"):
        plot.layers(two_d, "porosity", layer=3)
    one = plot.layers(two_d, "porosity", layer=1)  # its one layer
    assert_masked_equal(mesh(panels(one)[1]).get_array(), two_d["porosity"].values)


# --------------------------------------------------------------------------------------
# field_map: scattered data
# --------------------------------------------------------------------------------------


def _scatter(ax, gid):
    found = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_gid() == gid]
    assert len(found) == 1, [c.get_gid() for c in ax.collections]
    return found[0]


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
    legend = axs[0].get_legend()
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


def _curvilinear(lon, lat) -> tuple[xr.Dataset, np.ndarray]:
    """A field on a curvilinear grid, 2-D lon/lat on (y, x), with a block of imputed cells."""
    v = np.sin(np.radians(lon) * 8) + lat / 10
    flag = np.zeros(v.shape, np.int8)
    flag[1:3, 2:5] = 1
    ds = xr.Dataset({"v": (("y", "x"), v), "v_std": (("y", "x"), np.where(flag == 1, 0.1, 0.0)),
                     "v_imputed": (("y", "x"), flag)},
                    coords={"lon": (("y", "x"), lon), "lat": (("y", "x"), lat)})
    return ds, flag


def _drawn(ds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # map data may be missing here
        fig = plot.field_map(ds, "v")
    return fig, panels(fig)


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



@pytest.mark.parametrize("cap", ["north", "south"])
def test_field_map_sea_ice_grid_around_a_pole_gets_a_polar_map(cap):
    # a polar stereographic sea-ice grid: every longitude, latitudes poleward of 60; on the
    # global PlateCarree map it filled a thin band along the edge, now the cap fills the panel
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    yx = (np.arange(12) - 5.5) * 100.0
    x, y = np.meshgrid(yx, yx)
    lat = (90.0 - np.hypot(x, y) / 111.0) * (1 if cap == "north" else -1)
    ds, _ = _curvilinear(np.degrees(np.arctan2(x, -y)), lat)
    fig, axs = _drawn(ds)
    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    assert all(isinstance(ax.projection, polar) for ax in axs)
    x0, x1, y0, y1 = axs[0].get_extent(crs=axs[0].projection)
    drawn = axs[0].projection.transform_points(ccrs.PlateCarree(), ds.lon.values.ravel(), lat.ravel())
    span = np.ptp(drawn[:, :2], axis=0)
    assert x0 <= drawn[:, 0].min() and drawn[:, 0].max() <= x1 and y0 <= drawn[:, 1].min() <= y1
    assert span[0] > 0.5 * (x1 - x0) and span[1] > 0.5 * (y1 - y0)  # the data fill the map
    # drawn as cells, not as 144 markers: corners taken in the polar plane, so the cells
    # around the pole close on it and tile the cap without overlaps or gaps
    mesh = next(c for c in axs[0].collections if isinstance(c, QuadMesh) and c.get_gid() == "imputed")
    corners = mesh.get_coordinates()
    assert corners.shape == (13, 13, 2)
    plane = axs[0].projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    px, py = plane[:, 0].reshape(13, 13), plane[:, 1].reshape(13, 13)
    np.testing.assert_allclose(np.hypot(px[6, 6], py[6, 6]), 0.0, atol=1.0)  # the middle corner on the pole
    area = 0.5 * np.abs((px[1:, 1:] - px[:-1, :-1]) * (py[1:, :-1] - py[:-1, 1:])
                        - (px[1:, :-1] - px[:-1, 1:]) * (py[1:, 1:] - py[:-1, :-1]))
    assert area.max() < 1.5 * area.min()  # equal cells, none folded across the pole or the dateline
    assert not any(c.get_gid() == "observed" for c in axs[0].collections)  # no site markers
    fig.canvas.draw()
    # the latitude labels on the frame, not over the data in the middle of the map
    box = axs[0].get_window_extent()
    gridliners = [a for a in [*axs[0].artists, *getattr(axs[0], "_gridliners", [])] if hasattr(a, "label_artists")]
    labels = [t for gl in gridliners for t in gl.label_artists if t.get_visible() and t.get_text()]
    assert labels
    for t in labels:
        where = t.get_window_extent()
        assert not box.shrunk(0.8, 0.8).anchored("C", box).overlaps(where), t.get_text()
        assert t.get_rotation() == 0, t.get_text()  # read without turning the head


def _polar_case(case):
    """A field around the north pole, and the lon/lat of the corners of its cells (or its
    sites), worked out here: a sea-ice grid of 100 km cells laid out on the polar
    stereographic plane, a regular lon/lat grid from 60 N to the pole, or 40 stations."""
    import cartopy.crs as ccrs

    rng = np.random.default_rng(3)
    if case == "sites":  # all around but 130..100 W: maps put them on one arc, at 260..590 E
        lon, lat = np.mod(np.linspace(80.0, 410.0, 40), 360.0) - 180.0, rng.uniform(66.0, 88.0, 40)
        ds = xr.Dataset({"v": ("station", rng.normal(size=40)),
                         "v_std": ("station", np.where(np.arange(40) % 3 == 0, 0.2, 0.0))},
                        coords={"lon": ("station", lon), "lat": ("station", lat)})
        return ds, lon, lat
    if case == "lon/lat grid":  # 10 x 3 degree cells; edges at -180..180 and 60..90
        lon, lat = np.arange(-175.0, 180.0, 10.0), np.arange(61.5, 90.0, 3.0)
        ds = xr.Dataset({"v": (("lat", "lon"), rng.normal(size=(lat.size, lon.size)))},
                        coords={"lon": lon, "lat": lat})
        edges = np.meshgrid(np.arange(-180.0, 181.0, 10.0), np.arange(60.0, 91.0, 3.0))
        return ds, edges[0], edges[1]
    plane = ccrs.NorthPolarStereo()
    step = 100e3
    x, y = np.meshgrid((np.arange(12) - 5.5) * step, (np.arange(10) - 4.5) * step + 300e3)
    cx, cy = np.meshgrid((np.arange(13) - 6.0) * step, (np.arange(11) - 5.0) * step + 300e3)
    centres, corners = (ccrs.PlateCarree().transform_points(plane, a, b) for a, b in ((x, y), (cx, cy)))
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    return ds, corners[..., 0], corners[..., 1]


@pytest.mark.parametrize("case", ["sea-ice grid", "lon/lat grid", "sites"])
def test_polar_map_is_framed_by_its_data(case):
    # a polar map's extent is the box around the data as projected, every cell whole: a square
    # sea-ice grid fills its panel (the square around the disc down to its lowest latitude
    # left its corners empty); a lon/lat grid out to 60 N fills that disc; sites keep a margin
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    ds, lon, lat = _polar_case(case)
    fig, axs = _drawn(ds)
    fig.canvas.draw()
    ax = axs[0]
    assert isinstance(ax.projection, ccrs.NorthPolarStereo)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    xy = ax.projection.transform_points(ccrs.PlateCarree(), np.ravel(lon), np.ravel(lat))
    bx0, bx1, by0, by1 = xy[:, 0].min(), xy[:, 0].max(), xy[:, 1].min(), xy[:, 1].max()
    side = max(bx1 - bx0, by1 - by0)
    margin = 0.05 * side if case == "sites" else 0.0  # room for the markers
    np.testing.assert_allclose([x0, x1, y0, y1], [bx0 - margin, bx1 + margin, by0 - margin, by1 + margin],
                               atol=2e-3 * side)
    if case == "sites":
        h, v = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]).T
        assert h.size == 40
        drawn = ax.projection.transform_points(ccrs.PlateCarree(), np.mod(h + 180.0, 360.0) - 180.0, v)
    else:  # every corner of every cell drawn lies inside the map
        corners = mesh(ax).get_coordinates()
        drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    tol = 1e-6 * side
    assert (drawn[:, 0] >= x0 - tol).all() and (drawn[:, 0] <= x1 + tol).all()
    assert (drawn[:, 1] >= y0 - tol).all() and (drawn[:, 1] <= y1 + tol).all()
    if case == "sea-ice grid":  # and reach its frame on all four sides
        for edge, got in ((x0, drawn[:, 0].min()), (x1, drawn[:, 0].max()), (y0, drawn[:, 1].min()),
                          (y1, drawn[:, 1].max())):
            assert abs(got - edge) < 1e-6 * side


def _stereographic_grid(cap, central_longitude):
    """An NSIDC-like sea-ice grid, its 2-D lon/lat worked out here: 14 x 11 cells of 500 km on
    a regular x/y grid of the polar stereographic plane with ``central_longitude`` (degrees),
    true scale at 70 degrees, off-centre on the pole as NSIDC's grids are; and that plane."""
    import cartopy.crs as ccrs

    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    plane = polar(central_longitude=central_longitude, true_scale_latitude=70.0 if cap == "north" else -70.0)
    x, y = np.meshgrid((np.arange(14) - 6.5) * 500e3 - 100e3, (np.arange(11) - 5.0) * 500e3 + 200e3)
    lonlat = ccrs.PlateCarree().transform_points(plane, x, y)
    return lonlat[..., 0], lonlat[..., 1], plane


@pytest.mark.parametrize(("cap", "central_longitude"), [("north", -45.0), ("north", 30.0), ("south", 30.0)])
def test_polar_map_of_a_sea_ice_grid_follows_the_grid_s_orientation(cap, central_longitude):
    # a sea-ice grid laid out on a polar stereographic plane centred on -45 degrees (NSIDC's
    # north) gets a map centred on -45 degrees, not on the middle of its corners' longitudes,
    # which turned it on the map, nor on 45, 135 or -135 (a quarter turn also lays its rows
    # across the map, but not its y axis up): its rows run across the map, its columns up it,
    # and it fills its box without wedges
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    lon, lat, plane = _stereographic_grid(cap, central_longitude)
    ds, _ = _curvilinear(lon, lat)
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert isinstance(ax.projection, type(plane))
    chosen = ax.projection.proj4_params["lon_0"]
    assert abs(np.mod(chosen - central_longitude + 180.0, 360.0) - 180.0) < 0.2, chosen
    corners = mesh(ax).get_coordinates()
    drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    px, py = drawn[:, 0].reshape(corners.shape[:2]), drawn[:, 1].reshape(corners.shape[:2])
    # along a row or along a column: one of them across the map, the other up it
    row, col = (np.degrees(np.arctan2(np.diff(py, axis=a), np.diff(px, axis=a))) for a in (1, 0))
    for angle in (row, col):
        np.testing.assert_allclose(np.mod(angle + 45.0, 90.0) - 45.0, 0.0, atol=0.5)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    outer = np.ptp(px) * np.ptp(py)
    grid = _ring_area(px, py)
    assert grid > 0.99 * outer and outer > 0.99 * (x1 - x0) * (y1 - y0)  # the grid fills its box
    fig.canvas.draw()


@pytest.mark.parametrize("cap", ["north", "south"])
def test_a_polar_map_keeps_a_grid_s_y_axis_up_whichever_row_comes_first(cap):
    # the same sea-ice grid written top row first, as NSIDC writes its files (a falling y
    # coordinate), is drawn as NSIDC draws it too; without a y coordinate, the first row is the
    # bottom one (as pcolormesh draws an array), so the top-first grid turns half a turn
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    lon, lat, _ = _stereographic_grid(cap, -45.0)
    y = (np.arange(lon.shape[0]) - 5.0) * 500e3 + 200e3  # the rows' y on the plane, rising
    centres = {}
    for case, flip, coord in (("bottom first", False, True), ("top first", True, True),
                              ("top first, no y", True, False)):
        ds, _ = _curvilinear(lon[::-1] if flip else lon, lat[::-1] if flip else lat)
        if coord:
            ds = ds.assign_coords(y=y[::-1] if flip else y)
        fig, axs = _drawn(ds)
        centres[case] = axs[0].projection.proj4_params["lon_0"]
        corners = mesh(axs[0]).get_coordinates()
        drawn = axs[0].projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
        rows_y = drawn[:, 1].reshape(corners.shape[:2]).mean(axis=1)
        assert (np.diff(rows_y) > 0).all() == (case != "top first"), case  # y up: the top row drawn at the top
        plt.close(fig)
    assert abs(centres["bottom first"] + 45.0) < 0.2 and abs(centres["top first"] + 45.0) < 0.2, centres
    assert abs(np.mod(centres["top first, no y"] - 135.0 + 180.0, 360.0) - 180.0) < 0.2, centres


def _ring_area(px, py):
    """The area enclosed by the outer ring of a grid of corners (shoelace formula)."""
    rx = np.concatenate([px[0, :], px[1:, -1], px[-1, -2::-1], px[-2:0:-1, 0]])
    ry = np.concatenate([py[0, :], py[1:, -1], py[-1, -2::-1], py[-2:0:-1, 0]])
    return 0.5 * abs(np.sum(rx * np.roll(ry, -1) - np.roll(rx, -1) * ry))


#: NSIDC's hemispheric polar stereographic grids (25 km cells): the central longitude (degrees)
#: and the x and y of the outer cell edges (km)
_NSIDC = {"north": (-45.0, (-3850.0, 3750.0), (-5350.0, 5850.0)),
          "south": (0.0, (-3950.0, 3950.0), (-3950.0, 4350.0))}


def _nsidc_grid(cap, *, shift=(0.0, 0.0), scale=1.0):
    """An NSIDC hemispheric sea-ice grid downsampled to 100 km cells (``scale`` times that), its
    2-D lon/lat worked out here with cartopy: the centres and the corners of its cells, the
    outer edges moved by ``shift`` (km) on the plane; and that plane (true scale at 70 degrees)."""
    import cartopy.crs as ccrs

    central_longitude, (x0, x1), (y0, y1) = _NSIDC[cap]
    polar = ccrs.NorthPolarStereo if cap == "north" else ccrs.SouthPolarStereo
    plane = polar(central_longitude=central_longitude, true_scale_latitude=70.0 if cap == "north" else -70.0)
    cx = (np.arange(x0, x1 + 1.0, 100.0) + shift[0]) * 1e3 * scale
    cy = (np.arange(y0, y1 + 1.0, 100.0) + shift[1]) * 1e3 * scale
    x, y = np.meshgrid(0.5 * (cx[1:] + cx[:-1]), 0.5 * (cy[1:] + cy[:-1]))
    centres, corners = (ccrs.PlateCarree().transform_points(plane, a, b) for a, b in ((x, y), np.meshgrid(cx, cy)))
    return centres[..., :2], corners[..., :2], plane


@pytest.mark.parametrize("cap", ["north", "south"])
def test_polar_map_of_an_nsidc_hemispheric_grid(cap):
    # NSIDC's hemispheric sea-ice grids enclose the pole but reach 31 N (39 S) at their corners,
    # not poleward of 40: they were drawn as points on a global PlateCarree map. A grid that
    # encloses a pole and lies wholly in its hemisphere gets the polar map, framed by the box
    # around its cells and turned to its rows
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    centres, corners, plane = _nsidc_grid(cap)
    assert np.abs(corners[..., 1]).min() < 40.0  # not a cap poleward of 40
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert all(isinstance(a.projection, type(plane)) for a in axs)
    chosen = ax.projection.proj4_params["lon_0"]
    assert abs(np.mod(chosen - _NSIDC[cap][0] + 180.0, 360.0) - 180.0) < 0.2, chosen  # NSIDC's own picture
    # drawn as its cells, and the frame is the box around them on the map
    drawn = mesh(ax).get_coordinates()
    assert drawn.shape == (*corners.shape[:2], 2)
    xy = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    side = max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1]))
    np.testing.assert_allclose([x0, x1, y0, y1], [xy[:, 0].min(), xy[:, 0].max(), xy[:, 1].min(), xy[:, 1].max()],
                               atol=2e-3 * side)
    fig.canvas.draw()


@pytest.mark.parametrize("case", ["pole outside", "across the equator"])
def test_a_grid_that_does_not_enclose_a_pole_in_its_hemisphere_keeps_its_map(case):
    # the same grid moved 4000 km along x (the pole 150 km outside its west edge), or with cells
    # twice as long (enclosing the pole, but reaching 7 S): no polar map, drawn as before, as
    # cells on a PlateCarree map centred on them, or as points on a global one
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs

    moved = case == "pole outside"
    centres, corners, _ = _nsidc_grid("north", shift=(4000.0, 0.0) if moved else (0.0, 0.0), scale=1.0 if moved else 2.0)
    assert (corners[..., 1].min() > 10.0) == moved
    ds, _ = _curvilinear(centres[..., 0], centres[..., 1])
    fig, axs = _drawn(ds)
    assert all(isinstance(ax.projection, ccrs.PlateCarree) for ax in axs)
    cells = [c for c in axs[0].collections if isinstance(c, QuadMesh)]
    assert bool(cells) == moved
    fig.canvas.draw()


@pytest.mark.parametrize("offset", [0.25, 3.0])
def test_a_regional_grid_beside_a_pole_gets_a_polar_map_drawn_as_cells(offset):
    # a sea-ice grid on NSIDC's plane whose west edge passes the pole at a quarter of a cell
    # (the pole between its outer centres and its outer corners) or three cells away: on
    # PlateCarree it was a thin strip along the top edge (and the first drawn as points); now
    # a polar map, centred as the plane, the grid's cells whole and filling the box
    ccrs = pytest.importorskip("cartopy.crs")

    plane = ccrs.NorthPolarStereo(central_longitude=-45.0)
    x, y = np.meshgrid((np.arange(12) + offset) * 200e3, (np.arange(10) - 4.5) * 200e3)
    lonlat = ccrs.PlateCarree().transform_points(plane, x, y)
    lon, lat = lonlat[..., 0], lonlat[..., 1]
    from geogpvae.plot.polar import enclosed_pole

    assert enclosed_pole(lon, lat) is None and lat.min() > 60.0
    ds, _ = _curvilinear(lon, lat)
    fig, axs = _drawn(ds)
    ax = axs[0]
    assert isinstance(ax.projection, ccrs.NorthPolarStereo)
    assert abs(ax.projection.proj4_params["lon_0"] + 45.0) < 0.2
    corners = mesh(ax).get_coordinates()
    assert corners.shape[:2] == (11, 13)
    drawn = ax.projection.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    on_plane = plane.transform_points(ccrs.PlateCarree(), corners[..., 0].ravel(), corners[..., 1].ravel())
    np.testing.assert_allclose(np.diff(on_plane[:, 0].reshape(11, 13), axis=1), 200e3, rtol=1e-3)  # the plane's cells (sphere vs ellipsoid)
    x0, x1, y0, y1 = ax.get_extent(crs=ax.projection)
    side = max(x1 - x0, y1 - y0)
    np.testing.assert_allclose([drawn[:, 0].min(), drawn[:, 0].max(), drawn[:, 1].min(), drawn[:, 1].max()],
                               [x0, x1, y0, y1], atol=2e-3 * side)
    fig.canvas.draw()


def test_a_regular_grid_beside_a_pole_keeps_its_rectangle_and_sites_get_a_polar_map():
    # a regular lon/lat grid over 70-90 N, 0-30 E would be a thin wedge on a polar map: it keeps
    # its map; stations on Svalbard (76-80 N) get the polar map
    ccrs = pytest.importorskip("cartopy.crs")

    lat, lon = np.arange(70.5, 90.0), np.arange(0.5, 30.0)
    grid = xr.Dataset({"v": (("lat", "lon"), np.add.outer(lat, lon))},
                      coords={"lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon, {"units": "degrees_east"})})
    rng = np.random.default_rng(0)
    sites = xr.Dataset({"v": ("site", rng.normal(size=40))},
                       coords={"lon": ("site", rng.uniform(10, 30, 40), {"units": "degrees_east"}),
                               "lat": ("site", rng.uniform(76, 80, 40), {"units": "degrees_north"})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept, polar = plot.field_map(grid, "v"), plot.field_map(sites, "v")
    assert not isinstance(panels(kept)[0].projection, ccrs.NorthPolarStereo)
    assert isinstance(panels(polar)[0].projection, ccrs.NorthPolarStereo)


def test_only_data_that_reach_near_a_pole_are_beside_it():
    from geogpvae.plot.polar import NEAR_POLE, POLAR_EDGE, beside_pole

    assert beside_pole(69.0, 87.0) == "north" and beside_pole(-87.0, -69.0) == "south"
    assert beside_pole(POLAR_EDGE, NEAR_POLE) == "north" and beside_pole(-NEAR_POLE, -POLAR_EDGE) == "south"
    assert beside_pole(55.0, 71.0) is None  # Scandinavia keeps its map
    assert beside_pole(POLAR_EDGE - 1.0, 88.0) is None and beside_pole(-88.0, 1 - POLAR_EDGE) is None
    assert beside_pole(-85.0, 85.0) is None


def test_polar_corners_only_for_grids_all_around_a_pole():
    from geogpvae.plot.polar import polar_corners

    yx = (np.arange(8) - 3.5) * 100.0
    x, y = np.meshgrid(yx, yx)
    lat, lon = 90.0 - np.hypot(x, y) / 111.0, np.degrees(np.arctan2(x, -y))
    lon = lon[3, 3] + np.mod(lon - lon[3, 3] + 180.0, 360.0) - 180.0  # on one arc, as maps give them
    assert polar_corners(lon, lat) is not None
    # a regional grid at 70-78 N across the prime meridian (and one across the dateline) is no cap
    j, i = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    for west in (-10.0, 170.0):
        assert polar_corners(west + 3.0 * i, 70.0 + 2.0 * j) is None


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


# --------------------------------------------------------------------------------------
# field_map: grids, projections, the dateline
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# offline map data and the cartopy fallback
# --------------------------------------------------------------------------------------


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


def test_plot_command_quiet_drops_the_missing_outlines_warning(no_map_data, _no_network_and_fresh_warnings,
                                                                 tmp_path, capsys):
    """``geogpvae plot -q`` says nothing about absent coastlines; without -q one line says so."""
    from geogpvae.cli import main

    ds, _ = make_global()
    path = tmp_path / "sst.nc"
    ds.isel(time=0, drop=True).to_netcdf(path)
    assert main(["plot", "-q", str(path), "-o", str(tmp_path / "quiet.png")]) == 0
    assert capsys.readouterr().err == ""
    # the same process again without -q: the warning dropped above did not count as shown
    assert main(["plot", str(path), "-o", str(tmp_path / "said.png")]) == 0
    err = capsys.readouterr().err
    assert "warning: no coastlines" in err and "Natural Earth" in err


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


# --------------------------------------------------------------------------------------
# uncertainty
# --------------------------------------------------------------------------------------


def _gaussian_case(n=5000, scale=1.0, seed=3):
    rng = np.random.default_rng(seed)
    mean = rng.normal(10.0, 2.0, n)
    sd = rng.uniform(0.5, 2.0, n)
    truth = mean + sd * rng.normal(size=n)
    flag = np.ones(n, dtype=np.int8)
    flag[:50] = 0  # observed cells do not count
    ds = xr.Dataset({
        "v": ("cell", np.where(flag == 0, truth, mean), {"units": "K", "long_name": "vee"}),
        "v_std": ("cell", np.where(flag == 0, 0.0, sd * scale), {"units": "K"}),
        "v_imputed": ("cell", flag),
    })
    return ds, xr.DataArray(truth, dims="cell")


def test_interval_coverage_calibrated_and_overconfident():
    ds, truth = _gaussian_case()
    cov = plot.interval_coverage(ds, "v", truth)
    assert list(cov) == [0.5, 0.8, 0.95]
    for p, c in cov.items():
        assert c == pytest.approx(p, abs=0.025)
    # std half the truth: P(|Z| <= 0.98) = 0.673 at the 95% level
    ds2, truth2 = _gaussian_case(scale=0.5)
    assert plot.interval_coverage(ds2, "v", truth2, levels=[0.95])[0.95] == pytest.approx(
        0.673, abs=0.025)


def test_a_truth_is_matched_to_the_field_by_its_coordinates():
    ds, truth = _gaussian_case(n=400)
    ds = ds.assign_coords(x=("cell", np.linspace(0.0, 1.0, 400)), y=("cell", np.cos(np.arange(400.0))))
    truth = truth.assign_coords(x=ds.x, y=ds.y)
    cov = plot.interval_coverage(ds, "v", truth)
    # the same sites in another order (a truth file sorted by y), and with float32 coordinates
    assert plot.interval_coverage(ds, "v", truth.sortby("y")) == cov
    assert plot.interval_coverage(ds, "v", truth.assign_coords(y=truth.y.astype("float32"))) == cov
    with pytest.raises(ValueError, match=r"truth's x, y along 'cell' are not the field's"):
        plot.interval_coverage(ds, "v", truth.assign_coords(x=truth.x + 5.0))
    # a grid whose truth runs the other way along y (as latitudes often do)
    grid = xr.Dataset({k: (("y", "x"), ds[k].values.reshape(20, 20)) for k in ("v", "v_std", "v_imputed")},
                      coords={"y": np.arange(20.0), "x": np.arange(20.0)})
    gtruth = xr.DataArray(truth.values.reshape(20, 20), dims=("y", "x"), coords=grid.coords)
    assert plot.interval_coverage(grid, "v", gtruth) == cov
    assert plot.interval_coverage(grid, "v", gtruth.isel(y=slice(None, None, -1))) == cov


@pytest.mark.parametrize("point", ["median", "mean"])
def test_interval_coverage_log_space(point):
    rng = np.random.default_rng(4)
    n = 5000
    mu = rng.normal(3.0, 1.0, n)
    s = rng.uniform(0.2, 1.0, n)
    truth = np.exp(mu + s * rng.normal(size=n))
    if point == "median":
        value = np.exp(mu)
        sd = np.sqrt(np.exp(2 * mu + s**2) * (np.exp(s**2) - 1))
    else:
        value = np.exp(mu + s**2 / 2)
        sd = value * np.sqrt(np.exp(s**2) - 1)
    attrs = {"units": "mD", "geogpvae_transform": "log"}
    if point == "mean":
        attrs["geogpvae_point_estimate"] = "mean"
    ds = xr.Dataset({"k": ("cell", value, attrs), "k_std": ("cell", sd),
                     "k_imputed": ("cell", np.ones(n, dtype=np.int8))})
    cov = plot.interval_coverage(ds, "k", xr.DataArray(truth, dims="cell"))
    for p, c in cov.items():
        assert c == pytest.approx(p, abs=0.025)
    # Gaussian intervals in linear units are wrong for such a skewed variable
    lin = plot.interval_coverage(ds, "k", xr.DataArray(truth, dims="cell"), space="linear")
    assert abs(lin[0.5] - 0.5) > 0.05


def test_uncertainty_figure_with_truth():
    ds, truth = _gaussian_case()
    fig = plot.uncertainty(ds, "v", truth=truth)
    axs = {ax.get_gid(): ax for ax in fig.axes if ax.get_gid()}
    assert {"std-vs-error", "coverage"} <= set(axs)
    cov = plot.interval_coverage(ds, "v", truth)
    bars = [p for p in axs["coverage"].patches if p.get_gid() == "empirical"]
    np.testing.assert_allclose([b.get_height() for b in bars], [100 * c for c in cov.values()])
    texts = [t.get_text() for t in axs["coverage"].texts]
    assert texts == [f"{100 * c:.1f}%" for c in cov.values()]
    # 4950 points > max_scatter: a hexbin; the expected line has slope sqrt(2/pi)
    kinds = {type(c).__name__ for c in axs["std-vs-error"].collections}
    assert "PolyCollection" in kinds
    line = next(ln for ln in axs["std-vs-error"].lines if ln.get_gid() == "expected")
    x, y = line.get_data()
    assert y[-1] / x[-1] == pytest.approx(0.7979, abs=1e-3)
    fig = plot.uncertainty(ds, "v", truth=truth, max_scatter=10_000)
    ax = next(a for a in fig.axes if a.get_gid() == "std-vs-error")
    pts = next(c for c in ax.collections if c.get_gid() == "points")
    assert len(pts.get_offsets()) == 4950
    # the axes end at the 99.5 % quantiles: what lies beyond is drawn on the edge and counted
    sigma = ds.v_std.values[ds.v_imputed.values == 1]
    err = np.abs(ds.v.values - truth.values)[ds.v_imputed.values == 1]
    (xmax, ymax) = ax.get_xlim()[1], ax.get_ylim()[1]
    outside = int(((sigma > xmax) | (err > ymax)).sum())
    edge = next(c for c in ax.collections if c.get_gid() == "beyond")
    assert outside > 0 and len(edge.get_offsets()) == outside
    assert np.all(edge.get_offsets()[:, 0] <= xmax) and np.all(edge.get_offsets()[:, 1] <= ymax)
    assert f"{outside} of 4950 beyond the axes" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_uncertainty_log_variable_and_histogram():
    ds, truth = make_volume()
    fig = plot.uncertainty(ds, "kx", truth=truth)
    ax = next(a for a in fig.axes if a.get_gid() == "std-vs-error")
    assert "ln(" in ax.get_xlabel()
    assert "log space" in next(a for a in fig.axes if a.get_gid() == "coverage").get_title()

    fig = plot.uncertainty(ds, "porosity")
    axs = [a for a in fig.axes if a.get_gid() == "std-histogram"]
    assert len(axs) == 1
    heights = sum(p.get_height() for p in axs[0].patches)
    assert heights == np.sum(ds["porosity_imputed"].values == 1)
    fig = plot.uncertainty(ds, "kx")
    assert next(a for a in fig.axes if a.get_gid() == "std-histogram").get_xscale() == "log"


# --------------------------------------------------------------------------------------
# training history
# --------------------------------------------------------------------------------------


def test_training_history_lines():
    n = 12
    hist = {
        "epoch": list(range(1, n + 1)),
        "loss": list(np.linspace(5, 1, n)),
        "expected_nll": list(np.linspace(4.5, 0.8, n)),
        "kl": list(np.linspace(0.5, 0.2, n)),
        "elapsed": list(np.arange(1, n + 1) * 0.5),
        "lr": [1e-3] * n,
    }
    fig = plot.training_history(hist)
    axs = {ax.get_gid(): ax for ax in fig.axes}
    assert set(axs) == {"elbo", "kl"}
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    np.testing.assert_allclose(lines["loss"].get_ydata(), hist["loss"])
    np.testing.assert_allclose(lines["expected_nll"].get_ydata(), hist["expected_nll"])
    np.testing.assert_allclose(lines["kl"].get_ydata(), hist["kl"])
    np.testing.assert_allclose(lines["kl"].get_xdata(), hist["epoch"])
    assert "6.0 s" in fig.get_suptitle()


def test_training_history_optional_keys_and_errors():
    fig = plot.training_history({"loss": [3.0, 2.0, 1.5]})
    assert [ax.get_gid() for ax in fig.axes] == ["elbo"]
    np.testing.assert_allclose(fig.axes[0].lines[0].get_xdata(), [1, 2, 3])
    with pytest.raises(ValueError):
        plot.training_history({"loss": [1.0, 2.0], "kl": [1.0]})
    with pytest.raises(ValueError):
        plot.training_history({"kl": [1.0]})
    with pytest.raises(ValueError):
        plot.training_history({"loss": []})


# --------------------------------------------------------------------------------------
# rendering to files
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# publication details: what the notebooks' figures got wrong
# --------------------------------------------------------------------------------------


def make_spe10_like(nz: int = 11, ny: int = 24, nx: int = 8, seed: int = 4):
    """A small volume laid out like ``load_spe10(downsample=2)``: every other model layer.

    z holds the depth of the cell centres, (2 i + 0.5) * 0.6096 m, and a 1-based ``layer``
    coordinate along z numbers the model layers kept, 1, 3, 5, ...: index 10 is layer 21
    at 12.4968 m. The coordinates carry SPE10's long names, and the cells are twice as tall
    (y) as they are wide (x), so the panels are tall.
    """
    rng = np.random.default_rng(seed)
    iz, iy, ix = 2 * np.arange(nz), 2 * np.arange(ny), 2 * np.arange(nx)
    coords = {
        "z": ("z", (iz + 0.5) * 0.6096, {"units": "m", "axis": "Z", "positive": "down",
                                         "long_name": "depth of the cell centre below the "
                                                      "top of the model"}),
        "y": ("y", (iy + 0.5) * 3.048, {"units": "m", "axis": "Y",
                                            "long_name": "y coordinate of the cell centre"}),
        "x": ("x", (ix + 0.5) * 6.096, {"units": "m", "axis": "X",
                                        "long_name": "x coordinate of the cell centre"}),
        "layer": ("z", (iz + 1).astype(np.int32), {"long_name": "layer number, 1 at the top",
                                                   "units": "1"}),
    }
    dims = ("z", "y", "x")
    k = np.exp(rng.normal(3.0, 1.0, (nz, ny, nx)))
    flag = (rng.random(k.shape) < 0.4).astype(np.int8)
    ds = xr.Dataset(
        {
            "kx": (dims, k, {"units": "mD", "long_name": "permeability in x",
                             "geogpvae_transform": "log",
                             "ancillary_variables": "kx_std kx_imputed"}),
            "kx_std": (dims, np.where(flag == 1, 0.4 * k, 0.0), {"units": "mD"}),
            "kx_imputed": (dims, flag, dict(FLAG_ATTRS)),
        },
        coords=coords,
    )
    return ds


def predicted_grid(ny: int = 30, nx: int = 24):
    """What ``GPVAEImputer.predict`` returns on a (y, x) grid: ``v`` and ``v_std`` only.

    The std is positive at every node inside the study area; outside it, both are NaN.
    """
    y = 0.1 + 0.05 * np.arange(ny)
    x = 0.3 + 0.05 * np.arange(nx)
    yy, xx = np.meshgrid(y, x, indexing="ij")
    inside = (xx - x.mean()) ** 2 + (yy - y.mean()) ** 2 < 0.36
    cd = np.where(inside, 1.0 + 0.5 * np.sin(3 * xx), np.nan)
    sd = np.where(inside, 0.2 + 0.1 * np.cos(2 * yy), np.nan)
    ds = xr.Dataset(
        {
            "Cd": (("y", "x"), cd, {"units": "mg kg-1", "long_name": "cadmium",
                                    "ancillary_variables": "Cd_std"}),
            "Cd_std": (("y", "x"), sd, {"units": "mg kg-1"}),
        },
        coords={
            "y": ("y", y, {"units": "km", "long_name": "northing on the local Jura grid"}),
            "x": ("x", x, {"units": "km", "long_name": "easting on the local Jura grid"}),
        },
    )
    return ds, inside


def inches(fig, artist):
    """The drawn extent of an artist in inches from the figure's lower left corner."""
    box = artist.get_window_extent(fig.canvas.get_renderer())
    return box.transformed(fig.dpi_scale_trans.inverted())


def test_field_map_without_flag_treats_positive_std_as_predicted():
    ds, inside = predicted_grid()
    fig = plot.field_map(ds, "Cd")
    field, std = panels(fig)
    # every prediction has its std drawn; only outside the study area is masked
    assert_masked_equal(mesh(std).get_array(), ds["Cd_std"].values)
    assert np.ma.count(mesh(std).get_array()) == inside.sum()
    assert field.get_title() == "predicted field"
    # nothing is observed, so there are no holes to outline (it would trace the border)
    assert not [c for c in field.collections if c.get_gid() == "outline"]
    domain = next(c for c in field.collections if c.get_gid() == "domain")
    np.testing.assert_array_equal(np.ma.getmaskarray(domain.get_array()), ~inside)

    # impute's output without its flag: a std of 0 marks the observed cells again
    layer, _ = make_volume()
    layer = layer.isel(z=0).drop_vars("kx_imputed")
    layer["kx"].attrs["ancillary_variables"] = "kx_std"
    flag = make_volume()[0]["kx_imputed"].isel(z=0).values
    fig = plot.field_map(layer, "kx")
    field, std = panels(fig)
    assert field.get_title() == "imputed field"
    assert_masked_equal(mesh(std).get_array(),
                        np.where(flag == 1, layer["kx_std"].values, np.nan))
    fig = plot.layers(layer.expand_dims("z"), "kx")
    observed = panels(fig)[0]
    assert_masked_equal(mesh(observed).get_array(),
                        np.where(flag == 0, layer["kx"].values, np.nan))


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


def test_layers_titles_use_the_layer_coordinate_and_round_the_depth():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[1, 21])  # SPE10's own layer numbers
    titles = [ax.get_title() for ax in panels(fig)]
    assert all("layer 1 (z = 0.305 m)" in t for t in titles[:3])
    assert all("layer 21 (z = 12.5 m)" in t for t in titles[3:])
    assert not any("12.4968" in t or "layer 11" in t for t in titles)
    # without the coordinate, the layer number is the 1-based index
    fig = plot.layers(ds.drop_vars("layer"), "kx", layer=11)
    assert all("layer 11 (z = 12.5 m)" in ax.get_title() for ax in panels(fig))
    # a layer selected beforehand: its number first, and no units "1" after it
    fig = plot.layers(ds.isel(z=10), "kx")
    title = panels(fig)[0].get_title()
    assert "layer 21, z = 12.5 m" in title and "21 1" not in title


def test_coordinate_values_are_rounded_for_titles():
    assert style._fmt_value(12.4968) == "12.5"
    assert style._fmt_value(0.3048) == "0.305"
    assert style._fmt_value(6.0) == "6"
    assert style._fmt_value(np.int32(21)) == "21"
    assert style._fmt_value(1234.5678) == "1235"
    # neighbours stay apart: 3 significant digits would print 1500 for both
    assert style._fmt_value(1500.3, step=0.3) == "1500.3"
    assert style._fmt_value(1500.6, step=0.3) == "1500.6"
    assert style._fmt_value(np.datetime64("2001-02-15T00:00")) == "2001-02-15"
    # hourly data keep their hours (each panel its own title), and cftime dates read the same way
    assert style._fmt_value(np.datetime64("2001-02-15T06:00:00.000000000")) == "2001-02-15 06:00"
    cftime = pytest.importorskip("cftime")
    assert style._fmt_value(cftime.DatetimeNoLeap(2000, 1, 15)) == "2000-01-15"
    assert style._fmt_value(cftime.Datetime360Day(2000, 2, 30, 12)) == "2000-02-30 12:00"


def test_layers_axis_labels_fit_narrow_panels():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[3, 5])
    bottom = [ax for ax in panels(fig)[3:]]
    assert [ax.get_xlabel() for ax in bottom] == ["x [m]"] * 3
    assert all(ax.get_xlabel() == "" for ax in panels(fig)[:3])  # outer panels only
    fig.canvas.draw()
    boxes = [inches(fig, ax.xaxis.label) for ax in bottom]
    for left, right in itertools.pairwise(boxes):
        assert left.x1 < right.x0  # neighbouring labels do not touch
    # wide panels keep the long names
    fig = plot.layers(ds, "kx", layer=3, panel_width=4.5)
    assert panels(fig)[0].get_xlabel() == "x coordinate of the cell centre [m]"


def test_layers_tall_panels_leave_no_gap_above_the_colourbars():
    ds = make_spe10_like()
    fig = plot.layers(ds, "kx", layer=[3, 5, 7], truth=ds)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_inches = fig.dpi_scale_trans.inverted()
    lowest = min(ax.get_tightbbox(renderer).transformed(to_inches).y0 for ax in panels(fig))
    for cb in colorbars(fig).values():
        top = cb.get_position().y1 * fig.get_size_inches()[1]
        assert 0.0 < lowest - top < 0.2  # the x labels, then the colourbar, close below
    width, height = fig.get_size_inches()
    used = fig.get_tightbbox(renderer)
    assert height - used.height < 0.3 and width - used.width < 0.3


def test_training_history_zooms_past_the_first_epochs():
    rng = np.random.default_rng(5)
    n = 120
    loss = 3.0 + np.exp(-np.arange(n) / 15.0) + 0.02 * rng.normal(size=n)
    loss[0] = 440.0
    nll = loss - 0.5
    kl = 0.5 + 0.3 * (1 - np.exp(-np.arange(n) / 10.0))
    kl[0] = 40.0
    fig = plot.training_history({"loss": loss, "expected_nll": nll, "kl": kl})
    axs = {ax.get_gid(): ax for ax in fig.axes}
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    np.testing.assert_array_equal(lines["loss"].get_ydata(), loss)  # every epoch is drawn
    np.testing.assert_array_equal(lines["kl"].get_ydata(), kl)
    bottom, top = axs["elbo"].get_ylim()
    assert bottom <= nll.min()  # from the lowest value to the settled part, not to 440
    assert loss[n // 2:].max() < top < 10.0
    bottom, top = axs["kl"].get_ylim()
    assert bottom <= kl[1:].min() and kl[1:].max() < top < 5.0
    note = next(t for t in axs["elbo"].texts if t.get_gid() == "off-scale")
    assert "epoch 1" in note.get_text() and "440" in note.get_text()
    # a history without such a start keeps its whole range and has no note
    fig = plot.training_history({"loss": np.linspace(5.0, 1.0, 40)})
    bottom, top = fig.axes[0].get_ylim()
    assert bottom < 1.0 and top > 5.0 and not fig.axes[0].texts


def test_uncertainty_hexbin_colourbar_clears_the_coverage_panel():
    ds, truth = _gaussian_case()
    fig = plot.uncertainty(ds, "v", truth=truth)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_inches = fig.dpi_scale_trans.inverted()
    cbar = next(a for a in fig.axes if a.get_gid() == "colorbar:count")
    coverage = next(a for a in fig.axes if a.get_gid() == "coverage")
    right = cbar.get_tightbbox(renderer).transformed(to_inches).x1  # with its label
    left = coverage.get_tightbbox(renderer).transformed(to_inches).x0
    assert left - right > 0.15
    assert cbar.yaxis.label.get_text() == "cells per bin"


def test_units_typeset_for_figures():
    assert plot.pretty_units("mg kg-1") == "mg kg\u207b\u00b9"
    assert plot.pretty_units("m2 s-1") == "m\u00b2 s\u207b\u00b9"
    assert plot.pretty_units("W m^-2") == "W m\u207b\u00b2"
    assert plot.pretty_units("degrees_east") == "\u00b0E"
    assert plot.pretty_units("mD") == "mD"
    assert plot.pretty_units("1") == "" and plot.pretty_units(None) == ""
    assert plot.pretty_units("days since 2000-01-01") == "days since 2000-01-01"
    da = xr.DataArray([1.0], attrs={"long_name": "zinc", "units": "mg kg-1"})
    assert plot.label_for(da) == "zinc [mg kg\u207b\u00b9]"


def test_std_colour_map_keeps_clear_of_the_grey_of_empty_cells():
    from matplotlib.colors import to_rgb

    ds, _ = make_volume()
    fig = plot.layers(ds, "kx", layer=1)
    std = mesh(panels(fig)[2])
    grey = np.array(to_rgb(style.MASKED_COLOUR))
    colours = std.cmap(np.linspace(0, 1, 64))[:, :3]
    # no colour of the map is as light and as grey as the masked cells
    assert np.min(np.abs(colours - grey).sum(axis=1)) > 0.25


def _profile_case(vertical: bool = False, log: bool = False):
    """A 1-D output as impute writes it: observed values with std 0, imputed ones with a std."""
    n = 60
    where = np.arange(n, dtype=float)
    truth = 2.0 + np.sin(where / 6.0)
    flag = np.zeros(n, dtype=np.int8)
    flag[20:30] = 1
    sd = np.where(flag == 1, 0.3, 0.0)
    value = np.where(flag == 1, 2.0, truth)
    attrs = {"units": "m", "long_name": "level"}
    if log:
        attrs["geogpvae_transform"] = "log"
    dim = "depth" if vertical else "x"
    coord = {"positive": "down", "units": "m"} if vertical else {"units": "km"}
    ds = xr.Dataset({"v": (dim, value, attrs), "v_std": (dim, sd), "v_imputed": (dim, flag)},
                    coords={dim: (dim, where, coord)})
    return ds, xr.DataArray(truth, dims=dim, coords={dim: where})


def test_profile_of_a_one_dimensional_field():
    ds, truth = _profile_case()
    fig = plot.profile(ds, "v", truth=truth)
    (ax,) = fig.axes
    lines = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
    assert {"observed", "imputed", "band", "truth"} <= set(lines)
    np.testing.assert_array_equal(lines["imputed"].get_xdata(), np.arange(20.0, 30.0))
    assert len(lines["observed"].get_xdata()) == 50
    # the band: 1.96 std either side where imputed, no width where observed
    (path,) = lines["band"].get_paths()
    x, y = path.vertices.T
    assert y[(x >= 20) & (x <= 29)].max() == pytest.approx(2.0 + 1.96 * 0.3, abs=1e-3)
    assert y[(x >= 20) & (x <= 29)].min() == pytest.approx(2.0 - 1.96 * 0.3, abs=1e-3)
    at = (x == 40.0)  # observed: the band closes on the value
    assert y[at].min() == pytest.approx(y[at].max()) == pytest.approx(truth.values[40])
    assert ax.get_ylabel() == "level [m]" and ax.get_xlabel().startswith("x")
    # a transect stored out of order is drawn along its coordinate, the same line
    shuffled = ds.isel(x=np.random.default_rng(0).permutation(60))
    again = {a.get_gid(): a for a in plot.profile(shuffled, "v", truth=truth).axes[0].get_children() if a.get_gid()}
    np.testing.assert_array_equal(again["truth"].get_xydata(), lines["truth"].get_xydata())
    np.testing.assert_array_equal(again["imputed"].get_xdata(), np.arange(20.0, 30.0))
    # field_map has no map of a transect: it draws the profile
    assert {a.get_gid() for a in plot.field_map(ds, "v").axes} == {"profile"}
    with pytest.raises(ValueError, match=r"one-dimensional"):
        plot.profile(_gaussian_case()[0].expand_dims(t=2), "v")


def test_profile_of_a_well_log_runs_down_and_log_bands_are_asymmetric():
    ds, _ = _profile_case(vertical=True, log=True)
    ax = plot.profile(ds, "v").axes[0]
    assert ax.yaxis_inverted() and ax.get_xscale() == "log"
    (band,) = [a for a in ax.get_children() if a.get_gid() == "band"]
    value, depth = band.get_paths()[0].vertices.T
    gap = value[(depth >= 20) & (depth <= 29)]
    assert gap.max() - 2.0 > 2.0 - gap.min() + 0.05 > 0.05  # exp(mu +- z s) around the median 2


def test_profile_of_one_well_is_drawn_along_its_measured_depth():
    # one well of a (well, depth) output whose measured depth md (well, depth) differs per well:
    # after isel(well=...) md is the only coordinate on the dim 'depth', which has none of its own
    ds, _ = _profile_case(vertical=True)
    md = 1700.0 + 0.5 * ds.depth.values
    one = ds.drop_vars("depth").assign_coords(
        md=("depth", md, {"units": "m", "positive": "down", "long_name": "measured depth"}))
    ax = plot.profile(one, "v").axes[0]
    imputed = next(a for a in ax.get_children() if a.get_gid() == "imputed")
    np.testing.assert_array_equal(imputed.get_ydata(), md[20:30])
    assert ax.yaxis_inverted() and ax.get_ylabel() == "measured depth [m]"
    # two coordinates on the dim: neither is chosen, positions as before
    two = one.assign_coords(tvd=("depth", md - 50.0, {"units": "m"}))
    assert plot.profile(two, "v").axes[0].get_ylabel() == "position along depth"


def _wells(names: bool):
    """Logs on (well, depth) as impute writes them: three wells, x/y on the well dim."""
    one, truth = _profile_case(vertical=True)
    ds = xr.concat([one.assign(v=one.v + k) for k in range(3)], dim="well", coords="minimal")
    ds = ds.assign_coords(x=("well", [0.0, 500.0, 900.0], {"units": "m"}), y=("well", [0.0, 300.0, -200.0], {"units": "m"}))
    if names:
        ds = ds.assign_coords(well=["A-1", "B-2", "C-3"])
    return ds, xr.concat([truth + k for k in range(3)], dim="well")


@pytest.mark.parametrize("names", [False, True])
def test_isel_of_one_well_draws_its_log(names):
    # the log of the second well, along its depth (down), titled with the well picked; the truth too
    ds, truth = _wells(names)
    fig = plot.field_map(ds, "v", truth=truth, isel={"well": 1})
    (ax,) = fig.axes
    lines = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
    assert ax.get_gid() == "profile" and {"imputed", "truth"} <= set(lines)
    np.testing.assert_array_equal(lines["imputed"].get_ydata(), np.arange(20.0, 30.0))
    np.testing.assert_allclose(lines["truth"].get_xdata(), truth.isel(well=1).values)
    assert ax.yaxis_inverted()
    assert ax.get_title() == ("level (well = B-2)" if names else "level (well index 1)")  # long_name
    # a depth picked: the wells on a map, as before
    assert all(a.get_gid() != "profile" for a in plot.field_map(ds, "v", isel={"depth": 25}).axes)
    with pytest.raises(IndexError, match="index 3 out of range for .well. of size 3"):
        plot.field_map(ds, "v", isel={"well": 3})


# --------------------------------------------------------------------------------------
# fields with nothing to draw
# --------------------------------------------------------------------------------------


def _empty_fields() -> dict[str, xr.Dataset]:
    grid = {"y": np.arange(4.0), "x": np.arange(5.0)}
    return {
        "grid": xr.Dataset({"v": (("y", "x"), np.full((4, 5), np.nan))}, coords=grid),
        "sites": xr.Dataset({"v": ("site", np.full(5, np.nan))},
                            coords={"x": ("site", np.arange(5.0)), "y": ("site", np.arange(5.0) ** 2)}),
        "line": xr.Dataset({"v": ("x", np.full(5, np.nan))}, coords={"x": np.arange(5.0)}),
        "volume": xr.Dataset({"v": (("z", "y", "x"), np.full((3, 4, 5), np.nan))},
                             coords={"z": np.arange(3.0), **grid}),
    }


@pytest.mark.parametrize("kind", ["grid", "sites", "line", "volume"])
def test_a_field_without_any_value_is_refused_not_drawn_empty(kind):
    """An all-NaN variable used to give empty panels with a made-up 0-1 colour bar."""
    ds = _empty_fields()[kind]
    draw = plot.layers if kind == "volume" else plot.field_map
    with pytest.raises(ValueError, match="'v' has no value anywhere"):
        draw(ds, "v")


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
