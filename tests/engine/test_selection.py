"""``beta="auto"``: the KL weight chosen from held-out observed values of the field being fitted."""

import copy
import dataclasses

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.selection import (
    KL_FACTORS,
    MIN_SELECTION_EPOCHS,
    SELECTION_SHARE,
    WHOLE_FIELD_SELECTION_SHARE,
    Selection,
    check_score,
    select_kl_factor,
    selection_epochs,
    selection_share,
)
from geogpvae.engine.check_values import check_entries, predictive_nll
from geogpvae.engine.data import CONTEXT_HIDING_SHARE, field_data

SMALL = dict(neighbours=6, encoder_hidden=(16,), decoder_hidden=(16,), samples=4)


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((16, 16), 1 / 15), n_vars=2, n_latent=2, lengthscale=0.2,
                      missing=0.4, noise=0.05, rng=4)


def _data(field, cfg, check):
    y = np.where(field.observed, field.values, 0.0)
    y = (y - np.nanmean(field.values, 0)) / np.nanstd(field.values, 0) * field.observed
    return field_data(field.points, y, field.observed, cfg, device=torch.device("cpu"),
                      dtype=torch.float32, check=check)


def _build(cfg, n_vars, n_points):
    def build(factor):
        eng = GPVAEEngine(cfg, progress=False)
        eng.lengthscale_, eng.noise_start_ = 0.1, np.full(n_vars, 0.05)
        return eng._build_model(n_vars, 2, n_points, factor)
    return build


def test_default_is_auto_and_explicit_weights_are_honoured():
    cfg = GPVAEConfig()
    assert cfg.beta == "auto"
    assert cfg.kl_weight(1000, 0.5) == 0.5
    assert GPVAEConfig(engine="hpa", neighbours=20).kl_weight(1000, 0.2) == pytest.approx(10.0)
    assert GPVAEConfig(beta=0.3).kl_weight(1000, 0.2) == 0.3  # a number given wins
    with pytest.raises(ValueError, match='"auto"'):
        GPVAEConfig(beta="automatic")
    assert selection_epochs(29) == 11 and selection_epochs(1) == 1


def test_candidates_train_at_least_three_epochs_when_the_budget_is_few():
    """A million-location field gets 5 epochs; 35 % of them (2) ranked the candidates too early."""
    assert MIN_SELECTION_EPOCHS == 3
    # ... where the budget leaves the chosen one an epoch on every observed value after them
    assert [selection_epochs(t) for t in (1, 2, 3, 4, 5, 6, 8, 9, 29)] == [1, 1, 2, 3, 3, 3, 3, 4, 11]
    assert selection_epochs(5, share=0.15) == 3 and selection_epochs(100, share=0.15) == 15


def test_a_five_epoch_budget_chooses_after_three_epochs(field):
    seen = []
    eng = GPVAEEngine(epochs=5, calibrate=False, progress=False, **SMALL).fit(
        field.points, field.values,
        callback=lambda e: seen.append((e.selection_ and e.selection_.factor, e.train_state.epoch)))
    first, second = KL_FACTORS  # the callback sees each candidate's epochs (for checkpoints), then the rest
    assert seen == [(first, 1), (first, 2), (first, 3), (second, 1), (second, 2), (second, 3), (None, 4), (None, 5)]
    assert len(eng.history["loss"]) == 5 and set(eng.kl_scores_) == set(KL_FACTORS)


def test_selection_keeps_the_candidate_that_predicts_held_out_values_best(field):
    cfg = GPVAEConfig(epochs=300, **SMALL)
    check = check_entries(field.observed, 0.1, seed=0)
    data = _data(field, cfg, check)
    # a KL weight of 1e4 pins the latents to the prior: its held-out predictions are far worse
    chosen = select_kl_factor(_build(cfg, 2, len(field.points)), data, cfg, epochs=150, factors=(1e4, 1.0))
    assert set(chosen.scores) == {1e4, 1.0}
    assert chosen.factor == 1.0 and chosen.scores[1.0] < chosen.scores[1e4] - 0.1, chosen.scores
    core = chosen.model
    assert core.beta == 1.0 and chosen.state.epoch == 150 and not chosen.state.done
    # the score kept is the chosen model's, with its moving-average weights (as it will be used)
    assert check_score(core, data, chosen.state, seed=cfg.seed) == pytest.approx(chosen.scores[1.0])
    averaged = copy.deepcopy(core)
    averaged.load_state_dict({**core.state_dict(), **chosen.state.average})
    rows = data.check.rows
    eps = torch.randn((16, len(rows), core.latent_dim), generator=torch.Generator().manual_seed(cfg.seed + 31))
    want = predictive_nll(averaged.eval(), (data.y[rows], data.observed[rows], data.context[rows]), data.check, eps)
    assert chosen.scores[1.0] == pytest.approx(want, rel=1e-6)
    # scored on the means alone (values missing at random): one variance per variable
    flat = predictive_nll(averaged.eval(), (data.y[rows], data.observed[rows], data.context[rows]), data.check, eps,
                          shape=torch.tensor([False, False]))
    got = check_score(core, data, chosen.state, seed=cfg.seed, shape=np.array([False, False]))
    assert got == pytest.approx(flat, rel=1e-6) and got != pytest.approx(want, rel=1e-3)


