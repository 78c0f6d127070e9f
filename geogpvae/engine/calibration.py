"""Variance calibration from held-out values: which values to hide, the factors, the sources.

:func:`calibrate` hides observed values, predicts them with the trained
:class:`~geogpvae.engine.posterior.Posterior` and, per *regime* (targets with and without values
of their own), derives variance factors, latent sources and added variances (:class:`Calibration`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..gp.kernels import stretchable
from ..gp.neighbours import knn
from .holdout import matched_entries
from .model import GPVAE
from .posterior import REGIMES, Posterior, split_mode
from .predict import added_variance, variance_scale
from .progress import Progress
from .targets import Targets, self_index_of



__all__ = [
    "CLUSTERED_STRETCHES", "DEEP_SPACINGS", "FACTOR_BAND", "NOISES", "NOISE_MARGIN", "STRETCHES", "Calibration",
    "calibrate", "calibration_candidates", "calibration_groups", "choose_factors", "choose_deep", "choose_noises",
    "choose_sources", "clearly_better", "deep_distance", "empty_stats", "hide_values", "noise_choices",
    "regime_factors", "score_hidden", "value_nlls",
]


#: lengthscale stretches of the neighbours' GP conditional scored for locations without values
STRETCHES = (0.25, 0.5, 2.0, 4.0)

#: the stretches offered where some variable's gaps cluster (see docs/design-decisions.md)
CLUSTERED_STRETCHES = (2.0, 4.0, 8.0, 16.0)

#: deep in a gap: farther from the data than this many median nearest-neighbour spacings
DEEP_SPACINGS = 3.0

#: variances added to the decoded spread, scored as ``"source|noise"`` (hidden: pooled, patterns: per pattern)
NOISES = ("likelihood", "hidden", "patterns", "scaled")

#: a variance worse than the best by more than this many paired standard errors is not chosen
NOISE_MARGIN = 2.0

#: the first variance is kept while its factor lies within ``[1 / FACTOR_BAND, FACTOR_BAND]``
FACTOR_BAND = 2.0

#: fewer held-out values than this keep factor 1 (or borrow the other regime's factor)
MIN_VALUES = 20

#: per (regime, source): per variable, lists of squared z-scores and of log variances
Stats = dict[tuple[str, str], tuple[list[list[np.ndarray]], list[list[np.ndarray]]]]


def deep_distance(x_observed: np.ndarray, backend: str = "auto", max_queries: int = 20000) -> float:
    """:data:`DEEP_SPACINGS` times the median nearest-neighbour distance among observed locations.

    Parameters
    ----------
    x_observed : ndarray, shape (A, D)
        Locations with observed values (model coordinates).
    backend : str
    max_queries : int
        At most this many locations (evenly spaced rows) are queried.
    """
    if len(x_observed) < 2:
        return float("inf")
    rows = np.unique(np.linspace(0, len(x_observed) - 1, min(max_queries, len(x_observed))).astype(int))
    dist, _ = knn(x_observed, 2, query=x_observed[rows], backend=backend)
    return DEEP_SPACINGS * float(np.median(dist[:, 1]))


def choose_deep(stats: Stats, candidates: list[str], noises: tuple[str, ...]) -> tuple[str | None, dict[str, float]]:
    """The latent source for locations deep in a gap, from the held-out values that lie as deep.

    Parameters
    ----------
    stats : dict
        ``stats[("deep", "source|noise")]`` of :func:`score_hidden`.
    candidates : list of str
        The neighbour sources scored (``"neighbours"``, ``"neighbours*8"``...).
    noises : tuple of str
        The added variances scored; the first one's scores decide.

    Returns
    -------
    source : str or None
        Lowest calibrated NLL; None with fewer than :data:`MIN_VALUES` deep held-out values.
    scores : dict
        ``{"deep:source": NLL}`` (empty with None).
    """
    scores: dict[str, float] = {}
    for mode in candidates:
        sq, lv = stats[("deep", f"{mode}|{noises[0]}" if noises else mode)]
        if sum(v.size for parts in sq for v in parts) < MIN_VALUES:
            return None, {}
        _, nll = regime_factors(sq, lv)
        if nll is not None:
            scores[f"deep:{mode}"] = nll
    if not scores:
        return None, {}
    return min(scores, key=scores.get).partition(":")[2], scores


def calibration_groups(observed: np.ndarray, rounds: int, seed: int) -> np.ndarray:
    """A random partition of the observed values into ``rounds`` groups, one per calibration round.

    Every observed value is hidden once over the rounds (see docs/design-decisions.md).

    Parameters
    ----------
    observed : array of bool, shape (N, K)
    rounds : int
    seed : int

    Returns
    -------
    ndarray of int, shape (N, K)
        Each observed value's group in ``[0, rounds)``; -1 where nothing is observed.

    Raises
    ------
    ValueError
        ``rounds`` below 1.
    """
    if rounds < 1:
        raise ValueError(f"calibration needs at least one round, got rounds={rounds}")
    group = np.random.default_rng(seed).integers(0, rounds, observed.shape)
    return np.where(observed, group, -1)


def hide_values(
    observed: np.ndarray, rng: np.random.Generator, fraction: float, whole: float, max_targets: int,
    values: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The values hidden in one round and the rows to predict.

    Parameters
    ----------
    observed : array of bool, shape (N, K)
    rng : numpy.random.Generator
    fraction : float
        Share of the observed values hidden one by one.
    whole : float
        Share of the locations whose observed values are all hidden.
    max_targets : int
        At most this many rows are predicted (a random subset, in order).
    values : array of bool, shape (N, K), optional
        The values hidden one by one (e.g. shaped like the gaps); by default a random ``fraction``.

    Returns
    -------
    hide : array of bool, shape (N, K)
        Never every observed value of a variable.
    rows : array of int
        Sorted rows with a hidden value.
    """
    hide = observed & (rng.random(observed.shape) < fraction) if values is None else observed & values
    hide |= observed & (rng.random(observed.shape[0]) < whole)[:, None]
    for j in range(observed.shape[1]):  # never hide every observed value of a variable
        if hide[:, j].sum() >= observed[:, j].sum():
            hide[np.flatnonzero(hide[:, j])[0], j] = False
    rows = np.flatnonzero(hide.any(1))
    if rows.size > max_targets:
        rows = np.sort(rng.choice(rows, max_targets, replace=False))
    return hide, rows


