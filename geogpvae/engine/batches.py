"""The mini-batches of an epoch and their index bookkeeping, planned on the host.

:func:`epoch_batches` draws an epoch's batches; :func:`batch_plan` works out, on the host, which
rows a batch encodes and where its neighbours sit among them; :func:`plan_to_device` sends a
plan to an accelerator in one pinned copy. :func:`geogpvae.engine.data.gather_batch` turns
a plan into the tensors of a step.
"""

from __future__ import annotations

import math
from typing import Any

import torch


#: what this module is handed (kept untyped here: importing it would be an import cycle)
FieldData = Any

__all__ = ["batch_plan", "epoch_batches", "plan_to_device", "sorted_unique"]

#: :func:`sorted_unique` marks a dense table while its size is at most this many times the
#: number of values; beyond that a sort is cheaper.
DENSE_UNIQUE_RATIO = 16


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


def sorted_unique(values: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The sorted distinct values of a host index tensor and where each value sits among them.

    The same result as ``torch.unique(values, return_inverse=True)``. Where the values' range
    is small against their number (a mini-batch's rows among the field's), it marks a table of
    ``size`` entries instead of sorting, several times faster.

    Parameters
    ----------
    values : Tensor of int64, shape (M,)
        Indices in ``0 .. size - 1``, in any order, repeats allowed.
    size : int
        An upper bound (exclusive) of the values: the number of rows they index.

    Returns
    -------
    uniq : Tensor of int64, shape (U,)
        The distinct values, ascending.
    inverse : Tensor of int64, shape (M,)
        ``uniq[inverse]`` equals ``values``.
    """
    if size > DENSE_UNIQUE_RATIO * values.numel():
        return torch.unique(values, return_inverse=True)
    mark = torch.zeros(size, dtype=torch.int64)
    mark[values] = 1
    uniq = torch.nonzero(mark).squeeze(1)
    rank = mark.cumsum_(0)
    return uniq, rank[values] - 1


def batch_plan(data: FieldData, idx: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """Index bookkeeping of one mini-batch, done on the host (no device synchronisation).

    Returns the batch's locations, its neighbours' rows, which slots are valid, the distinct
    locations to encode (``None``: all of them) with the rows of the batch and of the
    neighbours among those, and the batch's distinct stencils.
    """
    idx = idx.cpu()
    b = idx.shape[0]
    nbr = data.host("nbr")[idx]  # (B, H)
    safe = nbr.clamp_min(0)
    plan: dict[str, torch.Tensor | None] = {"idx": idx, "safe": safe, "valid": nbr >= 0}
    if data.n <= 2 * b:  # the batch is most of the field: encoding every location is cheaper
        plan.update(uniq=None, batch_pos=idx, nbr_pos=safe)
    else:
        uniq, inverse = sorted_unique(torch.cat([idx, safe.reshape(-1)]), data.n)
        plan.update(uniq=uniq, batch_pos=inverse[:b], nbr_pos=inverse[b:].view(b, -1))
    plan["stencils"] = plan["stencil_index"] = None
    if data.stencil is not None:
        n_stencils = data.stencil_offsets.shape[0]
        plan["stencils"], plan["stencil_index"] = sorted_unique(data.host("stencil")[idx], n_stencils)
    dev = data.x.device
    if dev.type == "cpu":
        return plan
    return plan_to_device(plan, dev)


def plan_to_device(plan: dict[str, torch.Tensor | None], device: torch.device) -> dict[str, torch.Tensor | None]:
    """A host batch plan on ``device`` in one copy: its index tensors packed into one int64
    buffer (pinned on CUDA, so that the copy is asynchronous) and unpacked there as views.

    A copy from pageable host memory waits for the device's stream to finish its queued work,
    so one copy per tensor per step would tie every step's host work to the previous step's
    kernels; one pinned copy lets the host plan the next step while the device computes.
    ``valid`` travels as the sign of the neighbour index (``safe`` where valid, -1 elsewhere).
    A tensor the plan holds under two names (a whole-field plan's ``batch_pos`` is ``idx``,
    its ``nbr_pos`` is ``safe``) travels once.

    Parameters
    ----------
    plan : dict of str to Tensor or None
        The host plan of :func:`batch_plan`: integer index tensors (``idx`` (B,), ``safe``
        and ``nbr_pos`` (B, H), ...) and the bool ``valid`` (B, H).
    device : torch.device

    Returns
    -------
    dict of str to Tensor or None
        The same keys, shapes and dtypes, on ``device``.
    """
    first: dict[int, str] = {}  # id of a host tensor -> the first key that holds it
    alias: dict[str, str] = {}
    ints: dict[str, torch.Tensor] = {}
    for key, v in plan.items():
        if v is None or key == "valid":
            continue
        if id(v) in first:
            alias[key] = first[id(v)]
            continue
        first[id(v)] = key
        ints[key] = torch.where(plan["valid"], v, -1) if key == "safe" else v
    flat = torch.cat([v.reshape(-1).to(torch.int64) for v in ints.values()])
    if device.type == "cuda":
        flat = flat.pin_memory()
    flat = flat.to(device, non_blocking=True)
    out: dict[str, torch.Tensor | None] = dict.fromkeys(plan)
    start = 0
    for key, v in ints.items():
        part = flat[start : start + v.numel()].view(v.shape)
        out[key] = part if v.dtype == torch.int64 else part.to(v.dtype)
        start += v.numel()
    out["valid"] = out["safe"] >= 0
    out["safe"] = out["safe"].clamp_min(0)
    for key, source in alias.items():
        out[key] = out[source]
    return out
