"""Mini-batch training of a :class:`~geogpvae.engine.model.GPVAE` on preloaded tensors.

No DataLoader: the whole field lives in a few tensors (on the GPU when there is one), and a
mini-batch is a set of row indices. Every epoch's batches and random numbers are seeded from
``(seed, epoch)``, so a run resumed from the end of any epoch continues exactly as the
uninterrupted run would have (same device and dtype).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..gp.lattice import find_lattice
from ..gp.neighbours import knn, order_points, ordered_neighbours, shared_stencils
from .adam import FusedAdam, fused_supported
from .batches import batch_plan, epoch_batches
from .config import GPVAEConfig
from .model import GPVAE, Batch
from .progress import Progress
from .stopping import CheckValues, StopRule, predictive_nll

__all__ = [
    "CONTEXT_HIDING_SHARE",
    "FieldData",
    "TrainState",
    "context_radius",
    "neighbourhood_context",
    "visible_context",
    "with_context_hiding",
    "training_neighbours",
    "field_data",
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
    check : CheckValues or None
        Observed values held out of ``y``/``observed``/``context`` to decide when to stop.
    context_index : Tensor of int64, shape (N, max(context_scales)) or None
        The context neighbours of every location (:func:`context_index`), N where fewer exist;
        set (with ``context_scales``) only where ``context_hiding`` is.
    context_scales : tuple of int
        The context's neighbourhood sizes.
    context_hiding : Tensor of bool, shape (K,) or None
        Variables whose values hidden from the encoder in a training step are also taken out
        of the encoded locations' context in that step (:func:`visible_context`); None: none.
    context_hiding_share : float
        The share of those hidden values, drawn at random each step, that leave the context
        (the engine passes :data:`CONTEXT_HIDING_SHARE`).
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
    check: CheckValues | None = None
    context_index: torch.Tensor | None = None
    context_scales: tuple[int, ...] = ()
    context_hiding: torch.Tensor | None = None
    context_hiding_share: float = 1.0

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def host(self, name: str) -> torch.Tensor:
        """A host (CPU) copy of an index tensor (``"nbr"`` or ``"stencil"``), made once."""
        cache = self.__dict__.setdefault("_host", {})
        if name not in cache:
            cache[name] = getattr(self, name).cpu()
        return cache[name]


@dataclass
class TrainState:
    """Where training stands: completed epochs and optimiser steps, optimiser state, the
    moving average of the weights, the loss history, the stopping rule's record (scores, best
    step and weights) and whether training is done."""

    epoch: int = 0
    history: dict[str, list[float]] = field(
        default_factory=lambda: {"epoch": [], "loss": [], "expected_nll": [], "kl": [], "elapsed": []}
    )
    optimizer: dict[str, Any] | None = None
    average: dict[str, torch.Tensor] | None = None
    steps: int = 0
    monitor: dict[str, Any] = field(default_factory=dict)
    done: bool = False


#: Share of the values hidden from the encoder in a training step that also leave the encoded
#: locations' context (see :func:`visible_context`); chosen on tuning splits (docs/benchmarks.md).
CONTEXT_HIDING_SHARE = 0.5


def context_radius(x: np.ndarray, scales: int | tuple[int, ...], backend: str = "auto") -> float:
    """How far the encoder's context may reach before it stops being trusted.

    1.5 times the largest distance from a training location ``x`` (N, D) to its farthest
    context neighbour (the largest of ``scales``); ``inf`` without a context or with fewer
    than two locations. New locations whose context lies farther out than anything seen in
    training are predicted from the GP conditional alone, which relaxes to the prior far
    from the data, as it should.
    """
    if not scales or len(x) < 2:
        return float("inf")
    kk = min(max(scales) if isinstance(scales, tuple) else int(scales), len(x) - 1)
    dist, _ = knn(x, kk, exclude_self=True, backend=backend)
    return 1.5 * float(np.max(dist[:, -1]))


def context_index(
    x: np.ndarray, scales: int | tuple[int, ...], *, query: np.ndarray | None = None, backend: str = "auto"
) -> np.ndarray:
    """The neighbours :func:`neighbourhood_context` summarises.

    They depend on the locations only, so a caller that summarises several fields at the same
    locations (calibration rounds) computes them once and passes them as ``index``.

    Parameters
    ----------
    x : array, shape (N, D)
        Locations of the field.
    scales : int or tuple of int
        Neighbourhood sizes; the largest is searched.
    query : array, shape (M, D), optional
        Search around these locations instead (nothing excluded); default: ``x`` itself, each
        location without itself.
    backend : str
        Neighbour search backend.

    Returns
    -------
    ndarray of int64, shape (M, max(scales))
        Indices into ``x``, nearest first, -1 where fewer exist.
    """
    kmax = max((scales,) if isinstance(scales, (int, np.integer)) else tuple(scales))
    if query is None:
        return knn(x, kmax, exclude_self=True, backend=backend)[1]
    return knn(x, kmax, query=query, backend=backend)[1]


def neighbourhood_context(
    x: np.ndarray,
    y: np.ndarray,
    observed: np.ndarray,
    scales: int | tuple[int, ...],
    *,
    query: np.ndarray | None = None,
    backend: str = "auto",
    index: np.ndarray | None = None,
    chunk: int = 1 << 16,
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
    index : array of int, shape (M, max(scales)), optional
        The neighbours, from :func:`context_index` with the same ``x``, ``scales`` and
        ``query``; searched here when not given.
    chunk : int
        Locations summarised at a time (bounds the memory to a few (chunk, k, K) arrays).

    Returns
    -------
    ndarray, shape (M, 2 K len(scales))
        For each scale and variable: the mean of the observed values among the ``k`` nearest
        locations (0 when none is observed), then the fraction of them where it is observed.
    """
    ks = (scales,) if isinstance(scales, (int, np.integer)) else tuple(scales)
    idx = context_index(x, ks, query=query, backend=backend) if index is None else index
    out = np.empty((idx.shape[0], 2 * y.shape[1] * len(ks)))
    for s in range(0, idx.shape[0], chunk):
        part = idx[s : s + chunk]
        valid = part >= 0
        safe = np.where(valid, part, 0)
        obs = observed[safe] & valid[..., None]  # (m, kmax, K)
        vals = np.where(obs, y[safe], 0.0)
        csum = np.cumsum(vals, axis=1)
        ccount = np.cumsum(obs, axis=1)
        parts = []
        for k in ks:
            total, count = csum[:, k - 1], ccount[:, k - 1]
            parts += [total / np.maximum(count, 1), count / k]
        out[s : s + chunk] = np.concatenate(parts, axis=1)
    return out


