"""Whether new locations lie anywhere near the data a model was trained on (metres for km?)."""

from __future__ import annotations

import numpy as np

from ..errors import CoordinateWarning, warn_caller
from .geometry import Axis, Geometry

__all__ = ["far_axes", "warn_if_far"]

#: axes whose values a user can give in the wrong units or order (not times or grid positions)
_CHECKED = ("linear", "sphere")


def _box_distance(points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Euclidean distance of each row of ``points`` to the box ``[lo, hi]`` (0 inside)."""
    excess = np.maximum(lo - points, 0.0) + np.maximum(points - hi, 0.0)
    return np.sqrt((excess**2).sum(axis=1))


def _describe(axis: Axis, new: np.ndarray, old: np.ndarray, gap: float) -> str:
    """One axis's locations against its training values, in the user's units."""
    if axis.kind == "sphere":
        return (f"{'/'.join(axis.names)}: every location is at least {gap / axis.scale:.4g} km "
                f"from the box around the training sites")
    units = f" {axis.units}" if axis.units else " (no units attribute)"
    new, old = new / axis.scale, old / axis.scale
    return (f"{axis.names[0]}: the locations span {new.min():.4g} to {new.max():.4g}, the "
            f"training data {old.min():.4g} to {old.max():.4g}{units}")


def far_axes(x_new: np.ndarray, x_train: np.ndarray, geometry: Geometry) -> list[str]:
    """The axes along which every new location is farther from the training data than its extent.

    Parameters
    ----------
    x_new : ndarray, shape (M, D)
    x_train : ndarray, shape (N, D)
    geometry : Geometry
        Only its ``linear`` and ``sphere`` axes are checked.

    Returns
    -------
    list of str
        Each axis's new and training ranges.
    """
    found, start = [], 0
    for axis in geometry.axes:
        cols = slice(start, start + axis.width)
        start += axis.width
        if axis.kind not in _CHECKED or not len(x_new) or not len(x_train):
            continue
        old, new = x_train[:, cols], x_new[:, cols]
        lo, hi = old.min(axis=0), old.max(axis=0)
        extent = float((hi - lo).max())
        gap = float(_box_distance(new, lo, hi).min())
        if extent > 0 and gap > extent:
            found.append(_describe(axis, new, old, gap))
    return found


def warn_if_far(x_new: np.ndarray, x_train: np.ndarray | None, geometry: Geometry) -> None:
    """Warn (:class:`~geogpvae.errors.CoordinateWarning`) when no new location is near the data.

    Parameters
    ----------
    x_new, x_train, geometry
        As in :func:`far_axes`; ``x_train`` None checks nothing.
    """
    if x_train is None:
        return
    found = far_axes(np.asarray(x_new, dtype=np.float64), np.asarray(x_train, dtype=np.float64), geometry)
    if found:
        warn_caller(
            f"every location lies far outside the data the model was trained on ({'; '.join(found)}): "
            "farther than the training data's own extent, so the prediction is the model's prior, "
            "not an interpolation of the data. If the locations are in other units or another "
            "projection than the training data (metres for kilometres, lon and lat swapped), "
            "convert them first.",
            CoordinateWarning,
        )
