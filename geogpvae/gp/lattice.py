"""Nearest neighbours on a regular lattice, by stencils of cell offsets instead of trees.

The integer offsets within a radius are listed once, sorted by length; a cell's nearest
neighbours are the first that land on a lattice point. Exact for every cell that finds enough
within the radius; the rest (corners, the first cells of an ordering) go back to the KD-tree.
Ties break by position in the sorted list, the same at every cell.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["Lattice", "cells_of", "find_lattice", "lattice_neighbours", "offset_keys"]

_ROW_CHUNK = 1 << 16
_MAX_OFFSETS = 20_000  # give up on the stencil (extreme anisotropy) beyond this many offsets


@dataclasses.dataclass(frozen=True)
class Lattice:
    """Where points sit on a regular lattice.

    Attributes
    ----------
    shape : tuple of int
        Positions along each axis.
    step : ndarray, shape (D,)
        Spacing along each axis in the points' units (1 for a single value).
    cell : ndarray of int64, shape (N, D)
        Lattice position of every point.
    origin : ndarray, shape (D,)
        The smallest coordinate along each axis (the position of cell 0).
    rank : ndarray of int64, shape (N,)
        Row-major (first axis slowest) index of every point's cell: the "sorted" ordering.
    lookup : ndarray of int64, shape (prod(shape),)
        The point at each lattice cell, -1 where the lattice has no point.
    """

    shape: tuple[int, ...]
    step: np.ndarray
    origin: np.ndarray
    cell: np.ndarray
    rank: np.ndarray
    lookup: np.ndarray


def find_lattice(points: np.ndarray, *, max_fill: float = 2.0) -> Lattice | None:
    """The lattice the points lie on, or None when they do not form one.

    Parameters
    ----------
    points : array, shape (N, D)
    max_fill : float
        Largest ratio of lattice cells to points accepted (2: up to half may be missing).

    Returns
    -------
    Lattice or None
        None for scattered points, unequal spacing, duplicates or over ``max_fill * N`` cells.
    """
    pts = np.asarray(points, dtype=np.float64)
    n, d = pts.shape
    if n < 2:
        return None
    shape, step, origin, cell = [], [], [], np.empty((n, d), dtype=np.int64)
    size = 1
    for axis in range(d):
        values, inverse = np.unique(pts[:, axis], return_inverse=True)
        size *= len(values)
        if size > max_fill * n:
            return None
        if len(values) > 1:
            steps = np.diff(values)
            # coordinates that went through float32 keep equal steps only to its precision
            if not np.allclose(steps, steps.mean(), rtol=1e-6, atol=_coordinate_tolerance(values)):
                return None
            step.append(float(steps.mean()))
        else:
            step.append(1.0)
        shape.append(len(values))
        origin.append(float(values[0]))
        cell[:, axis] = inverse.ravel()
    rank = np.ravel_multi_index(tuple(cell.T), tuple(shape)).astype(np.int64)
    lookup = np.full(size, -1, dtype=np.int64)
    lookup[rank] = np.arange(n)
    if np.count_nonzero(lookup >= 0) != n:  # duplicate points share a cell
        return None
    return Lattice(tuple(shape), np.asarray(step), np.asarray(origin), cell, rank, lookup)


def _coordinate_tolerance(values: np.ndarray) -> float:
    """Rounding error of coordinates of this size stored in float32 (a few units in the last place)."""
    return 8.0 * float(np.finfo(np.float32).eps) * float(np.abs(values).max())


def _offsets(lattice: Lattice, wanted: int, earlier: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Non-zero offsets (C, D) within a radius holding ~4x ``wanted`` cells and their lengths (C,).

    ``earlier`` keeps only lexicographically negative offsets; None when the list is too long.
    """
    shape, step = np.asarray(lattice.shape), lattice.step
    live = shape > 1
    dims = max(int(live.sum()), 1)
    cell_volume = float(np.prod(step[live])) if live.any() else 1.0
    # radius of a ball holding ~4x wanted cells (8x for a half ball)
    target = (8.0 if earlier else 4.0) * max(wanted, 1)
    radius = (target * cell_volume * _GAMMA[dims] / np.pi ** (dims / 2)) ** (1.0 / dims)
    while True:
        reach = np.minimum(np.floor(radius / step), shape - 1).astype(np.int64)
        if np.prod(2 * reach + 1) > _MAX_OFFSETS:
            return None
        grids = np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij")
        off = np.stack([g.ravel() for g in grids], axis=1)
        length = np.sqrt(((off * step) ** 2).sum(1))
        keep = (length <= radius) & (length > 0)
        if earlier:
            first = np.argmax(off != 0, axis=1)
            keep &= off[np.arange(len(off)), first] < 0
        off, length = off[keep], length[keep]
        saturated = np.all(reach >= shape - 1)
        if len(off) >= 3 * wanted or saturated:
            break
        radius *= 1.5
    order = np.lexsort((np.arange(len(off)), length))
    return off[order], length[order]


_GAMMA = {1: 1.0, 2: 1.0, 3: 1.329340388, 4: 2.0}  # Gamma(D/2 + 1)


