"""Recognising the training field when it comes back in another row order or precision.

A transposed or re-sorted copy of the fitted Dataset, or one that went through float32 (a
NetCDF file written as ``float``), stacks into the same rows in another order or differing in
the eighth digit. :func:`matching_rows` finds the training row of every such row, so that
``imputer.impute(ds)`` returns the fitted posterior instead of imputing a "new" field.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["SAME_FIELD_RTOL", "matching_rows"]

#: Relative tolerance within which two coordinates or values count as equal: float32 keeps
#: about seven significant digits (a relative spacing of 1.2e-7), so a float64 field written
#: as float32 and read back is recognised, while genuinely different fields are not.
SAME_FIELD_RTOL = 1e-6


def _columns_agree(ref: np.ndarray, new: np.ndarray, atol: np.ndarray, rtol: float) -> bool:
    """Whether two (N, K) value arrays agree entry by entry: NaN where the other has NaN,
    finite values within ``atol + rtol * |ref|``."""
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

    Two fields are the same when they hold the same locations with the same observed
    values, in any row order, to within ``rtol``: each coordinate within ``rtol`` times the
    largest coordinate magnitude of any axis (the nearest location within it), each variable within ``rtol`` times its largest observed
    magnitude plus ``rtol`` times the value.

    Parameters
    ----------
    ref_x : ndarray, shape (N, D)
        The reference (training) locations, in the units the model was given.
    ref_values : ndarray, shape (N, K)
        The reference values, NaN where missing.
    x : ndarray, shape (M, D)
        The other field's locations.
    values : ndarray, shape (M, K)
        The other field's values, NaN where missing.
    rtol : float
        Relative tolerance, see above.

    Returns
    -------
    ndarray of int, shape (N,), or None
        ``rows`` with ``x ≈ ref_x[rows]`` and ``values ≈ ref_values[rows]`` (NaN at the
        same places), a permutation of ``0..N-1``; None when the shapes differ, when some
        row has no counterpart, or when two rows match the same reference row (repeated
        locations cannot be told apart).
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
    # one tolerance for every axis: float32 rounds lon/lat on the sphere's scale, even in a
    # column that is small (the x of a regional grid near 90 degrees east)
    xtol = rtol * max(float(np.abs(ref_x).max()), np.finfo(float).tiny)
    rows = _sorted_match(ref_x, x, xtol)
    if rows is None:  # rounding reordered some rows: the nearest location of each
        distance, rows = cKDTree(ref_x / xtol).query(x / xtol, k=1, p=np.inf, distance_upper_bound=1.0)
        if not np.all(np.isfinite(distance)) or np.unique(rows).size != len(rows):
            return None
    return rows if _columns_agree(ref_values[rows], values, vtol, rtol) else None


def _sorted_match(ref_x: np.ndarray, x: np.ndarray, xtol: float) -> np.ndarray | None:
    """The match by sorting both sets of locations the same way, or None where that fails.

    Rounding to float32 keeps the order of distinct coordinates (it is monotonic), so a
    re-sorted or rounded copy of a field sorts into the same sequence of locations: a few
    times faster than a KD-tree at a million locations. Repeated locations give None.
    """
    ref_order, order = np.lexsort(ref_x.T[::-1]), np.lexsort(x.T[::-1])
    ref_sorted = ref_x[ref_order]
    if not np.all(np.abs(ref_sorted - x[order]) <= xtol):
        return None
    if len(x) > 1 and np.any(np.all(np.abs(np.diff(ref_sorted, axis=0)) <= xtol, axis=1)):
        return None  # two locations within the tolerance: which is which cannot be told
    rows = np.empty(len(x), dtype=np.intp)
    rows[order] = ref_order
    return rows
