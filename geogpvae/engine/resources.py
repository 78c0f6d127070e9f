"""The memory and time a fit, its calibration and its prediction need, and checks against the machine.

The peak is the interpreter, the field's arrays, and the largest of the transients: the
neighbour search, a training step (covariance blocks of B locations, ``(H + 1)^2`` entries per
latent channel, with their autograd graph) and a prediction chunk (the same blocks for up to
:data:`NEIGHBOUR_CHUNK` targets, or the decoder's Monte Carlo draws). The factors per block
entry were measured on the CPU (``benchmarks/memory_estimate.py``); on a GPU the training and
prediction tensors live in device memory instead.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:
    from .config import GPVAEConfig

__all__ = ["available_memory", "check_declared_size", "check_memory", "check_prediction_memory", "declared_bytes",
           "estimate_peak_memory", "estimate_seconds", "file_bytes", "fit_speed", "format_bytes", "memory_parts", "speed_check",
           "BASELINE_BYTES"]

#: resident memory of the interpreter with NumPy, PyTorch and the package loaded
BASELINE_BYTES = 320 * 2**20
#: targets of one neighbour-posterior block batch (``engine.predict.neighbour_posterior``'s chunk)
NEIGHBOUR_CHUNK = 16384
#: locations decoded at a time (``engine.predict.predictive_moments``'s chunk)
DECODE_CHUNK = 4096
#: locations predicted at a time (``engine.core.PREDICT_CHUNK``)
PREDICT_CHUNK = 65536
#: floats per block entry and latent channel, per coordinate column, and bytes per entry beside
#: them: a training step (SPA, HPA) and a prediction chunk, as measured
TRAIN_BLOCK = {"spa": (8.2, 1.0, 0.4), "hpa": (9.1, 1.0, 0.3)}
PREDICT_BLOCK = (6.0, 1.0, 0.5)
#: glibc serves tensors up to its largest mmap threshold from its heap, which then holds about
#: HEAP_FACTOR times the blocks (fragmentation between steps); larger ones go back at once
MMAP_MAX, HEAP_FACTOR = 32 * 2**20, 2.4
#: floating-point operations a second of one CPU core in the MLPs and in the covariance blocks,
#: the seconds of a fit's fixed work and of each optimiser step's own, for the time estimate: fitted
#: to default runs on the reference machine (``benchmarks/time_estimate.py``: a 359-site survey,
#: 48 x 48 and 100 x 100 grids; estimate / measured 0.74 to 1.16)
MLP_FLOPS, BLOCK_FLOPS, FIXED_SECONDS, STEP_SECONDS = 4.8e10, 5.5e9, 2.0, 0.0044
#: seconds of one round of :func:`speed_check`'s work on the machine those figures were measured
#: on (the two-core VM of ``benchmarks/time_estimate.py``, idle), and its cores
SPEED_CHECK_SECONDS, SPEED_CHECK_CORES = 0.04, 2


def _sizes(config: GPVAEConfig, n_points: int, n_vars: int) -> dict[str, int]:
    scales = config.context_scales
    return {"l": config.latent_size(n_vars), "h": config.neighbours, "b": config.batch_for(n_points),
            "c": 2 * n_vars * len(scales), "kmax": max(scales, default=0),
            "s": 8 if config.dtype == "float64" else 4}


def _blocks(factors: tuple[float, float, float], entries: float, l: int, d: int, s: int) -> int:
    """Bytes of ``entries`` covariance-block entries with everything computed beside them."""
    floats, per_dim, extra = factors
    heap = HEAP_FACTOR if entries * l * s <= MMAP_MAX else 1.0
    return int(heap * entries * (s * (floats * l + per_dim * d) + extra * s / 4))


def _training_step(config: GPVAEConfig, n: int, k: int, d: int, z: dict[str, int]) -> int:
    """Bytes of one training step: the prior's blocks and the MLPs' activations with their gradients."""
    h, b, l, s = z["h"], z["b"], z["l"], z["s"]
    side = h + 1 if config.engine == "spa" else h
    blocks = _blocks(TRAIN_BLOCK[config.engine], b * side * side, l, d, s)
    encoded = min(n, int(b * (1 + math.sqrt(h) / 2)))  # batch and neighbours (spatial batches overlap)
    widths = 2 * k + z["c"] + sum(config.encoder_hidden) + 2 * l + sum(config.decoder_hidden) + k
    return blocks + 4 * s * encoded * widths


def _prediction(config: GPVAEConfig, n: int, k: int, d: int, z: dict[str, int]) -> int:
    """Bytes of a prediction chunk: neighbour blocks with the targets' neighbour lists, or decoded draws."""
    h, l, s = z["h"], z["l"], z["s"]
    blocks = _blocks(PREDICT_BLOCK, min(n, NEIGHBOUR_CHUNK) * (h + 1) ** 2, l, d, s)
    lists = 24 * min(n, PREDICT_CHUNK) * (h + 1)  # distances and indices of the search, indices kept
    draws = config.samples * min(n, DECODE_CHUNK)
    decoded = draws * (s * (l + 2 * max(config.decoder_hidden, default=0)) + 8 * 3 * k)
    return max(blocks + lists, decoded)