def lattice_neighbours(
    lattice: Lattice, k: int, *, earlier: bool = False, with_zero: bool = False, cells: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each query cell's ``k`` nearest points of the lattice, by stencil.

    Parameters
    ----------
    lattice : Lattice
        The points searched, from :func:`find_lattice`.
    k : int
    earlier : bool
        Only points lexicographically before the query cell (SPA's conditioning sets).
    with_zero : bool
        Count a point in the query's own cell (distance 0) as a neighbour.
    cells : array of int, shape (M, D), optional
        The query cells, inside the lattice's bounds (default: the lattice's own points).

    Returns
    -------
    None or (idx, dist, unresolved)
        ``idx`` (M, k) int64 and ``dist`` (M, k), nearest first, -1 / inf where not found;
        ``unresolved``: the queries whose rows are not final. None when the stencil is too large.
    """
    d = lattice.cell.shape[1]
    cells = lattice.cell if cells is None else np.asarray(cells, dtype=np.int64)
    m = cells.shape[0]
    found = _offsets(lattice, k, earlier) if k > 0 else (np.zeros((0, d), np.int64), np.zeros(0))
    if found is None:
        return None
    off, length = found
    if with_zero:
        off, length = np.concatenate([np.zeros((1, d), np.int64), off]), np.concatenate([[0.0], length])
    idx = np.full((m, k), -1, dtype=np.int64)
    dist = np.full((m, k), np.inf)
    if k <= 0:
        return idx, dist, np.zeros(0, dtype=np.int64)
    shape = np.asarray(lattice.shape)
    strides = np.array([int(np.prod(shape[a + 1:])) for a in range(d)], dtype=np.int64)
    delta = off @ strides
    short = []
    for s in range(0, m, _ROW_CHUNK):
        cell = cells[s : s + _ROW_CHUNK]
        inside = np.ones((len(cell), len(off)), dtype=bool)
        for a in range(d):
            pos = cell[:, a : a + 1] + off[None, :, a]
            inside &= (pos >= 0) & (pos < shape[a])
        target = np.where(inside, (cell @ strides)[:, None] + delta[None, :], 0)
        cand = np.where(inside, lattice.lookup[target], -1)
        valid = cand >= 0
        count = np.cumsum(valid, axis=1)
        rows, cols = np.nonzero(valid & (count <= k))
        slot = count[rows, cols] - 1
        idx[s + rows, slot] = cand[rows, cols]
        dist[s + rows, slot] = length[cols]
        short.append(s + np.flatnonzero(count[:, -1] < k) if len(off) else s + np.arange(len(cell)))
    return idx, dist, np.concatenate(short).astype(np.int64)


def cells_of(lattice: Lattice, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lattice cell of each point, and whether the point sits on one inside the bounds.

    Parameters
    ----------
    lattice : Lattice
    points : array, shape (M, D)

    Returns
    -------
    cells : ndarray of int64, shape (M, D)
        Cell indices (clipped to the bounds where ``on_grid`` is False).
    on_grid : ndarray of bool, shape (M,)
        True on a lattice position (to 1e-6 of a step, or float32 rounding).
    """
    pts = np.asarray(points, dtype=np.float64)
    u = (pts - lattice.origin) / lattice.step
    cells = np.rint(u)
    shape = np.asarray(lattice.shape)
    scale = np.maximum(np.abs(lattice.origin), np.abs(lattice.origin + (shape - 1) * lattice.step))
    tol = 1e-6 + 8.0 * float(np.finfo(np.float32).eps) * scale / lattice.step
    on_grid = np.all((np.abs(u - cells) <= tol) & (cells >= 0) & (cells < shape), axis=1)
    return np.clip(cells, 0, shape - 1).astype(np.int64), on_grid


def offset_keys(lattice: Lattice, nbr: np.ndarray) -> np.ndarray:
    """Each neighbour's cell offset from its centre packed into one integer, slot by slot.

    Equal rows mean equal stencils (:func:`geogpvae.gp.neighbours.shared_stencils`).

    Parameters
    ----------
    lattice : Lattice
    nbr : array of int, shape (N, H)
        Neighbour indices of every lattice point, -1 padded.

    Returns
    -------
    ndarray of int64, shape (N, H)
        The packed offset of every slot, -1 where the slot is empty.
    """
    n, h = nbr.shape
    shape = np.asarray(lattice.shape)
    radix = 2 * shape - 1  # an offset along axis a lies in (-shape_a, shape_a)
    key = np.empty((n, h), dtype=np.int64)
    for s in range(0, n, _ROW_CHUNK):
        rows = nbr[s : s + _ROW_CHUNK]
        valid = rows >= 0
        off = lattice.cell[np.where(valid, rows, 0)] - lattice.cell[s : s + _ROW_CHUNK, None, :]
        code = np.zeros(rows.shape, dtype=np.int64)
        for a in range(len(shape)):
            code = code * radix[a] + (off[..., a] + shape[a] - 1)
        key[s : s + _ROW_CHUNK] = np.where(valid, code, -1)
    return key
