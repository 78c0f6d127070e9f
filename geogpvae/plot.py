"""Figures for imputed fields: layers, maps, calibration and training curves.

Every public plotting function takes the Dataset that :func:`geogpvae.impute` returns and
gives back a :class:`matplotlib.figure.Figure`. None of them calls ``plt.show()``, and
none of them touches pyplot's global state beyond creating the figure. They all rely on
these conventions for each imputed variable ``v``:

``v``
    The field with its holes filled. It is NaN only outside an optional domain mask. Its
    attrs give ``units`` and ``long_name``. ``geogpvae_transform = "log"`` marks a
    variable that was modelled in log space, such as permeability.
``v_std``
    The predictive standard deviation, in the same units. It is 0 at observed cells and
    NaN outside the domain.
``v_imputed``
    An int8 flag: 0 for observed, 1 for imputed, -127 outside the domain. It may have
    been decoded to float with NaN outside the domain. It may also be missing, as in the
    output of ``GPVAEImputer.predict``: a positive ``v_std`` then marks a value as imputed
    (predicted), a ``v_std`` of 0 as observed.

The names of ``v_std`` and ``v_imputed`` come from ``ancillary_variables`` when that is
present, and otherwise from the suffixes.

Units are typeset from their CF/UDUNITS strings (``"mg kg-1"`` reads mg kg⁻¹, see
:func:`pretty_units`).

Panels, colourbars and the data artists carry a ``gid`` (``ax.get_gid()``), so scripts
and tests can find them: ``"observed"``, ``"imputed"``, ``"truth"``, ``"std"`` and
``"error"`` for the panels of :func:`layers` and :func:`field_map`.

cartopy is optional. It is imported only when :func:`field_map` draws lon/lat data, and
never when this module is imported.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import matplotlib
import numpy as np
import xarray as xr
from matplotlib import colors as mcolors
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

__all__ = [
    "field_map",
    "find_map_shapefile",
    "interval_coverage",
    "is_log_variable",
    "label_for",
    "layers",
    "make_norm",
    "map_data_dirs",
    "pretty_units",
    "robust_limits",
    "training_history",
    "uncertainty",
]

#: Colour behind masked cells (holes, outside the domain, std at observed cells).
MASKED_COLOUR = "0.86"
#: Default colour map for values.
VALUE_CMAP = "viridis"
#: Default colour map for std and |error|: magma without its palest 15 %, whose near-white
#: top end could be taken for the grey of the cells without a value.
UNCERTAINTY_CMAP = mcolors.ListedColormap(
    matplotlib.colormaps["magma"](np.linspace(0.0, 0.85, 256)), name="magma_no_white"
)
#: E|e| for e ~ N(0, sigma^2) is sqrt(2/pi) sigma, about 0.80 sigma.
HALF_NORMAL_MEAN = math.sqrt(2.0 / math.pi)

_LON_NAMES = ("lon", "longitude", "nav_lon")
_LAT_NAMES = ("lat", "latitude", "nav_lat")
_X_NAMES = ("x", "easting", "xc")
_Y_NAMES = ("y", "northing", "yc")
_Z_NAMES = ("z", "depth", "layer", "level", "lev")

#: System folders that may hold cartopy's data besides ``cartopy.config``; Debian's
#: ``python3-cartopy`` links its ``cartopy/data`` to ``/usr/share/cartopy/data``.
_SYSTEM_DATA_DIRS: tuple[Path, ...] = (
    Path("/usr/share/cartopy"),
    Path("/usr/share/cartopy/data"),
    Path("/usr/local/share/cartopy"),
)

_WARNED: set[str] = set()
_GEOMETRY_CACHE: dict[str, list[Any]] = {}


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------


def _warn_once(key: str, message: str, stacklevel: int = 4) -> None:
    """Emit ``message`` as a UserWarning, at most once per process for ``key``.

    The default ``stacklevel`` points at the caller of a public function that called a
    helper that called this.
    """
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _plt():
    import matplotlib.pyplot as plt

    return plt


def is_log_variable(da: xr.DataArray) -> bool:
    """Whether a variable was modelled in log space.

    Parameters
    ----------
    da : xarray.DataArray
        The imputed variable.

    Returns
    -------
    bool
        True when ``da.attrs["geogpvae_transform"]`` is ``"log"`` (any case).
    """
    return str(da.attrs.get("geogpvae_transform", "")).strip().lower() == "log"


def label_for(da: xr.DataArray, name: str | None = None) -> str:
    """A colourbar or axis label, ``"long name [units]"``, built from attrs.

    Parameters
    ----------
    da : xarray.DataArray
        Variable or coordinate.
    name : str, optional
        Fallback when the variable has neither ``long_name`` nor ``standard_name``.
        Defaults to ``da.name``.

    Returns
    -------
    str
        The label. The units part is left out when ``units`` is missing or empty.
    """
    attrs = da.attrs
    text = attrs.get("long_name") or attrs.get("standard_name") or name or da.name or ""
    text = str(text).replace("_", " ") if not attrs.get("long_name") else str(text)
    shown = pretty_units(attrs.get("units"))
    if shown and (f"({shown})" in text or f"[{shown}]" in text):
        return text  # the name already says its units, e.g. "permeability (mD)"
    return text + _units_suffix(attrs.get("units"))


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076"
                                           "\u2077\u2078\u2079")
_NAMED_UNITS = {
    "degrees_east": "\u00b0E", "degree_east": "\u00b0E", "degrees_e": "\u00b0E",
    "degree_e": "\u00b0E", "degrees_north": "\u00b0N", "degree_north": "\u00b0N",
    "degrees_n": "\u00b0N", "degree_n": "\u00b0N", "degrees": "\u00b0", "degree": "\u00b0",
    "percent": "%",
    "9.869233e-16 m2": "mD", "9.869233e-16 m^2": "mD", "9.869233e-16 m**2": "mD",
}


def pretty_units(units: Any) -> str:
    """Units as they should read in a figure, from a CF/UDUNITS string.

    Exponents become superscripts (``"mg kg-1"`` reads mg kg⁻¹, ``"W m-2"`` W m⁻²,
    ``"m2 s-1"`` m² s⁻¹), ``"degrees_east"`` and ``"degrees_north"`` become °E and °N,
    ``"**"`` or ``"^"`` exponents are read as well, and one millidarcy written for UDUNITS
    (``"9.869233e-16 m2"``) reads mD. Anything else is kept as it is.

    Parameters
    ----------
    units : str or None
        The ``units`` attribute.

    Returns
    -------
    str
        The text, or ``""`` for a missing, empty or dimensionless (``"1"``) unit.
    """
    if units is None:
        return ""
    text = str(units).strip()
    if text in ("", "1"):
        return ""
    if text.lower() in _NAMED_UNITS:
        return _NAMED_UNITS[text.lower()]
    if " since " in text:  # a time reference: not a unit to typeset
        return text
    words = []
    for word in text.split():
        m = re.fullmatch(r"([A-Za-z\u00b0\u00b5\u03bc%]+)(?:\*\*|\^)?(-?[0-9]+)", word)
        words.append(m.group(1) + m.group(2).translate(_SUPERSCRIPT) if m else word)
    return " ".join(words)


def _units_suffix(units: Any) -> str:
    """``" [mg kg⁻¹]"`` for a label, or ``""`` without units."""
    text = pretty_units(units)
    return f" [{text}]" if text else ""


def robust_limits(
    *arrays: Any,
    percentiles: tuple[float, float] = (1.0, 99.0),
    log: bool = False,
    vmin: float | None = None,
    vmax: float | None = None,
) -> tuple[float, float]:
    """Colour limits from robust percentiles of the finite values of several arrays.

    Parameters
    ----------
    *arrays : array_like
        Arrays (NumPy, masked, or xarray) whose values the limits must cover. Masked
        and non-finite entries are ignored. With ``log=True``, so are non-positive ones.
    percentiles : tuple of float
        Lower and upper percentiles, in percent. ``(0, 100)`` gives the full range.
    log : bool
        Limits for a logarithmic norm: the percentiles are taken of ``log10`` of the
        positive values, and the result is positive.
    vmin, vmax : float, optional
        Fixed limits that override the computed ones.

    Returns
    -------
    tuple of float
        ``(vmin, vmax)`` with ``vmin < vmax``. Without any usable value this is
        ``(0, 1)``, or ``(1, 10)`` for log limits.
    """
    parts = []
    for a in arrays:
        if a is None:
            continue
        v = np.ma.filled(np.ma.asarray(getattr(a, "values", a), dtype=float), np.nan).ravel()
        v = v[np.isfinite(v)]
        if log:
            v = v[v > 0]
        parts.append(v)
    values = np.concatenate(parts) if parts else np.empty(0)
    if values.size > 2_000_000:  # percentiles of a regular thinning are plenty
        values = values[:: values.size // 1_000_000]
    if values.size:
        data = np.log10(values) if log else values
        lo, hi = np.percentile(data, percentiles)
        if log:
            lo, hi = 10.0**lo, 10.0**hi
    else:
        lo, hi = (1.0, 10.0) if log else (0.0, 1.0)
    lo = float(lo if vmin is None else vmin)
    hi = float(hi if vmax is None else vmax)
    if log and lo <= 0:
        lo = hi / 1e3 if hi > 0 else 1.0
        hi = max(hi, lo * 10)
    if not hi > lo:
        if log:
            lo, hi = lo / 2.0, lo * 2.0
        else:
            pad = abs(lo) * 0.05 or 0.5
            lo, hi = lo - pad, hi + pad
    return lo, hi


def make_norm(vmin: float, vmax: float, log: bool = False) -> mcolors.Normalize:
    """A colour norm for ``[vmin, vmax]``.

    Parameters
    ----------
    vmin, vmax : float
        Limits. For a log norm, ``vmin`` must be positive. A non-positive one is replaced
        by ``vmax / 1000``.
    log : bool
        Return a :class:`~matplotlib.colors.LogNorm` instead of a linear
        :class:`~matplotlib.colors.Normalize`.

    Returns
    -------
    matplotlib.colors.Normalize
        The norm, clipping nothing: values outside the limits take the colour map's
        under and over colours.
    """
    if log:
        if not vmin > 0:
            vmin = vmax / 1e3 if vmax > 0 else 1.0
        if not vmax > vmin:
            vmax = vmin * 10.0
        return mcolors.LogNorm(vmin=vmin, vmax=vmax)
    return mcolors.Normalize(vmin=vmin, vmax=vmax)


def _cmap(name: Any) -> mcolors.Colormap:
    cmap = matplotlib.colormaps[name] if isinstance(name, str) else name
    # masked cells are transparent: the grey domain drawn below shows through
    return cmap.with_extremes(bad=(0.0, 0.0, 0.0, 0.0))


def _draw_domain(ax, hedges, vedges, inside: np.ndarray, **kwargs) -> None:
    """Grey under the cells inside the domain; outside stays the axes colour (white).

    Masked cells of the data drawn on top are transparent, so holes (and observed cells
    in the std panels) show grey while cells outside the domain show white.
    """
    grey = mcolors.ListedColormap([MASKED_COLOUR])
    under = ax.pcolormesh(hedges, vedges, np.ma.masked_where(~inside, np.zeros(inside.shape)),
                          cmap=grey, vmin=0.0, vmax=1.0, shading="flat", rasterized=True,
                          zorder=0.5, **kwargs)
    under.set_gid("domain")


def _outline(ax, hedges, vedges, mask: np.ndarray, **kwargs) -> None:
    """Outline the cells where ``mask`` is set along the cell edges (a LineCollection)."""
    from matplotlib.collections import LineCollection

    m = np.pad(np.asarray(mask, dtype=bool), 1)
    segments = []
    rows, cols = np.nonzero(m[1:-1, 1:] != m[1:-1, :-1])  # vertical edges, at hedges[cols]
    for i, j in zip(rows, cols, strict=True):
        segments.append([(hedges[j], vedges[i]), (hedges[j], vedges[i + 1])])
    rows, cols = np.nonzero(m[1:, 1:-1] != m[:-1, 1:-1])  # horizontal edges, at vedges[rows]
    for i, j in zip(rows, cols, strict=True):
        segments.append([(hedges[j], vedges[i]), (hedges[j + 1], vedges[i])])
    if segments:
        lc = LineCollection(segments, colors="k", linewidths=0.45, alpha=0.8, zorder=3,
                            **kwargs)
        lc.set_gid("outline")
        ax.add_collection(lc, autolim=False)


def _masked(a: Any) -> np.ma.MaskedArray:
    return np.ma.masked_invalid(np.asarray(getattr(a, "values", a), dtype=float))


def _edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges from 1-D cell centres (ascending or descending)."""
    c = np.asarray(centres, dtype=float)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = 0.5 * (c[1:] + c[:-1])
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def _coord_note(name: str, coord: xr.DataArray | None, value: Any) -> str:
    """``"z = 4.2 m"``: a coordinate value, rounded for a title, with its units."""
    if coord is not None and name == "layer":
        return f"layer {_fmt_value(value)}"
    units = pretty_units(coord.attrs.get("units")) if coord is not None else ""
    text = _fmt_value(value, _spacing(coord))
    return f"{name} = {text}" + (f" {units}" if units else "")


