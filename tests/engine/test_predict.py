"""Prediction maths: posterior fusion and predictive moments against closed forms."""

from __future__ import annotations

import numpy as np
import torch

from geogpvae.engine.model import GPVAE
from geogpvae.engine.predict import combine_posteriors, encoder_posterior, predictive_moments


def test_combination_is_the_product_of_gaussians_over_the_prior():
    """q_e q_g / p: precisions add and the prior precision is removed once."""
    rng = np.random.default_rng(0)
    prior = torch.tensor([2.0, 1.5], dtype=torch.float64)
    me, mg = (torch.as_tensor(rng.normal(size=(6, 2))) for _ in range(2))
    ve = torch.as_tensor(rng.uniform(0.2, 0.9, (6, 2)))
    vg = torch.as_tensor(rng.uniform(0.2, 1.0, (6, 2)))
    mean, var = combine_posteriors(me, ve, mg, vg, prior)
    precision = 1 / ve + 1 / vg - 1 / prior
    torch.testing.assert_close(var, 1 / precision)
    torch.testing.assert_close(mean, (me / ve + mg / vg) / precision)


def test_combination_never_loses_information_from_the_encoder():
    prior = torch.tensor([1.0])
    mean, var = combine_posteriors(torch.tensor([[0.5]]), torch.tensor([[0.3]]),
                                   torch.tensor([[0.0]]), torch.tensor([[5.0]]), prior)
    # neighbours as wide as the prior (or wider) add nothing: the encoder posterior stays
    torch.testing.assert_close(var, torch.tensor([[0.3]]))
    torch.testing.assert_close(mean, torch.tensor([[0.5]]))


class _Linear(GPVAE):
    """Decoder y = a z + b, so that the predictive moments have a closed form."""

    def __init__(self, a: float, b: float, noise: float) -> None:
        super().__init__(1, 1, 1, encoder_hidden=(2,), decoder_hidden=(2,), noise=noise)
        self.a, self.b = a, b
        self.double()

    def decode(self, z):
        return self.a * z + self.b


def test_gaussian_moments_match_the_linear_decoder_closed_form():
    model = _Linear(a=2.0, b=0.5, noise=0.2)
    mean = torch.tensor([[0.3], [-1.0]], dtype=torch.float64)
    var = torch.tensor([[0.4], [0.1]], dtype=torch.float64)
    loc, scale = np.array([10.0]), np.array([3.0])
    m, s, m_model, s_model = predictive_moments(model, mean, var, loc=loc, scale=scale,
                                                log=np.array([False]), samples=20000, seed=1)
    exp_m = loc + scale * (2.0 * mean.numpy() + 0.5)
    exp_v = scale**2 * (4.0 * var.numpy() + float(model.noise_var))
    np.testing.assert_allclose(m, exp_m, atol=0.02 * scale[0])
    np.testing.assert_allclose(s, np.sqrt(exp_v), rtol=0.02)
    np.testing.assert_array_equal(m, m_model)
    np.testing.assert_array_equal(s, s_model)


def test_log_variables_get_the_log_normal_moments():
    """A point latent posterior: exp(N(mu, v)) has mean exp(mu + v/2), var (e^v - 1) e^(2mu + v)."""
    model = _Linear(a=1.0, b=0.0, noise=0.05)
    mean = torch.tensor([[0.7]], dtype=torch.float64)
    var = torch.zeros(1, 1, dtype=torch.float64)
    loc, scale = np.array([1.0]), np.array([0.5])
    m, s, m_model, s_model = predictive_moments(model, mean, var, loc=loc, scale=scale,
                                                log=np.array([True]), samples=8)
    mu = loc + scale * 0.7
    v = float(model.noise_var) * scale**2
    np.testing.assert_allclose(m_model, [mu])
    np.testing.assert_allclose(s_model, [np.sqrt(v)])
    np.testing.assert_allclose(m, [np.exp(mu + v / 2)], rtol=1e-10)
    np.testing.assert_allclose(s, [np.sqrt(np.expm1(v) * np.exp(2 * mu + v))], rtol=1e-8)


