"""Profiles of one-dimensional fields: a transect, a time series or a well log, with its band."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..fields.cf import log_moments
from .conventions import _Field, _is_vertical, _positive_down, _status
from .style import _plt, _units_suffix, is_log_variable, label_for

__all__ = ["profile"]


def profile(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    level: float = 0.95,
    log: bool | None = None,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """The imputed values of a one-dimensional field along its coordinate, with their band.

    Observed values are dots, imputed ones triangles, joined in the order of the coordinate (the dim's
    own, else the only numeric 1-D one on the dim; positions where it is not numbers or NumPy times).
    The band is the central interval at ``level``, Gaussian in the modelling space (log variables:
    ``exp(mu +- z s)``); ``truth`` is dashed. A vertical coordinate runs down the figure (a well log).

    Parameters
    ----------
    ds : xarray.Dataset
        Output of :func:`geogpvae.impute` or ``GPVAEImputer.predict`` with one dim, e.g. ``(time,)``.
    var : str
    truth : xarray.DataArray or xarray.Dataset, optional
        The true values at the same locations (matched on the coordinate), or a Dataset holding ``var``.
    level : float
        Nominal level of the band, in (0, 1).
    log : bool, optional
        Logarithmic value axis; default: for variables modelled in log space.
    figsize : tuple of float, optional
        In inches; default 7 x 3.2 (3.2 x 6 for a vertical coordinate).

    Returns
    -------
    matplotlib.figure.Figure
        Axes gid ``"profile"``; artists ``"observed"``, ``"imputed"``, ``"band"`` and ``"truth"``.

    Raises
    ------
    ValueError
        ``var`` is not one-dimensional, or ``level`` is not in (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    f = _Field(ds, var, truth)
    if f.value.ndim != 1:
        raise ValueError(f"profile draws a one-dimensional field; {var!r} has dims {f.value.dims}: "
                         "use field_map or layers")
    dim = str(f.value.dims[0])
    along = _along(f.value, dim)
    where, by_position = _positions(f.value, dim, along)
    order = np.argsort(where, kind="stable")  # a transect stored out of order is drawn in order
    where = where[order]
    value = np.asarray(f.value.values, dtype=float)[order]
    low, high = (a[order] for a in _band(f, np.asarray(f.value.values, dtype=float), level))
    observed, imputed = (a[order] for a in _status(f.value, f.std, f.flag)[:2])
    vertical = _is_vertical(dim, along)
    fig = _plt().figure(figsize=figsize or ((3.2, 6.0) if vertical else (7.0, 3.2)), layout="constrained")
    ax = fig.add_subplot(gid="profile")

    def xy(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (b, a) if vertical else (a, b)

    band = ax.fill_betweenx if vertical else ax.fill_between
    band(where, low, high, color="C0", alpha=0.25, linewidth=0, label=f"{level:.0%} interval", gid="band")
    ax.plot(*xy(where, value), color="0.4", linewidth=0.8, zorder=2)
    if f.truth is not None:
        ax.plot(*xy(where, np.asarray(f.truth.values, dtype=float)[order]), "k--", linewidth=1.0, label="truth",
                gid="truth", zorder=3)
    ax.plot(*xy(where[observed], value[observed]), "o", color="C0", markersize=3.5, label="observed",
            gid="observed", zorder=4)
    ax.plot(*xy(where[imputed], value[imputed]), "^", color="C1", markeredgecolor="k", markeredgewidth=0.5,
            markersize=4.5, label="imputed", gid="imputed", zorder=5)
    _label_axes(ax, f, (dim, along), vertical, is_log_variable(f.value) if log is None else bool(log), by_position)
    ax.legend(fontsize="small", loc="best")
    ax.set_title(f.name)
    return fig


def _drawable(c: xr.DataArray) -> bool:
    return np.issubdtype(c.dtype, np.number) or np.issubdtype(c.dtype, np.datetime64)


def _along(da: xr.DataArray, dim: str) -> xr.DataArray | None:
    """The coordinate to draw along: the dim's own, else the only numeric 1-D one on the dim (e.g. ``md``)."""
    if dim in da.coords:
        return da[dim]
    on_dim = [c for c in da.coords.values() if c.dims == (dim,) and _drawable(c)]
    return on_dim[0] if len(on_dim) == 1 else None


def _positions(da: xr.DataArray, dim: str, c: xr.DataArray | None) -> tuple[np.ndarray, bool]:
    """The values of ``c`` if numbers or NumPy times, else positions along ``dim``; and whether positions."""
    if c is not None and _drawable(c):
        return np.asarray(c.values), False
    return np.arange(da.sizes[dim]), True


def _band(f: Any, value: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends of the central interval (the value itself where the std is 0)."""
    if f.std is None:
        return value, value
    sdev = np.asarray(f.std.transpose(*f.value.dims).values, dtype=float)
    z = NormalDist().inv_cdf((1 + level) / 2)
    if not is_log_variable(f.value):
        return value - z * sdev, value + z * sdev
    point = str(f.value.attrs.get("geogpvae_point_estimate", "median"))
    with np.errstate(divide="ignore", invalid="ignore"):
        mu, s = log_moments(value, sdev, point)
        return np.exp(mu - z * s), np.exp(mu + z * s)


def _label_axes(ax: Any, f: Any, place: tuple[str, xr.DataArray | None], vertical: bool, log: bool,
                by_position: bool) -> None:
    dim, along = place
    label = f.name + _units_suffix(f.value.attrs.get("units"))
    value_axis, place_axis = (ax.xaxis, ax.yaxis) if vertical else (ax.yaxis, ax.xaxis)
    value_axis.set_label_text(label)
    place_axis.set_label_text(f"position along {dim}" if by_position or along is None
                              else label_for(along, str(along.name)))
    if log:
        (ax.set_xscale if vertical else ax.set_yscale)("log")
        value_axis.set_minor_formatter(NullFormatter())  # 2 x 10^-1 labels crowd a narrow axis
    if vertical and _positive_down(along):
        ax.invert_yaxis()


# --------------------------------------------------------------------------- profiles drawn by field_map
def _as_profile(ds: xr.Dataset, var: str, truth, isel, log, figsize) -> Figure:
    """A 1-D field (no sites) drawn by :func:`profile`; it has no dim to slice."""
    if isel:
        raise ValueError(f"isel: {var!r} is a 1-D field, drawn as a profile: it has no dims to slice")
    return profile(ds, var, truth, log=log, figsize=figsize)
