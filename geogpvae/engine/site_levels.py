"""Each site's own level: the random intercepts of a station network (NumPy only).

A network measures the same sites again and again; a well's chloride or a gauge's flow sits at
its own level, far from its neighbours', and the latent GPs, whose lengthscales are shared by
every site, cannot hold both that level and the changes from day to day. The engine therefore
models each variable, in its modelled (log where asked) units, as

    value(site, t) = level(site) + anomaly(site, t),    level(site) ~ N(0, between),

and trains on the anomalies. The levels are random-effects estimates: each site's mean of its
observed values, shrunk towards the network's mean by ``between / (between + error)``, so a site
with few values keeps little of its own mean, and a network whose sites share one level
(``between`` about 0) keeps none. ``between`` is the covariance, across sites, of the means of
the earlier and later halves of each site's values, so that a series merely smooth over days
does not pass for a level; ``error`` is the within-site variance over the site's count,
inflated where the site means scatter more than that and the levels explain. A site the fit
never saw has level 0 and variance ``between``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["SiteLevels", "about_site_levels", "fit_site_levels", "site_rows", "with_levels"]


@dataclass(frozen=True)
class SiteLevels:
    """Fitted site levels, in modelled units relative to the network's mean.

    Attributes
    ----------
    axes : tuple of int
        The columns of ``x`` that place a site (the others, e.g. time, vary within a site).
    sites : ndarray of float64, shape (S, len(axes))
        The sites' coordinates, as the engine holds ``x`` before its metric (centred).
    level, var : ndarray of float64, shape (S, K)
        Each site's level and the variance of that estimate.
    between : ndarray of float64, shape (K,)
        Variance of the levels across sites.
    """

    axes: tuple[int, ...]
    sites: np.ndarray
    level: np.ndarray
    var: np.ndarray
    between: np.ndarray

    def rows(self, x: np.ndarray) -> np.ndarray:
        """The site of every location of ``x`` (N, D), -1 where it is none of :attr:`sites`."""
        return site_rows(self.sites, x[:, list(self.axes)])

    def at(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Level and its variance at locations of sites ``rows`` (-1: a new site), each (N, K)."""
        known = rows >= 0
        level = np.where(known[:, None], self.level[np.maximum(rows, 0)], 0.0)
        var = np.where(known[:, None], self.var[np.maximum(rows, 0)], self.between)
        return level, var

    def to_dict(self) -> dict:
        """Plain arrays, for an engine's saved state."""
        return {"axes": list(self.axes), "sites": self.sites, "level": self.level, "var": self.var,
                "between": self.between}

    @classmethod
    def from_dict(cls, d: dict) -> SiteLevels:
        arr = {k: np.asarray(d[k], dtype=np.float64) for k in ("sites", "level", "var", "between")}
        return cls(axes=tuple(int(a) for a in d["axes"]), **arr)


