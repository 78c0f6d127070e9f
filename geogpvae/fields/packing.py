"""Whether an imputed variable keeps the integer packing it was read with, or its fill value."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .valid import packing_of

__all__ = ["STEP_SHARE", "kept_fill", "kept_packing"]

#: largest packing step, as a share of the fills' smallest std, that keeps the packing (< 0.1 % variance)
STEP_SHARE = 0.1

_PACKING_KEYS = ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value")
_MISSING_KEYS = ("_FillValue", "missing_value")


def kept_packing(
    encoding: Mapping[str, Any],
    data: np.ndarray,
    std: np.ndarray,
    observed: np.ndarray,
    imputed: np.ndarray,
) -> dict[str, Any] | None:
    """The packing ``v`` can be written with, or None to write it unpacked.

    Kept when the step is at most :data:`STEP_SHARE` of the fills' smallest std and a round trip
    through xarray keeps observed values exact and fills within a step (``int16`` may widen).

    Parameters
    ----------
    encoding : mapping
        The input variable's encoding.
    data, std : ndarray of float, shape S
        ``v`` and its predictive std (units of ``v``).
    observed, imputed : ndarray of bool, shape S

    Returns
    -------
    dict or None
    """
    stored = encoding.get("dtype")
    # unpacked integers would fail the round trip too: a cheaper refusal
    if stored is None or "scale_factor" not in encoding or "_Unsigned" in encoding:
        return None
    stored = np.dtype(stored)
    scale, offset = packing_of(encoding)
    if stored.kind != "i" or not (math.isfinite(scale) and scale != 0 and math.isfinite(offset)):
        return None
    if imputed.any() and not abs(scale) <= STEP_SHARE * float(np.min(std[imputed])):
        return None
    has_value = observed | imputed
    codes = np.round((data[has_value].astype(np.float64) - offset) / scale)
    for dtype in (stored, np.dtype(np.int32)) if stored.itemsize < 4 else (stored,):
        info = np.iinfo(dtype)
        # one code of margin: xarray may round in float32, and the lowest code is kept for empty cells
        if codes.size and (codes.min() <= info.min + 1 or codes.max() >= info.max - 1):
            continue
        packing = {k: encoding[k] for k in _PACKING_KEYS if k in encoding}
        packing["dtype"] = dtype
        if not any(encoding.get(k) is not None for k in _MISSING_KEYS) and not has_value.all():
            packing["_FillValue"] = dtype.type(info.min)  # empty cells must read back as missing
        return packing if _round_trip(data, observed, imputed, packing, abs(scale)) else None
    return None


def _round_trip(data: np.ndarray, observed: np.ndarray, imputed: np.ndarray, packing: dict[str, Any],
                step: float) -> bool:
    """Whether ``data`` encoded with ``packing`` decodes to exact observations and fills within ``step``."""
    variable = xr.Variable(("cell",), data.ravel(), encoding=dict(packing))
    with warnings.catch_warnings():  # xarray's notes on fill values concern files, not this check
        warnings.simplefilter("ignore")
        back = np.asarray(xr.conventions.decode_cf_variable(
            "v", xr.conventions.encode_cf_variable(variable)).values)
    if back.dtype != data.dtype:
        return False
    back = back.reshape(data.shape)
    with np.errstate(invalid="ignore"):
        fills_close = bool(np.all(np.abs(back[imputed] - data[imputed]) <= step))
    return np.array_equal(back[observed], data[observed]) and fills_close


def kept_fill(encoding: Mapping[str, Any], dtype: np.dtype, *arrays: np.ndarray) -> dict[str, Any]:
    """The input's finite fill value for an unpacked float output, unless a value to write equals it.

    Parameters
    ----------
    encoding : mapping
    dtype : numpy.dtype
        The float type written.
    *arrays : ndarray
        The values to be written (``v`` and ``v_std``).

    Returns
    -------
    dict
        ``{"_FillValue": fill}`` (and ``missing_value``), or empty: NaN is the fill.
    """
    if "scale_factor" in encoding or "add_offset" in encoding:
        return {}  # a packing's fill value is a code, not a number in the units of the values
    found = [encoding.get(k) for k in _MISSING_KEYS]
    numbers = [np.asarray(v) for v in found if v is not None]
    if not numbers or any(n.size != 1 or n.dtype.kind not in "iuf" for n in numbers):
        return {}
    if str(encoding.get("_Unsigned", "")).lower() == "true":  # signed codes of unsigned values: -1 is 255
        numbers = [n.astype(f"u{n.dtype.itemsize}") if n.dtype.kind == "i" else n for n in numbers]
    fill = dtype.type(numbers[0].item())
    if not np.isfinite(fill) or float(fill) != numbers[0].item():
        return {}  # NaN already, or changed by the cast
    if not all(_same_number(numbers[0], n) for n in numbers[1:]):
        return {}  # two different fill values
    if any(np.any(np.asarray(a) == fill) for a in arrays):
        return {}
    return {"_FillValue": fill, **({"missing_value": fill} if found[1] is not None else {})}


def _same_number(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two scalar fills name one number (floats compared in the narrower precision)."""
    if a.dtype.kind == b.dtype.kind == "f":
        narrow = min(a.dtype, b.dtype, key=lambda d: d.itemsize)
        return bool(narrow.type(a.item()) == narrow.type(b.item()))
    return bool(a.item() == b.item())
