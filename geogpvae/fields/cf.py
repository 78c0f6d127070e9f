"""CF metadata of imputation results: ``v`` filled, ``v_std`` and the ``v_imputed`` flag.

``v_std`` is 0.0 at observed cells; ``v_imputed`` is 0 observed, 1 imputed, -127 where ``v``
has no value, so that ``isnan(v) == isnan(v_std) == (v_imputed == -127)``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .packing import kept_fill, kept_packing
from .valid import clip_fills, undecoded_fills, unpacked_bounds

__all__ = [
    "FLAG_FILL_VALUE",
    "FLAG_IMPUTED",
    "FLAG_MEANINGS",
    "FLAG_OBSERVED",
    "STD_SUFFIX",
    "IMPUTED_SUFFIX",
    "imputation_variables",
    "output_dtype",
    "restore_flag_variables",
]

#: Suffix of the predictive-standard-deviation variable (``v`` -> ``v_std``).
STD_SUFFIX = "_std"
#: Suffix of the imputation-flag variable (``v`` -> ``v_imputed``).
IMPUTED_SUFFIX = "_imputed"


def already_imputed(ds: xr.Dataset, names: Sequence[str]) -> list[str]:
    """The variables of ``names`` whose ``v_imputed`` in ``ds`` marks filled cells (holding a 1).

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of str

    Returns
    -------
    list of str
    """
    return [n for n in names if f"{n}{IMPUTED_SUFFIX}" in ds.data_vars
            and bool((ds[f"{n}{IMPUTED_SUFFIX}"] == 1).any())]


#: Flag value of an observed cell.
FLAG_OBSERVED = np.int8(0)
#: Flag value of an imputed cell.
FLAG_IMPUTED = np.int8(1)
#: Flag value of a cell without any value (outside the domain): a flag, not a fill value, so
#: that plain ``xarray.open_dataset`` reads the flags back as int8.
FLAG_FILL_VALUE = np.int8(-127)
#: ``flag_meanings`` of the flag variable, matching ``flag_values`` ``[0, 1, -127]``.
FLAG_MEANINGS = "observed imputed no_value"

# CF standard-name modifiers (CF appendix C). A name already carrying one gets no other.
_MODIFIERS = ("detection_minimum", "number_of_observations", "standard_error", "status_flag")

# Attributes of the stored form of ``v``, not copied onto the derived variables.
_STORAGE_ATTRS = ("_FillValue", "missing_value")
# Encoding keys of a packed / integer on-disk form, dropped for ``v``: integers would truncate fills.
_PACKING_ENCODING = ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value",
                     "_Unsigned")
# Attributes that describe *where* a value sits, shared by ``v`` and its ancillaries.
_LOCATION_ATTRS = ("grid_mapping", "coordinates")


def _label(name: str, attrs: Mapping[str, Any]) -> str:
    long_name = attrs.get("long_name")
    return str(long_name) if long_name not in (None, "") else str(name)


def _modified_standard_name(standard_name: Any, modifier: str) -> str | None:
    """``"<sn> <modifier>"``, or None when there is no name or it already has a modifier."""
    if not isinstance(standard_name, str) or not standard_name.strip():
        return None
    words = standard_name.split()
    if len(words) > 1 and words[-1] in _MODIFIERS:
        return None
    return f"{words[0]} {modifier}"


def _aligned(x: Any, like: xr.DataArray, what: str) -> Any:
    """``x`` as an array (a dask one stays one) with the shape (and dim order) of ``like``."""
    if isinstance(x, xr.DataArray):
        if set(x.dims) != set(like.dims):
            raise ValueError(
                f"{what} has dims {x.dims}, expected the dims of {like.name!r}: {like.dims}"
            )
        x = x.transpose(*like.dims).data
    if tuple(np.shape(x)) != like.shape:
        raise ValueError(f"{what} has shape {np.shape(x)}, expected {like.shape}")
    return x


def _as_array(x: Any, like: xr.DataArray, what: str) -> np.ndarray:
    """Bring ``x`` to a numpy array with the shape (and dim order) of ``like``."""
    return np.asarray(_aligned(x, like, what))


def _as_mask(x: Any, like: xr.DataArray, what: str) -> np.ndarray:
    arr = _as_array(x, like, what)
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{what} must be boolean, got dtype {arr.dtype}")
        if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
            raise ValueError(f"{what} must be boolean, got NaN in a float array")
        arr = arr != 0
    return arr


def output_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of an imputed variable: a float keeps its own, integers and booleans float64.

    Parameters
    ----------
    dtype : numpy.dtype

    Returns
    -------
    numpy.dtype
    """
    if np.issubdtype(dtype, np.floating):
        return dtype
    if np.issubdtype(dtype, np.integer) or dtype == bool:
        return np.dtype(np.float64)
    raise TypeError(f"cannot impute a variable of dtype {dtype}: it must be numeric")


