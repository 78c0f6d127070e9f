"""Batch-job machinery behind the ``geogpvae`` command: checkpoints, signals, several processes.

Nothing here knows about the command line; :mod:`geogpvae.cli` puts the pieces together.

Checkpoints
    :func:`save_checkpoint` writes the engine's resumable snapshot
    (:meth:`geogpvae.engine.core.GPVAEEngine.checkpoint`) with the job's identity (input files,
    variables, options, a hash of the data) to a hidden temporary file, fsyncs it and renames
    it into place, so a checkpoint on disk is always complete. :func:`load_checkpoint` reads it
    with ``torch.load(..., weights_only=True)`` (no arbitrary unpickling) and refuses one that
    belongs to another job, saying what differs.

Signals
    :class:`SignalTrap` turns the first SIGTERM, SIGINT or SIGUSR1 into a stop request that
    training polls after every epoch; a second one stops the process at once (temporary
    files removed, exit 128 + N). :func:`run_interruptible` runs the final prediction and
    write in a worker thread so that the main thread can act on a signal at once. Schedulers send SIGTERM some time before they kill a job (SLURM's ``KillWait``,
    or earlier with ``#SBATCH --signal``), which leaves time to finish the epoch and write
    the checkpoint.

Several processes
    :func:`start_cluster` recognises a ``torchrun`` launch (``WORLD_SIZE``, ``RANK``,
    ``LOCAL_RANK``) or an ``srun`` launch of several tasks (``SLURM_STEP_NUM_TASKS``,
    ``SLURM_PROCID``, ``SLURM_LOCALID`` with ``MASTER_ADDR``/``MASTER_PORT``), starts the
    process group (NCCL on GPUs, gloo on CPUs) and gives each process its GPU. The engine then
    trains a DistributedDataParallel model, each rank on its share of every epoch's
    mini-batches. :class:`Cluster` holds the few collective steps the command needs.
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
from ..errors import UnreadableFileError
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
    """Training stopped early on a signal.

    Parameters
    ----------
    signum : int
        The signal that asked the job to stop.
    checkpoint : pathlib.Path or None
        Where the job's state was saved (None when no checkpoint folder was given).
    epoch, total : int, optional
        Completed and planned epochs.
    selection : tuple (float, int), optional
        Stopped during the KL-weight selection: the candidate's factor and its epochs
        (``epoch`` then counts the candidate's).
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

    Used as a context manager; the previous handlers are restored on exit. Outside the
    main thread (where Python cannot install handlers) it traps nothing.

    The first SIGTERM, SIGINT or SIGUSR1 only sets :attr:`signum` (training polls it after
    every epoch). A second one, of any of these kinds, ends the process at once: the
    temporary files of writes in progress are removed (so no output or checkpoint appears;
    see :func:`geogpvae.fields.atomic.abort_partial_writes`) and the process exits with 128 +
    that signal's number, without unwinding.

    Parameters
    ----------
    signals : sequence of int, optional
        Signals to trap; default SIGTERM, SIGINT and SIGUSR1.
    announce : callable, optional
        Called with a one-line message when the first signal arrives.
    speak : bool, default True
        Print a line on stderr when a second signal stops the process.

    Attributes
    ----------
    signum : int or None
        The first signal received.
    plan : str
        What the job does after a first signal (for the announcement); the caller updates
        it as the job moves on.
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

    @property
    def requested(self) -> bool:
        """Whether a stop was requested."""
        return self.signum is not None

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
    """End the process at once: remove the temporary files of writes in progress, exit 128+N.

    ``os._exit`` skips the interpreter's clean-up, which could wait for a write of the worker
    thread or for other processes; output goes straight to the file descriptor, since the
    main thread may be inside a write to ``sys.stderr`` itself.
    """
    try:
        removed = abort_partial_writes()
        if speak:
            what = f"; removed {', '.join(map(str, removed))}" if removed else ""
            text = f"geogpvae: received {_signal_name(signum)} again: stopping now{what}\n"
            os.write(2, text.encode(errors="replace"))
    finally:
        os._exit(128 + signum)


def run_interruptible(work: Callable[[], Any]) -> Any:
    """``work()`` in a worker thread while the main thread waits, and its result.

    Python runs signal handlers in the main thread only, between bytecodes: a long call
    into C (compressing and writing a large variable, a big tensor operation) would delay a
    :class:`SignalTrap` until it returns. Waiting here, the main thread handles a signal
    within a fraction of a second. Exceptions of ``work`` are re-raised here.
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
    """What makes two runs the same job, for :func:`load_checkpoint` to compare.

    Parameters
    ----------
    inputs : sequence of path
        Input files (compared by their real paths).
    vars : sequence of str
        The imputed variables.
    options : mapping
        Every option that changes the result (engine options, coordinates, mask,
        transforms, ...; not the device or the progress display). JSON-serialisable.
    data : str
        A hash of the coordinates and observed values
        (:meth:`geogpvae.fields.stacking.Field.fingerprint`).

    Returns
    -------
    dict
        ``inputs``, ``vars``, ``options`` (canonical JSON text), ``options_hash`` and
        ``data``: plain strings and lists.
    """
    canonical = json.dumps(options, sort_keys=True, default=str)
    return {
        "inputs": [os.path.realpath(os.fspath(p)) for p in inputs],
        "vars": [str(v) for v in vars],
        "options": canonical,
        "options_hash": hashlib.sha256(canonical.encode()).hexdigest()[:16],
        "data": str(data),
    }


def checkpoint_path(folder: str | os.PathLike[str], output: str | os.PathLike[str]) -> Path:
    """The checkpoint file of the job writing ``output``, inside ``folder``.

    Named after the output file plus a short hash of its absolute path, so that the tasks
    of a job array can share one folder.
    """
    out = Path(os.path.abspath(os.fspath(output)))
    tag = hashlib.sha256(str(out).encode()).hexdigest()[:8]
    return Path(folder) / f"{out.name}.{tag}.ckpt"


def save_checkpoint(path: Path, snapshot: Mapping[str, Any], identity: Mapping[str, Any]) -> Path:
    """Write a resumable snapshot and the job's identity to ``path``, atomically.

    Parameters
    ----------
    path : pathlib.Path
        Target file; its folder must exist. Replaced if present.
    snapshot : mapping
        :meth:`geogpvae.engine.core.GPVAEEngine.checkpoint` output.
    identity : mapping
        :func:`job_identity` output.

    Returns
    -------
    pathlib.Path
    """
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
    fix = "delete it or pass --overwrite to start over"
    try:
        payload = read_torch_file(path, "geogpvae checkpoint")
    except UnreadableFileError as err:
        raise CheckpointError(f"{err}; {fix}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a geogpvae checkpoint (format tag missing); {fix}")
    if int(payload.get("version", 0)) > _CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path} was written by a newer geogpvae ({payload.get('package_version')}); "
            f"resume with that version, or {fix}"
        )
    return payload


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
    """Read a checkpoint of this job.

    Parameters
    ----------
    path : pathlib.Path
    identity : mapping
        This run's :func:`job_identity`.

    Returns
    -------
    dict
        The engine snapshot, for ``GPVAEEngine.fit(..., resume=...)``.

    Raises
    ------
    FileNotFoundError
        No such file.
    CheckpointError
        Not a checkpoint, or another job's (the message says what differs).
    """
    payload = _read(Path(path))
    diffs = _differences(payload.get("job", {}), identity)
    if diffs:
        raise CheckpointError(
            f"checkpoint {path} belongs to a different job ({'; '.join(diffs)}). "
            "Resume with the same inputs and options, or pass --overwrite to start over"
        )
    return payload["checkpoint"]


def checkpoint_epoch(snapshot: Mapping[str, Any]) -> int:
    """Completed epochs recorded in an engine snapshot (a candidate's, during the selection)."""
    return int(snapshot["train"]["epoch"])


def checkpoint_stage(snapshot: Mapping[str, Any]) -> str:
    """Where an engine snapshot stands, for the resume message: ``"after epoch 40"``,
    ``"in the KL-weight selection (beta x0.2 after epoch 2; 1 candidate scored)"``."""
    selection = snapshot.get("selection")
    if selection is None:
        return f"after epoch {checkpoint_epoch(snapshot)}"
    scored = len(selection["scores"])
    return (f"in the KL-weight selection (beta x{selection['factor']:g} after epoch {checkpoint_epoch(snapshot)}; "
            f"{scored} candidate{'' if scored == 1 else 's'} scored)")


# --------------------------------------------------------------------------- fitting
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
    """The launch of several processes this process belongs to, if any.

    ``torchrun`` sets ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK``; ``srun`` with several
    tasks sets ``SLURM_STEP_NUM_TASKS``, ``SLURM_PROCID`` and ``SLURM_LOCALID`` (the
    batch script itself, outside any ``srun`` step, has no ``SLURM_STEP_NUM_TASKS``).

    Returns
    -------
    Launch or None
        None for a single process.
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
    cluster : Cluster
    device : str
        This process's device (``cuda:<local rank>`` for ``auto``/``cuda`` on GPUs).

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

    After ``destroy_process_group`` the gloo backend's worker threads stay alive (torch keeps
    the group referenced), and the thread that ran the last collective may still be releasing
    its tensors. If that happens while the interpreter shuts down, the thread cannot take the
    GIL, is unwound through a C++ destructor and the process aborts ("terminate called without
    an active exception", SIGABRT) after a successful run: torchrun then reports a failure.
    Skipping the shutdown avoids that. Everything this package writes is closed and fsynced
    by then; the standard streams are flushed here.
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
