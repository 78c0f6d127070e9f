"""Interval coverage and the uncertainty figure (geogpvae/plot/calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from figure_helpers import _gaussian_case, make_volume

from geogpvae import plot


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
