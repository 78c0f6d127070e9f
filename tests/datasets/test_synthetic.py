"""Synthetic GP fields: grid order, reproducibility and the random-feature covariance."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.datasets.synthetic import grid_points, make_field, sample_gp_rff
from geogpvae.gp.kernels import kernel_from_sqdist


def test_grid_points_are_c_ordered():
    pts = grid_points((2, 3), spacing=(10.0, 1.0))
    assert pts.shape == (6, 2)
    np.testing.assert_array_equal(pts[:4], [[0, 0], [0, 1], [0, 2], [10, 0]])


@pytest.mark.parametrize("kernel", ["rbf", "matern12", "matern32", "matern52"])
def test_random_features_approach_the_kernel(kernel):
    """Empirical covariance of many draws against the exact kernel (unit lengthscale)."""
    import torch

    pts = np.array([[0.0, 0.0], [0.3, 0.0], [0.0, 1.0], [1.5, 1.5]])
    draws = sample_gp_rff(pts, 1.0, kernel=kernel, n_samples=3000, n_features=512, rng=0)
    empirical = draws @ draws.T / draws.shape[1]
    sq = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    exact = kernel_from_sqdist(torch.as_tensor(sq), kernel).numpy()
    np.testing.assert_allclose(empirical, exact, atol=0.08)


def test_a_draw_is_its_random_fourier_sum_in_the_documented_random_stream():
    """The sum, over chunks, equals the closed form with the generator's draws in their order
    (omega, phase, weights per sample), so a seed gives the same field as in earlier benchmarks."""
    pts = np.random.default_rng(1).uniform(0, 5, size=(20_000, 3))  # more than one chunk
    got = sample_gp_rff(pts, [1.0, 2.0, 0.5], n_samples=2, n_features=64, rng=7)
    rng = np.random.default_rng(7)
    for s in range(2):
        omega = rng.standard_normal((3, 64)) / np.array([1.0, 2.0, 0.5])[:, None]
        phase, weights = rng.uniform(0.0, 2.0 * np.pi, size=64), rng.standard_normal(64)
        exact = np.sqrt(2.0 / 64) * np.cos(pts @ omega + phase) @ weights
        np.testing.assert_allclose(got[:, s], exact, rtol=0, atol=1e-12)


def test_fields_are_reproducible_and_holes_as_asked():
    pts = grid_points((30, 30))
    a = make_field(pts, n_vars=3, missing=0.4, rng=5)
    b = make_field(pts, n_vars=3, missing=0.4, rng=5)
    np.testing.assert_array_equal(a.truth, b.truth)
    np.testing.assert_array_equal(a.observed, b.observed)
    assert a.truth.shape == (900, 3) and a.observed.dtype == bool
    assert abs((~a.observed).mean() - 0.4) < 0.04
    assert np.isnan(a.values[~a.observed]).all()
    np.testing.assert_array_equal(a.values[a.observed], a.truth[a.observed])
    c = make_field(pts, n_vars=3, missing=0.4, rng=6)
    assert not np.array_equal(a.truth, c.truth)


def test_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="unknown kernel"):
        sample_gp_rff(np.zeros((2, 1)), 1.0, kernel="cauchy")