def regime_factors(sq: list[list[np.ndarray]], lv: list[list[np.ndarray]]) -> tuple[np.ndarray, float | None]:
    """Variance factors (K,) of one regime and source, and their mean calibrated NLL.

    A factor is the mean squared z-score (1 below :data:`MIN_VALUES` values); the NLL averages
    the variables' Gaussian NLL under the calibrated variance (None: no held-out value).
    """
    k = len(sq)
    f, nll, n_used = np.ones(k), 0.0, 0
    for j in range(k):
        vals = np.concatenate(sq[j]) if sq[j] else np.empty(0)
        if vals.size >= MIN_VALUES:
            f[j] = float(np.mean(vals))
        if vals.size:
            logv = np.concatenate(lv[j])
            nll += float(np.mean(0.5 * (np.log(2 * np.pi) + logv + np.log(f[j])) + 0.5 * vals / f[j]))
            n_used += 1
    return f, (nll / n_used if n_used else None)


def value_nlls(sq: list[list[np.ndarray]], lv: list[list[np.ndarray]]) -> list[np.ndarray]:
    """Per variable, the calibrated NLL of each held-out value (factors of :func:`regime_factors`).

    Parameters
    ----------
    sq, lv : list of list of ndarray
        Per variable, chunks of squared z-scores and log variances (:func:`score_hidden`).

    Returns
    -------
    list of ndarray
        Per variable, shape (n_j,): nats per held-out value under the calibrated variance.
    """
    f, _ = regime_factors(sq, lv)
    out = []
    for j in range(len(sq)):
        z2 = np.concatenate(sq[j]) if sq[j] else np.empty(0)
        logv = np.concatenate(lv[j]) if lv[j] else np.empty(0)
        out.append(0.5 * (np.log(2 * np.pi) + logv + np.log(f[j])) + 0.5 * z2 / f[j])
    return out