def imputation_variables(
    name: str,
    values: xr.DataArray,
    filled_values: Any,
    std: Any,
    imputed: Any = None,
    domain: Any = None,
    *,
    attrs: Mapping[str, Any] | None = None,
    transform: str | None = None,
) -> dict[str, xr.DataArray]:
    """Build ``name``, ``name_std`` and ``name_imputed`` for one imputed variable.

    Parameters
    ----------
    name : str
    values : xarray.DataArray, shape S
        The original variable, NaN in holes; dims, coordinates, attrs and encoding are kept.
    filled_values : array_like, shape S
        Predictions in the units of ``v``, read at imputed cells only. Where it, ``std`` or
        ``values`` is dask-backed, the outputs are too, chunked like it and computed block by block
        (the checks below then run when a block is computed); they are written unpacked, with
        NaN as the fill value, since keeping a packing or a fill value depends on every value.
    std : array_like, shape S
        Predictive standard deviation (units of ``v``, >= 0), read at imputed cells only.
    imputed : array_like of bool, shape S, optional
        Where a hole was filled; default every hole in ``domain``.
    domain : array_like of bool, shape S, optional
        The modelling domain (default everywhere); holes outside stay NaN.
    attrs : mapping, optional
        Attributes for ``v`` instead of ``values.attrs``.
    transform : str, optional
        E.g. ``"log"``, stored as ``geogpvae_transform`` (values already in units of ``v``).

    Returns
    -------
    dict of str to xarray.DataArray
        ``v`` (observed cells bit for bit, integers as float64, packing kept where
        :func:`~geogpvae.fields.packing.kept_packing` allows), ``v_std`` and int8 ``v_imputed``.

    Raises
    ------
    ValueError
        Shape mismatch, ``imputed`` at an observed cell or outside ``domain``, non-finite fills,
        non-finite or negative std, integers beyond 2**53.
    """
    if not isinstance(values, xr.DataArray):
        raise TypeError(f"values must be an xarray.DataArray, got {type(values).__name__}")
    name = str(name)
    src_attrs = dict(values.attrs if attrs is None else attrs)
    out_dtype = output_dtype(values.dtype)
    stub = xr.DataArray(np.empty(0, dtype=values.dtype))  # what the cells' arrays need of values: dtype, encoding
    stub.encoding = dict(values.encoding)
    cells = functools.partial(_cells, name=name, like=stub, attrs=src_attrs, out_dtype=out_dtype)
    masks = [None if m is None else _as_mask(m, values, what) for m, what in ((imputed, "imputed"), (domain, "domain"))]
    if any(_is_dask(a) for a in (values, filled_values, std)):
        data, std_data, flag = _lazy_cells(cells, values, filled_values, std, *masks, out_dtype)
        packing, fill = None, {}  # both depend on every value written: left to a computed output
    else:
        filled, sd = _as_array(filled_values, values, "filled_values"), _as_array(std, values, "std")
        data, std_data, flag, observed, imp = cells(np.asarray(values.values), filled, sd, *masks)
        packing = kept_packing(values.encoding, data, std_data, observed, imp)
        fill = kept_fill(values.encoding, data.dtype, data, std_data) if packing is None else {}
    return _output_variables(name, values, data, std_data, flag, src_attrs, transform, packing, fill)


