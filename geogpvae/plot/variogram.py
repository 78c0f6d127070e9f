"""Residual variogram: whether the errors at the imputed cells hang together in space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from scipy.spatial.distance import pdist

from ..fields.coordinates import choose_coordinates
from ..fields.geometry import build_geometry
from ..fields.positions import coordinates_at
from .calibration import _locations, _residuals
from .conventions import _Field
from .style import _plt

__all__ = ["residual_variogram"]

#: at most this many imputed cells enter the pairs (a seeded random subset): 4.5 million pairs
MAX_CELLS = 3000


def semivariogram(
    x: np.ndarray, z: np.ndarray, groups: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Empirical semivariogram ``gamma(h) = mean of (z_i - z_j)**2 / 2`` over pairs in distance bins.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Positions.
    z : ndarray, shape (N,)
        Values.
    groups : ndarray of int, shape (N,)
        Only points of one group are paired (e.g. the same date).
    edges : ndarray, shape (B + 1,)
        Increasing bin edges; a pair at distance ``h`` is in bin ``b`` when
        ``edges[b] <= h < edges[b + 1]`` (the last bin includes its right edge).

    Returns
    -------
    lag : ndarray, shape (B,)
        Mean distance of the pairs in each bin (NaN for an empty bin).
    gamma : ndarray, shape (B,)
        Semivariance (NaN for an empty bin).
    pairs : ndarray of int, shape (B,)
    """
    nb = len(edges) - 1
    total_h, total_g, count = np.zeros(nb), np.zeros(nb), np.zeros(nb, dtype=np.int64)
    for g in np.unique(groups):
        take = np.flatnonzero(groups == g)
        if take.size < 2:
            continue
        h = pdist(x[take])
        half_sq = 0.5 * pdist(z[take, None], "sqeuclidean")
        which = np.searchsorted(edges, h, side="right") - 1
        which[h == edges[-1]] = nb - 1
        keep = (which >= 0) & (which < nb)
        total_h += np.bincount(which[keep], weights=h[keep], minlength=nb)
        total_g += np.bincount(which[keep], weights=half_sq[keep], minlength=nb)
        count += np.bincount(which[keep], minlength=nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total_h / count, total_g / count, count


def _positions(ds: xr.Dataset, value: xr.DataArray, coords: Any,
               index: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """Positions of the cells ``index`` (flat, C order) of ``value``, their groups, and the distance unit."""
    chosen = [(n, r) for n, r in choose_coordinates(ds, value.dims, coords) if r != "time"]
    if not chosen:
        raise ValueError(
            f"{value.name!r} has no spatial coordinate (only time): give coords=[...] to say "
            "which coordinates the distances are measured in"
        )
    geometry = build_geometry(ds, chosen, coord_scale={})
    x = coordinates_at(ds, geometry, value.dims, value.shape, index)
    spanned = {d for n, _ in chosen for d in (ds[n].dims if n in ds.variables else (n,))}
    other = [i for i, d in enumerate(value.dims) if d not in spanned]
    grid = np.unravel_index(index, value.shape)
    groups = (np.ravel_multi_index([grid[i] for i in other], [value.shape[i] for i in other])
              if other else np.zeros(index.size, dtype=np.int64))
    if any(a.kind == "sphere" for a in geometry.axes):
        unit = "km"
    else:
        units = {a.units for a in geometry.axes}
        unit = units.pop() if len(units) == 1 and None not in units else ""
    return x, groups, unit or ""


def _check_bins(bins: Any, max_distance: Any) -> None:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    if max_distance is not None and not (isinstance(max_distance, (int, float, np.number))
                                         and np.isfinite(max_distance) and max_distance > 0):
        raise ValueError(f"max_distance must be a positive number, got {max_distance!r}")


def _edges(h_max: float, bins: int, max_distance: float | None) -> np.ndarray:
    top = h_max / 2.0 if max_distance is None else float(max_distance)
    if not top > 0:
        raise ValueError("the imputed cells all sit at one place: there is no distance to bin")
    return np.linspace(0.0, top, int(bins) + 1)


def residual_variogram(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset,
    *,
    coords: str | Sequence[str] | None = None,
    bins: int = 12,
    max_distance: float | None = None,
    space: str = "auto",
    log_point: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Empirical semivariogram of the standardized residuals at the imputed cells.

    The residual of an imputed cell is ``z = (truth - mean) / sigma`` (of ``ln v`` for log
    variables, see :func:`interval_coverage`). Calibrated errors that do not hang together in
    space give a flat semivariogram at 1 (the dashed line); a level above 1 means the std is too
    small, below 1 too large. Rising from below 1 at short distances means nearby errors share a
    sign: expected inside a gap (its cells share their nearest data), a sign of structure the model
    missed among scattered hold-outs. Distances are isotropic, in the coordinates' units (km on the
    sphere for longitude/latitude); pairs are formed only within one slice of the other dims (one
    date, one realization). At most 3,000 imputed cells (a seeded random subset) enter the pairs.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
    truth : xarray.DataArray or xarray.Dataset
        The true values at (at least) the imputed cells.
    coords : str or sequence of str, optional
        The coordinates distances are measured in; default the spatial ones ``impute`` would use.
    bins : int
        Number of equal-width distance bins.
    max_distance : float, optional
        Upper edge of the last bin; default half the largest distance between imputed cells.
    space : {"auto", "linear", "log"}
        See :func:`interval_coverage`.
    log_point : {"median", "mean"}, optional
        See :func:`interval_coverage`.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        One axes, gid ``"residual-variogram"``: the line ``"semivariance"`` (mean distance and
        semivariance per non-empty bin), the reference ``"calibrated"`` at 1, ``"mean-square"``
        at the mean of ``z**2``, and on a twin axes (gid ``"pairs"``) the pair count per bin.

    Raises
    ------
    ValueError
        No truth, fewer than two usable imputed cells, no spatial coordinate, or bad ``bins``.
    """
    _check_bins(bins, max_distance)
    f = _Field(ds, var, truth)
    resid, sigma, ok, used = _residuals(ds, var, truth, space, log_point)
    cells = np.flatnonzero(ok)
    if cells.size < 2:
        raise ValueError(f"{var!r} has fewer than two imputed cells with truth and a positive std")
    if cells.size > MAX_CELLS:
        cells = np.sort(np.random.default_rng(0).choice(cells, MAX_CELLS, replace=False))
    x, groups, unit = _positions(ds, f.value, coords, cells)
    z = resid[cells] / sigma[cells]
    h_max = 0.0
    if max_distance is None:  # half the largest distance between cells of one group
        h_max = max((float(pdist(x[groups == g]).max()) for g in np.unique(groups)
                     if np.sum(groups == g) > 1), default=0.0)
    edges = _edges(h_max, bins, max_distance)
    lag, gamma, pairs = semivariogram(x, z, groups, edges)
    return _draw(f, lag, gamma, pairs, edges, float(np.mean(z**2)), z.size, unit, used, figsize)


def _draw(f: _Field, lag, gamma, pairs, edges, mean_square: float, n: int, unit: str, used: str,
          figsize) -> Figure:
    fig, ax = _plt().subplots(figsize=figsize or (6.0, 3.8), layout="constrained")
    ax.set_gid("residual-variogram")
    counts = ax.twinx()
    counts.set_gid("pairs")
    counts.bar(0.5 * (edges[:-1] + edges[1:]), pairs, width=np.diff(edges) * 0.9, color="0.88",
               zorder=0)
    counts.set_ylabel("pairs", color="0.5")
    counts.tick_params(axis="y", colors="0.5")
    ax.set_zorder(counts.get_zorder() + 1)
    ax.patch.set_visible(False)
    filled = pairs > 0
    (line,) = ax.plot(lag[filled], gamma[filled], "o-", color="C0", markersize=4,
                      label="standardized residuals")
    line.set_gid("semivariance")
    ref = ax.axhline(1.0, color="C3", linestyle="--", linewidth=1.2,
                     label="calibrated, independent errors")
    ref.set_gid("calibrated")
    ms = ax.axhline(mean_square, color="0.4", linestyle=":", linewidth=1.2,
                    label=f"mean z\u00b2 = {mean_square:.2f}")
    ms.set_gid("mean-square")
    top = np.nanmax(np.append(gamma[filled], [1.0, mean_square]))
    ax.set_ylim(0, 1.15 * top)
    ax.set_xlim(0, edges[-1])
    ax.set_xlabel("distance" + (f" [{unit}]" if unit else ""))
    ax.set_ylabel("semivariance of z")
    ax.legend(fontsize="small", loc="lower right")
    space = " of ln" if used == "log" else " of"
    ax.set_title(f"Residual variogram{space} {f.name} ({n} imputed {_locations(f)})", fontsize="medium")
    return fig
