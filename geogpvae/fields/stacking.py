"""The xarray boundary: Datasets in, plain arrays out, and back.

The engines see a field as two arrays: the coordinates ``x`` of N locations, shape (N, D),
and K variables at those locations, shape (N, K), NaN where missing. This module makes them
from a Dataset and puts predictions back in the Dataset's shape. It is the only modelling
module that knows xarray.

Layouts
-------
*Gridded* variables lie on 1-4 dims with 1-D coordinate variables, e.g. ``(z, y, x)`` or
``(time, lat, lon)``; every grid cell is a location. *Scattered* variables lie on one dim
(e.g. ``site``) with coordinate variables along it (``x``, ``y``, maybe ``depth``,
``time``); every site is a location. Both are handled alike: each coordinate used is
broadcast over the variables' dims and every element of that shape is a location, so dims
may come in any order, coordinates may be ascending or descending and unevenly spaced, and
mixed layouts such as station time series ``(time, site)`` with ``x(site)``, ``y(site)``
work too.

How the coordinates are chosen and turned into numbers: see
:mod:`geogpvae.fields.geometry`.

Domain and missing values
-------------------------
Missing values are NaN (xarray decodes ``_FillValue``/``missing_value`` on open). A
``mask`` marks the domain: cells where it is False are neither used for training nor filled;
only the locations inside the domain reach the engine, so their coordinates alone must be
finite. Duplicate locations are kept as separate points (the engine's nugget keeps prior
covariances positive definite); no value is merged, moved or dropped.

Memory
------
:func:`prepare_field` loads (computes, for dask) only the variables, coordinates and mask
it needs. A :class:`Field` holds ``x`` (N, D) float64, the K variables as (N, K) float64
for the N locations inside the domain, and each variable's original array (a view for
in-memory data, the computed array for dask).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError, warn_caller
from .geometry import (
    Geometry,
    _is_numeric,
    _take,
    _warn,
    build_geometry,
    check_spanned,
    choose_coordinates,
    coordinate_role,
    coordinates_at,
    unspanned_dims,
)
from .never_observed import is_flag, is_time_axis, never_observed_warning
from .placeholders import placeholder_places, placeholder_warning
from .scales import looks_vertical, unitless_axes, unitless_axes_warning
from .valid import attr_numbers, undecoded_fills, valid_bounds

__all__ = [
    "Field",
    "domain_mask",
    "locations",
    "never_observed_warning",
    "parse_transforms",
    "prepare_field",
    "select_variables",
    "stack_field",
    "variable_dims",
]


_TRANSFORMS = {"log": "log", "none": None, "identity": None}
_OUTPUT_SUFFIXES = ("_std", "_imputed")
_REFERENCE_ATTRS = ("bounds", "climatology", "grid_mapping", "ancillary_variables")




def _referenced_names(ds: xr.Dataset) -> set[str]:
    """Variables that other variables name as bounds, grid mapping, cell measures, etc."""
    names: set[str] = set()
    for var in ds.variables.values():
        for key in _REFERENCE_ATTRS:
            value = var.attrs.get(key)
            if isinstance(value, str):
                names.update(value.split())
        measures = var.attrs.get("cell_measures")
        if isinstance(measures, str):
            names.update(w for w in measures.split() if not w.endswith(":"))
    return names


def _is_output(name: str, ds: xr.Dataset) -> bool:
    """``v_std`` or ``v_imputed`` of a variable ``v`` present in ``ds``."""
    return any(name.endswith(s) and name[: -len(s)] in ds.data_vars for s in _OUTPUT_SUFFIXES)


def _default_candidates(ds: xr.Dataset, exclude: set[str]) -> list[str]:
    referenced = _referenced_names(ds)
    out, skipped, censored = [], [], ""
    for name, var in ds.data_vars.items():
        name = str(name)
        if name in exclude or name in referenced or not var.dims:
            continue
        if is_flag(var) or _is_output(name, ds):
            continue
        if not _is_numeric(var.dtype):
            text = _first_text(var)
            skipped.append(f"{name} ({var.dtype}" + (f", text such as {text!r})" if text else ")"))
            censored = censored or (_CENSORED_HINT if text.lstrip()[:1] in ("<", ">") else "")
            continue
        out.append(name)
    if skipped and out:
        _warn(
            f"not imputing {', '.join(skipped)}: only real numbers (integers, floats) can be "
            "imputed; they pass through unchanged (name the variables with vars=[...] to "
            "silence this)" + censored
        )
    ids = [n for n in out if _looks_like_identifier(ds[n])]
    if ids and len(ids) < len(out):
        _warn(
            f"not imputing {ids}: integers increasing along {ds[ids[0]].dims[0]!r}, like the "
            "sample numbers of a table, which would enter the model as a variable; they pass "
            "through unchanged (name the variables with vars=[...] to impute them, or make them "
            f"coordinates, ds.set_coords({ids}))"
        )
        out = [n for n in out if n not in ids]
    placed = [n for n in out if _looks_like_position(n, ds[n])]
    if placed and len(placed) < len(out) and all(ds[n].ndim == 1 for n in out):  # (else left out: _widest_group)
        _warn(
            f"the data variables {placed} are complete and named like coordinates of where the values "
            f"lie (by name, units or CF attributes): they are imputed as variables, which inform the "
            f"others, not used as positions; if the values lie at them (a sample's depth), make them coordinates, "
            f"ds.set_coords({placed}); name the variables with vars=[...] to silence this"
        )
    return out


def _looks_like_position(name: str, var: xr.DataArray) -> bool:
    """A 1-D data variable with no missing value that :func:`coordinate_role` recognises (a
    table's ``depth`` column): maybe a position of the sites rather than a measurement."""
    if var.ndim != 1 or coordinate_role(name, var) is None:
        return False
    values = np.asarray(var.values)
    return values.dtype.kind in "iuf" and bool(np.isfinite(values).all())


def _looks_like_identifier(var: xr.DataArray) -> bool:
    """Integers on one dim that increase strictly from site to site (a table's sample numbers)."""
    if var.ndim != 1 or var.dtype.kind not in "iu" or var.size < 3:
        return False
    return bool((np.diff(np.asarray(var.values).astype(np.int64)) > 0).all())


def select_variables(
    ds: xr.Dataset, vars: str | Sequence[str] | None = None, *, exclude: Sequence[str] = ()
) -> list[str]:
    """The variables to impute.

    Parameters
    ----------
    ds : xarray.Dataset
    vars : str or sequence of str, optional
        Names given by the user; checked to exist and be numeric. Default: every numeric
        data variable with at least one dim, except CF flag variables (``flag_values``/
        ``flag_meanings``), earlier outputs ``v_std``/``v_imputed`` of a variable ``v`` in
        ``ds``, variables other variables name as ``bounds``, ``grid_mapping``,
        ``cell_measures`` or ``ancillary_variables``, ``exclude``, and (with a
        :class:`CoordinateWarning`) integers on one dim that increase strictly from site to
        site, like a table's sample numbers, unless nothing else is left (1-D variables with no
        missing value named like coordinates, a table's ``depth`` column, are taken with a
        :class:`CoordinateWarning` that they could be coordinates). When these lie on
        different dims, those with the most dims are taken and the others left out with a
        :class:`CoordinateWarning`.
    exclude : sequence of str
        Names never taken by default (the mask variable, data variables used as coordinates).

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        A name is not in ``ds`` (the message lists the data variables), no variable is left,
        or the default variables' dims are ambiguous.
    TypeError
        A named variable is not numeric.
    """
    if vars is None:
        names = _default_candidates(ds, set(exclude))
        if not names:
            raise InputError(
                "no numeric data variable to impute in the Dataset "
                f"(data variables: {', '.join(map(str, ds.data_vars)) or 'none'}); pass vars=[...]"
            )
        return _widest_group(ds, names)
    names = [vars] if isinstance(vars, str) else [str(v) for v in vars]
    if not names:
        raise InputError("vars is empty: name at least one variable to impute")
    if len(set(names)) != len(names):
        raise InputError(f"vars names a variable twice: {names}")
    for name in names:
        if name not in ds.data_vars:
            where = " (it is a coordinate)" if name in ds.coords else ""
            raise InputError(
                f"variable {name!r} is not a data variable of the Dataset{where}; "
                f"available: {', '.join(map(str, ds.data_vars)) or 'none'}"
            )
        dtype = ds[name].dtype
        if dtype.kind == "c":
            raise TypeError(
                f"variable {name!r} holds complex numbers ({dtype}): only real values can be "
                f"imputed; impute ds[{name!r}].real and .imag (or abs and phase) as two variables"
            )
        if not _is_numeric(dtype):
            text = _first_text(ds[name])
            raise TypeError(
                f"variable {name!r} has dtype {dtype}, not a number"
                + (f" (it holds text such as {text!r})" if text else "")
                + ": only numeric variables can be imputed (leave it out of vars, or convert "
                "it, e.g. .astype(float))"
                + (_CENSORED_HINT if text.lstrip()[:1] in ("<", ">") else "")
            )
    return names


_CENSORED_HINT = (
    "; a value past a detection limit, such as '<0.1', has no number: decide what it stands "
    "for before converting, NaN (then imputed, with no knowledge that it lies below the "
    "limit) or a number such as half the limit"
)


def _first_text(var: xr.DataArray) -> str:
    """The first value of a text variable that does not read as a number (``'<0.1'``), or ''.

    Parameters
    ----------
    var : xarray.DataArray

    Returns
    -------
    str
        Empty when ``var`` holds no text or all its text reads as numbers or is blank.
    """
    if var.dtype.kind not in "OSU":
        return ""
    for value in np.ravel(np.asarray(var.values)):
        value = value.decode(errors="replace") if isinstance(value, bytes) else value
        if isinstance(value, str) and value.strip():  # a blank cell is a missing value
            try:
                float(value)
            except ValueError:
                return str(value)
    return ""


def _widest_group(ds: xr.Dataset, names: list[str]) -> list[str]:
    groups: dict[frozenset[Hashable], list[str]] = {}
    for name in names:
        groups.setdefault(frozenset(ds[name].dims), []).append(name)
    if len(groups) == 1:
        return names
    most = max(len(d) for d in groups)
    widest = [d for d in groups if len(d) == most]
    if len(widest) > 1:
        listing = "; ".join(
            f"{', '.join(groups[d])} on {tuple(ds[groups[d][0]].dims)}" for d in groups
        )
        raise InputError(
            f"the numeric variables lie on different dims ({listing}); "
            "choose the ones to impute together with vars=[...]"
        )
    chosen = groups[widest[0]]
    left = [n for n in names if n not in chosen]
    _warn(
        f"imputing {', '.join(chosen)} on {tuple(ds[chosen[0]].dims)}; left out "
        f"{', '.join(left)} (on other dims; pass vars=[...] to choose)"
    )
    return chosen


def variable_dims(ds: xr.Dataset, names: Sequence[str]) -> tuple[str, ...]:
    """The dims shared by all ``names``, in the order of the first.

    Raises
    ------
    InputError
        The variables do not all have the same set of dims, or none has a dim.
    """
    first = tuple(str(d) for d in ds[names[0]].dims)
    if not first:
        raise InputError(f"variable {names[0]!r} has no dims: there is nothing to impute")
    for name in names[1:]:
        dims = tuple(str(d) for d in ds[name].dims)
        if set(dims) != set(first):
            raise InputError(
                f"variables on different dims: {names[0]!r} on {first} but {name!r} on {dims}; "
                "impute variables on different dims in separate calls"
            )
    return first


def parse_transforms(
    transform: str | Mapping[str, str | None] | None, names: Sequence[str] | None = None
) -> dict[str, str | None]:
    """Per-variable transforms as ``{name: "log" or None}``.

    Parameters
    ----------
    transform : str, mapping or None
        ``None`` (no transform), one transform for every variable (``"log"``), or a mapping
        ``{"kx": "log"}``; values ``"log"`` or ``None``/``"none"``/``"identity"``.
    names : sequence of str, optional
        The variables; a mapping must name only these. Without ``names`` only the values
        are checked (and the mapping returned).

    Returns
    -------
    dict of str to str or None

    Raises
    ------
    InputError
        An unknown transform, or a mapping naming a variable not imputed.
    """

    def one(value: Any, label: str) -> str | None:
        if value is None:
            return None
        key = str(value).strip().lower() if isinstance(value, str) else None
        if key not in _TRANSFORMS:
            raise InputError(f"unknown transform {value!r} for {label}; use 'log' or None")
        return _TRANSFORMS[key]

    if transform is None or isinstance(transform, str):
        value = one(transform, "every variable")
        return {n: value for n in (names or [])}
    if not isinstance(transform, Mapping):
        raise InputError(f"transform must be a str, a dict or None, got {type(transform).__name__}")
    parsed = {str(k): one(v, repr(k)) for k, v in transform.items()}
    if names is not None:
        unknown = sorted(set(parsed) - set(names))
        if unknown:
            raise InputError(
                f"transform names {unknown}, which are not imputed; imputed: {list(names)}"
            )
        return {n: parsed.get(n) for n in names}
    return parsed


# --------------------------------------------------------------------------- broadcasting
def _sizes(obj: xr.Dataset | xr.DataArray) -> dict[str, int]:
    return {str(k): int(v) for k, v in obj.sizes.items()}


def _expand(var: xr.DataArray, dims: Sequence[str], shape: Sequence[int]) -> np.ndarray:
    """Values of ``var`` (dims a subset of ``dims``) broadcast to ``shape``, a read-only view."""
    own = [d for d in dims if d in var.dims]
    arr = np.asarray(var.transpose(*own).values)
    arr = arr.reshape([n if d in var.dims else 1 for d, n in zip(dims, shape, strict=True)])
    return np.broadcast_to(arr, tuple(shape))


def domain_mask(
    ds: xr.Dataset,
    mask: xr.DataArray | str | None,
    dims: Sequence[str],
    template: xr.DataArray | None = None,
) -> np.ndarray:
    """The domain as a boolean array over ``dims`` (True inside).

    Parameters
    ----------
    ds : xarray.Dataset
    mask : DataArray, str or None
        Boolean (or 0/1) DataArray on a subset of ``dims``, with coordinates matching those
        of ``ds``; or the name of such a variable in ``ds``; None: everywhere.
    dims : sequence of str
        The variables' dims.
    template : DataArray, optional
        A variable on ``dims``, to check that the mask's coordinates line up.

    Returns
    -------
    ndarray of bool, shape of ``dims``

    Raises
    ------
    InputError
        Unknown mask variable, dims not among ``dims``, coordinates that differ, NaN.
    TypeError
        A mask that is neither DataArray nor str, or non-numeric.
    """
    sizes = _sizes(ds)
    shape = tuple(sizes[d] for d in dims)
    if mask is None:
        return np.ones(shape, dtype=bool)
    if isinstance(mask, str):
        if mask not in ds.variables:
            coords = [str(n) for n in ds.coords if n not in ds.dims]
            raise InputError(
                f"mask {mask!r} is not a variable of the Dataset (data variables: "
                f"{', '.join(map(str, ds.data_vars)) or 'none'}; coordinates other than the "
                f"dims: {', '.join(coords) or 'none'})"
            )
        label, da = f"mask {mask!r}", ds[mask]
    elif isinstance(mask, xr.DataArray):
        label, da = "mask", mask
    else:
        raise TypeError(
            f"mask must be a boolean DataArray or a variable name, got {type(mask).__name__}"
        )
    extra = [str(d) for d in da.dims if d not in dims]
    if extra:
        raise InputError(
            f"{label} has dims {tuple(da.dims)}; it must lie on the variables' dims {tuple(dims)}"
        )
    if template is not None:
        try:
            xr.align(da, template, join="exact", copy=False)
        except ValueError as err:
            raise InputError(f"{label}'s coordinates do not match the Dataset's: {err}") from None
    for d in da.dims:
        if da.sizes[d] != sizes[str(d)]:
            raise InputError(
                f"{label} has {da.sizes[d]} elements along {d!r}, the Dataset {sizes[str(d)]}"
            )
    arr = np.asarray(da.values)
    if arr.dtype != bool:
        if not _is_numeric(arr.dtype):
            raise TypeError(f"{label} must be boolean, got dtype {arr.dtype}")
        if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
            raise InputError(f"{label} has NaN values; it must be True (inside) or False (outside)")
    return _expand(da.copy(data=arr != 0), dims, shape).copy()


# --------------------------------------------------------------------------- fields
@dataclass
class Field:
    """A Dataset's variables as the arrays the engine takes.

    Attributes
    ----------
    names : list of str
        The K variables.
    dims : tuple of str
        Their dims, in the order of the first variable.
    shape : tuple of int
        Sizes of ``dims``.
    domain : ndarray of bool, shape ``shape``
        True inside the domain (the locations the engine sees).
    x : ndarray of float64, shape (N, D)
        Model coordinates of the N locations inside the domain, in C order over ``dims``.
    values : ndarray of float64, shape (N, K)
        The variables there, NaN where missing.
    transforms : dict of str to str or None
        ``"log"`` or None per variable.
    geometry : Geometry
    originals : dict of str to xarray.DataArray
        Each variable as in the input, in memory (for the exact copy of observed values).
    """

    names: list[str]
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    domain: np.ndarray
    x: np.ndarray
    values: np.ndarray
    transforms: dict[str, str | None]
    geometry: Geometry
    originals: dict[str, xr.DataArray] = field(repr=False, default_factory=dict)

    @property
    def log(self) -> np.ndarray:
        """Which variables are modelled in log space, shape (K,)."""
        return np.array([self.transforms.get(n) == "log" for n in self.names], dtype=bool)

    @property
    def index(self) -> np.ndarray:
        """Flat (C order) indices of the locations inside the domain, shape (N,)."""
        return np.flatnonzero(self.domain.reshape(-1))

    def fingerprint(self) -> str:
        """A hash of ``x`` and the observed values: equal for the same field."""
        h = hashlib.sha256()
        observed = ~np.isnan(self.values)
        for arr in (self.x, observed, np.where(observed, self.values, 0.0)):
            h.update(str(arr.shape).encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def unstack(self, columns: np.ndarray, j: int) -> xr.DataArray:
        """Column ``j`` of an (N, K) result on the grid of ``dims``, NaN outside the domain."""
        full = np.full(int(np.prod(self.shape)), np.nan)
        full[self.index] = columns[:, j]
        return xr.DataArray(full.reshape(self.shape), dims=self.dims)


def _stack_values(
    ds: xr.Dataset,
    names: Sequence[str],
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> tuple[np.ndarray, dict[str, xr.DataArray]]:
    values = np.empty((len(index), len(names)))
    originals = {}
    for j, name in enumerate(names):
        var = ds[name]
        if var.chunks is not None:
            var = var.compute()
        originals[name] = var
        values[:, j] = _undecoded_fills(name, var, _take(var, dims, shape, index))
    return values, originals


def _undecoded_fills(name: str, var: xr.DataArray, col: np.ndarray) -> np.ndarray:
    """``col`` with NaN where it holds the variable's fill value in the variable's own float
    type, which xarray left undecoded (:func:`~geogpvae.fields.valid.undecoded_fills`); warns."""
    hits = undecoded_fills(var, col)
    if not hits.any():
        return col
    warn_caller(
        f"{name}: {int(hits.sum())} values equal its fill value {col[hits][0]:g} in {var.dtype}, which "
        "xarray left undecoded (the attribute is another float type): taken as missing, as CF says"
    )
    return np.where(hits, np.nan, col)


_DECODE_HINT = (
    "the Dataset looks undecoded (opened with mask_and_scale=False or decode_cf=False?): "
    "open it with xarray's default decoding (mask_and_scale=True) or decode it with "
    "xr.decode_cf(ds)"
)


def _check_decoded(name: str, var: xr.DataArray, col: np.ndarray) -> None:
    """Refuse values that CF attributes mark as packed, missing or invalid.

    A Dataset opened without decoding keeps ``scale_factor``/``add_offset`` and
    ``_FillValue``/``missing_value`` in its attributes and the raw numbers in its data;
    ``valid_range``/``valid_min``/``valid_max`` are never applied by xarray. Taken as they
    are, such values would be modelled as observations.
    """
    attrs = var.attrs
    for key in ("scale_factor", "add_offset"):
        if key in attrs:
            raise InputError(
                f"variable {name!r} is still packed ({key} = {attrs[key]!r} in its attributes, "
                f"so its numbers are not in their real units); {_DECODE_HINT}"
            )
    for key in ("_FillValue", "missing_value"):
        if key not in attrs:
            continue
        fills = attr_numbers(attrs[key])
        hits = np.isin(col, fills[~np.isnan(fills)])
        if hits.any():
            fill = fills[~np.isnan(fills)][0]
            raise InputError(
                f"variable {name!r} holds its {key} {fill:g} at {int(hits.sum())} cells, which "
                f"would be taken as observed values; {_DECODE_HINT}, or set them to NaN: "
                f"ds[{name!r}] = ds[{name!r}].where(ds[{name!r}] != {fill:g})"
            )
    low, high = valid_bounds(var.attrs, var.encoding)
    if low is None and high is None:
        return
    observed = col[~np.isnan(col)]
    bad = np.zeros(observed.shape, dtype=bool)
    if low is not None:
        bad |= observed < low
    if high is not None:
        bad |= observed > high
    if bad.any():
        raise InputError(
            f"variable {name!r} has {int(bad.sum())} values outside its valid range "
            f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}] "
            "(CF: such values are missing, but xarray does not mask them): set them to NaN "
            f"with ds[{name!r}].where(...), or remove the valid_range/valid_min/valid_max "
            "attribute if they are real values"
        )


def _check_values(
    values: np.ndarray, names: Sequence[str], transforms: Mapping[str, str | None], masked: bool,
    originals: Mapping[str, xr.DataArray] | None = None,
) -> None:
    where = " inside the mask" if masked else ""
    for j, name in enumerate(names):
        col = values[:, j]
        if originals is not None:
            _check_decoded(name, originals[name], col)
        if np.isinf(col).any():
            raise InputError(
                f"variable {name!r} has {int(np.isinf(col).sum())} infinite values{where}; "
                "replace them with NaN (missing) or finite values"
            )
        observed = ~np.isnan(col)
        if not observed.any():
            raise InputError(
                f"variable {name!r} has no observed value{where}: there is nothing to learn "
                "it from; leave it out of vars"
            )
        if transforms.get(name) == "log":
            bad = observed & (col <= 0)
            if bad.any():
                raise InputError(
                    f"cannot log-transform {name!r}: {int(bad.sum())} observed values{where} are "
                    f"<= 0 (minimum {col[observed].min():g}); use no transform for it, or shift it "
                    "to positive values"
                )


def stack_field(
    ds: xr.Dataset,
    names: Sequence[str],
    geometry: Geometry,
    transforms: Mapping[str, str | None],
    mask: xr.DataArray | str | None = None,
    *,
    trained_dims: Sequence[str] | None = None,
) -> Field:
    """The :class:`Field` of ``names`` with a given geometry (e.g. one a model was trained with).

    Parameters
    ----------
    ds : xarray.Dataset
        Holds ``names`` on the same dims and the coordinates of ``geometry``.
    names : sequence of str
    geometry : Geometry
    transforms : mapping of str to str or None
    mask : DataArray or str, optional
        The domain (see :func:`domain_mask`).
    trained_dims : sequence of str, optional
        Given when ``geometry`` is a fitted model's and ``ds`` data for it: the training
        field's dims. Another dim along which none of the coordinates varies is refused (see
        :func:`~geogpvae.fields.geometry.check_spanned`).

    Returns
    -------
    Field

    Raises
    ------
    InputError
        Any of the input problems listed in :func:`prepare_field`; with ``trained_dims``, a
        dim none of the coordinates spans.
    """
    missing = [n for n in names if n not in ds.data_vars]
    if missing:
        raise InputError(
            f"variables {missing} (used by the model) are not in the Dataset; "
            f"available: {', '.join(map(str, ds.data_vars))}"
        )
    names = list(names)
    select_variables(ds, names)
    dims = variable_dims(ds, names)
    shape = tuple(_sizes(ds)[d] for d in dims)
    domain = domain_mask(ds, mask, dims, template=ds[names[0]])
    index = np.flatnonzero(domain.reshape(-1))
    if trained_dims is not None:
        check_spanned(ds, geometry, dims, shape, trained_dims)
    x = coordinates_at(ds, geometry, dims, shape, index)
    values, originals = _stack_values(ds, names, dims, shape, index)
    _check_values(values, names, transforms, masked=mask is not None, originals=originals)
    return Field(names, dims, shape, domain, x, values, dict(transforms), geometry, originals)


#: the ratio of the 99th to the 1st percentile of a positive variable above which a warning
#: proposes a log transform (four orders of magnitude across the bulk of the values)
HEAVY_TAIL_RATIO = 1e4


def heavy_tail_warnings(values: np.ndarray, names: list[str]) -> list[str]:
    """Texts of warnings proposing a log transform.

    Parameters
    ----------
    values : ndarray of float, shape (N, K)
        The variables' values in their own units, NaN where missing.
    names : list of str, length K

    Returns
    -------
    list of str
        One text for each positive variable (at least ten observed values) whose 1st and 99th
        percentiles differ by more than a factor :data:`HEAVY_TAIL_RATIO`.
    """
    out = []
    for j, name in enumerate(names):
        v = values[np.isfinite(values[:, j]), j]
        if v.size >= 10 and v.min() > 0:
            low, high = np.percentile(v, [1, 99])
            if high > HEAVY_TAIL_RATIO * low:
                out.append(f"{name}: positive values spanning {np.log10(high / low):.1f} orders of magnitude "
                           f"(1st to 99th percentile {low:.3g} to {high:.3g}): consider modelling it in log "
                           f"space (transform={{{name!r}: 'log'}}), or say transform={{{name!r}: None}} "
                           "to keep it linear without this warning")
    return out


def prepare_field(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
    *,
    coords: str | Sequence[str] | None = None,
    mask: xr.DataArray | str | None = None,
    transform: str | Mapping[str, str | None] | None = None,
    coord_scale: Mapping[str, float] | None = None,
) -> Field:
    """Choose the variables and coordinates of a Dataset and stack them for the engine.

    Parameters
    ----------
    ds : xarray.Dataset
        The data; not modified. Dask-backed variables are computed (only those needed).
    vars : str or sequence of str, optional
        Variables to impute (see :func:`select_variables`).
    coords : str or sequence of str, optional
        Coordinates forming ``x`` (see :func:`choose_coordinates`).
    mask : DataArray or str, optional
        The domain (see :func:`domain_mask`).
    transform : str or mapping, optional
        Per-variable transforms (see :func:`parse_transforms`).
    coord_scale : mapping of str to float, optional
        Multipliers of coordinates (see the module docstring).

    Returns
    -------
    Field
        ``x`` (N, D) and ``values`` (N, K) for the N locations inside the domain.

    Raises
    ------
    InputError
        An unknown variable, coordinate, transform or mask; variables on different dims; a
        variable with no observed value inside the domain; non-finite coordinates; a log
        transform of values <= 0; no coordinates for scattered data.
    TypeError
        A non-numeric variable or coordinate; ``ds`` not a Dataset.
    """
    if not isinstance(ds, xr.Dataset):
        hint = " (use da.to_dataset())" if isinstance(ds, xr.DataArray) else ""
        raise TypeError(f"expected an xarray.Dataset, got {type(ds).__name__}{hint}")
    exclude = [mask] if isinstance(mask, str) else []
    if coords is not None:
        exclude += [coords] if isinstance(coords, str) else [str(c) for c in coords]
    names = select_variables(ds, vars, exclude=exclude)
    if vars is not None and set(names) & set(exclude):
        clash = sorted(set(names) & set(exclude))
        raise InputError(f"{clash} cannot be both imputed and used as coordinates or mask")
    dims = variable_dims(ds, names)
    transforms = parse_transforms(transform, names)
    chosen = choose_coordinates(ds, dims, coords)
    geometry = build_geometry(ds, chosen, coord_scale)
    field = stack_field(ds, names, geometry, transforms, mask)
    shared = unspanned_dims(ds, geometry, dims, [ds.sizes[d] for d in dims])
    if shared:  # named coordinates that leave dims out: their slices become repeats of one place
        warn_caller(_shared_places_warning(ds, geometry, shared))
    # levels only (a unitless time index or month number is left alone), and not those scaled by hand
    skip = frozenset(a.names[0] for a in geometry.axes if not looks_vertical(a.names[0], ds.variables.get(a.names[0])) or a.names[0] in
                     (coord_scale or {}) or is_time_axis(ds, a))
    unitless = unitless_axes(geometry, field.x, skip)
    if unitless:  # an s-coordinate beside km: every location's neighbours in its own column
        warn_caller(unitless_axes_warning(unitless))
    # a log transform proposed for heavy-tailed variables, unless the user chose their transform
    chosen_by_user = set(names) if isinstance(transform, str) else set(transform or ())
    linear = [j for j, n in enumerate(names) if transforms[n] is None and n not in chosen_by_user]
    for text in heavy_tail_warnings(field.values[:, linear], [names[j] for j in linear]):
        warn_caller(text)
    blank = placeholder_places(ds, field)  # NEMO's cells at (0, 0) without a position
    never = never_observed_warning(ds, field, blank, masked=mask is not None)
    for text in (never, placeholder_warning(ds, field, blank)):
        if text:
            warn_caller(text)
    return field


def _shared_places_warning(ds: xr.Dataset, geometry: Geometry, shared: list[tuple[str, int]]) -> str:
    """Text of the warning that the chosen coordinates leave ``shared`` dims out."""
    names = [n for a in geometry.axes for n in a.names]
    along = ", ".join(f"{d} ({n})" for d, n in shared)
    repeats = int(np.prod([n for _, n in shared]))
    hint = [*names, *(d for d, _ in shared)]  # a dim without a coordinate counts its positions
    return (
        f"none of the coordinates ({', '.join(names)}) varies along {along}: the {repeats} cells at "
        "each place share its coordinates and are modelled as repeated values of one location, so a "
        "gap is filled from the other cells at that place; unless that is meant, name coordinates for "
        f"those dims too (coordinates {', '.join(hint)})"
    )


# --------------------------------------------------------------------------- new locations
def _location_dims(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    variables: Sequence[str] = (),
    trained_dims: Sequence[str] = (),
) -> tuple[str, ...]:
    found: list[str] = []
    for name in geometry.names:
        if name in source.coords or (isinstance(source, xr.Dataset) and name in source.variables):
            dims = [str(d) for d in source[name].dims]
        elif name in source.dims:
            dims = [name]
        else:
            have = ", ".join(map(str, source.coords)) or "none"
            raise InputError(
                f"the locations lack coordinate {name!r}, which the model was trained on "
                f"(their coordinates: {have})"
            )
        found += [d for d in dims if d not in found]
    template = source
    if isinstance(source, xr.Dataset):  # a variable on these dims: the first trained one, else any
        names = [v for v in variables if v in source.data_vars] + list(source.data_vars)
        template = next((source[v] for v in names if set(found) <= set(map(str, source[v].dims))), None)
    if template is not None:
        order = [str(d) for d in template.dims if str(d) in found]
    else:  # coordinates only: the training field's order, e.g. (lat, lon) rather than (lon, lat)
        order = [str(d) for d in trained_dims if str(d) in found]
    found = order + [d for d in found if d not in order]
    if not found:
        raise InputError(
            "the locations' coordinates are scalars (one point without a dim): give them along "
            "a dim, e.g. xr.Dataset(coords={'x': ('site', [0.5]), 'y': ('site', [0.5])})"
        )
    return tuple(found)


def locations(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    variables: Sequence[str] = (),
    trained_dims: Sequence[str] = (),
) -> tuple[np.ndarray, tuple[str, ...], dict[str, Any]]:
    """Model coordinates of new locations, e.g. a grid or a list of sites.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
        Holds the coordinates of ``geometry`` (its values, if any, are ignored). Gridded: 1-D
        coordinates on their own dims, every combination is a location. Scattered:
        coordinates along one dim.
    geometry : Geometry
        The trained model's.
    variables : sequence of str, optional
        The trained variables: in a Dataset, the first of them on the locations' dims sets
        their order.
    trained_dims : sequence of str, optional
        The training field's dims: where no variable sets the order (coordinates only), the
        dims they share with it come in its order, the others after them.

    Returns
    -------
    x : ndarray of float64, shape (M, D)
        In C order over ``dims``.
    dims : tuple of str
        Dims of the locations, in the order of a DataArray's dims, of a Dataset's variable on
        them (one of ``variables`` first), else of ``trained_dims``, then of the coordinates in
        the geometry.
    coords : dict
        The coordinates of ``source`` that lie on ``dims`` (for the output).

    Raises
    ------
    InputError
        A coordinate is missing or not finite, or every coordinate is a scalar (a scalar
        coordinate alongside others applies to every location).
    """
    if not isinstance(source, (xr.Dataset, xr.DataArray)):
        raise TypeError(
            f"locations must be an xarray Dataset or DataArray, got {type(source).__name__}"
        )
    dims = _location_dims(source, geometry, variables, trained_dims)
    sizes = _sizes(source)
    shape = tuple(sizes[d] for d in dims)
    x = coordinates_at(source, geometry, dims, shape, np.arange(int(np.prod(shape))))
    coords = {str(k): v for k, v in source.coords.items() if set(map(str, v.dims)) <= set(dims)}
    return x, dims, coords
