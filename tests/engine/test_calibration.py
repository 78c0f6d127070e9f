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

    from geogpvae.engine.calibration import calibration_candidates
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.posterior import Posterior, split_mode
    from geogpvae.gp.kernels import LatentKernel

    def engine(kernel, **options):
        model = SimpleNamespace(context_dim=3, kernel=kernel)
        return Posterior(model=model, config=GPVAEConfig(**options), loc=np.zeros(2), scale=np.ones(2),
                         log=np.zeros(2, bool))

    built_in = LatentKernel("matern32", 2, 2)
    got = calibration_candidates(engine(built_in))
    assert got["observed"] == ["encoder", "combined", "neighbours"]
    assert got["unobserved"] == ["neighbours", "encoder", "combined", "neighbours*0.25", "neighbours*0.5",
                                 "neighbours*2", "neighbours*4"]
    assert "neighbours*2" not in calibration_candidates(engine(torch.nn.Linear(2, 2)))["unobserved"]
    assert split_mode("neighbours*4") == ("neighbours", 4.0) and split_mode("combined") == ("combined", 1.0)
    assert split_mode("neighbours*0.25") == ("neighbours", 0.25)
    clustered = engine(built_in).replace(clustered=np.array([False, True]))  # offered too (the learnt variance: test_core),
    assert calibration_candidates(clustered)["unobserved"] == [  # and longer ones (persistent patches),
        "neighbours", "encoder", "combined", "neighbours*2", "neighbours*4", "neighbours*8", "neighbours*16"]  # no shrinks


def test_the_added_variances_scored_follow_hidden_variance():
    from geogpvae.engine.calibration import NOISES, noise_choices
    from geogpvae.engine.model import GPVAE

    def engine(n_vars, hidden):
        return GPVAE(n_vars, 2, 2, hidden_variance=hidden)

    assert noise_choices(engine(3, False)) == ()  # the paper's predictive only
    assert noise_choices(engine(3, True)) == NOISES
    assert noise_choices(engine(1, True)) == ("likelihood", "hidden", "scaled")  # no other variable: no pattern


def test_another_variance_must_win_by_more_than_the_noise_of_the_held_out_values():
    """Paired per-value NLLs: a clear drop is adopted, a drop within two standard errors is not,
    nor a rise; each variable counts once whatever its number of values."""
    from geogpvae.engine.calibration import clearly_better, value_nlls

    rng = np.random.default_rng(0)
    z = rng.normal(size=(2, 400))

    def stats(scale):  # (sq, lv) of two variables whose predictive std is `scale` times the truth's
        return ([[(z[0] / scale) ** 2], [(z[1] / scale) ** 2]], [[np.full(400, 2 * np.log(scale))]] * 2)

    # the calibrated NLL is that of the best single factor: a constant rescaling changes nothing
    np.testing.assert_allclose(np.concatenate(value_nlls(*stats(3.0))), np.concatenate(value_nlls(*stats(1.0))))
    assert not clearly_better(stats(1.0), stats(3.0))
    # a variance right per value against one constant per variable: clearly better
    spread = np.exp(rng.normal(size=400))
    right = ([[z[0] ** 2], [z[1] ** 2]], [[2 * np.log(spread)]] * 2)
    wrong = ([[(z[0] * spread) ** 2], [(z[1] * spread) ** 2]], [[np.zeros(400)]] * 2)
    assert clearly_better(wrong, right) and not clearly_better(right, wrong)
    # a small, noisy gain on 30 values: below two standard errors, kept out
    few = rng.normal(size=30)
    jitter = np.exp(0.1 * rng.normal(size=30))
    a = ([[few**2]], [[np.zeros(30)]])
    b = ([[(few / jitter) ** 2]], [[2 * np.log(jitter)]])
    gain = np.mean(value_nlls(*a)[0] - value_nlls(*b)[0])
    assert not clearly_better(a, b)
    assert clearly_better(a, b, margin=0.0) == (gain > 0)


def test_each_variable_chooses_its_own_variance():
    from geogpvae.engine.calibration import choose_factors, choose_noises

    rng = np.random.default_rng(1)
    z, spread = rng.normal(size=(2, 500)), np.exp(rng.normal(size=500))
    per_value = ([z[0] ** 2], [2 * np.log(spread)])  # variable 0: the variance that follows each value
    constant = ([(z[0] * spread) ** 2], [np.zeros(500)])
    plain = ([z[1] ** 2], [np.zeros(500)])  # variable 1: both variances the same
    stats = {}
    for regime in ("observed", "unobserved"):
        stats[(regime, "encoder|likelihood")] = ([constant[0], plain[0]], [constant[1], plain[1]])
        stats[(regime, "encoder|patterns")] = ([per_value[0], plain[0]], [per_value[1], plain[1]])
    sources = {"observed": "encoder", "unobserved": "encoder"}
    chosen, picked = choose_noises(stats, sources, ("likelihood", "patterns"), 2)
    assert chosen == {"observed": ["patterns", "likelihood"], "unobserved": ["patterns", "likelihood"]}
    factors, _, _ = choose_factors(picked, {"observed": ["picked"], "unobserved": ["picked"]})
    np.testing.assert_allclose(factors[:, 0], np.mean(z[0] ** 2))  # variable 0's factor on its chosen variance
    np.testing.assert_allclose(factors[:, 1], np.mean(z[1] ** 2))


