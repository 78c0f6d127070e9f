"""Realisations in xarray: what :func:`geogpvae.simulate` and :meth:`GPVAEImputer.simulate` write.

A realisation is one equally likely filled field: observed values as they are, every hole drawn
jointly with the others (:mod:`geogpvae.engine.realisations`), so that it keeps the texture of
the field where the mean is smooth. The draws share a new leading dim ``realization`` (CF
``standard_name: realization``).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np
import xarray as xr

from .api_output import detached, provenance
from .engine.realisations import draw_realisations, simulation_plan
from .errors import InputError
from .fields.cf import IMPUTED_SUFFIX, STD_SUFFIX, imputation_variables
from .fields.stacking import Field

__all__ = ["REALIZATION_DIM", "check_count", "realisations"]

#: the dim of the realisations (CF's spelling of the standard name)
REALIZATION_DIM = "realization"

#: realisations drawn at once: bounds the memory of the latent draws
GROUP = 16
#: realisations per chunk of a dask-backed result: bounds the memory of writing it
LAZY_GROUP = 4


def check_count(n: Any, first: Any) -> tuple[int, int]:
    """``n`` and ``first`` as ints; InputError unless whole numbers, ``n >= 1`` and ``first >= 0``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be a whole number of realisations >= 1, got {n!r}")
    if isinstance(first, bool) or not isinstance(first, (int, np.integer)) or first < 0:
        raise InputError(f"first must be a whole number >= 0, got {first!r}")
    return int(n), int(first)


def realisations(imp: Any, ds: xr.Dataset, field: Field, n: int, *, seed: int | None = None,
                 first: int = 0, lazy: bool = False) -> xr.Dataset:
    """``ds`` with each trained variable ``v`` as ``n`` realisations along ``realization`` and its
    flag ``v_imputed``; for :meth:`GPVAEImputer.simulate`. ``lazy``: dask-backed, ``LAZY_GROUP``
    realisations a chunk, drawn when the chunk is computed (written one chunk at a time)."""
    n, first = check_count(n, first)
    eng = imp.engine_
    rows = np.arange(field.x.shape[0]) if field.fingerprint() == imp._fingerprint else eng.training_rows(
        field.x, field.values)
    if rows is None:
        raise InputError(
            "realisations are drawn of the field the model was fitted on, and this Dataset holds other "
            "locations or observed values: fit on it first (geogpvae.simulate(ds, n) does both)"
        )
    seed = eng.config.seed if seed is None else int(seed)
    plan = simulation_plan(eng, seed)

    drawn = functools.partial(_drawn, eng, plan, rows)
    step = LAZY_GROUP if lazy else n
    blocks = [(s, min(step, first + n - s)) for s in range(first, first + n, step)]
    return _assemble(imp, ds, field, drawn, blocks, seed, lazy)


def _drawn(eng: Any, plan: Any, rows: np.ndarray, start: int, count: int) -> np.ndarray:
    """Realisations ``start`` to ``start + count - 1`` at ``rows``, in original units: shape (count, N, K).

    One call at a time in a process: torch's own threads share the work, and memory stays that of
    one chunk (a dask cluster's worker processes each draw their own).
    """
    with _drawing_lock():
        return np.concatenate([draw_realisations(eng, plan, min(GROUP, start + count - s), first=s)[:, rows]
                               for s in range(start, start + count, GROUP)])


@functools.lru_cache(maxsize=1)
def _drawing_lock() -> Any:
    """The process's lock around :func:`_drawn` (made on first use, so it never travels in a graph)."""
    return threading.Lock()


def _one(field: Field, name: str, j: int, original: xr.DataArray, draw: np.ndarray) -> dict[str, xr.DataArray]:
    """:func:`imputation_variables` for variable ``name`` of one realisation ``draw`` (shape (N, K))."""
    return imputation_variables(name, original, field.unstack(draw, j), np.zeros(field.shape),
                                domain=xr.DataArray(field.domain, dims=field.dims),
                                transform="log" if field.transforms.get(name) == "log" else None)


def _filled(field: Field, name: str, j: int, original: xr.DataArray, draws: np.ndarray) -> np.ndarray:
    """Variable ``name`` (``original``, in memory) of each realisation in ``draws`` (shape (R, N, K)):
    observed cells as they are, holes drawn, in the output dtype and dims; shape (R, *dims)."""
    return np.stack([_one(field, name, j, original, r)[name].values for r in draws])


def _realisation_variable(field: Field, name: str, j: int, drawn: Any, blocks: list[tuple[int, int]],
                          lazy: bool) -> tuple[xr.Variable, dict[str, xr.DataArray]]:
    """The realisations of ``name`` as one Variable, its attrs and encoding those of ``impute``'s,
    and :func:`imputation_variables`' output for one (its flag variable is the realisations')."""
    original = field.originals[name].compute()  # read once (it may be a file's or dask's), not per draw
    template = _one(field, name, j, original, np.zeros((len(field.x), len(field.names))))
    like = template[name].variable
    if lazy:
        import dask
        import dask.array as da

        fill = functools.partial(_filled, field, name, j, original)
        parts = [da.from_delayed(dask.delayed(fill, pure=False)(draws), (count, *like.shape), dtype=like.dtype)
                 for draws, (_, count) in zip(drawn, blocks)]
        data = da.concatenate(parts)
    else:
        data = np.concatenate([_filled(field, name, j, original, draws) for draws in drawn])
    attrs = dict(like.attrs, ancillary_variables=name + IMPUTED_SUFFIX)
    attrs.pop("geogpvae_point_estimate", None)
    return xr.Variable((REALIZATION_DIM, *like.dims), data, attrs, dict(like.encoding)), template


def _assemble(imp: Any, ds: xr.Dataset, field: Field, drawn: Any, blocks: list[tuple[int, int]], seed: int,
              lazy: bool) -> xr.Dataset:
    first, n = blocks[0][0], sum(count for _, count in blocks)
    if lazy:
        import dask

        draws = [dask.delayed(drawn, pure=False)(start, count) for start, count in blocks]
    else:
        draws = [drawn(start, count) for start, count in blocks]
    replaced = {f"{v}{s}" for v in field.names for s in ("", STD_SUFFIX, IMPUTED_SUFFIX)}
    out = detached(ds, [v for v in ds.variables if v not in replaced])
    number = xr.Variable(REALIZATION_DIM, np.arange(first, first + n),
                         {"standard_name": "realization", "long_name": "number of the realisation"})
    for j, name in enumerate(field.names):
        out[name], template = _realisation_variable(field, name, j, draws, blocks, lazy)
        out[name + IMPUTED_SUFFIX] = template[name + IMPUTED_SUFFIX].variable
    out = out.assign_coords({REALIZATION_DIM: number})
    if not str(out.attrs.get("title", "")).strip():
        out.attrs["title"] = f"realisations of {', '.join(field.names)} by geogpvae"
    out = provenance(imp, out, call="simulate")
    out.attrs["geogpvae_realizations"] = f"{n} joint draws, numbers {first}-{first + n - 1}, seed {seed}"
    return out
