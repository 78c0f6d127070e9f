"""An engine's state as a dictionary of tensors and plain values, for ``torch.save`` and
``torch.load(..., weights_only=True)``. Older states load with what they lack filled in as
they trained; a newer one is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._version import __version__
from .config import GPVAEConfig
from .metric import saved_scale
from .model import pattern_count
from .selection import SelectionProgress
from .site_levels import SiteLevels
from .training import TrainState


#: what this module is handed (kept untyped here: importing it would be an import cycle)
GPVAEEngine = Any

__all__ = ["STATE_FORMAT", "STATE_VERSION", "check_checkpoint", "check_state", "checkpoint_state", "engine_state",
           "format_version", "saved_attributes", "saved_config", "selection_from", "train_state_from",
           "with_hidden_moments"]

STATE_FORMAT = "geogpvae-engine"
STATE_VERSION = 1


def engine_state(eng: GPVAEEngine, *, include_data: bool = True) -> dict[str, Any]:
    """The state of a fitted engine, with the training field if ``include_data`` (see
    :meth:`GPVAEEngine.state_dict`)."""
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
        "clustered_gaps": [bool(c) for c in eng.clustered_gaps_],
        "hidden_variance": eng.model.hidden_variance,
        "site_levels": _site_levels_entry(eng.site_levels_),
        "weights": _weights(eng.model),
        "history": {k: list(map(float, v)) for k, v in eng.history.items()},
    }
    if include_data:
        post = eng.posterior()
        state["field"] = {
            "x": torch.as_tensor(post.train_x, dtype=torch.float64),
            "y": torch.as_tensor(post.train_y, dtype=torch.float64),
            "observed": torch.as_tensor(post.train_observed, dtype=torch.bool),
        }
        if eng.site_levels_ is not None:
            state["field"]["site_rows"] = torch.as_tensor(eng._site_rows, dtype=torch.int64)
    return state


def _site_levels_entry(levels: SiteLevels | None) -> dict[str, Any] | None:
    if levels is None:
        return None
    return {k: (list(v) if k == "axes" else torch.as_tensor(v, dtype=torch.float64))
            for k, v in levels.to_dict().items()}


def checkpoint_state(eng: GPVAEEngine) -> dict[str, Any]:
    """A resumable snapshot: ``{"format", "engine": engine_state(eng, include_data=False),
    "train": {...}}``, plus ``"selection"`` during ``beta="auto"``'s selection (the scores, the
    best candidate so far; ``"engine"`` and ``"train"`` then hold the one in training)."""
    state = {
        "format": STATE_FORMAT + "-checkpoint",
        "engine": engine_state(eng, include_data=False),
        "train": _train_entry(eng.train_state),
    }
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
    """The :class:`~geogpvae.engine.selection.SelectionProgress` a checkpoint holds, or None;
    ``build(factor)`` makes the fresh model each saved candidate's weights load into."""
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


