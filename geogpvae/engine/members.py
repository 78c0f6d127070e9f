"""Several models of one field, trained from different seeds, predicting together (``members``).

Two fits of the same field that differ only in their seed (initial weights, orderings, batches,
the values held out for ``beta="auto"`` and for calibration) end in different places: on SPE10
tuning mask 7, model seeds 0 and 1 scored RMSE 0.482 and 0.458, a gap as large as most settings
the tuning splits chose between. With
``members=K`` the engine trains K such fits, member ``k`` with seed ``seed + k`` (member 0 is the
engine itself, so ``members=1``, the default, is the plain fit), each with its own ``beta="auto"``
selection and calibration. A prediction is the equal-weight mixture of the members' predictive
distributions, value by value (:func:`mixture`): its mean is the mean of the members' means,
and its variance the mean of their variances plus the variance of their means, the members'
disagreement. A fit and a prediction cost K times one member's.

On tuning splits (never the scored values; docs/benchmarks.md, "Two models from two seeds",
rules 18 and 19), two members against one lowered the RMSE and the NLL of the four tasks of the
rules. On the fresh data of rule 19: 40 stations as variables 0.309 / 0.265 -> 0.298 / 0.202 (RMSE / NLL)
with cov95 0.914 -> 0.938; Jura cross-validation 0.632 / 0.986 -> 0.628 / 0.969; SPE10 tuning
mask 2 0.5 % in RMSE, NLL -0.023; the outage fields 0.158 / -0.220 -> 0.157 / -0.262. The gain
is largest where each variable has few values (Jura Cd alone: 7.1 % -> 1.3 % above kriging's
RMSE); the synthetic 48 x 48 fields (NLL 0.009 worse, cov95 0.972) and the station network's
12,000 locations (0.307 / 0.157 -> 0.315 / 0.169, against one seed) did not gain. Off by
default: it doubles the cost of a call.

A checkpoint of a fit with several members (:meth:`GPVAEEngine.checkpoint`) holds the engine's
own snapshot and, under ``"members"``, the final snapshots of the members already trained
(``"done"``) and the snapshot of the one in training (``"current"``, see :func:`members_checkpoint`).
Resumed, each finished member is rebuilt from its final snapshot (no step is trained again;
its calibration is recomputed, as a resumed engine's is) and the member in training carries on
from its last epoch, so the result is the uninterrupted run's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TrainingWarning

if TYPE_CHECKING:
    from .core import GPVAEEngine, Prediction

__all__ = ["combine", "fit_members", "member_seed", "members_checkpoint", "mixture", "with_members"]


def member_seed(seed: int, k: int) -> int:
    """The seed of member ``k`` (0 is the engine itself) of a fit seeded with ``seed``.

    Parameters
    ----------
    seed : int
        The fit's seed (``GPVAEConfig.seed``).
    k : int
        The member's number, 0 .. ``members`` - 1.

    Returns
    -------
    int
        ``seed + k``.
    """
    return seed + k


def mixture(means: np.ndarray, stds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Moments of the equal-weight mixture of Gaussians, value by value.

    Parameters
    ----------
    means, stds : ndarray, shape (K, ...)
        Each member's predictive mean and standard deviation.

    Returns
    -------
    mean, std : ndarray, shape (...)
        ``mean`` the average of the means; ``std`` the square root of the average variance
        plus the (population) variance of the means.
    """
    means, stds = np.asarray(means, dtype=float), np.asarray(stds, dtype=float)
    mean = means.mean(axis=0)
    variance = (stds**2).mean(axis=0) + ((means - mean) ** 2).mean(axis=0)
    return mean, np.sqrt(variance)


def combine(predictions: list[Prediction]) -> Prediction:
    """The members' predictions of the same locations as one (:func:`mixture`, in both spaces).

    Parameters
    ----------
    predictions : list of Prediction
        One per member, each with means and stds of shape (M, K) in the original units and in
        the modelled space, and sources of shape (M,).

    Returns
    -------
    Prediction
        ``mean``/``std`` and ``mean_model``/``std_model`` the mixture's moments in each space;
        ``source`` the first member's.
    """
    from .core import Prediction

    mean, std = mixture([p.mean for p in predictions], [p.std for p in predictions])
    mean_model, std_model = mixture([p.mean_model for p in predictions], [p.std_model for p in predictions])
    return Prediction(mean=mean, std=std, mean_model=mean_model, std_model=std_model, source=predictions[0].source)


