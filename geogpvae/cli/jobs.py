"""Batch-job machinery behind the ``geogpvae`` command: checkpoints, signals, several processes.

Checkpoints are atomic and refused for another job; :class:`SignalTrap` turns a first SIGTERM/SIGINT/
SIGUSR1 into a stop after the epoch; :func:`start_cluster` joins a torchrun or srun launch (docs/cluster.md).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from .._version import __version__
from ..errors import UnreadableFileError, one_line
from ..fields.atomic import abort_partial_writes
from ..fields.torch_files import atomic_torch_save, read_torch_file

__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "Cluster",
    "JobInterrupted",
    "SignalTrap",
    "run_interruptible",
    "checkpoint_path",
    "checkpoint_stage",
    "exit_after_group",
    "job_identity",
    "launch_environment",
    "load_checkpoint",
    "save_checkpoint",
    "start_cluster",
]

#: Format tag of the checkpoint files written by :func:`save_checkpoint`.
CHECKPOINT_FORMAT = "geogpvae-job-checkpoint"
_CHECKPOINT_VERSION = 1
_IDENTITY_KEYS = ("inputs", "vars", "options", "data")


# --------------------------------------------------------------------------- errors
class CheckpointError(ValueError):
    """A checkpoint that cannot be used for this job (another job's, or not a checkpoint)."""


class JobInterrupted(Exception):
    """Training stopped early on a signal; the message says what was saved and how to resume.

    Parameters
    ----------
    signum : int
        The signal that asked the job to stop.
    checkpoint : pathlib.Path or None
        Where the job's state was saved (None without a checkpoint folder).
    epoch, total : int, optional
        Completed and planned epochs.
    selection : (float, int), optional
        Stopped in the KL-weight selection: the candidate's factor and epochs (``epoch`` counts its own).
    """

    def __init__(
        self,
        signum: int,
        checkpoint: Path | None,
        epoch: int | None = None,
        total: int | None = None,
        selection: tuple[float, int] | None = None,
    ) -> None:
        self.signum = int(signum)
        self.checkpoint = checkpoint
        name = _signal_name(self.signum)
        when = (
            ""
            if epoch is None
            else f" after epoch {epoch}" + ("" if total is None else f" of {total}")
        )
        if selection is not None:
            when = f" during the KL-weight selection (beta x{selection[0]:g}, epoch {epoch} of {selection[1]})"
        if checkpoint is None:
            where = "no checkpoint was written (pass --checkpoint-dir to make the job resumable)"
        elif epoch == 0:
            when = " before the first training epoch"
            where = "nothing to resume yet: a run with --resume starts again from the beginning"
        else:
            where = f"checkpoint written to {checkpoint}; run again with --resume to continue"
        super().__init__(f"stopped by {name}{when}, output not written; {where}")

    @property
    def exit_code(self) -> int:
        """The shell convention for a job ended by a signal: 128 + the signal number."""
        return 128 + self.signum


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --------------------------------------------------------------------------- signals
def _trappable() -> tuple[int, ...]:
    names = ("SIGTERM", "SIGINT", "SIGUSR1")
    return tuple(int(getattr(signal, n)) for n in names if hasattr(signal, n))


class SignalTrap:
    """Turn the first termination signal into a request to stop; a second one stops at once.

    A context manager (outside the main thread it traps nothing). A first signal sets :attr:`signum`,
    polled after every epoch; a second removes the temporary files of writes and exits 128 + N.

    Parameters
    ----------
    signals : sequence of int, optional
        Signals to trap; default SIGTERM, SIGINT and SIGUSR1.
    announce : callable, optional
        Called with a one-line message when the first signal arrives.
    speak : bool
        Print a line on stderr when a second signal stops the process.

    Attributes
    ----------
    signum : int or None
        The first signal received.
    plan : str
        What the job does after a first signal (for the announcement), updated by the caller.
    """

    def __init__(
        self,
        signals: Sequence[int] | None = None,
        announce: Callable[[str], None] | None = None,
        speak: bool = True,
    ) -> None:
        self.signals = tuple(signals) if signals is not None else _trappable()
        self.announce, self.speak = announce, speak
        self.signum: int | None = None
        self.plan = "finishing the current epoch, then stopping"
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalTrap:
        try:
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread
            self._restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            _stop_now(signum, self.speak)
        self.signum = signum
        if self.announce is not None:
            self.announce(
                f"received {_signal_name(signum)}: {self.plan} (send it again to stop at once)"
            )


def _stop_now(signum: int, speak: bool) -> None:
    """Remove the temporary files of writes in progress and ``os._exit(128 + signum)``, without clean-up
    (it could wait on the worker thread); the message goes straight to fd 2."""
    try:
        removed = abort_partial_writes()
        if speak:
            what = f"; removed {', '.join(map(str, removed))}" if removed else ""
            text = f"geogpvae: received {_signal_name(signum)} again: stopping now{what}\n"
            os.write(2, text.encode(errors="replace"))
    finally:
        os._exit(128 + signum)


def run_interruptible(work: Callable[[], Any]) -> Any:
    """``work()`` in a worker thread, so the waiting main thread handles signals at once; its result.

    A long call into C would otherwise delay a :class:`SignalTrap` until it returns. Exceptions of
    ``work`` are re-raised here.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            box["error"] = err

    worker = threading.Thread(target=run, name="geogpvae-write", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if "error" in box:
        raise box["error"]
    return box.get("value")


# --------------------------------------------------------------------------- checkpoints
def job_identity(
    inputs: Sequence[str | os.PathLike[str]],
    vars: Sequence[str],
    options: Mapping[str, Any],
    data: str,
) -> dict[str, Any]:
    """What makes two runs the same job, for :func:`load_checkpoint` to compare: the ``inputs`` by real
    path, the ``vars``, the JSON-serialisable ``options`` that change the result (not the device or
    progress display) as canonical JSON with ``options_hash``, and ``data``
    (:meth:`geogpvae.fields.stacking.Field.fingerprint`)."""
    canonical = json.dumps(options, sort_keys=True, default=str)
    return {
        "inputs": [os.path.realpath(os.fspath(p)) for p in inputs],
        "vars": [str(v) for v in vars],
        "options": canonical,
        "options_hash": hashlib.sha256(canonical.encode()).hexdigest()[:16],
        "data": str(data),
    }


def checkpoint_path(folder: str | os.PathLike[str], output: str | os.PathLike[str]) -> Path:
    """The checkpoint file of the job writing ``output``, inside ``folder``: the output's name and a
    hash of its absolute path (a URL as given), so that the tasks of a job array can share one folder."""
    text = os.fspath(output)
    full = text.rstrip("/") if "://" in text else os.path.abspath(text)
    tag = hashlib.sha256(full.encode()).hexdigest()[:8]
    return Path(folder) / f"{Path(full).name}.{tag}.ckpt"


def save_checkpoint(path: Path, snapshot: Mapping[str, Any], identity: Mapping[str, Any]) -> Path:
    """Write ``snapshot`` (:meth:`geogpvae.engine.core.GPVAEEngine.checkpoint`) and ``identity``
    (:func:`job_identity`) to ``path`` atomically, replacing it; returns ``path``."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "version": _CHECKPOINT_VERSION,
        "package_version": __version__,
        "job": dict(identity),
        "checkpoint": dict(snapshot),
    }
    atomic_torch_save(payload, path, overwrite=True)
    return Path(path)