def clearly_better(base: tuple, other: tuple, margin: float = NOISE_MARGIN, only: int | None = None) -> bool:
    """Whether ``other``'s calibrated NLL is below ``base``'s by more than ``margin`` standard errors.

    The gain is the mean over variables of each one's mean paired drop in NLL.

    Parameters
    ----------
    base, other : tuple
        ``(sq, lv)`` per variable of the same held-out values, as for :func:`value_nlls`.
    margin : float
        Standard errors the gain must exceed (and at least 1e-6 nats).
    only : int, optional
        Judge this variable alone.

    Returns
    -------
    bool
    """
    means, variances = [], []
    for j, (a, b) in enumerate(zip(value_nlls(*base), value_nlls(*other), strict=True)):
        if a.size < 2 or (only is not None and j != only):
            continue
        d = a - b
        means.append(float(d.mean()))
        variances.append(float(d.var(ddof=1)) / d.size)
    if not means:
        return False
    gain, se = float(np.mean(means)), float(np.sqrt(np.sum(variances))) / len(means)
    return gain > max(margin * se, 1e-6)  # and never on round-off (identical predictives)


def choose_factors(
    stats: Stats, candidates: dict[str, list[str]]
) -> tuple[np.ndarray, dict[str, str], dict[str, float]]:
    """The factors, the source of each regime with the lowest calibrated NLL, and the NLLs.

    Parameters
    ----------
    stats : dict
        ``stats[(regime, source)] = (sq, lv)`` of :func:`score_hidden`.
    candidates : dict
        The sources scored in each regime; the first wins when none has a score.

    Returns
    -------
    factors : ndarray, shape (2, K)
        Rows: with and without observed values; a factor left at 1 borrows the other regime's.
    chosen : dict
        The source of each regime.
    nll : dict
        The mean calibrated NLL of every scored ``"regime:source"``.
    """
    k = len(next(iter(stats.values()))[0])
    factors = np.ones((2, k))
    chosen: dict[str, str] = {}
    scores: dict[str, float] = {}
    for r_i, regime in enumerate(REGIMES):
        best, best_nll = candidates[regime][0], np.inf
        for mode in candidates[regime]:
            f, nll = regime_factors(*stats[(regime, mode)])
            if nll is None:
                continue
            scores[f"{regime}:{mode}"] = nll
            if nll < best_nll:
                best, best_nll, factors[r_i] = mode, nll, f
        chosen[regime] = best
    for j in range(k):  # a regime without enough held-out values borrows the other's factor
        for r_i in range(2):
            if factors[r_i, j] == 1.0 and factors[1 - r_i, j] != 1.0:
                factors[r_i, j] = factors[1 - r_i, j]
    return factors, chosen, scores


@dataclass
class Calibration:
    """What :func:`calibrate` found.

    Attributes
    ----------
    factors : ndarray, shape (2, K)
        Variance factors for locations with (row 0) and without (row 1) observed values.
    predict_mode : dict or None
        The source chosen per regime (and ``"deep"``); None unless ``predict_mode="auto"``.
    noise : dict
        Per regime, the variance added to each variable's decoded spread (empty: the model's).
    nll : dict
        The mean calibrated NLL (nats per value) of every ``"regime:candidate"`` scored.
    deep_distance : float or None
        Beyond it from the data a target lies deep in a gap (where gaps cluster).
    """

    factors: np.ndarray
    predict_mode: dict | None
    noise: dict[str, list[str]]
    nll: dict[str, float]
    deep_distance: float | None = None