def memory_parts(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int) -> dict[str, int]:
    """:func:`estimate_peak_memory` by part, in bytes.

    Returns
    -------
    dict of str to int
        ``baseline`` (interpreter and libraries), ``field`` (the field's arrays and tensors,
        neighbour tables and context), ``search`` (the neighbour search), ``training`` (one
        step), ``prediction`` (one chunk), ``outputs`` (the predicted arrays) and ``total``.
    """
    n, k, d = int(n_points), int(n_vars), int(n_dims)
    z = _sizes(config, n, k)
    per_location = (8 * (2 * d + 3 * k + z["c"] + z["h"] + 2 * z["kmax"] + 2)
                    + z["s"] * (2 * d + k + z["c"] + 2 * z["l"]) + 2 * k)
    parts = {"baseline": BASELINE_BYTES, "field": n * per_location, "search": 16 * n * z["h"],
             "training": _training_step(config, n, k, d, z), "prediction": _prediction(config, n, k, d, z),
             "outputs": 64 * n * k}
    transient = max(parts["search"], parts["training"], parts["prediction"] + parts["outputs"] // 2,
                    parts["outputs"])
    parts["total"] = parts["baseline"] + parts["field"] + transient
    return parts


def estimate_peak_memory(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int) -> int:
    """Peak resident bytes of a fit, its calibration and a prediction of the training field, on the CPU.

    Parameters
    ----------
    config : GPVAEConfig
    n_points, n_vars, n_dims : int
        N locations, K variables, D coordinate columns.

    Returns
    -------
    int
        Bytes, within about a factor 1.5 of the measured peak (``benchmarks/memory_estimate.py``).
    """
    return memory_parts(config, n_points, n_vars, n_dims)["total"]


def _training_steps(config: GPVAEConfig, n: int, d: int) -> int:
    """Optimiser steps of the warm-up rounds, the KL-weight candidates and the fit itself."""
    from .metric import uses_learnt_metric, warmup_epochs, warmup_rounds
    from .budget import KL_FACTORS, selection_epochs, selection_share

    per_epoch = math.ceil(n / config.batch_for(n))
    epochs = config.n_epochs(n)
    if config.beta == "auto":
        epochs += (len(KL_FACTORS) - 1) * selection_epochs(epochs, selection_share(config, n))
    if uses_learnt_metric(config, d):
        epochs += warmup_rounds(config, n) * warmup_epochs(config, n)
    return epochs * per_epoch


