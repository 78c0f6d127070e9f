"""The drawing of a map's panels: colours and markers, cells or sites, frames and map
features, the legend of sites and the colourbars."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from .cartography import _add_map_features
from .conventions import PANEL_TITLES, _Field, _uncertainty_label
from .map_geometry import _MapGeometry, _MapPanels
from .map_view import _MapSize, _MapView
from .style import (
    VALUE_CMAP,
    _cmap,
    _colourbar,
    _draw_domain,
    _outline,
    _panel_norms,
    label_for,
    wrap_label,
)

_MAP_TITLES = {**PANEL_TITLES, "imputed": "imputed field"}


@dataclass
class _PanelStyle:
    """Norms and colour maps of the value and the uncertainty panels, and the marker size."""

    vnorm: Any
    unorm: Any
    vcmap: Any
    ucmap: Any
    marker_size: float

    @classmethod
    def choose(cls, p: _MapPanels, percentiles, use_log: bool, cmap, std_cmap, marker_size):
        vnorm, unorm = _panel_norms([p.panels[k] for k in p.value_keys],
                                    [p.panels[k] for k in p.unc_keys], percentiles, use_log)
        size = marker_size or float(np.clip(4000.0 / max(p.panels["imputed"].size, 1), 10.0, 60.0))
        return cls(vnorm, unorm, _cmap(cmap or VALUE_CMAP), _cmap(std_cmap), size)


def _draw_map_panel(ax, key: str, g: _MapGeometry, p: _MapPanels, style: _PanelStyle,
                    view: _MapView, outline_holes: bool) -> Any:
    """Draw one panel's data; return the artist that carries its colours."""
    is_value = key in p.value_keys
    norm, cm = (style.vnorm, style.vcmap) if is_value else (style.unorm, style.ucmap)
    tkw = {"transform": view.data_crs} if view.data_crs is not None else {}
    ax.set_gid(key)
    title = "predicted field" if key == "imputed" and p.predicted_only else _MAP_TITLES[key]
    ax.set_title(title, fontsize="medium")
    if g.sites is not None:
        return _draw_sites(ax, key, g.hc, g.vc, p.panels[key], p.obs, p.imp, p.inside, cm, norm,
                           style.marker_size, tkw)
    m = ax.pcolormesh(view.hedges, view.vedges, p.panels[key], cmap=cm, norm=norm,
                      shading="flat", rasterized=True, **tkw)
    m.set_gid(key)
    _draw_domain(ax, view.hedges, view.vedges, p.inside, **tkw)
    if key == "imputed" and outline_holes and p.imp.any() and p.obs.any():
        _outline(ax, view.hedges, view.vedges, p.imp, **tkw)
    return m


def _frame_map_panel(ax, g: _MapGeometry, view: _MapView, *, first: bool, coastlines: bool,
                     borders: bool, same_units: bool) -> None:
    """Extent, gridlines or axis labels, and map features of one panel."""
    if view.ccrs is not None:
        if view.cap is not None:
            ax.set_extent(view.box, crs=view.proj)
        elif view.is_global:
            ax.set_global()
        else:
            ax.set_extent([view.h0 - view.middle, view.h1 - view.middle, view.v0, view.v1],
                          crs=view.ccrs.PlateCarree(central_longitude=view.centre))
        # labels on the first panel only (cartopy's label placement is slow); on the frame around a pole
        inline = {"x_inline": False, "y_inline": False, "rotate_labels": False} if view.cap is not None else {}
        gl = ax.gridlines(draw_labels=first, linewidth=0.3, color="0.4", alpha=0.7, **inline)
        if first:
            gl.top_labels = gl.right_labels = False
            gl.xlabel_style = gl.ylabel_style = {"size": "small"}
        _add_map_features(ax, view.ccrs, view.span, coastlines, borders)
        return
    ax.set_xlim(view.h0, view.h1)
    ax.set_ylim(view.v0, view.v1)
    if g.is_lonlat:
        ax.set_aspect(1.0 / max(math.cos(math.radians(0.5 * (view.v0 + view.v1))), 0.05))
        ax.set_xlabel("longitude [\u00b0E]")
        if first:
            ax.set_ylabel("latitude [\u00b0N]")
        return
    if same_units:
        ax.set_aspect("equal")
    ax.set_xlabel(label_for(g.hattr, g.hname) if g.hattr is not None else g.hname)
    if first:  # the other panels show the same map
        ax.set_ylabel(label_for(g.vattr, g.vname) if g.vattr is not None else g.vname)


