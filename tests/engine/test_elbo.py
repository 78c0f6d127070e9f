"""The model's ELBO and predictive against exact dense-Gaussian computations (float64).

Each test here was seen to fail on a deliberately broken copy of the code (a dropped term, a
flipped sign, a missing entry leaking into the likelihood, a point conditioned on itself); the
mutations are listed in the test docstrings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from geogpvae.engine import model as model_module
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.model import GPVAE, MAX_PATTERN_VARS, MOMENT_SEED
from geogpvae.engine.predict import neighbour_posterior, predictive_moments
from geogpvae.engine.data import field_data, gather_batch
from geogpvae.gp.neighbours import order_points, ordered_neighbours

JITTER = 1e-4


@pytest.fixture(autouse=True)
def _float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _linear_model(engine: str, n_vars=3, n_dims=2, n_latent=2, seed=0, noise=0.3, context=0,
                  hidden=False) -> GPVAE:
    """A GPVAE whose decoder is one linear layer, so E_q[log p(y | z)] has a closed form."""
    torch.manual_seed(seed)
    model = GPVAE(n_vars, n_dims, n_latent, engine=engine, decoder_hidden=(), encoder_hidden=(16,),
                  context_dim=context, kernel="matern32", lengthscale=0.4, outputscale=1.3, noise=noise,
                  jitter=JITTER, beta=1.0, hidden_variance=hidden).double()
    with torch.no_grad():  # distinct, non-trivial hyperparameters per channel and variable
        model.kernel.raw_lengthscale.add_(torch.randn_like(model.kernel.raw_lengthscale) * 0.3)
        model.raw_noise.add_(torch.randn_like(model.raw_noise) * 0.3)
    return model


def _field(n=40, k=3, seed=1, missing=0.35):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    y = rng.normal(size=(n, k))
    observed = rng.random((n, k)) > missing
    observed[0] = True  # every variable observed somewhere
    y = np.where(observed, y, np.nan)
    return x, y, observed


def _dense_elbo_per_location(model: GPVAE, x, y, observed, mean, var) -> tuple[float, float]:
    """(expected log-likelihood, KL[q(Z) || p(Z)]) of the full field, computed independently.

    The likelihood is Gaussian with the decoder ``W z + b`` and noise ``s2``; its expectation
    under ``q(z_i) = N(m_i, diag v_i)`` is exact:
    ``-1/2 [((y - W m - b)^2 + sum_l W_kl^2 v_il) / s2_k + log(2 pi s2_k)]`` over observed entries.
    The prior is the dense GP ``N(0, K + jitter s_l I)`` per channel.
    """
    lin = model.decoder[0]
    w, b = lin.weight.detach(), lin.bias.detach()  # (K, L), (K,)
    s2 = model.noise_var.detach()
    yt = torch.as_tensor(np.where(observed, y, 0.0))
    obs = torch.as_tensor(observed)
    resid2 = (yt - mean @ w.T - b).square() + var @ w.T.square()
    ll = -0.5 * (resid2 / s2 + torch.log(2 * math.pi * s2))
    loglik = float((ll * obs).sum())
    xt = torch.as_tensor(x)
    with torch.no_grad():
        cov = model.kernel(xt) + JITTER * model.kernel.outputscale[:, None, None] * torch.eye(len(x))
    kl = 0.0
    for c in range(mean.shape[1]):
        q = MultivariateNormal(mean[:, c], covariance_matrix=torch.diag(var[:, c]))
        p = MultivariateNormal(torch.zeros(len(x)), covariance_matrix=cov[c])
        kl += float(kl_divergence(q, p))
    return loglik, kl


@pytest.mark.parametrize(("engine", "full_h"), [("spa", lambda n: n - 1), ("hpa", lambda n: n)])
@pytest.mark.parametrize("ordering", ["random", "maxmin"])
def test_full_batch_elbo_equals_dense_gp_elbo(engine, full_h, ordering):
    """``model.forward`` with B = N and H = N-1 (SPA) / H = N (HPA) is the dense-GP ELBO / N.

    Caught mutations: likelihood summed over the zero-filled missing entries; SPA KL scaled
    by 1/N; HPA KL not divided by N; the log(2 pi s2) term dropped; KL sign flipped; a
    location counted as its own earlier neighbour.
    """
    x, y, observed = _field()
    n = len(x)
    model = _linear_model(engine)
    cfg = GPVAEConfig(engine=engine, neighbours=full_h(n), ordering=ordering, context=0, seed=3)
    data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    batch = gather_batch(data, torch.arange(n))
    model.set_train_samples(200_000)
    torch.manual_seed(0)
    terms = model(batch)
    with torch.no_grad():
        mean, var = model.encode(data.y, data.observed)
    loglik, kl = _dense_elbo_per_location(model, x, y, observed, mean, var)
    # the KL is deterministic: exact up to round-off
    assert float(terms["kl"].detach()) == pytest.approx(kl / n, rel=1e-9, abs=1e-12)
    # the likelihood is a Monte Carlo estimate (200,000 draws): 0.2% is > 10 standard errors
    assert float(terms["expected_nll"].detach()) == pytest.approx(-loglik / n, rel=2e-3)
    assert float(terms["loss"].detach()) == pytest.approx((kl - loglik) / n, rel=2e-3)


@pytest.mark.parametrize("engine", ["spa", "hpa"])
def test_missing_entries_never_influence_the_loss(engine):
    """Changing the values at missing entries (even to huge numbers) leaves loss and gradients unchanged.

    Caught mutation: the likelihood mask dropped (``logpdf.sum(-1)`` without ``observed``);
    the encoder fed ``y`` without zeroing the hidden entries.
    """
    x, y, observed = _field(n=60, seed=4)
    model = _linear_model(engine, context=2 * 3)
    cfg = GPVAEConfig(engine=engine, neighbours=8, context=8, mask_rate=0.25)
    dev = torch.device("cpu")
    data = field_data(x, y, observed, cfg, device=dev, dtype=torch.float64)
    other = np.where(observed, y, np.random.default_rng(9).normal(1e3, 50.0, size=y.shape))
    data2 = field_data(x, other, observed, cfg, device=dev, dtype=torch.float64)
    idx = torch.randperm(60, generator=torch.Generator().manual_seed(0))[:25]
    results = []
    for d in (data, data2):
        torch.manual_seed(5)
        batch = gather_batch(d, idx, mask_rate=0.25, generator=torch.Generator().manual_seed(2))
        # also poison the gathered batch itself where values are missing
        poisoned = batch._replace(y=torch.where(batch.observed, batch.y, torch.full_like(batch.y, -7e2)))
        for b in (batch, poisoned):
            torch.manual_seed(5)
            model.zero_grad()
            terms = model(b)
            terms["loss"].backward()
            results.append((float(terms["loss"].detach()), [p.grad.clone() for p in model.parameters()]))
    for loss, grads in results[1:]:
        assert loss == pytest.approx(results[0][0], rel=1e-12)
        for a, b in zip(grads, results[0][1]):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_tree_path_never_lists_a_point_as_its_own_earlier_neighbour():
    """N > 512 uses KD-tree blocks: no point may appear in its own conditioning set.

    Duplicated locations are included: a twin at distance 0 is a legitimate neighbour, the
    point itself never is. Caught mutation: ``earlier = idx <= rows`` in the tree path.
    """
    rng = np.random.default_rng(0)
    pts = rng.random((3000, 2))
    pts[2000:2300] = pts[100:400]  # exact duplicates of earlier and later points
    for method in ("random", "maxmin", "sorted"):
        order = order_points(pts, method, seed=1)
        nbr = ordered_neighbours(pts, 10, order, backend="kdtree")
        own = np.arange(len(pts))[:, None]
        assert not (nbr == own).any(), method
        pos = np.empty(len(pts), dtype=np.int64)
        pos[order] = np.arange(len(pts))
        valid = nbr >= 0
        # every neighbour strictly precedes the point, and every point beyond the 10th has 10
        assert (pos[np.where(valid, nbr, 0)] < pos[:, None])[valid].all(), method
        assert valid[pos >= 10].all(), method


def _dense_conditional(model, x_cond, mean_c, var_c, x_t):
    """GP regression of z_t on the anchors' pseudo-observations, by explicit dense algebra.

    Each anchor's encoder posterior ``N(m, v)`` is the marginal prior ``N(0, s)`` times a
    likelihood ``N(u; z, e)``: ``1/e = 1/v - 1/s``, ``u = e m / v``. Then
    ``z_t | u ~ N(k_tn (K_nn + E)^-1 u, k_tt - k_tn (K_nn + E)^-1 k_nt)``.
    """
    pts = torch.cat([x_cond, x_t[None]], 0)
    with torch.no_grad():
        cov = model.kernel(pts) + model.jitter * model.kernel.outputscale[:, None, None] * torch.eye(len(pts))
    h = len(x_cond)
    means, variances = [], []
    for c in range(cov.shape[0]):
        k_nn, k_nt, k_tt = cov[c, :h, :h], cov[c, :h, h], cov[c, h, h]
        e = 1.0 / (1.0 / var_c[:, c] - 1.0 / k_tt)
        u = e * mean_c[:, c] / var_c[:, c]
        b = torch.linalg.solve(k_nn + torch.diag(e), k_nt)
        means.append(b @ u)
        variances.append(k_tt - k_nt @ b)
    return torch.stack(means), torch.stack(variances)


@pytest.mark.parametrize("h", [5, 30])
def test_neighbour_conditional_equals_dense_gaussian_conditional(h):
    """predict's q(z*) from the H nearest anchors equals the dense Gaussian conditional.

    With ``self_index`` a target that is itself an anchor is conditioned on the others.
    Caught mutations: the anchors' noise dropped from ``K_nn + E``; the encoder means used
    instead of the pseudo-observations; the anchor itself kept in its own set; the farthest
    instead of the nearest anchors used.
    """
    model = _linear_model("spa")
    rng = np.random.default_rng(3)
    xa = torch.as_tensor(rng.random((30, 2)))
    ma = torch.as_tensor(rng.normal(size=(30, 2)))
    va = torch.as_tensor(rng.random((30, 2)) * 0.5 + 0.05)
    xt = torch.cat([torch.as_tensor(rng.random((6, 2))), xa[[4, 17]]])
    self_index = np.array([-1] * 6 + [4, 17])
    mean, var = neighbour_posterior(model, xa, ma, va, xt, neighbours=h, self_index=self_index)
    for t in range(len(xt)):
        cand = np.array([a for a in range(30) if a != self_index[t]])
        d = np.linalg.norm(xa[cand].numpy() - xt[t].numpy(), axis=1)
        near = cand[np.argsort(d)[: min(h, len(cand))]]
        want_m, want_v = _dense_conditional(model, xa[near], ma[near], va[near], xt[t])
        torch.testing.assert_close(mean[t], want_m, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(var[t], want_v, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("log", [False, True])
def test_uncalibrated_predictive_variance_is_latent_spread_plus_noise(log):
    """Without calibration the predictive of y is ``W z + b + noise`` with ``z ~ q``.

    For a linear decoder its variance is exactly ``sum_l W_kl^2 v_l + s2_k`` (standardised
    units, then times ``scale^2``); for a log-modelled variable the moments are the
    log-normal ones of that Gaussian. Caught mutations: the likelihood noise dropped from the
    variance; the latent spread dropped; the scale applied once instead of squared.
    """
    model = _linear_model("spa", noise=0.4)
    rng = np.random.default_rng(5)
    mean = torch.as_tensor(rng.normal(size=(7, 2)) * 0.5)
    var = torch.as_tensor(rng.random((7, 2)) * 0.6 + 0.1)
    loc = np.array([1.0, -2.0, 0.5])
    scale = np.array([2.0, 0.5, 0.3])
    logs = np.array([log, False, log])
    m, s, mm, sm = predictive_moments(model, mean, var, loc=loc, scale=scale, log=logs, samples=100_000, seed=1)
    lin = model.decoder[0]
    w, b = lin.weight.detach(), lin.bias.detach()
    mu_std = (mean @ w.T + b).numpy()
    var_std = (var @ w.T.square()).numpy() + model.noise_var.detach().numpy()
    want_mm = loc + scale * mu_std
    want_vm = scale**2 * var_std
    # 100,000 common draws: the sample moments are within 1.5% of the exact ones
    np.testing.assert_allclose(mm, want_mm, rtol=0, atol=0.02 * np.sqrt(want_vm).max())
    np.testing.assert_allclose(sm**2, want_vm, rtol=0.03)
    want_m = np.where(logs, np.exp(want_mm + want_vm / 2), want_mm)
    want_v = np.where(logs, np.expm1(want_vm) * np.exp(2 * want_mm + want_vm), want_vm)
    np.testing.assert_allclose(m, want_m, rtol=0.02)
    np.testing.assert_allclose(s**2, want_v, rtol=0.06)


def test_hidden_value_variance_is_the_moment_estimate_and_leaves_the_elbo_alone(monkeypatch):
    """A training step folds the encoder-hidden values into ``hidden_estimate``: the moving average
    of ``(y - m)^2 - s / S`` minus that of the decoded spread ``s``, per variable; the loss and
    its gradients are the ELBO's whether or not the estimate is kept.

    Per pattern of the other variables seen, the same estimate over the hidden values of the
    locations showing that pattern, or the pooled one where too few are behind it.

    Caught mutations: the Monte Carlo correction dropped; the decoded spread not subtracted;
    the estimate fed from every observed value instead of the hidden ones; patterns coded
    with the variable's own bit.
    """
    # one step from empty moments: a pattern needs 3 hidden values in it to stand on its own
    min_count = 3 * (1 - GPVAE.HIDDEN_DECAY)
    monkeypatch.setattr(model_module, "PATTERN_MIN_COUNT", min_count)
    x, y, observed = _field(n=60, seed=4)
    cfg = GPVAEConfig(neighbours=8, context=8, mask_rate=0.25)
    data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    batch = gather_batch(data, torch.arange(60), mask_rate=0.4, generator=torch.Generator().manual_seed(2))
    hidden = batch.observed & ~batch.visible
    assert int(hidden.sum()) > 10
    plain, model = _linear_model("spa", context=6), _linear_model("spa", context=6, hidden=True)
    assert torch.equal(model.hidden_estimate, model.noise_var)  # nothing folded in yet
    grads = []
    for m in (plain, model):
        torch.manual_seed(5)
        terms = m(batch)
        grads.append((float(terms["loss"].detach()), torch.autograd.grad(terms["loss"], list(m.parameters()))))
    assert grads[0][0] == grads[1][0]
    for a, b in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # by hand, with the moments' own draws (the training's Monte Carlo stream is untouched)
    with torch.no_grad():
        mean, var = model.encode(batch.y, batch.visible, batch.context)
        eps = torch.randn((2, *mean.shape), generator=torch.Generator().manual_seed(MOMENT_SEED))
        w, b0 = model.decoder[0].weight, model.decoder[0].bias
        dec = (mean + var.sqrt() * eps) @ w.T + b0
        spread = dec.var(0, unbiased=True)
        sq = (batch.y - dec.mean(0)).square() - spread / 2
        mask = hidden.double()
        want = ((sq * mask).sum(0) - (spread * mask).sum(0)) / mask.sum(0)
    torch.testing.assert_close(model.hidden_estimate, want.clamp_min(1e-6), rtol=1e-10, atol=1e-12)
    assert not torch.allclose(model.hidden_estimate, model.noise_var, rtol=0.05)
    # the hidden values' squared error over the likelihood's predictive variance for them
    want_ratio = (sq * mask).sum(0) / ((spread * mask).sum(0) + model.noise_var.detach() * mask.sum(0))
    torch.testing.assert_close(model.hidden_ratio, want_ratio, rtol=1e-10, atol=1e-12)
    assert torch.equal(plain.hidden_ratio, torch.ones(3, dtype=plain.hidden_ratio.dtype))  # none: no scaling
    # per pattern of the other variables seen: the same estimate over the hidden values whose
    # location shows that pattern (the moving averages scale numerator and count alike)
    vis = batch.visible.numpy()
    sq_np, spread_np, hid = sq.numpy(), spread.numpy(), hidden.numpy()
    got = model.hidden_var_at(batch.visible).numpy()
    n_checked = n_pooled = 0
    for j in range(3):
        others = [i for i in range(3) if i != j]
        for pattern in {tuple(row) for row in vis[:, others]}:
            rows = np.all(vis[:, others] == pattern, axis=1)
            sel = rows & hid[:, j]
            if sel.sum() * (1 - model.HIDDEN_DECAY) < min_count * (1 - 1e-9):
                np.testing.assert_allclose(got[rows, j], float(want[j].clamp_min(1e-6)), rtol=1e-10)
                n_pooled += 1
                continue
            est = max((sq_np[sel, j].sum() - spread_np[sel, j].sum()) / sel.sum(), 1e-6)
            np.testing.assert_allclose(got[rows, j], est, rtol=1e-10)
            n_checked += 1
    assert n_checked >= 3 and n_pooled >= 1
    # the patterns partition the pooled moments
    torch.testing.assert_close(model.pattern_moments.sum(-1), model.hidden_moments, rtol=1e-12, atol=1e-12)
    # evaluation passes leave it alone
    model.eval()
    model(batch)
    torch.testing.assert_close(model.hidden_estimate, want.clamp_min(1e-6), rtol=1e-10, atol=1e-12)


def test_pattern_index_codes_the_other_variables_seen():
    """Each (location, variable) gets the bits of the *other* variables seen, in order: every
    visibility pattern of four variables against a by-hand encoding."""
    model = GPVAE(4, 2, 2, hidden_variance=True)
    assert model.n_patterns == 8
    visible = torch.tensor([[bool(c >> b & 1) for b in range(4)] for c in range(16)])
    got = model.pattern_index(visible).numpy()
    for i, row in enumerate(visible.tolist()):
        for j in range(4):
            others = [row[b] for b in range(4) if b != j]
            assert got[i, j] == sum(int(o) << b for b, o in enumerate(others))
    # beyond MAX_PATTERN_VARS variables: one pooled pattern
    wide = GPVAE(MAX_PATTERN_VARS + 1, 2, 2, hidden_variance=True)
    assert wide.n_patterns == 1
    assert not wide.pattern_index(torch.ones(3, MAX_PATTERN_VARS + 1, dtype=torch.bool)).any()


def test_hidden_variance_trains_as_off():
    """``hidden_variance=True`` estimates the moments from draws of its own: the loss and its
    gradients are those of ``hidden_variance=False``."""
    x, y, observed = _field(n=60, seed=4)
    cfg = GPVAEConfig(neighbours=8, context=8, mask_rate=0.25)
    data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    batch = gather_batch(data, torch.arange(60), mask_rate=0.4, generator=torch.Generator().manual_seed(2))
    plain, auto = _linear_model("spa", context=6), _linear_model("spa", context=6, hidden=True)
    for _ in range(2):  # the second step follows the first one's draws
        out = []
        for m in (plain, auto):
            torch.manual_seed(5)
            terms = m(batch)
            out.append((terms["loss"], torch.autograd.grad(terms["loss"], list(m.parameters()))))
        assert float(out[0][0].detach()) == float(out[1][0].detach())
        for a, b in zip(out[0][1], out[1][1]):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert bool(auto.hidden_moments[2].gt(0).all())  # the moments were kept
    assert not torch.allclose(auto.hidden_estimate, auto.noise_var, rtol=0.05)


def test_predictive_adds_the_likelihood_variance_by_default():
    """Whatever the hidden-value moments, the default predictive is ``sum_l W_kl^2 v_l + sigma_k^2``."""
    model = _linear_model("spa", noise=0.4, hidden=True)
    with torch.no_grad():  # moments giving h = (0.9, 0.05, 0.3), not used by default
        model.hidden_moments.copy_(torch.tensor([[1.0, 0.15, 0.5], [0.1, 0.1, 0.2], [1.0, 1.0, 1.0]]))
    torch.testing.assert_close(model.hidden_estimate, torch.tensor([0.9, 0.05, 0.3]))
    rng = np.random.default_rng(5)
    mean = torch.as_tensor(rng.normal(size=(7, 2)) * 0.5)
    var = torch.as_tensor(rng.random((7, 2)) * 0.6 + 0.1)
    scale = np.array([2.0, 0.5, 0.3])
    _, _, _, sm = predictive_moments(model, mean, var, loc=np.zeros(3), scale=scale, log=np.zeros(3, bool),
                                     samples=100_000, seed=1)
    w = model.decoder[0].weight.detach()
    want = scale**2 * ((var @ w.T.square()).numpy() + model.noise_var.detach().numpy())
    np.testing.assert_allclose(sm**2, want, rtol=0.03)


def test_predictive_adds_each_locations_own_variance_chunk_by_chunk():
    """Per-location added variances (one pattern each): ``sum_l W_kl^2 v_l + h_ik`` at every
    location ``i``, whatever the chunking."""
    model = _linear_model("spa", noise=0.4, hidden=True)
    rng = np.random.default_rng(6)
    mean = torch.as_tensor(rng.normal(size=(7, 2)) * 0.5)
    var = torch.as_tensor(rng.random((7, 2)) * 0.6 + 0.1)
    h = torch.as_tensor(rng.random((7, 3)) * 0.8 + 0.05)
    scale = np.array([2.0, 0.5, 0.3])
    kw = dict(loc=np.zeros(3), scale=scale, log=np.zeros(3, bool), samples=100_000, seed=1, hidden_var=h)
    _, _, _, sm = predictive_moments(model, mean, var, chunk=3, **kw)
    w = model.decoder[0].weight.detach()
    want = scale**2 * ((var @ w.T.square()).numpy() + h.numpy())
    np.testing.assert_allclose(sm**2, want, rtol=0.03)
    np.testing.assert_array_equal(predictive_moments(model, mean, var, chunk=7, **kw)[3], sm)
    with pytest.raises(ValueError, match="hidden_var has shape"):
        predictive_moments(model, mean, var, chunk=3, **{**kw, "hidden_var": h[:5]})