def _scalar_notes(da: xr.DataArray) -> list[str]:
    """Notes for the scalar coordinates of ``da``, such as a layer already selected.

    A ``layer`` coordinate comes first and reads ``"layer 21"``.
    """
    scalars = [(str(n), c) for n, c in da.coords.items() if c.ndim == 0]
    scalars.sort(key=lambda item: item[0] != "layer")
    return [_coord_note(n, c, c.values) for n, c in scalars]


def _spacing(coord: xr.DataArray | None) -> float | None:
    """The smallest step between the distinct values of a numeric 1-D coordinate."""
    if coord is None or coord.ndim != 1 or coord.size < 2:
        return None
    values = np.asarray(coord.values)
    if not np.issubdtype(values.dtype, np.number):
        return None
    steps = np.diff(np.unique(values[np.isfinite(values)].astype(float)))
    steps = steps[steps > 0]
    return float(steps.min()) if steps.size else None


def _fmt_value(value: Any, step: float | None = None, digits: int = 3) -> str:
    """A coordinate value for a title: ``digits`` significant digits, never an exponent.

    More decimals are kept where ``step``, the spacing of the coordinate, needs them to
    tell neighbouring values apart (``1500.3`` and ``1500.6`` rather than ``1500`` twice).
    Integers are printed whole, and trailing zeros are dropped.
    """
    value = np.asarray(value)
    if np.issubdtype(value.dtype, np.datetime64):
        return str(np.datetime_as_string(value, unit="D"))
    if np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.bool_):
        return str(int(value))
    if np.issubdtype(value.dtype, np.number):
        x = float(value)
        if not math.isfinite(x):
            return str(x)
        if x == int(x) and abs(x) < 1e15:
            return str(int(x))
        decimals = digits - 1 - math.floor(math.log10(abs(x))) if x else 0
        if step is not None and step > 0:
            decimals = max(decimals, math.ceil(-math.log10(step) - 1e-9))
        decimals = int(min(max(decimals, 0), 12))
        text = f"{x:.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(value.item() if value.ndim == 0 else value)


def _layer_note(da: xr.DataArray, dim: str, k: int, *, number: bool) -> str:
    """``"layer 21 (z = 12.5 m)"``: the layer at index ``k`` along ``dim``, for a title.

    The layer number is the value of a ``layer`` coordinate along ``dim`` when there is
    one, and otherwise ``k + 1``; it is given only when ``number`` is set (a horizontal
    layer). The coordinate value of ``dim`` follows in brackets.
    """
    coord = _coord(da, dim)
    note = _coord_note(dim, coord, coord.values[k]) if coord is not None and coord.ndim == 1 \
        else ""
    if not number:
        return note or f"{dim} index {k}"
    layer = da.coords.get("layer")
    if layer is not None and layer.dims == (dim,):
        head = f"layer {_fmt_value(layer.values[k])}"
        if dim == "layer":  # the dim itself is the layer number: nothing to add
            return head
    else:
        head = f"layer {k + 1}"
    return f"{head} ({note})" if note else head


# --------------------------------------------------------------------------------------
# reading the conventions
# --------------------------------------------------------------------------------------


class _Field:
    """The value, std, flag and truth of one variable, as DataArrays."""

    def __init__(self, ds: xr.Dataset, var: str, truth: Any = None) -> None:
        if var not in ds.data_vars and var not in ds.variables:
            raise KeyError(f"{var!r} is not a variable of the Dataset")
        self.ds = ds
        self.var = var
        self.value = ds[var]
        anc = str(self.value.attrs.get("ancillary_variables", "")).split()
        std_name = next((n for n in anc if n.endswith("_std")), f"{var}_std")
        flag_name = next((n for n in anc if n.endswith("_imputed")), f"{var}_imputed")
        self.std = ds[std_name] if std_name in ds.variables else None
        self.flag = ds[flag_name] if flag_name in ds.variables else None
        self.truth = _truth_array(truth, var, self.value)



