"""Choosing the KL weight from the field being fitted (``beta="auto"``).

One model per candidate weight (:data:`KL_FACTORS`) trains with the check values held out
(:func:`geogpvae.engine.holdout.held_out`) for a share of the budget; the one with the lowest
calibrated check NLL (:func:`check_score`) carries on (see docs/design-decisions.md, "KL weight").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from .progress import Progress, shown_here
from .check_values import predictive_nll
from .data import FieldData
from .training import TrainState, check_inputs, train
from .budget import (KL_FACTORS, MIN_SELECTION_EPOCHS, SELECTION_HOLDOUT, SELECTION_SHARE,  # noqa: F401
                     WHOLE_FIELD_SELECTION_SHARE, selection_epochs, selection_share)

if TYPE_CHECKING:
    from .config import GPVAEConfig

__all__ = ["KL_FACTORS", "MIN_SELECTION_EPOCHS", "SELECTION_HOLDOUT", "SELECTION_SHARE",
           "WHOLE_FIELD_SELECTION_SHARE", "Selection", "SelectionProgress", "selection_epochs", "selection_share",
           "select_kl_factor", "check_score"]

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
    progress : SelectionProgress or None
        Where an interrupted selection stood.
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
        The best of them.
    factor : float
        The candidate in training.
    model : torch.nn.Module
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


@torch.no_grad()
def check_score(model: torch.nn.Module, data: FieldData, state: TrainState, *, seed: int,
                shape: bool | np.ndarray = True) -> float:
    """Calibrated predictive NLL of ``data.check`` with the moving-average weights of ``state``.

    Nats per held-out value (mean over variables); the live weights are restored afterwards.
    ``shape`` as for :func:`geogpvae.engine.check_values.predictive_nll`.
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
    config: GPVAEConfig,
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
        ``build(factor)``: a fresh model (same initial weights) with ``factor`` times the base KL weight.
    data : FieldData
        The training field with ``data.check`` set.
    config : GPVAEConfig
        Training options (the epoch budget is ``config``'s).
    epochs : int
        Epochs each candidate trains.
    factors : tuple of float
    should_stop : callable, optional
        Polled after every epoch; True ends the selection with ``factor=None``.
    progress : bool or {"bar", "log", "none"}
        Display of the candidates' epochs.
    shape : bool or array of bool, shape (K,)
        Which variables are scored with the shape of their predictive variances.
    resume : SelectionProgress, optional
        Where an interrupted selection stood: the outcome is the uninterrupted selection's.
    on_epoch : callable, optional
        Called with the :class:`SelectionProgress` after every epoch (checkpointing).
    then : int
        Epochs the chosen candidate trains after the selection (for the progress estimate).

    Returns
    -------
    Selection
        Ties go to the earlier candidate; a diverging candidate scores ``inf`` (if every one
        diverges, the last error is raised). Interrupted: ``factor`` None, ``progress`` set.
    """
    fitting = dataclasses.replace(data, check=None)  # the check values only score, after training
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
            # a candidate that ends the whole budget left train() without asking: ask here
            if (state.done and stop()) or asked or (state.epoch < epochs and not state.done):  # interrupted
                return Selection(factor=None, scores=best.scores, progress=where(factor, model, state))
            score = check_score(model, data, state, seed=config.seed, shape=shape)
            best.scores[factor] = score
            if best.factor is None or score < best.scores[best.factor]:
                best.factor, best.model, best.state = factor, model, state
        if best.factor is not None:  # the last line names the winner, not the last candidate
            bar.update(len(factors) * epochs, f"chose beta x{best.factor:g}")
    return best