def is_lattice(x: np.ndarray) -> bool:
    """Whether the locations lie on a regular lattice (a full or partly masked grid).

    True when :func:`geogpvae.gp.lattice.find_lattice` finds one: at most twice as many
    lattice cells as locations (so a grid with up to half of its cells masked counts), equally
    spaced distinct values along every axis, and no two locations in one cell. Scattered
    locations have nearly N distinct values per axis and fail the first test.

    Parameters
    ----------
    x : ndarray, shape (N, D)
        Locations, in the engine's coordinate units.

    Returns
    -------
    bool
    """
    return find_lattice(x) is not None


def resolve_layout(x: np.ndarray, config: GPVAEConfig) -> tuple[str, str]:
    """The SPA ordering and the batching actually used for these locations.

    ``"auto"`` ordering resolves to ``"sorted"`` on a regular lattice (shared conditioning
    geometries) and to ``"random"`` otherwise. ``"auto"`` batching resolves to ``"spatial"``
    (compact batches, whose neighbours overlap) on a lattice and wherever the fit trains in
    mini-batches, and to ``"random"`` for whole-field steps on scattered locations, where the
    batch order only changes the order of a sum. Explicit choices are kept.

    Spatial batches on scattered locations were chosen on the station network's tuning split
    (rule 11, docs/benchmarks.md): over six fits RMSE 0.310 -> 0.308, NLL 0.143 -> 0.141, cov95
    0.958 -> 0.951, 22 % less time per fit.

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
        batching = "spatial" if lattice or config.batch_for(x.shape[0]) < x.shape[0] else "random"
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
    check: np.ndarray | None = None,
    check_weights: np.ndarray | None = None,
    context_idx: np.ndarray | None = None,
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
    check : array of bool, shape (N, K), optional
        Observed values to hold out of training (likelihood, encoder inputs and context) and
        keep aside for the stopping rule (see :func:`geogpvae.engine.stopping.check_entries`).
    check_weights : array, shape (K,), optional
        Weight of each variable in the check score (see :func:`geogpvae.engine.holdout.task_weights`);
        equal weights by default.
    context_idx : array of int, optional
        The context neighbours of ``x`` (:func:`context_index`), when the caller has them.
    """
    check_values = None
    if check is not None and check.any():
        check_values = CheckValues.from_arrays(check, y, device=device, dtype=dtype, weights=check_weights)
        observed = observed & ~check
    y0 = np.where(observed, y, 0.0)
    context = (
        neighbourhood_context(x, y0, observed, config.context_scales, backend=config.neighbour_backend,
                              index=context_idx)
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
        check=check_values,
    )