def speed_check(rounds: int = 5) -> float:
    """How many times longer than the reference machine this one takes for a fit's kind of work now.

    Times ``rounds`` rounds (a few tenths of a second in all) of MLP-sized matrix products and
    batched Cholesky factors of covariance blocks, in NumPy (so that ``geogpvae info`` stays free
    of torch) on its BLAS threads: a slower CPU, a busy node or fewer cores show. The fastest round
    counts: a load that lasts slows every round, a passing one only some.

    Parameters
    ----------
    rounds : int
        Timed rounds, after one that warms up.

    Returns
    -------
    float
        The fastest round's seconds over :data:`SPEED_CHECK_SECONDS` (1: as fast as the idle reference
        machine; 2: half as fast), within 0.05 to 50.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    inputs, weights = rng.standard_normal((8192, 256), np.float32), rng.standard_normal((256, 256), np.float32)
    blocks = rng.standard_normal((4096, 17, 17), np.float32)
    blocks = blocks @ blocks.transpose(0, 2, 1) + 17.0 * np.eye(17, dtype=np.float32)
    seconds = []
    for _ in range(rounds + 1):  # the first round warms up
        start = time.perf_counter()
        for _ in range(4):
            np.maximum(inputs @ weights, 0.0)
        np.linalg.cholesky(blocks)
        seconds.append(time.perf_counter() - start)
    return float(min(max(min(seconds[1:]) / SPEED_CHECK_SECONDS, 0.05), 50.0))


def fit_speed(config: GPVAEConfig) -> float:
    """:func:`speed_check` for a fit of ``config``: slower by the share of the cores its ``threads`` leave out.

    Parameters
    ----------
    config : GPVAEConfig
        Its ``threads`` (None: every core this process may use) set the cores of the fit.

    Returns
    -------
    float
        The ``speed`` of :func:`estimate_seconds`.
    """
    return speed_check() * _cores(config.replace(threads=None)) / _cores(config)


def estimate_seconds(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int, *,
                     cores: int | None = None, speed: float | None = None) -> float:
    """Rough wall seconds of a fit, its calibration and a prediction on ``cores`` CPU cores.

    Counts the floating-point work of every training step (the MLPs, the factors and solves of
    the blocks with their gradients) and of the predictions (the calibration's rounds, each
    scoring about three sources on up to 8,000 locations, and the final one).

    Parameters
    ----------
    config : GPVAEConfig
    n_points, n_vars, n_dims : int
    cores : int, optional
        Default: the cores torch would use.
    speed : float, optional
        How many times longer this machine takes than the idle reference machine (on its
        :data:`SPEED_CHECK_CORES` cores), as :func:`speed_check` measures it.
        Default: ``SPEED_CHECK_CORES / cores``, as if each core were as fast as the reference's.

    Returns
    -------
    float
    """
    n, k, d = int(n_points), int(n_vars), int(n_dims)
    z = _sizes(config, n, k)
    m = z["h"] + 1
    enc, dec = (sum(a * b for a, b in layers) for layers in _layers(config, k, z))
    steps = _training_steps(config, n, d)
    located = steps * z["b"]  # batch locations over every step
    predicted = n + (5 * 3 * min(8000, 0.4 * n) if config.calibrate else 0)
    mlp = located * 6 * (enc + dec) * (1 + math.sqrt(z["h"]) / 2) + predicted * 2 * (config.samples * dec + enc)
    blocks = z["l"] * (located * (2 * m**3 / 3 + 80 * m * m) + predicted * (m**3 / 3 + 30 * m * m))
    flops = (mlp / MLP_FLOPS + blocks / BLOCK_FLOPS) / SPEED_CHECK_CORES  # on the reference machine
    if speed is None:
        speed = SPEED_CHECK_CORES / (cores or _cores(config))
    return FIXED_SECONDS + speed * (steps * STEP_SECONDS + flops)


def file_bytes(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int) -> dict[str, int]:
    """About the bytes of the files a fit writes, on the high side (measured within 1.0-1.2).

    Returns
    -------
    dict of str to int
        ``model`` (the saved model: weights and the training field) and ``checkpoint`` (one
        training checkpoint: weights, optimiser moments, averaged and best weights; no data).
    """
    n, k, d = int(n_points), int(n_vars), int(n_dims)
    z = _sizes(config, n, k)
    encoder, decoder = _layers(config, k, z)
    weights = z["s"] * sum((i + 1) * o for i, o in encoder + decoder)
    return {"model": int(1.1 * (weights + 8 * n * (d + k))) + 16384, "checkpoint": int(1.1 * 4 * weights) + 32768}


def _cores(config: GPVAEConfig) -> int:
    """The CPU cores torch would use: ``threads``, else the process's allowance."""
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(config.threads or allowed, allowed))


