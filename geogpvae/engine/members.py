"""Several models of one field, trained from different seeds, predicting together (``members``).

Two fits of the same field that differ only in their seed (initial weights, orderings, batches,
the values held out for ``beta="auto"`` and for calibration) end in different places, and their
predictions of a missing value differ by about as much as the choice between them matters. With
``members=K`` the engine trains K such fits, member ``k`` with seed ``seed + k`` (member 0 is the
engine itself, so ``members=1``, the default, is the plain fit), each with its own ``beta="auto"``
selection and calibration. A prediction is the equal-weight mixture of the members' predictive
distributions, value by value (:func:`mixture`): its mean is the mean of the members' means,
and its variance the mean of their variances plus the variance of their means, the members'
disagreement. A fit and a prediction cost K times one member's.

On tuning splits (never the scored values; docs/benchmarks.md, "Two models from two seeds",
rules 18 and 19), two members against one lowered the RMSE and the NLL of every task tried. On
the fresh data of rule 19: 40 stations as variables 0.309 / 0.265 -> 0.298 / 0.202 (RMSE / NLL)
with cov95 0.914 -> 0.938; Jura cross-validation 0.632 / 0.986 -> 0.628 / 0.969; SPE10 tuning
mask 2 0.5 % in RMSE, NLL -0.023; the outage fields 0.158 / -0.220 -> 0.157 / -0.262. The gain
is largest where each variable has few values. Off by default: it doubles the cost of a call.

Resuming needs one model per checkpoint, so a fit with ``members > 1`` cannot be checkpointed
(:func:`refuse_checkpoint`); the command line refuses ``--checkpoint-dir`` with it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TrainingWarning

if TYPE_CHECKING:
    from .core import GPVAEEngine, Prediction

__all__ = ["combine", "fit_members", "member_seed", "mixture", "refuse_checkpoint", "with_members"]


def member_seed(seed: int, k: int) -> int:
    """The seed of member ``k`` (0 is the engine itself) of a fit seeded with ``seed``."""
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

    The latent sources (``source``) are the first member's.
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
) -> list[GPVAEEngine]:
    """Train members 1 .. K - 1 of a fitted engine on the field it was given (in its units).

    Each member is a :class:`GPVAEEngine` with the engine's options, ``members=1`` and its own
    seed (:func:`member_seed`); ``callback`` is called with the member in training, and the
    :class:`~geogpvae.errors.TrainingWarning` s the engine's own fit gave are not repeated. Nothing is
    trained when the engine itself was interrupted; a member interrupted by ``should_stop`` is
    dropped and marks the engine :attr:`~GPVAEEngine.interrupted`.

    Returns
    -------
    list of GPVAEEngine
        The fitted members after the engine itself (empty with ``members=1``).
    """
    cfg, members = engine.config, []
    for k in range(1, cfg.members if not engine.interrupted else 1):
        member = type(engine)(cfg.replace(seed=member_seed(cfg.seed, k), members=1), progress=engine.progress)
        with warnings.catch_warnings():  # the engine itself warned of the same field and options
            warnings.simplefilter("ignore", TrainingWarning)
            member.fit(x, values, log=log, names=names, callback=callback, should_stop=should_stop)
        if member.interrupted:
            engine.interrupted = True
            break
        members.append(member)
    return members


def with_members(engine: GPVAEEngine, prediction: Prediction, x: np.ndarray | None, values: np.ndarray | None,
                 **options: Any) -> Prediction:
    """``prediction`` (the engine's own) combined with its members' predictions of the same locations.

    ``options`` are :meth:`GPVAEEngine.predict`'s keywords, passed on to every member, except
    that member ``k`` draws its Monte Carlo samples with :func:`member_seed` of ``seed``.
    """
    if not engine.members_:
        return prediction
    seed = options.pop("seed")
    return combine([prediction, *(m.predict(x, values, seed=member_seed(seed, k), **options)
                                  for k, m in enumerate(engine.members_, start=1))])


def refuse_checkpoint(engine: GPVAEEngine) -> None:
    """Raise ``ValueError`` for a checkpoint of a fit with several members (one model per checkpoint)."""
    if engine.config.members > 1:
        raise ValueError(f"a fit with members={engine.config.members} cannot be checkpointed or resumed "
                         "(a checkpoint holds one model); train it in one go, or with members=1")
