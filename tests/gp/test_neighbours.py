"""Neighbour search: both backends and the ordered (earlier-point) sets against brute force."""

import numpy as np
import pytest

from geogpvae.datasets.synthetic import grid_points
from geogpvae.gp.neighbours import (
    choose_backend,
    faiss_available,
    knn,
    median_neighbour_distance,
    order_points,
    ordered_neighbours,
)

BACKENDS = ["kdtree"] + (["faiss"] if faiss_available() else [])


def _brute_knn(points, query, k, exclude_self=False):
    d = np.linalg.norm(query[:, None, :] - points[None, :, :], axis=-1)
    if exclude_self:
        np.fill_diagonal(d, np.inf)
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d, idx, 1), idx


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dims", [1, 2, 3, 4])
def test_knn_matches_brute_force(backend, dims):
    rng = np.random.default_rng(dims)
    pts = rng.random((400, dims))
    qry = rng.random((50, dims))
    d, i = knn(pts, 9, query=qry, backend=backend)
    d_ref, i_ref = _brute_knn(pts, qry, 9)
    np.testing.assert_array_equal(np.sort(i, 1), np.sort(i_ref, 1))
    np.testing.assert_allclose(d, d_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_knn_exclude_self_and_padding(backend):
    rng = np.random.default_rng(0)
    pts = rng.random((30, 2))
    _, i = knn(pts, 5, exclude_self=True, backend=backend)
    _, i_ref = _brute_knn(pts, pts, 5, exclude_self=True)
    np.testing.assert_array_equal(np.sort(i, 1), np.sort(i_ref, 1))
    assert not (i == np.arange(30)[:, None]).any()
    # more neighbours than points: padded with -1 / inf
    d, i = knn(pts[:4], 6, exclude_self=True, backend=backend)
    assert (i[:, 3:] == -1).all() and np.isinf(d[:, 3:]).all()
    assert ((i[:, :3] >= 0) & (i[:, :3] != np.arange(4)[:, None])).all()


def test_knn_exclude_self_keeps_duplicate_location():
    pts = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    _, i = knn(pts, 1, exclude_self=True)
    assert i[0, 0] == 1 and i[1, 0] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["random", "maxmin", "sorted", "none"])
def test_ordered_neighbours_match_brute_force(backend, method):
    rng = np.random.default_rng(1)
    pts = rng.random((1300, 3))  # larger than the dense prefix, so the tree path runs
    h = 8
    order = order_points(pts, method, seed=4)
    nbr = ordered_neighbours(pts, h, order, backend=backend)
    pos = np.empty(len(pts), dtype=int)
    pos[order] = np.arange(len(pts))
    for i in range(len(pts)):
        earlier = np.flatnonzero(pos < pos[i])
        d = np.linalg.norm(pts[earlier] - pts[i], axis=1)
        want = earlier[np.argsort(d, kind="stable")[:h]]
        got = nbr[i][nbr[i] >= 0]
        assert len(got) == min(h, pos[i])
        assert set(got) == set(want)
        assert (nbr[i][len(got):] == -1).all()
        # nearest first
        dg = np.linalg.norm(pts[got] - pts[i], axis=1)
        assert (np.diff(dg) >= -1e-6).all()


def test_ordered_neighbours_first_points_and_h0():
    pts = np.random.default_rng(2).random((20, 2))
    nbr = ordered_neighbours(pts, 5)
    assert (nbr[0] == -1).all()
    assert set(nbr[1][nbr[1] >= 0]) == {0}
    assert set(nbr[4][nbr[4] >= 0]) == {0, 1, 2, 3}
    assert ordered_neighbours(pts, 0).shape == (20, 0)


def test_orderings_are_permutations_and_seeded():
    pts = np.random.default_rng(3).random((500, 2))
    for method in ("random", "maxmin", "sorted", "none"):
        o = order_points(pts, method, seed=1)
        assert np.array_equal(np.sort(o), np.arange(500))
        np.testing.assert_array_equal(o, order_points(pts, method, seed=1))
    assert not np.array_equal(order_points(pts, "random", seed=1), order_points(pts, "random", seed=2))
    srt = order_points(pts, "sorted")
    assert (np.diff(pts[srt, 0]) >= 0).all()