def test_of_variances_that_predict_equally_well_the_one_needing_the_smaller_correction_is_kept():
    """Calibrated, a variance 9x too small and the right one predict the same: the right one is
    kept (item 3: the predictive right before calibration), unless the first is off by no more
    than the band (2x); a variance that is right in size but clearly worse in shape is not."""
    from geogpvae.engine.calibration import choose_factors, choose_noises

    rng = np.random.default_rng(3)
    z, spread = rng.normal(size=(2, 800)), np.exp(rng.normal(size=800))
    narrow = ([(3 * z[0]) ** 2], [np.zeros(800)])  # factor ~9, same calibrated NLL as...
    right = ([z[0] ** 2], [np.full(800, np.log(9.0))])  # ...this one, factor ~1
    shaped = ([(3 * z[1]) ** 2], [2 * np.log(spread)])  # variable 1: errors 3 z spread; per-value variance, factor ~9
    size = 9 * np.mean(spread**2)  # the same errors, 3 z spread, under one variance: factor ~1, no shape
    flat = ([(3 * z[1] * spread) ** 2 / size], [np.full(800, np.log(size))])
    stats = {}
    for regime in ("observed", "unobserved"):
        stats[(regime, "encoder|likelihood")] = ([narrow[0], flat[0]], [narrow[1], flat[1]])
        stats[(regime, "encoder|hidden")] = ([right[0], shaped[0]], [right[1], shaped[1]])
    sources = {"observed": "encoder", "unobserved": "encoder"}
    chosen, picked = choose_noises(stats, sources, ("likelihood", "hidden"), 2)
    assert chosen["observed"] == ["hidden", "hidden"] and chosen["unobserved"] == ["hidden", "hidden"]
    factors, _, _ = choose_factors(picked, {"observed": ["picked"], "unobserved": ["picked"]})
    assert abs(np.log(factors[0, 0])) < 0.2 and factors[0, 1] > 5  # the right size; the right shape
    # the other way round, the likelihood variance is the right one for both and stays
    swapped = {(r, f"encoder|{a}"): stats[(r, f"encoder|{b}")]
               for r in ("observed", "unobserved") for a, b in (("likelihood", "hidden"), ("hidden", "likelihood"))}
    chosen, _ = choose_noises(swapped, sources, ("likelihood", "hidden"), 2)
    assert chosen["observed"] == ["likelihood", "likelihood"]
    # a likelihood variance 1.5x too small is within the band: kept
    mild = {(r, "encoder|likelihood"): ([[1.5 * z[0] ** 2]], [[np.zeros(800)]]) for r in ("observed", "unobserved")}
    mild.update({(r, "encoder|hidden"): ([[z[0] ** 2]], [[np.full(800, np.log(1.5))]]) for r in ("observed", "unobserved")})
    assert choose_noises(mild, sources, ("likelihood", "hidden"), 1)[0]["observed"] == ["likelihood"]


def test_the_source_is_chosen_on_the_first_variance_alone():
    """Source B wins only with the per-pattern variance; A wins with the likelihood one: A is
    kept (the predictive mean does not follow the variance), then A's own variance choice."""
    from geogpvae.engine.calibration import choose_sources

    rng = np.random.default_rng(2)
    z, spread = rng.normal(size=600), np.exp(rng.normal(size=600))

    def entry(z2, logv):
        return ([[z2]], [[logv]])

    stats = {}
    for regime in ("observed", "unobserved"):
        stats[(regime, "encoder|likelihood")] = entry((0.9 * z) ** 2, np.zeros(600))  # A, NLL ~ 1.42 (factor 0.81)
        stats[(regime, "encoder|patterns")] = entry((0.9 * z) ** 2, np.zeros(600))
        stats[(regime, "combined|likelihood")] = entry((z * spread) ** 2, np.zeros(600))  # B: worse as a constant
        stats[(regime, "combined|patterns")] = entry((0.5 * z) ** 2, 2 * np.log(spread))  # B: best of all
    candidates = {"observed": ["encoder", "combined"], "unobserved": ["encoder", "combined"]}
    factors, sources, noise, scores = choose_sources(stats, candidates, ("likelihood", "patterns"), 1)
    assert min(scores, key=scores.get).endswith("combined|patterns")  # the joint winner...
    assert sources == {"observed": "encoder", "unobserved": "encoder"}  # ...is not taken
    assert noise == {"observed": ["likelihood"], "unobserved": ["likelihood"]}  # A's variances tie
    np.testing.assert_allclose(factors[:, 0], np.mean((0.9 * z) ** 2))
    # without variances to choose, the plain choice of sources
    plain = {(r, m.partition("|")[0]): v for (r, m), v in stats.items() if m.endswith("|likelihood")}
    _, sources, noise, _ = choose_sources(plain, candidates, (), 1)
    assert sources == {"observed": "encoder", "unobserved": "encoder"} and noise == {}


