"""Choosing the KL weight from the field being fitted (``beta="auto"``).

The weight of the prior term that predicts best depends on the data: on SPE10, whose channels
are nearly redundant, a weak prior (beta = 0.2) lets the model lean on the other channels of
the same cell; on small, noisy surveys a stronger one generalises better. Nothing outside the
field being fitted can say which, so ``fit`` finds out from the field itself:

1. a share of each variable's observed values (the *check* values, the same ones the stopping
   rule uses: :func:`geogpvae.engine.stopping.check_entries`) is held out of the likelihood
   and of the encoder's inputs;
2. one model per candidate weight, all from the same initial weights, trains on the rest for
   the first share of the epoch budget (:func:`selection_share`);
3. each is scored by the calibrated predictive NLL of the check values
   (:func:`geogpvae.engine.stopping.predictive_nll`, with its moving-average weights, as the
   model would be used), and the best one carries on for the rest of the budget with every
   observed value.

What the score judges depends on the gaps (:func:`score_shape`). Where a variable's gaps
cluster (outages), a missing value may sit far inside a gap or next to the data, and the
candidate must get the shape of the uncertainty right: the NLL takes the predictive variances
as the model gives them. Where values are missing at random, the NLL takes one variance per
variable (its mean squared error), so the candidates are ranked by their predictive means: the
strong prior's early lead in the shape of its variances fades later in training, while the
ranking of the means already holds (SPE10 tuning masks 1-8: the full NLL kept x1 on mask 5
by 0.003 nats, the means x0.2 on every mask by 0.02-0.08, mask 5 0.443 / 0.252 -> 0.442 /
0.082; on the outage fields the means alone cost 0.174 / -0.383 -> 0.192 / -0.327).

A strong prior fits faster, so it leads early even where a weak one ends better: on SPE10
tuning masks the check NLLs of beta x1 and x0.2 cross near a third of the budget. Two
candidates (x1 and x0.2) trained for 35 % of the budget each rank the way they finish, where
three trained for 15 % each (the sixth to eighth sessions' default) often kept x1; both cost
about 1.3-1.35 times a fit with a fixed weight. Where every step takes the whole field (fields
of up to ``FULL_BATCH`` locations: Jura, the kriging tasks, stations as variables) 20 % ranks as
well (:data:`WHOLE_FIELD_SELECTION_SHARE`; summed tuning NLL 0.046 lower than with 35 %), and a
fit costs about 1.2 times one with a fixed weight. Each candidate trains at least
``MIN_SELECTION_EPOCHS`` (3) epochs, budget allowing: a field of a million locations gets only
5 epochs (the step budget is met in fewer, larger epochs), and 35 % of them, 2 epochs, ranked
too early there (full-resolution SPE10, tuning mask 1: x1 led after 2 epochs, x0.2 after 3 and
at the end). Candidates, share and floor were chosen on tuning splits that are never scored
(Jura: cross-validation inside the training sites; SPE10: other masks of the same volume, at
both resolutions): see docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from .config import SELECTION_SCORES
from .progress import Progress, shown_here
from .stopping import predictive_nll
from .training import FieldData, TrainState, check_inputs, train

if TYPE_CHECKING:
    from .config import GPVAEConfig

__all__ = ["KL_FACTORS", "MIN_SELECTION_EPOCHS", "SELECTION_HOLDOUT", "SELECTION_SCORES", "SELECTION_SHARE",
           "WHOLE_FIELD_SELECTION_SHARE", "Selection", "SelectionProgress", "selection_epochs", "selection_holdout", "selection_share", "select_kl_factor",
           "check_score", "score_shape"]

#: Candidate KL weights, as multiples of the engine's base weight (1 for SPA, N/H for HPA).
KL_FACTORS = (1.0, 0.2)
#: Share of the epoch budget each candidate trains for before the choice ...
SELECTION_SHARE = 0.35
#: ... where every step takes the whole field (fields of up to ``FULL_BATCH`` locations)
WHOLE_FIELD_SELECTION_SHARE = 0.2
#: The fewest epochs each candidate trains (fewer only where the budget leaves no epoch after them).
MIN_SELECTION_EPOCHS = 3
#: Share of each variable's observed values held out to score the candidates.
SELECTION_HOLDOUT = 0.1


@dataclass
class Selection:
    """The outcome of :func:`select_kl_factor`.

    Attributes
    ----------
    factor : float or None
        The chosen multiple of the base KL weight (None when interrupted before the choice).
    scores : dict of float to float
        Calibrated check NLL (nats per value) of every candidate trained.
    model : torch.nn.Module or None
        The chosen candidate, ready to carry on training.
    state : TrainState
        Its training state after the selection epochs.
    """

    factor: float | None
    scores: dict[float, float] = field(default_factory=dict)
    model: torch.nn.Module | None = None
    state: TrainState = field(default_factory=TrainState)
    progress: SelectionProgress | None = None


@dataclass
class SelectionProgress:
    """How far a selection has gone: what a checkpoint keeps, and :func:`select_kl_factor` resumes.

    Attributes
    ----------
    scores : dict of float to float
        Check NLLs of the candidates already scored.
    best : tuple (factor, model, TrainState) or None
        The best of them, ready to carry on training.
    factor : float
        The candidate in training.
    model : torch.nn.Module
        Its model.
    state : TrainState
        Its training state (``state.epoch`` of ``epochs`` done).
    epochs : int
        Epochs each candidate trains.
    factors : tuple of float
        Every candidate, in the order trained.
    """

    scores: dict[float, float]
    best: tuple[float, torch.nn.Module, TrainState] | None
    factor: float
    model: torch.nn.Module
    state: TrainState
    epochs: int
    factors: tuple[float, ...]


def selection_share(config: GPVAEConfig, n_points: int) -> float:
    """The share of the budget each candidate trains for on a field of ``n_points`` locations.

    Parameters
    ----------
    config : GPVAEConfig
        The fit's settings: its batch size rule, and ``extra["selection_share"]`` if given.
    n_points : int
        Number of locations in the field.

    Returns
    -------
    float
        A fraction of the epoch budget in (0, 1]: ``extra["selection_share"]`` when given;
        else :data:`WHOLE_FIELD_SELECTION_SHARE` where every step takes the whole field
        (``config.batch_for(n_points) >= n_points``), :data:`SELECTION_SHARE` with mini-batches.
    """
    if "selection_share" in config.extra:
        return float(config.extra["selection_share"])
    whole = config.batch_for(n_points) >= n_points
    return WHOLE_FIELD_SELECTION_SHARE if whole else SELECTION_SHARE


def selection_holdout(config: GPVAEConfig, n_points: int) -> float:
    """Share of each variable's observed values held out to score the candidates.

    Parameters
    ----------
    config : GPVAEConfig
        Where every training step takes the whole field, its ``extra["selection_holdout"]``
        may replace :data:`SELECTION_HOLDOUT` (experiments; a larger share was rejected by
        rule 17, docs/benchmarks.md).
    n_points : int
        Locations of the field being fitted.

    Returns
    -------
    float
        The share, in [0, 1).
    """
    if config.batch_for(n_points) >= n_points:
        return float(config.extra.get("selection_holdout", SELECTION_HOLDOUT))
    return SELECTION_HOLDOUT


def selection_epochs(total_epochs: int, share: float = SELECTION_SHARE) -> int:
    """Epochs each candidate trains before the choice.

    ``share`` of the budget of ``total_epochs``, rounded up, and at least
    :data:`MIN_SELECTION_EPOCHS` where the budget leaves the chosen candidate an epoch on
    every observed value after them (so at least 1, and at most ``total_epochs - 1`` through
    the floor).
    """
    floor = min(MIN_SELECTION_EPOCHS, total_epochs - 1)
    return max(1, floor, math.ceil(share * total_epochs))


def score_shape(choice: str, clustered: np.ndarray | bool) -> np.ndarray:
    """Which variables' check values are scored with the shape of their predictive variances.

    Parameters
    ----------
    choice : {"auto", "nll", "mean"}
        See :data:`SELECTION_SCORES`.
    clustered : array of bool, shape (K,)
        Whether each variable's gaps cluster (:func:`geogpvae.engine.holdout.clustered_gaps`).

    Returns
    -------
    ndarray of bool, shape (K,)
        The ``shape`` argument of :func:`check_score`.
    """
    clustered = np.atleast_1d(np.asarray(clustered, dtype=bool))
    if choice not in SELECTION_SCORES:
        raise ValueError(f"selection_score must be one of {SELECTION_SCORES}, not {choice!r}")
    if choice == "auto":
        return clustered.copy()
    return np.full(clustered.shape, choice == "nll")


@torch.no_grad()
def check_score(model: torch.nn.Module, data: FieldData, state: TrainState, *, seed: int,
                shape: bool | np.ndarray = True) -> float:
    """Calibrated predictive NLL of ``data.check`` with the moving-average weights of ``state``.

    The live weights are restored afterwards. Nats per held-out value (mean over variables).
    ``shape``: per variable, whether its predictive variances keep their shape or are replaced
    by one, its mean squared error (see :func:`geogpvae.engine.stopping.predictive_nll`).
    """
    core = model.module if hasattr(model, "module") else model
    inputs, eps = check_inputs(data, core.latent_dim, seed=seed)
    live = {k: v.detach().clone() for k, v in core.state_dict().items()}
    if state.average is not None:
        core.load_state_dict({**live, **state.average})
    was_training = core.training
    core.eval()
    try:
        return predictive_nll(core, inputs, data.check, eps, shape=shape)
    finally:
        core.load_state_dict(live)
        core.train(was_training)


def select_kl_factor(
    build: Callable[[float], torch.nn.Module],
    data: FieldData,
    config,
    *,
    epochs: int,
    factors: tuple[float, ...] = KL_FACTORS,
    should_stop: Callable[[], bool] | None = None,
    progress: bool | str = False,
    shape: bool | np.ndarray = True,
    resume: SelectionProgress | None = None,
    on_epoch: Callable[[SelectionProgress], None] | None = None,
    then: int = 0,
) -> Selection:
    """Train one model per candidate KL factor on ``data`` (check values held out); keep the best.

    Parameters
    ----------
    build : callable
        ``build(factor)`` returns a freshly initialised model (same initial weights for every
        factor) whose KL weight is ``factor`` times the base weight.
    data : FieldData
        The training field with ``data.check`` set (values held out of ``y``, ``observed``
        and ``context``).
    config : GPVAEConfig
        Training options (the epoch budget is ``config``'s; each candidate stops after
        ``epochs`` of it).
    epochs : int
        Epochs each candidate trains.
    factors : tuple of float
    should_stop : callable, optional
        Polled after every epoch; when it says True the selection ends with ``factor=None``.
    progress : bool or {"bar", "log", "none"}
        Display of the candidates' epochs (see :mod:`geogpvae.engine.progress`).
    shape : bool or array of bool, shape (K,)
        Which variables are scored with the shape of their predictive variances
        (:func:`score_shape`; True: every one).
    resume : SelectionProgress, optional
        Where an interrupted selection stood (from a checkpoint): candidates already scored
        are not trained again, and the one in training carries on from its state, so the
        outcome is the uninterrupted selection's.
    on_epoch : callable, optional
        Called with the :class:`SelectionProgress` after every epoch of a candidate
        (checkpointing).
    then : int
        Epochs the chosen candidate trains after the selection; the progress lines estimate
        the end of the whole training with them (:class:`~geogpvae.engine.progress.Progress`).

    Returns
    -------
    Selection
        Ties go to the earlier candidate (the stronger prior). A candidate whose training
        diverges scores ``inf`` (if every one diverges, the error of the last is raised).
        Interrupted: ``factor`` None, and ``progress`` says where it stood.
    """
    fitting = dataclasses.replace(data, check=None)  # no stopping rule inside the selection
    best = Selection(factor=None)
    if resume is not None:
        best.scores = dict(resume.scores)
        if resume.best is not None:
            best.factor, best.model, best.state = resume.best
    asked = []  # a stop request seen after a candidate's last epoch counts too

    def stop() -> bool:
        if should_stop is not None and should_stop():
            asked.append(True)
        return bool(asked)

    def where(factor: float, model: torch.nn.Module, state: TrainState) -> SelectionProgress:
        kept = None if best.factor is None else (best.factor, best.model, best.state)
        return SelectionProgress(dict(best.scores), kept, factor, model, state, epochs, tuple(factors))

    done = sum(epochs for f in factors if f in best.scores) + (resume.state.epoch if resume is not None else 0)
    with Progress(shown_here(progress), len(factors) * epochs, "selection", unit="epochs", initial=done,
                  then=then) as bar:
        for i, factor in enumerate(factors):
            if factor in best.scores:  # scored before the checkpoint
                continue
            resumed = resume is not None and resume.factor == factor
            model = resume.model if resumed else build(factor)

            def shown(state, _core, _opt, i=i, factor=factor, model=model):
                bar.update(i * epochs + state.epoch, f"beta x{factor:g} loss {state.history['loss'][-1]:.5g}")
                if on_epoch is not None:
                    on_epoch(where(factor, model, state))

            try:
                state = train(model, fitting, config, state=resume.state if resumed else None, progress=False,
                              callback=shown, should_stop=stop, pause_at=epochs)
            except FloatingPointError:
                if factor == factors[-1] and best.factor is None:
                    raise
                best.scores[factor] = math.inf  # diverged: not a candidate
                continue
            # a candidate that ends the whole budget (epochs=1) left train() without asking: ask here
            if (state.done and stop()) or asked or (state.epoch < epochs and not state.done):  # interrupted
                return Selection(factor=None, scores=best.scores, progress=where(factor, model, state))
            score = check_score(model, data, state, seed=config.seed, shape=shape)
            best.scores[factor] = score
            if best.factor is None or score < best.scores[best.factor]:
                best.factor, best.model, best.state = factor, model, state
        if best.factor is not None:  # the last line names the winner, not the last candidate
            bar.update(len(factors) * epochs, f"chose beta x{best.factor:g}")
    return best