def _layers(config: GPVAEConfig, k: int, z: dict[str, int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(inputs, outputs) of every layer of the encoder, and of the decoder."""
    enc = [2 * k + z["c"], *config.encoder_hidden, 2 * z["l"]]
    dec = [z["l"], *config.decoder_hidden, k]
    return list(zip(enc[:-1], enc[1:])), list(zip(dec[:-1], dec[1:]))


def available_memory() -> int:
    """Bytes this machine can still give a process: psutil's, else ``MemAvailable``, else free pages."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def format_bytes(nbytes: float) -> str:
    """``1.5 GiB``, ``320.0 MiB``, ``12 B``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"  # pragma: no cover


def _on_cpu(config: GPVAEConfig, n_points: int) -> bool:
    """Whether the engine trains and predicts on the CPU (``GPVAEEngine.device``'s choice)."""
    if config.device == "cpu":
        return True
    if config.device != "auto":
        return False
    import torch

    return config.batch_for(n_points) >= n_points or not torch.cuda.is_available()


def check_memory(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int) -> None:
    """Refuse, before training, a run whose estimated peak exceeds the memory available.

    Raises
    ------
    InputError
        Naming the estimate, the memory available and what to lower. Not checked where the
        engine runs on a GPU (its tensors then live in device memory).
    """
    if not _on_cpu(config, n_points):
        return
    parts = memory_parts(config, n_points, n_vars, n_dims)
    need, have = parts["total"] - BASELINE_BYTES, available_memory()  # the interpreter is already loaded
    if need <= have:
        return
    largest = max(("training", "prediction"), key=parts.get)
    raise InputError(
        f"this run would need about {format_bytes(parts['total'])} of memory at its peak (a {largest} step "
        f"alone {format_bytes(parts[largest])}: {config.neighbours} neighbours, batches of "
        f"{config.batch_for(n_points)} of {n_points} locations) but {format_bytes(have)} is available; "
        "lower neighbours (--neighbours)"
        + (" or batch_size (--option batch_size=...)" if largest == "training" else "")
        + ", or run on a machine with more memory")


def check_prediction_memory(config: GPVAEConfig, n_points: int, n_vars: int, n_dims: int) -> None:
    """Refuse, before any location is read, a prediction at ``n_points`` new locations whose
    coordinates, outputs and largest chunk exceed the memory available (CPU only).

    Raises
    ------
    InputError
        Naming the number of locations, the estimate and the memory available.
    """
    if not _on_cpu(config, n_points):
        return
    parts = memory_parts(config, n_points, n_vars, n_dims)
    need, have = 8 * int(n_points) * int(n_dims) + parts["outputs"] + parts["prediction"], available_memory()
    if need <= have:
        return
    raise InputError(
        f"predicting at {n_points:,} locations would need about {format_bytes(need)} of memory but "
        f"{format_bytes(have)} is available; predict a part at a time (e.g. a slice of the grid)")


def declared_bytes(ds: Any, names: Iterable[str] | None = None) -> dict[str, int]:
    """Bytes that reading each variable of ``ds`` not yet in memory would take, from its declared shape.

    Parameters
    ----------
    ds : xarray.Dataset
        Opened lazily; read only for shapes and dtypes.
    names : iterable of str, optional
        Default: every data variable.

    Returns
    -------
    dict of str to int
    """
    names = list(ds.data_vars) if names is None else [n for n in names if n in ds.variables]
    out = {}
    for name in names:
        var = ds[name].variable
        if not getattr(var, "_in_memory", False):
            out[str(name)] = int(var.size) * int(var.dtype.itemsize)
    return out


def check_declared_size(ds: Any, names: Iterable[str] | None = None, *, source: str = "the input") -> None:
    """Refuse, before anything is read, variables whose declared sizes exceed the memory available.

    Raises
    ------
    InputError
        Naming the largest variables, their declared shapes and the memory available.
    """
    sizes = declared_bytes(ds, names)
    total, have = sum(sizes.values()), available_memory()
    if total <= have:
        return
    big = sorted(sizes, key=sizes.get, reverse=True)[:3]
    shown = ", ".join(f"{n} {_shape(ds[n])} {ds[n].dtype} ({format_bytes(sizes[n])})" for n in big)
    raise InputError(
        f"{source} declares {format_bytes(total)} of variables to read ({shown}) but "
        f"{format_bytes(have)} of memory is available; choose fewer variables (--vars) or a smaller part "
        "of the file")


def _shape(var: Any) -> str:
    sizes: Mapping[Any, int] = dict(zip(var.dims, var.shape))
    return "(" + " x ".join(f"{d} {s}" for d, s in sizes.items()) + ")"