def _read(path: Path) -> dict[str, Any]:
    from ..engine.state import format_version  # the engine is loaded only when a checkpoint is read

    fix = "delete it or pass --overwrite to start over"
    try:
        payload = read_torch_file(path, "geogpvae checkpoint")
    except UnreadableFileError as err:
        raise CheckpointError(f"{err}; {fix}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a geogpvae checkpoint (format tag missing); {fix}")
    try:
        version = format_version(payload)
    except ValueError as err:
        raise CheckpointError(f"{path} is a damaged geogpvae checkpoint: {err}; {fix}") from None
    if version > _CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path} was written by a newer geogpvae ({payload.get('package_version')}); "
            f"resume with that version, or {fix}"
        )
    return payload


def _check_snapshot(path: Path, snapshot: Any) -> None:
    """Refuse a snapshot whose counters, shapes or numbers cannot be right (a damaged checkpoint)."""
    from ..engine.core import build_model
    from ..engine.state import check_checkpoint

    try:
        check_checkpoint(snapshot, build_model)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, RuntimeError) as err:
        what = f"missing entry {err}" if isinstance(err, KeyError) else one_line(err)[:300]
        raise CheckpointError(f"{path} is a damaged geogpvae checkpoint ({what}); delete it or pass "
                              "--overwrite to start over") from None