def saved_config(state: dict[str, Any], device: str | None = None) -> tuple[GPVAEConfig, bool]:
    """The options of a saved state (``device`` overriding its device) and its model's
    ``hidden_variance``; ValueError for a state that is not an engine's, or a newer one's."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError("not a geogpvae engine state (format tag missing or different)")
    if format_version(state) > STATE_VERSION:
        raise ValueError(
            f"this state was written by a newer geogpvae ({state.get('package_version')}); upgrade to load it"
        )
    if state.get("members"):
        raise ValueError("this model holds several members (an option of earlier versions that is no "
                         "longer available); refit it with this version")
    cfg = GPVAEConfig.from_dict(state["config"])
    hidden = state.get("hidden_variance", state["config"].get("hidden_variance", False))
    check_state(state)
    return (cfg if device is None else cfg.replace(device=device)), hidden in (True, "auto")


def saved_attributes(state: dict[str, Any]) -> dict[str, Any]:
    """The fitted attributes of a saved engine state, by attribute name, as NumPy and Python
    values (parts that older versions did not save get what those versions used)."""
    constant = state.get("constant")  # saved before it existed: no variable held constant
    offset = state.get("x_offset")  # absent in files of versions that did not centre
    field = state.get("field")
    return {
        "names": list(state["names"]),
        "loc": state["loc"].numpy(),
        "scale": state["scale"].numpy(),
        "constant_": np.full(len(state["loc"]), np.nan) if constant is None else constant.numpy(),
        "log": state["log"].numpy().astype(bool),
        "lengthscale_": float(state["lengthscale"]),
        "calibration_": state["calibration"].numpy(),
        "predict_mode_": state.get("predict_mode"),
        "noise_": {r: list(v) for r, v in (state.get("noise") or {}).items()},  # older: the model's
        "context_radius_": float(state.get("context_radius", float("inf"))),
        "deep_distance_": state.get("deep_distance"),
        "n_points_": int(state["n_points"]),
        "kl_factor_": state.get("kl_factor", 1.0),
        "kl_scores_": dict(state.get("kl_scores") or {}),
        "clustered_gaps_": np.asarray(state.get("clustered_gaps", []), dtype=bool),  # older files: unknown
        "x_offset_": np.zeros(int(state["n_dims"])) if offset is None else offset.numpy().astype(np.float64),
        "x_scale_": saved_scale(state),
        "train_state": TrainState(epoch=len(state["history"].get("epoch", [])), history=state["history"]),
        "_x": None if field is None else field["x"].numpy(),
        "_y": None if field is None else field["y"].numpy(),
        "_observed": None if field is None else field["observed"].numpy(),
        "site_levels_": _site_levels_from(state.get("site_levels")),  # older files: none
        "_site_rows": None if field is None or "site_rows" not in field else field["site_rows"].numpy(),
    }


def _site_levels_from(entry: dict[str, Any] | None) -> SiteLevels | None:
    if entry is None:
        return None
    return SiteLevels.from_dict({k: (v if k == "axes" else v.numpy()) for k, v in entry.items()})


def with_hidden_moments(weights: dict[str, torch.Tensor], n_vars: int) -> dict[str, torch.Tensor]:
    """``weights`` (a model's ``state_dict``) with zero hidden-value moments where they were
    saved without (older models, which predict with the likelihood variance)."""
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
    """A :class:`TrainState` from a checkpoint's ``"train"`` entry (entries an older one lacks: none)."""
    return TrainState(
        epoch=_count(saved, "epoch"), history={k: list(v) for k, v in saved["history"].items()},
        optimizer=saved["optimizer"], average=saved.get("average"), steps=_count(saved, "steps", 0),
        monitor=dict(saved.get("monitor") or {}), done=bool(saved.get("done", False)),
    )


# --------------------------------------------------------------------------- checks of saved states
def format_version(state: dict[str, Any]) -> int:
    """The ``version`` entry of a saved file's state (0 where absent); ValueError unless a whole number."""
    version = state.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"its format version {version!r} is not a whole number")
    return version


def _count(entry: dict[str, Any], key: str, default: int | None = None) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"its {key} counter {value!r} is not a whole number >= 0")
    return value


