"""``--chunks`` and ``--region`` of ``geogpvae predict``: block-by-block output, and jobs that fill
parts of one Zarr store."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from .common import UsageError

_CHUNK = re.compile(r"^\s*([^=,\s]+)\s*=\s*(\d+)\s*$")
_SLICE = re.compile(r"^\s*([^=,\s]+)\s*=\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_chunks(text: str) -> dict[str, int]:
    """``"y=1000,x=500"`` -> ``{"y": 1000, "x": 500}``: positive sizes, each dim once."""
    out: dict[str, int] = {}
    for item in text.split(","):
        found = _CHUNK.match(item)
        if not found or int(found.group(2)) < 1:
            raise UsageError(f"--chunks takes DIM=SIZE[,DIM=SIZE...] with sizes of at least 1, got {text!r}")
        if found.group(1) in out:
            raise UsageError(f"--chunks names {found.group(1)} twice")
        out[found.group(1)] = int(found.group(2))
    return out


def parse_region(text: str) -> dict[str, slice]:
    """``"y=0:1000,x=0:500"`` -> ``{"y": slice(0, 1000), "x": slice(0, 500)}``: START < STOP, each dim once."""
    out: dict[str, slice] = {}
    for item in text.split(","):
        found = _SLICE.match(item)
        if not found or int(found.group(2)) >= int(found.group(3)):
            raise UsageError(f"--region takes DIM=START:STOP[,...] with START < STOP (0-based, STOP "
                             f"excluded), got {text!r}")
        if found.group(1) in out:
            raise UsageError(f"--region names {found.group(1)} twice")
        out[found.group(1)] = slice(int(found.group(2)), int(found.group(3)))
    return out


def check_dims(ds: Any, names: Mapping[Hashable, Any], flag: str) -> None:
    """Every dim ``flag`` names is a dim of the locations ``ds``."""
    unknown = [str(d) for d in names if d not in ds.dims]
    if unknown:
        raise UsageError(f"{flag} names {', '.join(unknown)}, not dims of the locations; their dims: "
                         f"{', '.join(map(str, ds.dims))}")


def region_of(ds: Any, store: Any, slices: Mapping[Hashable, slice], output: str) -> Any:
    """The locations of ``ds`` in the region, checked against the store made from the same grid."""
    for dim, part in slices.items():
        if part.stop > ds.sizes[dim]:
            raise UsageError(f"--region {dim}={part.start}:{part.stop} ends beyond the locations' {dim} "
                             f"(size {ds.sizes[dim]})")
        if ds.sizes[dim] != store.sizes[dim]:
            raise UsageError(f"the locations have {ds.sizes[dim]} along {dim} but the store {output} "
                             f"{store.sizes[dim]}: give the grid the store was made from")
    part = ds.isel(slices)
    for dim in slices:
        if dim in part.indexes and dim in store.indexes:
            stored = np.asarray(store.indexes[dim][slices[dim]])
            if not np.array_equal(np.asarray(part.indexes[dim]), stored):
                raise UsageError(f"the {dim} values of the locations differ from those of the store {output}: "
                                 "give the grid the store was made from")
    return part


def store_chunks(store: Any, dims: Mapping[Hashable, Any]) -> dict[Hashable, int]:
    """The store's chunk size along each of ``dims`` (from the first variable on them)."""
    out: dict[Hashable, int] = {}
    for var in store.data_vars.values():
        chunks = var.encoding.get("chunks")
        if chunks is None:
            continue
        for dim, size in zip(var.dims, chunks):
            if dim in dims:
                out.setdefault(dim, int(size))
    return out