def test_check_values_never_reach_the_candidates_training(field):
    """Changing the held-out values changes the candidates' scores, never their weights."""
    cfg = GPVAEConfig(epochs=20, **SMALL)
    check = check_entries(field.observed, 0.1, seed=0)
    assert check.sum() > 10
    data = _data(field, cfg, check)
    # the same field with other values where the check values are, in the training arrays too
    held = torch.as_tensor(check)
    moved = dataclasses.replace(data, y=torch.where(held, data.y + 5.0, data.y),
                                check=dataclasses.replace(data.check, y=data.check.y + 5.0 * data.check.mask))
    a, b = (select_kl_factor(_build(cfg, 2, len(field.points)), d, cfg, epochs=5, factors=(1.0,))
            for d in (data, moved))
    for name, value in a.model.state_dict().items():
        torch.testing.assert_close(b.model.state_dict()[name], value, rtol=0, atol=0)
    assert a.scores[1.0] != pytest.approx(b.scores[1.0])


def test_fit_chooses_records_and_continues_on_every_value(field):
    seen = []
    eng = GPVAEEngine(epochs=12, calibrate=False, progress=False, **SMALL).fit(
        field.points, field.values,
        callback=lambda e: seen.append((e.train_state.epoch, e._data.check)) if e.selection_ is None else None)
    # after the selection (3 epochs of 12: a whole-field fit) the chosen candidate trains on
    # every observed value
    assert selection_epochs(12, selection_share(GPVAEConfig(**SMALL), len(field.points))) == 3
    assert [epoch for epoch, _ in seen] == list(range(4, 13)) and all(c is None for _, c in seen)
    assert set(eng.kl_scores_) == set(KL_FACTORS) == {1.0, 0.2}
    assert eng.kl_factor_ == min(eng.kl_scores_, key=eng.kl_scores_.get)
    assert eng.model.beta == eng.kl_factor_
    assert len(eng.history["loss"]) == 12  # the chosen candidate's 3 selection epochs, then 9 more
    assert eng._data.check is None and torch.equal(eng._data.observed.cpu(), torch.as_tensor(field.observed))
    # the choice travels with the saved model
    again = GPVAEEngine.from_state_dict(eng.state_dict())
    assert again.kl_factor_ == eng.kl_factor_ and again.kl_scores_ == eng.kl_scores_
    # an explicit weight trains one model, with that weight
    fixed = GPVAEEngine(epochs=12, calibrate=False, beta=0.7, progress=False, **SMALL).fit(field.points, field.values)
    assert fixed.kl_scores_ == {} and fixed.model.beta == 0.7


@pytest.mark.parametrize("epochs", [2, 8])
def test_a_stop_asked_in_a_candidates_last_epoch_interrupts_the_selection(field, epochs):
    # a 2-epoch fit gives each candidate one epoch: the only poll comes after the last epoch
    # (a signal there used to be ignored, and the run went on to its end)
    opts = dict(epochs=epochs, calibrate=False, seed=2, progress=False, **SMALL)
    cfg = GPVAEConfig(epochs=epochs, **SMALL)
    n = selection_epochs(epochs, selection_share(cfg, field.points.shape[0]))
    polls = {"n": 0}

    def stop():  # asked during the first candidate's last epoch
        polls["n"] += 1
        return polls["n"] >= n

    stopped = GPVAEEngine(**opts).fit(field.points, field.values, should_stop=stop)
    assert stopped.interrupted and stopped.kl_factor_ is None
    # the first candidate has trained, not yet been scored: a checkpoint resumes from there
    assert stopped.selection_.factor == KL_FACTORS[0] and stopped.train_state.epoch == n and not stopped.kl_scores_