def _status(
    value: Any, std: Any = None, flag: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean masks ``(observed, imputed, inside)`` of one variable, on the same shape.

    With a flag, these are ``flag == 0``, ``flag == 1`` and either of the two. Without
    one, as in the output of ``GPVAEImputer.predict``, which has ``v`` and ``v_std``
    only, a cell with a value is imputed (predicted) where its std is positive and
    observed where the std is 0, the way :func:`geogpvae.impute` writes them; the domain
    is where the value is finite. Without a std either, every finite value counts as
    observed.
    """
    v = np.asarray(getattr(value, "values", value), dtype=float)
    if flag is not None:
        fl = np.asarray(getattr(flag, "values", flag), dtype=float)
        observed, imputed = fl == 0, fl == 1
        return observed, imputed, observed | imputed
    inside = np.isfinite(v)
    if std is None:
        return inside, np.zeros(v.shape, dtype=bool), inside
    with np.errstate(invalid="ignore"):
        positive = np.asarray(getattr(std, "values", std), dtype=float) > 0
    imputed = inside & positive
    return inside & ~imputed, imputed, inside


def _truth_array(truth: Any, var: str, like: xr.DataArray) -> xr.DataArray | None:
    if truth is None:
        return None
    if isinstance(truth, xr.Dataset):
        if var not in truth.variables:
            raise KeyError(f"truth Dataset has no variable {var!r}")
        truth = truth[var]
    if not isinstance(truth, xr.DataArray):
        truth = xr.DataArray(np.asarray(truth), dims=like.dims)
    if set(truth.dims) != set(like.dims):
        raise ValueError(f"truth has dims {truth.dims}, the field has {like.dims}")
    truth = truth.transpose(*like.dims)
    if truth.shape != like.shape:
        raise ValueError(f"truth has shape {truth.shape}, the field has {like.shape}")
    # same grid: take the field's coordinates so that positional selection agrees
    return truth.assign_coords({d: like[d] for d in like.dims if d in like.coords})


def _is_lon(name: str, c: xr.DataArray | None) -> bool:
    attrs = c.attrs if c is not None else {}
    units = str(attrs.get("units", "")).lower()
    return (
        name.lower() in _LON_NAMES
        or attrs.get("standard_name") == "longitude"
        or units in ("degrees_east", "degree_east", "degrees_e", "degree_e")
    )


def _is_lat(name: str, c: xr.DataArray | None) -> bool:
    attrs = c.attrs if c is not None else {}
    units = str(attrs.get("units", "")).lower()
    return (
        name.lower() in _LAT_NAMES
        or attrs.get("standard_name") == "latitude"
        or units in ("degrees_north", "degree_north", "degrees_n", "degree_n")
    )


def _is_vertical(name: str, c: xr.DataArray | None) -> bool:
    attrs = c.attrs if c is not None else {}
    return (
        name.lower() in _Z_NAMES
        or str(attrs.get("positive", "")).lower() in ("up", "down")
        or str(attrs.get("axis", "")).upper() == "Z"
    )


def _is_x(name: str, c: xr.DataArray | None) -> bool:
    attrs = c.attrs if c is not None else {}
    return (
        name.lower() in _X_NAMES
        or str(attrs.get("axis", "")).upper() == "X"
        or attrs.get("standard_name") == "projection_x_coordinate"
    )


def _is_y(name: str, c: xr.DataArray | None) -> bool:
    attrs = c.attrs if c is not None else {}
    return (
        name.lower() in _Y_NAMES
        or str(attrs.get("axis", "")).upper() == "Y"
        or attrs.get("standard_name") == "projection_y_coordinate"
    )


def _coord(da: xr.DataArray, dim: str) -> xr.DataArray | None:
    return da[dim] if dim in da.coords else None


def _orient(da: xr.DataArray) -> tuple[str, str]:
    """Which of the two dims of ``da`` goes across (first) and which goes up (second)."""
    if da.ndim != 2:
        raise ValueError(f"expected a 2-D slice, got dims {da.dims}")

    def up_score(dim: str) -> int:
        c = _coord(da, dim)
        if _is_vertical(dim, c):
            return 3
        if _is_y(dim, c) or _is_lat(dim, c):
            return 2
        if _is_x(dim, c) or _is_lon(dim, c):
            return 0
        return 1

    d0, d1 = da.dims
    s0, s1 = up_score(str(d0)), up_score(str(d1))
    return (str(d1), str(d0)) if s0 >= s1 else (str(d0), str(d1))


def _positive_down(c: xr.DataArray | None) -> bool:
    return c is not None and str(c.attrs.get("positive", "")).lower() == "down"


def _centres(da: xr.DataArray, dim: str) -> np.ndarray:
    c = _coord(da, dim)
    if c is None:
        return np.arange(da.sizes[dim], dtype=float)
    values = np.asarray(c.values)
    if not np.issubdtype(values.dtype, np.number):
        return np.arange(da.sizes[dim], dtype=float)
    return values.astype(float)


def _axis_label(da: xr.DataArray, dim: str) -> str:
    c = _coord(da, dim)
    return label_for(c, dim) if c is not None else dim


def _short_label(da: xr.DataArray, dim: str) -> str:
    """``"x [m]"``: the dim's name and units, for panels too narrow for the long name."""
    c = _coord(da, dim)
    return dim + (_units_suffix(c.attrs.get("units")) if c is not None else "")


class _Metrics:
    """Sizes, in inches, of the text and spacing around a panel, read from rcParams.

    These let the figure functions size a figure before anything is drawn; running the
    layout engine to measure would cost as much as drawing the figure once more. The
    layouts here are "compressed" wherever the panels have a fixed aspect, so what these
    estimates miss ends up as a sliver of white at the figure's edges, never as a gap
    between the panels or as text running into text.
    """

    def __init__(self) -> None:
        from matplotlib.font_manager import FontProperties

        rc = matplotlib.rcParams

        def inches(size: Any) -> float:
            return FontProperties(size=size).get_size_in_points() / 72.0

        self.font = inches("medium")  # panel titles
        self.big = inches(rc["figure.titlesize"])
        self.tick_font = inches(rc["xtick.labelsize"])
        self.small = inches("small")
        self.label_font = inches(rc["axes.labelsize"])
        self.label_size = rc["axes.labelsize"]
        self.h_pad = float(rc["figure.constrained_layout.h_pad"])
        self.w_pad = float(rc["figure.constrained_layout.w_pad"])
        self.tick_mark = float(rc["xtick.major.size"]) / 72.0
        self.tick = (float(rc["xtick.major.size"]) + float(rc["xtick.major.pad"])) / 72.0
        self.label_pad = float(rc["axes.labelpad"]) / 72.0
        self.title_pad = float(rc["axes.titlepad"]) / 72.0

    @staticmethod
    def lines(font: float, n: int = 1) -> float:
        """Height of ``n`` lines of text."""
        return font * (1.05 + 1.2 * (max(n, 1) - 1))

    def title(self, n: int) -> float:
        """A panel title of ``n`` lines and its pad (less the descent inside the text)."""
        return self.lines(self.font, n) + self.title_pad - 0.25 * self.font

    def x_ticks(self, font: float | None = None) -> float:
        """Tick marks and tick labels under a panel."""
        return self.tick + self.lines(self.tick_font if font is None else font)

    def x_label(self) -> float:
        return self.label_pad + self.lines(self.label_font)

    def digits(self, n: int, font: float | None = None) -> float:
        """Width of ``n`` digits."""
        return 0.62 * n * (self.tick_font if font is None else font)

    def text_width(self, text: str) -> float:
        """Width of an axis label."""
        from matplotlib.font_manager import FontProperties
        from matplotlib.textpath import TextPath

        path = TextPath((0.0, 0.0), text, prop=FontProperties(size=self.label_size))
        return float(path.get_extents().width) / 72.0


def _tick_chars(lo: float, hi: float) -> int:
    """How many characters the longest tick label of an axis from ``lo`` to ``hi`` has."""
    from matplotlib.ticker import MaxNLocator

    if not (np.isfinite(lo) and np.isfinite(hi)) or hi == lo:
        return 3
    lo, hi = min(lo, hi), max(lo, hi)
    ticks = MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    ticks = ticks[(ticks >= lo - 1e-9 * (hi - lo)) & (ticks <= hi + 1e-9 * (hi - lo))]
    if ticks.size == 0:
        return 3
    step = float(np.min(np.diff(ticks))) if ticks.size > 1 else abs(hi - lo)
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return max(len(f"{t:.{decimals}f}") for t in ticks)


def _choose_label(label, short: str, room: float, metrics: _Metrics) -> None:
    """Give ``label`` (a Text) its ``short`` text when its own is longer than ``room``."""
    text = label.get_text()
    if text and text != short and metrics.text_width(text) > room:
        label.set_text(short)


def _units_of(da: xr.DataArray, dim: str) -> str | None:
    c = _coord(da, dim)
    if c is None:
        return None
    units = c.attrs.get("units")
    return str(units) if units not in (None, "") else None


# --------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------


def layers(
    ds: xr.Dataset,
    var: str,
    layer: int | Sequence[int] = 0,
    axis: str = "z",
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    log: bool | None = None,
    cmap: Any = None,
    std_cmap: Any = UNCERTAINTY_CMAP,
    percentiles: tuple[float, float] = (1.0, 99.0),
    share: str = "all",
    aspect: str | float | None = "auto",
    panel_width: float = 2.1,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Layers of a 3-D field: observed, imputed, std and, with ``truth``, truth and error.

    Each row is one layer. Its panels, left to right, are:

    - the observed values, with the holes left as holes (grey);
    - the imputed field;
    - the truth, when ``truth`` is given;
    - the predictive standard deviation at the imputed cells;
    - ``|imputed - truth|`` at the imputed cells, when ``truth`` is given.

    Cells without a value are grey: the holes in the observed panel, and the observed
    cells in the std and error panels. Cells outside the domain are white. Without a
    ``v_imputed`` flag, a cell counts as imputed where its std is positive and as
    observed where it is 0, as :func:`geogpvae.impute` writes them.

    The value panels share one norm, and so do the std and error panels. Both are in the
    units of the variable, so the std and the error can be compared by colour. A
    log-marked variable gets a log norm on both.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
        Name of the imputed variable.
    layer : int or sequence of int
        Layer index or indices along ``axis``, 0-based as in Python. Negative indices count
        from the end. The titles of horizontal layers give the layer number and the
        coordinate value, such as "layer 21 (z = 12.5 m)". The number is the value of a
        ``layer`` coordinate along ``axis`` when the Dataset has one (SPE10 loaded with
        ``downsample=2`` keeps every other layer, so index 10 is layer 21), and otherwise
        the 1-based index, as geologists count. Vertical sections (``axis`` ``"x"`` or
        ``"y"``) are titled with the coordinate value only. Values are rounded to 3
        significant digits, or more where neighbouring values need them to differ.
    axis : str
        Dimension to slice along. The default ``"z"`` gives horizontal layers, and ``"x"``
        or ``"y"`` give vertical sections. A variable with 2 dims, neither of them
        ``axis``, is drawn as one row without a layer number.
    truth : xarray.DataArray or xarray.Dataset, optional
        The complete field on the same grid, or a Dataset that holds ``var``.
    log : bool, optional
        Use a log colour norm. The default follows ``geogpvae_transform == "log"``.
    cmap, std_cmap : str or Colormap, optional
        Colour maps for the values and for std and error.
    percentiles : tuple of float
        Robust colour limits, in percent of the finite values drawn.
    share : {"all", "row"}
        Share the colour limits across all rows, with one pair of colourbars below the
        panels, or within each row, with colourbars beside each row.
    aspect : "auto", "equal", float or None
        Axes aspect. With ``"auto"``, the aspect is equal when both axes have the same
        units and neither of them is vertical. A vertical section (along ``x`` or ``y``)
        keeps a free aspect, because vertical exaggeration is the norm there.
    panel_width : float
        Width of one panel, in inches.
    figsize : tuple of float, optional
        Figure size in inches. It overrides the size computed from ``panel_width``. By
        default, panels with a fixed aspect get the height that the aspect asks for, with
        no space to spare between the rows, their titles and the colourbars.

    Returns
    -------
    matplotlib.figure.Figure
        The figure. The panels carry gids ``"observed"``, ``"imputed"``, ``"truth"``,
        ``"std"`` and ``"error"``, and their QuadMeshes the same gids. Only the bottom row
        has x labels and only the first column y labels: a coordinate's ``long_name``
        with its units, or its name with its units (``"x [m]"``) where the long one would
        be wider than the panel.

    Notes
    -----
    The cells are drawn with ``pcolormesh`` on cell edges computed from the coordinates.
    Descending coordinates therefore land where they belong: ``x`` increases to the right
    and ``y`` upwards. A coordinate with ``positive: "down"`` (depth) increases downwards.
    """
    plt = _plt()
    if share not in ("all", "row"):
        raise ValueError("share must be 'all' or 'row'")
    f = _Field(ds, var, truth)
    da = f.value
    if axis in da.dims:
        n = da.sizes[axis]
        requested = [layer] if np.ndim(layer) == 0 else list(layer)  # type: ignore[arg-type]
        if not requested:
            raise ValueError("no layer requested")
        indices = []
        for k in requested:
            k = int(k)
            if not -n <= k < n:
                raise IndexError(f"layer {k} out of range for {axis!r} of size {n}")
            indices.append(k % n)
        selections: list[dict[str, int]] = [{axis: k} for k in indices]
    elif da.ndim == 2:
        selections = [{}]
    else:
        raise ValueError(f"{var!r} has dims {da.dims}; axis {axis!r} is not one of them")
    use_log = is_log_variable(da) if log is None else bool(log)
    with_truth = f.truth is not None

    rows = []
    for sel in selections:
        v = da.isel(sel)
        if v.ndim != 2:
            raise ValueError(f"a layer of {var!r} has dims {v.dims}; expected 2")
        hdim, vdim = _orient(v)
        order = (vdim, hdim)
        v = v.transpose(*order)
        flag = f.flag.isel(sel).transpose(*order) if f.flag is not None else None
        std = f.std.isel(sel).transpose(*order) if f.std is not None else None
        observed, imputed, inside = _status(v, std, flag)
        if flag is None and std is None:
            imputed = None  # nothing tells the cells apart: no mask on the error panel
        value = _masked(v)
        panels: dict[str, np.ma.MaskedArray] = {
            "observed": np.ma.masked_where(~observed, value),
            "imputed": value,
        }
        if with_truth:
            t = _masked(f.truth.isel(sel).transpose(*order))
            panels["truth"] = t
        if std is not None:
            s = _masked(std)
            panels["std"] = np.ma.masked_where(~imputed, s) if imputed is not None else s
        if with_truth:
            err = np.ma.abs(value - t)
            panels["error"] = np.ma.masked_where(~imputed, err) if imputed is not None else err
        rows.append((sel, v, hdim, vdim, panels, inside))

    value_keys = [k for k in ("observed", "imputed", "truth") if k in rows[0][4]]
    unc_keys = [k for k in ("std", "error") if k in rows[0][4]]
    keys = value_keys + unc_keys
    value_cmap = _cmap(cmap or VALUE_CMAP)
    unc_cmap = _cmap(std_cmap)

    def norms(row_panels: Iterable[dict[str, np.ma.MaskedArray]]):
        row_panels = list(row_panels)
        vn = make_norm(
            *robust_limits(
                *[p[k] for p in row_panels for k in value_keys],
                percentiles=percentiles,
                log=use_log,
            ),
            log=use_log,
        )
        un = None
        if unc_keys:
            lo, hi = robust_limits(
                *[p[k] for p in row_panels for k in unc_keys],
                percentiles=percentiles,
                log=use_log,
            )
            un = make_norm(lo if use_log else 0.0, hi, log=use_log)
        return vn, un

    # geometry of one panel
    _, v0, hdim0, vdim0, _, _ = rows[0]
    hedges0, vedges0 = _edges(_centres(v0, hdim0)), _edges(_centres(v0, vdim0))
    hunits, vunits = _units_of(v0, hdim0), _units_of(v0, vdim0)
    vertical = _is_vertical(vdim0, _coord(v0, vdim0)) or _is_vertical(hdim0, _coord(v0, hdim0))
    if aspect == "auto":
        aspect = "equal" if (hunits is not None and hunits == vunits and not vertical) else None
    hext = float(np.ptp(hedges0)) or 1.0
    vext = float(np.ptp(vedges0)) or 1.0
    if aspect == "equal":
        box = vext / hext
    elif isinstance(aspect, (int, float)):
        box = aspect * vext / hext
    else:
        box = 0.75
    box = float(np.clip(box, 0.35, 2.6))
    ncols, nrows = len(keys), len(rows)
    nv, nu = len(value_keys), len(unc_keys)
    wheres = []
    for sel, v, *_ in rows:
        if sel:
            (dim, k), = sel.items()
            wheres.append(_layer_note(da, dim, k, number=_is_vertical(dim, _coord(da, dim))))
        else:
            wheres.append(", ".join(_scalar_notes(v)))

    # the size of the figure and of its panels, estimated from the text around them
    mt = _Metrics()
    title = mt.title(2 if any(wheres) else 1)
    left = (mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick
            + mt.digits(_tick_chars(float(vedges0.min()), float(vedges0.max()))))
    right = mt.w_pad + 0.03
    gap = 2 * mt.w_pad + mt.tick_mark  # between panels, which share their y tick labels
    between = title + mt.tick_mark + 2 * mt.h_pad + 0.02  # between rows
    cbar_pad = 0.1  # inches
    ncb = 2 if unc_keys else 1
    if share == "all":
        width = panel_width * ncols + 0.8 if figsize is None else float(figsize[0])
        w = (width - left - right - (ncols - 1) * gap) / ncols
    else:  # colourbars right of each group: pad, bar (its height / 18), ticks and label
        fixed = cbar_pad + mt.tick + mt.digits(3) + mt.x_label() + mt.w_pad
        width = panel_width * ncols + 0.8 + 1.1 if figsize is None else float(figsize[0])
        w = ((width - left - right - (ncols - ncb) * gap - ncb * fixed)
             / (ncols + ncb * 0.9 * box / 18.0))
    w = max(w, 0.3)

    def bottom(w: float) -> float:
        if share == "all":  # ticks and label, under the panels and under the colourbars
            bar = 0.9 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 25.0
            return mt.h_pad + 2 * (mt.x_ticks() + mt.x_label()) + cbar_pad + bar
        return mt.h_pad + mt.x_ticks() + mt.x_label()

    if figsize is None:
        h = w * box
        figsize = (width, mt.h_pad + title + nrows * h + (nrows - 1) * between + bottom(w))
    else:
        h = (float(figsize[1]) - mt.h_pad - title - (nrows - 1) * between - bottom(w)) / nrows
        h = max(h, 0.3)
        if aspect is not None:  # the aspect shrinks the panels to fit
            w, h = min(w, h / box), min(h, w * box)
    # a colourbar's pad is a fraction of the extent of its panels
    if share == "all":
        rows_h = nrows * h + (nrows - 1) * between
        cbar_pads = {"value": cbar_pad / rows_h, "uncertainty": cbar_pad / rows_h}
    else:
        cbar_pads = {"value": cbar_pad / (nv * w + (nv - 1) * gap),
                     "uncertainty": cbar_pad / max(nu * w + (nu - 1) * gap, 0.1)}
    fig, axes = plt.subplots(
        nrows, ncols, figsize=figsize, squeeze=False, sharex=True, sharey=True,
        # "compressed" pulls panels of a fixed aspect, their titles and colourbars together
        layout="compressed" if aspect is not None else "constrained",
    )
    titles = {
        "observed": "observed",
        "imputed": "imputed",
        "truth": "truth",
        "std": "predictive std",
        "error": "|imputed \u2212 truth|",
    }
    all_norms = norms(r[4] for r in rows) if share == "all" else None
    meshes: dict[str, Any] = {}
    for r, (sel, v, hdim, vdim, panels, inside) in enumerate(rows):
        vn, un = all_norms if all_norms is not None else norms([panels])
        hedges = _edges(_centres(v, hdim))
        vedges = _edges(_centres(v, vdim))
        where = wheres[r]
        for c, key in enumerate(keys):
            ax = axes[r, c]
            is_value = key in value_keys
            m = ax.pcolormesh(
                hedges, vedges, panels[key],
                cmap=value_cmap if is_value else unc_cmap,
                norm=vn if is_value else un,
                shading="flat",
                rasterized=True,
            )
            m.set_gid(key)
            ax.set_gid(key)
            _draw_domain(ax, hedges, vedges, inside)
            ax.set_title(f"{titles[key]}\n{where}" if where else titles[key], fontsize="medium")
            meshes.setdefault(key, []).append(m)
            if r == nrows - 1:
                ax.set_xlabel(_axis_label(v, hdim))
            if c == 0:
                ax.set_ylabel(_axis_label(v, vdim))
        ax0 = axes[r, 0]
        ax0.set_xlim(hedges.min(), hedges.max())
        if _positive_down(_coord(v, vdim)):
            ax0.set_ylim(vedges.max(), vedges.min())
        else:
            ax0.set_ylim(vedges.min(), vedges.max())
        if aspect is not None:
            for ax in axes[r]:
                ax.set_aspect(aspect)
        if share == "row":
            _colourbars(fig, axes[r], meshes, value_keys, unc_keys, f, r, "right", cbar_pads)
    if share == "all":
        _colourbars(fig, axes, meshes, value_keys, unc_keys, f, 0, "bottom", cbar_pads)
    for ax in axes.ravel():
        ax.set_anchor("N")  # a panel shorter than its box stays under its title
    # long axis labels that would run into their neighbours' give way to "x [m]"
    for ax in axes[-1]:
        _choose_label(ax.xaxis.label, _short_label(rows[-1][1], rows[-1][2]), w + gap - 0.1, mt)
    for ax, (_, v, _, vd, _, _) in zip(axes[:, 0], rows, strict=True):
        _choose_label(ax.yaxis.label, _short_label(v, vd), h, mt)
    return fig


def _colourbars(fig, axes, meshes, value_keys, unc_keys, f: _Field, row, location, pads):
    """One colourbar under (or beside) the value panels, one for std and error.

    ``pads`` gives the pad of each, ``"value"`` and ``"uncertainty"``, as a fraction of
    the extent of its panels.
    """
    axes = np.atleast_2d(axes)
    nv = len(value_keys)
    kw = {"location": location, "shrink": 0.9, "aspect": 25 if location == "bottom" else 18}
    kw["pad"] = pads["value"]
    cb = fig.colorbar(meshes[value_keys[0]][row], ax=axes[:, :nv].ravel().tolist(), **kw)
    cb.set_label(label_for(f.value, f.var))
    _style_colorbar(cb)
    cb.ax.set_gid("colorbar:value")
    if unc_keys:
        kw["pad"] = pads["uncertainty"]
        cb = fig.colorbar(meshes[unc_keys[0]][row], ax=axes[:, nv:].ravel().tolist(), **kw)
        cb.set_label(_uncertainty_label(f, unc_keys))
        _style_colorbar(cb)
        cb.ax.set_gid("colorbar:uncertainty")


def _style_colorbar(cb) -> None:
    """Readable ticks on a log colourbar: 1-2-5 steps over short ranges, plain numbers."""
    if not isinstance(cb.norm, mcolors.LogNorm):
        return
    from matplotlib import ticker

    decades = math.log10(cb.norm.vmax / cb.norm.vmin)
    if decades > 4:
        subs: tuple[float, ...] = (1.0,)
    elif decades > 1.2:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    cb.locator = ticker.LogLocator(subs=subs)
    cb.formatter = ticker.FuncFormatter(lambda v, _: f"{v:g}" if 1e-4 <= v < 1e6 else f"{v:.0e}")
    cb.minorformatter = ticker.NullFormatter()
    long_axis = cb.ax.xaxis if cb.orientation == "horizontal" else cb.ax.yaxis
    long_axis.set_minor_formatter(ticker.NullFormatter())
    cb.update_ticks()


def _uncertainty_label(f: _Field, unc_keys: Sequence[str]) -> str:
    what = " and ".join({"std": "std", "error": "|error|"}[k] for k in unc_keys)
    name = f.value.attrs.get("long_name") or f.var
    units = f.value.attrs.get("units")
    return f"{what} of {name}" + _units_suffix(units)


# --------------------------------------------------------------------------------------
# map data found offline
# --------------------------------------------------------------------------------------


def map_data_dirs() -> list[Path]:
    """Folders searched for cartopy's shapefiles, in order, without downloading.

    These are ``cartopy.config["pre_existing_data_dir"]``, then ``["data_dir"]`` and
    ``["repo_data_dir"]`` when cartopy can be imported, then ``$CARTOPY_DATA_DIR``, then
    the system folders ``/usr/share/cartopy`` and ``/usr/share/cartopy/data``, which is
    where Debian's ``python-cartopy-data`` puts them, and ``/usr/local/share/cartopy``.
    An empty ``pre_existing_data_dir``, cartopy's default, would mean the current
    directory; it is skipped.

    Returns
    -------
    list of pathlib.Path
        Folders, whether or not they exist, without duplicates.
    """
    dirs: list[Path] = []
    try:
        import cartopy

        cfg = cartopy.config
    except ImportError:
        cfg = {}
    for key in ("pre_existing_data_dir", "data_dir", "repo_data_dir"):
        p = cfg.get(key)
        if p is not None and str(p) not in ("", "."):
            dirs.append(Path(p))
    env = os.environ.get("CARTOPY_DATA_DIR")
    if env:
        dirs.append(Path(env))
    dirs.extend(_SYSTEM_DATA_DIRS)
    seen: set[str] = set()
    unique = []
    for d in dirs:
        if str(d) not in seen:
            seen.add(str(d))
            unique.append(d)
    return unique


def _shapefile_complete(path: Path) -> bool:
    return all(path.with_suffix(ext).is_file() for ext in (".shp", ".shx", ".dbf"))


def find_map_shapefile(
    name: str = "coastline",
    category: str = "physical",
    resolutions: Sequence[str] = ("110m", "50m", "10m"),
) -> Path | None:
    """The path of a Natural Earth shapefile on disk, or None, never downloading.

    The folders of :func:`map_data_dirs` are searched for
    ``shapefiles/natural_earth/{category}/ne_{resolution}_{name}.shp``, the layout that
    cartopy's downloader uses. The resolutions are tried in the order given. Only a
    shapefile with its ``.shx`` and ``.dbf`` beside it counts.

    Parameters
    ----------
    name : str
        Natural Earth name, e.g. ``"coastline"`` or ``"admin_0_boundary_lines_land"``.
    category : {"physical", "cultural"}
        Natural Earth category.
    resolutions : sequence of str
        Preferred resolutions, best first.

    Returns
    -------
    pathlib.Path or None
        The first complete shapefile found.
    """
    for res in resolutions:
        for d in map_data_dirs():
            p = d / "shapefiles" / "natural_earth" / category / f"ne_{res}_{name}.shp"
            if _shapefile_complete(p):
                return p
    return None


def _find_gshhs(scale: str = "c", level: int = 1) -> Path | None:
    for d in map_data_dirs():
        p = d / "shapefiles" / "gshhs" / scale / f"GSHHS_{scale}_L{level}.shp"
        if _shapefile_complete(p):
            return p
    return None


def _geometries(path: Path) -> list[Any]:
    key = str(path)
    if key not in _GEOMETRY_CACHE:
        from cartopy.io import shapereader

        _GEOMETRY_CACHE[key] = list(shapereader.Reader(str(path)).geometries())
    return _GEOMETRY_CACHE[key]


def _add_map_features(ax, ccrs, span_deg: float, coastlines: bool, borders: bool) -> None:
    """Coastlines and borders from shapefiles on disk, or one warning when missing."""
    from cartopy.feature import ShapelyFeature

    if span_deg < 25:
        res = ("10m", "50m", "110m")
    elif span_deg < 100:
        res = ("50m", "110m", "10m")
    else:
        res = ("110m", "50m", "10m")
    missing = []
    if coastlines:
        path = find_map_shapefile("coastline", "physical", res) or _find_gshhs("c", 1)
        if path is None:
            missing.append("coastlines")
        else:
            feature = ShapelyFeature(_geometries(path), ccrs.PlateCarree())
            artist = ax.add_feature(feature, facecolor="none", edgecolor="0.15", linewidth=0.6)
            artist.set_gid("coastlines")
    if borders:
        path = find_map_shapefile("admin_0_boundary_lines_land", "cultural", res)
        if path is None:
            missing.append("borders")
        else:
            feature = ShapelyFeature(_geometries(path), ccrs.PlateCarree())
            artist = ax.add_feature(
                feature, facecolor="none", edgecolor="0.3", linewidth=0.5, linestyle=":"
            )
            artist.set_gid("borders")
    if missing:
        where = ", ".join(str(d) for d in map_data_dirs())
        _warn_once(
            "map-data",
            f"Natural Earth shapefiles not found offline, so maps are drawn without "
            f"{' and '.join(missing)} (nothing is downloaded). Searched: {where}. Put "
            "shapefiles/natural_earth/{physical,cultural}/ne_<res>_<name>.shp in one of "
            "these folders, or point CARTOPY_DATA_DIR at such a tree.",
        )


def _import_cartopy():
    """``cartopy.crs`` or None, with a single warning when cartopy is missing."""
    try:
        import cartopy.crs as ccrs
        import cartopy.feature
        import cartopy.io.shapereader  # noqa: F401  (needed for the map data)
    except ImportError:
        _warn_once(
            "cartopy",
            "cartopy is not available, so lon/lat maps are drawn on plain axes without a "
            "projection; install geogpvae[maps] for projected maps.",
        )
        return None
    return ccrs


# --------------------------------------------------------------------------------------
# longitudes across the dateline
# --------------------------------------------------------------------------------------


def _lon_start(lon: np.ndarray) -> float:
    """Start of the shortest arc that holds all longitudes (after the largest gap)."""
    lon = np.asarray(lon, dtype=float)
    u = np.unique(np.mod(lon[np.isfinite(lon)], 360.0))
    if u.size == 0:
        return 0.0
    if u.size == 1:
        return float(u[0])
    gaps = np.diff(np.r_[u, u[0] + 360.0])
    k = int(np.argmax(gaps))
    if gaps[-1] >= gaps[k] * (1 - 1e-6):  # prefer not to move the seam
        k = gaps.size - 1
    return float(u[(k + 1) % u.size])


def _contiguous_lon(lon: np.ndarray) -> np.ndarray:
    """Longitudes unwrapped onto one arc, e.g. 170..190 rather than 170..180, -180..-170.

    A monotonic grid whose own seam is at least as wide as its largest step is kept as it
    is, so ``0..357.5`` and ``-180..177.5`` keep their values.
    """
    lon = np.asarray(lon, dtype=float)
    if lon.size > 1:
        d = np.diff(lon)
        if np.all(d > 0) or np.all(d < 0):
            lo, hi = float(np.min(lon)), float(np.max(lon))
            if hi - lo < 360 and (lo + 360 - hi) >= np.max(np.abs(d)) * (1 - 1e-6):
                return lon
    start = _lon_start(lon)
    turns = np.floor((lon - start) / 360.0)
    return np.where(turns != 0, lon - 360.0 * turns, lon)


# --------------------------------------------------------------------------------------
# field_map
# --------------------------------------------------------------------------------------


def _find_sites(ds: xr.Dataset, da: xr.DataArray, coords: str):
    """For scattered data: (site dim, horizontal name, vertical name, is_lonlat) or None."""
    names = {str(n).lower(): str(n) for n in ds.variables}
    pairs = []
    lonlat = [(names[a], names[b]) for a in _LON_NAMES for b in _LAT_NAMES
              if a in names and b in names]
    xy = [(names[a], names[b]) for a in _X_NAMES for b in _Y_NAMES if a in names and b in names]
    if coords in ("auto", "lonlat"):
        pairs += [(h, v, True) for h, v in lonlat]
    if coords in ("auto", "xy"):
        pairs += [(h, v, False) for h, v in xy]
    for h, v, is_ll in pairs:
        hd, vd = ds[h].dims, ds[v].dims
        if len(hd) == 1 and hd == vd and hd[0] in da.dims and hd[0] not in (h, v):
            return hd[0], h, v, is_ll
    return None


def field_map(
    ds: xr.Dataset,
    var: str,
    truth: xr.DataArray | xr.Dataset | None = None,
    *,
    std: bool = True,
    projection: Any = None,
    coords: str = "auto",
    isel: Mapping[str, int] | None = None,
    log: bool | None = None,
    cmap: Any = None,
    std_cmap: Any = UNCERTAINTY_CMAP,
    percentiles: tuple[float, float] = (1.0, 99.0),
    coastlines: bool = True,
    borders: bool = True,
    outline_holes: bool = True,
    marker_size: float | None = None,
    panel_width: float = 3.3,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Maps of an imputed field, its std, and with ``truth`` the truth and the error.

    Panels, left to right: the field, the truth when given, the predictive std when
    ``std`` is set, and ``|field - truth|`` when the truth is given. The std and error
    panels show the imputed cells or sites only, because both are 0 at observed ones. The
    value panels share one norm and one colourbar, and so do the std and error panels.

    Without a ``v_imputed`` flag, as in the output of ``GPVAEImputer.predict`` at new
    locations (``v`` and ``v_std`` only), a cell or site with a positive std counts as
    imputed (predicted) and one with a std of 0 as observed, as :func:`geogpvae.impute`
    writes them. Predictions alone fill the std panel, and the field panel is titled
    "predicted field".

    - Gridded data (1-D dim coords) are drawn with ``pcolormesh`` on cell edges. Thin
      black lines along the cell edges outline the imputed cells when ``outline_holes``
      is set. Cells without a value are grey, and cells outside the domain are white.
    - Scattered data (one dim such as ``site``, with coordinate variables ``x``/``y`` or
      ``lon``/``lat`` along it) are drawn as points coloured by value. Observed sites
      are circles with a thin edge, imputed ones triangles with a black edge, and sites
      outside the domain small grey crosses. A legend tells them apart.
    - lon/lat data go on a cartopy GeoAxes, with gridlines and with coastlines and
      borders when Natural Earth shapefiles are on disk (see :func:`find_map_shapefile`).
      Nothing is ever downloaded. Without them, or without cartopy, the map is drawn all
      the same and a single warning per process says so.
    - Projected x/y data go on plain axes, with an equal aspect when the units agree.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
        Name of the imputed variable.
    truth : xarray.DataArray or xarray.Dataset, optional
        The complete field on the same grid or sites, or a Dataset that holds ``var``.
    std : bool
        Add the predictive standard deviation panel.
    projection : cartopy CRS or str, optional
        Map projection for lon/lat data. A string names one that is centred on the data:
        ``"PlateCarree"``, ``"LambertAzimuthalEqualArea"``, ``"Mercator"`` or
        ``"Robinson"``. By default a grid spanning 300 degrees of longitude or more is
        global and gets PlateCarree, with its central longitude midway between the grid's
        outer cell edges, so that no cell straddles the seam of the map (0..360 grids and
        grids across 180 come out whole). Data spanning less than 60 degrees get a
        Lambert azimuthal equal-area projection centred on them, and anything else gets
        PlateCarree centred on the data.
    coords : {"auto", "lonlat", "xy"}
        Which coordinates to use for scattered data that have both. ``"auto"`` prefers
        lon/lat.
    isel : mapping of str to int, optional
        Index of the other dims (e.g. ``{"time": 3}``). The default is the first index of
        each.
    log : bool, optional
        Log colour norm; by default that of the variable's ``geogpvae_transform``.
    cmap, std_cmap : str or Colormap, optional
        Colour maps for the values and for std and error.
    percentiles : tuple of float
        Robust colour limits, in percent.
    coastlines, borders : bool
        Draw these when the shapefiles are found on disk.
    outline_holes : bool
        Outline the imputed cells of gridded data on the field panel.
    marker_size : float, optional
        Marker area for scattered data, in points squared.
    panel_width : float
        Width of one panel, in inches.
    figsize : tuple of float, optional
        Figure size, overriding the one computed from ``panel_width``. By default, maps
        with a fixed aspect (equal units on both axes, lon/lat) get the height that the
        aspect asks for, with room for the titles and the colourbars.

    Returns
    -------
    matplotlib.figure.Figure
        The figure. The panels have gids ``"imputed"``, ``"truth"``, ``"std"`` and
        ``"error"``. Scatter collections have the gids ``"observed"``, ``"imputed"`` and
        ``"outside"``, or ``"context"`` for the grey observed sites on the std and error
        panels.
    """
    plt = _plt()
    if coords not in ("auto", "lonlat", "xy"):
        raise ValueError("coords must be 'auto', 'lonlat' or 'xy'")
    f = _Field(ds, var, truth)
    da = f.value
    use_log = is_log_variable(da) if log is None else bool(log)

    # what kind of geometry, and which dims are not spatial
    sites = _find_sites(ds, da, coords)
    if sites is not None:
        spatial: tuple[str, ...] = (sites[0],)
    else:
        lon_dims = [d for d in da.dims if _is_lon(str(d), _coord(da, str(d)))]
        lat_dims = [d for d in da.dims if _is_lat(str(d), _coord(da, str(d)))]
        x_dims = [d for d in da.dims if _is_x(str(d), _coord(da, str(d)))]
        y_dims = [d for d in da.dims if _is_y(str(d), _coord(da, str(d)))]
        if lon_dims and lat_dims and coords != "xy":
            spatial = (str(lat_dims[0]), str(lon_dims[0]))
        elif x_dims and y_dims:
            spatial = (str(y_dims[0]), str(x_dims[0]))
        elif da.ndim == 2:
            spatial = tuple(str(d) for d in da.dims)
        else:
            raise ValueError(
                f"cannot tell the horizontal dims of {var!r} {da.dims}: expected lon/lat or "
                "x/y dims, or a site dim with x/y or lon/lat coordinate variables"
            )
    sel: dict[str, int] = {}
    notes = []
    for d in da.dims:
        if d in spatial:
            continue
        k = int((isel or {}).get(str(d), 0))
        n = da.sizes[d]
        if not -n <= k < n:
            raise IndexError(f"index {k} out of range for {d!r} of size {n}")
        sel[str(d)] = k % n
        c = _coord(da, str(d))
        layer = da.coords.get("layer")
        if layer is not None and layer.dims == (d,) and d != "layer":  # SPE10's layer numbers
            notes.append(f"layer {_fmt_value(layer.values[k % n])}")
        notes.append(_coord_note(str(d), c, c.values[k % n]) if c is not None else f"{d} = {k % n}")
    notes += _scalar_notes(da)

    def pick(a):
        return None if a is None else a.isel(sel)

    value, sdev, flag, tru = pick(da), pick(f.std), pick(f.flag), pick(f.truth)
    value_keys = ["imputed"] + (["truth"] if tru is not None else [])
    unc_keys = (["std"] if std and sdev is not None else []) + (
        ["error"] if tru is not None else []
    )
    keys = value_keys + unc_keys

    if sites is not None:
        _, hname, vname, is_lonlat = sites
        hc = np.asarray(ds[hname].values, dtype=float)
        vc = np.asarray(ds[vname].values, dtype=float)
        hattr, vattr = ds[hname], ds[vname]
    else:
        is_lonlat = _is_lon(spatial[1], _coord(da, spatial[1])) and _is_lat(
            spatial[0], _coord(da, spatial[0])
        )
        if sites is None and not (
            is_lonlat or _is_x(spatial[1], _coord(da, spatial[1]))
        ):
            hdim, vdim = _orient(value.transpose(*spatial))
            spatial = (vdim, hdim)
        hc = _centres(da, spatial[1])
        vc = _centres(da, spatial[0])
        hattr, vattr = _coord(da, spatial[1]), _coord(da, spatial[0])

    ccrs = _import_cartopy() if is_lonlat else None
    order = None
    if is_lonlat:
        hc_plot = _contiguous_lon(hc)
        if sites is None and hc_plot.size > 1 and not (
            np.all(np.diff(hc_plot) > 0) or np.all(np.diff(hc_plot) < 0)
        ):
            order = np.argsort(hc_plot, kind="stable")
            hc_plot = hc_plot[order]
    else:
        hc_plot = hc

    # values as masked arrays, shaped (vertical, horizontal) for grids or (site,)
    def arr(a):
        if a is None:
            return None
        a = a.transpose(*spatial)
        if order is not None:
            a = a.isel({spatial[1]: order})
        return a.values

    v_arr = np.asarray(arr(value), dtype=float)
    flag_arr = arr(flag)
    std_arr = arr(sdev)
    obs, imp, inside = _status(v_arr, std_arr, flag_arr)
    # without a flag, only a positive std tells the imputed (predicted) cells apart
    unknown = flag_arr is None and std_arr is None
    predicted_only = flag_arr is None and bool(imp.any()) and not obs.any()
    panels: dict[str, np.ma.MaskedArray] = {"imputed": np.ma.masked_invalid(v_arr)}
    if tru is not None:
        panels["truth"] = np.ma.masked_invalid(np.asarray(arr(tru), dtype=float))
    if "std" in unc_keys:
        panels["std"] = np.ma.masked_where(~imp, np.ma.masked_invalid(np.asarray(std_arr, float)))
    if "error" in unc_keys:
        err = np.ma.abs(panels["imputed"] - panels["truth"])
        panels["error"] = err if unknown else np.ma.masked_where(~imp, err)

    vnorm = make_norm(
        *robust_limits(*[panels[k] for k in value_keys], percentiles=percentiles, log=use_log),
        log=use_log,
    )
    unorm = None
    if unc_keys:
        lo, hi = robust_limits(*[panels[k] for k in unc_keys], percentiles=percentiles, log=use_log)
        unorm = make_norm(lo if use_log else 0.0, hi, log=use_log)
    vcmap, ucmap = _cmap(cmap or VALUE_CMAP), _cmap(std_cmap)

    # extent and projection
    hfin, vfin = hc_plot[np.isfinite(hc_plot)], vc[np.isfinite(vc)]
    if sites is None:
        hedges, vedges = _edges(hc_plot), _edges(vc)
        if is_lonlat:
            vedges = np.clip(vedges, -90.0, 90.0)
        h0, h1 = float(np.min(hedges)), float(np.max(hedges))
        v0, v1 = float(np.min(vedges)), float(np.max(vedges))
    else:
        h0, h1 = float(np.min(hfin)), float(np.max(hfin))
        v0, v1 = float(np.min(vfin)), float(np.max(vfin))
        pad_h = 0.05 * (h1 - h0 or 1.0)
        pad_v = 0.05 * (v1 - v0 or 1.0)
        h0, h1, v0, v1 = h0 - pad_h, h1 + pad_h, v0 - pad_v, v1 + pad_v
        if is_lonlat:
            v0, v1 = max(v0, -90.0), min(v1, 90.0)
    span = h1 - h0
    proj = data_crs = None
    is_global = False
    if ccrs is not None:
        middle = 0.5 * (h0 + h1)
        centre = float(np.mod(middle + 180.0, 360.0) - 180.0)
        clat = float(0.5 * (v0 + v1))
        is_global = span >= 300
        proj = _projection(ccrs, projection, centre, clat, span, is_global)
        data_crs = ccrs.PlateCarree()

    # figure
    ncols = len(keys)
    same_units = False
    if is_lonlat:
        ratio = (v1 - v0) / max(span, 1e-9)
        if ccrs is None or not is_global:
            ratio /= max(math.cos(math.radians(0.5 * (v0 + v1))), 0.05 if ccrs is None else 0.2)
    else:
        same_units = (
            hattr is not None and vattr is not None
            and hattr.attrs.get("units") == vattr.attrs.get("units")
        )
        ratio = (v1 - v0) / max(span, 1e-12) if same_units else 0.8
    # panels with a fixed aspect get the figure height that their aspect asks for
    fixed = is_lonlat or same_units
    ratio = float(np.clip(ratio, 0.25, 2.5)) if fixed else 0.8

    # the size of the figure and of its panels, estimated from the text around them
    mt = _Metrics()
    nv, nu = len(value_keys), len(unc_keys)
    if ccrs is not None:  # grid line labels in small type, left of and under panel 1 only
        left = mt.w_pad + mt.tick + mt.digits(5, mt.small)
        gap = 2 * mt.w_pad
        under = mt.x_ticks(mt.small)
    else:  # tick labels on every panel, axis labels under all and left of the first
        ychars = _tick_chars(v0, v1)
        left = mt.w_pad + mt.lines(mt.label_font) + mt.label_pad + mt.tick + mt.digits(ychars)
        gap = 2 * mt.w_pad + mt.tick + mt.digits(ychars)
        under = mt.x_ticks() + mt.x_label()
    width = panel_width * ncols + 0.6 if figsize is None else float(figsize[0])
    w = max((width - left - mt.w_pad - 0.03 - (ncols - 1) * gap) / ncols, 0.3)
    top = mt.h_pad + mt.lines(mt.big) + mt.title(1)  # suptitle and panel titles
    cbar_pad = 0.1  # inches
    below = (mt.h_pad + under + cbar_pad + mt.x_ticks() + mt.x_label()
             + 0.85 * (max(nv, nu) * w + (max(nv, nu) - 1) * gap) / 30.0)
    auto_size = figsize is None
    if figsize is None:
        h = w * ratio
        figsize = (width, top + h + below)
    else:
        h = max(float(figsize[1]) - top - below, 0.3)
        if fixed:
            w, h = min(w, h / ratio), min(h, w * ratio)
    subplot_kw = {"projection": proj} if proj is not None else {}
    fig, axes = plt.subplots(1, ncols, figsize=figsize, squeeze=False, subplot_kw=subplot_kw,
                             layout="compressed" if fixed else "constrained")
    axes = axes[0]
    titles = {
        "imputed": "imputed field",
        "truth": "truth",
        "std": "predictive std",
        "error": "|imputed \u2212 truth|",
    }
    tkw = {"transform": data_crs} if data_crs is not None else {}
    mappables: dict[str, Any] = {}
    size = marker_size or float(np.clip(4000.0 / max(v_arr.size, 1), 10.0, 60.0))
    for ax, key in zip(axes, keys, strict=True):
        is_value = key in value_keys
        norm, cm = (vnorm, vcmap) if is_value else (unorm, ucmap)
        data = panels[key]
        ax.set_gid(key)
        title = "predicted field" if key == "imputed" and predicted_only else titles[key]
        ax.set_title(title, fontsize="medium")
        if sites is None:
            m = ax.pcolormesh(hedges, vedges, data, cmap=cm, norm=norm, shading="flat",
                              rasterized=True, **tkw)
            m.set_gid(key)
            _draw_domain(ax, hedges, vedges, inside, **tkw)
            if key == "imputed" and outline_holes and imp.any() and obs.any():
                _outline(ax, hedges, vedges, imp, **tkw)
        else:
            m = _draw_sites(ax, key, hc_plot, vc, data, obs, imp, inside, cm, norm, size, tkw)
        mappables[key] = m
        if ccrs is not None:
            if is_global:
                ax.set_global()
            else:
                ax.set_extent([h0 - middle, h1 - middle, v0, v1],
                              crs=ccrs.PlateCarree(central_longitude=centre))
            # labels on the first panel only: the others show the same map, and
            # cartopy's label placement is the slowest part of drawing a map
            first = ax is axes[0]
            gl = ax.gridlines(draw_labels=first, linewidth=0.3, color="0.4", alpha=0.7)
            if first:
                gl.top_labels = gl.right_labels = False
                gl.xlabel_style = gl.ylabel_style = {"size": "small"}
            _add_map_features(ax, ccrs, span, coastlines, borders)
        else:
            ax.set_xlim(h0, h1)
            ax.set_ylim(v0, v1)
            if is_lonlat:
                ax.set_aspect(1.0 / max(math.cos(math.radians(0.5 * (v0 + v1))), 0.05))
                ax.set_xlabel("longitude [\u00b0E]")
                if ax is axes[0]:
                    ax.set_ylabel("latitude [\u00b0N]")
            else:
                if same_units:
                    ax.set_aspect("equal")
                hname_ = sites[1] if sites is not None else spatial[1]
                vname_ = sites[2] if sites is not None else spatial[0]
                ax.set_xlabel(label_for(hattr, hname_) if hattr is not None else hname_)
                if ax is axes[0]:  # the other panels show the same map
                    ax.set_ylabel(label_for(vattr, vname_) if vattr is not None else vname_)
    if sites is not None:
        _site_legend(axes[0], obs, imp, inside)
    if auto_size and ccrs is not None:  # the projected extent sets the panels' shape
        x0, x1 = axes[0].get_xlim()
        y0, y1 = axes[0].get_ylim()
        h = w * float(np.clip(abs(y1 - y0) / max(abs(x1 - x0), 1e-12), 0.25, 2.5))
        fig.set_size_inches(width, top + h + below)
    kw = {"location": "bottom", "shrink": 0.85, "aspect": 30, "pad": cbar_pad / h}
    value_axes = [a for a, k in zip(axes, keys, strict=True) if k in value_keys]
    cb = fig.colorbar(mappables[value_keys[0]], ax=value_axes, **kw)
    cb.set_label(label_for(da, var))
    _style_colorbar(cb)
    cb.ax.set_gid("colorbar:value")
    if unc_keys:
        unc_axes = [a for a, k in zip(axes, keys, strict=True) if k in unc_keys]
        cb = fig.colorbar(mappables[unc_keys[0]], ax=unc_axes, **kw)
        cb.set_label(_uncertainty_label(f, unc_keys))
        _style_colorbar(cb)
        cb.ax.set_gid("colorbar:uncertainty")
    title = str(da.attrs.get("long_name") or var)
    if notes:
        title += " (" + ", ".join(notes) + ")"
    fig.suptitle(title)
    for ax in axes:
        # a panel that its aspect makes shorter than its box stays under its title, where
        # the layout left room for it (the colourbars below anchor it at the bottom)
        ax.set_anchor("N")
    if ccrs is None and not is_lonlat:  # long x labels give way to "x [m]"
        hname_ = sites[1] if sites is not None else spatial[1]
        short = hname_ + (_units_suffix(hattr.attrs.get("units")) if hattr is not None else "")
        for ax in axes:
            _choose_label(ax.xaxis.label, short, w + gap - 0.1, mt)
    return fig


def _projection(ccrs, projection, centre: float, clat: float, span: float, is_global: bool):
    if projection is not None and not isinstance(projection, str):
        return projection
    name = (projection or "").lower()
    if not name:
        if is_global:
            name = "platecarree"
        elif span < 60:
            name = "lambertazimuthalequalarea"
        else:
            name = "platecarree"
    if name == "platecarree":
        return ccrs.PlateCarree(central_longitude=centre)
    if name in ("lambertazimuthalequalarea", "laea"):
        return ccrs.LambertAzimuthalEqualArea(central_longitude=centre, central_latitude=clat)
    if name == "mercator":
        return ccrs.Mercator(central_longitude=centre)
    if name == "robinson":
        return ccrs.Robinson(central_longitude=centre)
    raise ValueError(f"unknown projection {projection!r}")


def _draw_sites(ax, key, hc, vc, data, obs, imp, inside, cmap, norm, size, tkw):
    """Scatter the sites of one panel; return the collection that carries the colours."""
    values = np.ma.filled(data.astype(float), np.nan)
    main = None
    if key in ("imputed", "truth"):
        outside = ~inside
        if outside.any():
            c = ax.scatter(hc[outside], vc[outside], s=size * 0.5, marker="x", c="0.55",
                           linewidths=0.6, zorder=2, **tkw)
            c.set_gid("outside")
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], c=values[obs], s=size, marker="o", cmap=cmap,
                           norm=norm, edgecolors="0.25", linewidths=0.3, zorder=3, **tkw)
            c.set_gid("observed")
            main = c
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c if main is None else main
    else:
        if obs.any():
            c = ax.scatter(hc[obs], vc[obs], s=size * 0.25, marker="o", c="0.6",
                           linewidths=0, zorder=2, **tkw)
            c.set_gid("context")
        if imp.any():
            c = ax.scatter(hc[imp], vc[imp], c=values[imp], s=size * 1.3, marker="^",
                           cmap=cmap, norm=norm, edgecolors="k", linewidths=0.9, zorder=4,
                           **tkw)
            c.set_gid("imputed")
            main = c
    if main is None:  # nothing to colour: an empty mappable keeps the colourbar valid
        import matplotlib.cm as mcm

        main = mcm.ScalarMappable(norm=norm, cmap=cmap)
    return main


