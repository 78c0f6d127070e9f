"""The variables to impute: the default choice, checks of the names given, dims and transforms."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError
from .coordinates import _is_numeric, _warn, coordinate_role
from .never_observed import is_flag

__all__ = ["parse_transforms", "select_variables", "variable_dims"]

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
    """A complete 1-D data variable with a coordinate role (a table's ``depth`` column)."""
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
        Default: the numeric data variables with a dim, except CF flags, earlier ``v_std``/
        ``v_imputed``, bounds or similar variables, ``exclude``, and a table's sample numbers;
        of variables on different dims those with the most dims (with a warning).
    exclude : sequence of str
        Names never taken by default (the mask, data variables used as coordinates).

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        A name not in ``ds``, nothing left, or ambiguous dims.
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
    """The first value of a text variable that does not read as a number (``'<0.1'``), else ''."""
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

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of str

    Returns
    -------
    tuple of str

    Raises
    ------
    InputError
        The variables' dims differ, or there are none.
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
        One for every variable, or ``{"kx": "log"}``; ``"log"`` or ``None``/``"none"``/``"identity"``.
    names : sequence of str, optional
        The variables a mapping may name; without it only the values are checked.

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
