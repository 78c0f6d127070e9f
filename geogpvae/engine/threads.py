"""How many CPU threads torch may use, chosen so that a job does not oversubscribe its cores.

PyTorch starts one intra-op thread per core it sees, which on a shared node or a SLURM
allocation smaller than the node oversubscribes the job's cores, and its threads spin while
they wait for each other, which collapses when other processes hold the cores. :func:`configure_threads`
takes, in order: an explicit ``threads=``; a count the caller set with
:func:`torch.set_num_threads` after this module was imported; ``OMP_NUM_THREADS``; else the
cores of the process's affinity mask, shared among data-parallel processes
(``LOCAL_WORLD_SIZE``, ``SLURM_NTASKS_PER_NODE``) and capped by ``SLURM_CPUS_PER_TASK`` and the
cgroup CPU quota, then lowered to the CPUs that the running threads of other processes leave
free (at least one). The choice is logged once on the ``geogpvae`` logger (a warning when the machine is busy),
kept on the engine as ``threads_`` and written to output files as the ``geogpvae_threads`` attribute.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["ThreadChoice", "available_cores", "cgroup_cpus", "choose_threads", "configure_threads",
           "other_running"]

logger = logging.getLogger("geogpvae")

# torch's own count when geogpvae was imported: a different count later means that the
# caller set it, and a count the caller chose is kept
_TORCH_DEFAULT = torch.get_num_threads()
_last_reported: tuple[int, str] | None = None


@dataclass(frozen=True)
class ThreadChoice:
    """A thread count and why it was chosen.

    Attributes
    ----------
    threads : int
        Number of torch intra-op threads (at least 1).
    reason : str
        Where the number came from, e.g. ``"CPU affinity: 4 cores"``.
    """

    threads: int
    reason: str

    def __str__(self) -> str:
        return f"{self.threads} CPU thread{'s' if self.threads != 1 else ''} ({self.reason})"


def _positive_int(text: str | None) -> int | None:
    """The leading positive integer of an environment value (SLURM writes e.g. ``"4(x2)"``)."""
    if text is None:
        return None
    digits = ""
    for ch in text.strip():
        if not ch.isdigit():
            break
        digits += ch
    value = int(digits) if digits else 0
    return value if value > 0 else None


def _affinity() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def cgroup_cpus(root: str | os.PathLike[str] = "/sys/fs/cgroup") -> int | None:
    """The CPUs a cgroup CPU quota allows (rounded up), or None without a quota.

    Reads ``cpu.max`` (cgroup v2: ``"<quota> <period>"`` or ``"max <period>"``), else
    ``cpu/cpu.cfs_quota_us`` and ``cpu/cpu.cfs_period_us`` (v1; a quota of -1 is none).

    Parameters
    ----------
    root : str or path-like
        The cgroup mount point (tests point it at a folder of fake files).

    Returns
    -------
    int or None

    Examples
    --------
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "cpu.max").write_text("150000 100000")
    >>> cgroup_cpus(folder)
    2
    """
    root = Path(root)
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota == "max":
            return None
    except (OSError, ValueError):
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return max(1, math.ceil(q / p)) if q > 0 and p > 0 else None


def _own_running(tasks: str | os.PathLike[str]) -> int:
    """This process's threads running or ready to run (state R in ``/proc/self/task/*/stat``), at least 1."""
    count = 0
    try:
        for stat in Path(tasks).glob("*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            count += text[text.rindex(")") + 2:].startswith("R")  # the state follows "(name) "
    except OSError:
        pass
    return max(1, count)