def _site_legend(ax, obs, imp, inside) -> None:
    handles = [
        Line2D([], [], marker="o", linestyle="", markerfacecolor="0.7",
               markeredgecolor="0.25", markeredgewidth=0.3, markersize=6,
               label=f"observed ({int(obs.sum())})"),
        Line2D([], [], marker="^", linestyle="", markerfacecolor="0.7",
               markeredgecolor="k", markeredgewidth=0.9, markersize=7,
               label=f"imputed ({int(imp.sum())})"),
    ]
    if (~inside).any():
        handles.append(Line2D([], [], marker="x", linestyle="", color="0.55",
                              label=f"outside domain ({int((~inside).sum())})"))
    ax.legend(handles=handles, loc="best", fontsize="small", framealpha=0.8)


# --------------------------------------------------------------------------------------
# calibration
# --------------------------------------------------------------------------------------


def _log_moments(value: np.ndarray, std: np.ndarray, point: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of ln(v) from a lognormal's point estimate and standard deviation."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = (std / value) ** 2
        if point == "median":  # value = exp(mu); var = exp(2mu) u (u - 1), u = exp(s^2)
            u = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * r2))
            s = np.sqrt(np.log(u))
            mu = np.log(value)
        elif point == "mean":  # value = exp(mu + s^2/2); var = value^2 (exp(s^2) - 1)
            s2 = np.log1p(r2)
            s = np.sqrt(s2)
            mu = np.log(value) - 0.5 * s2
        else:
            raise ValueError("log_point must be 'median' or 'mean'")
    return mu, s