def test_calibration_groups_partition_the_observed_values():
    from geogpvae.engine.calibration import calibration_groups

    observed = np.random.default_rng(2).random((400, 3)) > 0.3
    groups = calibration_groups(observed, 5, seed=11)
    assert np.all(groups[~observed] == -1)
    assert set(np.unique(groups[observed])) == set(range(5))
    sizes = np.bincount(groups[observed], minlength=5) / observed.sum()
    assert np.all(np.abs(sizes - 0.2) < 0.04), sizes
    assert np.array_equal(groups, calibration_groups(observed, 5, seed=11))  # reproducible
    with pytest.raises(ValueError, match="at least one round"):
        calibration_groups(observed, 0, seed=11)


def test_calibration_hides_every_observed_value_once_where_no_gaps_cluster(monkeypatch):
    """Where values are missing at random, the rounds hide a partition of the observed values
    (each one once, besides whole locations), not independent random draws, which would leave
    about 60 % of them never hidden."""
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine import calibration
    from geogpvae.engine.core import GPVAEEngine

    field = make_field(grid_points((14, 14), 1 / 13), n_vars=2, n_latent=1, lengthscale=0.2, missing=0.3, rng=1)
    eng = GPVAEEngine(epochs=3, progress=False, calibrate=False).fit(field.points, field.values)
    assert not eng.clustered_gaps_.any()
    hidden = []
    monkeypatch.setattr(calibration, "score_hidden", lambda engine, hide, *a, **k: hidden.append(hide.copy()))
    calibration.calibrate(eng.posterior(), rounds=5, whole=0.0)
    count = np.sum(hidden, axis=0)
    assert len(hidden) == 5
    assert np.all(count[eng._observed] == 1) and not count[~eng._observed].any()


def test_locations_deep_in_a_gap_are_told_apart_and_their_source_chosen_on_values_as_deep():
    from types import SimpleNamespace

    import torch

    from geogpvae.engine.calibration import (
        DEEP_SPACINGS,
        MIN_VALUES,
        choose_deep,
        deep_distance,
    )
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.posterior import Posterior

    grid = np.stack(np.meshgrid(np.arange(20.0), np.arange(20.0), indexing="ij"), -1).reshape(-1, 2) * 0.5
    assert deep_distance(grid) == pytest.approx(DEEP_SPACINGS * 0.5)  # three spacings of 0.5
    post = Posterior(model=None, config=GPVAEConfig(), loc=np.zeros(1), scale=np.ones(1), log=np.zeros(1, bool),
                     deep_distance=1.5)
    anchor = {"x": torch.as_tensor(grid[grid[:, 0] < 5.0])}  # the data end at x = 4.5
    targets = torch.as_tensor([[4.5, 1.0], [5.5, 1.0], [6.0, 1.0], [6.5, 1.0], [9.0, 3.0]])
    picked = post.deep_rows(targets, anchor, torch.arange(5))
    assert picked.tolist() == [3, 4]  # farther than 1.5 from every anchor (6.0 is exactly 1.5: not deep)
    # the source with the lowest calibrated NLL of the deep held-out values, if there are enough
    rng = np.random.default_rng(0)
    good, bad = rng.normal(0, 1, 40), rng.normal(0, 3, 40)
    stats = {("deep", "neighbours|likelihood"): ([[bad ** 2]], [[np.zeros(40)]]),
             ("deep", "neighbours*8|likelihood"): ([[good ** 2]], [[np.zeros(40)]])}
    chosen, scores = choose_deep(stats, ["neighbours", "neighbours*8"], ("likelihood", "hidden"))
    assert chosen == "neighbours*8" and scores["deep:neighbours*8"] < scores["deep:neighbours"]
    few = {k: ([[v[0][0][0][: MIN_VALUES - 1]]], [[v[1][0][0][: MIN_VALUES - 1]]]) for k, v in stats.items()}
    assert choose_deep(few, ["neighbours", "neighbours*8"], ("likelihood",)) == (None, {})


def test_where_gaps_cluster_the_fit_measures_how_deep_a_gap_is():
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine.calibration import DEEP_SPACINGS
    from geogpvae.engine.core import GPVAEEngine

    f = make_field(grid_points((20, 20), 1 / 19), n_vars=2, n_latent=2, lengthscale=0.3, missing=0.0,
                   noise=0.05, rng=3)
    values = f.values.copy()
    values[(np.abs(f.points[:, 0] - 0.5) < 0.2) & (np.abs(f.points[:, 1] - 0.5) < 0.2)] = np.nan  # one square hole
    opts = dict(epochs=4, progress=False, neighbours=6, seed=0, encoder_hidden=(16,), decoder_hidden=(16,))
    eng = GPVAEEngine(**opts).fit(f.points, values)
    assert eng.clustered_gaps_.all() and eng.deep_distance_ == pytest.approx(DEEP_SPACINGS / 19)
    scattered = f.values.copy()
    scattered[np.random.default_rng(0).random(len(scattered)) < 0.2, 0] = np.nan  # at random: nothing deep
    assert GPVAEEngine(**opts).fit(f.points, scattered).deep_distance_ is None
