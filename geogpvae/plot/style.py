"""Colours, norms, unit and label typesetting shared by every figure."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import matplotlib
import numpy as np
import xarray as xr
from matplotlib import colors as mcolors

from ..fields.cf import is_log_variable

__all__ = ["is_log_variable", "label_for", "make_norm", "pretty_units", "robust_limits"]


#: Colour behind masked cells (holes, outside the domain, std at observed cells).
MASKED_COLOUR = "0.86"
#: Default colour map for values.
VALUE_CMAP = "viridis"
#: Default colour map for std and |error|: magma without its palest 15 % (not to be taken for grey).
UNCERTAINTY_CMAP = mcolors.ListedColormap(
    matplotlib.colormaps["magma"](np.linspace(0.0, 0.85, 256)), name="magma_no_white"
)
#: E|e| for e ~ N(0, sigma^2) is sqrt(2/pi) sigma, about 0.80 sigma.
HALF_NORMAL_MEAN = math.sqrt(2.0 / math.pi)

_WARNED: set[str] = set()

def _warn_once(key: str, message: str, stacklevel: int = 4) -> None:
    """Emit ``message`` as a UserWarning at most once per process for ``key``.

    One dropped by an ``"ignore"`` filter does not count as shown; ``stacklevel`` 4: the public caller.
    """
    if key in _WARNED:
        return
    if not _ignored(message):
        _WARNED.add(key)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _ignored(message: str) -> bool:
    """Whether the first warnings filter matching a UserWarning ``message`` ignores it (module/line filters skipped)."""
    for action, text, category, module, line in warnings.filters:
        if module is not None or line:
            continue
        if issubclass(UserWarning, category) and (text is None or text.match(message)):
            return action == "ignore"
    return False


def _plt():
    import matplotlib.pyplot as plt

    return plt


def label_for(da: xr.DataArray, name: str | None = None) -> str:
    """A colourbar or axis label, ``"long name [units]"``, built from attrs.

    Parameters
    ----------
    da : xarray.DataArray
        Variable or coordinate.
    name : str, optional
        Fallback without ``long_name`` or ``standard_name``; defaults to ``da.name``.

    Returns
    -------
    str
        Without the units part when ``units`` is missing or empty.
    """
    attrs = da.attrs
    text = attrs.get("long_name") or attrs.get("standard_name") or name or da.name or ""
    text = str(text).replace("_", " ") if not attrs.get("long_name") else str(text)
    return _with_units(text, attrs.get("units"))


def _with_units(text: str, units: Any) -> str:
    """``text [units]``, or ``text`` alone where it already says its units, e.g. "permeability (mD)"."""
    shown = pretty_units(units)
    if shown and (f"({shown})" in text or f"[{shown}]" in text):
        return text
    return text + _units_suffix(units)


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

    Exponents (also ``**`` or ``^``) become superscripts (``"mg kg-1"`` reads mg kg⁻¹),
    ``"degrees_east"``/``"degrees_north"`` °E/°N, ``"9.869233e-16 m2"`` mD; anything else is kept.

    Parameters
    ----------
    units : str or None
        The ``units`` attribute.

    Returns
    -------
    str
        ``""`` for a missing, empty or dimensionless (``"1"``) unit.
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
        NumPy, masked or xarray arrays; masked, non-finite (and with ``log``, non-positive) values ignored.
    percentiles : tuple of float
        Lower and upper percentiles, in percent; ``(0, 100)`` gives the full range.
    log : bool
        Percentiles of ``log10`` of the positive values; the limits are positive.
    vmin, vmax : float, optional
        Fixed limits that override the computed ones.

    Returns
    -------
    tuple of float
        ``(vmin, vmax)``, ``vmin < vmax``; ``(0, 1)`` (log: ``(1, 10)``) without any usable value.
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
    """A colour norm for ``[vmin, vmax]``, clipping nothing (outside: the colour map's under/over).

    Parameters
    ----------
    vmin, vmax : float
        Limits; for a log norm a non-positive ``vmin`` becomes ``vmax / 1000``.
    log : bool
        A :class:`~matplotlib.colors.LogNorm` instead of a :class:`~matplotlib.colors.Normalize`.

    Returns
    -------
    matplotlib.colors.Normalize
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
    """Grey under the cells inside the domain (holes show grey through masked cells); outside stays white."""
    grey = mcolors.ListedColormap([MASKED_COLOUR])
    under = ax.pcolormesh(hedges, vedges, np.ma.masked_where(~inside, np.zeros(inside.shape)),
                          cmap=grey, vmin=0.0, vmax=1.0, shading="flat", rasterized=True,
                          zorder=0.5, **kwargs)
    under.set_gid("domain")


def _outline(ax, hedges, vedges, mask: np.ndarray, **kwargs) -> None:
    """Outline the cells where ``mask`` is set; ``hedges``, ``vedges``: 1-D edges or 2-D corners."""
    from matplotlib.collections import LineCollection

    h, v = np.asarray(hedges, dtype=float), np.asarray(vedges, dtype=float)
    if h.ndim == 1:
        h, v = np.broadcast_arrays(h[None, :], v[:, None])
    m = np.pad(np.asarray(mask, dtype=bool), 1)
    segments = []
    rows, cols = np.nonzero(m[1:-1, 1:] != m[1:-1, :-1])  # edges between columns cols - 1, cols
    for i, j in zip(rows, cols, strict=True):
        segments.append([(h[i, j], v[i, j]), (h[i + 1, j], v[i + 1, j])])
    rows, cols = np.nonzero(m[1:, 1:-1] != m[:-1, 1:-1])  # edges between rows rows - 1, rows
    for i, j in zip(rows, cols, strict=True):
        segments.append([(h[i, j], v[i, j]), (h[i, j + 1], v[i, j + 1])])
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


def _corners(centres: np.ndarray) -> np.ndarray:
    """Cell corners (ny + 1, nx + 1) from the 2-D centres (at least 2 x 2) of a curvilinear grid.

    Inner corners average four centres; outer ones extend the grid by half a cell, linearly.
    """
    padded = np.pad(np.asarray(centres, dtype=float), 1, mode="reflect", reflect_type="odd")
    return 0.25 * (padded[:-1, :-1] + padded[1:, :-1] + padded[:-1, 1:] + padded[1:, 1:])


def _fill_centres(centres: np.ndarray) -> np.ndarray:
    """Curvilinear centres with NaN ones interpolated (or extended) linearly along rows, then columns.

    So neighbours' corners follow the grid; lines with fewer than two finite centres stay NaN.
    """
    def line(c: np.ndarray) -> np.ndarray:
        known = np.flatnonzero(np.isfinite(c))
        if known.size < 2 or known.size == c.size:
            return c
        k = np.arange(c.size)
        out = np.interp(k, known, c[known])
        for side, (a, b) in ((k < known[0], known[:2]), (k > known[-1], known[-2:])):
            out[side] = c[a] + (k[side] - a) * (c[b] - c[a]) / (b - a)
        return out

    filled = np.asarray(centres, dtype=float)
    for axis in (1, 0):
        filled = np.apply_along_axis(line, axis, filled)
    return filled


def _coord_note(name: str, coord: xr.DataArray | None, value: Any) -> str:
    """``"z = 4.2 m"``: a coordinate value, rounded for a title, with its units."""
    if coord is not None and name == "layer":
        return f"layer {_fmt_value(value)}"
    units = pretty_units(coord.attrs.get("units")) if coord is not None else ""
    text = _fmt_value(value, _spacing(coord))
    return f"{name} = {text}" + (f" {units}" if units else "")


def _scalar_notes(da: xr.DataArray) -> list[str]:
    """Notes for the scalar coordinates of ``da``, a ``layer`` first (``"layer 21"``)."""
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
    """A coordinate value for a title: ``digits`` significant digits (more where ``step`` needs them), no exponent.

    Integers whole, trailing zeros dropped; dates as the day, with hours and minutes unless midnight.
    """
    value = np.asarray(value)
    if np.issubdtype(value.dtype, np.datetime64):  # the day, and the time of day where it has one
        day = value.astype("datetime64[D]")
        return str(np.datetime_as_string(value, unit="D" if day == value else "m")).replace("T", " ")
    item = value.item() if value.ndim == 0 else None
    if hasattr(item, "calendar") and hasattr(item, "strftime"):  # a cftime date (noleap, 360_day)
        midnight = (item.hour, item.minute, item.second, item.microsecond) == (0, 0, 0, 0)
        return item.strftime("%Y-%m-%d" if midnight else "%Y-%m-%d %H:%M")
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

    The number (with ``number``) is the ``layer`` coordinate's value, else ``k + 1``.
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


def _coord(da: xr.DataArray, dim: str) -> xr.DataArray | None:
    return da[dim] if dim in da.coords else None


def _panel_norms(values: list[Any], uncertainties: list[Any], percentiles: tuple[float, float],
                 log: bool) -> tuple[mcolors.Normalize, mcolors.Normalize | None]:
    """One norm over the value panels' arrays, one over the std and error panels' (or None), each robust."""
    vnorm = make_norm(*robust_limits(*values, percentiles=percentiles, log=log), log=log)
    if not uncertainties:
        return vnorm, None
    return vnorm, make_norm(*robust_limits(*uncertainties, percentiles=percentiles, log=log), log=log)


def wrap_label(text: str, chars: int) -> str:
    """``text`` broken at spaces into lines of at most ``chars`` characters.

    Trailing units in brackets never break nor sit alone on the last line; longer words stay whole.

    Parameters
    ----------
    text : str
    chars : int

    Returns
    -------
    str
    """
    text = text.strip()
    units = re.search(r"\[[^\[\]]*\]$", text)
    words = text[:units.start()].split() if units else text.split()
    words += [units.group(0)] if units else []
    lines: list[list[str]] = []
    for word in words:
        if lines and len(" ".join([*lines[-1], word])) <= chars:
            lines[-1].append(word)
        else:
            lines.append([word])
    if units and len(lines) > 1 and len(lines[-1]) == 1 and len(lines[-2]) > 1:
        lines[-1].insert(0, lines[-2].pop())
    return "\n".join(" ".join(line) for line in lines)


def _extend(mappable, axes) -> str:
    """Which ends of ``mappable``'s colour scale clip the data drawn with it on ``axes``:
    ``"neither"``, ``"min"``, ``"max"`` or ``"both"``."""
    norm = mappable.norm
    if norm.vmin is None or norm.vmax is None:
        return "neither"
    drawn = [c for ax in np.ravel(axes) for c in [*ax.collections, *ax.images] if getattr(c, "norm", None) is norm]
    low = high = False
    for artist in drawn if mappable in drawn else [mappable, *drawn]:
        data = artist.get_array()
        values = np.ma.compressed(np.ma.masked_invalid(np.ma.asarray(data, dtype=float))) if data is not None else []
        if len(values):
            low, high = low or bool(values.min() < norm.vmin), high or bool(values.max() > norm.vmax)
    return ("both" if high else "min") if low else ("max" if high else "neither")


def _colourbar(fig, mappable, axes, label: str, gid: str, **kwargs: Any):
    """A colourbar for ``axes``, labelled, with readable log ticks and arrows at the ends that clip
    the data, its axes tagged ``gid``."""
    kwargs.setdefault("extend", _extend(mappable, axes))
    cb = fig.colorbar(mappable, ax=axes, **kwargs)
    cb.set_label(label)
    _style_colorbar(cb)
    cb.ax.set_gid(gid)
    return cb


def _offset_above(axis) -> None:
    """Draw the offset text of a colourbar's x axis above the bar, clear of its wrapped label."""
    def place(bboxes, bboxes2) -> None:
        x, _ = axis.offsetText.get_position()
        pad = axis.OFFSETTEXTPAD * axis.axes.figure.dpi / 72  # (get_figure(root=) needs matplotlib 3.10)
        axis.offsetText.set_position((x, axis.axes.bbox.ymax + pad))
        axis.offsetText.set_verticalalignment("bottom")

    axis._update_offset_text_position = place


def _style_colorbar(cb) -> None:
    """Readable log colourbar ticks (1-2-5 steps, plain numbers); a horizontal bar's offset text above it."""
    if not isinstance(cb.norm, mcolors.LogNorm):
        if cb.orientation == "horizontal":
            _offset_above(cb.ax.xaxis)
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
