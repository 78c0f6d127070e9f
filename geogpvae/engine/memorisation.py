"""Widening calibrated intervals by what the model recalls of the values it trained on.

Calibration (:func:`geogpvae.engine.calibration.calibrate`) hides observed values and predicts
them from the rest, but the model trained on those values. Where it can recall them (many
variables a location, whole-field steps, many passes), their errors are smaller than those
of values it never saw, so the calibrated intervals of the real gaps come out too narrow
(stations as variables: never-trained values' calibrated mean squared z-score 1.56 on the
tuning networks, ``benchmarks/memorisation.py``).

``beta="auto"`` already holds values out of training: each candidate of the KL-weight
selection trains without its *check* values. :func:`memorisation_ratios` has the chosen
candidate predict those (never trained on) and, hidden the way calibration hides values, a
comparison set of values it trained on; the ratio of their mean squared standardised errors,
per regime and latent source, says how much wider a never-trained value's interval should be.
:func:`~geogpvae.engine.calibration.with_memorisation` multiplies the final calibration factors
by it. With the stopping rule (``holdout > 0``) the check values stay out of training to the end,
so the fitted model itself measures the ratio on them after training, unscaled.

The candidate trained for a share of the budget only, and a model recalls more the longer it
trains, roughly in proportion (on the tuning networks the ratio of the combined source was
1.06-1.08 after the candidates' fifth of the budget, 1.28-1.41 after 95 % of it), so the excess
measured is scaled by the fitted model's epochs over the candidate's. Scaled so, it is noisy:
it took stations as variables from cov95 0.910 to 0.955 on tuning networks 100-102 and from
0.915 to 0.982 on networks 103-105, and the station networks' default layout from 0.954 to
0.967. It is therefore off by default (:data:`MEMORISATION`; rules 15 and 16 in
docs/benchmarks.md), an option for experiments: ``extra={"memorisation": True}`` (every
calibrated ``beta="auto"`` fit) or ``"auto"`` (fits whose every step takes the whole field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from .calibration import (
    calibration_candidates,
    empty_stats,
    hide_values,
    noise_choices,
    score_hidden,
)
from .holdout import matched_entries

if TYPE_CHECKING:
    from .config import GPVAEConfig
    from .core import GPVAEEngine
    from .stopping import CheckValues
    from .training import TrainState

__all__ = ["MEMORISATION", "MIN_RATIO_VALUES", "RATIO_RANGE", "check_mask", "corrects_memorisation", "memorisation_ratios"]

#: which fits measure and apply the ratio unless ``extra["memorisation"]`` says otherwise: ``"auto"``,
#: those whose every training step takes the whole field; True: every fit; False: none
MEMORISATION = False
#: the fewest held-out values, in each of the two sets, behind a ratio (fewer: no correction)
MIN_RATIO_VALUES = 50
#: ratios are clipped to this range: a model does not predict values it never saw better, and the
#: largest correction of a variance is 2
RATIO_RANGE = (1.0, 2.0)


@torch.no_grad()
def memorisation_ratios(
    engine: GPVAEEngine, model: torch.nn.Module, state: TrainState, check: np.ndarray,
    budget: int | None = None, fraction: float = 0.1, whole: float = 0.05, max_targets: int = 8000,
) -> dict[str, float]:
    """Never-trained over trained values' mean squared z-score, per regime and latent source.

    Parameters
    ----------
    engine : GPVAEEngine
        The engine being fitted (its standardised field, options and gap shapes).
    model : torch.nn.Module
        A model that trained on every observed value except ``check``; its moving-average
        weights (``state.average``) predict, as a fitted model would, or, without them, its own
        weights. Left as it was.
    state : TrainState
        Its training state.
    check : ndarray of bool, shape (N, K)
        The values it never trained on (a subset of the engine's observed values).
    budget : int, optional
        The fitted model's epochs: the measured excess over 1 is scaled by ``budget`` over the
        epochs ``model`` trained (``state.epoch``), as a model recalls more the longer it trains,
        roughly in proportion (stations as variables' tuning networks: ratio 1.06-1.08 after a
        fifth of the budget, 1.28-1.41 after 95 %). None: not scaled.
    fraction, whole, max_targets
        How the comparison set of trained values is hidden (as in calibration's rounds:
        :func:`~geogpvae.engine.calibration.hide_values`; in gaps shaped like the missing
        values where they cluster).

    Returns
    -------
    dict of str to float
        ``{"regime:source|variance": ratio}`` (``"regime:source"`` without added variances),
        pooled over the variables, its excess over 1 scaled to ``budget``, clipped to :data:`RATIO_RANGE`; only where both sets have at
        least :data:`MIN_RATIO_VALUES` values in that regime.
    """
    growth = 1.0 if budget is None else budget / max(state.epoch, 1)
    core = model.module if hasattr(model, "module") else model
    live = {k: v.detach().clone() for k, v in core.state_dict().items()}
    if state.average is not None:
        core.load_state_dict({**live, **state.average})
    kept, was_training = engine.model, core.training
    engine.model = core
    try:
        candidates, noises = calibration_candidates(engine), noise_choices(engine)
        cfg = engine.config
        rng = np.random.default_rng([cfg.seed, 31])
        trained = engine._observed & ~check
        shaped = None
        if np.any(engine.clustered_gaps_):
            shaped = matched_entries(engine._x, trained, fraction, seed=cfg.seed + 31, backend=cfg.neighbour_backend,
                                     shaped=engine.clustered_gaps_)
        compare, compare_rows = hide_values(trained, rng, fraction, whole, max_targets, values=shaped)
        check_rows = np.flatnonzero(check.any(1))
        if check_rows.size > max_targets:
            check_rows = np.sort(rng.choice(check_rows, max_targets, replace=False))
        sets = []  # the check values stay hidden in both passes: the model never saw them as inputs either
        for scored, rows in ((check, check_rows), (compare, compare_rows)):
            stats = empty_stats(candidates, noises, len(engine.names))
            if rows.size:
                score_hidden(engine, check | compare, rows, candidates, stats, noises=noises, scored=scored)
            sets.append(stats)
    finally:
        core.load_state_dict(live)
        core.train(was_training)
        engine.model = kept
    ratios = {}
    for key in sets[0]:
        never, seen = (np.concatenate([a for parts in s[key][0] for a in parts] or [np.empty(0)]) for s in sets)
        if min(never.size, seen.size) >= MIN_RATIO_VALUES and seen.mean() > 0:
            ratios[f"{key[0]}:{key[1]}"] = float(np.clip(1 + growth * (never.mean() / seen.mean() - 1), *RATIO_RANGE))
    return ratios


def corrects_memorisation(config: GPVAEConfig, n_points: int) -> bool:
    """Whether a calibrated ``beta="auto"`` fit of ``n_points`` locations measures and applies the ratio.

    Parameters
    ----------
    config : GPVAEConfig
        Its ``extra["memorisation"]`` (default :data:`MEMORISATION`): ``"auto"`` where every
        training step takes the whole field, True always, False never.
    n_points : int
        Locations of the field being fitted.

    Returns
    -------
    bool
        Never True without calibration (``config.calibrate``).
    """
    choice = config.extra.get("memorisation", MEMORISATION)
    if not config.calibrate or not choice:
        return False
    return config.batch_for(n_points) >= n_points if choice == "auto" else True


def check_mask(check: CheckValues, shape: tuple[int, int]) -> np.ndarray:
    """The held-out values of ``check`` as a boolean array.

    Parameters
    ----------
    check : CheckValues
        The fit's check values (rows and, per row, which variables are held out).
    shape : tuple of int
        (N, K): the field's locations and variables.

    Returns
    -------
    ndarray of bool, shape (N, K)
        True at the held-out values.
    """
    mask = np.zeros(shape, dtype=bool)
    mask[check.rows.cpu().numpy()] = check.mask.cpu().numpy()
    return mask