@torch.no_grad()
def calibrate(
    post: Posterior, *, progress: bool | str = False, rounds: int = 5, fraction: float = 0.1, whole: float = 0.05,
    max_targets: int = 8000,
) -> Calibration:
    """Variance factors, and for ``predict_mode="auto"`` the latent sources, from held-out values.

    Each round hides a group of :func:`calibration_groups` (where gaps cluster, values in gaps
    shaped like the missing ones) plus every value of a ``whole`` share of the locations, and
    collects their z-scores per regime; a factor is the mean squared z-score. Sources and added
    variances are chosen by calibrated NLL (:func:`choose_sources`).

    Parameters
    ----------
    post : Posterior
        The trained model's posterior, uncalibrated, with its training field.
    progress : bool or str
    rounds : int
    fraction : float
        Share of the observed values hidden one by one in a round where gaps cluster.
    whole : float
        Share of the locations whose observed values are all hidden in each round.
    max_targets : int
        At most this many locations are predicted per round.

    Returns
    -------
    Calibration
    """
    cfg = post.config
    rng = np.random.default_rng(cfg.seed + 7)
    k = len(post.loc)
    candidates = calibration_candidates(post)
    noises = noise_choices(post.model)
    observed, clustered = post.train_observed, post.clustered.any()
    post = post.replace(deep_distance=None)
    if clustered and cfg.predict_mode == "auto":
        candidates["deep"] = [m for m in candidates["unobserved"] if split_mode(m)[0] == "neighbours"]
        post = post.replace(deep_distance=deep_distance(post.train_x[observed.any(1)], cfg.neighbour_backend))
    stats = empty_stats(candidates, noises, k)
    groups = None if clustered else calibration_groups(observed, rounds, cfg.seed + 99)
    with Progress(progress, rounds, "calibration", unit="rounds") as bar:
        for r in range(rounds):
            shaped = groups == r if not clustered else matched_entries(
                post.train_x, observed, fraction, seed=cfg.seed + 7 + r, backend=cfg.neighbour_backend,
                shaped=post.clustered)
            hide, rows = hide_values(observed, rng, fraction, whole, max_targets, values=shaped)
            if rows.size:
                score_hidden(post, hide, rows, candidates, stats, tick=bar.within, noises=noises)
            bar.update(r + 1)
    factors, chosen, noise, nll = choose_sources(stats, candidates, noises, k)
    if "deep" in candidates:
        deep, scores = choose_deep(stats, candidates["deep"], noises)
        nll.update(scores)
        if deep is not None:
            chosen["deep"] = deep
    return Calibration(factors, chosen if cfg.predict_mode == "auto" else None, noise, nll, post.deep_distance)


def empty_stats(candidates: dict[str, list[str]], noises: tuple[str, ...], k: int) -> Stats:
    """Empty error lists for :func:`score_hidden`: one per regime, source (and added variance).

    Parameters
    ----------
    candidates : dict
        The sources scored in each regime (:func:`calibration_candidates`).
    noises : tuple of str
        The added variances scored (:func:`noise_choices`); empty for none.
    k : int

    Returns
    -------
    dict
        ``{(regime, "source|noise") or (regime, source): (squared z-scores, log variances)}``.
    """
    return {(r, f"{m}|{n}" if noises else m): ([[] for _ in range(k)], [[] for _ in range(k)])
            for r in candidates for m in candidates[r] for n in noises or (None,)}


