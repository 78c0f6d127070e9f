"""How a Dataset is laid out in a written NetCDF file: CF-tidy attributes and encodings."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError
from .labelling import point_geometry
from .packing import kept_fill

__all__ = ["CF_VERSION", "check_writable"]

#: The CF version written files declare, unless the input's is later or CF-1.9 types are held.
CF_VERSION = "CF-1.8"
_CF_TOKEN = re.compile(r"^CF-(\d+)\.(\d+)$")
_CHUNK_BYTES = 1 << 20
#: what netCDF-C refuses in a name besides "/": control characters (and spaces at either end)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Encoding keys of how a variable was read, recomputed for the written file.
_LAYOUT_KEYS = ("zlib", "complevel", "shuffle", "compression", "compression_opts",
                "chunksizes", "contiguous", "szip", "bzip2", "blosc", "zstd",
                "blosc_shuffle", "szip_coding", "szip_pixels_per_block", "fletcher32",
                "preferred_chunks")


# --------------------------------------------------------------------------- conventions
def _conventions(value: Any, minimum: tuple[int, int] = (1, 8)) -> str:
    """Merge ``CF-<minimum>`` into a ``Conventions`` attribute, keeping a later CF and other names."""
    text = "" if value is None else str(value)
    tokens = [t.strip() for t in (text.split(",") if "," in text else text.split())]
    tokens = [t for t in tokens if t]
    others = [t for t in tokens if not _CF_TOKEN.match(t)]
    best = minimum
    for tok in tokens:
        match = _CF_TOKEN.match(tok)
        if match:
            best = max(best, (int(match.group(1)), int(match.group(2))))
    names = [f"CF-{best[0]}.{best[1]}", *others]
    sep = ", " if any(" " in n for n in names) else " "
    return sep.join(names)


def _clean_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Make attribute values storable in netCDF (bools -> ints, None dropped, dicts -> JSON)."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (bool, np.bool_)):
            value = int(value)
        elif isinstance(value, Mapping):
            value = json.dumps(value, default=str, sort_keys=True)
        elif isinstance(value, (list, tuple)) and any(isinstance(x, (bool, np.bool_))
                                                       for x in value):
            value = [int(x) if isinstance(x, (bool, np.bool_)) else x for x in value]
        elif isinstance(value, np.ndarray) and value.dtype == bool:
            value = value.astype(np.int8)
        out[str(key)] = value
    return out


# --------------------------------------------------------------------------- encodings
def _chunksizes(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunk shape of at most ~1 MiB, halving leading dims first (whole trailing planes kept)."""
    chunks = list(shape)
    for i in range(len(chunks)):
        while math.prod(chunks) * itemsize > _CHUNK_BYTES and chunks[i] > 1:
            chunks[i] = math.ceil(chunks[i] / 2)
    return tuple(chunks)


