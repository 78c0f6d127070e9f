"""Check values shaped like the values to impute: which variables, and how far from the data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from geogpvae.engine.holdout import _gaps, clustered_gaps, held_out, matched_entries, task_weights
from geogpvae.engine.check_values import check_entries


def test_task_weights_are_each_variables_share_of_the_missing_values():
    observed = np.ones((10, 3), dtype=bool)
    np.testing.assert_allclose(task_weights(observed), [1 / 3] * 3)  # nothing missing: equal
    observed[:3, 0] = False
    observed[:1, 2] = False
    np.testing.assert_allclose(task_weights(observed), [0.75, 0.0, 0.25])


def test_gaps_are_balls_of_the_given_radii_until_enough_points_are_covered():
    rng = np.random.default_rng(0)
    pts = np.stack(np.meshgrid(np.arange(30.0), np.arange(30.0)), -1).reshape(-1, 2)
    one = _gaps(pts, np.full(900, 1.0), 50, rng)  # radius of one grid step: single points
    assert one.size == 50
    patch = _gaps(pts, np.full(900, 3.0), 50, rng)  # closer than 3: up to 29 points around a centre
    assert 50 <= patch.size < 50 + 29
    # every held point has a held grid neighbour: they come in patches, not one by one
    tree = cKDTree(pts[patch])
    assert (tree.query(pts[patch], k=2)[0][:, 1] <= 1.0).all()


def _survey(seed=0):
    """Clusters of close sites (observed) and a coarse grid of sites between them (missing)."""
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(np.arange(12.0), np.arange(12.0)), -1).reshape(-1, 2)
    gaps = grid[(grid.sum(1) % 2) == 1]  # every other grid node is missing
    coarse = grid[(grid.sum(1) % 2) == 0]
    clusters = coarse[rng.choice(len(coarse), 30, replace=False)][:, None] + rng.normal(0, 0.05, (30, 6, 2))
    x = np.concatenate([coarse, clusters.reshape(-1, 2), gaps])
    observed = np.ones((len(x), 2), dtype=bool)
    observed[-len(gaps):, 0] = False  # variable 0 missing at the gaps; variable 1 observed everywhere
    return x, observed


def test_check_values_sit_as_far_from_the_data_as_the_missing_values():
    x, observed = _survey()
    held = matched_entries(x, observed, 0.15, seed=3)
    assert not (held & ~observed).any()
    assert not held[:, 1].any()  # never imputed: keeps all its values
    rows = np.flatnonzero(observed[:, 0])
    assert round(0.15 * rows.size) <= held[:, 0].sum() < round(0.15 * rows.size) + 10
    gaps = np.flatnonzero(~observed[:, 0])
    d_gap = cKDTree(x[rows]).query(x[gaps])[0]
    left = rows[~held[rows, 0]]
    d_check = cKDTree(x[left]).query(x[held[:, 0]])[0]
    d_random = cKDTree(x[rows]).query(x[rows], k=2)[0][:, 1]
    # the missing values are a grid step from the data; random sites mostly sit in a cluster
    assert np.median(d_gap) == pytest.approx(1.0, rel=0.1) and np.median(d_random) < 0.2
    # ... and so do the check values: hardly any is taken from inside a cluster
    assert np.mean(d_check < 0.3) < 0.1 and np.mean(d_random < 0.3) > 0.5
    assert 0.9 * np.median(d_gap) <= np.median(d_check) <= 1.6 * np.median(d_gap)
    assert np.array_equal(held, matched_entries(x, observed, 0.15, seed=3))
    assert not np.array_equal(held, matched_entries(x, observed, 0.15, seed=4))


def test_without_missing_values_every_variable_gives_a_random_share():
    x, observed = _survey()
    observed[:] = True
    held = matched_entries(x, observed, 0.1, seed=0)
    assert held[:, 0].sum() == held[:, 1].sum() == round(0.1 * len(x))
    assert not matched_entries(x, observed, 0.0, seed=0).any()
    assert matched_entries(x, observed, 0.4, seed=0, max_values=30).sum() <= 30


def test_under_an_outage_check_values_are_held_out_in_patches():
    pts = np.stack(np.meshgrid(np.arange(40.0), np.arange(40.0)), -1).reshape(-1, 2)
    observed = np.ones((len(pts), 1), dtype=bool)
    for r, c in [(2, 2), (20, 5), (8, 28), (30, 30)]:  # four 8 x 8 outages
        observed[(pts[:, 0] >= c) & (pts[:, 0] < c + 8) & (pts[:, 1] >= r) & (pts[:, 1] < r + 8), 0] = False
    held = matched_entries(pts, observed, 0.1, seed=0)[:, 0]
    left = observed[:, 0] & ~held
    depth = cKDTree(pts[left]).query(pts[held])[0]
    gap_depth = cKDTree(pts[observed[:, 0]]).query(pts[~observed[:, 0]])[0]
    assert gap_depth.max() == 4.0 and depth.max() >= 2.0  # some check values deep inside a patch
    assert np.mean(depth > 1.0) > 0.2  # a random share would sit a cell from the data, all of it


def test_held_out_gives_the_shaped_or_the_random_choice_with_its_weights():
    x, observed = _survey()
    check, weights = held_out(x, observed, 0.15, seed=3)
    assert np.array_equal(check, matched_entries(x, observed, 0.15, seed=3))
    np.testing.assert_allclose(weights, [1.0, 0.0])
    check, weights = held_out(x, observed, 0.15, seed=3, shaped=False)
    assert np.array_equal(check, check_entries(observed, 0.15, seed=3)) and weights is None
    assert held_out(x, observed, 0.0, seed=3) == (None, None)


def _outage_grid():
    pts = np.stack(np.meshgrid(np.arange(40.0), np.arange(40.0)), -1).reshape(-1, 2)
    rng = np.random.default_rng(0)
    observed = rng.random((len(pts), 2)) >= 0.3  # both variables: 30 % dropped at random
    for r, c in [(2, 2), (20, 5), (8, 28), (30, 30)]:  # variable 0 also has four 8 x 8 outages
        observed[(pts[:, 0] >= c) & (pts[:, 0] < c + 8) & (pts[:, 1] >= r) & (pts[:, 1] < r + 8), 0] = False
    return pts, observed


def test_clustered_gaps_tells_outages_from_values_missing_at_random():
    pts, observed = _outage_grid()
    np.testing.assert_array_equal(clustered_gaps(pts, observed, seed=0), [True, False])
    # 85 % missing at random: a quarter of the missing values are deep by chance, no more
    dense = np.random.default_rng(1).random((len(pts), 1)) >= 0.85
    assert not clustered_gaps(pts, dense, seed=0)[0]
    x, survey = _survey()  # unsampled sites between sampled ones: scattered, not clustered
    np.testing.assert_array_equal(clustered_gaps(x, survey, seed=0), [False, False])


def test_held_out_shapes_only_clustered_variables():
    pts, observed = _outage_grid()
    shaped = clustered_gaps(pts, observed, seed=0)
    check, weights = held_out(pts, observed, 0.1, seed=1, shaped=shaped)
    assert check[:, 0].any() and check[:, 1].any() and not (check & ~observed).any()
    np.testing.assert_allclose(weights, task_weights(observed))
    # without any clustered variable: exactly the random share, every variable weighted the same
    check, weights = held_out(pts, observed, 0.1, seed=1, shaped=np.zeros(2, dtype=bool))
    assert np.array_equal(check, check_entries(observed, 0.1, seed=1)) and weights is None


def test_a_variable_not_shaped_gets_a_random_share_even_where_its_gaps_are_far():
    x, observed = _survey()
    held = matched_entries(x, observed, 0.15, seed=3, shaped=np.zeros(2, dtype=bool))[:, 0]
    rows = np.flatnonzero(observed[:, 0])
    assert held.sum() == round(0.15 * rows.size)
    d_check = cKDTree(x[observed[:, 0] & ~held]).query(x[held])[0]
    assert np.mean(d_check < 0.3) > 0.4  # random sites mostly sit in a cluster
