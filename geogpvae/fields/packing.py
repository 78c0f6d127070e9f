"""Whether an imputed variable can keep the integer packing it was read with.

Files such as ERA5's store a variable as ``int16`` codes with ``scale_factor`` and
``add_offset``: two bytes per value instead of eight. An imputed ``v`` holds the observed
values, which are exact multiples of the packing's step, and fills, which are continuous
predictions. Packing the fills rounds them to the step, which is harmless when the step is
far below their uncertainty, and keeps the output as small as the input. :func:`kept_packing`
decides, per variable, from the values themselves:

* the step (``scale_factor``) must be at most :data:`STEP_SHARE` of the smallest predictive
  standard deviation of a fill, so that rounding adds at most ``STEP_SHARE**2 / 12`` (under
  0.1 %) to a fill's variance;
* every value, observed or filled, must have a code in the integer type's range that is not
  the fill value; where fills leave an ``int16`` or ``int8`` range, the codes widen to
  ``int32`` with the same step and offset (four bytes instead of eight);
* the whole variable goes through xarray's own encoding and decoding, as a file would: the
  observed values must come back bit for bit and every fill within one step (not as missing);
* cells left without a value must read back as missing: a packing without ``_FillValue`` or
  ``missing_value`` gets the type's lowest code as ``_FillValue``, which no value may use.

Otherwise the packing is dropped and ``v`` is written in its decoded float type, as before;
its ``valid_min``/``valid_max``/``valid_range``, which CF gives in codes for packed data, are
then converted to the units of ``v`` (:func:`geogpvae.fields.valid.unpacked_bounds`).

A variable written unpacked keeps the fill value it was read with (:func:`kept_fill`): a
float32 ``sst`` with ``_FillValue = -999`` is written with ``-999`` in its empty cells (and so
is ``sst_std``), since tools downstream may test for that number rather than for NaN. NaN
stays the fill value where the input had none, or where a value to be written equals it.
Pure numpy/xarray: no torch, no I/O.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .valid import packing_of

__all__ = ["STEP_SHARE", "kept_fill", "kept_packing"]

#: the largest packing step, as a share of the smallest predictive std of a fill, that keeps
#: the packing (rounding to the step then adds at most 0.1**2 / 12 < 0.1 % to the variance)
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

    Parameters
    ----------
    encoding : mapping
        The input variable's encoding, as xarray read it (``dtype``, ``scale_factor``,
        ``add_offset``, ``_FillValue``, ``missing_value``).
    data : ndarray of float, shape S
        ``v``: observed values, fills, NaN elsewhere.
    std : ndarray of float, shape S
        The predictive standard deviation, read at the fills (in the units of ``v``).
    observed, imputed : ndarray of bool, shape S
        Where ``v`` was observed and where it was filled.

    Returns
    -------
    dict or None
        The packing keys of ``encoding``, with ``dtype`` widened to ``int32`` where the
        fills need it and a ``_FillValue`` added where cells stay empty and there was none;
        None where the input was not packed (an integer ``dtype`` with a ``scale_factor``;
        ``_Unsigned`` packings are not kept), the step is too coarse for the fills, or the
        round trip through xarray fails (see the module docstring).
    """
    stored = encoding.get("dtype")
    # unpacked integers would fail the round trip too (their codes decode to integers), but
    # the whole variable need not be encoded to find that out
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
    """Whether ``data`` written with ``packing`` reads back right (see the module docstring)."""
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
    """The input's fill value, for an output variable of float ``dtype`` written unpacked.

    Parameters
    ----------
    encoding : mapping
        The input variable's encoding, as xarray read it (``_FillValue``, ``missing_value``).
    dtype : numpy.dtype
        The float type the output is written in.
    *arrays : ndarray
        The values to be written (``v`` and ``v_std``); none may equal the fill value.

    Returns
    -------
    dict
        ``{"_FillValue": fill}`` (and ``missing_value`` where the input had it), the input's
        scalar, finite fill value in ``dtype``; empty where the input had none (NaN is then
        the fill), was packed (its fill value is a code), has two different ones (a float32
        and a float64 of the same number count as one), loses its value in the cast to
        ``dtype``, or where a value to be written equals it (that value would read back as
        missing). With ``_Unsigned = "true"`` an integer fill is read as the unsigned value
        it codes (a byte's -1 is 255).
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
    """Whether two scalar fill values name the same number: two floats compared in the narrower
    of their precisions (a float32 and a float64 ``1e20`` mark the same cells), else exactly."""
    if a.dtype.kind == b.dtype.kind == "f":
        narrow = min(a.dtype, b.dtype, key=lambda d: d.itemsize)
        return bool(narrow.type(a.item()) == narrow.type(b.item()))
    return bool(a.item() == b.item())