def choose_sources(
    stats: Stats, candidates: dict[str, list[str]], noises: tuple[str, ...], k: int
) -> tuple[np.ndarray, dict[str, str], dict[str, list[str]], dict[str, float]]:
    """The factors, the source of each regime, each variable's added variance, and the NLLs.

    The source is chosen on the first variance alone (so the mean does not depend on the
    variance), then each variable's variance for it (:func:`choose_noises`).

    Parameters
    ----------
    stats : dict
        ``stats[(regime, "source|noise")]`` (``(regime, source)`` without ``noises``).
    candidates : dict
        The sources scored in each regime.
    noises : tuple of str
        The added variances scored (:func:`noise_choices`); empty for none.
    k : int

    Returns
    -------
    factors : ndarray, shape (2, K)
    sources : dict
        The source of each regime.
    noise : dict
        Per regime, the added variance of each variable (empty without ``noises``).
    scores : dict
        The mean calibrated NLL (nats per value) of every ``"regime:candidate"``.
    """
    scored = {r: [f"{m}|{n}" if noises else m for m in candidates[r] for n in noises or (None,)] for r in REGIMES}
    factors, chosen, scores = choose_factors(stats, scored)
    if not noises:
        return factors, chosen, {}, scores
    _, first, _ = choose_factors(stats, {r: [f"{m}|{noises[0]}" for m in candidates[r]] for r in REGIMES})
    sources = {r: c.partition("|")[0] for r, c in first.items()}
    noise, picked = choose_noises(stats, sources, noises, k)
    factors, _, _ = choose_factors(picked, {r: ["picked"] for r in REGIMES})
    return factors, sources, noise, scores


def choose_noises(
    stats: Stats, sources: dict[str, str], noises: tuple[str, ...], k: int
) -> tuple[dict[str, list[str]], Stats]:
    """The added variance of each variable in each regime, for the chosen sources.

    Among those not :func:`clearly_better`-beaten by the best, ``noises[0]`` while its factor lies
    within ``[1 / FACTOR_BAND, FACTOR_BAND]``, else the one whose factor is nearest 1. Returns
    the choice and the chosen variances' ``stats`` under ``(regime, "picked")``.
    """
    chosen: dict[str, list[str]] = {}
    picked: Stats = {}
    for r in REGIMES:
        chosen[r] = [noises[0]] * k
        options = [stats[(r, f"{sources[r]}|{n}")] for n in noises]
        for j in range(k):
            nlls = [regime_factors([o[0][j]], [o[1][j]]) for o in options]
            if any(nll is None for _, nll in nlls):
                continue
            best = int(np.argmin([nll for _, nll in nlls]))
            fit = [i for i in range(len(noises)) if i == best or not clearly_better(options[i], options[best], only=j)]
            if 0 in fit and abs(np.log(nlls[0][0][0])) <= np.log(FACTOR_BAND):
                continue  # the first variance predicts as well, within the band
            chosen[r][j] = noises[min(fit, key=lambda i: (abs(np.log(nlls[i][0][0])), i))]
        parts = [stats[(r, f"{sources[r]}|{n}")] for n in chosen[r]]
        picked[(r, "picked")] = ([p[0][j] for j, p in enumerate(parts)], [p[1][j] for j, p in enumerate(parts)])
    return chosen, picked


def noise_choices(model: GPVAE) -> tuple[str, ...]:
    """The added variances (:data:`NOISES`) calibration scores; empty: only the model's default.

    With the model's ``hidden_variance``, all four, the likelihood variance first (kept while
    it predicts as well and its factor stays within the band; see :func:`choose_noises`);
    without (``mask_rate=0``), none. One variable: no patterns.
    """
    if not model.hidden_variance:
        return ()
    return tuple(n for n in NOISES if n != "patterns" or model.n_patterns > 1)


def calibration_candidates(post: Posterior) -> dict[str, list[str]]:
    """The latent sources scored in each regime: all for ``"auto"``, else the fixed one.

    Without values of their own, also :data:`STRETCHES` (:data:`CLUSTERED_STRETCHES` where gaps cluster).
    """
    if post.config.predict_mode != "auto":
        fixed = post.regime_modes(post.config.predict_mode)
        return {r: [fixed[r]] for r in REGIMES}
    unobserved = ["neighbours"] + (["encoder", "combined"] if post.model.context_dim else [])
    if stretchable(post.model.kernel):
        clustered = np.any(post.clustered)
        unobserved += [f"neighbours*{s:g}" for s in (CLUSTERED_STRETCHES if clustered else STRETCHES)]
    return {"observed": ["encoder", "combined", "neighbours"], "unobserved": unobserved}