def fit_members(
    engine: GPVAEEngine,
    x: np.ndarray,
    values: np.ndarray,
    log: Any,
    names: list[str] | None,
    callback: Callable[..., None] | None,
    should_stop: Callable[[], bool] | None,
    resume: dict[str, Any] | None = None,
) -> list[GPVAEEngine]:
    """Train members 1 .. K - 1 of a fitted engine on the field it was given (in its units).

    Each member is a :class:`GPVAEEngine` with the engine's options, ``members=1`` and its own
    seed (:func:`member_seed`); while it trains it is the engine's ``member_in_training_`` and
    ``callback`` is called with the engine (whose :meth:`~GPVAEEngine.checkpoint` then holds
    it). The :class:`~geogpvae.errors.TrainingWarning` s the engine's own fit gave are not
    repeated. Nothing is trained when the engine itself was interrupted; a member interrupted
    by ``should_stop`` stays ``member_in_training_`` (for the checkpoint) and marks the engine
    :attr:`~GPVAEEngine.interrupted`.

    Parameters
    ----------
    resume : dict, optional
        The engine's checkpoint: its ``"members"`` entry, when present, says where the members
        stood (:func:`members_checkpoint`).

    Returns
    -------
    list of GPVAEEngine
        The fitted members after the engine itself (empty with ``members=1``).
    """
    cfg, members = engine.config, []
    saved = (resume or {}).get("members") or {"done": [], "current": None}
    snapshots = [*saved["done"], saved["current"]]
    engine.member_in_training_, engine.members_ = None, members  # filled as each member finishes (checkpoints)
    for k in range(1, cfg.members if not engine.interrupted else 1):
        member = type(engine)(cfg.replace(seed=member_seed(cfg.seed, k), members=1), progress=engine.progress)
        engine.member_in_training_ = member
        with warnings.catch_warnings():  # the engine itself warned of the same field and options
            warnings.simplefilter("ignore", TrainingWarning)
            member.fit(x, values, log=log, names=names, resume=snapshots[k - 1] if k <= len(snapshots) else None,
                       callback=None if callback is None else lambda _m: callback(engine), should_stop=should_stop)
        if member.interrupted:
            engine.interrupted = True
            break
        members.append(member)
        engine.member_in_training_ = None
    return members


def members_checkpoint(engine: GPVAEEngine, snapshot: Callable[[GPVAEEngine], dict[str, Any]]) -> dict[str, Any] | None:
    """The ``"members"`` entry of a checkpoint, or None while the engine itself trains.

    Parameters
    ----------
    engine : GPVAEEngine
        Training or trained, with ``members > 1``.
    snapshot : callable
        :func:`geogpvae.engine.state.checkpoint_state`, applied to each member.

    Returns
    -------
    dict or None
        ``{"done": [snapshot of each member trained], "current": snapshot of the member in
        training, or None}``; None before any member has started.
    """
    current = getattr(engine, "member_in_training_", None)
    if not engine.members_ and current is None:
        return None
    return {"done": [snapshot(m) for m in engine.members_],
            "current": None if current is None or current.train_state is None else snapshot(current)}


def with_members(engine: GPVAEEngine, prediction: Prediction, x: np.ndarray | None, values: np.ndarray | None,
                 **options: Any) -> Prediction:
    """``prediction`` (the engine's own) combined with its members' predictions of the same locations.

    Parameters
    ----------
    engine : GPVAEEngine
        Fitted; ``engine.members_`` its other members (none: ``prediction`` is returned).
    prediction : Prediction
        The engine's own prediction at the M locations.
    x, values : ndarray or None
        What :meth:`GPVAEEngine.predict` was given: locations (M, D) and a field (M, K).
    **options
        :meth:`GPVAEEngine.predict`'s keywords, passed on to every member, except that member
        ``k`` draws its Monte Carlo samples with :func:`member_seed` of ``seed``.

    Returns
    -------
    Prediction
        The mixture of every member's prediction (:func:`combine`).
    """
    if not engine.members_:
        return prediction
    seed = options.pop("seed")
    return combine([prediction, *(m.predict(x, values, seed=member_seed(seed, k), **options)
                                  for k, m in enumerate(engine.members_, start=1))])
