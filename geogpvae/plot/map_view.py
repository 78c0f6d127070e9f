"""The frame of a map: its extent (cell edges for grids), its projection for lon/lat data,
and the size of the figure and of its panels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cartography import _import_cartopy
from .conventions import _Metrics, _tick_chars
from .map_geometry import _MapGeometry
from .polar import (
    beside_pole,
    enclosed_pole,
    polar_cap,
    polar_centre,
    polar_extent,
    polar_projection,
)
from .style import _corners, _edges


@dataclass
class _MapView:
    """The extent of the map (cell edges for grids) and, for lon/lat, its projection."""

    hedges: np.ndarray | None
    vedges: np.ndarray | None
    h0: float
    h1: float
    v0: float
    v1: float
    ccrs: Any = None
    proj: Any = None
    data_crs: Any = None
    is_global: bool = False
    centre: float = 0.0
    cap: str | None = None  # "north" or "south": a polar cap, on a polar stereographic map
    box: list[float] | None = None  # the extent of a polar map, in its projection's units

    @property
    def span(self) -> float:
        return self.h1 - self.h0

    @property
    def middle(self) -> float:
        return 0.5 * (self.h0 + self.h1)

    @classmethod
    def choose(cls, g: _MapGeometry, projection: Any) -> _MapView:
        hedges = vedges = None
        if g.sites is None:  # the edges of a grid, or the corners of a curvilinear one
            edges = _corners if g.hc.ndim == 2 else _edges
            hedges, vedges = g.corners if g.corners is not None else (edges(g.hc), edges(g.vc))
            if g.is_lonlat:
                vedges = np.clip(vedges, -90.0, 90.0)
            h0, h1 = float(np.min(hedges)), float(np.max(hedges))
            v0, v1 = float(np.min(vedges)), float(np.max(vedges))
        else:
            hfin, vfin = g.hc[np.isfinite(g.hc)], g.vc[np.isfinite(g.vc)]
            h0, h1 = float(np.min(hfin)), float(np.max(hfin))
            v0, v1 = float(np.min(vfin)), float(np.max(vfin))
            pad_h, pad_v = 0.05 * (h1 - h0 or 1.0), 0.05 * (v1 - v0 or 1.0)
            h0, h1, v0, v1 = h0 - pad_h, h1 + pad_h, v0 - pad_v, v1 + pad_v
            if g.is_lonlat:
                v0, v1 = max(v0, -90.0), min(v1, 90.0)
        view = cls(hedges, vedges, h0, h1, v0, v1)
        view.ccrs = _import_cartopy() if g.is_lonlat else None
        if view.ccrs is not None:
            view.centre = float(np.mod(view.middle + 180.0, 360.0) - 180.0)
            view.is_global = view.span >= 300
            view.proj = _projection(view.ccrs, projection, view.centre, float(0.5 * (v0 + v1)),
                                    view.span, view.is_global)
            view.data_crs = view.ccrs.PlateCarree()
            beside = beside_pole(v0, v1) if np.ndim(hedges) != 1 else None  # (a regular grid keeps its rectangle)
            view.cap = (polar_cap(view.span, v0, v1) or enclosed_pole(hedges, vedges) or beside) if projection is None else None
            if view.cap is not None:  # a curvilinear grid's map follows the grid's own orientation
                view.centre = polar_centre(view.ccrs, view.cap, view.centre, hedges, vedges, rows_up=g.rows_up)
                view.proj = polar_projection(view.ccrs, view.cap, view.centre)
                view.box = _polar_box(g, view)
        return view


def _polar_box(g: _MapGeometry, view: _MapView) -> list[float]:
    """The extent of a polar map: the box around the grid's cells, or its sites with a margin."""
    if g.sites is not None:
        return polar_extent(view.ccrs, view.proj, g.hc, g.vc, pad=0.05)
    if view.hedges.ndim == 1:  # a regular grid's edges
        return polar_extent(view.ccrs, view.proj, view.hedges[None, :], view.vedges[:, None])
    return polar_extent(view.ccrs, view.proj, view.hedges, view.vedges)


