"""Synthetic outputs of geogpvae.impute and helpers that look into the figures drawn of them.

Shared by the figure tests in tests/plot/ and tests/cli/test_plot.py, which import it by name:
tests/ is on ``sys.path`` through tests/conftest.py (pytest's default ``prepend`` import mode).
The figure tests check what is drawn, not only that a call returns.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr
from matplotlib.collections import PathCollection, QuadMesh

from geogpvae import plot

FLAG_ATTRS = {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": "observed imputed"}


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


def _scatter(ax, gid):
    found = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_gid() == gid]
    assert len(found) == 1, [c.get_gid() for c in ax.collections]
    return found[0]


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