def test_var_factor_scales_the_variance_and_keeps_the_mean():
    model = _Linear(a=1.5, b=0.0, noise=0.1)
    mean = torch.tensor([[0.2], [0.4]], dtype=torch.float64)
    var = torch.tensor([[0.3], [0.2]], dtype=torch.float64)
    args = dict(loc=np.zeros(1), scale=np.ones(1), log=np.array([False]), samples=64, seed=3)
    m1, s1, _, _ = predictive_moments(model, mean, var, **args)
    m4, s4, _, _ = predictive_moments(model, mean, var, var_factor=np.array([4.0]), **args)
    np.testing.assert_allclose(m4, m1)
    np.testing.assert_allclose(s4, 2.0 * s1)


def test_results_do_not_depend_on_chunking():
    torch.manual_seed(0)
    model = GPVAE(2, 2, 2, encoder_hidden=(8,), decoder_hidden=(8,)).double()
    mean = torch.randn(9, 2, dtype=torch.float64)
    var = torch.rand(9, 2, dtype=torch.float64)
    args = dict(loc=np.zeros(2), scale=np.ones(2), log=np.array([False, True]), samples=16)
    whole = predictive_moments(model, mean, var, **args)
    pieces = predictive_moments(model, mean, var, chunk=4, **args)
    for a, b in zip(whole, pieces):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    y = torch.randn(9, 2, dtype=torch.float64)
    vis = torch.ones(9, 2, dtype=torch.bool)
    for a, b in zip(encoder_posterior(model, y, vis, None), encoder_posterior(model, y, vis, None, chunk=2)):
        torch.testing.assert_close(a, b)


def test_neighbour_posterior_does_not_depend_on_chunking():
    from geogpvae.engine.predict import neighbour_posterior

    torch.manual_seed(1)
    model = GPVAE(2, 2, 2, encoder_hidden=(8,), decoder_hidden=(8,), lengthscale=0.3).double()
    xa, xt = torch.rand(40, 2, dtype=torch.float64), torch.rand(13, 2, dtype=torch.float64)
    ma, va = torch.randn(40, 2, dtype=torch.float64), torch.rand(40, 2, dtype=torch.float64) + 0.1
    whole = neighbour_posterior(model, xa, ma, va, xt, neighbours=5)
    pieces = neighbour_posterior(model, xa, ma, va, xt, neighbours=5, chunk=3)
    for a, b in zip(whole, pieces):
        torch.testing.assert_close(a, b)


def test_context_from_kept_neighbours_and_in_chunks_equals_a_fresh_search():
    from geogpvae.engine.data import context_index, neighbourhood_context

    rng = np.random.default_rng(0)
    x, y = rng.random((60, 2)), rng.normal(size=(60, 3))
    observed = rng.random((60, 3)) < 0.6
    fresh = neighbourhood_context(x, y, observed, (4, 9))
    kept = neighbourhood_context(x, y, observed, (4, 9), index=context_index(x, (4, 9)), chunk=7)
    np.testing.assert_allclose(kept, fresh, rtol=1e-12)
    q = rng.random((11, 2))
    np.testing.assert_allclose(
        neighbourhood_context(x, y, observed, 9, query=q, index=context_index(x, 9, query=q), chunk=4),
        neighbourhood_context(x, y, observed, 9, query=q), rtol=1e-12)


# --------------------------------------------------------------------------- neighbours
def _model_1d(lengthscale=0.3, outputscale=1.7):
    torch.manual_seed(0)
    return GPVAE(1, 2, 1, encoder_hidden=(4,), decoder_hidden=(4,), lengthscale=lengthscale,
                 outputscale=outputscale).double()


