"""Calibration of the predictive uncertainty: interval coverage and z-score panels."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ..fields.cf import log_moments as _log_moments
from .conventions import _Field
from .style import HALF_NORMAL_MEAN, _colourbar, _plt, _units_suffix, is_log_variable

__all__ = ["interval_coverage", "uncertainty"]


def _residuals(
    ds: xr.Dataset, var: str, truth: Any, space: str, log_point: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """Signed error ``truth - mean`` and predictive std of every cell (flat, C order of ``var``) in
    the modelling space, which cells are imputed with finite values and a positive std, and the space."""
    f = _Field(ds, var, truth)
    if f.truth is None:
        raise ValueError("truth is required")
    if f.std is None:
        raise KeyError(f"the Dataset has no std for {var!r}")
    if space not in ("auto", "linear", "log"):
        raise ValueError("space must be 'auto', 'linear' or 'log'")
    if space == "auto":
        space = "log" if is_log_variable(f.value) else "linear"
    value = np.asarray(f.value.values, dtype=float).ravel()
    sdev = np.asarray(f.std.transpose(*f.value.dims).values, dtype=float).ravel()
    true = np.asarray(f.truth.values, dtype=float).ravel()
    if f.flag is not None:
        imputed = np.asarray(f.flag.transpose(*f.value.dims).values, dtype=float).ravel() == 1
    else:
        imputed = sdev > 0
    if space == "log":
        point = log_point or str(f.value.attrs.get("geogpvae_point_estimate", "median"))
        with np.errstate(divide="ignore", invalid="ignore"):
            mu, sigma = _log_moments(value, sdev, point)
            resid = np.log(true) - mu
    else:
        sigma, resid = sdev, true - value
    ok = imputed & np.isfinite(sigma) & np.isfinite(resid) & (sigma > 0)
    return resid, sigma, ok, space


def _calibration_pairs(
    ds: xr.Dataset, var: str, truth: Any, space: str, log_point: str | None
) -> tuple[np.ndarray, np.ndarray, str]:
    """Predictive std and absolute error at the imputed cells, in the modelling space."""
    resid, sigma, ok, space = _residuals(ds, var, truth, space, log_point)
    return sigma[ok], np.abs(resid[ok]), space


def interval_coverage(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset,
    levels: Sequence[float] = (0.5, 0.8, 0.95),
    *,
    space: str = "auto",
    log_point: str | None = None,
) -> dict[float, float]:
    """Empirical coverage of central Gaussian predictive intervals at the imputed cells.

    A cell is covered at level ``p`` when ``|truth - mean| <= z * sigma``, ``z`` the normal quantile at ``(1 + p) / 2``.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
    truth : xarray.DataArray or xarray.Dataset
    levels : sequence of float
        Nominal levels in (0, 1).
    space : {"auto", "linear", "log"}
        Where the intervals live; ``"auto"``: log space for ``geogpvae_transform = "log"``, where
        ``mu +- z s`` of ``ln v`` is ``[exp(mu - z s), exp(mu + z s)]`` in the original units.
    log_point : {"median", "mean"}, optional
        How ``v``, ``v_std`` give ``mu``, ``s``: ``"median"``: ``v = exp(mu)``,
        ``v_std**2 = exp(2 mu) u (u - 1)``, ``u = exp(s**2)``; ``"mean"``: ``v = exp(mu + s**2 / 2)``,
        ``v_std**2 = v**2 (exp(s**2) - 1)``. Default: the ``geogpvae_point_estimate`` attr, else median.

    Returns
    -------
    dict of float to float
        The fraction covered per level; NaN without an imputed cell with finite truth and positive std.
    """
    sigma, err, _ = _calibration_pairs(ds, var, truth, space, log_point)
    return _coverage(sigma, err, levels)


def _coverage(sigma: np.ndarray, err: np.ndarray, levels: Sequence[float]) -> dict[float, float]:
    out = {}
    for p in levels:
        p = float(p)
        if not 0 < p < 1:
            raise ValueError(f"coverage level {p} is not in (0, 1)")
        z = NormalDist().inv_cdf(0.5 + p / 2.0)
        out[p] = float(np.mean(err <= z * sigma)) if sigma.size else float("nan")
    return out


def uncertainty(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    levels: Sequence[float] = (0.5, 0.8, 0.95),
    space: str = "auto",
    log_point: str | None = None,
    max_scatter: int = 4000,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Calibration of the predictive std: against the error, and interval coverage.

    With ``truth``: ``|error|`` against ``sigma`` at the imputed cells (points, or a hexbin above
    ``max_scatter``) with the calibrated line ``E|error| = sqrt(2/pi) sigma`` and decile means; and the
    empirical against the nominal coverage at ``levels``, as bars. Without: a histogram of the std.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
    truth : xarray.DataArray or xarray.Dataset, optional
    levels : sequence of float
        Nominal coverage levels.
    space : {"auto", "linear", "log"}
        Of the intervals and the error plot (:func:`interval_coverage`); log: errors of ``ln v``.
    log_point : {"median", "mean"}, optional
        See :func:`interval_coverage`.
    max_scatter : int
        Above this number of points, a hexbin replaces the scatter.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Panel gids ``"std-vs-error"`` and ``"coverage"`` (bars ``"empirical"``), or ``"std-histogram"``.
    """
    f = _Field(ds, var, truth)
    name, units = f.name, f.value.attrs.get("units")
    if f.truth is None:
        return _std_histogram(f, var, name, units, figsize)
    sigma, err, used = _calibration_pairs(ds, var, truth, space, log_point)
    hexbin = sigma.size > max_scatter
    # the hexbin's colourbar sits between the panels: wider, to keep its label clear
    default_size = (8.4, 3.4) if hexbin else (7.6, 3.4)
    fig, (ax1, ax2) = _plt().subplots(1, 2, figsize=figsize or default_size,
                                      layout="constrained", width_ratios=(1.25, 1.0))
    if hexbin:
        fig.get_layout_engine().set(wspace=0.06)
    ax1.set_gid("std-vs-error")
    ax2.set_gid("coverage")
    where = _locations(f)
    _std_vs_error(fig, ax1, sigma, err, hexbin, where)
    if used == "log":
        ax1.set_xlabel(f"predictive std of ln({name})")
        ax1.set_ylabel(f"|error| of ln({name})")
    else:
        ax1.set_xlabel(f"predictive std{_units_suffix(units)}")
        ax1.set_ylabel(f"|imputed \u2212 truth|{_units_suffix(units)}")
    ax1.set_title(f"{sigma.size} imputed {where}", fontsize="medium")
    _coverage_bars(ax2, _coverage(sigma, err, levels))
    ax2.set_title("coverage" + (" (in log space)" if used == "log" else ""), fontsize="medium")
    fig.suptitle(f"Calibration of {name}")
    return fig