def learning_rate(config: GPVAEConfig, step: int, total_steps: int, n_points: int) -> float:
    """The learning rate at optimiser step ``step`` (0-based) of ``total_steps``."""
    lr = config.lr_for(n_points)
    if config.lr_schedule == "constant" or total_steps <= 1:
        return lr
    warm = max(1, int(0.02 * total_steps))
    if step < warm:
        return lr * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total_steps - warm - 1))
    floor = 0.05
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def visible_context(
    context: torch.Tensor, neighbours: torch.Tensor, y: torch.Tensor, hidden: torch.Tensor, scales: tuple[int, ...]
) -> torch.Tensor:
    """The encoder's context with the values hidden in this step taken out of it.

    Parameters
    ----------
    context : Tensor, shape (U, 2 K len(scales))
        :func:`neighbourhood_context` of the encoded locations, built from every observed value.
    neighbours : Tensor of int64, shape (U, max(scales))
        Rows among the U of each location's context neighbours, nearest first; U where the
        neighbour is not encoded in this step (none of its values is hidden) or absent.
    y : Tensor, shape (U, K)
        Standardised values of the encoded locations (0 where missing).
    hidden : Tensor of bool, shape (U, K)
        Observed values to take out.
    scales : tuple of int
        The context's neighbourhood sizes.

    Returns
    -------
    Tensor, shape (U, 2 K len(scales))
        Per scale and variable, the mean of the values still in among the ``k`` nearest
        locations (0 when none is left) and the fraction of them still in: the context each
        location would have if the hidden values were missing.
    """
    u, k = y.shape
    gone = hidden.to(y.dtype)
    per_row = torch.cat([torch.cat([gone, gone * y], 1), gone.new_zeros(1, 2 * k)])  # row U: nothing gone
    picked = per_row.index_select(0, neighbours.reshape(-1)).view(u, -1, 2 * k)  # (U, kmax, 2K)
    parts = []
    for i, size in enumerate(scales):
        removed = picked[:, :size].sum(1)
        mean, share = context[:, 2 * k * i : 2 * k * i + k], context[:, 2 * k * i + k : 2 * k * (i + 1)]
        count = torch.round(share * size)
        left = count - removed[:, :k]
        total = mean * count - removed[:, k:]
        parts += [torch.where(left > 0, total / left.clamp_min(1.0), 0.0), left / size]
    return torch.cat(parts, dim=1)


def with_context_hiding(
    data: FieldData, index: np.ndarray, scales: tuple[int, ...], variables: np.ndarray,
    share: float = CONTEXT_HIDING_SHARE,
) -> FieldData:
    """``data`` set to take the hidden values of some variables out of the context in training.

    Parameters
    ----------
    data : FieldData
        With a context.
    index : array of int, shape (N, max(scales))
        The context neighbours of ``data``'s locations (:func:`context_index`, -1 where fewer exist).
    scales : tuple of int
        The context's neighbourhood sizes.
    variables : array of bool, shape (K,)
        Whose hidden values leave the context (see :func:`visible_context`).
    share : float
        The share of those hidden values, drawn each step, that leave it.

    Returns
    -------
    FieldData
        A copy; ``data`` itself when no variable is named or there is no context (the
        neighbours are kept on the device only where they are used).
    """
    if data.context is None or not np.any(variables):
        return data
    dev = data.x.device
    return dataclasses.replace(
        data, context_index=torch.as_tensor(np.where(index >= 0, index, len(index)), device=dev),
        context_scales=tuple(scales), context_hiding=torch.as_tensor(np.asarray(variables, dtype=bool), device=dev),
        context_hiding_share=float(share))


