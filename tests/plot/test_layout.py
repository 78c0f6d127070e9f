"""Figure layout checked with the renderer: no text box overlaps another or a colour bar;
std scales follow the data; lattice sites are drawn as a raster; surveys count sites."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import PathCollection, QuadMesh

from geogpvae import plot
from geogpvae.fields.cf import imputation_variables


def _filled(ds: xr.Dataset, name: str, rng, std_range=(0.5, 1.5)) -> xr.Dataset:
    """``name`` with half of its values marked imputed, and std/flag variables beside it."""
    v = ds[name]
    hidden = rng.random(v.shape) < 0.5
    holes = v.where(~hidden)
    std = rng.uniform(*std_range, v.shape)
    made = imputation_variables(name, holes, v.values, std)
    return ds.assign(made)


def _grid(n=(30, 30), long_name="synthetic variable", seed=0, std_range=(0.5, 1.5)):
    rng = np.random.default_rng(seed)
    y, x = np.linspace(0, 1, n[0]), np.linspace(0, 1, n[1])
    ds = xr.Dataset(
        {"v": (("y", "x"), rng.normal(size=n), {"long_name": long_name, "units": "mg kg-1"})},
        coords={"y": ("y", y, {"units": "km", "standard_name": "projection_y_coordinate",
                               "long_name": "northing"}),
                "x": ("x", x, {"units": "km", "standard_name": "projection_x_coordinate",
                               "long_name": "easting"})})
    return _filled(ds, "v", rng, std_range)


def _sites(xy, long_name="cadmium concentration in topsoil of the Swiss Jura", seed=1):
    rng = np.random.default_rng(seed)
    n = len(xy)
    ds = xr.Dataset(
        {"v": ("site", rng.normal(size=n), {"long_name": long_name, "units": "mg kg-1"})},
        coords={"x": ("site", xy[:, 0], {"units": "km", "standard_name": "projection_x_coordinate"}),
                "y": ("site", xy[:, 1], {"units": "km", "standard_name": "projection_y_coordinate"})})
    return _filled(ds, "v", rng)


def _texts(fig):
    """(owner gid, text, window box) of every drawn label, title and tick label."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        gid = ax.get_gid() or ""
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        # the tick labels drawn: those inside the view limits
        eps = 1e-9 * max(abs(x1 - x0), abs(y1 - y0), 1e-300)
        ticks = [t for t in ax.get_xticklabels() if x0 - eps <= t.get_position()[0] <= x1 + eps]
        ticks += [t for t in ax.get_yticklabels() if y0 - eps <= t.get_position()[1] <= y1 + eps]
        offsets = [ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text()]  # "1e-7+2.8e-2"
        for t in [ax.title, ax.xaxis.label, ax.yaxis.label, *ticks, *offsets]:
            if t.get_visible() and t.get_text().strip():
                out.append((gid, t.get_text(), t.get_window_extent(r)))
    return out


def _overlaps(fig) -> list:
    texts = _texts(fig)
    bad = [(a[:2], b[:2]) for i, a in enumerate(texts) for b in texts[i + 1:] if a[2].overlaps(b[2])]
    r = fig.canvas.get_renderer()
    for cb in (ax for ax in fig.axes if (ax.get_gid() or "").startswith("colorbar")):
        box = cb.get_window_extent(r)
        bad += [((g, t), cb.get_gid()) for g, t, b in texts
                if not g.startswith("colorbar") and b.overlaps(box)]
    return bad


@pytest.mark.parametrize("with_truth", [False, True])
def test_xy_map_text_clears_colour_bars_and_other_text(with_truth):
    ds = _grid()
    truth = ds.v if with_truth else None
    fig = plot.field_map(ds, "v", truth=truth)
    assert _overlaps(fig) == []


def test_two_panel_map_keeps_the_colour_bar_labels_apart():
    ds = _grid(long_name="cadmium concentration in topsoil of the Swiss Jura")
    fig = plot.field_map(ds, "v")
    labels = {ax.get_gid(): ax.xaxis.label for ax in fig.axes
              if (ax.get_gid() or "").startswith("colorbar")}
    assert set(labels) == {"colorbar:value", "colorbar:uncertainty"}
    assert _overlaps(fig) == []
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    a, b = (labels[k].get_window_extent(r) for k in ("colorbar:value", "colorbar:uncertainty"))
    assert a.x1 < b.x0


