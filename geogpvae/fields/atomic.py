"""Atomic output: a file appears complete at its target (moved from a hidden temporary file), or not at all."""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
import threading
import time
import warnings
from pathlib import Path

from .._files import refuse_special_target

__all__ = ["abort_partial_writes"]


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
# ``.<target name>.<pid>@<host>.<12 hex>.tmp``: a killed process's leftover is told from a write in progress
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
    """Remove temporary files of ``target`` left by killed processes on this host; warn about others."""
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
    """Create an empty temporary file beside ``target`` (mode 0o666 under the umask) and register it."""
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
    """Move the finished ``tmp`` to ``target``: replace it, or create it exclusively (hard link)."""
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
    """Remove the temporary files of this process's writes in progress (for a signal handler).

    Returns
    -------
    list of Path
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
