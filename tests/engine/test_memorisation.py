"""Calibrated variances widened by what the model recalls of its training values (``extra={"memorisation": True}``)."""

import numpy as np
import pytest

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine import memorisation
from geogpvae.engine.calibration import REGIMES, with_memorisation
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.memorisation import MIN_RATIO_VALUES, RATIO_RANGE, memorisation_ratios
from geogpvae.engine.state import engine_state, restore_engine
from geogpvae.engine.training import TrainState

SMALL = dict(neighbours=6, encoder_hidden=(16,), decoder_hidden=(16,), samples=4, epochs=15)


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((16, 16), 1 / 15), n_vars=2, n_latent=2, lengthscale=0.2,
                      missing=0.3, noise=0.05, rng=8)


def test_each_regime_and_variable_takes_the_ratio_of_its_chosen_source_and_variance():
    factors = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    ratios = {"observed:combined|likelihood": 1.5, "observed:combined|hidden": 1.25,
              "unobserved:neighbours*2|likelihood": 1.1, "observed:encoder|likelihood": 9.0}
    sources = {"observed": "combined", "unobserved": "neighbours*2"}
    noise = {"observed": ["likelihood", "hidden", "scaled"], "unobserved": ["likelihood"] * 3}
    out = with_memorisation(factors, ratios, sources, noise)
    assert np.allclose(out, [[1.5, 2.5, 3.0], [4.4, 5.5, 6.6]])  # "combined|scaled" absent: unchanged
    assert factors[0, 0] == 1.0  # a new array
    plain = with_memorisation(factors, {"observed:encoder": 2.0}, {"observed": "encoder", "unobserved": "neighbours"}, {})
    assert np.allclose(plain, [[2.0, 4.0, 6.0], [4.0, 5.0, 6.0]])


def _fake_scores(monkeypatch, never: float, seen: float, n: int, calls: list):
    """score_hidden that appends z^2 = ``never`` for the check pass and ``seen`` for the other."""
    def score(engine, hide, rows, candidates, stats, noises=(), scored=None):
        calls.append((hide.copy(), scored.copy()))
        value = never if len(calls) == 1 else seen
        for sq, lv in stats.values():
            sq[0].append(np.full(n, value))
            lv[0].append(np.zeros(n))
    monkeypatch.setattr(memorisation, "score_hidden", score)


@pytest.fixture(scope="module")
def fitted(field):
    return GPVAEEngine(calibrate=False, progress=False, **SMALL).fit(field.points, field.values)


def test_the_ratio_is_never_over_seen_scaled_to_the_fit_s_epochs_and_clipped(fitted, field, monkeypatch):
    check = field.observed & (np.random.default_rng(0).random(field.observed.shape) < 0.1)
    calls = []
    _fake_scores(monkeypatch, never=1.2, seen=1.0, n=MIN_RATIO_VALUES, calls=calls)
    state = TrainState(epoch=4)
    ratios = memorisation_ratios(fitted, fitted.model, state, check)
    assert ratios and all(r == pytest.approx(1.2) for r in ratios.values())
    # the check values stay hidden in both passes; each pass scores its own values only
    (hide1, scored1), (hide2, scored2) = calls
    assert np.array_equal(scored1, check) and (hide1 & check).sum() == check.sum()
    assert np.array_equal(hide1, hide2) and not (scored2 & check).any() and scored2.any()
    assert np.array_equal(scored1 | scored2, hide1)
    calls.clear()
    grown = memorisation_ratios(fitted, fitted.model, state, check, budget=10)  # 1 + 0.2 * 10 / 4
    assert all(r == pytest.approx(1.5) for r in grown.values())
    calls.clear()
    assert all(r == RATIO_RANGE[1] for r in memorisation_ratios(fitted, fitted.model, state, check, budget=40).values())


def test_no_ratio_below_one_nor_from_too_few_values(fitted, field, monkeypatch):
    check = field.observed & (np.random.default_rng(1).random(field.observed.shape) < 0.1)
    _fake_scores(monkeypatch, never=0.5, seen=1.0, n=MIN_RATIO_VALUES, calls=[])
    assert all(r == 1.0 for r in memorisation_ratios(fitted, fitted.model, TrainState(epoch=4), check).values())
    _fake_scores(monkeypatch, never=3.0, seen=1.0, n=MIN_RATIO_VALUES - 1, calls=[])
    assert memorisation_ratios(fitted, fitted.model, TrainState(epoch=4), check) == {}


