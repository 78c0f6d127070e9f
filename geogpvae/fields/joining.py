"""Several NetCDF files opened as one Dataset, once their shared, not joined variables agree."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError, NetCDFReadError
from ..errors import one_line as _one_line

__all__ = ["check_files_agree", "open_several"]


def _same(a: xr.Variable, b: xr.Variable) -> bool:
    """Equal values (floats to float32's precision: files may store one in float32)."""
    if a.dims != b.dims or a.shape != b.shape:
        return False
    va, vb = np.asarray(a.values), np.asarray(b.values)
    if va.dtype.kind in "fc" and vb.dtype.kind in "fc":
        finite = np.abs(va[np.isfinite(va)])
        scale = float(finite.max()) if finite.size else 0.0
        return bool(np.allclose(va, vb, rtol=1e-6, atol=1e-6 * scale, equal_nan=True))
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
    sets : sequence of xarray.Dataset
        The files opened lazily, in the same order.
    concat_dim : str or None
    joins_data_vars : bool
        Whether every data variable is concatenated (along a new dim).

    Raises
    ------
    InputError
        Such a variable places the field's values (e.g. ``x(station)``) and differs.
    """
    joined = _joined_dims(sets, concat_dim)
    first = sets[0]
    # the dims that place the field's values: those of the data joined along the files
    placing = {str(d) for v in first.data_vars.values() if joins_data_vars or joined & set(map(str, v.dims))
               for d in v.dims} - joined
    for name, var in first.variables.items():
        is_coord = name in first.coords
        dims = set(map(str, var.dims))
        if name in first.dims or str(name) in joined or dims & joined or not (is_coord or not joins_data_vars):
            continue
        differs = next((path for path, other in zip(files[1:], sets[1:], strict=True)
                        if name in other.variables and not _same(var, other.variables[name])), None)
        if differs is None:
            continue
        what = (f"{_describe(str(name), var, is_coord)} differs between {files[0]} and {differs}, and "
                f"the files are joined along {', '.join(sorted(joined)) or 'no dim'}: the join keeps "
                f"{files[0]}'s values for every file")
        if dims and dims <= placing:  # it places the values: the field would come out wrong
            raise InputError(
                f"{what}. Store it the same way in every file (the same order of sites, for "
                "example), drop it (drop_variables=...) if it is not needed, or join the files "
                "yourself with xarray and impute the result")
        warnings.warn(f"{what} (it does not place the imputed values)", stacklevel=3)
    if concat_dim is None:  # combined by coordinates: files holding other variables are merged
        return
    names = {str(n) for s in sets for n, v in s.data_vars.items() if joins_data_vars or concat_dim in v.dims}
    for name in sorted(names):
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
    """Several files as one Dataset, after :func:`check_files_agree`.

    Parameters
    ----------
    files : sequence of str
    concat_dim : str or None
        Join along this dim, or by coordinates when None.
    chunks : optional
    mask_and_scale : bool
    kwargs : mapping
        For :func:`xarray.open_mfdataset`; ``compat`` or ``coords`` skips the check.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    InputError
        Files that disagree, or tiles that do not line up.
    NetCDFReadError
        A damaged or truncated file.
    """
    options: dict[str, Any] = {"coords": "minimal", "compat": "override", "join": "exact",
                               "combine_attrs": "override"}
    probe = {k: v for k, v in kwargs.items()
             if k in ("engine", "group", "backend_kwargs", "decode_times", "decode_timedelta",
                      "decode_cf", "use_cftime", "drop_variables", "decode_coords")}
    preprocess = kwargs.get("preprocess")
    try:
        with contextlib.ExitStack() as stack:
            sets = [stack.enter_context(xr.open_dataset(f, mask_and_scale=mask_and_scale, **probe))
                    for f in files]
            if preprocess is not None:
                sets = [preprocess(s) for s in sets]
            new_dim = concat_dim is not None and concat_dim not in sets[0].dims
            if not {"compat", "coords"} & set(kwargs):  # else the user chose how to join
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
        if isinstance(err, InputError) or "align" not in str(err):
            raise
        raise InputError(
            f"cannot join {files[0]} and the {len(files) - 1} other file(s) into one field "
            f"({_one_line(err)}): along every dim they are not joined on, their coordinates "
            "must be the same in each file"
        ) from err
    _warn_out_of_order(ds, concat_dim)
    return ds