def _locations(f: _Field) -> str:
    """What the variable's locations are called: "sites" for a survey, "cells" for a grid."""
    dim = f.value.dims[0] if f.value.ndim == 1 else None
    scattered = dim is not None and dim not in f.value.indexes and any(
        c.dims == (dim,) for n, c in f.ds.coords.items() if n != dim)
    return "sites" if scattered else "cells"


def _std_histogram(f: _Field, var: str, name: str, units: Any, figsize) -> Figure:
    """Without the truth: the histogram of the std at the imputed cells."""
    where = _locations(f)
    if f.std is None:
        raise KeyError(f"the Dataset has no std for {var!r}")
    s = np.asarray(f.std.values, dtype=float).ravel()
    if f.flag is not None:
        s = s[np.asarray(f.flag.transpose(*f.std.dims).values, dtype=float).ravel() == 1]
    s = s[np.isfinite(s) & (s > 0)]
    fig, ax = _plt().subplots(figsize=figsize or (4.0, 3.0), layout="constrained")
    ax.set_gid("std-histogram")
    if s.size:
        if is_log_variable(f.value) and s.max() > s.min():
            bins = np.geomspace(s.min(), s.max(), 31)
            ax.set_xscale("log")
        else:
            bins = 30
        ax.hist(s, bins=bins, color="0.45", edgecolor="white", linewidth=0.4)
        med = float(np.median(s))
        ax.axvline(med, color="C1", linewidth=1.2, label=f"median {med:.3g}")
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, f"no imputed {where[:-1]}", transform=ax.transAxes, ha="center")
    ax.set_xlabel(f"predictive std of {name}{_units_suffix(units)}")
    ax.set_ylabel(f"imputed {where}")
    ax.set_title(f"std at {s.size} imputed {where}", fontsize="medium")
    return fig


