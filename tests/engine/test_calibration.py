"""The NumPy side of the variance calibration: hidden values and the factors."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.engine.calibration import choose_factors, hide_values, regime_factors


def test_hide_values_never_hides_a_whole_variable_and_caps_the_rows():
    observed = np.ones((50, 2), dtype=bool)
    observed[:, 1] = False
    observed[7, 1] = True  # a variable with one observed value keeps it
    rng = np.random.default_rng(0)
    hide, rows = hide_values(observed, rng, fraction=0.9, whole=0.5, max_targets=10)
    assert not hide[~observed].any()
    assert not hide[7, 1]
    assert rows.size == 10 and np.all(np.diff(rows) > 0) and hide[rows].any(1).all()


def test_hide_values_takes_the_given_values_one_by_one():
    observed = np.ones((60, 2), dtype=bool)
    observed[:5, 0] = False
    shaped = np.zeros((60, 2), dtype=bool)
    shaped[:12, 0] = True  # a gap (its first five entries are not observed: never hidden)
    hide, rows = hide_values(observed, np.random.default_rng(0), fraction=0.5, whole=0.0, max_targets=100,
                             values=shaped)
    assert np.array_equal(hide, shaped & observed) and np.array_equal(rows, np.arange(5, 12))


def test_regime_factor_is_the_mean_squared_z_and_its_nll_the_gaussian_one():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 2.0, 400)
    logv = np.log(rng.uniform(0.5, 2.0, 400))
    f, nll = regime_factors([[z[:150] ** 2, z[150:] ** 2]], [[logv[:150], logv[150:]]])
    assert f[0] == pytest.approx(np.mean(z**2))
    # dense: -log N(e | 0, f v) averaged, with e^2 / v = z^2
    expected = np.mean(0.5 * np.log(2 * np.pi * f[0] * np.exp(logv)) + 0.5 * z**2 / f[0])
    assert nll == pytest.approx(expected)


def test_few_values_keep_factor_one_and_none_give_no_score():
    f, nll = regime_factors([[np.full(5, 4.0)], []], [[np.zeros(5)], []])
    assert f.tolist() == [1.0, 1.0] and nll is not None
    assert regime_factors([[]], [[]])[1] is None


def test_choose_factors_picks_the_lowest_nll_and_borrows_across_regimes():
    n = 100
    good, bad = np.ones(n), np.full(n, 9.0)
    flat = np.zeros(n)
    stats = {
        ("observed", "encoder"): ([[bad], [bad]], [[flat], [flat]]),
        ("observed", "combined"): ([[good * 1.5], [good * 4]], [[flat], [flat]]),
        ("unobserved", "neighbours"): ([[good * 2], []], [[flat], []]),
    }
    candidates = {"observed": ["encoder", "combined"], "unobserved": ["neighbours"]}
    factors, chosen, nll = choose_factors(stats, candidates)
    assert chosen == {"observed": "combined", "unobserved": "neighbours"}
    assert factors[0].tolist() == [1.5, 4.0]
    # variable 1 has no held-out value without observations of its own: it borrows 4
    assert factors[1].tolist() == [2.0, 4.0]
    assert set(nll) == {"observed:encoder", "observed:combined", "unobserved:neighbours"}


def test_stretched_neighbours_are_candidates_only_where_nothing_is_observed():
    from types import SimpleNamespace

    import torch

    from geogpvae.engine.calibration import calibration_candidates, split_mode
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.gp.kernels import LatentKernel

    def engine(kernel, **options):
        model = SimpleNamespace(context_dim=3, kernel=kernel)
        return SimpleNamespace(config=GPVAEConfig(**options), model=model)

    built_in = LatentKernel("matern32", 2, 2)
    got = calibration_candidates(engine(built_in))
    assert got["observed"] == ["encoder", "combined", "neighbours"]
    assert got["unobserved"] == ["neighbours", "encoder", "combined", "neighbours*2", "neighbours*4"]
    assert "neighbours*2" not in calibration_candidates(engine(torch.nn.Linear(2, 2)))["unobserved"]
    assert calibration_candidates(engine(built_in, extra={"stretches": []}))["unobserved"] == [
        "neighbours", "encoder", "combined"]
    assert split_mode("neighbours*4") == ("neighbours", 4.0) and split_mode("combined") == ("combined", 1.0)
    clustered = engine(built_in)
    clustered.clustered_gaps_ = np.array([False, True])  # judged on random holes: not for gaps
    assert "neighbours*2" not in calibration_candidates(clustered)["unobserved"]
