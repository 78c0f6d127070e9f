"""Target fields of a prediction and calibration: the tensors of the locations to predict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import InputError

__all__ = ["Targets", "checked_rows", "rows_of", "self_index_of"]


@dataclass
class Targets:
    """Tensors of one field for prediction.

    Attributes
    ----------
    x : Tensor, shape (M, D)
        Locations, model units.
    y : Tensor, shape (M, K)
        Standardised values, 0 where not observed.
    observed : Tensor of bool, shape (M, K)
    context : Tensor, shape (M, C) or None
        The encoder's neighbourhood summaries.
    in_range : Tensor of bool, shape (M,), optional
        New locations only: whether the context lies within the range the encoder saw.
    """

    x: torch.Tensor
    y: torch.Tensor
    observed: torch.Tensor
    context: torch.Tensor | None
    in_range: torch.Tensor | None = None


def rows_of(field: Targets, subset: np.ndarray | None = None) -> Callable[[slice], Targets]:
    """A function giving the target field of a slice of ``field``'s rows (of ``subset``'s rows, where given)."""
    index = None if subset is None else torch.as_tensor(subset, device=field.x.device)

    def take(rows: slice) -> Targets:
        if index is not None:
            rows = index[rows]

        def part(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[rows]

        return Targets(field.x[rows], field.y[rows], field.observed[rows], part(field.context),
                      part(field.in_range))

    return take


def self_index_of(anchor: dict[str, torch.Tensor], n: int) -> np.ndarray:
    """For each of ``n`` locations, its row among the anchors, or -1 (not an anchor)."""
    index = np.full(n, -1)
    index[anchor["index"].cpu().numpy()] = np.arange(len(anchor["index"]))
    return index


def checked_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """``rows`` as an int64 array of row numbers of a field of ``n`` rows; InputError if it is not one.

    Parameters
    ----------
    rows : array_like of int, shape (M,)
    n : int

    Returns
    -------
    ndarray of int64, shape (M,)
    """
    arr = np.asarray(rows)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InputError(f"rows must be a 1-D array of whole row numbers, got shape {arr.shape} and dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise InputError(f"rows must lie in 0..{n - 1}, got {arr.min()}..{arr.max()}")
    return arr
