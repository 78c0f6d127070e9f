"""Starting values of the latent lengthscales.

The lengthscales are learnt as the log of their ratio to where they start, and move slowly from
there, so the start matters. The default is one value for every channel and axis: the median
distance from a location to its H-th nearest other location (H = ``neighbours``).

Two other starts are kept as experiments (``GPVAEConfig(extra=...)``), both rejected on the
tuning splits (docs/benchmarks.md, rules 12 and 13; ``benchmarks/lengthscale_start.py``):

* ``extra={"lengthscale_rank": r}``: the median distance to the r-th neighbour instead;
* ``extra={"lengthscale_spread": True}``: channel c of L starts at
  ``ls_H * (ls_1 / ls_H) ** (c / (L - 1))``, from the H-th neighbour's distance (first channel)
  to the nearest neighbour's (last).
"""

from __future__ import annotations

import numpy as np
import torch

from ..gp.neighbours import median_neighbour_distance

__all__ = ["channel_lengthscales", "start_lengthscales"]


def start_lengthscales(x: np.ndarray, neighbours: int, extra: dict, backend: str = "auto") -> tuple[float, float | None]:
    """The default start and, for ``lengthscale_spread``, the nearest neighbour's distance.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, model units.
    neighbours : int
        H.
    extra : dict
        The configuration's ``extra`` (``lengthscale_rank``, ``lengthscale_spread``).
    backend : str
        Neighbour search backend.

    Returns
    -------
    (float, float or None)
        The start (in the units of ``x``; the largest extent of ``x`` where the median distance
        is 0) and the nearest neighbour's median distance, None unless the spread is asked for.
    """
    n = x.shape[0]
    rank = int(extra.get("lengthscale_rank", neighbours))
    start = median_neighbour_distance(x, max(1, min(rank, n - 1)), backend=backend)
    if not np.isfinite(start) or start <= 0:
        start = float(np.ptp(x, axis=0).max()) or 1.0
    near = None
    if extra.get("lengthscale_spread") and n > 1:
        near = median_neighbour_distance(x, 1, backend=backend)
        near = near if np.isfinite(near) and near > 0 else start
    return float(start), near


def channel_lengthscales(start: float, near: float | None, n_channels: int) -> float | torch.Tensor:
    """Each latent channel's starting lengthscale.

    Parameters
    ----------
    start : float
        The default start (model units): the first channel's, and every channel's without ``near``.
    near : float or None
        The nearest neighbour's median distance (``lengthscale_spread``), the last channel's start.
    n_channels : int
        L.

    Returns
    -------
    float or Tensor, shape (L, 1)
        ``start`` itself, or channel c's start ``start * (near / start) ** (c / (L - 1))`` (one
        value for every coordinate axis).
    """
    if near is None or n_channels < 2:
        return start
    steps = np.arange(n_channels) / (n_channels - 1)
    return torch.as_tensor(start * (near / start) ** steps)[:, None]
