"""Mini-batch training of a :class:`~geogpvae.engine.model.GPVAE` on preloaded tensors.

A mini-batch is a set of row indices; every epoch is seeded from ``(seed, epoch)``, so a run
resumed after any epoch continues exactly as the uninterrupted one (same device and dtype).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .adam import FusedAdam, fused_supported
from .batches import epoch_batches
from .config import GPVAEConfig
from .data import FieldData, gather_batch
from .model import GPVAE
from .progress import Progress

__all__ = ["KERNEL_LR", "LR_FLOOR", "LR_WARMUP", "TrainState", "WEIGHT_AVERAGE", "check_inputs", "learning_rate",
           "train", "distributed"]


@dataclass
class TrainState:
    """Where training stands: completed epochs and optimiser steps, optimiser state, the
    moving average of the weights, the loss history and whether training is done
    (``monitor`` is kept, empty, for checkpoints of earlier versions)."""

    epoch: int = 0
    history: dict[str, list[float]] = field(
        default_factory=lambda: {"epoch": [], "loss": [], "expected_nll": [], "kl": [], "elapsed": []}
    )
    optimizer: dict[str, Any] | None = None
    average: dict[str, torch.Tensor] | None = None
    steps: int = 0
    monitor: dict[str, Any] = field(default_factory=dict)
    done: bool = False


#: Decay of the moving average of the weights that becomes the final model
WEIGHT_AVERAGE = 0.995
#: Learning rate of the kernel hyperparameters as a multiple of ``lr`` (docs/design-decisions.md)
KERNEL_LR = 10.0
#: Linear warm-up over this share of the steps, then a cosine decay to ``LR_FLOOR`` x ``lr``
LR_WARMUP = 0.02
LR_FLOOR = 0.05


def learning_rate(config: GPVAEConfig, step: int, total_steps: int, n_points: int) -> float:
    """The learning rate at optimiser step ``step`` (0-based) of ``total_steps``: a linear
    warm-up over ``LR_WARMUP`` of the steps, then a cosine decay to ``LR_FLOOR`` x ``lr``."""
    lr = config.lr_for(n_points)
    if total_steps <= 1:
        return lr
    warm = max(1, int(LR_WARMUP * total_steps))
    if step < warm:
        return lr * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total_steps - warm - 1))
    return lr * (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress)))


def train(
    model: GPVAE,
    data: FieldData,
    config: GPVAEConfig,
    *,
    state: TrainState | None = None,
    progress: bool | str = True,
    callback: Callable[[TrainState, GPVAE, FusedAdam | torch.optim.Optimizer], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pause_at: int | None = None,
    schedule: str = "cosine",
) -> TrainState:
    """Maximise the mini-batch ELBO with Adam for the epoch budget.

    Parameters
    ----------
    model : GPVAE
        On the device and dtype of ``data``; in ``DistributedDataParallel`` each rank trains
        on its share of every epoch's batches.
    data : FieldData
        The training field (its ``check`` values are not used here).
    config : GPVAEConfig
    state : TrainState, optional
        Resume from here.
    progress : bool or {"bar", "log", "none"}
        See :mod:`geogpvae.engine.progress`.
    callback : callable, optional
        Called as ``callback(state, model, optimizer)`` after every epoch (checkpointing).
    should_stop : callable, optional
        Polled after every epoch; training returns early when it says True (signals).
    pause_at : int, optional
        Return, as an interrupted run would, once this many epochs are complete.
    schedule : {"cosine", "constant"}
        :func:`learning_rate`'s schedule, or ``lr`` throughout (the metric's warm-up fits).

    Returns
    -------
    TrainState
        Per epoch ``loss`` (negative ELBO / N), ``expected_nll``, ``kl`` and ``elapsed`` (s);
        ``done`` once the budget is spent.
    """
    state = state or TrainState()
    core = model.module if hasattr(model, "module") else model
    optimizer = _optimizer(core, config, state, data.n)
    plan = _Plan.make(data, config)
    averager = _Averager(core, WEIGHT_AVERAGE, state)
    bar = Progress(progress if plan.rank == 0 else False, plan.epochs, "epoch", initial=state.epoch)
    t0 = time.perf_counter()
    model.train()
    try:
        last = plan.epochs if pause_at is None else min(plan.epochs, pause_at)
        for epoch in range(state.epoch, state.epoch if state.done else last):
            sums, n_b = _run_epoch(model, data, config, optimizer, averager, state, plan, epoch, schedule,
                                   on_step=lambda i, n: bar.within(i / n, f"step {i}/{n}"))
            _record_epoch(state, epoch, sums, n_b, time.perf_counter() - t0)
            state.done = state.done or state.epoch >= plan.epochs
            bar.update(epoch + 1, f"loss {state.history['loss'][-1]:.5g}")
            if callback is not None:
                state.optimizer = optimizer.state_dict()
                callback(state, core, optimizer)
            if state.done or (should_stop is not None and should_stop()):
                break
    finally:
        bar.close()
        model.eval()
    state.optimizer = optimizer.state_dict()
    if state.done:
        _final_weights(core, state)
    return state


def _optimizer(core: GPVAE, config: GPVAEConfig, state: TrainState, n_points: int) -> FusedAdam | torch.optim.Optimizer:
    """Adam with the kernel hyperparameters in their own group (rate ``KERNEL_LR`` x ``lr``):
    :class:`~geogpvae.engine.adam.FusedAdam` where the fused kernel serves the parameters,
    else ``torch.optim.Adam`` (same state layout either way)."""
    kernel_params = list(core.kernel.parameters())
    noise_params = [core.raw_noise] if isinstance(core.raw_noise, torch.nn.Parameter) else []
    special = {id(p) for p in kernel_params + noise_params}
    groups = [{"params": [p for p in core.parameters() if id(p) not in special], "scale": 1.0}]
    if kernel_params:
        groups.append({"params": kernel_params, "scale": KERNEL_LR})
    if noise_params:
        groups.append({"params": noise_params, "scale": 1.0})
    if all(fused_supported(p) for p in core.parameters()):
        optimizer = FusedAdam(groups, lr=config.lr_for(n_points))
    else:
        optimizer = torch.optim.Adam(groups, lr=config.lr_for(n_points))
    if state.optimizer is not None:
        optimizer.load_state_dict(state.optimizer)
    return optimizer


@dataclass
class _Plan:
    """The step budget of a run and this process's share of it."""

    epochs: int
    steps_per_epoch: int
    total_steps: int
    batch_size: int
    chunk: int
    rank: int = 0
    world: int = 1

    @classmethod
    def make(cls, data: FieldData, config: GPVAEConfig) -> _Plan:
        rank, world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        batch_size = config.batch_for(data.n)
        steps = math.ceil(data.n / batch_size)
        if world > 1:
            steps = max(1, (steps - steps % world or steps) // world)
        epochs = config.n_epochs(data.n)
        return cls(epochs, steps, epochs * steps, batch_size, config.chunk_for(batch_size), rank, world)

    def batches(self, data: FieldData, seed: int, epoch: int) -> list[torch.Tensor]:
        batches = epoch_batches(data.n, self.batch_size, seed=seed, epoch=epoch, order=data.order,
                                chunk=self.chunk)
        if self.world > 1:  # equal shares, so that every rank takes the same number of steps
            usable = len(batches) - len(batches) % self.world or len(batches)
            batches = batches[:usable][self.rank :: self.world]
        return batches


def _run_epoch(model, data, config, optimizer, averager, state, plan, epoch, schedule,
               on_step: Callable[[int, int], None] | None = None) -> tuple[dict[str, float], int]:
    """One pass over the epoch's mini-batches; the summed loss terms and the number of batches.

    ``on_step(i, n)`` is called after step ``i`` of ``n`` (progress inside long epochs).
    """
    batches = plan.batches(data, config.seed, epoch)
    _seed_device(data.x.device, (config.seed * 7919 + epoch * 104729 + plan.rank) % (2**63))
    sums = [torch.zeros((), dtype=data.x.dtype, device=data.x.device) for _ in _TERMS]
    constant = schedule == "constant"
    if constant:
        _set_lr(optimizer, config.lr_for(data.n))
    for i, idx in enumerate(batches):
        if not constant:
            _set_lr(optimizer, learning_rate(config, epoch * plan.steps_per_epoch + i, plan.total_steps, data.n))
        terms = model(gather_batch(data, idx, mask_rate=config.mask_rate))
        optimizer.zero_grad(set_to_none=True)
        terms["loss"].backward()
        optimizer.step()
        state.steps += 1
        averager.step(state.steps)
        if on_step is not None:
            on_step(i + 1, len(batches))
        with torch.no_grad():  # summed on the device: no host sync per step
            for acc, key in zip(sums, _TERMS):
                acc += terms[key].detach()
    return {key: float(acc) for key, acc in zip(_TERMS, sums)}, max(len(batches), 1)


_TERMS = ("loss", "expected_nll", "kl")


def _seed_device(device: torch.device, seed: int) -> None:
    """Seed the global generator that draws on ``device`` (the training's Monte Carlo noise).

    The same as ``torch.manual_seed`` for that device, without seeding every other backend:
    on a torch build with CUDA but no GPU in use, ``torch.manual_seed`` queues a lazy CUDA
    seeding with a captured Python stack each call, a cost that adds up where every epoch
    is a single step.
    """
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
    elif device.type != "cpu":
        torch.manual_seed(seed)


def _set_lr(optimizer: FusedAdam | torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("scale", 1.0)


def _record_epoch(state: TrainState, epoch: int, sums: dict[str, float], n_b: int, elapsed: float) -> None:
    state.epoch = epoch + 1
    state.history["epoch"].append(epoch + 1)
    for key, total in sums.items():
        state.history[key].append(total / n_b)
    state.history["elapsed"].append(elapsed)
    if not all(math.isfinite(state.history[k][-1]) for k in sums):
        raise FloatingPointError(
            f"training diverged at epoch {epoch + 1} (loss {state.history['loss'][-1]}); "
            "try a smaller lr or dtype='float64'"
        )


class _Averager:
    """Exponential moving average of the weights (all floating-point state), kept in ``state.average``."""

    def __init__(self, core: GPVAE, decay: float, state: TrainState) -> None:
        self.decay = decay
        self.avg: list[torch.Tensor] = []
        self.src: list[torch.Tensor] = []
        if not decay:
            return
        current = core.state_dict()
        if state.average is None:
            state.average = {k: v.detach().clone() for k, v in current.items() if v.is_floating_point()}
        self.names = list(state.average)
        self.avg = [state.average[k] for k in self.names]
        self.src = [current[k] for k in self.names]  # share storage with the live weights

    @torch.no_grad()
    def step(self, step: int) -> None:
        """Fold the current weights in, with a shorter memory early on."""
        if self.decay:
            rate = min(self.decay, (1.0 + step) / (10.0 + step))
            torch._foreach_lerp_(self.avg, self.src, 1.0 - rate)


def check_inputs(data: FieldData, latent_dim: int, *, seed: int) -> tuple[tuple, torch.Tensor]:
    """What scoring ``data.check`` needs: the check locations' encoder inputs ``(y, visible,
    context)`` (held-out values hidden) and 16 fixed latent draws of shape (16, M, L), so that
    scores taken at different times differ by the model only."""
    rows = data.check.rows
    inputs = (data.y[rows], data.observed[rows], None if data.context is None else data.context[rows])
    gen = torch.Generator().manual_seed(int(seed) + 31)
    eps = torch.randn((16, rows.shape[0], latent_dim), generator=gen, dtype=data.x.dtype)
    return inputs, eps.to(data.x.device)


def _final_weights(core: GPVAE, state: TrainState) -> None:
    """The weights kept at the end: the averaged ones."""
    if state.average is not None:
        core.load_state_dict({**core.state_dict(), **state.average})


def distributed(model: GPVAE, device: torch.device) -> torch.nn.Module:
    """Wrap the model for data-parallel training when a process group is running.

    Launched under ``torchrun`` or ``srun`` with ``torch.distributed`` initialised (NCCL on
    GPUs, gloo on CPUs), every rank trains on its share of each epoch's mini-batches and the
    gradients are averaged across ranks; with one process the model is returned as it is.
    """
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)