def _kept_chunks(given: Any, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The chunk shape a variable was read with (or given), cut to ``shape``; None without a usable one."""
    if not isinstance(given, (tuple, list)) or len(given) != len(shape):
        return None
    if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c > 0 for c in given):
        return None
    return tuple(int(min(c, max(n, 1))) for c, n in zip(given, shape))


def _has_nan(var: xr.Variable) -> bool:
    if not np.issubdtype(var.dtype, np.floating):
        return False
    return bool(np.isnan(np.asarray(var.values)).any())


def _check_object(name: str, var: xr.Variable) -> None:
    """Object arrays must hold strings (or bytes); anything else cannot go to netCDF."""
    if var.dtype != object:
        return
    for item in np.ravel(np.asarray(var.values)):
        if isinstance(item, (str, bytes)):
            continue
        if item is None or (isinstance(item, float) and math.isnan(item)):
            continue
        raise TypeError(
            f"variable {name!r} holds {type(item).__name__} objects; only strings (or numbers "
            "in a numeric dtype) can be written to netCDF"
        )


def _is_cftime(var: xr.Variable) -> bool:
    if var.dtype != object or var.size == 0:
        return False
    try:
        import cftime
    except ImportError:  # pragma: no cover - cftime comes with netCDF4
        return False
    first = np.ravel(np.asarray(var.values))[0]
    return isinstance(first, cftime.datetime)


def _time_encoding(var: xr.Variable, enc: dict[str, Any]) -> dict[str, Any]:
    """Store times as int32 when that is exact and in range (int64 needs CF-1.9)."""
    stored = enc.get("dtype")
    if stored is not None and np.dtype(stored) != np.int64:
        return enc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if var.dtype.kind == "m":
                nums, units = xr.coding.times.encode_cf_timedelta(
                    np.asarray(var.values), enc.get("units"))
                calendar = None
            else:
                nums, units, calendar = xr.coding.times.encode_cf_datetime(
                    np.asarray(var.values), enc.get("units"), enc.get("calendar"))
    except Exception:  # noqa: BLE001 - leave the hard cases to xarray
        return enc
    nums = np.asarray(nums)
    if nums.dtype.kind not in "iu":
        return enc
    if nums.size and (nums.min() <= -(2**31) or nums.max() >= 2**31):
        return enc
    enc = {**enc, "dtype": np.dtype(np.int32)}
    enc.setdefault("units", units)
    if calendar is not None:
        enc.setdefault("calendar", calendar)
    return enc


def _stored_dtype(var: xr.Variable) -> np.dtype | None:
    """The netCDF type a variable will be written as (None for strings)."""
    if var.encoding.get("dtype") is not None:
        try:
            return np.dtype(var.encoding["dtype"])
        except TypeError:
            return None
    if var.dtype.kind in "Mm" or _is_cftime(var):
        return np.dtype(np.int64)
    if var.dtype.kind == "b":
        return np.dtype(np.int8)
    if var.dtype.kind in "OSU":
        return None
    return var.dtype


def _needs_cf19(ds: xr.Dataset) -> bool:
    """Whether a variable is stored as a 64-bit or unsigned integer, types CF-1.8 lacks."""
    for var in ds.variables.values():
        dtype = _stored_dtype(var)
        if dtype is not None and (dtype.kind == "u" or (dtype.kind == "i" and dtype.itemsize > 4)):
            return True
    return False


def _variable_encoding(name: str, var: xr.Variable, *, is_coord: bool,
                       complevel: int) -> dict[str, Any]:
    enc = {k: v for k, v in var.encoding.items() if k not in _LAYOUT_KEYS}
    dtype = var.dtype
    kind = dtype.kind
    if kind in "Mm" or _is_cftime(var):
        enc = _time_encoding(var, enc)
        if kind == "O":
            kind = "M"
    stored = np.dtype(enc["dtype"]) if enc.get("dtype") is not None else None
    if stored is None and dtype == np.float16:  # netCDF has no half precision: float32 holds it exactly
        stored = np.dtype(np.float32)
        enc["dtype"] = stored

    if kind in "OSU":  # strings: vlen str (NETCDF4), never compressed, no numeric fill
        _check_object(name, var)
        enc.pop("_FillValue", None)
        enc.pop("missing_value", None)
        return enc

    packed = stored is not None and stored.kind != "f" and kind == "f"
    if is_coord:
        # CF 2.5.1: no fill value on coordinates unless they really have gaps
        if not packed and not _has_nan(var):
            enc["_FillValue"] = None
            enc.pop("missing_value", None)
    elif kind == "f" and not packed:
        fill_dtype = stored if stored is not None else dtype
        kept = kept_fill(enc, fill_dtype)  # a number such as -999 the input was read with
        enc.pop("missing_value", None)
        enc.update(kept or {"_FillValue": fill_dtype.type(np.nan)})

    numeric = kind in "biufMm"
    if numeric and var.ndim > 0 and var.size > 0 and complevel > 0 and not is_coord:
        itemsize = stored.itemsize if stored is not None else (
            8 if kind in "Mm" else dtype.itemsize)
        enc["zlib"] = True
        enc["complevel"] = int(complevel)
        enc["shuffle"] = True
        enc["chunksizes"] = _kept_chunks(var.encoding.get("chunksizes"), var.shape) or _chunksizes(
            var.shape, itemsize)
    return enc


def _prepare(ds: xr.Dataset, complevel: int) -> xr.Dataset:
    """A shallow copy of ``ds`` with tidy attributes and encodings (new dicts); ``ds`` is untouched."""
    out = ds.copy(deep=False)
    coord_names = set(ds.coords)
    for name, var in out.variables.items():
        attrs = dict(var.attrs)
        enc = dict(var.encoding)
        # xarray wants these in encoding only; a decoded file never has them in attrs.
        for key in ("_FillValue", "missing_value"):
            if key in attrs:
                value = attrs.pop(key)
                enc.setdefault(key, value)
        var.attrs = _clean_attrs(attrs)
        var.encoding = enc
        var.encoding = _variable_encoding(str(name), var, is_coord=name in coord_names,
                                          complevel=complevel)
    attrs = _clean_attrs(ds.attrs)
    attrs["Conventions"] = _conventions(ds.attrs.get("Conventions"),
                                        (1, 9) if _needs_cf19(out) else (1, 8))
    out.attrs = attrs
    out.encoding = {k: v for k, v in ds.encoding.items() if k == "unlimited_dims"}
    return point_geometry(out)


# --------------------------------------------------------------------------- writability
def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text"
    return None


def _name_problem(name: Any) -> str | None:
    """Why NetCDF cannot hold ``name`` as the name of a variable, dim or attribute, or None."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not text"
    if not name:
        return "is empty"
    if "/" in name:
        return "holds '/' (NetCDF-4 separates groups with it)"
    if _CONTROL.search(name):
        return "holds a control character"
    if name != name.strip():
        return "starts or ends with a space"
    return _text_problem(name)


def _attribute_problem(value: Any) -> str | None:
    """Why NetCDF cannot hold ``value`` as an attribute (as :func:`_clean_attrs` leaves it), or None."""
    if value is None or isinstance(value, (bool, np.bool_, Mapping, bytes)):
        return None
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, int):
        return None if -(2**63) <= value < 2**64 else "is an integer beyond 64 bits"
    if isinstance(value, float):
        return None
    if not isinstance(value, (list, tuple, np.ndarray, np.generic)):
        return f"is a {type(value).__name__}"
    try:
        arr = np.asarray(value)
    except ValueError:
        return "is a nested list of unequal lengths"
    if arr.ndim > 1:
        return f"is a nested list or a {arr.ndim}-D array (NetCDF attributes are 1-D)"
    if arr.dtype.kind == "S" and arr.ndim:
        return "is an array of bytes (give text, or one bytes value)"
    if arr.dtype.kind in "US":
        return next((p for p in map(_text_problem, map(str, arr.ravel())) if p), None)
    if arr.dtype.kind in "biu" or (arr.dtype.kind == "f" and arr.dtype.itemsize <= 8):
        return None
    return f"holds {arr.dtype} values"


