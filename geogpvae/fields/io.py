"""Reading and writing NetCDF files (Zarr stores: :mod:`geogpvae.fields.zarr_io`)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import xarray as xr

from .._files import disk_full, no_space
from ..errors import NetCDFReadError
from ..errors import one_line as _one_line
from .atomic import (
    _check_not_aborted,
    _check_target,
    _commit,
    _create_temp,
    _discard,
    _fsync,
    _set_mode,
    _fsync_dir,
    _leftovers,
)
from .cf import restore_flag_variables
from .encoding import CF_VERSION, _prepare, check_encoding
from .joining import open_several
from .zarr_io import is_url, is_zarr, open_zarr

__all__ = [
    "CF_VERSION",
    "NetCDFReadError",
    "open_dataset",
    "to_netcdf",
]

PathLike = Union[str, "os.PathLike[str]"]

_GLOB_CHARS = re.compile(r"[*?\[]")
_NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# --------------------------------------------------------------------------- writing
def _write_netcdf(ds: xr.Dataset, tmp: Path, engine: str | None) -> None:
    """Write ``ds`` to ``tmp`` (the temporary file); computes any lazy data."""
    ds.to_netcdf(tmp, mode="w", format="NETCDF4", engine=engine, compute=True)


def to_netcdf(ds: xr.Dataset, path: PathLike, overwrite: bool = False, *, complevel: int = 4,
              engine: str | None = None, encoding: Mapping[Hashable, Mapping[str, Any]] | None = None) -> Path:
    """Write a Dataset to a compressed, CF-tidy NetCDF-4 file, atomically.

    A failed or killed write leaves no target or the complete previous file; of two processes
    creating one new target, one raises :class:`FileExistsError`. Float fills are NaN unless the
    input had a packing or fill value; scattered data become a CF ``featureType = "point"``.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified; lazy data are computed during the write.
    path : str or os.PathLike
        Target file; its folder must exist.
    overwrite : bool, default False
        Replace an existing target (also the file ``ds`` was read from).
    complevel : int, default 4
        Deflate level 0-9; 0 writes uncompressed. Variables keep the chunk shape they were read
        with (their ``encoding["chunksizes"]``, also given to their ``_std`` and ``_imputed``);
        others get chunks of about 1 MiB.
    engine : {"netcdf4", "h5netcdf"}, optional
    encoding : mapping of variable name to dict, optional
        Encodings of :meth:`xarray.Dataset.to_netcdf` that replace those chosen here, e.g.
        ``{"kx": {"chunksizes": (1, 220, 60), "complevel": 9}}``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileExistsError
        The target exists (or appeared during the write) and ``overwrite`` is False.
    ValueError
        ``complevel`` outside 0-9, ``encoding`` naming a variable ``ds`` does not hold, or an
        encoding the engine does not know.
    OSError
        ``errno.ENOSPC``, "no space left on device: PATH", when the device filled up (nothing is
        left behind).
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    if isinstance(complevel, bool) or not isinstance(complevel, (int, np.integer)) or not (
        0 <= complevel <= 9
    ):
        raise ValueError(f"complevel must be an integer from 0 to 9, got {complevel!r}")
    check_encoding(ds, encoding)
    target = Path(os.fspath(path)).expanduser()
    _check_target(target, overwrite)
    _leftovers(target)

    prepared = _prepare(ds, int(complevel))
    for name, given in (encoding or {}).items():
        var = prepared.variables[name]
        var.encoding = {**var.encoding, **dict(given)}
    old_mode = None
    if overwrite and target.exists():
        try:
            old_mode = target.stat().st_mode & 0o777
        except OSError:
            old_mode = None

    tmp = _create_temp(target)
    try:
        _write_netcdf(prepared, tmp, engine)
        _check_not_aborted(tmp, target)
        _fsync(tmp)
        if old_mode is not None:
            _set_mode(tmp, old_mode)
        _commit(tmp, target, overwrite)
    except (OSError, RuntimeError) as err:
        _discard(tmp)
        if disk_full(err, target, sum(v.size * v.dtype.itemsize for v in prepared.variables.values())):
            raise no_space(target) from err
        raise
    except BaseException:
        _discard(tmp)
        raise
    _fsync_dir(target.parent)
    return target


