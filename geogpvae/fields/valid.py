"""CF's valid bounds (``valid_min``, ``valid_max``, ``valid_range``): values outside are missing."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from ..errors import warn_caller

__all__ = ["attr_numbers", "clip_fills", "packing_of", "undecoded_fills", "unpacked_bounds", "valid_bounds"]

_BOUND_KEYS = ("valid_min", "valid_max", "valid_range")


def attr_numbers(value: Any) -> np.ndarray:
    """An attribute's numbers (a scalar, a list or an array) as a flat float64 array.

    Parameters
    ----------
    value : scalar, sequence or ndarray

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    return np.atleast_1d(np.asarray(value, dtype=np.float64)).ravel()


def undecoded_fills(var: xr.DataArray, values: np.ndarray) -> np.ndarray:
    """Where ``values`` hold the fill value in the variable's own float type (a float64 fill on float32 data).

    Parameters
    ----------
    var : xarray.DataArray
        Its dtype and encoding count.
    values : ndarray

    Returns
    -------
    ndarray of bool, the shape of ``values``
    """
    enc = var.encoding
    fills = [enc[k] for k in ("_FillValue", "missing_value") if enc.get(k) is not None]
    if var.dtype.kind != "f" or not fills or "scale_factor" in enc or "add_offset" in enc:
        return np.zeros(np.shape(values), dtype=bool)
    numbers = np.concatenate([attr_numbers(f) for f in fills])
    numbers = numbers[np.isfinite(numbers)]
    cast = numbers.astype(var.dtype).astype(np.float64)
    if np.array_equal(cast, numbers):  # the fill is exact in the variable's type: xarray decoded it
        return np.zeros(np.shape(values), dtype=bool)
    return np.isin(values, cast)


def packing_of(encoding: Mapping[str, Any]) -> tuple[float, float]:
    """``(scale_factor, add_offset)`` of an encoding, ``(1.0, 0.0)`` where absent.

    Parameters
    ----------
    encoding : mapping

    Returns
    -------
    scale, offset : float
    """
    scale = float(attr_numbers(encoding.get("scale_factor", 1.0))[0])
    offset = float(attr_numbers(encoding.get("add_offset", 0.0))[0])
    return scale, offset


def _decoded(codes: np.ndarray, encoding: Mapping[str, Any]) -> np.ndarray:
    """Bound codes decoded as xarray decodes the data (its float type), so values at a bound compare equal."""
    stored = encoding.get("dtype")
    raw = codes.astype(np.dtype(stored)) if stored is not None and np.dtype(stored).kind in "iuf" else codes
    attrs = {k: encoding[k] for k in ("scale_factor", "add_offset") if k in encoding}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = xr.conventions.decode_cf_variable("bounds", xr.Variable(("b",), raw, attrs=attrs))
    return np.asarray(back.values, dtype=np.float64)


def valid_bounds(attrs: Mapping[str, Any], encoding: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The valid bounds of a decoded variable, in the units of its values.

    Parameters
    ----------
    attrs : mapping
        ``valid_range``, or ``valid_min``/``valid_max`` (which win).
    encoding : mapping
        Bounds of packed data are codes, converted here.

    Returns
    -------
    low, high : float or None
    """
    low = high = None
    if "valid_range" in attrs:
        bounds = attr_numbers(attrs["valid_range"])
        if bounds.size == 2:
            low, high = float(bounds[0]), float(bounds[1])
    if "valid_min" in attrs:
        low = float(attr_numbers(attrs["valid_min"])[0])
    if "valid_max" in attrs:
        high = float(attr_numbers(attrs["valid_max"])[0])
    if "scale_factor" in encoding or "add_offset" in encoding:
        ends = _decoded(np.array([0.0 if low is None else low, 0.0 if high is None else high]), encoding)
        low, high = (None if low is None else float(ends[0])), (None if high is None else float(ends[1]))
        if packing_of(encoding)[0] < 0:
            low, high = high, low
    return low, high


def clip_fills(
    name: str, data: np.ndarray, filled: np.ndarray, attrs: Mapping[str, Any], encoding: Mapping[str, Any]
) -> np.ndarray:
    """``data`` with its fills moved to the nearest valid bound, with a warning.

    Parameters
    ----------
    name : str
    data : ndarray of float, shape S
        Modified in place.
    filled : ndarray of bool, shape S
    attrs, encoding : mapping
        See :func:`valid_bounds`.

    Returns
    -------
    ndarray
        ``data``.
    """
    low, high = valid_bounds(attrs, encoding)
    if low is None and high is None:
        return data
    fills = data[filled]
    below = fills < low if low is not None else np.zeros(fills.shape, dtype=bool)
    above = fills > high if high is not None else np.zeros(fills.shape, dtype=bool)
    if not (below.any() or above.any()):
        return data
    fills[below] = low
    fills[above] = high
    data[filled] = fills
    parts = [f"{int(below.sum())} below {low:.9g}" if below.any() else "",
             f"{int(above.sum())} above {high:.9g}" if above.any() else ""]
    # a log model keeps fills above 0, not below an upper bound (a 0-100 % concentration)
    hint = (" A positive variable without zeros can be modelled with transforms='log' instead"
            if high is None else "")
    warn_caller(
        f"{name}: {' and '.join(p for p in parts if p)} of its {fills.size} fills lay outside its "
        f"valid range and were set to the nearest bound (the nearest valid value; {name}_std is "
        "unchanged). CF counts values outside valid_min/valid_max/valid_range "
        f"as missing, and netCDF4, ncview or Panoply would have hidden them.{hint}"
    )
    return data


def unpacked_bounds(attrs: Mapping[str, Any], encoding: Mapping[str, Any], dtype: np.dtype) -> dict[str, Any]:
    """``attrs`` with the valid bounds of a packed input in the values' units, as ``dtype``.

    Parameters
    ----------
    attrs, encoding : mapping
        The input variable's.
    dtype : numpy.dtype

    Returns
    -------
    dict
        A new dict.
    """
    out = dict(attrs)
    if "scale_factor" not in encoding and "add_offset" not in encoding:
        return out
    low, high = valid_bounds(attrs, encoding)  # in the values' units, ends swapped for a negative step
    had_range = "valid_range" in out
    for key in _BOUND_KEYS:
        out.pop(key, None)
    if had_range and low is not None and high is not None and not {"valid_min", "valid_max"} & set(attrs):
        out["valid_range"] = np.array([low, high], dtype=dtype)
        return out
    if low is not None:
        out["valid_min"] = dtype.type(low)
    if high is not None:
        out["valid_max"] = dtype.type(high)
    return out
