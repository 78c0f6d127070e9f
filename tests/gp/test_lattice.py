"""Stencil neighbours on regular lattices: exact against brute force, including every edge case
that sends rows back to the KD-tree (corners, thin lattices, off-grid queries, float32 coordinates)."""

import numpy as np
import pytest

from geogpvae.gp import lattice as lat
from geogpvae.gp import neighbours as nb


def _grid(shape, step, drop=0.0, seed=0, shift=1000.0):
    axes = [np.arange(n) * s for n, s in zip(shape, step)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(shape)) + shift
    if drop:
        pts = pts[np.random.default_rng(seed).random(len(pts)) >= drop]
    return pts


LATTICES = [
    ((7, 9, 11), (1.64, 0.33, 0.16), 0.0),  # anisotropic cell steps, as SPE10 in engine units
    ((7, 9, 11), (1.0, 1.0, 1.0), 0.3),  # isotropic with ties everywhere, 30 % of cells absent
    ((40, 30), (1.0, 2.0), 0.1),
    ((5, 1, 300), (1.0, 1.0, 1.0), 0.0),  # a singleton axis and a long thin one
]


@pytest.fixture(autouse=True)
def _stencils_on_small_fields(monkeypatch):
    monkeypatch.setattr(nb, "_LATTICE_MIN", 0)


def _sorted_distances(pts, rows, idx):
    valid = idx >= 0
    d = np.where(valid, np.linalg.norm(pts[np.where(valid, idx, 0)] - pts[rows][:, None], axis=-1), np.inf)
    return d


@pytest.mark.parametrize("shape, step, drop", LATTICES)
@pytest.mark.parametrize("h", [1, 8, 20])
def test_ordered_neighbours_on_a_lattice_are_the_nearest_earlier_points(shape, step, drop, h):
    pts = _grid(shape, step, drop)
    assert lat.find_lattice(pts) is not None
    order = nb.order_points(pts, "sorted")
    nbr = nb.ordered_neighbours(pts, h, order)
    pos = np.empty(len(pts), dtype=int)
    pos[order] = np.arange(len(pts))
    got = _sorted_distances(pts, np.arange(len(pts)), nbr)
    for i in range(len(pts)):
        v = nbr[i][nbr[i] >= 0]
        assert (pos[v] < pos[i]).all()  # never itself, never a later point
        assert len(set(v)) == len(v)
        earlier = np.flatnonzero(pos < pos[i])
        want = np.sort(np.linalg.norm(pts[earlier] - pts[i], axis=1))[:h]
        assert len(v) == len(want)
        np.testing.assert_allclose(got[i, : len(v)], want, rtol=1e-12)


@pytest.mark.parametrize("shape, step, drop", LATTICES)
@pytest.mark.parametrize("exclude_self", [True, False])
def test_knn_of_lattice_points_matches_the_tree(shape, step, drop, exclude_self, monkeypatch):
    pts = _grid(shape, step, drop)
    d, i = nb.knn(pts, 12, exclude_self=exclude_self)
    monkeypatch.setattr(nb, "_LATTICE_MIN", 10**12)
    d_ref, _ = nb.knn(pts, 12, exclude_self=exclude_self)
    np.testing.assert_allclose(d, d_ref, rtol=1e-12)
    np.testing.assert_allclose(_sorted_distances(pts, np.arange(len(pts)), i), d, rtol=1e-12)
    own = i == np.arange(len(pts))[:, None]
    assert not own.any() if exclude_self else own[:, 0].all()


@pytest.mark.parametrize("shape, step", [((20, 30, 25), (1.6, 0.3, 0.16)), ((60, 80), (1.0, 1.0))])
def test_knn_queries_against_part_of_a_lattice(shape, step, monkeypatch):
    """Anchors (a masked lattice) queried at every cell and at points between cells."""
    grid = _grid(shape, step, shift=-3.0)
    base = grid[np.random.default_rng(1).random(len(grid)) < 0.7]
    query = np.concatenate([grid, grid[:50] + 0.37 * np.asarray(step), grid[:5] - 10 * np.asarray(step)])
    d, i = nb.knn(base, 21, query=query)
    monkeypatch.setattr(nb, "_LATTICE_MIN", 10**12)
    d_ref, _ = nb.knn(base, 21, query=query)
    np.testing.assert_allclose(d, d_ref, rtol=1e-12)
    got = np.linalg.norm(base[i] - query[:, None], axis=-1)
    np.testing.assert_allclose(got, d, rtol=1e-12)


def test_float32_rounded_coordinates_still_form_a_lattice():
    """Anchors reach the neighbour search through float32 tensors; their grid must be found."""
    pts = _grid((40, 50, 30), (1.64042, 0.328084, 0.164042), shift=-30.0)
    rounded = pts.astype(np.float32).astype(np.float64)
    found = lat.find_lattice(rounded)
    assert found is not None and found.shape == (40, 50, 30)
    cells, on_grid = lat.cells_of(found, rounded[::7])
    assert on_grid.all()
    np.testing.assert_array_equal(cells, found.cell[::7])


def test_scattered_duplicated_or_unequal_points_are_not_a_lattice():
    rng = np.random.default_rng(0)
    assert lat.find_lattice(rng.random((500, 2))) is None
    grid = _grid((10, 10), (1.0, 1.0))
    assert lat.find_lattice(np.concatenate([grid, grid[:1]])) is None  # a duplicate point
    uneven = grid.copy()
    uneven[uneven[:, 0] == uneven[:, 0].max(), 0] += 0.5  # last column further out
    assert lat.find_lattice(uneven) is None
    assert lat.find_lattice(grid[::3]) is None  # two thirds of the cells missing


def test_lattice_stencils_group_identical_geometries_exactly():
    pts = _grid((30, 40, 20), (1.6, 0.3, 0.16), drop=0.05)
    order = nb.order_points(pts, "sorted")
    nbr = nb.ordered_neighbours(pts, 20, order)
    stencil, offsets, valid, nbr_c = nb.shared_stencils(pts, nbr)
    assert len(offsets) < 0.25 * len(pts)
    v = nbr_c >= 0
    real = np.where(v[..., None], pts[np.where(v, nbr_c, 0)] - pts[:, None], 0.0)
    np.testing.assert_allclose(real, offsets[stencil], atol=1e-9)
    np.testing.assert_array_equal(v, valid[stencil])
    np.testing.assert_array_equal(np.sort(np.where(v, nbr_c, -1), 1), np.sort(nbr, 1))
