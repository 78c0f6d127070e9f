"""Curvilinear grids on a map: 2-D longitudes and latitudes, as ocean and climate models write.

:func:`_curvilinear` finds such a grid for :func:`~geogpvae.plot.field_map`, searches it once
for the placeholder cells that NEMO writes without a position
(:func:`~geogpvae.fields.placeholders.placeholder_cells`), and tells whether its cells can be
drawn (:func:`_mesh_centres`) or are drawn as points at their centres.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from ..fields.placeholders import placeholder_cells
from .conventions import _is_lat, _is_lon
from .polar import polar_corners
from .style import _fill_centres, _warn_once


def _curvilinear_coords(ds: xr.Dataset, var: str, coords: str) -> tuple[xr.DataArray, xr.DataArray] | None:
    """``(lon, lat)`` of a curvilinear grid (both 2-D, on dims of ``var``), or None."""
    if coords == "xy" or var not in ds.data_vars:
        return None
    dims = set(map(str, ds[var].dims))
    two_d = {str(n): c for n, c in ds.coords.items() if c.ndim == 2 and set(map(str, c.dims)) <= dims}
    lon = [c for n, c in two_d.items() if _is_lon(n, c)]
    lat = [c for n, c in two_d.items() if _is_lat(n, c)]
    if not lon or not lat or lon[0].dims != lat[0].dims:
        return None
    return lon[0], lat[0]


def _placeholders(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The placeholder cells of a curvilinear grid (NEMO's eliminated land domains), said once."""
    blank = placeholder_cells(h, v)
    if blank.any():  # the caller of field_map, past _curvilinear
        _warn_once("placeholder-cells", f"{int(blank.sum())} cells of the curvilinear grid have longitude "
                   "and latitude both exactly 0, far from their neighbouring cells: placeholders for cells "
                   "without a position (NEMO writes them for the land processor domains it eliminates); "
                   "they are left blank", stacklevel=5)
    return blank


class _Curvilinear(NamedTuple):
    """A curvilinear grid: its 2-D ``lon`` and ``lat``, its placeholder cells (``blank``),
    and :func:`_mesh_centres` of it, None where it is drawn as points."""

    lon: xr.DataArray
    lat: xr.DataArray
    blank: np.ndarray
    mesh: tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None


def _curvilinear(ds: xr.Dataset, var: str, coords: str) -> _Curvilinear | None:
    """The curvilinear grid of ``var`` (:func:`_curvilinear_coords`), or None; its placeholder
    cells are searched here, once a map, for both ways of drawing it."""
    found = _curvilinear_coords(ds, var, coords)
    if found is None:
        return None
    h, v = (np.asarray(c.values, dtype=float) for c in found)
    blank = _placeholders(h, v)
    return _Curvilinear(*found, blank, _mesh_centres(h, v, blank))


def _mesh_centres(h: np.ndarray, v: np.ndarray,
                  blank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None:
    """The centres of a curvilinear grid that can be drawn as cells, longitudes on one arc,
    its placeholder cells, which are left blank, and its corners where it lies around a pole.

    That is a grid with at least two cells along each dim, finite centres, and no step of
    90 degrees of longitude or more between neighbouring cells once the longitudes are
    taken within 180 degrees of the middle cell's: regional grids, across the dateline too.
    Global grids (with their seam or the fold of a tripolar grid) and grids with NaN
    centres give None, and are drawn as points. Placeholder cells (longitude and latitude
    both exactly 0, far from the grid: :func:`~geogpvae.fields.placeholders.placeholder_cells`)
    have no position: their centres are put where their neighbours' lead
    (:func:`~geogpvae.plot.style._fill_centres`), for the corners of the cells around them.
    A grid around a pole (a sea-ice grid) is drawn too, on corners taken in a polar plane
    (:func:`~geogpvae.plot.polar.polar_corners`); the fourth item holds them, else None.
    ``h`` and ``v`` are the centres' longitudes and latitudes, ``blank`` the placeholder cells.
    """
    if min(h.shape) < 2 or not (np.isfinite(h[~blank]).all() and np.isfinite(v[~blank]).all()):
        return None
    h, v = np.where(blank, np.nan, h), np.where(blank, np.nan, v)
    rows, cols = np.nonzero(~blank)  # the middle cell, or the placed cell nearest to it
    k = np.argmin((rows - h.shape[0] // 2) ** 2 + (cols - h.shape[1] // 2) ** 2)
    middle = h[rows[k], cols[k]]
    h = middle + np.mod(h - middle + 180.0, 360.0) - 180.0
    if blank.any():
        h, v = _fill_centres(h), _fill_centres(v)
        if not (np.isfinite(h).all() and np.isfinite(v).all()):
            return None
    polar = polar_corners(h, v)
    if polar is None and max(np.abs(np.diff(h, axis=a)).max() for a in (0, 1)) >= 90.0:
        return None
    return h, v, blank, polar