def _is_dask(obj: Any) -> bool:
    """Whether ``obj`` (a DataArray or an array) holds a dask array."""
    data = obj.data if isinstance(obj, xr.DataArray) else obj
    return type(data).__module__.startswith("dask.")


def _cells(original: np.ndarray, filled: np.ndarray, sd: np.ndarray, imputed: np.ndarray | None,
           domain: np.ndarray | None, *, name: str, like: xr.DataArray, attrs: dict[str, Any], out_dtype: np.dtype
           ) -> tuple[np.ndarray, ...]:
    """The arrays of ``v``, ``v_std`` and ``v_imputed`` of some cells (all of them or one block), and
    which are observed and which imputed; ``like`` holds the input's dtype and encoding."""
    undecoded = undecoded_fills(like, original)  # fill cells xarray missed (float32 data, float64 fill)
    original = np.where(undecoded, np.nan, original) if undecoded.any() else original
    observed, imp = _cell_status(name, original, imputed, domain)
    _check_predictions(name, filled, sd, imp)
    data, std_data, flag = _output_arrays(name, original, observed, imp, filled, sd, out_dtype)
    clip_fills(name, data, imp, attrs, like.encoding)
    return data, std_data, flag, observed, imp


def _lazy_cells(cells: Any, values: xr.DataArray, filled: Any, sd: Any, imputed: np.ndarray | None,
                domain: np.ndarray | None, out_dtype: np.dtype) -> tuple[Any, Any, Any]:
    """:func:`_cells` block by block: dask arrays chunked like the first dask-backed one of ``filled``,
    ``sd`` and ``values``, each block computed when it is."""
    import dask.array as da

    arrays = [_aligned(x, values, what) for x, what in ((values, "values"), (filled, "filled_values"), (sd, "std"))]
    chunks = next(x.chunks for x in arrays[1:] + arrays[:1] if _is_dask(x))
    masks = [m for m in (imputed, domain) if m is not None]
    parts = [x.rechunk(chunks) if _is_dask(x) else da.from_array(np.asarray(x), chunks=chunks) for x in arrays + masks]
    given = (imputed is not None, domain is not None)

    def block(original, fill, spread, *blocks):
        it = iter(blocks)
        imp, dom = (next(it) if g else None for g in given)
        return np.stack(cells(original, fill, spread, imp, dom)[:3]).astype(out_dtype, copy=False)

    stacked = da.map_blocks(block, *parts, new_axis=0, chunks=((3,), *chunks), dtype=out_dtype,
                            meta=np.empty((0,) * (len(chunks) + 1), dtype=out_dtype))
    return stacked[0], stacked[1], stacked[2].astype(np.int8)


def _output_variables(name: str, values: xr.DataArray, data: Any, std_data: Any, flag: Any, src_attrs: dict[str, Any],
                      transform: str | None, packing: dict[str, Any] | None, fill: dict[str, Any]
                      ) -> dict[str, xr.DataArray]:
    """``v``, ``v_std`` and ``v_imputed`` with their attributes and encodings, from their arrays."""
    label = _label(name, src_attrs)
    location = {k: src_attrs[k] for k in _LOCATION_ATTRS if k in src_attrs}
    location_enc = {k: values.encoding[k] for k in (*_LOCATION_ATTRS, "chunksizes") if k in values.encoding}
    std_name, flag_name = name + STD_SUFFIX, name + IMPUTED_SUFFIX
    if packing is None:  # CF: valid_* of packed data are codes; in the units of v from here on
        src_attrs = unpacked_bounds(src_attrs, values.encoding, data.dtype)
    v_out = _value_variable(name, values, data, src_attrs, (std_name, flag_name), transform)
    s_attrs = _std_attrs(label, src_attrs, location, transform)
    s_out = xr.DataArray(std_data, dims=values.dims, coords=values.coords, name=std_name,
                         attrs=s_attrs)
    s_out.encoding = dict(location_enc)
    if packing is not None:  # a packed input stays packed; its std needs no more than float32
        v_out.encoding.update(packing)
        s_out.encoding["dtype"] = np.dtype(np.float32)
    else:  # the input's fill value (e.g. -999), where it had one
        v_out.encoding.update(fill)
        s_out.encoding.update(fill)
    f_attrs: dict[str, Any] = {"long_name": f"imputation flag of {label}",
                               "standard_name": "status_flag"}
    f_attrs["flag_values"] = np.array([FLAG_OBSERVED, FLAG_IMPUTED, FLAG_FILL_VALUE], dtype=np.int8)
    f_attrs["flag_meanings"] = FLAG_MEANINGS
    f_attrs.update(location)
    f_out = xr.DataArray(flag, dims=values.dims, coords=values.coords, name=flag_name,
                         attrs=f_attrs)
    f_out.encoding = {**location_enc, "dtype": np.dtype(np.int8), "_FillValue": None}
    return {name: v_out, std_name: s_out, flag_name: f_out}


