"""The contract both priors keep: ``prior.kl(kernel, batch, mean, var, jitter)``.

The same checks run on SPA and HPA: a finite, non-negative scalar; exactly 0 when every
location is independent under the prior and its posterior equals the prior marginal; the
same value through shared stencils as through per-location blocks; gradients that reach the
kernel hyperparameters and the posterior.
"""

from __future__ import annotations

import pytest
import torch

from geogpvae.datasets.synthetic import grid_points
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.data import field_data, gather_batch
from geogpvae.gp.kernels import LatentKernel
from geogpvae.gp.priors import PRIORS

JITTER = 1e-4


def _batch(engine: str, spacing: float = 1.0, stencils: bool = True, n_batch: int = 60):
    x = grid_points((6, 7, 5), spacing)
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(len(x), 2, generator=gen).numpy()
    obs = torch.rand(len(x), 2, generator=gen).numpy() > 0.3
    cfg = GPVAEConfig(engine=engine, neighbours=5, ordering="sorted", context=0)
    data = field_data(x, y, obs, cfg, device=torch.device("cpu"), dtype=torch.float64,
                      use_stencils=stencils)
    idx = torch.randperm(len(x), generator=gen)[:n_batch]
    return gather_batch(data, idx)


def _posterior(batch, channels: int = 2):
    gen = torch.Generator().manual_seed(1)
    m = batch.y.shape[0]
    mean = (0.5 * torch.randn(m, channels, generator=gen, dtype=torch.float64)).requires_grad_()
    var = (0.2 + torch.rand(m, channels, generator=gen, dtype=torch.float64)).requires_grad_()
    return mean, var


@pytest.mark.parametrize("engine", sorted(PRIORS))
def test_kl_is_a_finite_non_negative_scalar(engine):
    batch = _batch(engine)
    kernel = LatentKernel("matern32", 2, 3, lengthscale=1.5).double()
    mean, var = _posterior(batch)
    kl = PRIORS[engine].kl(kernel, batch, mean, var, JITTER)
    assert kl.shape == () and torch.isfinite(kl) and float(kl) > 0
    kl.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in kernel.parameters())
    assert mean.grad is not None and var.grad is not None


@pytest.mark.parametrize("engine", sorted(PRIORS))
def test_kl_vanishes_when_the_posterior_is_the_independent_prior(engine):
    """Locations 1000 lengthscales apart are independent: q = N(0, s (1 + jitter)) costs 0."""
    batch = _batch(engine, spacing=1000.0)
    scale = torch.tensor([0.7, 1.9], dtype=torch.float64)
    kernel = LatentKernel("rbf", 2, 3, lengthscale=1.0, outputscale=scale).double()
    m = batch.y.shape[0]
    mean = torch.zeros(m, 2, dtype=torch.float64)
    var = (scale * (1 + JITTER)).expand(m, 2).clone()
    kl = PRIORS[engine].kl(kernel, batch, mean, var, JITTER)
    assert abs(float(kl)) < 1e-10
    kl_off = PRIORS[engine].kl(kernel, batch, mean + 0.3, var, JITTER)
    assert float(kl_off) > 1e-3


@pytest.mark.parametrize("engine", sorted(PRIORS))
def test_shared_stencils_and_per_location_blocks_agree(engine):
    shared, plain = _batch(engine), _batch(engine, stencils=False)
    assert shared.stencil_index is not None and plain.stencil_index is None
    kernel = LatentKernel("matern52", 2, 3, lengthscale=[1.2, 0.8, 2.0]).double()
    mean, var = _posterior(shared)
    torch.testing.assert_close(PRIORS[engine].kl(kernel, shared, mean, var, JITTER),
                               PRIORS[engine].kl(kernel, plain, mean, var, JITTER))


def test_each_prior_names_its_engine():
    assert {name: prior.name for name, prior in PRIORS.items()} == {"spa": "spa", "hpa": "hpa"}
