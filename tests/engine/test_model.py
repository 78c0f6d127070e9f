"""The GPVAE module's pieces: encoder masking, likelihood term, shapes, noise floor."""

from __future__ import annotations

import math

import pytest
import torch

from geogpvae.engine.model import GPVAE, mlp


def _model(**kw):
    torch.manual_seed(0)
    return GPVAE(3, 2, 2, encoder_hidden=(16,), decoder_hidden=(16,), **kw).double()


def test_encoder_never_sees_hidden_values():
    model = _model()
    y = torch.randn(5, 3, dtype=torch.float64)
    visible = torch.tensor([[1, 0, 1]] * 5, dtype=torch.bool)
    other = y.clone()
    other[:, 1] = 1e6  # changes only what the encoder must not see
    for a, b in zip(model.encode(y, visible), model.encode(other, visible)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    mean, var = model.encode(y, visible)
    assert mean.shape == var.shape == (5, 2) and bool((var > 0).all())


def test_expected_loglik_equals_gaussian_logpdf_on_observed_entries():
    """With a point posterior (var -> 0) the estimate is the exact Gaussian log density."""
    model = _model()
    y = torch.randn(4, 3, dtype=torch.float64)
    observed = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=torch.bool)
    mean = torch.randn(4, 2, dtype=torch.float64)
    var = torch.zeros(4, 2, dtype=torch.float64)
    got = model.expected_loglik(y, observed, mean, var, n_samples=3)
    pred, noise = model.decode(mean), model.noise_var
    dense = torch.distributions.Normal(pred, noise.sqrt()).log_prob(y)
    want = torch.where(observed, dense, torch.zeros_like(dense)).sum(-1)
    torch.testing.assert_close(got, want)
    assert float(got[2].detach()) == 0.0  # nothing observed: no likelihood term


def test_noise_variance_starts_at_its_initial_value_and_has_a_floor():
    model = _model(noise=0.3)
    torch.testing.assert_close(model.noise_var, torch.full((3,), 0.3, dtype=torch.float64), atol=1e-6, rtol=0)
    with torch.no_grad():
        model.raw_noise.fill_(-1e4)
    assert bool((model.noise_var > 0).all())


def test_context_is_required_when_the_encoder_has_one():
    model = GPVAE(2, 2, 2, context_dim=4, encoder_hidden=(8,), decoder_hidden=(8,))
    y, visible = torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="context"):
        model.encode(y, visible)
    mean, _ = model.encode(y, visible, torch.zeros(3, 4))
    assert mean.shape == (3, 2)


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown engine"):
        GPVAE(2, 2, 2, engine="dense")


def test_mlp_layout():
    net = mlp([4, 8, 2])
    linear = [m for m in net if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(4, 8), (8, 2)]
    assert math.isfinite(float(net(torch.zeros(1, 4)).sum()))
