"""Reading and writing NetCDF files.

:func:`to_netcdf` writes a Dataset as a compressed, CF-tidy NetCDF-4 file, atomically: a
failed or killed write leaves either no output or the complete previous file.
:func:`open_dataset` opens one file, a glob pattern or a list of files with clear errors.
How variables are laid out in the file is :mod:`~geogpvae.fields.encoding`'s job; the
temporary file and its move into place are :mod:`~geogpvae.fields.atomic`'s.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import xarray as xr

from ..errors import NetCDFReadError
from ..errors import one_line as _one_line
from .atomic import (
    _check_not_aborted,
    _check_target,
    _commit,
    _create_temp,
    _discard,
    _fsync,
    _fsync_dir,
    _leftovers,
)
from .cf import restore_flag_variables
from .encoding import CF_VERSION, _prepare
from .joining import open_several

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
              engine: str | None = None) -> Path:
    """Write a Dataset to a compressed, CF-tidy NetCDF-4 file, atomically.

    The file is first written to a hidden temporary file beside the target
    (``.<name>.<pid>@<host>.<random>.tmp``) and flushed to disk (fsync). Then, without
    ``overwrite``, the target is created *exclusively* (a hard link to the finished file,
    which fails if the name exists): when two processes write the same new target, exactly
    one wins and the other raises :class:`FileExistsError`, never replacing the first's
    result. With ``overwrite`` the finished file replaces the target (:func:`os.replace`).
    If anything goes wrong, including ``KeyboardInterrupt``, the temporary file is removed
    and the error re-raised: the target is then either absent or the complete previous
    file. A process killed outright (SIGKILL, power loss) cannot clean up and may leave the
    hidden temporary file, but never a partial target; the next write to the same target
    removes such leftovers of dead processes on this host and warns about others.

    What is written:

    * numeric data variables with one or more dimensions: zlib (deflate) + shuffle at
      ``complevel``, chunks of at most ~1 MiB (leading dims split first);
    * float data variables: ``_FillValue`` NaN, unless their encoding carries an integer
      packing (e.g. int16 + ``scale_factor``, kept with its fill value) or a finite fill value
      (e.g. ``-999`` read from the input, kept, with its ``missing_value`` if equal);
    * coordinate variables: no ``_FillValue`` (CF 2.5.1) unless they contain NaN;
    * integer variables keep their encoded ``_FillValue`` (e.g. -127 of ``v_imputed``);
    * time variables keep their ``units``/``calendar`` encoding and are stored as int32
      when that is exact (xarray's default int64 is not a CF-1.8 type);
    * strings (e.g. a ``split`` coordinate of "prediction"/"validation") as NetCDF-4
      variable-length strings;
    * global ``Conventions``: ``CF-1.8``, or the CF version of the input if it is later,
      with other conventions of the input (e.g. ``ACDD-1.3``) kept. A file that holds
      64-bit or unsigned integers (e.g. an int64 ``site`` index) declares ``CF-1.9``, the
      first version to allow those types; dtypes are never changed to fit a version;
    * scattered data (variables on one site dimension with auxiliary coordinates along it)
      as a CF discrete sampling geometry, ``featureType = "point"`` (see
      :func:`geogpvae.fields.labelling.point_geometry`), which cdo and other CF tools read;
    * attribute values netCDF cannot hold: booleans become ints, ``None`` is dropped, dicts
      are JSON-encoded.

    Parameters
    ----------
    ds : xarray.Dataset
        The data; not modified. Lazy (dask or file-backed) data are computed during the
        write.
    path : str or os.PathLike
        Target file. Its folder must exist.
    overwrite : bool, default False
        Replace an existing target. Writing over the file ``ds`` was read from is safe: all
        data are read before the new file replaces the old one. Afterwards ``ds`` should not
        be used for further lazy reads (reopen the file).
    complevel : int, default 4
        Deflate level 0-9; 0 writes uncompressed.
    engine : {"netcdf4", "h5netcdf"}, optional
        xarray backend; default: xarray's choice.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    FileExistsError
        The target exists, or another process created it during the write, and
        ``overwrite`` is False.
    FileNotFoundError
        The target's folder does not exist.
    IsADirectoryError
        The target is a folder.
    ValueError
        ``complevel`` outside 0-9.
    TypeError
        A variable holds objects that are not strings.
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    if isinstance(complevel, bool) or not isinstance(complevel, (int, np.integer)) or not (
        0 <= complevel <= 9
    ):
        raise ValueError(f"complevel must be an integer from 0 to 9, got {complevel!r}")
    target = Path(os.fspath(path)).expanduser()
    _check_target(target, overwrite)
    _leftovers(target)

    prepared = _prepare(ds, int(complevel))
    old_mode = None
    if overwrite and target.exists():
        try:
            old_mode = target.stat().st_mode & 0o7777
        except OSError:
            old_mode = None

    tmp = _create_temp(target)
    try:
        _write_netcdf(prepared, tmp, engine)
        _check_not_aborted(tmp, target)
        _fsync(tmp)
        if old_mode is not None:
            os.chmod(tmp, old_mode)
        _commit(tmp, target, overwrite)
    except BaseException:
        _discard(tmp)
        raise
    _fsync_dir(target.parent)
    return target


# --------------------------------------------------------------------------- reading
def _is_url(path: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path) is not None


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
        if _is_url(text):
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
        if not _is_url(f):
            _check_netcdf(f)
    return files


def open_dataset(paths: PathLike | Sequence[PathLike], *, concat_dim: str | None = None,
                 chunks: Any = None, mask_and_scale: bool = True,
                 **kwargs: Any) -> xr.Dataset:
    """Open one NetCDF file, a glob pattern or a list of files as one Dataset.

    One file without ``chunks`` opens lazily through xarray's backend (values read on
    access); with ``chunks``, or with several files, variables are dask arrays. Several
    files are combined with :func:`xarray.open_mfdataset`: along ``concat_dim`` in the
    given (or sorted-glob) order when it is given (``combine="nested"``), else by their
    coordinates (``combine="by_coords"``). Indexes of other dimensions must match exactly
    (``join="exact"``): tiles that do not line up raise instead of being padded with NaN.
    A variable that is not joined (a station coordinate, a static field) must be the same
    in every file, or an :class:`~geogpvae.errors.InputError` says which differs; a variable
    missing from some files, and files joined out of order along ``concat_dim``, are warned
    about (see :mod:`geogpvae.fields.joining`).

    Integer flag variables (``flag_values``/``flag_meanings`` with an integer stored dtype
    and a ``_FillValue``, such as ``v_imputed``) come back in their stored integer dtype
    with the fill value in place of NaN, so a :func:`to_netcdf` round trip is exact.

    Parameters
    ----------
    paths : str, os.PathLike or sequence of them
        A file, a glob pattern (``"runs/*.nc"``; matches are sorted), a URL (OPeNDAP), or a
        list of files or patterns.
    concat_dim : str, optional
        Dimension to concatenate several files along (existing or new).
    chunks : int, dict, "auto" or {}, optional
        Dask chunks, passed to xarray.
    mask_and_scale : bool, default True
        Apply ``_FillValue``/``scale_factor`` decoding (passed to xarray).
    **kwargs
        Further keyword arguments for :func:`xarray.open_dataset` /
        :func:`xarray.open_mfdataset` (``engine``, ``decode_times``, ...).

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    FileNotFoundError
        A file does not exist, or a pattern matches nothing (the message names it).
    NetCDFReadError
        A file looks like NetCDF but cannot be read (truncated, damaged); both an
        ``OSError`` and a ``ValueError``.
    ValueError
        A file is not NetCDF (the message names it), or no paths were given.
    InputError
        Several files disagree on a variable that is not joined.
    """
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
