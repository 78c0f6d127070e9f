"""Engine states: what is refused, what older states get, and what a checkpoint carries.

Round trips (save, load, identical predictions) are in ``test_core.py``.
"""

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.model import pattern_count
from geogpvae.engine.state import (
    STATE_FORMAT,
    STATE_VERSION,
    train_state_from,
    with_hidden_moments,
)


@pytest.fixture(scope="module")
def engine():
    field = make_field(grid_points((10, 10), 0.1), n_vars=2, missing=0.3, rng=1)
    return GPVAEEngine(epochs=5, seed=0, progress=False).fit(field.points, field.values)


def test_a_state_of_another_kind_or_a_newer_version_is_refused_clearly(engine):
    state = engine.state_dict(include_data=False)
    with pytest.raises(ValueError, match="not a geogpvae engine state"):
        GPVAEEngine.from_state_dict({**state, "format": "something-else"})
    with pytest.raises(ValueError, match="not a geogpvae engine state"):
        GPVAEEngine.from_state_dict([state])
    newer = {**state, "version": STATE_VERSION + 1, "package_version": "9.9"}
    with pytest.raises(ValueError, match=r"newer geogpvae \(9\.9\); upgrade"):
        GPVAEEngine.from_state_dict(newer)
    assert state["format"] == STATE_FORMAT and state["version"] == STATE_VERSION


def test_an_unfitted_engine_has_no_state():
    with pytest.raises(RuntimeError):
        GPVAEEngine(progress=False).state_dict()


def test_weights_saved_before_the_hidden_moments_get_empty_ones_and_the_rest_untouched(engine):
    weights = engine.state_dict(include_data=False)["weights"]
    old = {k: v for k, v in weights.items() if k not in ("hidden_moments", "moment_steps", "pattern_moments")}
    filled = with_hidden_moments(old, 2)
    assert filled["hidden_moments"].shape == (3, 2) and not filled["hidden_moments"].any()
    assert filled["pattern_moments"].shape == (3, 2, pattern_count(2)) and not filled["pattern_moments"].any()
    assert filled["moment_steps"].item() == 0
    assert filled["hidden_moments"].dtype == weights["raw_noise"].dtype
    for k, v in old.items():
        assert filled[k] is v
    assert "hidden_moments" not in old  # the caller's dict is not changed
    same = with_hidden_moments(weights, 2)
    torch.testing.assert_close(same["hidden_moments"], weights["hidden_moments"])


def test_a_checkpoint_carries_what_resuming_needs(engine):
    saved = engine.checkpoint()
    assert saved["format"] == STATE_FORMAT + "-checkpoint" and "field" not in saved["engine"]
    state = train_state_from(saved["train"])
    assert state.epoch == engine.train_state.epoch == 5
    assert state.steps == engine.train_state.steps > 0
    assert state.history["loss"] == engine.history["loss"] and state.history is not saved["train"]["history"]
    np.testing.assert_array_equal(
        GPVAEEngine.from_state_dict(saved["engine"], progress=False).predict(
            np.zeros((1, 2)), np.array([[0.5, np.nan]]), samples=4).mean,
        engine.predict(np.zeros((1, 2)), np.array([[0.5, np.nan]]), samples=4).mean)