def test_maxmin_spreads_early_points():
    """The first m points of the max-min ordering cover the domain far better than random ones."""
    g = np.stack(np.meshgrid(np.arange(64.0), np.arange(64.0), indexing="ij"), -1).reshape(-1, 2)
    m = 64

    def fill_distance(first):
        d, _ = knn(g[first], 1, query=g)
        return d.max()

    mm = order_points(g, "maxmin", seed=0)
    rnd = order_points(g, "random", seed=0)
    assert fill_distance(mm[:m]) < 0.6 * fill_distance(rnd[:m])
    # separation of the first points is about the grid's cell size at that level (~8)
    d, _ = knn(g[mm[:m]], 1, exclude_self=True)
    assert d.min() >= 4.0


def test_bad_input():
    with pytest.raises(ValueError, match="NaN or infinite"):
        knn(np.array([[0.0, np.nan]]), 1)
    with pytest.raises(ValueError, match="permutation"):
        ordered_neighbours(np.random.random((5, 2)), 2, np.array([0, 0, 1, 2, 3]))
    with pytest.raises(ValueError, match="unknown ordering"):
        order_points(np.random.random((5, 2)), "hilbert")
    with pytest.raises(ValueError, match="unknown neighbour backend"):
        choose_backend("annoy", 2)
    assert choose_backend("auto", 3) in ("kdtree", "faiss")


def test_distinct_offsets_describe_every_slot_and_give_up_on_scattered_points():
    from geogpvae.gp.neighbours import distinct_offsets

    g = np.stack(np.meshgrid(np.arange(20.0), np.arange(9.0) * 2.5, indexing="ij"), -1).reshape(-1, 2)
    nbr = knn(g, 8, query=g)[1]
    nbr[::7, -1] = -1  # padded slots
    offsets, ids = distinct_offsets(g, nbr, g)
    assert ids.shape == (len(g), 9) and len(offsets) < 60
    valid = nbr >= 0
    want = np.where(valid[..., None], g[np.maximum(nbr, 0)] - g[:, None], 0.0)
    np.testing.assert_allclose(offsets[ids[:, :8]], want, atol=1e-12)
    np.testing.assert_array_equal(offsets[ids[:, 8]], 0.0)  # the centre itself
    scattered = np.random.default_rng(0).random((300, 2))
    assert distinct_offsets(scattered, knn(scattered, 8, query=scattered)[1], scattered, max_distinct=200) is None


def test_median_neighbour_distance_is_the_brute_force_median_and_its_subsample_stays_close():
    rng = np.random.default_rng(3)
    x = rng.random((900, 2))
    x[1] = x[0]  # a duplicate location: the other copy is a neighbour at distance 0
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(sq, np.inf)
    exact = float(np.median(np.sqrt(np.sort(sq, axis=1)[:, 4])))  # 5th nearest other location
    assert median_neighbour_distance(x, 5) == exact
    # with a subsample of the queries (every 3rd location, searched among all 900)
    every_third = float(np.median(np.sqrt(np.sort(sq, axis=1)[::3, 4])))
    assert median_neighbour_distance(x, 5, max_queries=300) == pytest.approx(every_third, rel=1e-12)
    assert median_neighbour_distance(x, 5, max_queries=300) == pytest.approx(exact, rel=0.05)
    # on a lattice the subsample finds the same median
    grid = grid_points((30, 40, 12))
    assert median_neighbour_distance(grid, 20, max_queries=2000) == median_neighbour_distance(grid, 20)


def test_median_neighbour_distance_refuses_a_rank_out_of_range():
    x = np.random.default_rng(0).random((10, 2))
    for k in (0, 10):
        with pytest.raises(ValueError, match="between 1 and N - 1 = 9"):
            median_neighbour_distance(x, k)


def test_faiss_gpu_is_the_ranks_own(monkeypatch):
    """Under torchrun each rank's faiss index goes on its local GPU, not all on GPU 0."""
    from geogpvae.gp.neighbours import gpu_id

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("SLURM_LOCALID", raising=False)
    assert gpu_id(4) == 0
    monkeypatch.setenv("SLURM_LOCALID", "2")
    assert gpu_id(4) == 2
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert gpu_id(4) == 3
    assert gpu_id(2) == 1  # more ranks than visible GPUs: shared round robin