def _std_vs_error(fig, ax, sigma: np.ndarray, err: np.ndarray, hexbin: bool,
                  where: str = "cells") -> None:
    """|error| against sigma (points or hexbin), the calibrated line and binned means."""
    if not sigma.size:
        return
    xmax = float(np.quantile(sigma, 0.995)) * 1.05
    ymax = float(np.quantile(err, 0.995)) * 1.05
    if not ymax > 0:  # every error 0: keep the axis, and the calibrated line, in view
        ymax = HALF_NORMAL_MEAN * xmax
    if hexbin:
        hb = ax.hexbin(sigma, err, gridsize=45, bins="log", cmap="Greys", mincnt=1,
                       extent=(0, xmax, 0, ymax), linewidths=0)
        hb.set_gid("points")
        _colourbar(fig, hb, ax, f"{where} per bin", "colorbar:count", shrink=0.9, pad=0.02)
    else:
        sc = ax.scatter(sigma, err, s=6, color="0.35", alpha=0.6, linewidths=0)
        sc.set_gid("points")
    xs = np.array([0.0, xmax])
    (line,) = ax.plot(xs, HALF_NORMAL_MEAN * xs, color="C3", linewidth=1.4,
                      label=r"calibrated: $E|e| = \sqrt{2/\pi}\,\sigma \approx 0.8\sigma$")
    line.set_gid("expected")
    nb = min(10, max(1, sigma.size // 20))
    if nb > 1:
        edges = np.quantile(sigma, np.linspace(0, 1, nb + 1))
        which = np.clip(np.searchsorted(edges, sigma, side="right") - 1, 0, nb - 1)
        xm = np.array([sigma[which == i].mean() for i in range(nb) if np.any(which == i)])
        ym = np.array([err[which == i].mean() for i in range(nb) if np.any(which == i)])
        (bm,) = ax.plot(xm, ym, "o-", color="C0", markersize=4, linewidth=1,
                        label="mean |error| per decile of \u03c3")
        bm.set_gid("binned")
    beyond = (sigma > xmax) | (err > ymax)
    if beyond.any():  # the axes end at the 99.5 % quantiles: the rest sit on their edge, counted
        edge = ax.scatter(np.minimum(sigma[beyond], xmax), np.minimum(err[beyond], ymax), s=22,
                          marker="D", facecolors="none", edgecolors="C1", linewidths=1.0, clip_on=False,
                          zorder=4, label=f"{int(beyond.sum())} of {sigma.size} beyond the axes, on the edge")
        edge.set_gid("beyond")
    ax.set_xlim(0, xmax)
    ax.set_ylim(0, ymax)
    ax.legend(fontsize="small", loc="upper left")


def _coverage_bars(ax, cov: dict[float, float]) -> None:
    """Nominal and empirical coverage of each central interval, as paired bars."""
    lv = list(cov)
    x = np.arange(len(lv))
    nominal = np.array([100 * p for p in lv])
    empirical = np.array([100 * cov[p] for p in lv])
    w = 0.38
    bn = ax.bar(x - w / 2, nominal, w, color="0.8", edgecolor="0.5", label="nominal")
    be = ax.bar(x + w / 2, np.nan_to_num(empirical), w, color="C0", label="empirical")
    for b in bn:
        b.set_gid("nominal")
    for b, e in zip(be, empirical, strict=True):
        b.set_gid("empirical")
        ax.annotate(f"{e:.1f}%", (b.get_x() + b.get_width() / 2, b.get_height()),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize="small")
    ax.set_xticks(x, [f"{p:.0f}%" for p in nominal])
    ax.set_xlabel("central interval")
    ax.set_ylabel("coverage [%]")
    ax.set_ylim(0, 128)  # a band above 100 % for the bars' labels and, above them, the legend in one row
    ax.set_yticks(range(0, 101, 20))
    ax.legend(fontsize="small", loc="upper left", ncols=2)