@dataclass
class _MapSize:
    """Figure size and the panel size, estimated from the text around the panels."""

    figsize: tuple[float, float]
    width: float
    w: float
    h: float
    gap: float
    top: float
    below: float
    fixed: bool
    same_units: bool
    auto: bool
    mt: Any
    cbar_pad: float = 0.1  # inches
    under: float = 0.0  # inches of tick and axis labels under a panel


def _map_ratio(g: _MapGeometry, view: _MapView) -> tuple[float, bool, bool]:
    """Height over width of a panel, whether it is fixed, whether both axes share units."""
    same_units = False
    if g.is_lonlat:
        ratio = (view.v1 - view.v0) / max(view.span, 1e-9)
        if view.ccrs is None or not view.is_global:
            floor = 0.05 if view.ccrs is None else 0.2
            ratio /= max(math.cos(math.radians(0.5 * (view.v0 + view.v1))), floor)
    else:
        same_units = (
            g.hattr is not None and g.vattr is not None
            and g.hattr.attrs.get("units") == g.vattr.attrs.get("units")
        )
        ratio = (view.v1 - view.v0) / max(view.span, 1e-12) if same_units else 0.8
    # panels with a fixed aspect get the figure height that their aspect asks for
    fixed = g.is_lonlat or same_units
    return (float(np.clip(ratio, 0.25, 2.5)) if fixed else 0.8), fixed, same_units


def _map_size(g: _MapGeometry, view: _MapView, nv: int, nu: int, panel_width: float,
              figsize: tuple[float, float] | None) -> _MapSize:
    ratio, fixed, same_units = _map_ratio(g, view)
    ncols = nv + nu
    mt = _Metrics()
    if view.ccrs is not None:  # grid line labels in small type, left of and under panel 1 only
        left = mt.w_pad + mt.tick + mt.digits(5, mt.small)
        gap = 2 * mt.w_pad
        under = mt.x_ticks(mt.small)
    else:  # tick labels on every panel, axis labels under all and left of the first
        ychars = _tick_chars(view.v0, view.v1)
        left = mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick + mt.digits(ychars)
        gap = 2 * mt.w_pad + mt.tick + mt.digits(ychars)
        under = mt.x_ticks() + mt.x_label()
    width = panel_width * ncols + 0.6 if figsize is None else float(figsize[0])
    w = max((width - left - mt.w_pad - 0.03 - (ncols - 1) * gap) / ncols, 0.3)
    top = mt.h_pad + mt.lines(mt.big) + mt.title(1)  # suptitle and panel titles
    cbar_pad = 0.1
    below = (mt.h_pad + under + cbar_pad + mt.x_ticks() + mt.x_label()
             + 0.85 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 30.0)
    auto = figsize is None
    if figsize is None:
        h = w * ratio
        figsize = (width, top + h + below)
    else:
        h = max(float(figsize[1]) - top - below, 0.3)
        if fixed:
            w, h = min(w, h / ratio), min(h, w * ratio)
    return _MapSize(figsize, width, w, h, gap, top, below, fixed, same_units, auto, mt, cbar_pad,
                    under)


def _projection(ccrs, projection, centre: float, clat: float, span: float, is_global: bool):
    if projection is not None and not isinstance(projection, str):
        return projection
    name = (projection or "").lower()
    if not name:
        if is_global:
            name = "platecarree"
        elif span < 60:
            name = "lambertazimuthalequalarea"
        else:
            name = "platecarree"
    if name == "platecarree":
        return ccrs.PlateCarree(central_longitude=centre)
    if name in ("lambertazimuthalequalarea", "laea"):
        return ccrs.LambertAzimuthalEqualArea(central_longitude=centre, central_latitude=clat)
    if name == "mercator":
        return ccrs.Mercator(central_longitude=centre)
    if name == "robinson":
        return ccrs.Robinson(central_longitude=centre)
    raise ValueError(f"unknown projection {projection!r}")