# --------------------------------------------------------------------------- reading
def _check_netcdf(path: str) -> None:
    """Raise a clear error unless ``path`` is a NetCDF-3 or HDF5/NetCDF-4 file."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if p.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a NetCDF file")
    with open(p, "rb") as fh:
        head = fh.read(8)
        if head[:4] in _NETCDF_MAGIC or head == _HDF5_MAGIC:
            return
        # HDF5 allows a user block: the signature may sit at 512, 1024, 2048, ... bytes.
        size = p.stat().st_size
        offset = 512
        while offset + 8 <= size:
            fh.seek(offset)
            if fh.read(8) == _HDF5_MAGIC:
                return
            offset *= 2
    raise ValueError(f"{path} is not a NetCDF file (neither NetCDF-3 nor NetCDF-4/HDF5)")


def _expand(paths: PathLike | Sequence[PathLike]) -> list[str]:
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ValueError("no paths given")
    files: list[str] = []
    for item in items:
        text = os.fspath(item)
        if is_url(text):
            files.append(text)
            continue
        text = os.path.expanduser(text)
        if _GLOB_CHARS.search(text) and not os.path.exists(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise FileNotFoundError(f"no file matches the pattern {text!r}")
            files.extend(matches)
        else:
            files.append(text)
    for f in files:
        if not is_url(f):
            _check_netcdf(f)
    return files


def _zarr_matches(paths: PathLike | Sequence[PathLike]) -> PathLike | Sequence[PathLike]:
    """A glob pattern of Zarr stores (``tiles/*.zarr``) as the sorted stores it matches; else ``paths``."""
    if not isinstance(paths, (str, os.PathLike)):
        return paths
    text = os.path.expanduser(os.fspath(paths))
    if not (text.rstrip("/").endswith(".zarr") and _GLOB_CHARS.search(text) and not os.path.exists(text)):
        return paths
    matches = sorted(glob.glob(text))
    if not matches:
        raise FileNotFoundError(f"no Zarr store matches the pattern {text!r}")
    return matches[0] if len(matches) == 1 else matches


def _open_stores(stores: list[str], concat_dim: str | None, chunks: Any, mask_and_scale: bool,
                 kwargs: dict[str, Any]) -> xr.Dataset:
    """Several Zarr stores as one Dataset, joined as several NetCDF files are."""
    if not all(is_zarr(p) for p in stores):
        raise ValueError("the inputs mix Zarr stores and NetCDF files: give stores only or files only "
                         "(geogpvae.to_zarr writes a NetCDF file's Dataset as a store)")
    for store in stores:
        if "://" not in store:
            open_zarr(store).close()  # a missing or damaged store is named before any joining
    ds = open_several(stores, concat_dim=concat_dim, chunks=chunks, mask_and_scale=mask_and_scale,
                      kwargs={"engine": "zarr", **kwargs})
    return restore_flag_variables(ds) if mask_and_scale else ds


def open_dataset(paths: PathLike | Sequence[PathLike], *, concat_dim: str | None = None,
                 chunks: Any = None, mask_and_scale: bool = True,
                 **kwargs: Any) -> xr.Dataset:
    """Open one NetCDF file, a glob pattern or a list of files, or one or several Zarr stores, as one Dataset.

    Several files are joined with :func:`xarray.open_mfdataset`, along ``concat_dim`` or by
    coordinates, after :func:`~geogpvae.fields.joining.check_files_agree`. Flag variables such as
    ``v_imputed`` keep their integer dtype.

    Parameters
    ----------
    paths : str, os.PathLike or sequence of them
        Files, glob patterns (matches sorted) or URLs; or one Zarr store (a ``*.zarr`` path or a
        folder holding Zarr metadata), opened lazily with its own chunks
        (:func:`~geogpvae.fields.zarr_io.open_zarr`); or several stores, joined as files are.
    concat_dim : str, optional
        Dimension to concatenate several files along (existing or new).
    chunks : int, dict, "auto" or {}, optional
        Dask chunks; without them one file opens lazily.
    mask_and_scale : bool, default True
    **kwargs
        For :func:`xarray.open_dataset` / :func:`xarray.open_mfdataset`.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    FileNotFoundError
        A file does not exist, or a pattern matches nothing.
    NetCDFReadError
        A damaged or truncated file (an ``OSError`` and a ``ValueError``).
    ValueError
        A file is not NetCDF, or no paths were given.
    InputError
        Several files disagree on a variable that is not joined.
    """
    paths = _zarr_matches(paths)
    if isinstance(paths, (str, os.PathLike)) and is_zarr(paths):
        return open_zarr(paths, chunks=chunks, mask_and_scale=mask_and_scale, **kwargs)
    if not isinstance(paths, (str, os.PathLike)) and len(paths) > 1 and any(is_zarr(p) for p in paths):
        return _open_stores([os.fspath(p) for p in paths], concat_dim, chunks, mask_and_scale, kwargs)
    files = _expand(paths)
    if len(files) == 1:
        try:
            ds = xr.open_dataset(files[0], chunks=chunks, mask_and_scale=mask_and_scale,
                                 **kwargs)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise
        except OSError as err:
            raise NetCDFReadError(
                f"cannot read {files[0]} as NetCDF: the file is damaged or truncated "
                f"({_one_line(err)}); copy it again or check it with ncdump -h"
            ) from err
        except ValueError as err:
            raise ValueError(f"cannot open {files[0]} as NetCDF: {err}") from err
    else:
        ds = open_several(files, concat_dim=concat_dim, chunks=chunks,
                          mask_and_scale=mask_and_scale, kwargs=kwargs)
    if mask_and_scale:
        ds = restore_flag_variables(ds)
    return ds
