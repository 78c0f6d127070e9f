"""Saving and loading torch files (saved models, training checkpoints); torch is imported lazily."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from ..errors import UnreadableFileError
from .atomic import _check_target, _commit, _create_temp, _discard, _fsync_dir, _leftovers

__all__ = [
    "StagedFile",
    "UnreadableFileError",
    "atomic_torch_save",
    "read_torch_file",
    "stage_torch_save",
]


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
    """``torch.save`` to a hidden temporary file beside ``path`` and fsync it; do not move it.

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
    """
    return stage_torch_save(obj, path, overwrite=overwrite).commit()


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
    """``torch.load(path, map_location="cpu", weights_only=True)`` with one-line errors.

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
        Empty, truncated, damaged, not torch's, or holding arbitrary Python objects.
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