def _differences(saved: Mapping[str, Any], identity: Mapping[str, Any]) -> list[str]:
    out = []
    for key in _IDENTITY_KEYS:
        if saved.get(key) == identity.get(key):
            continue
        if key == "options":
            old, new = json.loads(saved.get(key) or "{}"), json.loads(identity[key])
            keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            detail = ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys)
            out.append(f"options differ: {detail}")
        elif key == "data":
            out.append("the input values or coordinates differ")
        else:
            out.append(f"{key} differ: {saved.get(key)} -> {identity.get(key)}")
    return out


def load_checkpoint(path: Path, identity: Mapping[str, Any]) -> dict[str, Any]:
    """The engine snapshot in the checkpoint at ``path``, for ``GPVAEEngine.fit(..., resume=...)``.

    Raises
    ------
    CheckpointError
        Not a checkpoint, damaged (checksum, counters, shapes, NaN values), or not this job's
        ``identity`` (:func:`job_identity`; the message says what differs).
    """
    payload = _read(Path(path))
    diffs = _differences(payload.get("job", {}), identity)
    if diffs:
        raise CheckpointError(
            f"checkpoint {path} belongs to a different job ({'; '.join(diffs)}). "
            "Resume with the same inputs and options, or pass --overwrite to start over"
        )
    _check_snapshot(Path(path), payload.get("checkpoint"))
    return payload["checkpoint"]


def checkpoint_epoch(snapshot: Mapping[str, Any]) -> int:
    """Completed epochs recorded in an engine snapshot (a candidate's, during the selection)."""
    return int(snapshot["train"]["epoch"])


def checkpoint_stage(snapshot: Mapping[str, Any]) -> str:
    """Where an engine snapshot stands, for the resume message (``"after epoch 40"``)."""
    selection = snapshot.get("selection")
    if selection is None:
        return f"after epoch {checkpoint_epoch(snapshot)}"
    scored = len(selection["scores"])
    return (f"in the KL-weight selection (beta x{selection['factor']:g} after epoch {checkpoint_epoch(snapshot)}; "
            f"{scored} candidate{'' if scored == 1 else 's'} scored)")


# --------------------------------------------------------------------------- several processes
@dataclass(frozen=True)
class Launch:
    """How this process was launched: its rank, the number of processes, its local rank."""

    rank: int
    world: int
    local_rank: int
    launcher: str


def _int_env(env: Mapping[str, str], key: str) -> int:
    try:
        return int(env[key])
    except ValueError:
        raise ValueError(f"environment variable {key}={env[key]!r} is not an integer") from None


