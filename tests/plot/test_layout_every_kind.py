"""Every figure kind, checked mechanically as it is drawn: no text leaves the figure, no two
texts overlap, colour bars sit close under their panels and carry arrows where they clip."""

from __future__ import annotations

import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.text as mtext
import numpy as np
import pytest
from figure_helpers import colorbars, make_global, make_sites, make_spe10_like, make_volume, panels, predicted_grid
from test_layout import _grid
from test_profiles import _profile_case

from geogpvae import plot


def _drawn_texts(fig) -> list[tuple[str, object]]:
    """(text, window box) of every non-empty text the renderer draws."""
    drawn = []
    draw = mtext.Text.draw

    def record(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append((self.get_text(), self.get_window_extent(renderer)))

    mtext.Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        mtext.Text.draw = draw
    return drawn


def _layout_faults(fig) -> list[str]:
    texts = _drawn_texts(fig)
    width, height = fig.bbox.width, fig.bbox.height
    faults = [f"outside the figure: {t!r}" for t, b in texts
              if b.x0 < -1 or b.y0 < -1 or b.x1 > width + 1 or b.y1 > height + 1]
    faults += [f"overlap: {a!r} / {b!r}" for i, (a, p) in enumerate(texts) for b, q in texts[i + 1:]
               if p.overlaps(q)]
    return faults


def _clips(cax) -> tuple[bool, bool]:
    """Whether data drawn with the colour bar's norm lie below / above its limits."""
    norm = cax._colorbar.norm
    values = [np.ma.compressed(np.ma.masked_invalid(np.ma.asarray(c.get_array(), dtype=float)))
              for ax in cax.figure.axes for c in [*ax.collections, *ax.images]
              if getattr(c, "norm", None) is norm and c.get_array() is not None and ax is not cax]
    values = np.concatenate([v for v in values if v.size] or [np.array([])])
    return bool(values.size and values.min() < norm.vmin), bool(values.size and values.max() > norm.vmax)


def _named_in_units(ds):
    """As load_spe10 names its permeabilities: the units in the long name too."""
    ds["kx"].attrs["long_name"] = "permeability in the x direction (mD)"
    return ds


FIGURES = {
    "map of a grid with its truth": lambda: plot.field_map(g := _grid(), "v", truth=g.v * 1.1),
    "map of a dense grid": lambda: plot.field_map(_grid((60, 90)), "v"),
    "map of predictions": lambda: plot.field_map(predicted_grid()[0], "Cd"),
    "map of sites": lambda: plot.field_map(make_sites()[0].drop_vars(["lon", "lat"]), "zn"),
    "map of sites with their truth": lambda: plot.field_map(make_sites()[0].drop_vars(["lon", "lat"]), "zn",
                                                            truth=make_sites()[1]),
    "map of sites on the sphere": lambda: plot.field_map(make_sites()[0], "zn"),
    "global map": lambda: plot.field_map(make_global()[0].isel(time=0), "tas"),
    "polar map": lambda: plot.field_map(make_global()[0].isel(time=0).sel(lat=slice(90, 50)), "tas"),
    "one layer": lambda: plot.layers(make_volume()[0], "kx", layer=2),
    "SPE10 layers named with their units": lambda: plot.layers(k := _named_in_units(make_spe10_like()), "kx",
                                                                layer=[3, 21], truth=k.kx * 1.2),
    "profile": lambda: plot.profile((c := _profile_case())[0], "v", truth=c[1]),
    "vertical profile": lambda: plot.profile((c := _profile_case(vertical=True, log=True))[0], "v", truth=c[1]),
    "calibration of a grid": lambda: plot.uncertainty(g := _grid(), "v", truth=g.v + 0.3),
    "calibration at sites": lambda: plot.uncertainty(make_sites()[0], "zn", truth=make_sites()[1]),
    "training history": lambda: plot.training_history(
        {"epoch": list(range(1, 41)), "loss": list(np.linspace(9, 1, 40)), "kl": list(np.linspace(2, 1, 40)),
         "expected_nll": list(np.linspace(7, 0, 40))}),
}


def _bar_gaps(fig) -> dict[str, float]:
    """Inches between the lowest label of a map's panels and the top of each colour bar under them."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    low = min(ax.get_tightbbox(r).y0 for ax in panels(fig))
    return {gid: (low - cax.get_window_extent(r).y1) / fig.dpi for gid, cax in colorbars(fig).items()}


@pytest.mark.parametrize("kind", sorted(FIGURES))
def test_figure_layout(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # map data may be missing here
        fig = FIGURES[kind]()
    assert _layout_faults(fig) == []
    labels = [t.get_text() for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label)]
    assert not [t for t in labels if re.search(r"\((.+?)\)\s*\[\1\]", t)], labels  # "(mD) [mD]"
    for gid, cax in colorbars(fig).items():
        low, high = _clips(cax)
        assert cax._colorbar.extend == (("both" if high else "min") if low else ("max" if high else "neither")), gid
    if kind.startswith(("map", "global", "polar")):  # colour bars under the panels, close to their labels
        gaps = _bar_gaps(fig)
        assert gaps and all(0.03 < g < 0.2 for g in gaps.values()), gaps


def test_legend_of_sites_covers_no_site():
    fig = FIGURES["map of sites"]()
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert len(legends) == 1
    box = legends[0].get_window_extent(r)
    for ax in panels(fig):
        assert not box.overlaps(ax.get_window_extent(r)), ax.get_gid()


@pytest.mark.parametrize(("shape", "outlined"), [((30, 30), True), ((48, 48), False)])
def test_outlines_of_imputed_cells_only_where_cells_show_them(shape, outlined):
    fig = plot.field_map(_grid(shape), "v")
    drawn = any(c.get_gid() == "outline" for c in panels(fig)[0].collections)
    assert drawn is outlined
    if not outlined:  # asked for, they are drawn anyway
        fig = plot.field_map(_grid(shape), "v", outline_holes=True)
        assert any(c.get_gid() == "outline" for c in panels(fig)[0].collections)
