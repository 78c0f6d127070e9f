"""Checks of a file about to be written (standard library only: the command line runs them early)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

__all__ = ["refuse_special_target", "free_bytes", "disk_full", "no_space"]


def refuse_special_target(target: Path, what: str = "") -> None:
    """Refuse to replace a symbolic link, a named pipe, a device or a socket at ``target``.

    Raises
    ------
    FileExistsError
        ``target`` is one of those (an atomic write would replace the name, not the file it
        stands for); the message says which, prefixed with ``what``.
    """
    name = f"{what} {target}" if what else str(target)
    if target.is_symlink():
        raise FileExistsError(
            f"cannot write {name}: it is a symbolic link (to {os.readlink(target)}); name the "
            "file it points to, or another name"
        )
    if target.exists() and not stat.S_ISREG(target.stat().st_mode) and not target.is_dir():
        raise FileExistsError(f"cannot write {name}: it is not a regular file (a device, pipe or socket)")


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Free bytes on the device of the folder of ``path`` (None when it cannot be told)."""
    try:
        return shutil.disk_usage(Path(path).expanduser().absolute().parent).free
    except OSError:
        return None


def disk_full(err: BaseException, path: str | os.PathLike[str], need: int) -> bool:
    """Whether ``err``, raised writing about ``need`` bytes to ``path``, says its device is full:
    ENOSPC or EDQUOT, or netCDF's "HDF error" and torch's failed writes when less than ``need`` is free."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(err)
    vague = "HDF error" in text or "inline_container" in text or "file write failed" in text
    free = free_bytes(path) if vague else None
    return free is not None and free < need


def no_space(path: str | os.PathLike[str], what: str = "nothing was written") -> OSError:
    """The error of a write to ``path`` that found its device full (an OSError with ENOSPC)."""
    return OSError(errno.ENOSPC, f"no space left on device: {path}; {what}: free some space and try again")
