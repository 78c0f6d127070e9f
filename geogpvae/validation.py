"""Checking the imputation and its intervals on the user's own data: hold out, impute, score.

Calibration inside :func:`geogpvae.impute` uses values the model trained on, so its intervals can
be too narrow for real gaps (see docs/performance.md, station network); :func:`validate` scores
values the model never saw.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from .errors import InputError, warn_caller
from .fields.cf import is_log_variable, log_moments

__all__ = ["FEW_SCORED", "coverage_range", "crps_gaussian", "few_scored_note", "validate"]

#: Half-width of a central 95 % Gaussian interval, in standard deviations
Z95 = 1.959964
#: Fewer held-out values of a variable than this and :func:`validate` warns that its scores are rough
FEW_SCORED = 30


def _held_out(ds: xr.Dataset, names: list[str], share: float, seed: int) -> dict[str, np.ndarray]:
    """Per variable, a random ``share`` of its observed cells (each keeps at least one value)."""
    rng = np.random.default_rng([int(seed), 7331])
    held = {}
    for name in names:
        observed = ds[name].notnull().values
        pick = observed & (rng.random(observed.shape) < share)
        if pick.sum() >= observed.sum():  # never every observed value
            pick[tuple(np.argwhere(pick)[0])] = False
        if observed.sum() < 2:
            raise InputError(
                f"validate: {name} has {int(observed.sum())} observed value(s), and one is always kept "
                f"for the model: nothing can be held out; leave {name} out of vars")
        if not pick.any():
            raise InputError(
                f"validate: no value of {name} would be held out ({int(observed.sum())} observed, "
                f"share={share}); raise share or leave {name} out of vars")
        held[name] = pick
    return held


def _held_out_shaped(field: Any, share: float, seed: int) -> dict[str, np.ndarray]:
    """Per variable, about ``share`` of its observed cells in gaps shaped like its missing values
    (:func:`geogpvae.engine.holdout.matched_entries`); a random share for a complete variable."""
    from .engine.holdout import matched_entries

    observed = np.isfinite(field.values)
    gappy = (~observed).any(0)
    flat = matched_entries(field.x, observed, share, seed=seed, shaped=gappy)
    rng = np.random.default_rng([int(seed), 7332])
    held = {}
    for j, name in enumerate(field.names):
        pick = flat[:, j] if gappy[j] else observed[:, j] & (rng.random(observed.shape[0]) < share)
        full = np.zeros(field.shape, dtype=bool)
        full.reshape(-1)[field.index] = pick
        held[name] = full
    return held


def _folds_random(ds: xr.Dataset, names: list[str], folds: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``folds`` disjoint sets of held-out cells per variable that together cover its observed cells."""
    rng = np.random.default_rng([int(seed), 7333])
    labels = {}
    for name in names:
        observed = ds[name].notnull().values
        if observed.sum() < folds:
            raise InputError(f"validate: {name} has {int(observed.sum())} observed value(s), fewer than "
                             f"folds={folds}; lower folds or leave {name} out of vars")
        label = np.full(observed.shape, -1)
        label[observed] = rng.permutation(np.arange(int(observed.sum())) % folds)
        labels[name] = label
    return [{name: labels[name] == i for name in names} for i in range(folds)]


def _blocks(field: Any, share: float, folds: int | None, block_size: float | None) -> tuple[np.ndarray, float]:
    """The spatial block of each location of ``field`` (cubes of side ``block_size`` in the
    model's coordinates; by default about ``5 * folds`` or ``5 / share`` blocks over the extent)."""
    x = field.x
    extent = x.max(0) - x.min(0)
    spread = extent > 0
    if block_size is None:
        target = 5 * folds if folds else 5 / share
        block_size = float((np.prod(extent[spread]) / target) ** (1 / max(int(spread.sum()), 1)))
    if not (np.isfinite(block_size) and block_size > 0):
        raise InputError(f"validate: block_size must be a positive number, got {block_size}")
    cells = np.floor((x - x.min(0)) / block_size).astype(np.int64)
    return np.unique(cells, axis=0, return_inverse=True)[1].reshape(-1), block_size