def test_interrupted_during_selection_resumes_as_an_uninterrupted_run(field):
    opts = dict(epochs=8, calibrate=False, seed=2, progress=False, **SMALL)
    full = GPVAEEngine(**opts).fit(field.points, field.values)
    polls = {"n": 0}

    def stop():  # a signal during the second candidate's training (3 epochs each)
        polls["n"] += 1
        return polls["n"] >= 5

    saved = []  # as a batch job does: a checkpoint after every epoch, the last one kept
    stopped = GPVAEEngine(**opts).fit(field.points, field.values, should_stop=stop,
                                      callback=lambda e: saved.append(e.checkpoint()))
    assert stopped.interrupted and stopped.kl_factor_ is None
    # the checkpoint keeps the first candidate's score and model, and the second's epochs so far
    snapshot = saved[-1]
    after = stopped.checkpoint()  # the engine's own, after the stop, says the same
    assert snapshot["engine"]["kl_factor"] is None is after["engine"]["kl_factor"]
    assert (after["selection"]["scores"], after["selection"]["factor"]) == (
        snapshot["selection"]["scores"], snapshot["selection"]["factor"])
    first, second = KL_FACTORS
    assert snapshot["selection"]["scores"] == {first: full.kl_scores_[first]}
    assert snapshot["selection"]["factor"] == second and snapshot["train"]["epoch"] == 2
    trained = []  # the candidates' epochs the resumed run trains
    resumed = GPVAEEngine(**opts).fit(field.points, field.values, resume=snapshot,
                                      callback=lambda e: trained.append(e.selection_ and e.selection_.factor))
    assert [f for f in trained if f is not None] == [second] * (stopped.selection_.epochs - 2)  # the rest only
    assert not resumed.interrupted and resumed.kl_factor_ == full.kl_factor_
    assert resumed.kl_scores_ == pytest.approx(full.kl_scores_, rel=1e-6)
    assert resumed.history["loss"] == pytest.approx(full.history["loss"], rel=1e-6)
    for name, value in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[name], value, rtol=1e-5, atol=1e-6)
    # a selection checkpoint is the selection's: refused with a fixed beta
    with pytest.raises(ValueError, match="beta='auto'"):
        GPVAEEngine(**{**opts, "beta": 1.0}).fit(field.points, field.values, resume=snapshot)
    # stopped after the selection, the resumed run keeps what it chose and the scores it chose by
    later = {"n": 0}

    def stop_later():
        later["n"] += 1
        return later["n"] >= 7  # the first epoch after the two candidates' three

    after = GPVAEEngine(**opts).fit(field.points, field.values, should_stop=stop_later)
    assert after.interrupted and after.kl_factor_ == full.kl_factor_
    again = GPVAEEngine(**opts).fit(field.points, field.values, resume=after.checkpoint())
    assert again.kl_scores_ == pytest.approx(full.kl_scores_) and again.state_dict()["kl_scores"] == again.kl_scores_


def test_too_few_values_to_hold_out_keep_the_base_weight():
    f = make_field(grid_points((5, 6), 1 / 5), n_vars=2, missing=0.5, rng=1)  # < 20 observed per variable
    eng = GPVAEEngine(epochs=4, calibrate=False, neighbours=4, encoder_hidden=(8,), decoder_hidden=(8,),
                      samples=4, progress=False).fit(f.points, f.values)
    assert eng.kl_factor_ == 1.0 and eng.kl_scores_ == {} and len(eng.history["loss"]) == 4


@pytest.mark.parametrize("outage, want", [
    (False, [False, False]),  # values missing at random: the means alone rank the candidates
    (True, [True, False]),  # the variable whose gaps cluster keeps the variances' shape
])
def test_fit_scores_the_candidates_as_the_gaps_ask(field, monkeypatch, outage, want):
    from geogpvae.engine import core

    asked = {}

    def fake(build, data, config, *, shape, **kw):
        asked["shape"] = np.asarray(shape).tolist()
        return Selection(factor=None)  # as if interrupted: fit returns at once

    monkeypatch.setattr(core, "select_kl_factor", fake)
    values = field.values.copy()
    if outage:  # a 6 x 6 outage of the first variable in the 16 x 16 grid
        grid = values[:, 0].reshape(16, 16)
        grid[4:10, 4:10] = np.nan
    eng = GPVAEEngine(calibrate=False, progress=False, epochs=4, **SMALL).fit(field.points, values)
    assert eng.clustered_gaps_.tolist() == [outage, False]
    assert asked["shape"] == want


