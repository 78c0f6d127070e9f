"""Joint latent draws against dense Gaussian computations."""

import numpy as np
import pytest
import torch

from geogpvae.engine.simulation import (
    anchor_weights,
    conditioned_draws,
    dependency_levels,
    prior_draws,
    realisation_noise,
    vecchia_factor,
)
from geogpvae.gp.kernels import LatentKernel

JITTER = 1e-4


@pytest.fixture(scope="module")
def setting():
    torch.manual_seed(0)
    kernel = LatentKernel("matern32", 2, 2, lengthscale=[[0.4, 0.4], [0.2, 0.3]], outputscale=[1.0, 0.5]).double()
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.uniform(0, 1, size=(25, 2)))
    return kernel, x


def dense_cov(kernel, x):
    with torch.no_grad():
        k = kernel(x).double()  # (L, N, N)
    return k + JITTER * kernel.outputscale.detach()[:, None, None] * torch.eye(len(x), dtype=k.dtype)


def test_every_point_is_drawn_after_its_neighbours():
    nbr = np.array([[-1, -1], [0, -1], [1, 0], [0, -1], [2, 3]])
    np.testing.assert_array_equal(dependency_levels(nbr), [0, 1, 2, 1, 3])


def test_noise_of_a_realisation_does_not_depend_on_how_realisations_are_grouped():
    all_at_once = realisation_noise((4, 2), seed=3, first=0, n=5)
    later = realisation_noise((4, 2), seed=3, first=2, n=3)
    torch.testing.assert_close(all_at_once[..., 2:], later)
    assert not torch.equal(all_at_once[..., 0], all_at_once[..., 1])


def test_prior_draws_with_every_earlier_point_have_the_kernel_covariance(setting):
    kernel, x = setting
    n, r = len(x), 20000
    eps = realisation_noise((n, 2), seed=1, first=0, n=r)
    draws = prior_draws(vecchia_factor(kernel, x, neighbours=n - 1, jitter=JITTER, seed=0, backend="kdtree"), eps)
    cov = dense_cov(kernel, x)
    for l in range(2):
        emp = torch.cov(draws[:, l, :])
        # Monte Carlo error of a covariance from r draws: about sqrt(2 / r) of the variances
        assert torch.max(torch.abs(emp - cov[l])) < 5 * np.sqrt(2 / r) * float(cov[l].diagonal().max())


def test_conditioned_draws_have_the_dense_gp_posterior_mean_and_covariance(setting):
    """Pseudo-observations at 15 anchors with noise; all anchors as neighbours: Matheron's rule
    gives the exact posterior N(K_ta (K_aa + E)^-1 u, K_tt - K_ta (K_aa + E)^-1 K_at)."""
    kernel, x = setting
    n, r = len(x), 20000
    anchors = torch.arange(15)
    rng = np.random.default_rng(2)
    pseudo = torch.as_tensor(rng.normal(size=(15, 2)))
    noise = torch.as_tensor(rng.uniform(0.05, 0.3, size=(15, 2)))
    idx, weights, cond = anchor_weights(kernel, x, x[anchors], noise, neighbours=15, jitter=JITTER, backend="kdtree")
    eps = realisation_noise((n, 2), seed=4, first=0, n=r)
    prior = prior_draws(vecchia_factor(kernel, x, neighbours=n - 1, jitter=JITTER, seed=0, backend="kdtree"), eps)
    eta = realisation_noise((15, 2), seed=4, first=0, n=r, stream=1)
    own_mean = torch.einsum("mlh,mhl->ml", weights, pseudo[torch.as_tensor(idx)])
    draws = conditioned_draws(prior, prior[anchors], pseudo, noise, eta, idx, weights, cond, own_mean, cond)
    cov = dense_cov(kernel, x)
    for l in range(2):
        kaa = cov[l][:15, :15] + torch.diag(noise[:, l])
        kxa = cov[l][:, :15]
        mean = kxa @ torch.linalg.solve(kaa, pseudo[:, l])
        post = cov[l] - kxa @ torch.linalg.solve(kaa, kxa.T)
        scale = float(post.diagonal().max())
        assert torch.max(torch.abs(draws[:, l, :].mean(-1) - mean)) < 5 * np.sqrt(scale / r)
        assert torch.max(torch.abs(torch.cov(draws[:, l, :]) - post)) < 5 * np.sqrt(2 / r) * scale
        # the kriging weights' own variance is the exact posterior variance (an anchor itself: plus its nugget)
        torch.testing.assert_close(cond[:, l], post.diagonal(), rtol=1e-6, atol=2 * JITTER)


def test_draws_moved_onto_another_posterior_take_its_mean_and_variance(setting):
    kernel, x = setting
    n, r = len(x), 20000
    anchors = torch.arange(10)
    pseudo, noise = torch.zeros(10, 2, dtype=torch.float64), torch.full((10, 2), 0.1, dtype=torch.float64)
    idx, weights, cond = anchor_weights(kernel, x, x[anchors], noise, neighbours=10, jitter=JITTER, backend="kdtree")
    factor = vecchia_factor(kernel, x, neighbours=n - 1, jitter=JITTER, seed=0, backend="kdtree")
    prior = prior_draws(factor, realisation_noise((n, 2), 5, 0, r))
    mean, var = torch.full((n, 2), 2.0, dtype=torch.float64), torch.full((n, 2), 0.25, dtype=torch.float64)
    draws = conditioned_draws(prior, prior[anchors], pseudo, noise, realisation_noise((10, 2), 5, 0, r, stream=1),
                              idx, weights, cond, mean, var)
    assert torch.max(torch.abs(draws.mean(-1) - 2.0)) < 5 * np.sqrt(0.25 / r)
    assert torch.max(torch.abs(draws.var(-1) - 0.25)) < 5 * np.sqrt(2 / r) * 0.25


def test_padded_neighbour_slots_never_bring_in_values_not_drawn_yet(setting, monkeypatch):
    """Padded slots point at row 0 with weight 0; row 0 drawn last must not leak into earlier levels
    (0 * NaN is NaN), whatever the memory held before."""
    kernel, x = setting
    factor = vecchia_factor(kernel, x, neighbours=4, jitter=JITTER, seed=0, backend="kdtree")
    assert factor.levels[0].numel() == 1 and int(factor.levels[0][0]) != 0  # row 0 comes later
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: torch.full_like(t, float("nan"), **kw))
    draws = prior_draws(factor, realisation_noise((len(x), 2), seed=0, first=0, n=3))
    assert torch.isfinite(draws).all()


def test_a_level_drawn_in_blocks_gives_the_same_draws(setting, monkeypatch):
    """Rows of one dependency level are drawn in blocks of CHUNK (to bound memory): any block size
    gives the same draws as one block, levels larger than a block included."""
    import geogpvae.engine.simulation as simulation

    kernel, x = setting
    factor = vecchia_factor(kernel, x, neighbours=4, jitter=JITTER, seed=0, backend="kdtree")
    eps = realisation_noise((len(x), 2), seed=2, first=0, n=3)
    whole = prior_draws(factor, eps)
    assert max(len(level) for level in factor.levels) > 2
    monkeypatch.setattr(simulation, "CHUNK", 2)
    torch.testing.assert_close(prior_draws(factor, eps), whole, rtol=0, atol=0)