def test_pseudo_observations_times_the_prior_give_back_the_encoder_posterior():
    """N(0, s) N(u; z, e) is proportional to N(m, v): precisions 1/s + 1/e = 1/v, mean (u/e) v = m."""
    from geogpvae.engine.predict import pseudo_observations

    rng = np.random.default_rng(2)
    prior = torch.tensor([1.3, 0.7], dtype=torch.float64)
    m = torch.as_tensor(rng.normal(size=(9, 2)))
    v = torch.as_tensor(rng.uniform(0.05, 0.6, (9, 2)))
    u, e = pseudo_observations(m, v, prior)
    torch.testing.assert_close(1 / prior + 1 / e, 1 / v)
    torch.testing.assert_close(u / e * v, m)
    # a posterior as wide as the prior (or wider) adds nothing; nearly as wide, little, and
    # its pseudo-observation stays bounded (at most mean / floor) and continuous in var
    for width in (1.0, 2.0):
        u, e = pseudo_observations(torch.ones(1, 2, dtype=torch.float64), prior[None] * width, prior)
        assert (u == 0).all()
        torch.testing.assert_close(e, 1e4 * width * prior[None])
    v = prior[None] * torch.linspace(0.98, 1.0, 201, dtype=torch.float64)[:, None]
    u, e = pseudo_observations(torch.ones_like(v), v, prior)
    natural = u / e  # what a pseudo-observation adds to a posterior mean: continuous, to 0
    assert u.max() <= 100 + 1e-9 and (e.diff(dim=0) >= -1e-9).all() and natural[-1].abs().max() == 0
    assert natural.diff(dim=0).abs().max() < 0.01 * natural.abs().max()


