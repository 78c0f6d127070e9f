"""Row gathers whose gradient sums in a fixed order on every device."""

from __future__ import annotations

import torch

__all__ = ["take_rows"]


def take_rows(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``t[index]`` along the first dimension, reproducible in training.

    On the CPU ``index_select``, whose backward sums repeated rows in index order (advanced
    indexing's does not); on CUDA advanced indexing, which adds deterministically there.

    Parameters
    ----------
    t : Tensor, shape (N, ...)
    index : Tensor of int64, any shape
        Rows of ``t``.

    Returns
    -------
    Tensor, shape ``index.shape + t.shape[1:]``
    """
    if t.device.type != "cpu":
        return t[index]
    return t.index_select(0, index.reshape(-1)).view(*index.shape, *t.shape[1:])
