"""Prior terms against exact dense-GP computations (float64)."""

import pytest
import torch
from torch.distributions import MultivariateNormal, Normal, kl_divergence

from geogpvae.gp.kernels import KERNELS, LatentKernel
from geogpvae.gp.neighbours import knn, order_points, ordered_neighbours
from geogpvae.gp.priors.hpa import hpa_kl
from geogpvae.gp.priors.spa import spa_conditional, spa_kl, spa_log_prior

JITTER = 1e-4


@pytest.fixture(autouse=True)
def _float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _problem(n=30, d=2, n_latent=3, seed=0, kind="rbf"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g) * 3
    kernel = LatentKernel(
        kind, n_latent, d, lengthscale=torch.rand(n_latent, d, generator=g) + 0.4,
        outputscale=torch.rand(n_latent, generator=g) + 0.5,
    )
    mu = torch.randn(n, n_latent, generator=g)
    var = torch.rand(n, n_latent, generator=g) * 0.5 + 0.05
    return x, kernel, mu, var


def _dense_prior(kernel, x):
    cov = kernel(x)  # (L, N, N)
    eye = torch.eye(x.shape[0])
    return cov + JITTER * kernel.outputscale[:, None, None] * eye


def _dense_kl(kernel, x, mu, var):
    """KL[q || N(0, K)] summed over channels, with torch.distributions."""
    cov = _dense_prior(kernel, x)
    total = 0.0
    for c in range(mu.shape[1]):
        q = MultivariateNormal(mu[:, c], covariance_matrix=torch.diag(var[:, c]))
        p = MultivariateNormal(torch.zeros(x.shape[0]), covariance_matrix=cov[c])
        total = total + kl_divergence(q, p)
    return total


def _spa_total(kernel, x, mu, var, nbr):
    nbr = torch.as_tensor(nbr)
    valid = nbr >= 0
    idx = nbr.clamp_min(0)
    kl = spa_kl(kernel, x, x[idx], valid, mu, var, mu[idx], var[idx], JITTER)
    return kl.sum()


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("ordering", ["random", "maxmin", "sorted"])
def test_spa_with_all_predecessors_equals_dense_kl(kind, ordering):
    x, kernel, mu, var = _problem(kind=kind)
    n = x.shape[0]
    order = order_points(x.numpy(), ordering, seed=2)
    nbr = ordered_neighbours(x.numpy(), n - 1, order)
    got = _spa_total(kernel, x, mu, var, nbr)
    want = _dense_kl(kernel, x, mu, var)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_spa_gradients_match_dense():
    x, kernel, mu, var = _problem(n=20, seed=3)
    mu.requires_grad_(True)
    var.requires_grad_(True)
    nbr = ordered_neighbours(x.numpy(), 19, order_points(x.numpy(), "random", seed=0))
    g_spa = torch.autograd.grad(_spa_total(kernel, x, mu, var, nbr), [mu, var, kernel.raw_lengthscale])
    g_dense = torch.autograd.grad(_dense_kl(kernel, x, mu, var), [mu, var, kernel.raw_lengthscale])
    for a, b in zip(g_spa, g_dense):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)


def test_vecchia_log_density_equals_dense():
    x, kernel, _, _ = _problem(n=30, seed=4, kind="matern32")
    z = torch.randn(30, 3)
    nbr = torch.as_tensor(ordered_neighbours(x.numpy(), 29, order_points(x.numpy(), "random")))
    got = spa_log_prior(kernel, x, z, nbr, JITTER)
    cov = _dense_prior(kernel, x)
    want = sum(MultivariateNormal(torch.zeros(30), covariance_matrix=cov[c]).log_prob(z[:, c]) for c in range(3))
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-9)


