"""The mini-batches of an epoch and their index bookkeeping, planned on the host.

:func:`geogpvae.engine.data.gather_batch` turns a plan into the tensors of a step.
"""

from __future__ import annotations

import math
from typing import Any

import torch


#: what this module is handed (kept untyped here: importing it would be an import cycle)
FieldData = Any

__all__ = ["batch_plan", "epoch_batches", "plan_to_device", "sorted_unique"]

#: :func:`sorted_unique` marks a table up to this many times the number of values, else sorts
DENSE_UNIQUE_RATIO = 16


def _epoch_generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(epoch)) % (2**63))


def epoch_batches(
    n: int, batch_size: int, *, seed: int, epoch: int, order: torch.Tensor | None = None, chunk: int = 32
) -> list[torch.Tensor]:
    """The mini-batches of one epoch (CPU int64 index tensors covering every location once).

    With ``order``: unions of random runs of ``chunk`` locations of it (shifted every epoch);
    otherwise a random partition.
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
    """``torch.unique(values, return_inverse=True)`` of a host index tensor, faster for small ranges.

    Parameters
    ----------
    values : Tensor of int64, shape (M,)
        Indices in ``0 .. size - 1``, repeats allowed.
    size : int
        An exclusive upper bound of the values.

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

    The batch's and neighbours' rows, valid slots, the distinct locations to encode (``None``:
    all) with the batch's and neighbours' rows among them, and the distinct stencils.
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
    """A host batch plan on ``device`` in one (pinned, asynchronous) copy of one int64 buffer.

    Lets the host plan the next step while the device computes; ``valid`` travels as the sign
    of ``safe``, and a tensor held under two names travels once.

    Parameters
    ----------
    plan : dict of str to Tensor or None
        The host plan of :func:`batch_plan`.
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
