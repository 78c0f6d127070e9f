"""Placeholder cells: NEMO's ``nav_lon = nav_lat = 0`` cells without a position (skipped land domains)."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from .geometry import sphere_positions

__all__ = ["PLACEHOLDER_STEPS", "placeholder_cells", "placeholder_places", "placeholder_warning"]

#: median grid steps from (0 N, 0 E) beyond which a block's every neighbour makes it a placeholder
PLACEHOLDER_STEPS = 5.0


#: the median grid step is read from about this many neighbour pairs (every k-th row and column)
STEP_SAMPLE = 250_000


def _median_step(h: np.ndarray, v: np.ndarray, zero: np.ndarray) -> float:
    """The median unit-sphere chord between neighbouring cells not at (0, 0), from about ``STEP_SAMPLE`` cells."""
    k = max(1, int(np.sqrt(h.size / STEP_SAMPLE)))
    steps = []
    for axis, pick in ((1, np.s_[::k, :]), (0, np.s_[:, ::k])):
        xyz = sphere_positions(h[pick], v[pick], radius=1.0)
        d = np.linalg.norm(np.diff(xyz, axis=axis), axis=-1)
        z = zero[pick]
        both = ~(z[:, 1:] | z[:, :-1]) if axis == 1 else ~(z[1:] | z[:-1])
        steps.append(d[both & np.isfinite(d)])
    pooled = np.concatenate(steps)
    return float(np.median(pooled)) if pooled.size else float("nan")


def _closest_neighbours(h: np.ndarray, v: np.ndarray, zero: np.ndarray, labels: np.ndarray,
                        n: int) -> np.ndarray:
    """Per block of (0, 0) cells (``labels`` 1..n), the chord from (0 N, 0 E) to its nearest other neighbour."""
    closest = np.full(n + 1, np.inf)
    rows, cols = np.nonzero(zero)
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        r, c = rows + dr, cols + dc
        inside = (r >= 0) & (r < h.shape[0]) & (c >= 0) & (c < h.shape[1])
        r, c, own = r[inside], c[inside], labels[rows[inside], cols[inside]]
        keep = ~zero[r, c]
        chord = np.linalg.norm(sphere_positions(h[r[keep], c[keep]], v[r[keep], c[keep]], radius=1.0)
                               - np.array([1.0, 0.0, 0.0]), axis=-1)
        finite = np.isfinite(chord)
        np.minimum.at(closest, own[keep][finite], chord[finite])
    return closest[1:]


def placeholder_cells(lon: Any, lat: Any, *, steps: float = PLACEHOLDER_STEPS) -> np.ndarray:
    """Cells of a 2-D lon/lat pair at exactly (0, 0), in blocks far from the rest of the grid.

    Parameters
    ----------
    lon, lat : array-like, shape (ny, nx)
        Degrees (e.g. NEMO's ``nav_lon``, ``nav_lat``).
    steps : float
        Median grid steps beyond which the block's every neighbour must lie.

    Returns
    -------
    numpy.ndarray of bool, shape (ny, nx)
    """
    from scipy import ndimage

    h, v = np.asarray(lon, dtype=float), np.asarray(lat, dtype=float)
    if h.ndim != 2 or h.shape != v.shape:
        raise ValueError(f"lon and lat must be 2-D arrays of one shape, got {h.shape} and {v.shape}")
    zero = (h == 0) & (v == 0)
    found = np.zeros(h.shape, dtype=bool)
    if not zero.any() or zero.all():
        return found
    step = _median_step(h, v, zero)
    if not step > 0:
        return found
    labels, n = ndimage.label(zero)
    closest = _closest_neighbours(h, v, zero, labels, n)
    far = np.isfinite(closest) & (closest > steps * step)
    return np.concatenate([[False], far])[labels]


def placeholder_places(ds: xr.Dataset, field: Any) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The placeholder cells of a field's 2-D longitude/latitude pair, if it has any.

    Parameters
    ----------
    ds : xarray.Dataset
    field : Field

    Returns
    -------
    (places, blank) or None
        The pair's two dims in the field's order and :func:`placeholder_cells` over them.
    """
    pair = next((a.names for a in field.geometry.axes if a.kind == "sphere"), None)
    if pair is None or any(n not in ds.variables or ds[n].ndim != 2 for n in pair):
        return None
    lon, lat = ds[pair[0]], ds[pair[1]]
    places = tuple(d for d in field.dims if d in lon.dims)
    if lon.dims != lat.dims or len(places) != 2:
        return None
    blank = placeholder_cells(lon.transpose(*places).values, lat.transpose(*places).values)
    return (places, blank) if blank.any() else None


def placeholder_warning(ds: xr.Dataset, field: Any,
                        found: tuple[tuple[str, ...], np.ndarray] | None | str = "find") -> str | None:
    """The text of a warning about valueless placeholder cells in the domain, or None.

    Parameters
    ----------
    ds : xarray.Dataset
    field : Field
    found : tuple or None, optional
        :func:`placeholder_places` if the caller has it.

    Returns
    -------
    str or None
    """
    found = placeholder_places(ds, field) if isinstance(found, str) else found
    if found is None:
        return None
    places, blank = found
    pair = next(a.names for a in field.geometry.axes if a.kind == "sphere")
    full = np.full((int(np.prod(field.shape)), field.values.shape[1]), np.nan)
    full[field.index] = field.values
    other = tuple(i for i, d in enumerate(field.dims) if d not in places)
    seen = (~np.isnan(full)).any(axis=1).reshape(field.shape).any(axis=other)
    inside = field.domain.any(axis=other)
    holes = int((blank & inside & ~seen).sum())
    if holes == 0:
        return None
    h, v = pair
    return (f"{holes} cells ({', '.join(places)}) have {h} = {v} = 0 exactly, far from their grid "
            "neighbours, and no value: placeholders for cells without a position (NEMO writes them for "
            "the land processor domains it eliminates), which would be filled as if they lay at 0 N, 0 E. "
            f"Pass a mask that leaves them out (True where values belong), e.g. NEMO's tmask, or "
            f"mask=(ds[{h!r}] != 0) | (ds[{v!r}] != 0)")