def test_spa_short_conditioning_sets_handled_exactly():
    """A point with r < H predecessors is conditioned on exactly those r points."""
    x, kernel, _, _ = _problem(n=12, seed=5)
    order = torch.arange(12)
    nbr = torch.as_tensor(ordered_neighbours(x.numpy(), 5, order.numpy()))
    assert (nbr[0] == -1).all() and (nbr[3, :3] >= 0).all() and (nbr[3, 3:] == -1).all()
    w, cv = spa_conditional(kernel, x, x[nbr.clamp_min(0)], nbr >= 0, JITTER)
    assert (w[3, :, 3:] == 0).all()  # padded slots get exactly zero weight
    # point 3 against a direct Gaussian conditional on its 3 predecessors
    cov = _dense_prior(kernel, x[:4])
    for c in range(3):
        k_nn, k_nj = cov[c, :3, :3], cov[c, :3, 3]
        idx = nbr[3, :3]
        perm = [int(i) for i in idx]  # nbr lists them nearest first
        want_w = torch.linalg.solve(k_nn, k_nj)[perm]
        torch.testing.assert_close(w[3, c, :3], want_w)
        torch.testing.assert_close(cv[3, c], cov[c, 3, 3] - k_nj @ torch.linalg.solve(k_nn, k_nj))
    # the first point: its marginal prior
    torch.testing.assert_close(cv[0], kernel.outputscale * (1 + JITTER))


def test_spa_kl_is_expectation_of_conditional_kl():
    """Monte Carlo check of the closed-form expectation over q(Z_n(j))."""
    x, kernel, mu, var = _problem(n=8, n_latent=2, seed=6)
    nbr = torch.as_tensor(ordered_neighbours(x.numpy(), 4, None))
    j = 7
    idx, valid = nbr[j : j + 1].clamp_min(0), nbr[j : j + 1] >= 0
    closed = spa_kl(kernel, x[j : j + 1], x[idx], valid, mu[j : j + 1], var[j : j + 1], mu[idx], var[idx], JITTER)
    w, cv = spa_conditional(kernel, x[j : j + 1], x[idx], valid, JITTER)
    g = torch.Generator().manual_seed(0)
    zs = mu[idx] + var[idx].sqrt() * torch.randn(200_000, 4, 2, generator=g)  # (S, H, L)
    means = (w[0].unsqueeze(0) * zs.mT).sum(-1)  # (S, L)
    kl = kl_divergence(Normal(mu[j], var[j].sqrt()), Normal(means, cv[0].sqrt())).sum(-1)
    assert closed.item() == pytest.approx(kl.mean().item(), rel=5e-3)


def test_spa_h0_is_vae_kl():
    x, _, mu, var = _problem(n=25, seed=7)
    kernel = LatentKernel("rbf", 3, 2, outputscale=1.0)
    empty = torch.empty(25, 0, dtype=torch.long)
    got = spa_kl(kernel, x, x[empty], empty >= 0, mu, var, mu[empty], var[empty], jitter=0.0)
    want = 0.5 * (mu.square() + var - torch.log(var) - 1).sum(-1)
    torch.testing.assert_close(got, want)
    want_td = kl_divergence(Normal(mu, var.sqrt()), Normal(0.0, 1.0)).sum(-1)
    torch.testing.assert_close(got, want_td)


@pytest.mark.parametrize("kind", KERNELS)
def test_hpa_kl_equals_torch_distributions_on_subset(kind):
    x, kernel, mu, var = _problem(n=40, kind=kind, seed=8)
    _, nbr = knn(x.numpy(), 10)  # each point's 10 nearest, itself included
    nbr = torch.as_tensor(nbr)
    assert (nbr[:, 0] == torch.arange(40)).all()
    got = hpa_kl(kernel, x[nbr], nbr >= 0, mu[nbr], var[nbr], JITTER)
    for i in (0, 17, 39):
        sub = nbr[i]
        want = _dense_kl(kernel, x[sub], mu[sub], var[sub])
        torch.testing.assert_close(got[i], want, rtol=1e-10, atol=1e-10)


def test_hpa_whole_set_equals_dense_and_padding_is_neutral():
    x, kernel, mu, var = _problem(n=15, seed=9)
    full = torch.arange(15)[None, :]
    got = hpa_kl(kernel, x[full], full >= 0, mu[full], var[full], JITTER)
    torch.testing.assert_close(got[0], _dense_kl(kernel, x, mu, var))
    # the first 9 points plus 6 padded slots == the 9-point KL
    padded = torch.cat([torch.arange(9), torch.full((6,), -1)])[None, :]
    valid = padded >= 0
    idx = padded.clamp_min(0)
    got_pad = hpa_kl(kernel, x[idx], valid, mu[idx], var[idx], JITTER)
    torch.testing.assert_close(got_pad[0], _dense_kl(kernel, x[:9], mu[:9], var[:9]))