@pytest.mark.parametrize("outage, batch, want", [
    (False, None, [True, True]),  # values missing at random: hidden values leave the context
    (True, None, [False, True]),  # not where a variable's gaps cluster (outage tuning fields)
    (False, 64, None),  # nor with mini-batches (its cost, no gain on the tuning fields)
])
def test_fit_takes_hidden_values_out_of_the_context_where_gaps_do_not_cluster(field, monkeypatch, outage, batch, want):
    from geogpvae.engine import core

    seen = {}

    def fake(build, data, config, **kw):
        seen["hiding"] = None if data.context_hiding is None else data.context_hiding.tolist()
        seen["share"] = data.context_hiding_share
        return Selection(factor=None)

    monkeypatch.setattr(core, "select_kl_factor", fake)
    values = field.values.copy()
    if outage:
        values[:, 0].reshape(16, 16)[4:10, 4:10] = np.nan
    GPVAEEngine(calibrate=False, progress=False, epochs=4, batch_size=batch, **SMALL).fit(field.points, values)
    assert seen["hiding"] == want
    assert want is None or seen["share"] == CONTEXT_HIDING_SHARE == 0.5


def test_whole_field_fits_choose_after_a_fifth_of_the_budget():
    """Small fields (every step the whole field) train each candidate for 20 % of the budget,
    mini-batch fields for 35 %."""
    cfg = GPVAEConfig()
    assert selection_share(cfg, 359) == WHOLE_FIELD_SELECTION_SHARE == 0.2
    assert selection_epochs(cfg.n_epochs(359), selection_share(cfg, 359)) == 200
    assert selection_share(cfg, 141_900) == SELECTION_SHARE == 0.35
    assert selection_share(cfg.replace(batch_size=100), 359) == SELECTION_SHARE  # mini-batches


def test_a_whole_field_fit_chooses_after_a_fifth_of_its_epochs(field):
    """256 locations, 20 whole-field epochs: the candidates train 4, the chosen one goes on from 5."""
    seen = []
    GPVAEEngine(epochs=20, calibrate=False, progress=False, **SMALL).fit(
        field.points, field.values, callback=lambda e: None if e.selection_ else seen.append(e.train_state.epoch))
    assert seen == list(range(5, 21))


def test_the_check_share_is_a_tenth(monkeypatch):
    from geogpvae.engine import core
    from geogpvae.engine.selection import SELECTION_HOLDOUT

    shares = []

    def held_out(x, observed, fraction, **kw):
        shares.append(fraction)
        return real(x, observed, fraction, **kw)
    real = core.held_out
    monkeypatch.setattr(core, "held_out", held_out)
    field = make_field(grid_points((12, 12), 1 / 11), n_vars=2, n_latent=2, lengthscale=0.2, missing=0.2, rng=5)
    eng = GPVAEEngine(epochs=5, calibrate=False, progress=False, **SMALL)
    eng.fit(field.points, field.values)
    assert shares[-1] == SELECTION_HOLDOUT == 0.1 and set(eng.kl_scores_) == set(KL_FACTORS)  # (a metric warm-up holds out none)


@pytest.mark.filterwarnings("ignore::geogpvae.errors.TrainingWarning")
@pytest.mark.parametrize("epochs", [2, 12])  # 2: a budget smaller than three warm-up rounds
def test_an_explicit_epoch_count_bounds_every_epoch_a_fit_trains(field, monkeypatch, epochs):
    """The model trains ``epochs``; the other KL candidate its selection epochs; the metric's
    warm-up rounds at most ``epochs`` in all (the ``epochs`` docstring)."""
    from geogpvae.engine import metric, training
    from geogpvae.engine.metric import WARMUP_ROUNDS, warmup_epochs

    calls = []
    run_epoch = training._run_epoch

    def counted(*args, **kwargs):
        calls.append(1)
        return run_epoch(*args, **kwargs)

    monkeypatch.setattr(training, "_run_epoch", counted)
    monkeypatch.setattr(metric, "_may_reach", lambda *args: True)  # every allowed warm-up round runs
    eng = GPVAEEngine(epochs=epochs, calibrate=False, progress=False, **SMALL).fit(field.points, field.values)
    n = len(field.points)
    other = selection_epochs(epochs, selection_share(eng.config, n))
    rounds = len(eng.metric_trace_)  # one trace entry per round run
    assert rounds == min(WARMUP_ROUNDS, epochs // warmup_epochs(eng.config, n))
    warm_up = rounds * warmup_epochs(eng.config, n)
    assert len(eng.history["loss"]) == epochs and 0 < warm_up <= epochs
    assert len(calls) == epochs + other + warm_up