def score_hidden(
    post: Posterior, hide: np.ndarray, rows: np.ndarray, candidates: dict[str, list[str]],
    stats: dict, tick: Callable[[float], None] | None = None, noises: tuple[str, ...] = (),
    scored: np.ndarray | None = None,
) -> None:
    """Predict the hidden values of ``rows`` from the rest; append their squared z-scores.

    Into ``stats[(regime, mode)]`` (``mode + "|" + noise`` with ``noises``): per variable, squared
    z-scores and log variances. ``tick(part)``: share of the work done; ``scored`` (N, K): only
    these hidden values are scored (default: all).
    """
    cfg = post.config
    visible = post.train_observed & ~hide
    field = post.field(post.train_x, np.where(visible, post.train_y, 0.0), visible)
    anchor = post.anchors(field)
    self_index = self_index_of(anchor, field.x.shape[0])
    rows_t = torch.as_tensor(rows, device=post.device)
    target = Targets(field.x[rows_t], field.y[rows_t], field.observed[rows_t],
                    None if field.context is None else field.context[rows_t])
    if tick is not None:
        tick(0.5)  # the context and the encoder pass over the whole field are done
    parts = post.sources(target, anchor, self_index[rows])
    own = visible[rows].any(1)
    truth = post.loc + post.scale * post.train_y[rows]
    deep = np.zeros(len(rows), dtype=bool)
    if "deep" in candidates and (~own).any():  # which of them lie deep in a gap
        far = post.deep_rows(target.x, anchor, torch.as_tensor(np.flatnonzero(~own), device=post.device))
        deep[far.cpu().numpy()] = True
    for regime, in_regime in (("observed", own), ("unobserved", ~own)):
        if not in_regime.any():
            continue
        sub = torch.as_tensor(np.flatnonzero(in_regime), device=post.device)
        for mode in candidates[regime]:
            stretch = split_mode(mode)[1]
            if stretch != 1.0:
                mean, var = post.stretched_neighbours(target.x, anchor, self_index[rows], sub, stretch,
                                                 learnt_var=parts["var_g"][sub])
            else:
                mean, var, _ = post.select(parts, {"observed": mode, "unobserved": mode})
                mean, var = mean[sub], var[sub]
            base = noises[0] if noises else None
            vis = target.observed[sub]
            _, _, mm, sm_base = post.moments(mean, var, samples=cfg.samples, seed=cfg.seed + 11,
                                                calibrated=False, visible=vis, noise=base)
            added_base = added_variance(post.model, base, vis, len(sub)) if noises else None
            for noise in noises or (None,):
                sm = sm_base
                added = "likelihood" if noise == "scaled" else noise  # "scaled" adds the likelihood's
                if added != base:  # in modelled units the added variance simply adds: no decoding again
                    shift = added_variance(post.model, added, vis, len(sub)) - added_base
                    sm = sm_base * np.sqrt(1.0 + shift.detach().cpu().double().numpy() * (post.scale / sm_base) ** 2)
                if noise == "scaled":  # then the whole predictive variance times the ratio
                    sm = sm * np.sqrt(variance_scale(post.model, "scaled"))
                z = (truth[in_regime] - mm) / sm
                key = mode if noise is None else f"{mode}|{noise}"
                kept = [(regime, np.ones(len(z), dtype=bool))]
                if regime == "unobserved" and mode in candidates.get("deep", ()):
                    kept.append(("deep", deep[in_regime]))
                for name, part in kept:
                    sq, lv = stats[(name, key)]
                    for j in range(len(post.loc)):
                        sel = (hide if scored is None else scored)[rows[in_regime], j] & part
                        sq[j].append(z[sel, j] ** 2)
                        lv[j].append(2 * np.log(sm[sel, j]))


