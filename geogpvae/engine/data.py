"""The training field as tensors: neighbour sets, encoder context, layout and mini-batches."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..gp.lattice import find_lattice
from ..gp.neighbours import knn, order_points, ordered_neighbours, shared_stencils
from .batches import batch_plan
from .check_values import CheckValues
from .config import GPVAEConfig
from .model import Batch

__all__ = [
    "CONTEXT_HIDING_SHARE",
    "FieldData",
    "context_index",
    "context_radius",
    "field_data",
    "gather_batch",
    "is_lattice",
    "neighbourhood_context",
    "resolve_device",
    "resolve_layout",
    "training_neighbours",
    "visible_context",
    "with_context_hiding",
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
        Neighbour sets: earlier ones (SPA) or including the location itself (HPA); -1 padded.
    order : Tensor of int64, shape (N,) or None
        Z-order of the batches where they are spatial (:func:`resolve_layout`).
    stencil : Tensor of int64, shape (N,) or None
        Shared-stencil id of every location, when neighbour sets repeat (grids).
    stencil_offsets : Tensor, shape (S, H, D) or None
    stencil_valid : Tensor of bool, shape (S, H) or None
    check : CheckValues or None
        Observed values held out of ``y``/``observed``/``context`` to score the fit.
    context_index : Tensor of int64, shape (N, max(context_scales)) or None
        Context neighbours (:func:`context_index`), N where fewer exist; set with ``context_hiding``.
    context_scales : tuple of int
    context_hiding : Tensor of bool, shape (K,) or None
        Variables whose encoder-hidden values also leave the context (:func:`visible_context`).
    context_hiding_share : float
        Share of those hidden values, drawn each step, that leave it (:data:`CONTEXT_HIDING_SHARE`).
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


#: share of a step's encoder-hidden values that also leave the context (:func:`visible_context`)
CONTEXT_HIDING_SHARE = 0.5


def context_radius(x: np.ndarray, scales: int | tuple[int, ...], backend: str = "auto") -> float:
    """How far the encoder's context may reach before it stops being trusted.

    1.5 times the largest distance from a location of ``x`` (N, D) to its farthest context
    neighbour (largest of ``scales``); ``inf`` without a context or with fewer than two locations.
    """
    if not scales or len(x) < 2:
        return float("inf")
    kk = min(max(scales) if isinstance(scales, tuple) else int(scales), len(x) - 1)
    dist, _ = knn(x, kk, exclude_self=True, backend=backend)
    return 1.5 * float(np.max(dist[:, -1]))


def context_index(
    x: np.ndarray, scales: int | tuple[int, ...], *, query: np.ndarray | None = None, backend: str = "auto"
) -> np.ndarray:
    """The neighbours :func:`neighbourhood_context` summarises (computed once for several fields).

    Parameters
    ----------
    x : array, shape (N, D)
    scales : int or tuple of int
        Neighbourhood sizes; the largest is searched.
    query : array, shape (M, D), optional
        Search around these instead (nothing excluded); default ``x``, each location without itself.
    backend : str

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
    y : array, shape (N, K)
        Standardised values (anything where missing).
    observed : array of bool, shape (N, K)
    scales : int or tuple of int
        Neighbourhood sizes k (e.g. ``(8, 32)`` for a near and a wider ring).
    query : array, shape (M, D), optional
        Summarise around these locations instead (new locations: nothing excluded).
    backend : str
    index : array of int, shape (M, max(scales)), optional
        :func:`context_index` of the same ``x``, ``scales`` and ``query``; searched when not given.
    chunk : int
        Locations summarised at a time (bounds the memory).

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
    """Whether ``x`` (N, D) lies on a regular lattice, up to half of its cells masked.

    See :func:`geogpvae.gp.lattice.find_lattice`.
    """
    return find_lattice(x) is not None


def resolve_layout(x: np.ndarray, config: GPVAEConfig) -> tuple[str, str]:
    """The SPA ordering and the batching actually used for these locations.

    ``"auto"`` ordering is ``"sorted"`` on a regular lattice, else ``"random"``. Batching is
    ``"spatial"`` on a lattice or with mini-batches, else ``"random"``.

    Parameters
    ----------
    x : ndarray, shape (N, D)
    config : GPVAEConfig

    Returns
    -------
    ordering, batching : str
    """
    lattice = is_lattice(x)
    ordering = config.ordering
    if ordering == "auto":
        ordering = "sorted" if lattice else "random"
    batching = "spatial" if lattice or config.batch_for(x.shape[0]) < x.shape[0] else "random"
    return ordering, batching


def training_neighbours(x: np.ndarray, config: GPVAEConfig, ordering: str | None = None) -> np.ndarray:
    """The neighbour sets the KL term uses: (N, H) indices, -1 padded (``ordering``: SPA's)."""
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
        Standardised values; anything where missing.
    observed : array of bool, shape (N, K)
    config : GPVAEConfig
    device, dtype
        Where and in which precision the tensors live.
    use_stencils : bool
        Share prior factorisations between identical neighbour geometries (grids; exact).
    check : array of bool, shape (N, K), optional
        Observed values held out of training to score the fit.
    check_weights : array, shape (K,), optional
        Weight of each variable in the check score; equal by default.
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


def visible_context(
    context: torch.Tensor, neighbours: torch.Tensor, y: torch.Tensor, hidden: torch.Tensor, scales: tuple[int, ...]
) -> torch.Tensor:
    """The encoder's context with the values hidden in this step taken out of it.

    Parameters
    ----------
    context : Tensor, shape (U, 2 K len(scales))
        :func:`neighbourhood_context` of the encoded locations, from every observed value.
    neighbours : Tensor of int64, shape (U, max(scales))
        Rows among the U of the context neighbours, nearest first; U where not encoded or absent.
    y : Tensor, shape (U, K)
        Standardised values (0 where missing).
    hidden : Tensor of bool, shape (U, K)
        Observed values to take out.
    scales : tuple of int

    Returns
    -------
    Tensor, shape (U, 2 K len(scales))
        The context each location would have if the hidden values were missing.
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
        Context neighbours (:func:`context_index`), -1 where fewer exist.
    scales : tuple of int
    variables : array of bool, shape (K,)
        Whose hidden values leave the context (:func:`visible_context`).
    share : float
        Share of those hidden values, drawn each step, that leave it.

    Returns
    -------
    FieldData
        A copy; ``data`` itself when no variable is named or there is no context.
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
        return data.context_index  # N marks an absent neighbour
    u = uniq.shape[0]
    where = torch.full((data.n + 1,), u, dtype=torch.int64, device=uniq.device)
    where[uniq] = torch.arange(u, device=uniq.device)
    index = data.context_index.index_select(0, uniq)
    return where.index_select(0, index.reshape(-1)).view(index.shape)


def gather_batch(
    data: FieldData, idx: torch.Tensor, *, mask_rate: float = 0.0, generator: torch.Generator | None = None
) -> Batch:
    """Gather the tensors of one mini-batch; every location is encoded once.

    Parameters
    ----------
    data : FieldData
        Its ``context_hiding`` variables' hidden values also leave the context.
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
