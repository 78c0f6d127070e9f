"""Saving and loading torch files (saved models, training checkpoints); torch is imported lazily.

A file is ``torch.save``'s zip archive with one more record, :data:`CHECKSUM_RECORD`: the SHA-256
of the other records, the package version and a format tag. Reading verifies it where present
(files of earlier versions have none), so a damaged or altered file is refused, never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

from .._files import disk_full, no_space
from .._version import __version__
from ..errors import UnreadableFileError
from .atomic import (
    _check_staged,
    _check_target,
    _commit,
    _create_temp,
    _discard,
    _fsync_dir,
    _leftovers,
    _open_staged,
)

__all__ = [
    "CHECKSUM_FORMAT",
    "CHECKSUM_RECORD",
    "StagedFile",
    "UnreadableFileError",
    "atomic_torch_save",
    "read_torch_file",
    "stage_torch_save",
]

#: Name of the checksum record inside the archive (beside ``data.pkl``).
CHECKSUM_RECORD = "geogpvae-checksum.json"
#: Format tag of that record.
CHECKSUM_FORMAT = "geogpvae-checksum"


class StagedFile:
    """A complete temporary file beside ``target``, waiting to be moved there.

    Attributes
    ----------
    tmp, target : pathlib.Path
    overwrite : bool
    """

    def __init__(self, tmp: Path, target: Path, overwrite: bool) -> None:
        self.tmp, self.target, self.overwrite = tmp, target, overwrite

    def commit(self) -> Path:
        """Move the file to ``target`` (see :func:`atomic_torch_save`).

        Returns
        -------
        pathlib.Path

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
    """``torch.save`` with a checksum to a hidden temporary file beside ``path``, fsynced; not moved.

    Parameters
    ----------
    obj : object
    path : str or path-like
    overwrite : bool

    Returns
    -------
    StagedFile
        Its ``commit()`` creates ``path``, ``discard()`` drops the file.
    """
    import torch  # this module is usable without importing torch

    path = Path(os.fspath(path)).expanduser()
    _check_target(path, overwrite)
    _leftovers(path)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    _add_checksum(buffer)
    tmp = _create_temp(path)
    try:
        with os.fdopen(_open_staged(tmp), "wb") as fh:  # never reopened by name
            fh.write(buffer.getbuffer())
            fh.flush()
            os.fsync(fh.fileno())
        _check_staged(tmp)
    except OSError as err:
        _discard(tmp)
        if disk_full(err, path, buffer.getbuffer().nbytes):
            raise no_space(path) from err
        raise
    except BaseException:
        _discard(tmp)
        raise
    return StagedFile(tmp, path, overwrite)


def atomic_torch_save(obj: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """``torch.save`` with a checksum to a hidden temporary file beside ``path``, then move it there.

    Parameters
    ----------
    obj : object
        Plain values, loadable with ``torch.load(..., weights_only=True)``.
    path : str or path-like
    overwrite : bool

    Returns
    -------
    Path

    Raises
    ------
    FileExistsError
        ``path`` exists (or appears meanwhile) and ``overwrite`` is False.
    OSError
        ``errno.ENOSPC``, "no space left on device: PATH", when the device filled up (nothing is
        left behind).
    """
    return stage_torch_save(obj, path, overwrite=overwrite).commit()


def _digest(archive: zipfile.ZipFile) -> str:
    """SHA-256 of the records of ``archive`` but the checksum's (names, sizes, bytes; CRCs checked)."""
    sha = hashlib.sha256()
    for info in archive.infolist():
        if info.filename.rpartition("/")[2] != CHECKSUM_RECORD:
            data = archive.read(info)
            sha.update(info.filename.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return sha.hexdigest()


def _add_checksum(buffer: io.BytesIO) -> None:
    """Append the checksum record to the archive ``torch.save`` wrote into ``buffer``."""
    with zipfile.ZipFile(buffer, "a") as archive:
        folder = archive.namelist()[0].partition("/")[0]
        record = {"format": CHECKSUM_FORMAT, "version": 1, "package_version": __version__,
                  "sha256": _digest(archive)}
        archive.writestr(f"{folder}/{CHECKSUM_RECORD}", json.dumps(record))


def _checksum_problem(data: bytes) -> str | None:
    """What is wrong with the records of a zip archive, or None (no checksum record: not checked)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if n.rpartition("/")[2] == CHECKSUM_RECORD]
            digest = _digest(archive)
            record = json.loads(archive.read(names[0])) if names else None
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - zipfile and zlib raise many kinds for a damaged file
        return f"the file is damaged or truncated ({' '.join(str(err).split()) or type(err).__name__})"
    if record is None:
        return None
    if not isinstance(record, dict) or record.get("format") != CHECKSUM_FORMAT:
        return "its checksum record is damaged"
    if record.get("sha256") != digest:
        return "its content does not match its checksum (damaged or altered since it was written)"
    return None


def _describe_torch_error(err: BaseException, head: bytes) -> str:
    """What is wrong with a file torch refused, from its first bytes (never torch's unsafe advice)."""
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
    """``torch.load(path, map_location="cpu", weights_only=True)`` after its checksum, with one-line errors.

    Parameters
    ----------
    path : str or path-like
    what : str
        What the file should be, for messages.

    Returns
    -------
    object

    Raises
    ------
    UnreadableFileError
        Empty, truncated, damaged, not matching its checksum, not torch's, or holding arbitrary
        Python objects.
    """
    import torch

    path = Path(os.fspath(path)).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} not found")
    if path.is_dir():
        raise IsADirectoryError(f"{what} {path} is a folder, not a file")
    data = path.read_bytes()  # checked and loaded from memory: the same bytes
    problem = _checksum_problem(data) if data.startswith(b"PK") else None
    if problem is not None:
        raise UnreadableFileError(f"{path} is not a readable {what}: {problem}")
    try:
        with warnings.catch_warnings():  # torch's remarks on odd pickles are not ours to pass on
            warnings.filterwarnings("ignore", module=r"torch(\.|$)")
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise UnreadableFileError(
            f"{path} is not a readable {what}: {_describe_torch_error(err, data[:4])}"
        ) from None
