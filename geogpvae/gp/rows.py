"""Row gathers whose gradient sums in a fixed order on every device."""

from __future__ import annotations

import torch

__all__ = ["take_rows"]


def take_rows(t: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``t[index]`` along the first dimension, reproducible in training.

    The gradient of a gather sums the rows picked more than once. On the CPU, advanced
    indexing's backward (``index_put_`` with ``accumulate=True``) does so in parallel and in
    no fixed order when the gather is large, so two runs of the same fit on two threads
    differed in the fourth digit (SPE10); ``index_select``'s backward (``index_add_``) sums in
    index order there. On CUDA ``index_add_`` is the one that adds atomically, so advanced
    indexing is kept there.

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