def _first_not_finite(value: Any, where: str) -> str | None:
    """Where a tensor in ``value`` (nested dicts and lists) holds NaN or infinity, or None."""
    if isinstance(value, torch.Tensor):
        bad = (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all())
        return where if bad else None
    if isinstance(value, float):
        return where if not np.isfinite(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "_constraint." in key:  # gpytorch bounds may be infinite
            continue
        found = _first_not_finite(item, f"{where}[{key!r}]")
        if found is not None:
            return found
    return None


def _check_finite(value: Any, where: str) -> None:
    found = _first_not_finite(value, where)
    if found is not None:
        raise ValueError(f"{found} holds NaN or infinite values")


def _check_shape(state: dict[str, Any], key: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    value = state.get(key)
    if value is None:  # older states lack some entries
        return
    if not isinstance(value, torch.Tensor) or tuple(value.shape) not in shapes:
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(f"entry {key!r} has shape {got}, not {' or '.join(map(str, shapes))}")


def check_weight_shapes(state: dict[str, Any], weights: dict[str, torch.Tensor],
                        build: Callable[..., torch.nn.Module], where: str = "weights") -> None:
    """Refuse ``weights`` of another shape than those of the model ``build`` makes for ``state``'s
    options, variables and dimensions (``build`` is :func:`geogpvae.engine.core.build_model`)."""
    config, hidden = saved_config(state)
    k, d = len(state["names"]), int(state["n_dims"])
    with torch.random.fork_rng(devices=[]):  # building seeds the generator: leave it as it was
        fresh = build(config, k, d, 1, lengthscale=1.0, hidden_variance=hidden).state_dict()
    for name, tensor in weights.items():
        if name in fresh and tuple(tensor.shape) != tuple(fresh[name].shape):
            raise ValueError(f"weight {where}[{name!r}] has shape {tuple(tensor.shape)}, where {k} "
                             f"variables in {d} dimensions need {tuple(fresh[name].shape)}")


def check_state(state: dict[str, Any]) -> None:
    """Refuse a saved engine state whose values cannot be right: counts, shapes of its scalers
    against its variables and dimensions, NaN or infinite numbers (ValueError naming the entry);
    :func:`check_weight_shapes` checks the weights' shapes."""
    names = state["names"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"entry 'names' is {names!r}, not a list of variable names")
    k, d = len(names), _count(state, "n_dims")
    if d == 0 or _count(state, "n_points") == 0:
        raise ValueError("it records no coordinates or no locations")
    for key in ("loc", "scale", "constant", "log"):
        _check_shape(state, key, ((k,),))
    _check_shape(state, "x_offset", ((d,),))
    _check_shape(state, "x_scale", ((), (d,)))
    _check_shape(state, "calibration", ((2, k), (k,)))  # (k,): before the two regimes
    for key in ("loc", "scale", "x_offset", "x_scale", "calibration", "lengthscale"):
        _check_finite(state.get(key), f"entry {key!r}")
    levels = state.get("site_levels")
    if levels is not None:
        _check_site_levels(levels, k, d)
    field = state.get("field")
    if field is not None:
        n = len(field["x"])
        for key, shape in (("x", (n, d)), ("y", (n, k)), ("observed", (n, k))):
            _check_shape(field, key, (shape,))
        _check_finite(field["x"], "field['x']")
        if levels is not None:
            _check_shape(field, "site_rows", ((n,),))
            rows = field.get("site_rows")
            if rows is None or bool((rows < 0).any()) or bool((rows >= len(levels["sites"])).any()):
                raise ValueError("entry field['site_rows'] is missing or names sites the model does not hold")
    _check_finite(state["weights"], "weights")


def _check_site_levels(levels: Any, k: int, d: int) -> None:
    axes = levels.get("axes") if isinstance(levels, dict) else None
    if (not isinstance(axes, list) or not axes or not all(isinstance(a, int) and 0 <= a < d for a in axes)
            or len(set(axes)) != len(axes)):
        raise ValueError(f"entry 'site_levels' names no valid columns of the {d} coordinates")
    sites = levels.get("sites")
    if not isinstance(sites, torch.Tensor) or sites.dim() != 2 or tuple(sites.shape)[1:] != (len(axes),):
        raise ValueError("entry site_levels['sites'] is not a table of site coordinates")
    for key, shape in (("level", (len(sites), k)), ("var", (len(sites), k)), ("between", (k,))):
        _check_shape(levels, key, (shape,))
        if levels.get(key) is None:
            raise ValueError(f"entry site_levels[{key!r}] is missing")
        _check_finite(levels[key], f"site_levels[{key!r}]")
    if bool((levels["var"] < 0).any()) or bool((levels["between"] < 0).any()):
        raise ValueError("entry 'site_levels' holds negative variances")


def check_checkpoint(snapshot: dict[str, Any], build: Callable[..., torch.nn.Module]) -> None:
    """Refuse a checkpoint (:func:`checkpoint_state`) whose values cannot be right: its engine state
    and weights (:func:`check_state`, :func:`check_weight_shapes` with ``build``), epoch and step
    counters, NaN or infinite optimiser state (ValueError naming the entry)."""
    engine = snapshot["engine"]
    check_weight_shapes(engine, engine["weights"], build)
    best = (snapshot.get("selection") or {}).get("best")
    trains = {"train": snapshot["train"]}
    if best is not None:
        check_weight_shapes(engine, best["weights"], build, "selection['best']['weights']")
        _check_finite(best["weights"], "selection['best']['weights']")
        trains["selection['best']['train']"] = best["train"]
    for where, train in trains.items():
        train_state_from(train)
        for key in ("optimizer", "average"):
            _check_finite(train.get(key), f"{where}[{key!r}]")
