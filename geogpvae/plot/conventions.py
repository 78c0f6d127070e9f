"""Reading an imputed Dataset: ``v``, ``v_std``, ``v_imputed``, axis roles and label room."""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import numpy as np
import xarray as xr

from .style import _coord, _units_suffix, _with_units, label_for

_LON_NAMES = ("lon", "longitude", "nav_lon")
_LAT_NAMES = ("lat", "latitude", "nav_lat")
_X_NAMES = ("x", "easting", "xc")
_Y_NAMES = ("y", "northing", "yc")
_Z_NAMES = ("z", "depth", "layer", "level", "lev")

#: panel titles by panel key, shared by the layer slices and the maps
PANEL_TITLES = {
    "observed": "observed",
    "imputed": "imputed",
    "truth": "truth",
    "std": "predictive std",
    "error": "|imputed \u2212 truth|",
}


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
        if self.value.dtype.kind in "fc" and not np.isfinite(self.value.values).any():
            raise ValueError(
                f"{var!r} has no value anywhere (every entry is NaN): there is nothing to draw"
            )

    @property
    def name(self) -> str:
        """The variable's ``long_name``, else its name: for titles and labels."""
        return str(self.value.attrs.get("long_name") or self.var)


def _uncertainty_label(f: _Field, unc_keys: Any) -> str:
    """The label of the std/error colourbar: "std and |error| of porosity [1]"."""
    what = " and ".join({"std": "std", "error": "|error|"}[k] for k in unc_keys)
    return _with_units(f"{what} of {f.name}", f.value.attrs.get("units"))



def _status(
    value: Any, std: Any = None, flag: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean masks ``(observed, imputed, inside)`` of one variable, on the same shape.

    By the flag; without it a positive std is imputed, 0 observed (no std: every finite value observed).
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
    truth = _matched(truth, like)
    # same locations: take the field's coordinates so that positional selection agrees
    return truth.assign_coords({d: like[d] for d in like.dims if d in like.coords})


def _matched(truth: xr.DataArray, like: xr.DataArray) -> xr.DataArray:
    """``truth`` in the field's order, matched on shared coordinates (ValueError if other locations)."""
    for dim in like.dims:
        names = [str(n) for n, c in like.coords.items() if c.dims == (dim,)
                 and n in truth.coords and truth[n].dims == (dim,)]
        if not names:
            continue
        mine = [np.asarray(like[n].values) for n in names]
        theirs = [np.asarray(truth[n].values) for n in names]
        if all(_same(a, b) for a, b in zip(mine, theirs)):
            continue
        to_mine, to_theirs = np.lexsort(mine[::-1]), np.lexsort(theirs[::-1])
        if not all(_same(a[to_mine], b[to_theirs]) for a, b in zip(mine, theirs)):
            raise ValueError(
                f"truth's {', '.join(names)} along {dim!r} are not the field's: the truth must be "
                "at the same locations (in any order)"
            )
        order = np.empty_like(to_mine)
        order[to_mine] = to_theirs
        truth = truth.isel({dim: order})
    return truth


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal coordinate values: to float32's round-off for floats (a file may store them so)."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        scale = max(float(np.nanmax(np.abs(a), initial=0.0)), float(np.nanmax(np.abs(b), initial=0.0)), 1e-300)
        return bool(np.allclose(a, b, rtol=1e-6, atol=1e-6 * scale, equal_nan=True))
    return bool(np.array_equal(a, b))


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
    """Sizes, in inches, of the text and spacing around a panel, read from rcParams, to size figures before drawing."""

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
