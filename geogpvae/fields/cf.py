"""CF metadata for imputation results.

This module turns the raw arrays an imputation engine produces (filled values, predictive
standard deviations, an "imputed" mask) into the three CF-annotated variables a user gets
back for every imputed variable ``v``, and reads them back (flags, log-space moments). It is
pure xarray/numpy: no torch, no I/O. The attributes of the whole Dataset (provenance, the
point ``featureType``, coordinate labels) are :mod:`~geogpvae.fields.labelling`'s job.

For an imputed variable ``v`` the conventions are:

``v``
    Holes filled; observed values copied bit-for-bit from the input. Attributes of the input
    are kept (minus ``_FillValue``/``missing_value``, which xarray keeps in ``encoding``);
    ``ancillary_variables`` lists ``v_std`` and ``v_imputed``.
``v_std``
    Predictive standard deviation in the units of ``v``. Observed cells hold ``0.0`` (they
    are known exactly); cells with no value hold NaN. ``standard_name`` is
    ``"<sn> standard_error"`` when ``v`` has ``standard_name`` ``sn`` (a CF standard-name
    modifier).
``v_imputed``
    ``int8`` flag: ``0`` observed, ``1`` imputed, ``-127`` (the ``_FillValue`` kept in
    ``encoding``) where ``v`` has no value. ``flag_values``/``flag_meanings`` follow CF
    section 3.5; ``standard_name`` is ``"status_flag"`` (the standard name CF 1.7+ gives
    ancillary status variables; the older ``"<sn> status_flag"`` modifier is deprecated).

Everywhere, ``isnan(v) == isnan(v_std) == (v_imputed == -127)``: a cell either has a value
(observed or imputed) with its uncertainty and flag, or it has nothing.
"""

from __future__ import annotations

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
    """The variables of ``names`` whose ``v_imputed`` flags in ``ds`` mark filled cells.

    Their holes hold predictions, not data: :func:`geogpvae.impute` refuses them, and
    ``geogpvae info`` says so.

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of str
        Variable names ``v``.

    Returns
    -------
    list of str
        Those with a data variable ``v_imputed`` holding at least one 1, in the given order.
    """
    return [n for n in names if f"{n}{IMPUTED_SUFFIX}" in ds.data_vars
            and bool((ds[f"{n}{IMPUTED_SUFFIX}"] == 1).any())]


#: Flag value of an observed cell.
FLAG_OBSERVED = np.int8(0)
#: Flag value of an imputed cell.
FLAG_IMPUTED = np.int8(1)
#: Fill value of the flag variable: the cell has no value at all (outside the domain).
FLAG_FILL_VALUE = np.int8(-127)
#: ``flag_meanings`` of the flag variable, matching ``flag_values`` ``[0, 1]``.
FLAG_MEANINGS = "observed imputed"

# CF standard-name modifiers (CF appendix C). A name already carrying one gets no other.
_MODIFIERS = ("detection_minimum", "number_of_observations", "standard_error", "status_flag")

# Attributes describing how values are stored or which values are valid; they belong to the
# stored form of ``v`` and must not be copied onto the derived variables.
_STORAGE_ATTRS = ("_FillValue", "missing_value")
# Encoding keys describing a packed / integer on-disk form. Imputed values are continuous
# predictions, so writing them back through a plain integer dtype would truncate them: these
# keys are dropped for ``v``, and a packing (int16 + scale_factor) is put back only where
# rounding to its step is negligible (:func:`geogpvae.fields.packing.kept_packing`).
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