def test_float32_is_stable_with_duplicates():
    torch.set_default_dtype(torch.float32)
    x = torch.rand(50, 2)
    x[10] = x[3]  # a duplicate location
    kernel = LatentKernel("cauchy", 2, 2, lengthscale=2.0)
    mu, var = torch.randn(50, 2), torch.rand(50, 2) + 0.1
    nbr = torch.as_tensor(ordered_neighbours(x.double().numpy(), 10, order_points(x.numpy())))
    assert torch.isfinite(_spa_total(kernel, x, mu, var, nbr))


def test_hpa_gradients_match_dense():
    x, kernel, mu, var = _problem(n=12, seed=10, kind="matern52")
    mu.requires_grad_(True)
    var.requires_grad_(True)
    full = torch.arange(12)[None, :]
    got = torch.autograd.grad(
        hpa_kl(kernel, x[full], full >= 0, mu[full], var[full], JITTER).sum(),
        [mu, var, kernel.raw_lengthscale, kernel.raw_outputscale],
    )
    want = torch.autograd.grad(_dense_kl(kernel, x, mu, var), [mu, var, kernel.raw_lengthscale, kernel.raw_outputscale])
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)


def test_custom_backward_passes_gradcheck():
    from geogpvae.gp.priors._blocks import spd_solve
    from geogpvae.gp.priors.hpa import _GaussianKL

    g = torch.Generator().manual_seed(0)
    # inputs are symmetric by construction, so check through a symmetric parametrisation
    a = torch.randn(2, 3, 5, 5, generator=g, requires_grad=True)
    rhs = torch.randn(2, 3, 5, 1, generator=g, requires_grad=True)
    mu = torch.randn(2, 3, 5, generator=g, requires_grad=True)
    var = (torch.rand(2, 3, 5, generator=g) + 0.2).requires_grad_(True)

    def spd(m):
        return m @ m.mT + 5 * torch.eye(5)

    assert torch.autograd.gradcheck(lambda m, r: spd_solve(spd(m), r), (a, rhs))
    assert torch.autograd.gradcheck(lambda m, u, v: _GaussianKL.apply(spd(m), u, v), (a, mu, var))


@pytest.mark.parametrize("engine", ["spa", "hpa"])
def test_shared_stencils_give_the_same_loss_and_gradients(engine):
    """On a grid, sharing factorisations between identical neighbour geometries is exact."""
    from geogpvae.datasets.synthetic import grid_points
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.model import GPVAE
    from geogpvae.engine.data import field_data, gather_batch

    x = grid_points((9, 8, 7))
    g = torch.Generator().manual_seed(0)
    y = torch.randn(len(x), 2, generator=g).numpy()
    obs = torch.rand(len(x), 2, generator=g).numpy() > 0.3
    cfg = GPVAEConfig(engine=engine, neighbours=6, ordering="sorted", context=0)
    dev = torch.device("cpu")
    plain = field_data(x, y, obs, cfg, device=dev, dtype=torch.float64, use_stencils=False)
    shared = field_data(x, y, obs, cfg, device=dev, dtype=torch.float64)
    assert shared.stencil is not None and shared.stencil_offsets.shape[0] < len(x) / 4
    model = GPVAE(2, 3, 2, engine=engine, kernel="matern52", lengthscale=1.5).double()
    idx = torch.randperm(len(x), generator=g)[:100]
    grads = []
    for data in (plain, shared):
        torch.manual_seed(0)
        model.zero_grad()
        terms = model(gather_batch(data, idx))
        terms["kl"].backward()
        # every parameter: the kernel's (through the covariance blocks) and the encoder's
        # (through the means and variances of the neighbourhoods)
        grads.append((terms["kl"].detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    assert len(grads[0][1]) > len(list(model.kernel.parameters()))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-10, atol=1e-12)
    for a, b in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