def _calibration_pairs(
    ds: xr.Dataset, var: str, truth: Any, space: str, log_point: str | None
) -> tuple[np.ndarray, np.ndarray, str]:
    """Predictive std and absolute error at the imputed cells, in the modelling space."""
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
            err = np.abs(np.log(true) - mu)
    else:
        sigma, err = sdev, np.abs(true - value)
    ok = imputed & np.isfinite(sigma) & np.isfinite(err) & (sigma > 0)
    return sigma[ok], err[ok], space


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

    A cell counts as covered at level ``p`` when ``|truth - mean| <= z * sigma``, where
    ``z`` is the standard normal quantile at ``(1 + p) / 2``.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
        Name of the imputed variable.
    truth : xarray.DataArray or xarray.Dataset
        The true field.
    levels : sequence of float
        Nominal levels in (0, 1).
    space : {"auto", "linear", "log"}
        Where the Gaussian intervals live. ``"auto"`` uses log space for a variable with
        ``geogpvae_transform = "log"``, where the model is Gaussian, and linear space
        otherwise. In log space, the intervals ``mu +- z s`` of ``ln v`` correspond to
        the asymmetric intervals ``[exp(mu - z s), exp(mu + z s)]`` in the original
        units.
    log_point : {"median", "mean"}, optional
        How the log-space moments ``mu`` and ``s`` are recovered from ``v`` and ``v_std``,
        which are in the original units. ``"median"`` means that ``v = exp(mu)`` and
        ``v_std`` is the lognormal standard deviation,
        ``v_std**2 = exp(2 mu) u (u - 1)`` with ``u = exp(s**2)``. ``"mean"`` means that
        ``v = exp(mu + s**2 / 2)``, the lognormal mean, with
        ``v_std**2 = v**2 (exp(s**2) - 1)``. The default is the variable's
        ``geogpvae_point_estimate`` attr, or ``"median"`` without it.

    Returns
    -------
    dict of float to float
        The fraction covered at each nominal level, NaN when there is no imputed cell with
        a finite truth and a positive std.
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

    With ``truth``, there are two panels:

    - ``|error|`` against the predictive std ``sigma`` at the imputed cells, as points,
      or as a hexbin of counts above ``max_scatter`` points. A calibrated Gaussian model
      has ``E|error| = sqrt(2/pi) sigma``, about ``0.80 sigma``, drawn as a line. Binned
      means of ``|error|`` (deciles of ``sigma``) show whether it follows that line.
    - the empirical coverage of the central intervals at ``levels`` next to the nominal
      coverage, as paired bars with the numbers written on them.

    Without ``truth``, a single panel shows the histogram of the std at the imputed
    cells, with log-spaced bins for a log-marked variable.

    Parameters
    ----------
    ds : xarray.Dataset
        The output of :func:`geogpvae.impute`.
    var : str
        Name of the imputed variable.
    truth : xarray.DataArray or xarray.Dataset, optional
        The true field.
    levels : sequence of float
        Nominal coverage levels.
    space : {"auto", "linear", "log"}
        Space of the Gaussian intervals and of the error plot. See
        :func:`interval_coverage`. For a log-marked variable, ``"auto"`` means log space,
        where the errors are those of ``ln v``.
    log_point : {"median", "mean"}, optional
        See :func:`interval_coverage`.
    max_scatter : int
        Above this number of points, a hexbin replaces the scatter.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        The figure. With ``truth``, its panels have gids ``"std-vs-error"`` and
        ``"coverage"``, and the empirical bars the gid ``"empirical"``. Without it, the
        panel has the gid ``"std-histogram"``.
    """
    plt = _plt()
    f = _Field(ds, var, truth)
    name = str(f.value.attrs.get("long_name") or var)
    units = f.value.attrs.get("units")
    if f.truth is None:
        if f.std is None:
            raise KeyError(f"the Dataset has no std for {var!r}")
        s = np.asarray(f.std.values, dtype=float).ravel()
        if f.flag is not None:
            s = s[np.asarray(f.flag.transpose(*f.std.dims).values, dtype=float).ravel() == 1]
        s = s[np.isfinite(s) & (s > 0)]
        fig, ax = plt.subplots(figsize=figsize or (4.0, 3.0), layout="constrained")
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
            ax.text(0.5, 0.5, "no imputed cell", transform=ax.transAxes, ha="center")
        unit_text = _units_suffix(units)
        ax.set_xlabel(f"predictive std of {name}{unit_text}")
        ax.set_ylabel("imputed cells")
        ax.set_title(f"std at {s.size} imputed cells", fontsize="medium")
        return fig

    sigma, err, used = _calibration_pairs(ds, var, truth, space, log_point)
    cov = _coverage(sigma, err, levels)
    hexbin = sigma.size > max_scatter
    # the hexbin's colourbar sits between the panels: a wider figure, with more space
    # between the panels, keeps its label clear of the coverage panel's
    default_size = (8.4, 3.4) if hexbin else (7.6, 3.4)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=figsize or default_size, layout="constrained",
                                   width_ratios=(1.25, 1.0))
    if hexbin:
        fig.get_layout_engine().set(wspace=0.06)
    ax1.set_gid("std-vs-error")
    ax2.set_gid("coverage")
    if used == "log":
        xlabel, ylabel = f"predictive std of ln({name})", f"|error| of ln({name})"
    else:
        u = _units_suffix(units)
        xlabel, ylabel = f"predictive std{u}", f"|imputed \u2212 truth|{u}"
    if sigma.size:
        xmax = float(np.quantile(sigma, 0.995)) * 1.05
        ymax = float(np.quantile(err, 0.995)) * 1.05
        if not ymax > 0:  # every error 0: keep the axis, and the calibrated line, in view
            ymax = HALF_NORMAL_MEAN * xmax
        if hexbin:
            hb = ax1.hexbin(sigma, err, gridsize=45, bins="log", cmap="Greys", mincnt=1,
                            extent=(0, xmax, 0, ymax), linewidths=0)
            hb.set_gid("points")
            cb = fig.colorbar(hb, ax=ax1, label="cells per bin", shrink=0.9, pad=0.02)
            _style_colorbar(cb)
            cb.ax.set_gid("colorbar:count")
        else:
            sc = ax1.scatter(sigma, err, s=6, color="0.35", alpha=0.6, linewidths=0)
            sc.set_gid("points")
        xs = np.array([0.0, xmax])
        (line,) = ax1.plot(xs, HALF_NORMAL_MEAN * xs, color="C3", linewidth=1.4,
                           label=r"calibrated: $E|e| = \sqrt{2/\pi}\,\sigma \approx 0.8\sigma$")
        line.set_gid("expected")
        nb = min(10, max(1, sigma.size // 20))
        if nb > 1:
            edges = np.quantile(sigma, np.linspace(0, 1, nb + 1))
            which = np.clip(np.searchsorted(edges, sigma, side="right") - 1, 0, nb - 1)
            xm = np.array([sigma[which == i].mean() for i in range(nb) if np.any(which == i)])
            ym = np.array([err[which == i].mean() for i in range(nb) if np.any(which == i)])
            (bm,) = ax1.plot(xm, ym, "o-", color="C0", markersize=4, linewidth=1,
                             label="mean |error| per decile of \u03c3")
            bm.set_gid("binned")
        ax1.set_xlim(0, xmax)
        ax1.set_ylim(0, ymax)
        ax1.legend(fontsize="small", loc="upper left")
    ax1.set_xlabel(xlabel)
    ax1.set_ylabel(ylabel)
    ax1.set_title(f"{sigma.size} imputed cells", fontsize="medium")

    lv = list(cov)
    x = np.arange(len(lv))
    nominal = np.array([100 * p for p in lv])
    empirical = np.array([100 * cov[p] for p in lv])
    w = 0.38
    bn = ax2.bar(x - w / 2, nominal, w, color="0.8", edgecolor="0.5", label="nominal")
    be = ax2.bar(x + w / 2, np.nan_to_num(empirical), w, color="C0", label="empirical")
    for b in bn:
        b.set_gid("nominal")
    for b, e in zip(be, empirical, strict=True):
        b.set_gid("empirical")
        ax2.annotate(f"{e:.1f}%", (b.get_x() + b.get_width() / 2, b.get_height()),
                     xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                     fontsize="small")
    ax2.set_xticks(x, [f"{p:.0f}%" for p in nominal])
    ax2.set_xlabel("central interval")
    ax2.set_ylabel("coverage [%]")
    ax2.set_ylim(0, 110)
    ax2.legend(fontsize="small", loc="upper left")
    ax2.set_title("coverage" + (" (in log space)" if used == "log" else ""), fontsize="medium")
    fig.suptitle(f"Calibration of {name}")
    return fig


# --------------------------------------------------------------------------------------
# training history
# --------------------------------------------------------------------------------------


def _history_limits(*series: Any, spread: float = 2.0) -> tuple[float, float] | None:
    """y limits for training curves that leave out a large start-up transient.

    The lower limit is the smallest value of all ``series``. The upper one is the 99th
    percentile of the later half of each series, raised by ``spread`` times its height
    above the lower limit, so that the approach to it stays in view, and never above the
    largest value. A loss that starts at 440 and settles near 3 is shown from about 3 up;
    curves without such a transient keep their whole range.

    Parameters
    ----------
    *series : array_like
        Curves over the same epochs. Non-finite values are ignored.
    spread : float
        How far above the later half the view reaches, in units of that half's height
        above the minimum (at least 2 % of its magnitude).

    Returns
    -------
    tuple of float or None
        ``(bottom, top)`` without padding, or None with fewer than 4 finite values.
    """
    arrays = [np.asarray(y, dtype=float).ravel() for y in series]
    values = np.concatenate([y[np.isfinite(y)] for y in arrays]) if arrays else np.empty(0)
    if values.size < 4:
        return None
    late = np.concatenate([y[y.size // 2:] for y in arrays])
    late = late[np.isfinite(late)]
    lo, top = float(values.min()), float(values.max())
    if late.size == 0:
        return lo, top
    high = float(np.percentile(late, 99))
    height = max(high - lo, 0.02 * abs(high), 1e-12)
    return lo, min(top, high + spread * height)


def _zoom_past_transient(ax, epoch: np.ndarray, series: Sequence[np.ndarray]) -> None:
    """Set the y limits from :func:`_history_limits`, and note the epochs left out above."""
    limits = _history_limits(*series)
    if limits is None:
        return
    lo, hi = limits
    pad = 0.05 * (hi - lo) or 0.05 * abs(hi) or 0.05
    ax.set_ylim(lo - pad, hi + pad)
    with np.errstate(invalid="ignore"):
        above = np.zeros(epoch.shape, dtype=bool)
        for y in series:
            above |= y > hi + pad
    if above.any():
        first, last = epoch[above][0], epoch[above][-1]
        peak = max(float(np.nanmax(y)) for y in series)
        which = (f"epoch {_fmt_value(first)}" if first == last
                 else f"epochs {_fmt_value(first)}\u2013{_fmt_value(last)}")
        note = ax.text(0.98, 0.97, f"{which} off scale (up to {peak:.3g})",
                       transform=ax.transAxes, ha="right", va="top", fontsize="x-small",
                       color="0.35")
        note.set_gid("off-scale")


def training_history(
    history: Mapping[str, Sequence[float]],
    *,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """The negative ELBO and its parts over the epochs.

    The loss of the first epochs is often far above the rest (440 against 3, say), which
    would leave the rest flat along the bottom. The y axis therefore runs from the lowest
    value to a little above the later half of the run, and a note in the corner names the
    epochs left above it. The lines still hold every epoch; ``ax.autoscale(axis="y")``
    shows them whole.

    Parameters
    ----------
    history : mapping of str to sequence of float
        Equal-length sequences. ``loss`` (negative ELBO per location) is required.
        ``epoch`` is optional and defaults to 1, 2, .... ``expected_nll`` (expected
        negative log-likelihood per location) is drawn with the loss, and so is
        ``val_loss`` when present. ``kl`` (KL divergence per location) gets its own
        panel. ``elapsed`` is read as cumulative seconds, and its last value goes in the
        title. Other keys are ignored.
    figsize : tuple of float, optional
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        One panel with gid ``"elbo"``, plus one with gid ``"kl"`` when ``kl`` is present.

    Raises
    ------
    ValueError
        If ``loss`` is missing or empty, or if the sequences differ in length.
    """
    plt = _plt()
    if "loss" not in history:
        raise ValueError("history needs a 'loss' entry")
    series = {k: np.asarray(v, dtype=float).ravel() for k, v in history.items()
              if k in ("epoch", "loss", "expected_nll", "kl", "elapsed", "val_loss")}
    n = series["loss"].size
    if n == 0:
        raise ValueError("history is empty")
    bad = {k: v.size for k, v in series.items() if v.size != n}
    if bad:
        raise ValueError(f"history entries differ in length from loss ({n}): {bad}")
    epoch = series.get("epoch", np.arange(1, n + 1, dtype=float))
    has_kl = "kl" in series
    fig, axes = plt.subplots(1, 2 if has_kl else 1,
                             figsize=figsize or ((7.0 if has_kl else 4.0), 3.0),
                             layout="constrained", squeeze=False)
    ax = axes[0, 0]
    ax.set_gid("elbo")
    marker = "o" if n <= 30 else None
    ax.plot(epoch, series["loss"], color="k", marker=marker, markersize=3,
            label="loss (\u2212ELBO)", gid="loss")
    if "expected_nll" in series:
        ax.plot(epoch, series["expected_nll"], color="C0", marker=marker, markersize=3,
                label="expected NLL", gid="expected_nll")
    if "val_loss" in series:
        ax.plot(epoch, series["val_loss"], color="k", linestyle="--", label="validation loss",
                gid="val_loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("per location")
    _zoom_past_transient(ax, epoch, [series[k] for k in ("loss", "expected_nll", "val_loss")
                                     if k in series])
    ax.legend(fontsize="small")
    ax.set_title("negative ELBO = expected NLL + KL", fontsize="medium")
    if has_kl:
        ax2 = axes[0, 1]
        ax2.set_gid("kl")
        ax2.plot(epoch, series["kl"], color="C3", marker=marker, markersize=3, label="KL",
                 gid="kl")
        ax2.set_xlabel("epoch")
        ax2.set_ylabel("KL per location")
        ax2.set_title("KL divergence", fontsize="medium")
        _zoom_past_transient(ax2, epoch, [series["kl"]])
    if "elapsed" in series and np.isfinite(series["elapsed"]).any():
        total = float(np.nanmax(series["elapsed"]))
        fig.suptitle(f"Training ({n} epochs, {total:.1f} s)")
    else:
        fig.suptitle(f"Training ({n} epochs)")
    return fig
