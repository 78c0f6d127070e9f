"""Recognising the training field when it comes back in another row order or through float32.

:func:`matching_rows` finds the training row of every row, so that ``imputer.impute(ds)`` returns
the fitted posterior instead of imputing a "new" field.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["SAME_FIELD_RTOL", "matching_rows"]

#: Relative tolerance within which two coordinates or values count as equal (float32: 1.2e-7)
SAME_FIELD_RTOL = 1e-6


def _columns_agree(ref: np.ndarray, new: np.ndarray, atol: np.ndarray, rtol: float) -> bool:
    """Whether two (N, K) arrays agree: NaN at the same places, else within ``atol + rtol * |ref|``."""
    observed = np.isfinite(ref)
    if not np.array_equal(observed, np.isfinite(new)):
        return False
    gap = np.abs(np.where(observed, new - ref, 0.0))
    return bool(np.all(gap <= atol + rtol * np.abs(np.where(observed, ref, 0.0))))


def matching_rows(
    ref_x: np.ndarray,
    ref_values: np.ndarray,
    x: np.ndarray,
    values: np.ndarray,
    rtol: float = SAME_FIELD_RTOL,
) -> np.ndarray | None:
    """The row of a reference field that each row of another field repeats, or None.

    Coordinates match within ``rtol`` times the largest coordinate magnitude, values within
    ``rtol`` times the variable's largest observed magnitude plus ``rtol`` times the value.

    Parameters
    ----------
    ref_x : ndarray, shape (N, D)
        The reference (training) locations, in the units the model was given.
    ref_values : ndarray, shape (N, K)
        NaN where missing.
    x : ndarray, shape (M, D)
    values : ndarray, shape (M, K)
        NaN where missing.
    rtol : float

    Returns
    -------
    ndarray of int, shape (N,), or None
        A permutation ``rows`` with ``x ≈ ref_x[rows]`` and ``values ≈ ref_values[rows]``; None
        when shapes differ, a row has no counterpart, or locations repeat.
    """
    ref_x, x = np.asarray(ref_x, dtype=float), np.asarray(x, dtype=float)
    ref_values, values = np.asarray(ref_values, dtype=float), np.asarray(values, dtype=float)
    if x.shape != ref_x.shape or values.shape != ref_values.shape or not len(x):
        return None
    vtol = rtol * np.nanmax(np.abs(np.where(np.isfinite(ref_values), ref_values, 0.0)), axis=0)
    for j in range(values.shape[1]):  # cheap rejection of another field: its sorted values
        a, b = np.sort(ref_values[:, j]), np.sort(values[:, j])  # NaN sort last in both
        if not _columns_agree(a[:, None], b[:, None], vtol[j : j + 1], rtol):
            return None
    # one tolerance for every axis: float32 rounds lon/lat on the sphere's scale, even a small column
    xtol = rtol * max(float(np.abs(ref_x).max()), np.finfo(float).tiny)
    rows = _sorted_match(ref_x, x, xtol)
    if rows is None:  # rounding reordered some rows: the nearest location of each
        distance, rows = cKDTree(ref_x / xtol).query(x / xtol, k=1, p=np.inf, distance_upper_bound=1.0)
        if not np.all(np.isfinite(distance)) or np.unique(rows).size != len(rows):
            return None
    return rows if _columns_agree(ref_values[rows], values, vtol, rtol) else None


def _sorted_match(ref_x: np.ndarray, x: np.ndarray, xtol: float) -> np.ndarray | None:
    """The match by sorting both sets of locations the same way (rounding is monotonic), or None."""
    ref_order, order = np.lexsort(ref_x.T[::-1]), np.lexsort(x.T[::-1])
    ref_sorted = ref_x[ref_order]
    if not np.all(np.abs(ref_sorted - x[order]) <= xtol):
        return None
    if len(x) > 1 and np.any(np.all(np.abs(np.diff(ref_sorted, axis=0)) <= xtol, axis=1)):
        return None  # two locations within the tolerance: which is which cannot be told
    rows = np.empty(len(x), dtype=np.intp)
    rows[order] = ref_order
    return rows
