"""Nearest neighbours, Vecchia orderings and each point's nearest *earlier* neighbours.

Exact k-NN backends (same sets, ties aside): ``"kdtree"`` (SciPy's cKDTree, the CPU default) and
``"faiss"`` (a flat index, on the GPU with a GPU build); ``"auto"`` picks faiss only on a CUDA
machine with GPU faiss. Regular lattices are searched by stencil (:mod:`~geogpvae.gp.lattice`).
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
from scipy.spatial import cKDTree

from .lattice import Lattice, cells_of, find_lattice, lattice_neighbours, offset_keys
from .names import BACKENDS, ORDERINGS

__all__ = [
    "BACKENDS",
    "ORDERINGS",
    "choose_backend",
    "knn",
    "median_neighbour_distance",
    "order_points",
    "ordered_neighbours",
    "faiss_available",
]


_BRUTE_FORCE_PREFIX = 512  # first positions handled by one dense distance matrix
_QUERY_CHUNK = 1 << 16
_LATTICE_MIN = 4096  # below this many points a tree is as fast as a stencil


@functools.lru_cache(maxsize=1)
def _faiss():
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def faiss_available(gpu: bool = False) -> bool:
    """Whether faiss imports (and, with ``gpu=True``, has CUDA support and a visible GPU)."""
    faiss = _faiss()
    if faiss is None:
        return False
    if not gpu:
        return True
    try:
        return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
    except Exception:  # noqa: BLE001  # pragma: no cover - depends on the faiss build
        return False


def choose_backend(backend: str, n_dims: int) -> str:
    """Resolve ``"auto"`` to ``"kdtree"`` or ``"faiss"``.

    Parameters
    ----------
    backend : {"auto", "kdtree", "faiss"}
    n_dims : int
        Input dimension D.

    Returns
    -------
    str
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown neighbour backend {backend!r}; choose one of {BACKENDS}")
    if backend == "faiss" and not faiss_available():
        raise ImportError(
            "backend='faiss' needs faiss: pip install 'geogpvae[cpu]' (faiss-cpu) or "
            "'geogpvae[gpu]' (faiss-gpu), never both"
        )
    if backend != "auto":
        return backend
    if faiss_available(gpu=True):
        return "faiss"
    return "kdtree"


