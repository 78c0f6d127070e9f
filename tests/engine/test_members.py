"""Several models of one field from different seeds, predicting as one mixture (``members``)."""

import numpy as np
import pytest

import geogpvae
from geogpvae.datasets import make_gaussian_field
from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.members import member_seed, mixture
from geogpvae.engine.state import engine_state, restore_engine
from geogpvae.errors import TrainingWarning

SMALL = dict(neighbours=6, encoder_hidden=(16,), decoder_hidden=(16,), samples=4, epochs=15)


@pytest.fixture(scope="module")
def field():
    return make_field(grid_points((14, 14), 1 / 13), n_vars=2, n_latent=2, lengthscale=0.2,
                      missing=0.3, noise=0.05, rng=4)


@pytest.fixture(scope="module")
def engines(field):
    """(the engine with two members, the same fit alone, the fit with the second member's seed)."""
    with pytest.warns(TrainingWarning):
        pair = GPVAEEngine(progress=False, members=2, seed=3, **SMALL).fit(field.points, field.values)
    alone = [GPVAEEngine(progress=False, seed=s, **SMALL) for s in (3, member_seed(3, 1))]
    with pytest.warns(TrainingWarning):
        return pair, *(e.fit(field.points, field.values) for e in alone)


def test_mixture_moments_equal_those_of_the_mixture_density():
    rng = np.random.default_rng(0)
    means, stds = rng.normal(size=(3, 4)), rng.uniform(0.2, 2.0, size=(3, 4))
    mean, std = mixture(means, stds)
    grid = np.linspace(-15, 15, 60_001)
    for j in range(4):  # the mixture's density on a fine grid, integrated
        density = np.mean([np.exp(-0.5 * ((grid - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))
                           for m, s in zip(means[:, j], stds[:, j])], axis=0)
        first = np.trapezoid(grid * density, grid)
        second = np.trapezoid((grid - first) ** 2 * density, grid)
        assert mean[j] == pytest.approx(first, abs=1e-8)
        assert std[j] ** 2 == pytest.approx(second, rel=1e-6)
    same, spread = mixture(np.ones((2, 3)), np.full((2, 3), 0.5))
    assert np.allclose(same, 1.0) and np.allclose(spread, 0.5)  # members that agree: their own spread


def test_a_fit_with_two_members_predicts_the_mixture_of_the_two_fits(field, engines):
    pair, first, second = engines
    assert len(pair.members_) == 1 and pair.members_[0].config.seed == member_seed(3, 1)
    new = np.random.default_rng(1).uniform(0, 1, size=(9, 2))
    for args in ((), (new,), (field.points, field.values)):
        both, a, b = pair.predict(*args), first.predict(*args), second.predict(*args)
        assert not np.allclose(a.mean, b.mean)  # two seeds, two models
        for m, s in (("mean", "std"), ("mean_model", "std_model")):
            mean, std = mixture([getattr(a, m), getattr(b, m)], [getattr(a, s), getattr(b, s)])
            assert np.array_equal(getattr(both, m), mean)
            assert np.array_equal(getattr(both, s), std)
        assert np.array_equal(both.source, a.source)


@pytest.mark.filterwarnings("ignore::geogpvae.errors.TrainingWarning")  # a short budget, on purpose
def test_observed_values_come_back_unchanged_and_the_fills_are_the_mixture():
    ds = make_gaussian_field((12, 12), missing=0.4, seed=2)
    options = dict(neighbours=6, epochs=10, progress=False, encoder_hidden=(16,), decoder_hidden=(16,))
    out = geogpvae.impute(ds, members=2, seed=0, **options)
    one, two = (geogpvae.impute(ds, seed=s, **options) for s in (0, 1))
    for name in ds.data_vars:
        seen = ds[name].notnull()
        assert np.array_equal(out[name].values[seen.values], ds[name].values[seen.values])
        holes = ~seen.values
        mean, std = mixture([one[name].values[holes], two[name].values[holes]],
                            [one[f"{name}_std"].values[holes], two[f"{name}_std"].values[holes]])
        assert np.allclose(out[name].values[holes], mean, rtol=1e-6)
        assert np.allclose(out[f"{name}_std"].values[holes], std, rtol=1e-6)


def test_a_saved_fit_keeps_its_members(engines):
    pair = engines[0]
    state = engine_state(pair)
    assert len(state["members"]) == 1 and state["members"][0]["config"]["seed"] == member_seed(3, 1)
    back = restore_engine(GPVAEEngine, state, progress=False)
    assert len(back.members_) == 1
    assert np.array_equal(back.predict().mean, pair.predict().mean)
    assert np.array_equal(back.predict().std, pair.predict().std)
    alone = engine_state(engines[1])
    assert "members" not in alone and restore_engine(GPVAEEngine, alone, progress=False).members_ == []


@pytest.mark.parametrize(("where", "members"), [("engine", 2), ("member", 2), ("member's last epoch", 2),
                                                ("third model", 3)])
def test_a_fit_stopped_anywhere_resumes_to_the_uninterrupted_result(field, engines, where, members):
    polls = []  # should_stop is asked after every epoch, the beta candidates' too
    with pytest.warns(TrainingWarning):
        GPVAEEngine(progress=False, seed=3, **SMALL).fit(field.points, field.values, should_stop=lambda: polls.append(1))
    one_fit = len(polls)
    stop_at = {"engine": 5, "member": one_fit + 4, "member's last epoch": 2 * one_fit, "third model": 2 * one_fit + 4}[where]
    calls, saved = [], {}

    def stop() -> bool:
        calls.append(1)
        return len(calls) == stop_at

    def keep(engine):
        saved["checkpoint"] = engine.checkpoint()

    options = dict(progress=False, members=members, seed=3, **SMALL)
    with pytest.warns(TrainingWarning):
        stopped = GPVAEEngine(**options).fit(field.points, field.values, callback=keep, should_stop=stop)
    assert stopped.interrupted and len(stopped.members_) == (0 if where == "engine" else members - 2)  # no half member
    snapshot = saved["checkpoint"]
    assert ("members" in snapshot) == (where != "engine")
    if where != "engine":  # the engine's own snapshot is its finished fit; the member's where it stopped
        done = snapshot["members"]["done"]
        assert snapshot["train"]["done"] and len(done) == members - 2
        assert [d["engine"]["config"]["seed"] for d in done] == [member_seed(3, k) for k in range(1, members - 1)]
        assert snapshot["members"]["current"]["engine"]["config"]["seed"] == member_seed(3, members - 1)
    more = []  # resumed, only the epochs not trained yet are trained
    resumed = GPVAEEngine(**options).fit(field.points, field.values, resume=snapshot,
                                         should_stop=lambda: more.append(1) is not None)
    assert len(more) == members * one_fit - stop_at
    assert not resumed.interrupted and len(resumed.members_) == members - 1
    if members == 2:
        whole = engines[0]
    else:
        with pytest.warns(TrainingWarning):
            whole = GPVAEEngine(**options).fit(field.points, field.values)
    assert np.array_equal(resumed.predict().mean, whole.predict().mean)
    assert np.array_equal(resumed.predict().std, whole.predict().std)


def test_stopped_during_a_member_the_fit_is_interrupted_and_keeps_no_half_member(field):
    calls = []

    def stop() -> bool:  # the engine's own epochs pass; the member's first epoch stops it
        calls.append(1)
        return len(calls) > 15

    with pytest.warns(TrainingWarning):
        eng = GPVAEEngine(progress=False, members=2, beta=1.0, **SMALL).fit(field.points, field.values,
                                                                            should_stop=stop)
    assert eng.train_state.done  # the engine's own fit finished: the member was stopped
    assert eng.interrupted and eng.members_ == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_members_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="members must be an integer >= 1"):
        GPVAEConfig(members=bad)


def test_the_members_seeds_must_fit_in_64_bits():
    GPVAEConfig(seed=2**63 - 2, members=2)
    with pytest.raises(ValueError, match="seed \\+ members - 1 must be below 2\\*\\*63"):
        GPVAEConfig(seed=2**63 - 2, members=3)

