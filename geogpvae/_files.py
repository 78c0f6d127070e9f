"""Checks of a file about to be written (standard library only: the command line runs them early)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["refuse_special_target"]


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