def _fit_projected_height(fig, ax, size: _MapSize) -> float:
    """Resize the figure to the projected extent's shape; the panel height in inches."""
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    h = size.w * float(np.clip(abs(y1 - y0) / max(abs(x1 - x0), 1e-12), 0.25, 2.5))
    fig.set_size_inches(size.width, size.top + h + size.below)
    return h


def _map_colourbars(fig, axes, mappables, p: _MapPanels, f: _Field, var: str, pad: float,
                    size: _MapSize) -> None:
    kw = {"location": "bottom", "shrink": 0.85, "aspect": 30, "pad": pad}

    def bar_label(text: str, n_panels: int) -> str:
        # wrapped to the bar's width, so two bars side by side keep their labels apart
        inches = kw["shrink"] * (n_panels * size.w + (n_panels - 1) * size.gap)
        return wrap_label(text, max(12, int(inches / (0.55 * size.mt.label_font))))

    value_axes = [a for a, k in zip(axes, p.keys, strict=True) if k in p.value_keys]
    _colourbar(fig, mappables[p.value_keys[0]], value_axes,
               bar_label(label_for(f.value, var), len(p.value_keys)), "colorbar:value", **kw)
    if p.unc_keys:
        unc_axes = [a for a, k in zip(axes, p.keys, strict=True) if k in p.unc_keys]
        _colourbar(fig, mappables[p.unc_keys[0]], unc_axes,
                   bar_label(_uncertainty_label(f, p.unc_keys), len(p.unc_keys)),
                   "colorbar:uncertainty", **kw)


def _trim_slack(fig, panels) -> None:
    """Shrink the figure by the width and height its fixed-aspect panels leave empty in their
    layout cells, so that no band of white lies between panels or under them.

    The planned size can only estimate the labels; one run of the layout measures what the aspect
    left over (and settles the layout, whose first run leaves colour bars over the labels).
    """
    fig.get_layout_engine().execute(fig)
    for p in panels:
        p.apply_aspect()
    width, height = fig.get_size_inches()
    spare_w = sum(p.get_position(original=True).width - p.get_position().width for p in panels) * width
    spare_h = min(p.get_position(original=True).height - p.get_position().height for p in panels) * height
    if spare_w > 0.02 or spare_h > 0.02:
        fig.set_size_inches(width - max(spare_w, 0.0), height - max(spare_h, 0.0))


def _draw_sites(ax, key, hc, vc, data, obs, imp, inside, cmap, norm, size, tkw):
    """Scatter the sites of one panel; return the collection that carries the colours."""
    values = np.ma.filled(data.astype(float), np.nan)
    main = None
    if key in ("imputed", "truth"):
        outside = ~inside
        if outside.any():
            c = ax.scatter(hc[outside], vc[outside], s=size * 0.5, marker="x", c="0.55",
                           linewidths=0.6, zorder=2, **tkw)
            c.set_gid("outside")
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], c=values[obs], s=size, marker="o", cmap=cmap,
                           norm=norm, edgecolors="0.25", linewidths=0.3, zorder=3, **tkw)
            c.set_gid("observed")
            main = c
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c if main is None else main
    else:
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], s=size * 0.25, marker="o", c="0.6",
                           linewidths=0, zorder=2, **tkw)
            c.set_gid("context")
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c
    if main is None:  # nothing to colour: an empty mappable keeps the colourbar valid
        import matplotlib.cm as mcm

        main = mcm.ScalarMappable(norm=norm, cmap=cmap)
    return main


def _site_legend(fig, obs, imp, inside) -> None:
    handles = [
        Line2D([], [], marker="o", linestyle="", markerfacecolor="0.7",
               markeredgecolor="0.25", markeredgewidth=0.3, markersize=6,
               label=f"observed ({int(obs.sum())})"),
        Line2D([], [], marker="^", linestyle="", markerfacecolor="0.7",
               markeredgecolor="k", markeredgewidth=0.9, markersize=7,
               label=f"{'imputed' if obs.any() else 'predicted'} ({int(imp.sum())})"),
    ]
    if (~inside).any():
        handles.append(Line2D([], [], marker="x", linestyle="", color="0.55",
                              label=f"outside domain ({int((~inside).sum())})"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small", frameon=False)