def _encoded_rows(data: FieldData, uniq: torch.Tensor | None) -> torch.Tensor:
    """Rows among the U encoded locations of their context neighbours (U: not encoded or absent)."""
    if uniq is None:
        return data.context_index  # every location encoded; N marks an absent neighbour
    u = uniq.shape[0]
    where = torch.full((data.n + 1,), u, dtype=torch.int64, device=uniq.device)
    where[uniq] = torch.arange(u, device=uniq.device)
    index = data.context_index.index_select(0, uniq)
    return where.index_select(0, index.reshape(-1)).view(index.shape)


def gather_batch(
    data: FieldData, idx: torch.Tensor, *, mask_rate: float = 0.0, generator: torch.Generator | None = None
) -> Batch:
    """Gather the tensors of one mini-batch; every location is encoded once.

    Where ``data.context_hiding`` names variables, their values hidden from the encoder are
    also taken out of the encoded locations' context (:func:`visible_context`).

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
    plan = batch_plan(data, idx)
    uniq = plan["uniq"]

    def rows(t: torch.Tensor | None) -> torch.Tensor | None:
        return t if t is None or uniq is None else t.index_select(0, uniq)  # faster than t[uniq] on CPUs

    observed = rows(data.observed)
    visible = observed
    if mask_rate > 0:
        keep = torch.rand(observed.shape, device=observed.device, generator=generator) >= mask_rate
        visible = observed & keep
    y = rows(data.y)
    context = rows(data.context)
    if mask_rate > 0 and data.context_hiding is not None and context is not None:
        gone = observed & ~visible & data.context_hiding
        if data.context_hiding_share < 1:
            gone = gone & (torch.rand(gone.shape, device=gone.device, generator=generator) < data.context_hiding_share)
        context = visible_context(context, _encoded_rows(data, uniq), y, gone, data.context_scales)
    stencil = {}
    if plan["stencils"] is not None:
        used = plan["stencils"]
        stencil = dict(stencil_offsets=data.stencil_offsets[used], stencil_valid=data.stencil_valid[used],
                       stencil_index=plan["stencil_index"])
    return Batch(
        **stencil,
        y=y,
        observed=observed,
        visible=visible,
        context=context,
        batch_pos=plan["batch_pos"],
        nbr_pos=plan["nbr_pos"],
        nbr_valid=plan["valid"],
        x_batch=data.x.index_select(0, plan["idx"]),
        x_nbr=data.x.index_select(0, plan["safe"].reshape(-1)).view(*plan["safe"].shape, data.x.shape[1]),
        n_total=data.n,
    )


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
) -> TrainState:
    """Maximise the mini-batch ELBO with Adam, until the stopping rule or the epoch budget says.

    Parameters
    ----------
    model : GPVAE
        On the same device and dtype as ``data``. May be wrapped in
        ``torch.nn.parallel.DistributedDataParallel``; each rank then trains on its share of
        every epoch's batches.
    data : FieldData
        With ``data.check`` (held-out values), training stops when their predictive score
        stops improving (see :mod:`geogpvae.engine.stopping`) and the best-scoring weights are kept.
    config : GPVAEConfig
        ``epochs``, ``batch_size``, ``lr``, ``mask_rate``, ``seed``, ``weight_average``.
    state : TrainState, optional
        Resume from here (completed epochs, optimiser state, history, stopping record).
    progress : bool or {"bar", "log", "none"}
        ``True`` chooses a bar on a terminal and plain log lines otherwise (see
        :mod:`geogpvae.engine.progress`); log lines also come from inside long epochs.
    callback : callable, optional
        Called as ``callback(state, model, optimizer)`` after every epoch (checkpointing).
    should_stop : callable, optional
        Polled after every epoch; training returns early when it says True (signals).
    pause_at : int, optional
        Return once this many epochs of the budget are complete, as an interrupted run would
        (not done, live weights kept): a later call with the returned state carries on, on
        the same or on another :class:`FieldData` of the same locations.

    Returns
    -------
    TrainState
        With the loss history per epoch: ``loss`` (negative ELBO / N), ``expected_nll``,
        ``kl`` (per location) and ``elapsed`` (seconds since this call started); ``done``
        is True when training finished (budget spent or stopping rule met).
    """
    state = state or TrainState()
    core = model.module if hasattr(model, "module") else model
    core.set_train_samples(config.train_samples)
    optimizer = _optimizer(core, config, state, data.n)
    plan = _Plan.make(data, config)
    averager = _Averager(core, config.weight_average, state)
    rule = _Stopping(core, data, config, state, averager) if data.check is not None else None
    bar = Progress(progress if plan.rank == 0 else False, plan.epochs, "epoch", initial=state.epoch)
    t0 = time.perf_counter()
    model.train()
    try:
        last = plan.epochs if pause_at is None else min(plan.epochs, pause_at)
        for epoch in range(state.epoch, state.epoch if state.done else last):
            sums, n_b = _run_epoch(model, data, config, optimizer, averager, state, plan, epoch,
                                   on_step=lambda i, n: bar.within(i / n, f"step {i}/{n}"))
            _record_epoch(state, epoch, sums, n_b, time.perf_counter() - t0)
            if rule is not None and rule.check(state.steps):
                state.done = True
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
    """Adam with the kernel hyperparameters in their own group (rate ``kernel_lr`` x ``lr``):
    :class:`~geogpvae.engine.adam.FusedAdam` where the fused kernel serves the parameters,
    else ``torch.optim.Adam`` (same state layout either way)."""
    kernel_params = list(core.kernel.parameters())
    noise_params = [core.raw_noise] if isinstance(core.raw_noise, torch.nn.Parameter) else []
    special = {id(p) for p in kernel_params + noise_params}
    groups = [{"params": [p for p in core.parameters() if id(p) not in special], "scale": 1.0}]
    if kernel_params:
        groups.append({"params": kernel_params, "scale": config.kernel_lr})
    if noise_params:
        groups.append({"params": noise_params, "scale": float(config.extra.get("noise_lr", 1.0))})
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


def _run_epoch(model, data, config, optimizer, averager, state, plan, epoch,
               on_step: Callable[[int, int], None] | None = None) -> tuple[dict[str, float], int]:
    """One pass over the epoch's mini-batches; the summed loss terms and the number of batches.

    ``on_step(i, n)`` is called after step ``i`` of ``n`` (progress inside long epochs).
    """
    batches = plan.batches(data, config.seed, epoch)
    _seed_device(data.x.device, (config.seed * 7919 + epoch * 104729 + plan.rank) % (2**63))
    sums = [torch.zeros((), dtype=data.x.dtype, device=data.x.device) for _ in _TERMS]
    constant = config.lr_schedule == "constant"
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
    seeding with a captured Python stack each call, which cost half a millisecond per
    epoch (12 % of a Jura fit, whose epochs are single steps).
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
            "try a smaller lr, dtype='float64' or a larger jitter"
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


class _Stopping:
    """The stopping rule of :mod:`geogpvae.engine.stopping`, scoring the averaged weights."""

    def __init__(self, core: GPVAE, data: FieldData, config: GPVAEConfig, state: TrainState,
                 averager: _Averager) -> None:
        self.core, self.averager, self.check_values = core, averager, data.check
        self.inputs, self.eps = check_inputs(data, core.latent_dim, seed=config.seed)
        self.rule = StopRule(**config.stop_rule(data.n))
        self.rule.record = state.monitor

    @torch.no_grad()
    def check(self, steps: int) -> bool:
        """Score the check values when due; True when training should stop."""
        if not self.rule.due(steps):
            return False
        live = self.averager.src
        backup = [t.clone() for t in live] if live else []
        if live:
            torch._foreach_copy_(live, self.averager.avg)
        was_training = self.core.training
        self.core.eval()
        try:
            score = predictive_nll(self.core, self.inputs, self.check_values, self.eps)
            scored = {k: v for k, v in self.core.state_dict().items() if v.is_floating_point()}
            return self.rule.update(steps, score, scored)
        finally:
            if live:
                torch._foreach_copy_(live, backup)
            self.core.train(was_training)


def _final_weights(core: GPVAE, state: TrainState) -> None:
    """The weights kept at the end: the best-scoring ones, else the averaged ones."""
    best = state.monitor.get("best_weights")
    if best is not None:
        core.load_state_dict({**core.state_dict(), **best})
    elif state.average is not None:
        core.load_state_dict({**core.state_dict(), **state.average})

