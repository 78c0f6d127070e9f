"""Target fields of a prediction and calibration: the tensors of the locations to predict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Targets", "rows_of", "self_index_of"]


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


def rows_of(field: Targets) -> Callable[[slice], Targets]:
    """A function giving the target field of a slice of ``field``'s rows."""

    def take(rows: slice) -> Targets:
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
