"""The ``ds.gpvae`` accessor's plotting methods draw what geogpvae.plot draws."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

import geogpvae.accessor  # registers ds.gpvae
from geogpvae import plot


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _volume(seed: int = 0) -> tuple[xr.Dataset, xr.Dataset]:
    rng = np.random.default_rng(seed)
    nz, ny, nx = 4, 10, 8
    dims = ("z", "y", "x")
    kx_true = np.exp(rng.normal(3.0, 1.0, (nz, ny, nx)))
    flag = (rng.random((nz, ny, nx)) < 0.4).astype(np.int8)
    kx = kx_true * np.where(flag == 1, np.exp(rng.normal(0, 0.2, flag.shape)), 1.0)
    sd = np.where(flag == 1, 0.3 * kx, 0.0)
    ds = xr.Dataset(
        {
            "kx": (dims, kx, {"units": "mD", "long_name": "permeability in x",
                              "geogpvae_transform": "log",
                              "ancillary_variables": "kx_std kx_imputed"}),
            "kx_std": (dims, sd, {"units": "mD"}),
            "kx_imputed": (dims, flag, {"flag_values": np.array([0, 1], dtype=np.int8),
                                        "flag_meanings": "observed imputed"}),
        },
        coords={
            "z": ("z", 1.0 + np.arange(nz), {"units": "m", "positive": "down"}),
            "y": ("y", 10.0 * np.arange(ny), {"units": "m"}),
            "x": ("x", 10.0 * np.arange(nx), {"units": "m"}),
        },
    )
    return ds, xr.Dataset({"kx": (dims, kx_true)})


def _sites(n: int = 40, seed: int = 1) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    flag = (rng.random(n) < 0.3).astype(np.int8)
    flag[0] = 1
    return xr.Dataset(
        {
            "co": ("site", rng.uniform(5, 15, n), {"units": "mg kg-1", "long_name": "cobalt"}),
            "co_std": ("site", np.where(flag == 1, 1.0, 0.0), {"units": "mg kg-1"}),
            "co_imputed": ("site", flag),
        },
        coords={
            "x": ("site", rng.uniform(0, 5, n), {"units": "km"}),
            "y": ("site", rng.uniform(0, 5, n), {"units": "km"}),
        },
    )


def _panel_data(fig: Figure) -> list[tuple[str, np.ndarray]]:
    out = []
    for ax in fig.axes:
        gid = ax.get_gid()
        if not gid or gid.startswith("colorbar"):
            continue
        for c in ax.collections:
            if isinstance(c, (QuadMesh, PathCollection)) and c.get_gid() in (gid, "imputed",
                                                                             "observed"):
                out.append((f"{gid}/{c.get_gid()}", np.ma.filled(c.get_array(), np.nan)))
    return out


def test_accessor_is_registered():
    ds, _ = _volume()
    assert isinstance(ds.gpvae, geogpvae.accessor.GPVAEAccessor)
    for name in ("plot_layers", "plot_map", "plot_uncertainty", "impute"):
        assert callable(getattr(ds.gpvae, name))


def test_plot_layers_matches_the_function():
    ds, truth = _volume()
    fig = ds.gpvae.plot_layers("kx", layer=[1, 4], truth=truth)
    ref = plot.layers(ds, "kx", layer=[1, 4], truth=truth)
    assert isinstance(fig, Figure)
    got, want = _panel_data(fig), _panel_data(ref)
    assert [g for g, _ in got] == [w for w, _ in want]
    assert len(got) == 10
    for (_, a), (_, b) in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    titles = [ax.get_title() for ax in fig.axes if ax.get_gid() == "imputed"]
    assert "layer 1" in titles[0] and "layer 4" in titles[1]
    meshes = [c for ax in fig.axes for c in ax.collections
              if isinstance(c, QuadMesh) and c.get_gid() == ax.get_gid()]
    assert all(isinstance(m.norm, LogNorm) for m in meshes)


def test_plot_map_matches_the_function():
    ds = _sites()
    fig = ds.gpvae.plot_map("co")
    ref = plot.field_map(ds, "co")
    got, want = _panel_data(fig), _panel_data(ref)
    assert [g for g, _ in got] == [w for w, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    imputed = next(c for c in fig.axes[0].collections if c.get_gid() == "imputed")
    flag = ds["co_imputed"].values == 1
    np.testing.assert_array_equal(imputed.get_offsets(),
                                  np.column_stack([ds["x"].values, ds["y"].values])[flag])


def test_plot_uncertainty_passes_keywords():
    ds, truth = _volume()
    fig = ds.gpvae.plot_uncertainty("kx", truth=truth, levels=(0.9,))
    cov = plot.interval_coverage(ds, "kx", truth, levels=(0.9,))
    ax = next(a for a in fig.axes if a.get_gid() == "coverage")
    bars = [p for p in ax.patches if p.get_gid() == "empirical"]
    assert [b.get_height() for b in bars] == pytest.approx([100 * cov[0.9]])
    fig = ds.gpvae.plot_uncertainty("kx")
    assert any(a.get_gid() == "std-histogram" for a in fig.axes)


def test_methods_forward_with_the_targets_docs_and_signature():
    import inspect

    import geogpvae.api
    import geogpvae.validation

    ds = xr.Dataset()
    for method, target in ((ds.gpvae.plot_layers, plot.layers), (ds.gpvae.plot_map, plot.field_map),
                           (ds.gpvae.plot_uncertainty, plot.uncertainty),
                           (ds.gpvae.plot_residual_variogram, plot.residual_variogram),
                           (ds.gpvae.impute, geogpvae.api.impute),
                           (ds.gpvae.validate, geogpvae.validation.validate)):
        assert method.__doc__ == target.__doc__
        assert method.__wrapped__ is target
        params = list(inspect.signature(target).parameters.values())[1:]
        assert list(inspect.signature(method).parameters.values()) == params