def other_running(samples: int = 3, loadavg: str | os.PathLike[str] = "/proc/loadavg",
                  tasks: str | os.PathLike[str] = "/proc/self/task") -> int | None:
    """Threads of other processes running or ready to run now, or None where it cannot be told.

    The fewest over ``samples`` readings, 5 ms apart, of the running count in ``/proc/loadavg``
    (its fourth field, ``running/total``) less this process's running threads (still spinning
    after its last operation, or the reader itself): a process that holds a CPU is in every
    reading, a short one rarely. Instantaneous, unlike the load average, so an earlier fit of
    this process does not count.
    """
    counts = []
    for i in range(max(1, samples)):
        try:
            running = int(Path(loadavg).read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        counts.append(max(0, running - _own_running(tasks)))
        if i + 1 < samples:
            time.sleep(0.005)
    return min(counts)


def available_cores(env: Mapping[str, str] | None = None, affinity: int | None = None,
                    quota: int | None = None) -> tuple[int, str]:
    """Cores this process may use, from its affinity mask and the scheduler's allocation.

    Parameters
    ----------
    env : mapping, optional
        Environment to read (default :data:`os.environ`).
    affinity : int, optional
        Size of the CPU affinity mask (default: :func:`os.sched_getaffinity` of this process).
    quota : int, optional
        CPUs of the cgroup CPU quota (:func:`cgroup_cpus`); None: no quota.

    Returns
    -------
    cores : int
        At least 1.
    reason : str
        A short explanation, e.g. ``"CPU affinity: 8 cores; SLURM_CPUS_PER_TASK=4"``.

    Examples
    --------
    >>> available_cores({"SLURM_CPUS_PER_TASK": "4"}, affinity=32)
    (4, 'CPU affinity: 32 cores; SLURM_CPUS_PER_TASK=4')
    >>> available_cores({"LOCAL_WORLD_SIZE": "4"}, affinity=16)
    (4, 'CPU affinity: 16 cores; shared by LOCAL_WORLD_SIZE=4 processes')
    """
    env = os.environ if env is None else env
    cores = _affinity() if affinity is None else max(1, int(affinity))
    parts = [f"CPU affinity: {cores} core{'s' if cores != 1 else ''}"]
    slurm = _positive_int(env.get("SLURM_CPUS_PER_TASK"))
    # torchrun's workers share the cores they see; srun's tasks (SLURM_NTASKS_PER_NODE) each
    # see SLURM_CPUS_PER_TASK of their own, so they share the node only without it
    keys = ("LOCAL_WORLD_SIZE",) if slurm is not None else ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
    for key in keys:
        procs = _positive_int(env.get(key))
        if procs is not None and procs > 1:
            cores = max(1, cores // procs)
            parts.append(f"shared by {key}={procs} processes")
            break
    if slurm is not None:  # at most the cores of one SLURM task
        cores = min(cores, slurm)
        parts.append(f"SLURM_CPUS_PER_TASK={slurm}")
    if quota is not None and quota < cores:
        cores = max(1, int(quota))
        parts.append(f"cgroup CPU quota: {cores} core{'s' if cores != 1 else ''}")
    return cores, "; ".join(parts)


def choose_threads(
    threads: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    affinity: int | None = None,
    current: int | None = None,
    quota: int | None | str = "read",
    others: int | None | str = "read",
    cpus: int | None = None,
) -> ThreadChoice:
    """Decide the torch thread count without changing anything.

    Parameters
    ----------
    threads : int, optional
        An explicit request; wins over everything else. Must be at least 1.
    env : mapping, optional
        Environment to read (default :data:`os.environ`).
    affinity : int, optional
        Size of the CPU affinity mask (default: this process's).
    current : int, optional
        torch's current count (default :func:`torch.get_num_threads`); when it differs from
        the count torch started with, the caller set it and it is kept.
    quota : int or None, optional
        CPUs of the cgroup quota; default: read (:func:`cgroup_cpus`).
    others : int or None, optional
        Other processes running now; default: read (:func:`other_running`); None: unknown.
    cpus : int, optional
        CPUs of the machine (default :func:`os.cpu_count`); the threads are at most those the
        ``others`` leave free, and at least 1.

    Returns
    -------
    ThreadChoice

    Examples
    --------
    >>> str(choose_threads(3, env={}, affinity=8))
    '3 CPU threads (requested)'
    """
    if threads is not None:
        if isinstance(threads, bool) or int(threads) != threads or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        return ThreadChoice(int(threads), "requested")
    env = os.environ if env is None else env
    current = torch.get_num_threads() if current is None else current
    if current != _TORCH_DEFAULT:
        return ThreadChoice(current, "set with torch.set_num_threads")
    omp = _positive_int(env.get("OMP_NUM_THREADS"))
    if omp is not None:
        return ThreadChoice(omp, f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', '').strip()}")
    cores, reason = available_cores(env, affinity, cgroup_cpus() if quota == "read" else quota)
    others = other_running() if others == "read" else others
    cpus = (os.cpu_count() or cores) if cpus is None else cpus
    if others and cpus - others < cores:
        free = max(1, cpus - others)
        return ThreadChoice(free, f"{reason}; machine busy: {others} other running process"
                                  f"{'es' if others != 1 else ''} on {cpus} CPUs")
    return ThreadChoice(cores, reason)


def configure_threads(threads: int | None = None) -> ThreadChoice:
    """Set torch's intra-op thread count as :func:`choose_threads` decides, and log it once.

    Parameters
    ----------
    threads : int, optional
        An explicit thread count.

    Returns
    -------
    ThreadChoice
        What was chosen and why.
    """
    global _TORCH_DEFAULT, _last_reported
    choice = choose_threads(threads)
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
        if choice.reason != "set with torch.set_num_threads":
            # our own setting is not a caller's: later calls may still change it
            _TORCH_DEFAULT = choice.threads
    key = (choice.threads, choice.reason.split("; machine busy")[0])
    if key != _last_reported:
        if "machine busy" in choice.reason:
            logger.warning("the machine is busy: using %s", choice)
        else:
            logger.info("using %s", choice)
        _last_reported = key
    return choice


#: held while a prediction runs: predictions of one process run one at a time
_PREDICTING = threading.RLock()


def one_at_a_time(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` run under one process-wide lock.

    Each prediction uses every torch thread, so two run at once from two Python threads (dask's
    threaded scheduler, a web server) would only compete for the cores and hold the memory of
    both; in turn they cost little more. (The stretched neighbour source changes no shared state:
    :func:`geogpvae.gp.kernels.stretched` holds its factor per thread.) Worker processes (a dask
    ``distributed`` cluster) still predict in parallel.
    """

    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _PREDICTING:
            return method(*args, **kwargs)

    return locked
