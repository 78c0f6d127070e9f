"""Progress display: log lines by wall clock (a fake one here), also inside long units."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.engine import progress as progress_mod
from geogpvae.engine.progress import Progress, display_mode


@pytest.fixture
def fake_clock(monkeypatch):
    """A clock that advances ``step[0]`` seconds each time it is read."""
    step = [1.0]
    ticks = [0.0]

    def clock():
        ticks[0] += step[0]
        return ticks[0]

    monkeypatch.setattr(progress_mod, "clock", clock)
    return step


def _lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_display_mode():
    assert display_mode(False) == display_mode(None) == display_mode("none") == "none"
    assert display_mode("log") == "log" and display_mode("bar") == "bar"
    assert display_mode(True) in ("bar", "log") and display_mode("auto") in ("bar", "log")
    with pytest.raises(ValueError, match="progress must be"):
        display_mode("loud")


def test_stage_lines_start_every_interval_and_end(fake_clock, capsys):
    fake_clock[0] = 3.0  # each read of the clock is 3 s later
    with Progress("log", 12, "prediction", unit="locations", interval=10.0) as bar:
        for done in range(1, 13):
            bar.update(done)
    lines = _lines(capsys)
    assert lines[0].startswith("prediction 0/12 locations elapsed")
    assert lines[-1].startswith("prediction 12/12 locations elapsed")
    counts = [int(line.split()[1].split("/")[0]) for line in lines]
    assert counts == [0, 4, 8, 12]  # at the start, then 12 s apart (the first >= 10 s)
    assert all(" eta " in line for line in lines[1:])


def _seconds(hms: str) -> int:
    h, m, sec = (int(v) for v in hms.strip("()").split(":"))
    return 3600 * h + 60 * m + sec


def test_the_selection_estimates_the_end_of_the_training_after_it(fake_clock, capsys):
    # 6 candidate epochs, then 30 epochs of the chosen one at the same pace: at 2 of 6 done,
    # the stage has 4 epochs left and the training 34
    fake_clock[0] = 25.0
    with Progress("log", 6, "selection", unit="epochs", interval=0.0, then=30) as bar:
        bar.update(2, "beta x1 loss 9.5")
    line = _lines(capsys)[-1]
    assert line.startswith("selection 2/6 epochs beta x1 loss 9.5 elapsed") and "(training " in line
    words = line.split()
    eta, whole = _seconds(words[words.index("eta") + 1]), _seconds(words[words.index("(training") + 1])
    assert eta > 0 and abs(whole - eta * 34 / 4) <= 5
    with Progress("log", 6, "calibration", unit="rounds", interval=0.0) as bar:  # no then: no estimate
        bar.update(2)
    assert "training" not in _lines(capsys)[-1]


def test_within_a_long_unit_a_line_comes_by_the_clock(fake_clock, capsys):
    fake_clock[0] = 4.0
    bar = Progress("log", 2, "epoch", interval=10.0)
    bar.update(1, "loss 1.5")
    for i in range(1, 11):  # 10 steps of epoch 2, 4 s each
        bar.within(i / 10, f"step {i}/10")
    bar.update(2, "loss 1.2")
    lines = _lines(capsys)
    assert lines[0].startswith("epoch 1/2 loss 1.5 elapsed")
    inside = [line for line in lines if "step" in line]
    assert [line.split()[2:4] for line in inside] == [["step", "3/10"], ["step", "6/10"],
                                                      ["step", "9/10"]]
    assert all(line.startswith("epoch 2/2 step") for line in inside)
    assert lines[-1].startswith("epoch 2/2 loss 1.2")


@pytest.mark.parametrize("mode", ["none", False])
def test_no_lines_without_a_display(mode, fake_clock, capsys):
    bar = Progress(mode, 3, "calibration", unit="rounds", interval=0.0)
    for done in range(1, 4):
        bar.within(0.5)
        bar.update(done)
    bar.close()
    assert capsys.readouterr().err == ""


def test_training_logs_inside_long_epochs(fake_clock, capsys):
    """Epochs of many steps: lines come from inside them, not only after each epoch."""
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine.core import GPVAEEngine

    field = make_field(grid_points((12, 12), 1 / 11), n_vars=2, missing=0.3)
    fake_clock[0] = 0.6  # the clock is read at every step: an epoch of 18 steps takes > 10 s
    GPVAEEngine(epochs=2, batch_size=8, neighbours=4, encoder_hidden=(8,), decoder_hidden=(8,),
                samples=4, calibrate=False, beta=1.0, progress="log").fit(field.points, field.values)
    lines = _lines(capsys)
    epochs = [line for line in lines if line.startswith("epoch") and "loss" in line]
    inside = [line for line in lines if line.startswith("epoch") and " step " in line]
    assert inside[0].startswith("epoch 1/2 step 1/18 ")  # the first step says training began
    assert {line.split()[1] for line in inside} == {"1/2", "2/2"}
    assert [line.split()[1] for line in epochs] == ["1/2", "2/2"]  # each long epoch's loss


def test_engine_reports_calibration_and_prediction(capsys):
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine.core import GPVAEEngine

    field = make_field(grid_points((10, 10), 1 / 9), n_vars=2, missing=0.4)
    engine = GPVAEEngine(epochs=4, neighbours=4, encoder_hidden=(8,), decoder_hidden=(8,),
                         samples=4, progress="log").fit(field.points, field.values)
    engine.predict()
    engine.predict(np.array([[0.5, 0.5], [0.1, 0.9]]))
    lines = _lines(capsys)
    stages = [" ".join(line.split()[:3]) for line in lines if not line.startswith("epoch")]
    # beta="auto": two candidate weights, three epochs each of the four (35 % would be two)
    assert stages == ["metric warm-up 0/3", "metric warm-up 3/3",  # 2-D: the metric is looked for
                      "selection 0/6 epochs", "selection 6/6 epochs", "selection 6/6 epochs",
                      "calibration 0/5 rounds", "calibration 5/5 rounds",
                      "prediction 0/100 locations", "prediction 100/100 locations",
                      "prediction 0/2 locations", "prediction 2/2 locations"]
    assert lines[0].startswith("metric warm-up 0/3") and lines[-1].startswith("prediction 2/2")
    assert "coordinates kept: axes" in lines[1] or "metric learnt: axes" in lines[1]
    assert any(line.startswith("epoch 4/4") for line in lines)  # the chosen one carries on
    chosen = [line for line in lines if line.startswith("selection 6/6")][-1]  # names the winner
    assert f"chose beta x{engine.kl_factor_:g} " in chosen
    # the chosen candidate's one epoch after the selection counts in the training's estimate
    assert all("(training " in line for line in lines if line.startswith("selection 6/6"))


def test_prediction_chunks_are_counted_and_change_nothing(monkeypatch, capsys):
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine import core

    field = make_field(grid_points((10, 10), 1 / 9), n_vars=2, missing=0.4)
    engine = core.GPVAEEngine(epochs=1, neighbours=4, encoder_hidden=(8,), decoder_hidden=(8,),
                              samples=4, progress=False).fit(field.points, field.values)
    whole = engine.predict()
    monkeypatch.setattr(core, "PREDICT_CHUNK", 30)
    monkeypatch.setattr(progress_mod, "LOG_INTERVAL", 0.0)
    engine.progress = "log"
    capsys.readouterr()
    chunked = engine.predict()
    counts = [line.split()[1] for line in _lines(capsys)]
    assert counts == ["0/100", "30/100", "60/100", "90/100", "100/100"]
    np.testing.assert_allclose(chunked.mean, whole.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chunked.std, whole.std, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(chunked.source, whole.source)


def test_a_long_epoch_reports_its_loss_at_its_end(fake_clock, capsys):
    """Lines from inside an epoch must not crowd out the epoch's own loss line."""
    fake_clock[0] = 4.0
    bar = Progress("log", 3, "epoch", interval=10.0)
    for epoch in range(3):
        for i in range(1, 11):
            bar.within(i / 10, f"step {i}/10")
        bar.update(epoch + 1, f"loss {2.0 - epoch}")
    losses = [line.split()[:3] for line in _lines(capsys) if " loss " in line]
    assert losses == [["epoch", "1/3", "loss"], ["epoch", "2/3", "loss"], ["epoch", "3/3", "loss"]]


def test_the_selection_line_names_the_winner_not_the_last_candidate(monkeypatch, capsys):
    from geogpvae.datasets.synthetic import grid_points, make_field
    from geogpvae.engine import selection
    from geogpvae.engine.core import GPVAEEngine

    scores = iter([0.0, 1.0])  # the first candidate (x1) checks better than the last (x0.2)
    monkeypatch.setattr(selection, "check_score", lambda *args, **kwargs: next(scores))
    field = make_field(grid_points((10, 10), 1 / 9), n_vars=2, missing=0.4)
    engine = GPVAEEngine(epochs=4, neighbours=4, encoder_hidden=(8,), decoder_hidden=(8,),
                         samples=4, calibrate=False, progress="log").fit(field.points, field.values)
    assert engine.kl_factor_ == 1.0
    last = [line for line in _lines(capsys) if line.startswith("selection")][-1]
    assert "chose beta x1 " in last