def test_sure_anchors_are_interpolated_by_the_prior_conditional():
    """Encoder variances -> 0: the posterior is the noise-free kriging of the anchor means."""
    from geogpvae.engine.predict import neighbour_posterior

    model = _model_1d()
    rng = np.random.default_rng(4)
    xa, xt = torch.as_tensor(rng.random((12, 2))), torch.as_tensor(rng.random((3, 2)))
    ma = torch.as_tensor(rng.normal(size=(12, 1)))
    mean, var = neighbour_posterior(model, xa, ma, torch.full((12, 1), 1e-12, dtype=torch.float64), xt,
                                    neighbours=12)
    with torch.no_grad():
        s = model.kernel.outputscale * (1 + model.jitter)
        k_aa = model.kernel(xa)[0] + model.jitter * model.kernel.outputscale * torch.eye(12)
        k_ta = model.kernel(xt, xa)[0]
    b = torch.linalg.solve(k_aa, k_ta.T)  # (12, 3)
    torch.testing.assert_close(mean[:, 0], b.T @ ma[:, 0], rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(var[:, 0], s - (b * k_ta.T).sum(0), rtol=1e-5, atol=1e-8)


def test_toward_anchors_is_constant_mean_kriging_capped_at_the_anchors_spread():
    """The latent cap (what the engine uses): the weight the neighbours leave goes to the anchors' mean,
    and the variance is capped at the anchors' total variance; far away both are the anchors'."""
    from geogpvae.engine.predict import neighbour_posterior

    model = _model_1d()
    rng = np.random.default_rng(4)
    xa = torch.as_tensor(rng.random((12, 2)))
    xt = torch.as_tensor(np.r_[rng.random((3, 2)), [[40.0, 40.0]]])  # three near, one far
    ma, va = torch.as_tensor(0.3 * rng.normal(size=(12, 1)) + 0.5), torch.full((12, 1), 1e-12, dtype=torch.float64)
    mean, var = neighbour_posterior(model, xa, ma, va, xt, neighbours=12, toward_anchors=True)
    with torch.no_grad():
        s = model.kernel.outputscale * (1 + model.jitter)
        k_aa = model.kernel(xa)[0] + model.jitter * model.kernel.outputscale * torch.eye(12)
        k_ta = model.kernel(xt, xa)[0]
    b = torch.linalg.solve(k_aa, k_ta.T)  # (12, 4)
    centre, spread = ma[:, 0].mean(), ma[:, 0].var() + va[:, 0].mean()
    torch.testing.assert_close(mean[:, 0], b.T @ ma[:, 0] + (1 - b.sum(0)) * centre, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(var[:, 0], torch.minimum(s - (b * k_ta.T).sum(0), spread), rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(mean[3, 0], centre)
    torch.testing.assert_close(var[3, 0], spread)
    plain = neighbour_posterior(model, xa, ma, va, xt, neighbours=12)
    assert abs(float(plain[0][3, 0])) < 1e-8 and float(plain[1][3, 0]) > 10 * float(spread)  # the prior


def test_anchors_no_surer_than_the_prior_leave_the_prior():
    """An encoder posterior equal to the prior says nothing: the target gets N(0, s)."""
    from geogpvae.engine.predict import neighbour_posterior

    model = _model_1d()
    rng = np.random.default_rng(5)
    xa, xt = torch.as_tensor(rng.random((10, 2))), torch.as_tensor(rng.random((4, 2)))
    with torch.no_grad():
        s = model.kernel.outputscale * (1 + model.jitter)
    ma = torch.as_tensor(rng.normal(size=(10, 1)))
    mean, var = neighbour_posterior(model, xa, ma, s.expand(10, 1).clone(), xt, neighbours=6)
    assert mean.abs().max() < 1e-3
    torch.testing.assert_close(var, s.expand(4, 1), rtol=1e-3, atol=0)


def test_uncertain_anchors_are_smoothed_over_not_interpolated():
    """Two anchors at the same place with opposite means: the surer one wins, in proportion."""
    from geogpvae.engine.predict import neighbour_posterior, pseudo_observations

    model = _model_1d(lengthscale=1.0)
    xa = torch.tensor([[0.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    ma = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)
    va = torch.tensor([[0.01], [0.5]], dtype=torch.float64)
    mean, _ = neighbour_posterior(model, xa, ma, va, xa[:1], neighbours=2)
    with torch.no_grad():
        s = model.kernel.outputscale * (1 + model.jitter)
    u, e = pseudo_observations(ma, va, s)
    # both observe the same z: the posterior combines their likelihoods with the prior
    precision = 1 / s + (1 / e).sum()
    want = (u / e).sum() / precision
    torch.testing.assert_close(mean[0, 0], want[0], rtol=2e-3, atol=1e-6)
    assert 0.9 < mean[0, 0] < 1.0


def test_prediction_decoder_gives_the_model_decoder_numbers():
    """The in-place decoder of prediction: the same numbers as ``model.decode``, input untouched."""
    from geogpvae.engine.predict import _decode

    torch.manual_seed(0)
    model = GPVAE(3, 2, 2, encoder_hidden=(8,), decoder_hidden=(16, 8))
    z = torch.randn(5, 40, 2)
    before = z.clone()
    with torch.no_grad():
        assert torch.equal(_decode(model, z), model.decode(z))
    assert torch.equal(z, before)


def test_lattice_kernel_blocks_gathered_from_offsets_equal_the_kernel():
    """On a lattice the neighbour sets' kernel blocks come from a table of distinct offsets:
    they must equal the kernel evaluated on each set's locations, and so must the posterior."""
    from geogpvae.engine import predict
    from geogpvae.gp.neighbours import knn

    torch.manual_seed(2)
    model = GPVAE(2, 2, 2, encoder_hidden=(8,), decoder_hidden=(8,), lengthscale=0.3).double()
    with torch.no_grad():  # anisotropic, per channel
        model.kernel.raw_lengthscale.copy_(torch.tensor([[0.4, -0.3], [-0.2, 0.5]]))
    g = np.stack(np.meshgrid(np.arange(15) * 0.07, np.arange(12) * 0.05, indexing="ij"), -1).reshape(-1, 2)
    keep = np.random.default_rng(0).random(len(g)) > 0.15  # holes: neighbour sets of many shapes
    xa, xt = g[keep], g
    _, idx = knn(xa, 6, query=xt)
    blocks = predict._tabulated_blocks(model.kernel, xa, xt, idx, torch.zeros((), dtype=torch.float64))
    assert blocks is not None  # a lattice: few distinct offsets
    pts = torch.as_tensor(np.concatenate([xa[idx], xt[:, None]], 1))
    torch.testing.assert_close(blocks, model.kernel.blocks(pts), rtol=1e-10, atol=1e-12)

    xa_t, xt_t = torch.as_tensor(xa), torch.as_tensor(xt)
    ma = torch.randn(len(xa), 2, dtype=torch.float64)
    va = torch.rand(len(xa), 2, dtype=torch.float64) * 0.5 + 0.1
    self_index = np.full(len(xt), -1)
    self_index[np.flatnonzero(keep)] = np.arange(keep.sum())
    gathered = predict.neighbour_posterior(model, xa_t, ma, va, xt_t, neighbours=6, self_index=self_index)
    original = predict._tabulated_blocks
    try:
        predict._tabulated_blocks = lambda *args: None  # the kernel evaluated set by set
        direct = predict.neighbour_posterior(model, xa_t, ma, va, xt_t, neighbours=6, self_index=self_index)
    finally:
        predict._tabulated_blocks = original
    for a, b in zip(gathered, direct):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
