"""Atomic output: a file appears complete at its target (moved from a hidden temporary file), or not at all."""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
import stat
import threading
import time
import warnings
from pathlib import Path

from .._files import refuse_special_target

__all__ = ["abort_partial_writes"]


def _fsync(path: Path) -> None:
    """fsync a file; a temporary file of this process is checked to be the one it created first."""
    fd = _open_staged(path, os.O_RDONLY) if path in _PARTIAL else os.open(path, os.O_RDONLY)
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
# ``.<target name>.<pid>@<host>.<12 hex>.tmp``: a killed process's leftover is told from a write in progress.
# It is a folder only its owner may enter (mode 0o700) holding the file ``<target name>``: the
# writers that reopen the file by name (netCDF, HDF5) cannot be pointed elsewhere by another user.
_PARTIAL: dict[Path, tuple[int, int, int]] = {}  # temporary files being written: (device, inode, owner)
_PARTIAL_LOCK = threading.RLock()
# Errors of os.link on file systems without hard links (then O_EXCL + rename is used).
_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK,
            errno.EXDEV, errno.EACCES}
# Opening a temporary file again: never through a link, never blocking on a pipe put in its place.
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


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
            if path in _PARTIAL or path / target.name in _PARTIAL:
                continue
        if match is not None and match.group(2) == host and not _pid_running(int(match.group(1))):
            try:
                _remove_leftover(path)
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


def _remove_leftover(path: Path) -> None:
    """Remove a killed write's staging folder (its files, not following links) or, from older
    versions, its temporary file."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # (a Zarr store staged in it is a folder; links inside are not followed)
    else:
        path.unlink()


def _unstage(tmp: Path) -> None:
    """Remove the staging folder of ``tmp`` once the file has left it (nothing if not empty)."""
    try:
        tmp.parent.rmdir()
    except OSError:
        pass


def _create_temp(target: Path) -> Path:
    """Create an empty temporary file for ``target`` (mode 0o666 under the umask) in a staging
    folder of its own beside it (mode 0o700) and register it with its device, inode and owner,
    which :func:`_check_staged` compares later."""
    for _ in range(100):
        folder = _temp_name(target)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        tmp = folder / target.name
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o666)
        except BaseException:
            folder.rmdir()
            raise
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
        with _PARTIAL_LOCK:
            _PARTIAL[tmp] = (info.st_dev, info.st_ino, info.st_uid)
        return tmp
    raise FileExistsError(f"could not create a temporary file beside {target}")


def _replaced(tmp: Path) -> OSError:
    return OSError(
        f"the temporary file {tmp} was replaced by another file or a link while it was "
        "written (another process or user writing in that folder?); nothing was moved"
    )


def _swapped(tmp: Path, info: os.stat_result) -> None:
    """Raise unless ``info`` is the regular file :func:`_create_temp` created at ``tmp``."""
    with _PARTIAL_LOCK:
        created = _PARTIAL.get(tmp)
    if created is None:  # removed by abort_partial_writes
        raise InterruptedError(f"the write of {tmp} was aborted")
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino, info.st_uid) != created:
        raise _replaced(tmp)


def _check_staged(tmp: Path) -> None:
    """Raise unless the name ``tmp`` is still the file this process created (not followed if a link)."""
    try:
        info = os.lstat(tmp)
    except FileNotFoundError:
        with _PARTIAL_LOCK:
            aborted = tmp not in _PARTIAL
        raise (InterruptedError(f"the write of {tmp} was aborted") if aborted else
               OSError(f"the temporary file {tmp} was removed while it was written")) from None
    _swapped(tmp, info)


def _open_staged(tmp: Path, flags: int = os.O_WRONLY) -> int:
    """A descriptor of the temporary file ``tmp``, opened without following a link, checked to be
    the file :func:`_create_temp` created; the caller closes it."""
    try:
        fd = os.open(tmp, flags | _NO_FOLLOW)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):  # a link (EMLINK: BSD), a pipe
            raise _replaced(tmp) from None
        raise
    try:
        _swapped(tmp, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _set_mode(tmp: Path, mode: int) -> None:
    """Give the staged ``tmp`` the permission bits of ``mode`` (never setuid, setgid or sticky),
    through a descriptor that does not follow a swapped-in link."""
    fd = _open_staged(tmp, os.O_RDONLY)
    try:
        os.fchmod(fd, mode & 0o777)
    finally:
        os.close(fd)


def _clear_special_bits(tmp: Path) -> None:
    """Drop setuid, setgid and sticky bits from ``tmp`` (a replaced output's mode may carry them)."""
    mode = os.lstat(tmp).st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        _set_mode(tmp, mode)


def _discard(tmp: Path) -> None:
    with _PARTIAL_LOCK:
        _PARTIAL.pop(tmp, None)
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        _unstage(tmp)


def _exists_message(target: Path) -> str:
    return (f"{target} already exists (another process created it while this one was writing); "
            "nothing was written over it: pass overwrite=True to replace it")


def _commit(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move the finished ``tmp`` to ``target``: replace it, or create it exclusively (hard link).
    ``tmp`` must still be the file :func:`_create_temp` made; setuid, setgid and sticky bits are dropped."""
    with _PARTIAL_LOCK:
        _check_not_aborted(tmp, target)
        _check_staged(tmp)
        _clear_special_bits(tmp)
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
        _PARTIAL.pop(tmp, None)
        _unstage(tmp)


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
            _unstage(tmp)
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
