"""Training curves: the loss and its terms per epoch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from .style import _fmt_value, _plt

__all__ = ["training_history"]


def _history_limits(*series: Any, spread: float = 2.0) -> tuple[float, float] | None:
    """y limits ``(bottom, top)`` that leave out a start-up transient (None under 4 finite values).

    Top: the later halves' 99th percentile plus ``spread`` times its height above the minimum, at most the maximum.
    """
    arrays = [np.asarray(y, dtype=float).ravel() for y in series]
    values = np.concatenate([y[np.isfinite(y)] for y in arrays]) if arrays else np.empty(0)
    if values.size < 4:
        return None
    late = np.concatenate([y[y.size // 2:] for y in arrays])
    late = late[np.isfinite(late)]
    lo, top = float(values.min()), float(values.max())
    if late.size == 0:
        return lo, top
    high = float(np.percentile(late, 99))
    height = max(high - lo, 0.02 * abs(high), 1e-12)
    return lo, min(top, high + spread * height)


def _zoom_past_transient(ax, epoch: np.ndarray, series: Sequence[np.ndarray]) -> None:
    """Set the y limits from :func:`_history_limits`, and note the epochs left out above."""
    limits = _history_limits(*series)
    if limits is None:
        return
    lo, hi = limits
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 0.05
    ax.set_ylim(lo - pad, hi + pad)
    with np.errstate(invalid="ignore"):
        above = np.zeros(epoch.shape, dtype=bool)
        for y in series:
            above |= y > hi + pad
    if above.any():
        first, last = epoch[above][0], epoch[above][-1]
        peak = max(float(np.nanmax(y)) for y in series)
        which = (f"epoch {_fmt_value(first)}" if first == last
                 else f"epochs {_fmt_value(first)}\u2013{_fmt_value(last)}")
        note = ax.text(0.98, 0.97, f"{which} off scale (up to {peak:.3g})",
                       transform=ax.transAxes, ha="right", va="top", fontsize="x-small",
                       color="0.35")
        note.set_gid("off-scale")


def training_history(
    history: Mapping[str, Sequence[float]],
    *,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """The negative ELBO and its parts over the epochs.

    The y axis runs from the lowest value to a little above the later half of the run, and a corner
    note names the epochs left above it (``ax.autoscale(axis="y")`` shows every epoch).

    Parameters
    ----------
    history : mapping of str to sequence of float
        Equal-length sequences: ``loss`` (negative ELBO per location, required); ``epoch`` (default 1,
        2, ...); ``expected_nll`` and ``val_loss``, drawn with the loss; ``kl``, its own panel;
        ``elapsed`` (cumulative seconds, last in the title). Other keys are ignored.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        A panel with gid ``"elbo"``, and one with gid ``"kl"`` when ``kl`` is present.

    Raises
    ------
    ValueError
        ``loss`` missing or empty, or sequences of different lengths.
    """
    plt = _plt()
    if "loss" not in history:
        raise ValueError("history needs a 'loss' entry")
    series = {k: np.asarray(v, dtype=float).ravel() for k, v in history.items()
              if k in ("epoch", "loss", "expected_nll", "kl", "elapsed", "val_loss")}
    n = series["loss"].size
    if n == 0:
        raise ValueError("history is empty")
    bad = {k: v.size for k, v in series.items() if v.size != n}
    if bad:
        raise ValueError(f"history entries differ in length from loss ({n}): {bad}")
    epoch = series.get("epoch", np.arange(1, n + 1, dtype=float))
    has_kl = "kl" in series
    fig, axes = plt.subplots(1, 2 if has_kl else 1,
                             figsize=figsize or ((7.0 if has_kl else 4.0), 3.0),
                             layout="constrained", squeeze=False)
    ax = axes[0, 0]
    ax.set_gid("elbo")
    marker = "o" if n <= 30 else None
    ax.plot(epoch, series["loss"], color="k", marker=marker, markersize=3,
            label="loss (\u2212ELBO)", gid="loss")
    if "expected_nll" in series:
        ax.plot(epoch, series["expected_nll"], color="C0", marker=marker, markersize=3,
                label="expected NLL", gid="expected_nll")
    if "val_loss" in series:
        ax.plot(epoch, series["val_loss"], color="k", linestyle="--", label="validation loss",
                gid="val_loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("per location")
    _zoom_past_transient(ax, epoch, [series[k] for k in ("loss", "expected_nll", "val_loss")
                                     if k in series])
    ax.legend(fontsize="small")
    ax.set_title("negative ELBO = expected NLL + KL", fontsize="medium")
    if has_kl:
        ax2 = axes[0, 1]
        ax2.set_gid("kl")
        ax2.plot(epoch, series["kl"], color="C3", marker=marker, markersize=3, label="KL",
                 gid="kl")
        ax2.set_xlabel("epoch")
        ax2.set_ylabel("KL per location")
        ax2.set_title("KL divergence", fontsize="medium")
        _zoom_past_transient(ax2, epoch, [series["kl"]])
    if "elapsed" in series and np.isfinite(series["elapsed"]).any():
        total = float(np.nanmax(series["elapsed"]))
        fig.suptitle(f"Training ({n} epochs, {total:.1f} s)")
    else:
        fig.suptitle(f"Training ({n} epochs)")
    return fig
