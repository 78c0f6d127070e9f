"""Saving and restoring an engine: its state as a dictionary of tensors and plain values.

The state holds the options, the standardisation, the weights, the calibration and,
optionally, the training field. It saves with :func:`torch.save` and loads with
``torch.load(..., weights_only=True)``, which never unpickles arbitrary objects. States
written by older versions load with their missing parts filled in as those versions trained
(:func:`with_hidden_moments`); a state from a newer version is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._version import __version__
from .config import GPVAEConfig
from .members import members_checkpoint
from .metric import saved_scale
from .model import pattern_count
from .selection import SelectionProgress
from .training import FieldData, TrainState

if TYPE_CHECKING:
    from .core import GPVAEEngine

__all__ = ["STATE_FORMAT", "STATE_VERSION", "checkpoint_state", "engine_state", "restore_engine",
           "selection_from", "train_state_from", "with_hidden_moments"]

STATE_FORMAT = "geogpvae-engine"
STATE_VERSION = 1


def engine_state(eng: GPVAEEngine, *, include_data: bool = True) -> dict[str, Any]:
    """The state of a fitted engine (see :meth:`GPVAEEngine.state_dict`).

    Parameters
    ----------
    eng : GPVAEEngine
        Fitted.
    include_data : bool
        Also store the training field (coordinates, standardised values, mask).

    Returns
    -------
    dict
        Tensors, plain Python values and nested dicts only.

    Raises
    ------
    RuntimeError
        ``eng`` is not fitted.
    """
    eng._require_fit()
    state: dict[str, Any] = {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "package_version": __version__,
        "config": eng.config.to_dict(),
        "names": list(eng.names),
        "loc": torch.as_tensor(eng.loc, dtype=torch.float64),
        "scale": torch.as_tensor(eng.scale, dtype=torch.float64),
        "constant": torch.as_tensor(eng.constant_, dtype=torch.float64),
        "log": torch.as_tensor(eng.log, dtype=torch.bool),
        "lengthscale": float(eng.lengthscale_),
        "x_offset": torch.as_tensor(eng.x_offset_, dtype=torch.float64),
        "x_scale": torch.as_tensor(eng.x_scale_, dtype=torch.float64),
        "calibration": torch.as_tensor(eng.calibration_, dtype=torch.float64),
        "predict_mode": eng.predict_mode_,
        "noise": {r: list(v) for r, v in eng.noise_.items()},
        "context_radius": float(eng.context_radius_),
        "deep_distance": None if eng.deep_distance_ is None else float(eng.deep_distance_),
        "n_points": int(eng.n_points_),
        "n_dims": int(eng.model.n_dims),
        "kl_factor": None if eng.kl_factor_ is None else float(eng.kl_factor_),
        "kl_scores": {float(f): float(v) for f, v in eng.kl_scores_.items()},
        "memorisation": {str(k): float(v) for k, v in (getattr(eng, "memorisation_", None) or {}).items()},
        "clustered_gaps": [bool(c) for c in eng.clustered_gaps_],
        "weights": _weights(eng.model),
        "history": {k: list(map(float, v)) for k, v in eng.history.items()},
    }
    if getattr(eng, "members_", None):  # members > 1: the other models, each a whole state
        state["members"] = [engine_state(m, include_data=include_data) for m in eng.members_]
    if include_data:
        state["field"] = {
            "x": torch.as_tensor(eng._x, dtype=torch.float64),
            "y": torch.as_tensor(eng._y, dtype=torch.float64),
            "observed": torch.as_tensor(eng._observed, dtype=torch.bool),
        }
    return state


def checkpoint_state(eng: GPVAEEngine) -> dict[str, Any]:
    """A resumable snapshot: the state without data, plus optimiser, epoch and averages.

    Parameters
    ----------
    eng : GPVAEEngine
        Training or trained.

    Returns
    -------
    dict
        ``{"format", "engine": engine_state(eng, include_data=False), "train": {...}}``; during
        the KL-weight selection also ``"selection"`` (the candidates scored, the best one's
        weights and train state, the factor in training; ``"engine"`` and ``"train"`` then hold
        the candidate in training), which :func:`selection_from` reads back. With ``members > 1``,
        once the engine itself is trained, also ``"members"``
        (:func:`geogpvae.engine.members.members_checkpoint`).
    """
    state = {
        "format": STATE_FORMAT + "-checkpoint",
        "engine": engine_state(eng, include_data=False),
        "train": _train_entry(eng.train_state),
    }
    state["engine"].pop("members", None)  # members > 1: their own snapshots, below
    members = members_checkpoint(eng, checkpoint_state)
    if members is not None:
        state["members"] = members
    progress = getattr(eng, "selection_", None)
    if progress is not None:  # beta="auto" is choosing: the model and train state are the candidate's
        state["engine"]["kl_factor"], kept = None, progress.best  # None: resumed, the selection goes on
        state["selection"] = {
            "scores": {float(f): float(v) for f, v in progress.scores.items()},
            "factor": float(progress.factor),
            "best": None if kept is None else {"factor": float(kept[0]), "weights": _weights(kept[1]),
                                               "train": _train_entry(kept[2])},
        }
    return state


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    core = model.module if hasattr(model, "module") else model
    return {k: v.detach().cpu() for k, v in core.state_dict().items()}


def _train_entry(ts: TrainState) -> dict[str, Any]:
    return {"epoch": int(ts.epoch), "history": ts.history, "optimizer": ts.optimizer, "average": ts.average,
            "steps": int(ts.steps), "monitor": ts.monitor, "done": bool(ts.done)}


def selection_from(
    resume: dict[str, Any] | None, build: Callable[[float], torch.nn.Module], n_vars: int, epochs: int,
    factors: tuple[float, ...],
) -> SelectionProgress | None:
    """The :class:`~geogpvae.engine.selection.SelectionProgress` a checkpoint holds, if any.

    Parameters
    ----------
    resume : dict or None
        :func:`checkpoint_state` output; None or one without a ``"selection"`` entry gives None.
    build : callable
        ``build(factor)``: a fresh model of that KL factor, into which the saved weights load.
    n_vars : int
    epochs : int
        Epochs each candidate trains.
    factors : tuple of float
        The candidates.
    """
    saved = None if resume is None else resume.get("selection")
    if saved is None:
        return None

    def model_of(factor: float, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
        model = build(float(factor))
        (model.module if hasattr(model, "module") else model).load_state_dict(with_hidden_moments(weights, n_vars))
        return model

    best = saved["best"]
    kept = None if best is None else (float(best["factor"]), model_of(best["factor"], best["weights"]),
                                      train_state_from(best["train"]))
    return SelectionProgress({float(f): float(v) for f, v in saved["scores"].items()}, kept, float(saved["factor"]),
                             model_of(saved["factor"], resume["engine"]["weights"]), train_state_from(resume["train"]),
                             epochs, tuple(factors))


def restore_engine(
    cls: type[GPVAEEngine], state: dict[str, Any], *, device: str | None = None, progress: bool | str = True
) -> GPVAEEngine:
    """Rebuild a trained engine of class ``cls`` from :func:`engine_state` output.

    Parameters
    ----------
    cls : type
        :class:`GPVAEEngine` or a subclass.
    state : dict
    device : str, optional
        Override the saved device (e.g. load a GPU-trained model on a CPU).
    progress : bool or str

    Raises
    ------
    ValueError
        Not an engine state, or one written by a newer version.
    """
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError("not a geogpvae engine state (format tag missing or different)")
    if int(state.get("version", 0)) > STATE_VERSION:
        raise ValueError(
            f"this state was written by a newer geogpvae ({state.get('package_version')}); upgrade to load it"
        )
    cfg = GPVAEConfig.from_dict(state["config"])
    if "hidden_variance" not in state["config"]:  # saved before it existed: as trained
        cfg = cfg.replace(hidden_variance=False)
    if device is not None:
        cfg = cfg.replace(device=device)
    eng = cls(cfg, progress=progress)
    eng.names = list(state["names"])
    eng.loc = state["loc"].numpy()
    eng.scale = state["scale"].numpy()
    saved = state.get("constant")  # saved before it existed: no variable held constant
    eng.constant_ = np.full(len(eng.loc), np.nan) if saved is None else saved.numpy()
    eng.log = state["log"].numpy().astype(bool)
    eng.lengthscale_ = float(state["lengthscale"])
    eng.calibration_ = state["calibration"].numpy()
    eng.predict_mode_ = state.get("predict_mode")
    eng.noise_ = {r: list(v) for r, v in (state.get("noise") or {}).items()}  # older: model's hidden_var
    eng.context_radius_ = float(state.get("context_radius", float("inf")))
    eng.deep_distance_ = state.get("deep_distance")
    eng.n_points_ = int(state["n_points"])
    eng.kl_factor_ = state.get("kl_factor", 1.0)
    eng.kl_scores_ = dict(state.get("kl_scores") or {})
    eng.memorisation_ = dict(state.get("memorisation") or {})
    eng.clustered_gaps_ = np.asarray(state.get("clustered_gaps", []), dtype=bool)  # older files: unknown
    offset = state.get("x_offset")  # absent in files of versions that did not centre
    eng.x_offset_ = (np.zeros(int(state["n_dims"])) if offset is None
                     else offset.numpy().astype(np.float64))
    eng.x_scale_ = saved_scale(state)
    eng.model = eng._build_model(len(eng.names), int(state["n_dims"]), eng.n_points_, eng.kl_factor_)
    eng.model.load_state_dict(with_hidden_moments(state["weights"], len(eng.names)))
    eng.model.eval()
    eng.train_state = TrainState(epoch=len(state["history"].get("epoch", [])), history=state["history"])
    if "field" in state:
        f = state["field"]
        eng._x, eng._y, eng._observed = f["x"].numpy(), f["y"].numpy(), f["observed"].numpy()
        field = eng._make_field(eng._x, eng._y, eng._observed)
        eng._data = FieldData(field.x, field.y, field.observed, field.context, nbr=torch.empty(0))
        eng._anchor = eng._anchors(field)
    eng.members_ = [restore_engine(cls, m, device=device, progress=progress) for m in state.get("members", [])]
    return eng


def with_hidden_moments(weights: dict[str, torch.Tensor], n_vars: int) -> dict[str, torch.Tensor]:
    """Weights saved before the hidden-value moments existed get empty ones (the predictive
    then adds the likelihood variance, as those models did; empty pattern moments fall back
    on the pooled ones).

    Parameters
    ----------
    weights : dict of str to Tensor
        A model's saved ``state_dict``.
    n_vars : int
        Number of variables K.

    Returns
    -------
    dict of str to Tensor
        A new dict: ``weights`` plus, where absent, ``hidden_moments`` (3, K) and
        ``pattern_moments`` (3, K, patterns) of zeros and ``moment_steps`` 0.
    """
    dtype = weights["raw_noise"].dtype
    out = dict(weights)
    if "hidden_moments" not in out:
        out["hidden_moments"] = torch.zeros(3, n_vars, dtype=dtype)
    if "moment_steps" not in out:
        out["moment_steps"] = torch.zeros((), dtype=torch.int64)
    if "pattern_moments" not in out:
        out["pattern_moments"] = torch.zeros(3, n_vars, pattern_count(n_vars), dtype=dtype)
    return out


def train_state_from(saved: dict[str, Any]) -> TrainState:
    """A :class:`TrainState` from a checkpoint's ``"train"`` entry.

    Parameters
    ----------
    saved : dict
        ``checkpoint_state(eng)["train"]``, possibly from an older version (missing entries
        default to none).

    Returns
    -------
    TrainState
    """
    return TrainState(
        epoch=int(saved["epoch"]), history={k: list(v) for k, v in saved["history"].items()},
        optimizer=saved["optimizer"], average=saved.get("average"), steps=int(saved.get("steps", 0)),
        monitor=dict(saved.get("monitor") or {}), done=bool(saved.get("done", False)),
    )
