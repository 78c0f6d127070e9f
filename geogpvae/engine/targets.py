"""Target fields of a prediction: the tensors of the locations to predict.

Shared by prediction (:meth:`geogpvae.engine.core.GPVAEEngine.predict`) and calibration
(:mod:`geogpvae.engine.calibration`): a field's tensors, a slice of its rows, and where
each location sits among the anchors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class _Field:
    """Tensors of one field for prediction."""

    x: torch.Tensor
    y: torch.Tensor
    observed: torch.Tensor
    context: torch.Tensor | None
    in_range: torch.Tensor | None = None


def _rows_of(field: _Field) -> Callable[[slice], _Field]:
    """A function giving the target field of a slice of ``field``'s rows."""

    def take(rows: slice) -> _Field:
        def part(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[rows]

        return _Field(field.x[rows], field.y[rows], field.observed[rows], part(field.context),
                      part(field.in_range))

    return take


def _self_index(anchor: dict[str, torch.Tensor], n: int) -> np.ndarray:
    """For each of ``n`` locations, its row among the anchors, or -1 (not an anchor)."""
    index = np.full(n, -1)
    index[anchor["index"].cpu().numpy()] = np.arange(len(anchor["index"]))
    return index