def launch_environment(env: Mapping[str, str] | None = None) -> Launch | None:
    """The torchrun (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``) or srun (``SLURM_STEP_NUM_TASKS``,
    ``SLURM_PROCID``, ``SLURM_LOCALID``) launch of several processes this one belongs to; None if alone.

    Raises
    ------
    ValueError
        A launch variable is not an integer, or the rank lies outside the world.
    """
    env = os.environ if env is None else env
    if "WORLD_SIZE" in env and "RANK" in env:
        world, rank = _int_env(env, "WORLD_SIZE"), _int_env(env, "RANK")
        local = _int_env(env, "LOCAL_RANK") if "LOCAL_RANK" in env else rank
        launcher = "torchrun"
    elif "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:
        world, rank = _int_env(env, "SLURM_STEP_NUM_TASKS"), _int_env(env, "SLURM_PROCID")
        local = _int_env(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        launcher = "srun"
    else:
        return None
    if world <= 1:
        return None
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is outside 0..{world - 1} ({launcher} environment)")
    return Launch(rank, world, local, launcher)


@dataclass
class Cluster:
    """This process's place among the processes of one job.

    Attributes
    ----------
    rank, world, local_rank : int
        Rank, number of processes, rank on this machine (0, 1, 0 for a single process).
    backend : str or None
        ``"nccl"`` or ``"gloo"`` when a process group runs.
    owns_group : bool
        Whether :func:`start_cluster` started the group (and :meth:`close` ends it).
    """

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str | None = None
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that reads checkpoints, writes files and reports."""
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        """Whether several processes take part."""
        return self.world > 1

    def _device(self) -> torch.device:
        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def max(self, value: int) -> int:
        """The largest ``value`` over all processes (every process must call it)."""
        if not self.parallel:
            return int(value)
        t = torch.tensor([int(value)], dtype=torch.int64, device=self._device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return int(t.item())

    def share(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every process (every process must call it)."""
        if not self.parallel:
            return obj
        box = [obj if self.is_main else None]
        torch.distributed.broadcast_object_list(box, src=0, device=self._device())
        return box[0]

    def close(self) -> None:
        """End the process group if this object started it."""
        if self.owns_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        self.owns_group = False


def _pick_device(device: str, local_rank: int) -> str:
    """The device of one process: its own GPU for ``auto``/``cuda`` when there are GPUs."""
    if device in ("auto", "cuda") and torch.cuda.is_available():
        n = torch.cuda.device_count()
        return f"cuda:{local_rank % n}"
    if device == "auto":
        return "cpu"
    return device


def start_cluster(device: str, *, timeout_s: float = 3600.0) -> tuple[Cluster, str]:
    """Join the job's process group when launched as several processes.

    Parameters
    ----------
    device : str
        The device asked for (``auto``, ``cpu``, ``cuda``, ``cuda:N``).
    timeout_s : float
        Longest wait in one collective step (e.g. while rank 0 writes the output).

    Returns
    -------
    cluster, device : Cluster, str
        This process's place and device (``cuda:<local rank>`` for ``auto``/``cuda`` on GPUs).

    Raises
    ------
    ValueError
        An ``srun`` launch of several tasks without ``MASTER_ADDR``/``MASTER_PORT``.
    """
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", rank))
        chosen = _pick_device(device, local)
        return Cluster(rank, world, local, dist.get_backend(), owns_group=False), chosen
    launch = launch_environment()
    if launch is None:
        return Cluster(), device
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ValueError(
            f"launched as {launch.world} {launch.launcher} tasks but {' and '.join(missing)} "
            "is not set: export MASTER_ADDR (the first node's host name) and MASTER_PORT "
            "(a free port) in the job script, or run a single task"
        )
    chosen = _pick_device(device, launch.local_rank)
    backend = "nccl" if chosen.startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(torch.device(chosen))
    dist.init_process_group(
        backend,
        init_method="env://",
        rank=launch.rank,
        world_size=launch.world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    cluster = Cluster(launch.rank, launch.world, launch.local_rank, backend, owns_group=True)
    global _GROUP_STARTED
    _GROUP_STARTED = True
    return cluster, chosen


# Whether this process started a process group (see :func:`exit_after_group`).
_GROUP_STARTED = False


def exit_after_group(code: int) -> None:
    """End a process that ran a process group with ``os._exit(code)``; return otherwise.

    Skips the interpreter's shutdown, in which gloo's worker threads can abort a finished run
    (SIGABRT, "terminate called without an active exception"); the streams are flushed first.
    """
    if not _GROUP_STARTED:
        return
    flush_streams()
    logging.shutdown()
    os._exit(code)


def flush_streams() -> None:
    """Flush stdout and stderr (before a process exits or hands over to another)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # pragma: no cover - closed streams
            pass