def test_the_candidate_predicts_with_its_averaged_weights_and_is_left_as_it_was(fitted, field, monkeypatch):
    check = field.observed & (np.random.default_rng(2).random(field.observed.shape) < 0.1)
    before = {k: v.clone() for k, v in fitted.model.state_dict().items()}
    average = {k: v + 1.0 for k, v in before.items() if v.is_floating_point()}
    seen = []

    def score(engine, hide, rows, candidates, stats, noises=(), scored=None):
        seen.append({k: v.clone() for k, v in engine.model.state_dict().items()})
    monkeypatch.setattr(memorisation, "score_hidden", score)
    memorisation_ratios(fitted, fitted.model, TrainState(epoch=4, average=average), check)
    assert len(seen) == 2 and all(bool((s[k] == average[k]).all()) for s in seen for k in average)
    after = fitted.model.state_dict()
    assert all(bool((before[k] == after[k]).all()) for k in before)


def test_a_fit_widens_its_calibrated_variances_by_the_ratios_and_leaves_the_means():
    field = make_field(grid_points((36, 36), 1 / 35), n_vars=2, n_latent=2, lengthscale=0.2,
                       missing=0.3, noise=0.05, rng=8)  # enough check values for a ratio
    opts = dict(progress=False, seed=3, **SMALL)
    plain = GPVAEEngine(**opts).fit(field.points, field.values)
    wider = GPVAEEngine(**opts, extra={"memorisation": True}).fit(field.points, field.values)
    assert plain.memorisation_ == {} and wider.memorisation_
    assert wider.predict_mode_ == plain.predict_mode_ and wider.noise_ == plain.noise_
    expected = with_memorisation(plain.calibration_, wider.memorisation_, plain.predict_mode_, plain.noise_)
    assert np.allclose(wider.calibration_, expected)
    p, w = plain.predict(), wider.predict()
    mean_p, std_p, mean_w, std_w = p.mean, p.std, w.mean, w.std
    assert np.allclose(mean_p, mean_w)
    missing = ~field.observed
    ratio = (std_w / std_p)[missing] ** 2
    assert np.all(ratio >= 1 - 1e-6) and np.all(ratio <= RATIO_RANGE[1] * (1 + 1e-6))
    # a checkpoint and a model file keep the ratios (a fit resumed after the selection needs them)
    again = restore_engine(GPVAEEngine, engine_state(wider), progress=False)
    assert again.memorisation_ == wider.memorisation_
    assert set(REGIMES) >= {k.split(":")[0] for k in wider.memorisation_}


def test_auto_corrects_whole_field_fits_only_and_never_without_calibration():
    from geogpvae.engine.config import FULL_BATCH, GPVAEConfig
    from geogpvae.engine.memorisation import corrects_memorisation

    auto = GPVAEConfig(extra={"memorisation": "auto"})
    assert corrects_memorisation(auto, FULL_BATCH) and not corrects_memorisation(auto, FULL_BATCH + 1)
    assert corrects_memorisation(GPVAEConfig(extra={"memorisation": "auto"}, batch_size=5000), 3000)
    assert corrects_memorisation(GPVAEConfig(extra={"memorisation": True}), 100_000)
    assert not corrects_memorisation(GPVAEConfig(extra={"memorisation": False}), 100)
    assert not corrects_memorisation(GPVAEConfig(calibrate=False, extra={"memorisation": True}), 100)


def test_check_mask_marks_the_held_out_values_of_their_rows():
    import torch

    from geogpvae.engine.memorisation import check_mask
    from geogpvae.engine.stopping import CheckValues

    check = CheckValues(rows=torch.tensor([1, 4]), mask=torch.tensor([[True, False], [True, True]]),
                        y=torch.zeros(2, 2))
    expected = np.zeros((6, 2), dtype=bool)
    expected[1, 0] = expected[4] = True
    assert np.array_equal(check_mask(check, (6, 2)), expected)


def test_with_the_stopping_rule_the_fitted_model_measures_its_own_recall_once(field, monkeypatch):
    """The check values stay out of training to the end: the kept weights themselves (no average,
    no scaling to a budget) predict them, once, after training, not the beta candidate."""
    from geogpvae.engine import core

    calls = []

    def ratios(engine, model, state, check, budget=None):
        calls.append((model, state, check.copy(), budget, engine._data.check is not None))
        return {"observed:encoder": 1.25}
    monkeypatch.setattr(core, "memorisation_ratios", ratios)
    rule = {"every": 5, "patience": 10, "growth": 0.0, "min_steps": 10}
    opts = {**SMALL, "epochs": None}
    eng = GPVAEEngine(progress=False, seed=4, holdout=0.1, **opts,
                      extra={"memorisation": True, "stop_rule": rule, "stop_ceiling": 0.06, "selection_share": 0.02})
    eng.fit(field.points, field.values)
    assert len(calls) == 1
    model, state, check, budget, held_out = calls[0]
    assert model is eng.model and budget is None and held_out  # measured before the check values went back
    assert state.average is None and state.epoch == eng.train_state.epoch and state.done
    assert check.any() and not (check & ~field.observed).any() and check.sum() < 0.2 * field.observed.sum()
    assert eng.memorisation_ == {"observed:encoder": 1.25}
    assert eng._data.check is None  # prediction from every observed value