def _as_points(points: np.ndarray, name: str = "points") -> np.ndarray:
    arr = np.asarray(points, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (N, D), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contain NaN or infinite coordinates")
    return arr


def _knn_kdtree(base: np.ndarray, query: np.ndarray, k: int, tree: cKDTree | None = None):
    tree = cKDTree(base) if tree is None else tree
    dist, idx = tree.query(query, k=k, workers=-1)
    if k == 1:
        dist, idx = dist[:, None], idx[:, None]
    return dist, idx.astype(np.int64)


@functools.lru_cache(maxsize=1)
def _gpu_resources():
    """faiss GPU resources (streams, temporary memory), created once per process and reused."""
    return _faiss().StandardGpuResources()


def gpu_id(n_gpus: int) -> int:
    """The GPU this process works on: torch's current CUDA device where torch has started CUDA
    (``torch.cuda.set_device``; a model put on ``cuda:1`` alone does not change it), else the
    ``LOCAL_RANK`` of a ``torchrun`` launch or ``SLURM_LOCALID`` of an ``srun`` one (modulo the
    visible GPUs), else 0.

    Parameters
    ----------
    n_gpus : int
        GPUs faiss sees.

    Returns
    -------
    int
        The device number for ``faiss.index_cpu_to_gpu``.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    rank = os.environ.get("LOCAL_RANK") or os.environ.get("SLURM_LOCALID") or "0"
    return int(rank) % max(n_gpus, 1)


def _knn_faiss(base: np.ndarray, query: np.ndarray, k: int):
    faiss = _faiss()
    index = faiss.IndexFlatL2(base.shape[1])
    if faiss_available(gpu=True):
        index = faiss.index_cpu_to_gpu(_gpu_resources(), gpu_id(faiss.get_num_gpus()), index)
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    d2, idx = index.search(np.ascontiguousarray(query, dtype=np.float32), k)
    return np.sqrt(np.maximum(d2, 0.0)).astype(np.float64), idx.astype(np.int64)


def _knn_raw(base, query, k, backend, tree=None):
    if backend == "faiss":
        return _knn_faiss(base, query, k)
    return _knn_kdtree(base, query, k, tree)


def knn(
    points: np.ndarray,
    k: int,
    *,
    query: np.ndarray | None = None,
    exclude_self: bool = False,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours (Euclidean).

    Parameters
    ----------
    points : array, shape (N, D)
    k : int
    query : array, shape (Q, D), optional
        Query locations; defaults to ``points`` themselves.
    exclude_self : bool
        With ``query=None``, leave each point out of its own list (by index: duplicates count).
    backend : {"auto", "kdtree", "faiss"}

    Returns
    -------
    dist : ndarray, shape (Q, k)
        Distances, ascending; ``inf`` where fewer than ``k`` neighbours exist.
    idx : ndarray of int64, shape (Q, k)
        Indices into ``points``; ``-1`` where fewer than ``k`` neighbours exist.
    """
    base = _as_points(points)
    n = base.shape[0]
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if exclude_self and query is not None:
        raise ValueError("exclude_self applies only when query is None")
    q = base if query is None else _as_points(query, "query")
    if q.shape[1] != base.shape[1]:
        raise ValueError(f"query has {q.shape[1]} dimensions, points have {base.shape[1]}")
    out_d = np.full((q.shape[0], k), np.inf)
    out_i = np.full((q.shape[0], k), -1, dtype=np.int64)
    avail = n - 1 if exclude_self else n
    kk = min(k, avail)
    if kk <= 0 or q.shape[0] == 0:
        return out_d, out_i
    backend = choose_backend(backend, base.shape[1])
    if backend == "kdtree" and n > _LATTICE_MIN:
        lattice = find_lattice(base)
        if lattice is not None:
            done = _lattice_knn(base, lattice, kk, exclude_self, None if query is None else q)
            if done is not None:
                out_d[:, :kk], out_i[:, :kk] = done
                return out_d, out_i
    tree = cKDTree(base) if backend == "kdtree" else None
    ask = kk + 1 if exclude_self else kk
    for start in range(0, q.shape[0], _QUERY_CHUNK):
        stop = min(start + _QUERY_CHUNK, q.shape[0])
        d, i = _knn_raw(base, q[start:stop], ask, backend, tree)
        if exclude_self:
            d, i = _drop_own(d, i, np.arange(start, stop))
        out_d[start:stop, :kk] = d
        out_i[start:stop, :kk] = i
    return out_d, out_i


#: most query points :func:`median_neighbour_distance` uses
MEDIAN_QUERIES = 20_000


def median_neighbour_distance(x: np.ndarray, k: int, *, backend: str = "auto",
                              max_queries: int = MEDIAN_QUERIES) -> float:
    """Median distance from a location to its ``k``-th nearest other location, in the units of ``x``.

    Beyond ``max_queries`` locations, over every ``ceil(N / max_queries)``-th one, searched among all N.

    Parameters
    ----------
    x : array, shape (N, D)
    k : int
        Neighbour rank, 1 <= k < N.
    backend : str
        Of :func:`knn`.
    max_queries : int
        Most query locations.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``k`` outside 1 to N - 1.
    """
    n = x.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must lie between 1 and N - 1 = {n - 1}, got {k}")
    if n <= max_queries:
        dist, _ = knn(x, k, exclude_self=True, backend=backend)
    else:
        # the k + 1 nearest of a member of x include itself (or a duplicate): the last is its k-th other
        dist, _ = knn(x, k + 1, query=x[:: -(-n // max_queries)], backend=backend)
    return float(np.median(dist[:, -1]))


def _drop_own(dist: np.ndarray, idx: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop each row's own index from its candidates, or its farthest one where it is absent."""
    is_self = idx == own[:, None]
    drop = np.where(is_self.any(1), is_self.argmax(1), idx.shape[1] - 1)
    keep = np.ones_like(idx, dtype=bool)
    keep[np.arange(len(own)), drop] = False
    return dist[keep].reshape(len(own), -1), idx[keep].reshape(len(own), -1)


def _lattice_knn(base: np.ndarray, lattice: Lattice, k: int, exclude_self: bool, query: np.ndarray | None):
    """k nearest lattice points by stencil; rows the stencil cannot settle by KD-tree."""
    if query is None:
        rows, cells = np.arange(base.shape[0]), None
    else:
        cells, on_grid = cells_of(lattice, query)
        rows = np.flatnonzero(on_grid)
        cells = cells[rows]
    found = lattice_neighbours(lattice, k, with_zero=not exclude_self, cells=cells)
    if found is None:
        return None
    m = base.shape[0] if query is None else query.shape[0]
    dist, idx = np.full((m, k), np.inf), np.full((m, k), -1, dtype=np.int64)
    idx[rows], dist[rows] = found[0], found[1]
    rest = rows[found[2]]
    if query is not None:
        rest = np.concatenate([rest, np.flatnonzero(~on_grid)])
    if rest.size:  # corners, thin lattices, off-grid queries: the exact tree search for these
        q = base[rest] if query is None else query[rest]
        ask = min(k + 1 if exclude_self else k, base.shape[0])
        d, i = _knn_kdtree(base, q, ask)
        if exclude_self:
            d, i = _drop_own(d, i, rest)
        idx[rest], dist[rest] = i[:, :k], d[:, :k]
    return dist, idx


def order_points(points: np.ndarray, method: str = "random", *, seed: int = 0) -> np.ndarray:
    """An ordering of the points for the Vecchia (SPA) factorisation.

    Parameters
    ----------
    points : array, shape (N, D)
    method : {"random", "maxmin", "sorted", "none"}
        ``"random"`` (seeded), ``"maxmin"`` (approximate, coarse to fine by grid cells),
        ``"sorted"`` (lexicographic, first column slowest) or ``"none"`` (the given order).
    seed : int
        Seed of the random parts.

    Returns
    -------
    ndarray of int64, shape (N,)
        ``order[r]`` is the index of the point at position ``r``.
    """
    pts = _as_points(points)
    n = pts.shape[0]
    if method not in ORDERINGS:
        raise ValueError(f"unknown ordering {method!r}; choose one of {ORDERINGS}")
    if method == "none":
        return np.arange(n, dtype=np.int64)
    if method == "random":
        return np.random.default_rng(seed).permutation(n).astype(np.int64)
    if method == "sorted":
        return np.lexsort(pts.T[::-1]).astype(np.int64)
    return _coarse_to_fine_order(pts, seed)


def _coarse_to_fine_order(pts: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n, d = pts.shape
    lo = pts.min(0)
    extent = float(np.max(pts.max(0) - lo))
    if extent == 0.0 or n == 1:
        return rng.permutation(n).astype(np.int64)
    unit = (pts - lo) / extent  # in [0, 1]^D
    chosen = np.zeros(n, dtype=bool)
    order: list[np.ndarray] = []
    level = 0
    while not chosen.all():
        cells_per_axis = 2**level
        if cells_per_axis > 2**40 or level > 60:  # duplicates: the rest in random order
            rest = np.flatnonzero(~chosen)
            order.append(rng.permutation(rest))
            break
        cell = np.minimum((unit * cells_per_axis).astype(np.int64), cells_per_axis - 1)
        key = np.ravel_multi_index(cell.T, (cells_per_axis,) * d, mode="wrap") if (
            cells_per_axis ** d < 2**62
        ) else _hash_cells(cell)
        occupied = np.unique(key[chosen])
        cand = np.flatnonzero(~chosen & ~np.isin(key, occupied))
        if cand.size:
            centre = (cell[cand] + 0.5) / cells_per_axis
            dist = np.sum((unit[cand] - centre) ** 2, axis=1)
            # one point per free cell: the nearest to the cell centre (random tie-break)
            tie = rng.random(cand.size)
            srt = np.lexsort((tie, dist, key[cand]))
            first = np.ones(srt.size, dtype=bool)
            first[1:] = key[cand][srt][1:] != key[cand][srt][:-1]
            picks = cand[srt[first]]
            picks = rng.permutation(picks)
            chosen[picks] = True
            order.append(picks)
        level += 1
    return np.concatenate(order).astype(np.int64)


def _hash_cells(cell: np.ndarray) -> np.ndarray:
    # combine integer cell coordinates into one int64 key (collisions only merge cells)
    key = np.zeros(cell.shape[0], dtype=np.uint64)
    for j in range(cell.shape[1]):
        key = key * np.uint64(1_000_003) + cell[:, j].astype(np.uint64)
    return key.view(np.int64)


def _earlier_in_blocks(p_pts: np.ndarray, p0: int, h: int, backend: str, result_pos: np.ndarray) -> None:
    """Fill ``result_pos[p0:]``: geometric blocks [s, e) against a tree of the first e positions."""
    n = p_pts.shape[0]
    s = p0
    while s < n:
        e = min(max(int(1.5 * s), s + 1), n)
        base = p_pts[:e]
        tree = cKDTree(base) if backend == "kdtree" else None
        todo = np.arange(s, e)
        k = min(e, (3 * h) // 2 + 4)
        while todo.size:
            retry: list[np.ndarray] = []
            for start in range(0, todo.size, _QUERY_CHUNK):
                rows = todo[start : start + _QUERY_CHUNK]
                _, idx = _knn_raw(base, p_pts[rows], k, backend, tree)
                earlier = (idx < rows[:, None]) & (idx >= 0)
                n_found = earlier.sum(1)
                ok = n_found >= h
                if k >= e:  # every earlier point was a candidate: exact with < H as well
                    ok[:] = True
                first = np.argsort(~earlier, axis=1, kind="stable")[:, :h]
                picked = np.take_along_axis(idx, first, axis=1)
                picked_ok = np.take_along_axis(earlier, first, axis=1)
                picked = np.where(picked_ok, picked, -1)
                result_pos[rows[ok]] = picked[ok]
                retry.append(rows[~ok])
            todo = np.concatenate(retry)
            k = min(e, 2 * k)
        s = e


def ordered_neighbours(
    points: np.ndarray,
    neighbours: int,
    order: np.ndarray | None = None,
    *,
    backend: str = "auto",
) -> np.ndarray:
    """Each point's nearest neighbours among the points that precede it in ``order``.

    Parameters
    ----------
    points : array, shape (N, D)
    neighbours : int
        H, the size of each conditioning set.
    order : array of int, shape (N,), optional
        ``order[r]`` is the point at position ``r``; default: the given order.
    backend : {"auto", "kdtree", "faiss"}

    Returns
    -------
    ndarray of int64, shape (N, H)
        Row ``i``: the ``min(H, r_i)`` nearest points before point ``i`` (position ``r_i``), then ``-1``.
    """
    pts = _as_points(points)
    n = pts.shape[0]
    h = int(neighbours)
    if h < 0:
        raise ValueError(f"neighbours must be >= 0, got {h}")
    order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError("order must be a permutation of range(N)")
    backend = choose_backend(backend, pts.shape[1])
    result_pos = np.full((n, h), -1, dtype=np.int64)  # in positions
    if h == 0 or n <= 1:
        return result_pos
    if backend == "kdtree" and n > _LATTICE_MIN:
        done = _lattice_ordered(pts, order, h)
        if done is not None:
            return done
    p_pts = pts[order]

    # 1. a dense block for the first positions
    p0 = min(n, max(_BRUTE_FORCE_PREFIX, 4 * h))
    block = p_pts[:p0]
    d2 = np.sum((block[:, None, :] - block[None, :, :]) ** 2, axis=-1)
    d2[np.triu_indices(p0)] = np.inf  # only strictly earlier positions
    cand = np.argsort(d2, axis=1, kind="stable")[:, :h]
    count = np.minimum(np.arange(p0), h)
    valid = np.arange(h)[None, :] < count[:, None]
    result_pos[:p0] = np.where(valid, cand, -1)

    _earlier_in_blocks(p_pts, p0, h, backend, result_pos)

    # back to point indices
    out = np.full((n, h), -1, dtype=np.int64)
    valid = result_pos >= 0
    out[order] = np.where(valid, order[np.where(valid, result_pos, 0)], -1)
    return out


def _lattice_ordered(pts: np.ndarray, order: np.ndarray, h: int) -> np.ndarray | None:
    """Earlier neighbours by stencil when the points are a lattice in lexicographic order."""
    lattice = find_lattice(pts)
    if lattice is None or not np.all(np.diff(lattice.rank[order]) > 0):
        return None
    found = lattice_neighbours(lattice, h, earlier=True)
    if found is None:
        return None
    idx, _, short = found
    if short.size:
        idx[short] = _earlier_by_tree(pts, lattice.rank, short, h)
    return idx


def _earlier_by_tree(pts: np.ndarray, rank: np.ndarray, rows: np.ndarray, h: int) -> np.ndarray:
    """Exact H nearest points of smaller rank for a few rows, by a KD-tree of all points."""
    n = pts.shape[0]
    tree = cKDTree(pts)
    before = np.searchsorted(np.sort(rank), rank[rows])  # number of points earlier than each row
    out = np.full((len(rows), h), -1, dtype=np.int64)
    todo, k = np.arange(len(rows)), min(n, 4 * h)
    while todo.size:
        _, idx = _knn_kdtree(pts, pts[rows[todo]], k, tree)
        earlier = (idx >= 0) & (rank[np.maximum(idx, 0)] < rank[rows[todo], None])
        n_found = earlier.sum(1)
        ok = (n_found >= h) | (n_found >= before[todo]) | (k >= n)
        first = np.argsort(~earlier, axis=1, kind="stable")[:, :h]
        picked = np.where(np.take_along_axis(earlier, first, 1), np.take_along_axis(idx, first, 1), -1)
        out[todo[ok], : picked.shape[1]] = picked[ok]
        todo, k = todo[~ok], min(n, 2 * k)
    return out


def shared_stencils(
    points: np.ndarray, nbr: np.ndarray, *, max_fraction: float = 0.25
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Group locations whose neighbour sets have the same relative offsets (a *stencil*).

    Parameters
    ----------
    points : array, shape (N, D)
    nbr : array of int, shape (N, H)
        Neighbour indices (-1 padded).
    max_fraction : float
        Give up (return None) beyond ``max_fraction * N`` stencils.

    Returns
    -------
    None or tuple
        ``(stencil (N,), offsets (S, H, D), valid (S, H), nbr_canonical (N, H))``: slot ``h`` of
        ``nbr_canonical[i]`` is offset ``h`` of its stencil; offsets within 1e-9 of the extent count as equal.
    """
    pts = _as_points(points)
    n, h = nbr.shape
    if n == 0 or h == 0:
        return None
    lattice = find_lattice(pts) if n > _LATTICE_MIN else None
    if n > 4000:  # a sample decides quickly whether geometries repeat at all
        sample = np.random.default_rng(0).choice(n, 2000, replace=False)
        _, q_s, v_s = _canonical(*_quantised_offsets(pts, nbr[sample], pts[sample]))
        if len(np.unique(_row_hash(_signature(q_s, v_s)))) > 0.5 * len(sample):
            return None
    if lattice is not None:  # exact integer offsets, chunked, in the given slot order
        sig, nbr_c, valid = offset_keys(lattice, nbr), nbr, nbr >= 0
    else:
        q, valid = _quantised_offsets(pts, nbr, pts)
        order, q, valid = _canonical(q, valid)
        nbr_c = np.take_along_axis(nbr, order, axis=1)
        sig = _signature(q, valid)
    first, stencil = _group_rows(sig)
    if len(first) > max_fraction * n:
        return None
    vf = valid[first]
    offsets = np.where(vf[..., None], pts[np.where(vf, nbr_c[first], 0)] - pts[first][:, None, :], 0.0)
    return stencil.astype(np.int64), offsets, vf, nbr_c


def distinct_offsets(
    points: np.ndarray, nbr: np.ndarray, centres: np.ndarray, *, max_distinct: int = 1024
) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct offsets from each centre to its neighbours and to itself (a lattice has few).

    Parameters
    ----------
    points : array, shape (N, D)
        The locations ``nbr`` indexes.
    nbr : array of int, shape (M, H)
        Neighbours of each centre (-1 padded).
    centres : array, shape (M, D)
    max_distinct : int
        Give up (return None) beyond this many distinct offsets.

    Returns
    -------
    None or tuple
        ``(offsets (U, D), ids (M, H + 1))``: the last slot is the centre (offset 0, as padded
        slots are); offsets within 1e-9 of the extent count as equal.
    """
    pts = _as_points(points)
    m, h = nbr.shape
    q, _ = _quantised_offsets(pts, nbr, centres)
    flat = np.concatenate([q, np.zeros((m, 1, q.shape[2]), dtype=q.dtype)], axis=1).reshape(m * (h + 1), -1)
    _, first, ids = np.unique(_row_hash(flat), return_index=True, return_inverse=True)
    if len(first) > max_distinct or not np.array_equal(flat, flat[first][ids.ravel()]):
        return None  # too many to tabulate, or a hash collision: let the caller compute directly
    row, slot = np.divmod(first, h + 1)
    j = np.where(slot < h, nbr[row, np.minimum(slot, h - 1)], -1)
    offsets = np.where((j >= 0)[:, None], pts[np.maximum(j, 0)] - centres[row], 0.0)
    return offsets, ids.reshape(m, h + 1).astype(np.int64)


def _group_rows(sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first row of every distinct integer row of ``sig`` and every row's group, exactly."""
    _, first, group = np.unique(_row_hash(sig), return_index=True, return_inverse=True)
    group = group.ravel()
    if not np.array_equal(sig, sig[first][group]):  # a hash collision: group exactly instead
        rows = np.ascontiguousarray(sig).view(np.dtype((np.void, 8 * sig.shape[1]))).ravel()
        _, first, group = np.unique(rows, return_index=True, return_inverse=True)
        group = group.ravel()
    return first, group


def _quantised_offsets(pts: np.ndarray, nbr: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Neighbour offsets from each centre as integers (units of 1e-9 of the extent), and validity."""
    valid = nbr >= 0
    off = np.where(valid[..., None], pts[np.where(valid, nbr, 0)] - centres[:, None, :], 0.0)
    extent = float(np.ptp(pts, axis=0).max()) or 1.0
    return np.round(off / (1e-9 * extent)).astype(np.int64), valid


def _canonical(q: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort each row's slots, valid first then by offset: slot order (N, H), offsets, validity."""
    n, h, d = q.shape
    # one integer key per slot: its offsets' ranks along each axis, packed
    key = np.zeros((n, h), dtype=np.int64)
    capacity = 1
    for j in range(d):
        values, rank = np.unique(q[..., j], return_inverse=True)
        capacity *= len(values)
        if capacity >= 2**62:
            break
        key = key * len(values) + rank.reshape(n, h)
    if capacity < 2**62:
        key = np.where(valid, key, np.iinfo(np.int64).max)
        order = np.argsort(key, axis=1, kind="stable")
    else:  # too many distinct offsets to pack: sort lexicographically
        rows = np.repeat(np.arange(n), h)
        keys = [q[..., j].ravel() for j in range(d - 1, -1, -1)]
        order = np.lexsort((*keys, (~valid).ravel(), rows)).reshape(n, h) - (np.arange(n) * h)[:, None]
    return order, np.take_along_axis(q, order[..., None], axis=1), np.take_along_axis(valid, order, axis=1)


def _signature(q: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """One integer row per location describing its (canonically ordered) neighbour geometry."""
    return np.concatenate([q.reshape(len(q), -1), valid.astype(np.int64)], axis=1)


def _row_hash(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every integer row (collisions are checked by the caller)."""
    weights = np.random.default_rng(12345).integers(1, 2**62, size=rows.shape[1], dtype=np.int64) | 1
    with np.errstate(over="ignore"):
        return (rows.astype(np.uint64) * weights.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
