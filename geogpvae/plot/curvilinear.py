"""Curvilinear grids on a map: 2-D longitudes and latitudes, as ocean and climate models write.

:func:`_curvilinear` finds such a grid for :func:`~geogpvae.plot.field_map`, its placeholder cells
(:func:`~geogpvae.fields.placeholders.placeholder_cells`) once, and whether its cells can be drawn.
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
    """A curvilinear grid: ``lon``, ``lat``, placeholder cells ``blank``, ``mesh`` (None: drawn as points)."""

    lon: xr.DataArray
    lat: xr.DataArray
    blank: np.ndarray
    mesh: tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None


def _curvilinear(ds: xr.Dataset, var: str, coords: str) -> _Curvilinear | None:
    """The curvilinear grid of ``var``, or None; its placeholder cells searched once a map."""
    found = _curvilinear_coords(ds, var, coords)
    if found is None:
        return None
    h, v = (np.asarray(c.values, dtype=float) for c in found)
    blank = _placeholders(h, v)
    return _Curvilinear(*found, blank, _mesh_centres(h, v, blank))


def _mesh_centres(h: np.ndarray, v: np.ndarray,
                  blank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None:
    """``(lon, lat, blank, polar corners or None)`` of a grid drawable as cells, longitudes on one arc; else None.

    Needs 2 x 2 finite cells (placeholders filled from neighbours) and steps under 90 degrees, or a polar grid.
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
