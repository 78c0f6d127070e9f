"""Mini-batch training of a :class:`~geogpvae.engine.model.GPVAE` on preloaded tensors.

No DataLoader: the whole field lives in a few tensors (on the GPU when there is one), and a
mini-batch is a set of row indices. Every epoch's batches and random numbers are seeded from
``(seed, epoch)``, so a run resumed from the end of any epoch continues exactly as the
uninterrupted run would have (same device and dtype).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .config import GPVAEConfig
from .model import GPVAE, Batch
from ..gp.neighbours import knn, order_points, ordered_neighbours, shared_stencils

__all__ = [
    "FieldData",
    "TrainState",
    "neighbourhood_context",
    "training_neighbours",
    "field_data",
    "epoch_batches",
    "gather_batch",
    "train",
    "resolve_device",
]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` is the first CUDA device when one is available, else the CPU."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available; use device='cpu' or 'auto'")
    return dev


@dataclass
class FieldData:
    """A field prepared for training, as tensors on one device.

    Attributes
    ----------
    x : Tensor, shape (N, D)
        Coordinates (model units).
    y : Tensor, shape (N, K)
        Standardised values, 0 where missing.
    observed : Tensor of bool, shape (N, K)
    context : Tensor, shape (N, C) or None
        Neighbourhood summaries for the encoder.
    nbr : Tensor of int64, shape (N, H)
        Training neighbour sets: earlier neighbours (SPA) or neighbourhoods including the
        location itself (HPA); -1 padded.
    order : Tensor of int64, shape (N,) or None
        Spatial order used by ``batching="spatial"``.
    stencil : Tensor of int64, shape (N,) or None
        Shared-stencil id of every location (see
        :func:`geogpvae.gp.neighbours.shared_stencils`), when neighbour sets repeat (grids).
    stencil_offsets : Tensor, shape (S, H, D) or None
    stencil_valid : Tensor of bool, shape (S, H) or None
    """

    x: torch.Tensor
    y: torch.Tensor
    observed: torch.Tensor
    context: torch.Tensor | None
    nbr: torch.Tensor
    order: torch.Tensor | None = None
    stencil: torch.Tensor | None = None
    stencil_offsets: torch.Tensor | None = None
    stencil_valid: torch.Tensor | None = None

    @property
    def n(self) -> int:
        return self.x.shape[0]


@dataclass
class TrainState:
    """Where training stands: completed epochs and optimiser steps, optimiser state, the
    moving average of the weights and the loss history."""

    epoch: int = 0
    history: dict[str, list[float]] = field(
        default_factory=lambda: {"epoch": [], "loss": [], "expected_nll": [], "kl": [], "elapsed": []}
    )
    optimizer: dict[str, Any] | None = None
    average: dict[str, torch.Tensor] | None = None
    steps: int = 0


def neighbourhood_context(
    x: np.ndarray,
    y: np.ndarray,
    observed: np.ndarray,
    scales: int | tuple[int, ...],
    *,
    query: np.ndarray | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """Summaries of each location's nearest other locations, for the encoder.

    Parameters
    ----------
    x : array, shape (N, D)
        Locations of the field.
    y : array, shape (N, K)
        Standardised values (anything where missing).
    observed : array of bool, shape (N, K)
    scales : int or tuple of int
        Neighbourhood sizes k (e.g. ``(8, 32)`` for a near and a wider ring).
    query : array, shape (M, D), optional
        Summarise around these locations instead (new locations: nothing excluded).
    backend : str
        Neighbour search backend.

    Returns
    -------
    ndarray, shape (M, 2 K len(scales))
        For each scale and variable: the mean of the observed values among the ``k`` nearest
        locations (0 when none is observed), then the fraction of them where it is observed.
    """
    ks = (scales,) if isinstance(scales, (int, np.integer)) else tuple(scales)
    kmax = max(ks)
    if query is None:
        _, idx = knn(x, kmax, exclude_self=True, backend=backend)
    else:
        _, idx = knn(x, kmax, query=query, backend=backend)
    valid = idx >= 0
    safe = np.where(valid, idx, 0)
    obs = observed[safe] & valid[..., None]  # (M, kmax, K)
    vals = np.where(obs, y[safe], 0.0)
    csum = np.cumsum(vals, axis=1)
    ccount = np.cumsum(obs, axis=1)
    parts = []
    for k in ks:
        total, count = csum[:, k - 1], ccount[:, k - 1]
        parts += [total / np.maximum(count, 1), count / k]
    return np.concatenate(parts, axis=1)


def is_lattice(x: np.ndarray) -> bool:
    """Whether the locations lie on a regular lattice (a full or partly masked grid).

    True when the product of the numbers of distinct values along each axis is at most
    twice the number of locations (so a grid with up to half of its cells masked counts),
    and every axis has equally spaced distinct values. Scattered locations have nearly N
    distinct values per axis and fail the first test.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, in the engine's coordinate units.

    Returns
    -------
    bool
    """
    n, d = x.shape
    if n < 2:
        return False
    size = 1.0
    for axis in range(d):
        values = np.unique(x[:, axis])
        size *= len(values)
        if size > 2 * n:
            return False
        if len(values) > 2:
            steps = np.diff(values)
            if not np.allclose(steps, steps.mean(), rtol=1e-6, atol=0.0):
                return False
    return True


def resolve_layout(x: np.ndarray, config: GPVAEConfig) -> tuple[str, str]:
    """The SPA ordering and the batching actually used for these locations.

    ``"auto"`` resolves to ``("sorted", "spatial")`` on a regular lattice (shared conditioning
    geometries, compact batches) and to ``("random", "random")`` otherwise; explicit choices
    are kept.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, in the engine's coordinate units.
    config : GPVAEConfig

    Returns
    -------
    ordering, batching : str
    """
    lattice = None
    ordering, batching = config.ordering, config.batching
    if ordering == "auto" or batching == "auto":
        lattice = is_lattice(x)
    if ordering == "auto":
        ordering = "sorted" if lattice else "random"
    if batching == "auto":
        batching = "spatial" if lattice else "random"
    return ordering, batching


def training_neighbours(x: np.ndarray, config: GPVAEConfig, ordering: str | None = None) -> np.ndarray:
    """The neighbour sets the KL term uses: (N, H) indices, -1 padded.

    ``ordering`` is SPA's resolved ordering (see :func:`resolve_layout`); by default it is
    resolved here.
    """
    h = config.neighbours
    if config.engine == "spa":
        ordering = ordering if ordering is not None else resolve_layout(x, config)[0]
        order = order_points(x, ordering, seed=config.seed)
        return ordered_neighbours(x, h, order, backend=config.neighbour_backend)
    if h == 0:
        return np.empty((x.shape[0], 0), dtype=np.int64)
    # HPA: the H nearest locations, the location itself first
    _, nbr = knn(x, h, backend=config.neighbour_backend)
    own = np.arange(x.shape[0])
    missing_self = nbr[:, 0] != own  # duplicates may put a twin first
    if missing_self.any():
        rows = np.flatnonzero(missing_self)
        sub = nbr[rows]
        sub = np.where(sub == own[rows, None], sub[:, :1], sub)
        sub[:, 0] = own[rows]
        nbr[rows] = sub
    return nbr


def _morton_order(x: np.ndarray) -> np.ndarray:
    """Sort locations along a Z-order (Morton) curve, so runs of the order are compact."""
    lo, hi = x.min(0), x.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    bits = max(1, 60 // x.shape[1])
    q = ((x - lo) / span * (2**bits - 1)).astype(np.uint64)
    code = np.zeros(x.shape[0], dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for d in range(x.shape[1]):
            code = (code << np.uint64(1)) | ((q[:, d] >> np.uint64(b)) & np.uint64(1))
    return np.argsort(code, kind="stable")


def field_data(
    x: np.ndarray,
    y: np.ndarray,
    observed: np.ndarray,
    config: GPVAEConfig,
    *,
    device: torch.device,
    dtype: torch.dtype,
    use_stencils: bool = True,
) -> FieldData:
    """Neighbour sets, context and tensors for training.

    Parameters
    ----------
    x : array, shape (N, D)
    y : array, shape (N, K)
        Standardised values; NaN or anything where missing.
    observed : array of bool, shape (N, K)
    config : GPVAEConfig
    device, dtype
        Where and in which precision the tensors live.
    use_stencils : bool
        Share prior factorisations between locations with identical neighbour geometry
        (regular grids); exact, and used only when it saves work.
    """
    y0 = np.where(observed, y, 0.0)
    context = (
        neighbourhood_context(x, y0, observed, config.context_scales, backend=config.neighbour_backend)
        if config.context_scales
        else None
    )
    ordering, batching = resolve_layout(x, config)
    nbr = training_neighbours(x, config, ordering)
    order = _morton_order(x) if batching == "spatial" else None
    stencils = shared_stencils(x, nbr) if use_stencils else None
    if stencils is not None:
        nbr = stencils[3]

    def tensor(a, dt=dtype):
        return torch.as_tensor(np.ascontiguousarray(a)).to(device=device, dtype=dt)

    return FieldData(
        x=tensor(x),
        y=tensor(y0),
        observed=tensor(observed, torch.bool),
        context=None if context is None else tensor(context),
        nbr=tensor(nbr, torch.int64),
        order=None if order is None else tensor(order, torch.int64),
        stencil=None if stencils is None else tensor(stencils[0], torch.int64),
        stencil_offsets=None if stencils is None else tensor(stencils[1]),
        stencil_valid=None if stencils is None else tensor(stencils[2], torch.bool),
    )


def learning_rate(config: GPVAEConfig, step: int, total_steps: int) -> float:
    """The learning rate at optimiser step ``step`` (0-based) of ``total_steps``."""
    if config.lr_schedule == "constant" or total_steps <= 1:
        return config.lr
    warm = max(1, int(0.02 * total_steps))
    if step < warm:
        return config.lr * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total_steps - warm - 1))
    floor = 0.05
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def _epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(epoch)) % (2**63))


def epoch_batches(
    n: int, batch_size: int, *, seed: int, epoch: int, order: torch.Tensor | None = None, chunk: int = 32
) -> list[torch.Tensor]:
    """The mini-batches of one epoch (CPU int64 index tensors covering every location once).

    With ``order`` (a spatial ordering), batches are unions of random runs of ``chunk``
    consecutive locations of that order, with the run boundaries shifted every epoch;
    otherwise they are a random partition.
    """
    gen = _epoch_generator(seed, epoch)
    batch_size = min(batch_size, n)
    if order is None:
        perm = torch.randperm(n, generator=gen)
    else:
        order = order.cpu()
        shift = int(torch.randint(chunk, (1,), generator=gen))
        rolled = torch.roll(order, -shift)
        n_chunks = math.ceil(n / chunk)
        chunks = list(rolled.split(chunk))
        pick = torch.randperm(n_chunks, generator=gen)
        perm = torch.cat([chunks[i] for i in pick.tolist()])
    return list(perm.split(batch_size))


def gather_batch(
    data: FieldData, idx: torch.Tensor, *, mask_rate: float = 0.0, generator: torch.Generator | None = None
) -> Batch:
    """Gather the tensors of one mini-batch; every location is encoded once.

    Parameters
    ----------
    data : FieldData
    idx : Tensor of int64, shape (B,)
        The batch's locations.
    mask_rate : float
        Fraction of observed values hidden from the encoder.
    generator : torch.Generator, optional
        Random source of the hiding (on the data's device).
    """
    idx = idx.to(data.x.device)
    b = idx.shape[0]
    nbr = data.nbr[idx]  # (B, H)
    valid = nbr >= 0
    everything = torch.cat([idx, nbr.clamp_min(0).reshape(-1)])
    uniq, inverse = torch.unique(everything, return_inverse=True)
    observed = data.observed[uniq]
    if mask_rate > 0:
        keep = torch.rand(observed.shape, device=observed.device, generator=generator) >= mask_rate
        visible = observed & keep
    else:
        visible = observed
    stencil = {}
    if data.stencil is not None:
        used, which = torch.unique(data.stencil[idx], return_inverse=True)
        stencil = dict(stencil_offsets=data.stencil_offsets[used], stencil_valid=data.stencil_valid[used],
                       stencil_index=which)
    return Batch(
        **stencil,
        y=data.y[uniq],
        observed=observed,
        visible=visible,
        context=None if data.context is None else data.context[uniq],
        batch_pos=inverse[:b],
        nbr_pos=inverse[b:].view(b, -1),
        nbr_valid=valid,
        x_batch=data.x[idx],
        x_nbr=data.x[nbr.clamp_min(0)],
        n_total=data.n,
    )


class _Progress:
    """A tqdm bar on a terminal, a plain line every few seconds in a log, or nothing."""

    def __init__(self, mode: bool | str, total: int, initial: int, interval: float = 10.0) -> None:
        if mode is True:
            mode = "bar" if sys.stderr.isatty() else "log"
        self.mode = mode or "none"
        self.total, self.interval = total, interval
        self.start = time.perf_counter()
        self.last = -math.inf
        self.first_epoch = initial
        self.bar = None
        if self.mode == "bar":
            from tqdm.auto import tqdm  # noqa: PLC0415

            self.bar = tqdm(total=total, initial=initial, desc="training", unit="epoch", dynamic_ncols=True)

    def update(self, epoch: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4g}")
        elif self.mode == "log":
            now = time.perf_counter()
            if now - self.last >= self.interval or epoch == self.total:
                self.last = now
                elapsed = now - self.start
                done = max(epoch - self.first_epoch, 1)
                eta = elapsed / done * (self.total - epoch)
                print(
                    f"epoch {epoch}/{self.total} loss {loss:.5g} elapsed {_hms(elapsed)} eta {_hms(eta)}",
                    file=sys.stderr,
                    flush=True,
                )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def train(
    model: GPVAE,
    data: FieldData,
    config: GPVAEConfig,
    *,
    state: TrainState | None = None,
    progress: bool | str = True,
    callback: Callable[[TrainState, GPVAE, torch.optim.Optimizer], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainState:
    """Maximise the mini-batch ELBO with Adam.

    Parameters
    ----------
    model : GPVAE
        On the same device and dtype as ``data``. May be wrapped in
        ``torch.nn.parallel.DistributedDataParallel``; each rank then trains on its share of
        every epoch's batches.
    data : FieldData
    config : GPVAEConfig
        ``epochs``, ``batch_size``, ``lr``, ``mask_rate``, ``batching``, ``seed``.
    state : TrainState, optional
        Resume from here (completed epochs, optimiser state, history).
    progress : bool or {"bar", "log", "none"}
        ``True`` chooses a bar on a terminal and plain log lines otherwise.
    callback : callable, optional
        Called as ``callback(state, model, optimizer)`` after every epoch (checkpointing).
    should_stop : callable, optional
        Polled after every epoch; training returns early when it says True (signals).

    Returns
    -------
    TrainState
        With the loss history per epoch: ``loss`` (negative ELBO / N), ``expected_nll``,
        ``kl`` (per location) and ``elapsed`` (seconds since this call started).
    """
    state = state or TrainState()
    core = model.module if hasattr(model, "module") else model
    core.set_train_samples(config.train_samples)
    kernel_params = [p for p in core.kernel.parameters()]
    kernel_ids = {id(p) for p in kernel_params}
    groups = [{"params": [p for p in core.parameters() if id(p) not in kernel_ids], "scale": 1.0}]
    if kernel_params:
        groups.append({"params": kernel_params, "scale": config.kernel_lr})
    optimizer = torch.optim.Adam(groups, lr=config.lr)
    if state.optimizer is not None:
        optimizer.load_state_dict(state.optimizer)
    epochs = config.n_epochs(data.n)
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    steps_per_epoch = len(epoch_batches(data.n, config.batch_size, seed=config.seed, epoch=0, order=data.order))
    if world > 1:
        steps_per_epoch = max(1, (steps_per_epoch - steps_per_epoch % world or steps_per_epoch) // world)
    total_steps = epochs * steps_per_epoch
    bar = _Progress(progress if rank == 0 else False, epochs, state.epoch)
    decay = config.weight_average
    if decay and state.average is None:
        state.average = {k: v.detach().clone() for k, v in core.state_dict().items() if v.is_floating_point()}
    t0 = time.perf_counter()
    model.train()
    try:
        for epoch in range(state.epoch, epochs):
            batches = epoch_batches(
                data.n, config.batch_size, seed=config.seed, epoch=epoch, order=data.order
            )
            if world > 1:  # equal shares, so that every rank takes the same number of steps
                usable = len(batches) - len(batches) % world or len(batches)
                batches = batches[:usable][rank::world]
            torch.manual_seed((config.seed * 7919 + epoch * 104729 + rank) % (2**63))
            sums = {"loss": 0.0, "expected_nll": 0.0, "kl": 0.0}
            for i, idx in enumerate(batches):
                lr = learning_rate(config, epoch * steps_per_epoch + i, total_steps)
                for group in optimizer.param_groups:
                    group["lr"] = lr * group.get("scale", 1.0)
                batch = gather_batch(data, idx, mask_rate=config.mask_rate)
                terms = model(batch)
                optimizer.zero_grad(set_to_none=True)
                terms["loss"].backward()
                optimizer.step()
                state.steps += 1
                if decay:
                    _update_average(state.average, core, decay, state.steps)
                for key in sums:
                    sums[key] += float(terms[key].detach())
            n_b = max(len(batches), 1)
            state.epoch = epoch + 1
            state.history["epoch"].append(epoch + 1)
            for key, total in sums.items():
                state.history[key].append(total / n_b)
            state.history["elapsed"].append(time.perf_counter() - t0)
            if not all(math.isfinite(state.history[k][-1]) for k in sums):
                raise FloatingPointError(
                    f"training diverged at epoch {epoch + 1} (loss {state.history['loss'][-1]}); "
                    "try a smaller lr, dtype='float64' or a larger jitter"
                )
            bar.update(epoch + 1, state.history["loss"][-1])
            if callback is not None:
                state.optimizer = optimizer.state_dict()
                callback(state, core, optimizer)
            if should_stop is not None and should_stop():
                break
    finally:
        bar.close()
        model.eval()
    state.optimizer = optimizer.state_dict()
    if decay and state.epoch >= epochs:  # finished: the averaged weights become the model
        core.load_state_dict({**core.state_dict(), **state.average})
    return state


@torch.no_grad()
def _update_average(average: dict[str, torch.Tensor], model: torch.nn.Module, decay: float, step: int) -> None:
    """Exponential moving average of the weights, with a shorter memory early on."""
    rate = min(decay, (1.0 + step) / (10.0 + step))
    for name, value in model.state_dict().items():
        if name in average:
            average[name].mul_(rate).add_(value.detach(), alpha=1.0 - rate)
