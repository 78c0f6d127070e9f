"""Reading and writing NetCDF files.

:func:`to_netcdf` writes a Dataset as a compressed, CF-tidy NetCDF-4 file, atomically: a
failed or killed write leaves either no output or the complete previous file.
:func:`open_dataset` opens one file, a glob pattern or a list of files with clear errors.
"""

from __future__ import annotations

import errno
import glob
import json
import math
import os
import re
import secrets
import socket
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import xarray as xr

from .._files import refuse_special_target
from ..errors import NetCDFReadError, UnreadableFileError
from ..errors import one_line as _one_line
from .cf import point_geometry, restore_flag_variables
from .joining import open_several
from .packing import kept_fill

__all__ = [
    "CF_VERSION",
    "NetCDFReadError",
    "StagedFile",
    "UnreadableFileError",
    "abort_partial_writes",
    "atomic_torch_save",
    "open_dataset",
    "read_torch_file",
    "stage_torch_save",
    "to_netcdf",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The CF version written files declare, unless the input declares a later one or the file
#: holds 64-bit or unsigned integers (first allowed by CF-1.9, which is then declared).
CF_VERSION = "CF-1.8"
_CF_TOKEN = re.compile(r"^CF-(\d+)\.(\d+)$")
_GLOB_CHARS = re.compile(r"[*?\[]")
# Chunks of compressed variables hold at most about this many bytes.
_CHUNK_BYTES = 1 << 20
# Encoding keys that describe how a variable was *read* (or how another file was laid out)
# and that we recompute for the written file.
_LAYOUT_KEYS = ("zlib", "complevel", "shuffle", "compression", "compression_opts",
                "chunksizes", "contiguous", "szip", "bzip2", "blosc", "zstd",
                "blosc_shuffle", "szip_coding", "szip_pixels_per_block", "fletcher32",
                "preferred_chunks")
_NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# --------------------------------------------------------------------------- conventions
def _conventions(value: Any, minimum: tuple[int, int] = (1, 8)) -> str:
    """Merge ``CF-<minimum>`` into an existing ``Conventions`` attribute.

    A CF version at least ``minimum`` already present is kept (the latest if several);
    earlier ones are replaced; other conventions (``ACDD-1.3``, ...) are kept after it.
    Names are blank separated, or comma separated when a name contains a blank (CF 2.6.1).
    """
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
    """Chunk shape of at most ~1 MiB: whole trailing (spatial) planes kept as long as possible.

    Leading dimensions (time, z, ...) are halved first, down to 1, then the next ones.
    """
    chunks = list(shape)
    for i in range(len(chunks)):
        while math.prod(chunks) * itemsize > _CHUNK_BYTES and chunks[i] > 1:
            chunks[i] = math.ceil(chunks[i] / 2)
    return tuple(chunks)


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
    """Store times as int32 when that is exact and in range.

    xarray writes times as int64 by default, a type CF allows only from version 1.9 on.
    Units and calendar given in the encoding are kept; otherwise they are fixed to the ones
    xarray chooses, so that the int32 values are exact and the decoded times unchanged.
    """
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
    """CF-1.8 allows byte, short, int, float, double, char and string only; 64-bit and
    unsigned integers came with CF-1.9."""
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
        # CF 2.5.1: coordinate variables should not hold missing values; no fill value on
        # coordinates unless they really have gaps (auxiliary coordinates may).
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
        enc["chunksizes"] = _chunksizes(var.shape, itemsize)
    return enc


def _prepare(ds: xr.Dataset, complevel: int) -> xr.Dataset:
    """A shallow copy of ``ds`` with tidy attributes and encodings; ``ds`` is untouched.

    ``Dataset.copy(deep=False)`` gives new Variable objects sharing the data; their
    ``attrs``/``encoding`` are replaced by new dicts, never mutated.
    """
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


# --------------------------------------------------------------------------- writing
def _write_netcdf(ds: xr.Dataset, tmp: Path, engine: str | None) -> None:
    """Write ``ds`` to ``tmp`` (the temporary file); computes any lazy data."""
    ds.to_netcdf(tmp, mode="w", format="NETCDF4", engine=engine, compute=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open folders
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- temporary files
# Temporary files are named ``.<target name>.<pid>@<host>.<12 hex>.tmp``: a later run on the
# same target can tell a leftover of a killed process on this host (pid no longer running)
# from a write in progress. Earlier versions named them ``.<target name>.<12 hex>.tmp``.
_PARTIAL: set[Path] = set()  # temporary files this process is writing now
_PARTIAL_LOCK = threading.RLock()
# Errors of os.link on file systems without hard links (then O_EXCL + rename is used).
_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
            errno.EXDEV, errno.EACCES}


def _host() -> str:
    name = socket.gethostname().split(".")[0]
    return re.sub(r"[^A-Za-z0-9-]", "", name) or "host"


def _temp_name(target: Path) -> Path:
    return target.with_name(
        f".{target.name}.{os.getpid()}@{_host()}.{secrets.token_hex(6)}.tmp")


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's process, or cannot tell
        return True
    return True


def _leftovers(target: Path) -> None:
    """Remove temporary files of ``target`` left by killed processes on this host.

    A leftover of a process that still runs, of another host or of the earlier naming is
    kept and named in a :class:`UserWarning` (it may belong to a write in progress).
    """
    prefix = re.escape(f".{target.name}.")
    ours = re.compile(prefix + r"(\d+)@([A-Za-z0-9-]*)\.[0-9a-f]{12}\.tmp$")
    older = re.compile(prefix + r"[0-9a-f]{12}\.tmp$")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    host = _host()
    for name in names:
        match = ours.match(name)
        if match is None and not older.match(name):
            continue
        path = target.parent / name
        with _PARTIAL_LOCK:
            if path in _PARTIAL:
                continue
        if match is not None and match.group(2) == host and not _pid_running(int(match.group(1))):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as err:
                warnings.warn(f"could not remove {path}, left by a killed write: {err}",
                              UserWarning, stacklevel=3)
                continue
            warnings.warn(f"removed {path}, a temporary file left by a killed write "
                          f"(pid {match.group(1)})", UserWarning, stacklevel=3)
            continue
        try:
            age = time.time() - path.stat().st_mtime
        except OSError:
            continue
        who = (f"process {match.group(1)} on host {match.group(2) or '?'}" if match else
               "an earlier geogpvae version")
        warnings.warn(
            f"{path} is a temporary file of {who}, {age / 3600:.1f} h old: a write to "
            f"{target.name} in progress, or a leftover of a killed one; delete it when no job "
            "is writing that file", UserWarning, stacklevel=3)


def _create_temp(target: Path) -> Path:
    """Create (exclusively) an empty temporary file beside ``target`` and return its path.

    Created with mode 0o666 so the process umask applies, as for a normal new file. The
    path is registered so that :func:`abort_partial_writes` can remove it.
    """
    for _ in range(100):
        tmp = _temp_name(target)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        with _PARTIAL_LOCK:
            _PARTIAL.add(tmp)
        return tmp
    raise FileExistsError(f"could not create a temporary file beside {target}")


def _discard(tmp: Path) -> None:
    with _PARTIAL_LOCK:
        _PARTIAL.discard(tmp)
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass


def _exists_message(target: Path) -> str:
    return (f"{target} already exists (another process created it while this one was writing); "
            "nothing was written over it: pass overwrite=True to replace it")


def _commit(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move the finished ``tmp`` to ``target``: replace it, or create it exclusively.

    Without ``overwrite`` the target is made a hard link of ``tmp`` (``link(2)`` fails when
    the name exists, atomically, also on NFS), so of two processes finishing at the same time
    exactly one wins. Where hard links are not supported, the name is first reserved with
    ``O_CREAT | O_EXCL`` and then replaced.
    """
    with _PARTIAL_LOCK:
        _check_not_aborted(tmp, target)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise FileExistsError(_exists_message(target)) from None
            except OSError as err:
                if err.errno not in _NO_LINK:
                    raise
                try:
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                except FileExistsError:
                    raise FileExistsError(_exists_message(target)) from None
                os.close(fd)
                os.replace(tmp, target)
            else:
                tmp.unlink()
        _PARTIAL.discard(tmp)


def _check_not_aborted(tmp: Path, target: Path) -> None:
    with _PARTIAL_LOCK:
        if tmp not in _PARTIAL:  # removed by abort_partial_writes
            raise InterruptedError(f"the write of {target} was aborted")


def abort_partial_writes() -> list[Path]:
    """Remove the temporary files of every write in progress in this process.

    For a signal handler that stops the process at once: afterwards no write of this process
    can complete (its final step sees the temporary file gone and raises).

    Returns
    -------
    list of Path
        The files removed.
    """
    with _PARTIAL_LOCK:
        removed = sorted(_PARTIAL)
        for tmp in removed:
            try:
                tmp.unlink()
            except OSError:
                pass
        _PARTIAL.clear()
    return removed


def _check_target(target: Path, overwrite: bool) -> None:
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(
            f"cannot write {target}: folder {folder} does not exist (create it first)"
        )
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {target}: it is a folder")
    refuse_special_target(target)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists; pass overwrite=True to replace it")


class StagedFile:
    """A complete temporary file beside ``target``, waiting to be moved there.

    Made by :func:`stage_torch_save`, so that a caller can decide when (and whether) the
    file appears: e.g. a saved model only once the job's main output is in place.

    Attributes
    ----------
    tmp, target : pathlib.Path
        The hidden temporary file and where it goes.
    overwrite : bool
        Replace an existing ``target`` (else it is created exclusively).
    """

    def __init__(self, tmp: Path, target: Path, overwrite: bool) -> None:
        self.tmp, self.target, self.overwrite = tmp, target, overwrite

    def commit(self) -> Path:
        """Move the file to ``target`` (see :func:`atomic_torch_save`); returns ``target``.

        Raises
        ------
        FileExistsError
            ``target`` exists and ``overwrite`` is False; the temporary file is removed.
        """
        try:
            _commit(self.tmp, self.target, self.overwrite)
        except BaseException:
            _discard(self.tmp)
            raise
        _fsync_dir(self.target.parent)
        return self.target

    def discard(self) -> None:
        """Remove the temporary file (nothing happens after :meth:`commit`)."""
        _discard(self.tmp)


def stage_torch_save(obj: Any, path: str | os.PathLike, *, overwrite: bool = False) -> StagedFile:
    """``torch.save`` to a hidden temporary file beside ``path`` and fsync it; do not move it.

    Parameters are those of :func:`atomic_torch_save`; the target is checked now, and again
    by :meth:`StagedFile.commit`.

    Returns
    -------
    StagedFile
        Call its ``commit()`` to create ``path``, or ``discard()`` to drop the file.
    """
    import torch  # io is usable without importing torch

    path = Path(os.fspath(path)).expanduser()
    _check_target(path, overwrite)
    _leftovers(path)
    tmp = _create_temp(path)
    try:
        with open(tmp, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _discard(tmp)
        raise
    return StagedFile(tmp, path, overwrite)


def atomic_torch_save(obj: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """``torch.save`` to a hidden temporary file beside ``path``, fsync it, then move it there.

    A killed process leaves either no file or the previous one at ``path``, never a partial
    file. Without ``overwrite`` the file is created exclusively: of two processes saving to
    the same new ``path``, one fails with :class:`FileExistsError`. Used for saved models and
    training checkpoints.

    Parameters
    ----------
    obj : object
        Plain values (tensors, numbers, strings, lists, dicts), loadable with
        ``torch.load(..., weights_only=True)``.
    path : str or path-like
        Target file; its folder must exist.
    overwrite : bool
        Replace an existing file; otherwise an existing ``path`` raises.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    FileNotFoundError, IsADirectoryError, FileExistsError
        The folder is missing, ``path`` is a folder, or it exists (or appears during the
        write) and ``overwrite`` is False; nothing is written.
    """
    return stage_torch_save(obj, path, overwrite=overwrite).commit()


def _describe_torch_error(err: BaseException, head: bytes) -> str:
    """What is wrong with a file ``torch.load(weights_only=True)`` refused, in a few words.

    ``head`` is the file's first bytes. Never repeats torch's own text, which may advise
    ``weights_only=False`` (unsafe: it runs code from the file).
    """
    if not head:
        return "the file is empty"
    zipped = head.startswith(b"PK")  # torch.save's format; older torch wrote a bare pickle
    if not zipped and not head.startswith(b"\x80"):
        return "it is not a file written by torch.save"
    if "Unsupported global" in str(err) or (zipped and type(err).__name__ == "UnpicklingError"):
        return ("it holds Python objects other than tensors and plain values, which are "
                "never loaded (they could run code)")
    if zipped or isinstance(err, EOFError):
        return "the file is damaged or truncated (an interrupted copy?)"
    return "it is not a file written by torch.save (a pickle of something else, or damaged)"


def read_torch_file(path: str | os.PathLike, what: str) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)`` with one-line errors.

    Parameters
    ----------
    path : str or path-like
    what : str
        What the file should be, for messages (``"geogpvae model file"``).

    Returns
    -------
    object
        The loaded plain values.

    Raises
    ------
    FileNotFoundError
        No such file.
    IsADirectoryError
        ``path`` is a folder.
    UnreadableFileError
        The file is empty, truncated, damaged, not a torch file or holds arbitrary Python
        objects; the message names the file and the problem.
    """
    import torch

    path = Path(os.fspath(path)).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} not found")
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a folder, not a file")
    try:
        with warnings.catch_warnings():  # torch's remarks on odd pickles are not ours to pass on
            warnings.filterwarnings("ignore", module=r"torch(\.|$)")
            return torch.load(path, map_location="cpu", weights_only=True)
    except (PermissionError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        with open(path, "rb") as fh:
            head = fh.read(4)
        raise UnreadableFileError(
            f"{path} is not a readable {what}: {_describe_torch_error(err, head)}"
        ) from None


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
      :func:`geogpvae.fields.cf.point_geometry`), which cdo and other CF tools read;
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