def _folds_blocks(field: Any, share: float, folds: int | None, block_size: float | None, seed: int
                  ) -> tuple[list[dict[str, np.ndarray]], float]:
    """Held-out cells in whole spatial blocks: blocks dealt out to ``folds`` folds, or (without folds)
    drawn until ``share`` of the observed values is held out."""
    block, side = _blocks(field, share, folds, block_size)
    n_blocks = int(block.max()) + 1
    rng = np.random.default_rng([int(seed), 7334])
    order = rng.permutation(n_blocks)
    if folds:
        if n_blocks < folds:
            raise InputError(f"validate: {n_blocks} block(s) of side {side:.3g} are fewer than folds={folds}; "
                             "give a smaller block_size")
        fold_of = np.empty(n_blocks, dtype=np.int64)
        fold_of[order] = np.arange(n_blocks) % folds
        chosen = [fold_of[block] == i for i in range(folds)]
    else:
        counts = np.bincount(block, weights=np.isfinite(field.values).sum(1), minlength=n_blocks)
        taken = order[: max(1, int(np.searchsorted(np.cumsum(counts[order]), share * counts.sum())) + 1)]
        chosen = [np.isin(block, taken)]
    sets = []
    for rows in chosen:
        held = {}
        for j, name in enumerate(field.names):
            full = np.zeros(field.shape, dtype=bool)
            full.reshape(-1)[field.index] = rows & np.isfinite(field.values[:, j])
            held[name] = full
        sets.append(held)
    return sets, side


