"""Several NetCDF files opened as one Dataset, and the checks that keep the join honest.

:func:`xarray.open_mfdataset` with ``compat="override"`` keeps the *first* file's copy of
every variable that is not joined along the concatenated dim, without comparing the others.
That is fast, but wrong where the files disagree: station coordinates ``x(station)`` stored
in another order in the second file would put every later value at the wrong station. So
before joining, :func:`check_files_agree` compares what the join would take from the first
file, and refuses files that differ; it warns where a variable is missing from some files
(its values there become missing, and would be imputed) and where the joined coordinate
comes out of order (files given out of order change the model's view of the grid).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError, NetCDFReadError

__all__ = ["check_files_agree", "open_several"]


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _same(a: xr.Variable, b: xr.Variable) -> bool:
    if a.dims != b.dims or a.shape != b.shape:
        return False
    va, vb = np.asarray(a.values), np.asarray(b.values)
    try:
        return bool(np.array_equal(va, vb, equal_nan=va.dtype.kind in "fcmM"))
    except TypeError:  # mixed or object types: compare them as they are
        return bool(np.array_equal(va, vb))


def _joined_dims(sets: Sequence[xr.Dataset], concat_dim: str | None) -> set[str]:
    """The dims that the files are joined along: ``concat_dim``, or the indexes that differ."""
    if concat_dim is not None:
        return {concat_dim}
    names = set().union(*(s.indexes for s in sets))
    first = sets[0].indexes
    return {str(d) for d in names
            if not all(d in s.indexes and d in first and s.indexes[d].equals(first[d]) for s in sets)}


def _describe(name: str, var: xr.Variable, is_coord: bool) -> str:
    kind = "coordinate" if is_coord else "variable"
    return f"{kind} {name!r}" + (f" (on {', '.join(map(str, var.dims))})" if var.dims else "")


def check_files_agree(files: Sequence[str], sets: Sequence[xr.Dataset], concat_dim: str | None,
                      joins_data_vars: bool) -> None:
    """Refuse files whose shared, not joined variables differ; warn about gaps and order.

    Parameters
    ----------
    files : sequence of str
        The files, in the order they are joined.
    sets : sequence of xarray.Dataset
        The files opened lazily, in the same order.
    concat_dim : str or None
        The dim named by the user (``combine="nested"``), or None when the files are
        combined by their coordinates.
    joins_data_vars : bool
        Whether every data variable is concatenated (along a new dim); otherwise data
        variables without a joined dim are taken from the first file, as coordinates are.

    Raises
    ------
    InputError
        A variable that the join would take from the first file differs in another.

    Warns
    -----
    UserWarning
        With ``concat_dim``, a data variable that some files lack (its values there
        become missing, and would be imputed).
    """
    joined = _joined_dims(sets, concat_dim)
    first = sets[0]
    for name, var in first.variables.items():
        is_coord = name in first.coords
        if name in first.dims or joined & set(map(str, var.dims)) or not (is_coord or not joins_data_vars):
            continue
        for path, other in zip(files[1:], sets[1:], strict=True):
            if name in other.variables and not _same(var, other.variables[name]):
                raise InputError(
                    f"{_describe(str(name), var, is_coord)} differs between {files[0]} and {path}, "
                    f"and the files are joined along {', '.join(sorted(joined)) or 'no dim'}: the "
                    f"join would keep {files[0]}'s values for every file. Store it the same way "
                    "in every file (the same order of sites, for example), or join the files "
                    "yourself with xarray and impute the result"
                )
    if concat_dim is None:  # combined by coordinates: files holding other variables are merged
        return
    names = set().union(*(s.data_vars for s in sets))
    for name in sorted(map(str, names)):
        lacking = [p for p, s in zip(files, sets, strict=True) if name not in s.data_vars]
        if lacking:
            warnings.warn(
                f"{name!r} is not in {', '.join(lacking)}: its values there are missing, and "
                "will be imputed with the rest; leave it out of the variables (vars) if that "
                "is not meant", stacklevel=3)


def _warn_out_of_order(ds: xr.Dataset, concat_dim: str | None) -> None:
    if concat_dim is None or concat_dim not in ds.indexes:
        return
    index = ds.indexes[concat_dim]
    if index.size > 1 and not (index.is_monotonic_increasing or index.is_monotonic_decreasing):
        warnings.warn(
            f"the files joined along {concat_dim!r} give a {concat_dim} that is not in order: "
            "were they given out of order? A grid out of order is taken as scattered "
            "locations; sort the files (or the result, with ds.sortby) first", stacklevel=3)


def open_several(files: Sequence[str], *, concat_dim: str | None, chunks: Any,
                 mask_and_scale: bool, kwargs: Mapping[str, Any]) -> xr.Dataset:
    """Several files as one Dataset (see :func:`geogpvae.fields.io.open_dataset`)."""
    options: dict[str, Any] = {"coords": "minimal", "compat": "override", "join": "exact",
                               "combine_attrs": "override"}
    probe = {k: v for k, v in kwargs.items()
             if k in ("engine", "group", "backend_kwargs", "decode_times", "decode_timedelta")}
    try:
        with contextlib.ExitStack() as stack:
            sets = [stack.enter_context(xr.open_dataset(f, mask_and_scale=mask_and_scale, **probe))
                    for f in files]
            new_dim = concat_dim is not None and concat_dim not in sets[0].dims
            check_files_agree(files, sets, concat_dim, joins_data_vars=new_dim)
        if concat_dim is not None:
            options.update(combine="nested", concat_dim=concat_dim,
                           data_vars="all" if new_dim else "minimal")
        else:
            options.update(combine="by_coords", data_vars="minimal")
        options.update(kwargs)
        ds = xr.open_mfdataset(list(files), chunks={} if chunks is None else chunks,
                               mask_and_scale=mask_and_scale, **options)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except OSError as err:
        raise NetCDFReadError(
            f"cannot read the files as NetCDF: one is damaged or truncated "
            f"({_one_line(err)}); check them with ncdump -h"
        ) from err
    except ValueError as err:
        if isinstance(err, InputError):
            raise
        raise InputError(
            f"cannot join {files[0]} and the {len(files) - 1} other file(s) into one field "
            f"({_one_line(err)}): along every dim they are not joined on, their coordinates "
            "must be the same in each file"
        ) from err
    _warn_out_of_order(ds, concat_dim)
    return ds