def site_rows(sites: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Index into ``sites`` (S, A) of each row of ``points`` (N, A) that equals one exactly, else -1."""
    keys = {tuple(row): i for i, row in enumerate(np.asarray(sites).tolist())}
    return np.array([keys.get(tuple(row), -1) for row in np.asarray(points).tolist()], dtype=np.int64)


def _components(values: np.ndarray, site: np.ndarray, order: np.ndarray, n_sites: int
                ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Per-site count and mean of ``values`` (observed only), the variance of the levels, and each
    site mean's error variance as an estimate of its level.

    The levels' variance is the covariance, across sites, of the means of each site's earlier and
    later half of its values (in ``order``, e.g. time): a level lasts from one half to the other,
    a correlation over days does not, so autocorrelated series do not pass for levels. The error
    variance is the within-site variance over ``n``, inflated where the site means spread more
    than that and the levels explain (autocorrelated values are worth fewer than ``n``).
    """
    count = np.bincount(site, minlength=n_sites).astype(np.float64)
    total = np.bincount(site, weights=values, minlength=n_sites)
    mean = np.divide(total, count, out=np.zeros(n_sites), where=count > 0)
    n, groups = float(count.sum()), int((count > 0).sum())
    resid = values - mean[site]
    within = float(resid @ resid) / (n - groups) if n > groups else 0.0
    error = np.divide(within, count, out=np.full(n_sites, np.inf), where=count > 0)
    # rank of each value within its site, in the given order: the earlier half is rank < n_s / 2
    by_site = np.lexsort((order, site))
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    rank = np.empty(len(values), dtype=np.int64)
    rank[by_site] = np.arange(len(values)) - start[site[by_site]]
    early = rank < count[site] // 2
    pair = count >= 2
    if pair.sum() < 3:
        return count, mean, 0.0, error
    half = [np.bincount(site[part], weights=values[part], minlength=n_sites)[pair]
            / np.bincount(site[part], minlength=n_sites)[pair] for part in (early, ~early)]
    between = max(float(np.mean((half[0] - half[0].mean()) * (half[1] - half[1].mean()))), 0.0)
    spread = float(np.var(mean[pair])) - between  # what the site means scatter beyond their levels
    typical = float(np.mean(error[pair]))
    if typical > 0:
        error = error * max(1.0, spread / typical)
    return count, mean, between, error


def fit_site_levels(mod: np.ndarray, observed: np.ndarray, x: np.ndarray, axes: Sequence[int]) -> SiteLevels:
    """Shrunk levels of every site, from the observed modelled values.

    Parameters
    ----------
    mod : ndarray, shape (N, K)
        Values in modelled units, minus the network's mean of each variable (any value where not
        observed).
    observed : ndarray of bool, shape (N, K)
    x : ndarray, shape (N, D)
        Coordinates; the columns ``axes`` place the site.
    axes : sequence of int

    Returns
    -------
    SiteLevels
    """
    axes = tuple(int(a) for a in axes)
    sites, site = np.unique(x[:, list(axes)], axis=0, return_inverse=True)
    site = site.reshape(-1)
    rest = [c for c in range(x.shape[1]) if c not in axes]
    order = np.lexsort(x[:, rest].T[::-1]) if rest else np.arange(x.shape[0])
    position = np.empty(x.shape[0], dtype=np.int64)
    position[order] = np.arange(x.shape[0])
    k = mod.shape[1]
    level, var = np.zeros((len(sites), k)), np.zeros((len(sites), k))
    between = np.zeros(k)
    for j in range(k):
        obs = observed[:, j]
        count, mean, tau2, error = _components(mod[obs, j], site[obs], position[obs], len(sites))
        # each level's posterior: N(mean, error) as data, N(0, tau2) as prior (0/0: no level)
        denom = tau2 + error
        shrink = np.divide(tau2, denom, out=np.zeros(len(sites)), where=np.isfinite(denom) & (denom > 0))
        level[:, j] = shrink * mean
        known = np.isfinite(error)
        var[:, j] = tau2
        var[known, j] = shrink[known] * error[known]
        between[j] = tau2
    return SiteLevels(axes, sites.astype(np.float64), level, var, between)


def with_levels(pred, level: np.ndarray, var: np.ndarray, log: np.ndarray, constant: np.ndarray | None):
    """A :class:`~geogpvae.engine.posterior.Prediction` of the anomalies plus each location's site
    ``level`` (N, K), independent of them with variance ``var`` (N, K), in modelled units.

    Log-modelled variables: the level multiplies the back-transformed mixture, whose mean gains
    ``exp(level + var / 2)`` and whose squared coefficient of variation ``c2`` becomes
    ``exp(var) (1 + c2) - 1``. Variables held constant keep their prediction.
    """
    keep = np.zeros(level.shape[1], dtype=bool) if constant is None else np.isfinite(constant)
    level, var = np.where(keep, 0.0, level), np.where(keep, 0.0, var)
    mean_model = pred.mean_model + level
    std_model = np.sqrt(pred.std_model**2 + var)
    mean, std = mean_model.copy(), std_model.copy()
    if np.any(log):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            m = pred.mean * np.exp(level + 0.5 * var)
            c2 = np.where(pred.mean > 0, (pred.std / pred.mean) ** 2, 0.0)
            s = m * np.sqrt(np.expm1(var) + np.exp(var) * c2)
        mean[:, log], std[:, log] = m[:, log], s[:, log]
    mean[:, keep], std[:, keep] = pred.mean[:, keep], pred.std[:, keep]
    return type(pred)(mean=mean, std=std, mean_model=mean_model, std_model=std_model, source=pred.source)


def about_site_levels(mod: np.ndarray, observed: np.ndarray, x: np.ndarray, axes: Sequence[int],
                      loc: np.ndarray, scale: np.ndarray):
    """The site levels of a training field and its standardisation about them.

    Parameters
    ----------
    mod : ndarray, shape (N, K)
        Modelled values minus ``loc`` (any value where not observed).
    observed : ndarray of bool, shape (N, K)
    x : ndarray, shape (N, D)
        Centred coordinates.
    axes : sequence of int
        The columns of ``x`` that place a site.
    loc, scale : ndarray, shape (K,)
        The standardisation of the values themselves.

    Returns
    -------
    levels : SiteLevels
    rows : ndarray of int, shape (N,)
        Each location's site.
    level : ndarray, shape (N, K)
        Each location's level.
    loc, scale : ndarray, shape (K,)
        The standardisation of the values less their level (scale kept where they do not vary).

    Raises
    ------
    InputError
        ``axes`` that are not distinct columns of ``x``.
    """
    axes = [int(a) for a in axes]
    if not axes or len(set(axes)) != len(axes) or min(axes) < 0 or max(axes) >= x.shape[1]:
        raise InputError(f"site_axes must name distinct columns of x (0..{x.shape[1] - 1}), got {list(axes)}")
    levels = fit_site_levels(mod, observed, x, axes)
    rows = levels.rows(x)
    level = levels.at(rows)[0]
    anomaly = np.where(observed, mod - level, np.nan)
    shift, spread = np.nanmean(anomaly, 0), np.nanstd(anomaly, 0)
    return levels, rows, level, loc + shift, np.where(spread > 0, spread, scale)