def _as_array(x: Any, like: xr.DataArray, what: str) -> np.ndarray:
    """Bring ``x`` to a numpy array with the shape (and dim order) of ``like``."""
    if isinstance(x, xr.DataArray):
        if set(x.dims) != set(like.dims):
            raise ValueError(
                f"{what} has dims {x.dims}, expected the dims of {like.name!r}: {like.dims}"
            )
        x = x.transpose(*like.dims).values
    arr = np.asarray(x)
    if arr.shape != like.shape:
        raise ValueError(f"{what} has shape {arr.shape}, expected {like.shape}")
    return arr


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
    """The dtype of an imputed variable: a float keeps its own, integers and booleans float64."""
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
        Name of the imputed variable ``v`` in the Dataset.
    values : xarray.DataArray
        The original variable, any shape ``S`` with dims ``D``; NaN marks a hole. Its dims,
        coordinates, attributes and encoding are carried over.
    filled_values : array_like, shape ``S``
        Model predictions (in the units of ``v``). Only read at imputed cells; anything
        (NaN included) may stand elsewhere. A DataArray with the dims ``D`` in any order is
        accepted.
    std : array_like, shape ``S``
        Predictive standard deviation (units of ``v``, >= 0). Only read at imputed cells.
    imputed : array_like of bool, shape ``S``, optional
        True where a hole was filled. Default: every hole inside ``domain``. Must be False
        at observed cells and outside ``domain``. A hole left False stays missing.
    domain : array_like of bool, shape ``S``, optional
        True inside the modelling domain (default: everywhere). Holes outside stay NaN.
        Observed cells outside the domain are still observed and kept unchanged.
    attrs : mapping, optional
        Attributes to use for ``v`` instead of ``values.attrs`` (e.g. when ``values`` is a
        transformed working copy).
    transform : str, optional
        Transform used for modelling, e.g. ``"log"``; stored as attribute
        ``geogpvae_transform`` on ``v`` and ``v_std`` (plots then use a log colour scale).
        ``filled_values`` and ``std`` must already be back in the units of ``v``.

    Returns
    -------
    dict of str to xarray.DataArray
        ``{name: v, name + "_std": v_std, name + "_imputed": v_imputed}``, all with dims
        ``D`` and the coordinates of ``values``.

        * ``v``: observed cells are copied bit-for-bit from ``values``; imputed cells hold
          ``filled_values`` cast to the dtype of ``v``; other cells NaN. A float ``values``
          keeps its dtype (float32 stays float32). An integer or boolean ``values`` gives
          float64, because imputed values are continuous predictions and unfilled cells must
          be NaN; float64 holds every integer up to 2**53 exactly (checked). A packed input
          (integer codes with ``scale_factor``, e.g. ERA5's int16) keeps its packing in
          ``encoding`` where :func:`~geogpvae.fields.packing.kept_packing` finds its step far
          below the fills' std (files then hold the fills rounded to that step); else its
          encoding has no packing and files hold the decoded float type, with the input's
          fill value (e.g. ``_FillValue = -999``) kept in ``encoding`` where it had one
          (:func:`~geogpvae.fields.packing.kept_fill`; ``v_std`` gets the same).
        * ``v_std``: same dtype as ``v`` (written as float32 where ``v`` keeps a packing);
          ``std`` at imputed cells, ``0.0`` at observed
          cells (known exactly), NaN where ``v`` is NaN. Attributes: ``long_name``,
          ``standard_name`` (``"<sn> standard_error"``), ``units`` (of ``v``),
          ``grid_mapping``, ``geogpvae_transform``, and ``units_metadata =
          "temperature: difference"`` when ``v`` has a CF-1.11 temperature
          ``units_metadata`` (a spread of temperatures is a difference).
        * ``v_imputed``: int8, 0 observed / 1 imputed / -127 where ``v`` is NaN, with
          ``encoding["_FillValue"] = -127`` so files mark those cells missing.

    Raises
    ------
    ValueError
        Shape mismatch; ``imputed`` True at an observed cell or outside ``domain``;
        non-finite ``filled_values`` or non-finite / negative ``std`` at an imputed cell.
    TypeError
        Non-numeric ``values``.
    """
    if not isinstance(values, xr.DataArray):
        raise TypeError(f"values must be an xarray.DataArray, got {type(values).__name__}")
    name = str(name)
    src_attrs = dict(values.attrs if attrs is None else attrs)
    out_dtype = output_dtype(values.dtype)
    original = np.asarray(values.values)
    undecoded = undecoded_fills(values, original)  # fill cells xarray missed (float32 data, float64 fill)
    original = np.where(undecoded, np.nan, original) if undecoded.any() else original
    observed, imp = _cell_status(name, values, original, imputed, domain)
    filled = _as_array(filled_values, values, "filled_values")
    sd = _as_array(std, values, "std")
    _check_predictions(name, filled, sd, imp)
    data, std_data, flag = _output_arrays(name, original, observed, imp, filled, sd, out_dtype)
    label = _label(name, src_attrs)
    location = {k: src_attrs[k] for k in _LOCATION_ATTRS if k in src_attrs}
    location_enc = {k: values.encoding[k] for k in _LOCATION_ATTRS if k in values.encoding}
    std_name, flag_name = name + STD_SUFFIX, name + IMPUTED_SUFFIX
    clip_fills(name, data, imp, src_attrs, values.encoding)
    packing = kept_packing(values.encoding, data, std_data, observed, imp)
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
        fill = kept_fill(values.encoding, data.dtype, data, std_data)
        v_out.encoding.update(fill)
        s_out.encoding.update(fill)
    f_attrs: dict[str, Any] = {"long_name": f"imputation flag of {label}",
                               "standard_name": "status_flag"}
    f_attrs["flag_values"] = np.array([FLAG_OBSERVED, FLAG_IMPUTED], dtype=np.int8)
    f_attrs["flag_meanings"] = FLAG_MEANINGS
    f_attrs.update(location)
    f_out = xr.DataArray(flag, dims=values.dims, coords=values.coords, name=flag_name,
                         attrs=f_attrs)
    f_out.encoding = {**location_enc, "dtype": np.dtype(np.int8),
                      "_FillValue": FLAG_FILL_VALUE}
    return {name: v_out, std_name: s_out, flag_name: f_out}


def _cell_status(
    name: str, values: xr.DataArray, original: np.ndarray, imputed: Any, domain: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Observed cells and the cells to fill, checked against each other and the domain."""
    observed = ~np.isnan(original) if np.issubdtype(original.dtype, np.floating) else (
        np.ones(original.shape, dtype=bool)
    )
    inside = (np.ones(original.shape, dtype=bool) if domain is None
              else _as_mask(domain, values, "domain"))
    if imputed is None:
        return observed, ~observed & inside
    imp = _as_mask(imputed, values, "imputed")
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
    # v: observed cells straight from the original array (no float32 round trip), imputed
    # ones from the model, the rest NaN.
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
        # CF 1.11: a spread of temperatures is a temperature difference.
        s_attrs["units_metadata"] = "temperature: difference"
    s_attrs.update(location)
    if transform is not None:
        s_attrs["geogpvae_transform"] = str(transform)
    return s_attrs


def restore_flag_variables(ds: xr.Dataset) -> xr.Dataset:
    """Give decoded integer flag variables back their integer form.

    On read, xarray turns an integer variable with a ``_FillValue`` into floats with NaN
    (``int8`` -> ``float32``). For variables carrying ``flag_values`` or ``flag_meanings``
    this undoes that: NaN becomes the ``_FillValue`` again and the dtype the stored one, so a
    write/read round trip of ``v_imputed`` is exact (int8 with -127 in memory, as produced
    by :func:`imputation_variables`). Lazy (dask) variables stay lazy.

    Parameters
    ----------
    ds : xarray.Dataset
        Dataset as opened by xarray with ``mask_and_scale=True``.

    Returns
    -------
    xarray.Dataset
        A new Dataset; ``ds`` is not modified. Closing it closes ``ds``.
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
        out[key] = fixed
    # closing the result closes the files ``ds`` reads from
    out.set_close(ds.close)
    return out


def log_moments(value: np.ndarray, std: np.ndarray, point: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of ln(v) from a lognormal's point estimate and standard deviation.

    Parameters
    ----------
    value, std : ndarray
        The point estimate (``v``) and the standard deviation (``v_std``) of a log-modelled
        variable, in its units; any shape.
    point : {"median", "mean"}
        What ``value`` is: ``exp(mu)`` (the median) or ``exp(mu + s**2 / 2)`` (the mean, what
        :func:`geogpvae.impute` writes, ``geogpvae_point_estimate = "mean"``).

    Returns
    -------
    mu, s : ndarray
        The log-space mean and standard deviation, the shape of ``value``.
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