def _dtype_problem(var: xr.Variable) -> str | None:
    """Why NetCDF cannot hold the values of ``var``, or None."""
    kind, dtype = var.dtype.kind, var.dtype
    if kind == "c":
        return f"is complex ({dtype})"
    if kind == "V":
        return f"has a structured dtype ({dtype})"
    if kind == "f" and dtype.itemsize > 8:
        return f"is {dtype}, beyond double precision"
    if kind == "O" and not _is_cftime(var):  # as _check_object: strings, or None and NaN for gaps
        for item in np.ravel(np.asarray(var.values)):
            gap = item is None or (isinstance(item, float) and math.isnan(item))
            if not (gap or isinstance(item, (str, bytes))):
                return f"holds {type(item).__name__} objects"
    return None


def check_writable(ds: xr.Dataset) -> None:
    """Refuse what a NetCDF-4 file cannot hold: names, dtypes and attributes (before any work).

    Parameters
    ----------
    ds : xarray.Dataset

    Raises
    ------
    InputError
        Naming the variable, dim or attribute, why, and what to do.
    """
    rename = "rename it (ds.rename, or ncrename in the file)"
    for dim in ds.dims:
        problem = _name_problem(dim)
        if problem:
            raise InputError(f"the output cannot be written to NetCDF: dim {dim!r} {problem}: {rename}")
    for name, var in ds.variables.items():
        problem = _name_problem(name)
        if problem:
            raise InputError(f"the output cannot be written to NetCDF: variable {name!r} {problem}: {rename}")
        problem = _dtype_problem(var)
        if problem:
            raise InputError(
                f"the output cannot be written to NetCDF: variable {name!r} {problem}, which NetCDF cannot "
                f"hold: leave it out (ds.drop_vars, or ncks -x -v {name} in the file) or store it as real "
                "numbers (e.g. its real and imaginary parts as two variables)"
            )
    owners = [("the Dataset", ds.attrs)] + [(f"variable {n!r}", v.attrs) for n, v in ds.variables.items()]
    for owner, attrs in owners:
        for key, value in attrs.items():
            problem = _name_problem(str(key))
            if problem:
                raise InputError(f"the output cannot be written to NetCDF: the name of attribute {key!r} of "
                                 f"{owner} {problem}: rename or delete it (ncatted -a in the file)")
            problem = _attribute_problem(value)
            if problem:
                raise InputError(
                    f"the output cannot be written to NetCDF: attribute {key!r} of {owner} ({value!r:.60}) "
                    f"{problem}: NetCDF attributes hold text, numbers or flat lists of them; make it one "
                    "(e.g. flatten it, or str(value)) or delete it (ncatted -a in the file)"
                )


def check_encoding(ds: xr.Dataset, encoding: Any) -> None:
    """Refuse an ``encoding=`` argument that is not a mapping of ``ds``'s variable names to dicts.

    Raises
    ------
    TypeError
        Not a mapping of names to dicts.
    ValueError
        A name ``ds`` does not hold.
    """
    if encoding is None:
        return
    if not isinstance(encoding, Mapping) or not all(isinstance(e, Mapping) for e in encoding.values()):
        raise TypeError("encoding must map variable names to dicts, e.g. {'kx': {'complevel': 9}}")
    unknown = [str(n) for n in encoding if n not in ds.variables]
    if unknown:
        raise ValueError(f"encoding names {', '.join(unknown)}, which the Dataset does not hold; "
                         f"its variables: {', '.join(map(str, ds.variables))}")