def crps_gaussian(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Continuous ranked probability score of Gaussian predictives, per value (lower is better).

    ``CRPS(N(mu, s^2), y) = s * (z * (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))`` with ``z = (y - mu) / s``
    (Gneiting & Raftery 2007): the integral over ``t`` of ``(F(t) - 1[t >= y])^2``, in the units of
    the values. For ``s -> 0`` it tends to ``|y - mu|``, the absolute error.

    Parameters
    ----------
    mean, std, truth : array_like, broadcastable
        Predictive means and standard deviations (> 0), and the values that occurred.

    Returns
    -------
    ndarray
        The score of each value, in data units.

    Examples
    --------
    >>> round(float(crps_gaussian(0.0, 1.0, 0.0)), 4)
    0.2337
    """
    from scipy.special import ndtr

    mean, std, truth = (np.asarray(a, dtype=float) for a in (mean, std, truth))
    z = (truth - mean) / std
    pdf = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
    return std * (z * (2 * ndtr(z) - 1) + 2 * pdf - 1 / np.sqrt(np.pi))


def _scores(pred: np.ndarray, std: np.ndarray, truth: np.ndarray, log_point: str | None = None) -> dict[str, float]:
    """RMSE, MAE (data units), Gaussian NLL (nats), CRPS, 95 % coverage and mean squared z-score of
    held-out values; NLL, CRPS, coverage and z in log space for a log variable (``log_point``: its point
    estimate)."""
    err = pred - truth
    mu, s, t = (pred, std, truth) if log_point is None else (*log_moments(pred, std, log_point), np.log(truth))
    z = (t - mu) / s
    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "mae": float(np.mean(np.abs(err))),
        "nll": float(np.mean(0.5 * np.log(2 * np.pi * s**2) + 0.5 * z**2)),
        "crps": float(np.mean(crps_gaussian(mu, s, t))),
        "cov95": float(np.mean(np.abs(z) < Z95)),
        "z2": float(np.mean(z**2)),
    }


def coverage_range(hits: int, n: int) -> tuple[float, float]:
    """The 95 % range of a coverage share seen as ``hits`` of ``n`` values (Wilson's score interval).

    Parameters
    ----------
    hits, n : int
        Held-out values inside their central 95 % intervals, and held-out values scored.

    Returns
    -------
    low, high : float
        The range's ends, within [0, 1]; NaN for ``n = 0``.

    Examples
    --------
    >>> [round(v, 2) for v in coverage_range(3, 6)]
    [0.19, 0.81]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p, z2 = hits / n, Z95**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def few_scored_note(scores: xr.Dataset) -> str | None:
    """The note on :func:`validate`'s ``scores`` naming the variables with under :data:`FEW_SCORED`
    held-out values, their ``n`` and coverage ranges; None where every variable has enough."""
    few = [str(v) for v in scores.variable.values if int(scores.n.sel(variable=v)) < FEW_SCORED]
    if not few:
        return None
    each = ", ".join(f"{v} on {int(scores.n.sel(variable=v))} (cov95 "
                     f"{float(scores.cov95_low.sel(variable=v)):.2f}-{float(scores.cov95_high.sel(variable=v)):.2f})"
                     for v in few)
    return (f"few held-out values scored: {each}; the cov95 range is where the true coverage lies "
            "at 95 % confidence, and RMSE and NLL are as rough: raise share, or run other seeds and pool them")


def validate(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
    *,
    share: float = 0.1,
    gaps: str = "random",
    folds: int | None = None,
    block_size: float | None = None,
    seed: int = 0,
    progress: bool | str = False,
    **options: Any,
) -> xr.Dataset:
    """Hold out a share of each variable's observed values, impute the rest, and score them;
    or, with ``folds``, every observed value once, in k-fold cross-validation.

    Parameters
    ----------
    ds : xarray.Dataset
        The data, as for :func:`geogpvae.impute`; not modified.
    vars : str or sequence of str, optional
        Variables to impute together and score (default: as :func:`geogpvae.impute` picks them).
    share : float
        Share of each variable's observed values held out, in (0, 1); the model never sees them.
        (With ``folds``, each run holds out about ``1 / folds``.)
    gaps : {"random", "shaped", "blocks"}
        ``"random"``: drawn at random (a best case where real gaps cluster); ``"shaped"``: in gaps
        shaped like each variable's missing values (random for a variable with none missing);
        ``"blocks"``: in whole spatial blocks (cubes of side ``block_size`` in the model's
        coordinates), which scores prediction away from the data, as in spatial
        cross-validation.
    folds : int, optional
        k-fold cross-validation: the observed values (``gaps="random"``) or the blocks
        (``gaps="blocks"``) are dealt into ``folds`` sets, each held out in its own run (``folds``
        imputations), and the scores pool every value once.
    block_size : float, optional
        Side of the blocks of ``gaps="blocks"``, in the model's coordinates (cell steps for a
        grid, kilometres for longitude/latitude, the coordinates' units otherwise). Default: the
        side that cuts the extent into about ``5 * folds`` blocks (``5 / share`` without folds).
    seed : int
        Seeds the held-out values and the model.
    progress : bool or {"bar", "log", "none"}
        As for :func:`geogpvae.impute` (off by default).
    **options
        Any other :func:`geogpvae.impute` argument (``engine``, ``neighbours``, ``epochs``, ...).

    Returns
    -------
    xarray.Dataset
        On dim ``variable``, with coordinates ``units`` and ``space`` (``"log"`` or ``"linear"``):
        ``n`` (values scored, those inside the domain), ``rmse`` and ``mae`` (data units), ``nll``
        (Gaussian, nats per value), ``crps`` (:func:`crps_gaussian`, data units), ``cov95`` (share
        inside the 95 % intervals, nominally 0.95), ``cov95_low``/``cov95_high``
        (:func:`coverage_range`) and ``z2`` (mean squared standardised error, nominally 1). For a
        log variable ``nll``, ``crps``, ``cov95`` and ``z2`` are those of its log. Attributes
        record ``share``, ``gaps``, ``folds`` (0 without), ``seed``, the block side
        (``geogpvae_validation_block_size``, blocks only) and the options.

    Raises
    ------
    InputError (a ValueError)
        Bad ``share``, ``gaps``, ``folds`` or ``block_size``, a variable with nothing to hold out
        (or a fold holding out all of it) or already imputed, or
        any error :func:`geogpvae.impute` raises on the thinned data.

    Examples
    --------
    >>> from geogpvae.datasets import make_gaussian_field
    >>> ds = make_gaussian_field((20, 20), seed=0)
    >>> scores = validate(ds, ["v0", "v1"], share=0.25, neighbours=8, epochs=3)
    >>> scores.variable.values.tolist(), sorted(scores.data_vars)
    (['v0', 'v1'], ['cov95', 'cov95_high', 'cov95_low', 'crps', 'mae', 'n', 'nll', 'rmse', 'z2'])
    """
    from .api import GPVAEImputer
    from .api_imputer import imputer_from

    _check_arguments(share, gaps, folds, block_size)
    field = imputer_from(GPVAEImputer, dict(seed=seed, progress=False, **options)).prepare(ds, vars)  # options too
    names = list(field.names)
    held_sets, side = _held_out_sets(ds, field, names, share, gaps, folds, block_size, seed)
    dims = {name: ds[name].dims if gaps == "random" else field.dims for name in names}
    pooled, out = _impute_held_out(ds, names, held_sets, dims, seed, progress, options)
    result = _score_table(ds, names, pooled, out)
    clustered = json.loads(str(out.attrs.get("geogpvae_clustered_gaps", "[]")))
    result.attrs = {"geogpvae_validation_share": share if folds is None else 1 / folds,
                    "geogpvae_validation_gaps": gaps, "geogpvae_validation_folds": folds or 0,
                    "geogpvae_validation_seed": seed, "geogpvae_clustered_gaps": json.dumps(clustered),
                    "geogpvae_config": out.attrs.get("geogpvae_config", "")}
    if side is not None:
        result.attrs["geogpvae_validation_block_size"] = side
    if gaps == "random" and clustered:
        warn_caller(clustered_gaps_note(clustered))
    few = few_scored_note(result)
    if few:
        warn_caller(few)
    return result


def _check_arguments(share: float, gaps: str, folds: int | None, block_size: float | None) -> None:
    if not 0 < share < 1:
        raise InputError(f"validate: share must lie in (0, 1), got {share}")
    if gaps not in ("random", "shaped", "blocks"):
        raise InputError(f"validate: gaps must be 'random', 'shaped' or 'blocks', got {gaps!r}")
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2):
        raise InputError(f"validate: folds must be a whole number >= 2 (or None), got {folds!r}")
    if folds is not None and gaps == "shaped":
        raise InputError("validate: gaps='shaped' holds out one set of gaps; use folds with gaps='random' or 'blocks'")
    if block_size is not None and gaps != "blocks":
        raise InputError(f"validate: block_size is for gaps='blocks', not gaps={gaps!r}")


def _held_out_sets(ds: xr.Dataset, field: Any, names: list[str], share: float, gaps: str, folds: int | None,
                   block_size: float | None, seed: int) -> tuple[list[dict[str, np.ndarray]], float | None]:
    """The held-out cells of each run (one run, or one per fold), and the block side (blocks only)."""
    side = None
    if gaps == "blocks":
        sets, side = _folds_blocks(field, share, folds, block_size, seed)
    elif folds is not None:
        sets = _folds_random(ds, names, folds, seed)
    else:
        sets = [_held_out(ds, names, share, seed) if gaps == "random" else _held_out_shaped(field, share, seed)]
    observed = {name: np.isfinite(field.values[:, j]).sum() for j, name in enumerate(field.names)}
    for i, held in enumerate(sets):
        for name in names:
            what = f"fold {i}" if folds else f"gaps={gaps!r}"
            if not held[name].any() and not folds:
                where = "in gaps shaped like its missing values" if gaps == "shaped" else "in the blocks held out"
                hint = "use gaps='random'" if gaps == "shaped" else "give a smaller block_size"
                raise InputError(f"validate: no value of {name} would be held out {where} (share={share}); "
                                 f"raise share, {hint}, or leave {name} out of vars")
            if held[name].sum() >= observed[name]:
                raise InputError(f"validate: {what} would hold out every observed value of {name}; use more "
                                 "folds or smaller blocks, or leave it out of vars")
    return sets, side


def _impute_held_out(ds: xr.Dataset, names: list[str], held_sets: list[dict[str, np.ndarray]], dims: dict,
                     seed: int, progress: bool | str, options: dict[str, Any]
                     ) -> tuple[dict[str, tuple[np.ndarray, ...]], xr.Dataset]:
    """Impute the data without each set of held-out cells in turn: the held-out values' predictive
    means, standard deviations and truths, pooled over the runs, and the last run's output."""
    from .api import impute

    found: dict[str, list[tuple[np.ndarray, ...]]] = {name: [] for name in names}
    for held in held_sets:
        work = ds.copy()
        for name in names:
            work[name] = ds[name].where(~xr.DataArray(held[name], dims=dims[name]))
            work[name].encoding = dict(ds[name].encoding)  # packing: valid bounds given in codes
        with warnings.catch_warnings():  # the held-out values would change this warning's count
            warnings.filterwarnings("ignore", message=r"\d+ of the \d+ .* places .* have no value at any")
            # said once already, of all the observed values, when validate prepared the field
            warnings.filterwarnings("ignore", message=r".+: positive values spanning .* orders of magnitude")
            out = impute(work, names, seed=seed, progress=progress, **options)
        for name in names:
            where = xr.DataArray(held[name], dims=dims[name]).transpose(*ds[name].dims).values
            found[name].append((out[name].values[where], out[f"{name}_std"].values[where],
                                np.asarray(ds[name].values[where], dtype=float)))
    return {name: tuple(np.concatenate(parts) for parts in zip(*runs)) for name, runs in found.items()}, out


def _score_table(ds: xr.Dataset, names: list[str], pooled: dict[str, tuple[np.ndarray, ...]],
                 out: xr.Dataset) -> xr.Dataset:
    rows = []
    for name in names:
        pred, std, truth = pooled[name]
        ok = np.isfinite(pred) & np.isfinite(std) & (std > 0)
        point = str(out[name].attrs.get("geogpvae_point_estimate", "median")) if is_log_variable(out[name]) else None
        row = {"n": int(ok.sum()), **_scores(pred[ok], std[ok], truth[ok], point)} if ok.any() else {"n": 0}
        row["cov95_low"], row["cov95_high"] = coverage_range(round(row.get("cov95", 0.0) * row["n"]), row["n"])
        rows.append(row)
    keys = ["n", "rmse", "mae", "nll", "crps", "cov95", "cov95_low", "cov95_high", "z2"]
    data = {k: ("variable", np.array([r.get(k, np.nan) for r in rows])) for k in keys}
    units = [str(ds[name].attrs.get("units", "")) for name in names]
    space = ["log" if is_log_variable(out[name]) else "linear" for name in names]
    result = xr.Dataset(data, coords={"variable": names, "units": ("variable", units), "space": ("variable", space)})
    result["n"] = result.n.astype(int)
    return result


def clustered_gaps_note(names: Sequence[str]) -> str:
    """What random held-out values say where a variable's gaps cluster, and what to run instead."""
    return (f"the gaps of {', '.join(names)} cluster (outages, patches): values held out at random "
            "sit next to observed ones and score a best case for those gaps; gaps='shaped' "
            "(geogpvae validate --gaps shaped) holds out values shaped like them")