def test_colour_bar_labels_never_leave_the_units_alone_on_a_line():
    assert plot.style.wrap_label("std of sea surface temperature [degC]", 31) == "std of sea surface\ntemperature [degC]"
    assert plot.style.wrap_label("sea surface temperature [degC]", 31) == "sea surface temperature [degC]"
    assert plot.style.wrap_label("porosity [1]", 5) == "porosity\n[1]"  # nothing to move down
    assert plot.style.wrap_label("  sea surface temperature [degC] ", 40) == "sea surface temperature [degC]"
    assert plot.style.wrap_label("cadmium in topsoil [mg kg-1]", 24) == "cadmium in\ntopsoil [mg kg-1]"
    ds = _grid(long_name="cadmium in the topsoil of the Swiss Jura mountains")
    fig = plot.field_map(ds, "v")
    for ax in fig.axes:
        if (ax.get_gid() or "").startswith("colorbar"):
            label = ax.xaxis.label.get_text()
            assert "\n" in label and not label.split("\n")[-1].startswith("["), label
    assert _overlaps(fig) == []


@pytest.mark.parametrize("std_range", [(0.0280240, 0.0280245), (288.1, 288.4), (1e-6, 2e-6)])
def test_colour_bar_offset_text_clears_its_label(std_range):
    # a narrow spread far from 0 (two wells' std at one depth, a std in K) or values of 1e-6
    # take an offset or a multiplier, which was printed over the bar's label
    ds = _grid(std_range=std_range, long_name="porosity of the reservoir sandstone")
    ds["v"] = ds.v * (std_range[1] - std_range[0]) + std_range[0]
    fig = plot.field_map(ds, "v")
    fig.canvas.draw()
    bar = next(ax for ax in fig.axes if ax.get_gid() == "colorbar:uncertainty")
    assert bar.xaxis.get_offset_text().get_text()  # the case at stake: an offset is drawn
    assert _overlaps(fig) == []


def test_layers_text_clears_colour_bars():
    rng = np.random.default_rng(2)
    z = np.arange(4.0)
    ds = xr.Dataset(
        {"k": (("z", "y", "x"), rng.normal(size=(4, 12, 10)),
               {"long_name": "permeability in the x direction (mD)", "units": "9.869233e-16 m2"})},
        coords={"z": ("z", z, {"units": "m", "positive": "down"}),
                "y": ("y", np.arange(12.0) * 3, {"units": "m"}),
                "x": ("x", np.arange(10.0) * 6, {"units": "m"})})
    ds = _filled(ds, "k", rng)
    fig = plot.layers(ds, "k", layer=[1, 3], truth=ds.k)
    assert _overlaps(fig) == []


def test_std_scale_follows_the_data_not_zero():
    ds = _grid(std_range=(0.063, 0.069))
    fig = plot.field_map(ds, "v")
    std = next(ax for ax in fig.axes if ax.get_gid() == "std")
    lo, hi = next(c for c in std.collections if isinstance(c, QuadMesh)).get_clim()
    assert 0.062 < lo < 0.0635 and 0.0685 < hi < 0.07


def test_sites_on_a_lattice_are_drawn_as_a_raster():
    yy, xx = np.meshgrid(np.arange(20) * 0.05, np.arange(25) * 0.05, indexing="ij")
    keep = (xx - 0.6) ** 2 + (yy - 0.5) ** 2 < 0.25  # an irregular area of a regular lattice
    nodes = np.column_stack([xx[keep], yy[keep]])
    ds = _sites(nodes)
    fig = plot.field_map(ds, "v")
    panels = [ax for ax in fig.axes if ax.get_gid() in ("imputed", "std")]
    for ax in panels:
        assert any(isinstance(c, QuadMesh) for c in ax.collections)
        assert not any(isinstance(c, PathCollection) for c in ax.collections)
    mesh = next(c for c in panels[0].collections if isinstance(c, QuadMesh))
    arr = mesh.get_array()
    shape = (len(np.unique(nodes[:, 1])), len(np.unique(nodes[:, 0])))
    assert arr.shape == shape and int(np.ma.count(arr)) == keep.sum()
    # scattered sites off any lattice stay markers
    rng = np.random.default_rng(0)
    fig = plot.field_map(_sites(rng.uniform(0, 1, (150, 2))), "v")
    assert any(isinstance(c, PathCollection) for c in fig.axes[0].collections)


def test_predictions_at_sites_are_labelled_predicted():
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 1, (60, 2))
    ds = _sites(xy)
    pred = ds[["v", "v_std"]].assign(v_std=ds.v_std * 0 + 0.3)
    pred["v"].attrs.pop("ancillary_variables", None)
    fig = plot.field_map(pred, "v")
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["observed (0)", "predicted (60)"]


def test_surveys_count_sites_and_grids_count_cells():
    rng = np.random.default_rng(4)
    sites = _sites(rng.uniform(0, 1, (80, 2)))
    fig = plot.uncertainty(sites, "v", truth=sites.v + 0.1)
    assert "imputed sites" in fig.axes[0].get_title()
    grid = _grid()
    fig = plot.uncertainty(grid, "v", truth=grid.v + 0.1)
    assert "imputed cells" in fig.axes[0].get_title()