def _cell_status(name: str, original: np.ndarray, imputed: np.ndarray | None, domain: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Observed cells and the cells to fill, checked against each other and the domain."""
    observed = ~np.isnan(original) if np.issubdtype(original.dtype, np.floating) else (
        np.ones(original.shape, dtype=bool)
    )
    inside = np.ones(original.shape, dtype=bool) if domain is None else domain
    if imputed is None:
        return observed, ~observed & inside
    imp = imputed
    if (imp & observed).any():
        raise ValueError(
            f"{name}: 'imputed' is True at {int((imp & observed).sum())} observed cells; "
            "observed values are never replaced"
        )
    if (imp & ~inside).any():
        raise ValueError(
            f"{name}: 'imputed' is True at {int((imp & ~inside).sum())} cells outside "
            "the domain"
        )
    return observed, imp


def _check_predictions(name: str, filled: np.ndarray, sd: np.ndarray, imp: np.ndarray) -> None:
    """Finite values and finite, non-negative stds at every imputed cell."""
    if not imp.any():
        return
    with np.errstate(invalid="ignore"):
        bad_fill = ~np.isfinite(filled[imp])
        bad_std = ~np.isfinite(sd[imp]) | (sd[imp] < 0)
    if bad_fill.any():
        raise ValueError(f"{name}: {int(bad_fill.sum())} imputed cells have a non-finite value")
    if bad_std.any():
        raise ValueError(
            f"{name}: {int(bad_std.sum())} imputed cells have a non-finite or negative std"
        )


def _output_arrays(
    name: str, original: np.ndarray, observed: np.ndarray, imp: np.ndarray,
    filled: np.ndarray, sd: np.ndarray, out_dtype: np.dtype,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of ``v``, ``v_std`` and ``v_imputed``."""
    # observed cells straight from the original array: no float32 round trip
    data = np.full(original.shape, np.nan, dtype=out_dtype)
    data[observed] = original[observed]
    if original.dtype != out_dtype and observed.any():
        back = data[observed].astype(original.dtype)
        if not np.array_equal(back, original[observed]):
            raise ValueError(
                f"{name}: integer values beyond 2**53 cannot be held exactly as float64"
            )
    data[imp] = filled[imp].astype(out_dtype)
    std_data = np.full(original.shape, np.nan, dtype=out_dtype)
    std_data[observed] = 0.0
    std_data[imp] = sd[imp].astype(out_dtype)
    flag = np.full(original.shape, FLAG_FILL_VALUE, dtype=np.int8)
    flag[observed] = FLAG_OBSERVED
    flag[imp] = FLAG_IMPUTED
    assert np.array_equal(observed | imp, ~np.isnan(data))
    return data, std_data, flag


def _value_variable(
    name: str, values: xr.DataArray, data: np.ndarray, src_attrs: dict[str, Any],
    ancillary_names: tuple[str, str], transform: str | None,
) -> xr.DataArray:
    """``v`` with its attributes (linked to ``v_std`` and ``v_imputed``) and encoding."""
    v_attrs = {k: val for k, val in src_attrs.items() if k not in _STORAGE_ATTRS}
    ancillary = str(v_attrs.get("ancillary_variables", "")).split()
    for extra in ancillary_names:
        if extra not in ancillary:
            ancillary.append(extra)
    v_attrs["ancillary_variables"] = " ".join(ancillary)
    if transform is not None:
        v_attrs["geogpvae_transform"] = str(transform)
    v_out = xr.DataArray(data, dims=values.dims, coords=values.coords, name=name, attrs=v_attrs)
    v_out.encoding = {k: val for k, val in values.encoding.items() if k not in _PACKING_ENCODING}
    return v_out


def _std_attrs(
    label: str, src_attrs: dict[str, Any], location: dict[str, Any], transform: str | None
) -> dict[str, Any]:
    """Attributes of ``v_std``: its long and standard names, the units of ``v``."""
    s_attrs: dict[str, Any] = {"long_name": f"standard deviation of {label}"}
    sn = _modified_standard_name(src_attrs.get("standard_name"), "standard_error")
    if sn:
        s_attrs["standard_name"] = sn
    if "units" in src_attrs:
        s_attrs["units"] = src_attrs["units"]
    metadata = src_attrs.get("units_metadata")
    if isinstance(metadata, str) and metadata.strip().startswith("temperature:"):
        # CF 1.11: a spread of temperatures is a temperature difference
        s_attrs["units_metadata"] = "temperature: difference"
    s_attrs.update(location)
    if transform is not None:
        s_attrs["geogpvae_transform"] = str(transform)
    return s_attrs


def restore_flag_variables(ds: xr.Dataset) -> xr.Dataset:
    """Give decoded integer flag variables (``flag_values``) back their stored dtype and fill value
    (the imputation flags of earlier versions also their ``-127`` flag value, so that they are
    written back as outputs are now).

    Parameters
    ----------
    ds : xarray.Dataset
        As opened by xarray with ``mask_and_scale=True``; lazy variables stay lazy.

    Returns
    -------
    xarray.Dataset
        A new Dataset; closing it closes ``ds``.
    """
    out = ds.copy(deep=False)
    for key, var in ds.variables.items():
        if "flag_values" not in var.attrs and "flag_meanings" not in var.attrs:
            continue
        enc = var.encoding
        stored = enc.get("dtype")
        fill = enc.get("_FillValue")
        if stored is None or fill is None:
            continue
        stored = np.dtype(stored)
        if not np.issubdtype(stored, np.integer) or not np.issubdtype(var.dtype, np.floating):
            continue
        if "scale_factor" in enc or "add_offset" in enc:
            continue
        fixed = var.fillna(fill).astype(stored)
        fixed.attrs = dict(var.attrs)
        fixed.encoding = dict(enc)
        if _older_imputation_flag(fixed.attrs, fill):  # written before -127 became a flag value
            fixed.attrs["flag_values"] = np.array([FLAG_OBSERVED, FLAG_IMPUTED, FLAG_FILL_VALUE], dtype=np.int8)
            fixed.attrs["flag_meanings"] = FLAG_MEANINGS
            fixed.encoding["_FillValue"] = None
        out[key] = fixed
    out.set_close(ds.close)
    return out


def _older_imputation_flag(attrs: Mapping[str, Any], fill: Any) -> bool:
    """A ``v_imputed`` of an earlier version: flags 0 and 1, the no-value cells as fill -127."""
    return (str(attrs.get("flag_meanings", "")) == "observed imputed" and fill == FLAG_FILL_VALUE
            and np.asarray(attrs.get("flag_values", [])).tolist() == [0, 1])


def log_moments(value: np.ndarray, std: np.ndarray, point: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of ln(v) from a lognormal's point estimate and standard deviation.

    Parameters
    ----------
    value, std : ndarray
        ``v`` and ``v_std`` of a log-modelled variable, any shape.
    point : {"median", "mean"}
        What ``value`` is: ``exp(mu)`` or ``exp(mu + s**2 / 2)`` (what :func:`geogpvae.impute` writes).

    Returns
    -------
    mu, s : ndarray
    """
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


def is_log_variable(da: xr.DataArray) -> bool:
    """Whether a variable was modelled in log space (its ``geogpvae_transform`` is ``"log"``).

    Parameters
    ----------
    da : xarray.DataArray

    Returns
    -------
    bool
    """
    return str(da.attrs.get("geogpvae_transform", "")).strip().lower() == "log"
