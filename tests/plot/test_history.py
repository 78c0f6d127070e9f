"""``plot.training_history`` (geogpvae/plot/history.py): the curves and their zoom."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae import plot


def test_training_history_lines():
    n = 12
    hist = {
        "epoch": list(range(1, n + 1)),
        "loss": list(np.linspace(5, 1, n)),
        "expected_nll": list(np.linspace(4.5, 0.8, n)),
        "kl": list(np.linspace(0.5, 0.2, n)),
        "elapsed": list(np.arange(1, n + 1) * 0.5),
        "lr": [1e-3] * n,
    }
    fig = plot.training_history(hist)
    axs = {ax.get_gid(): ax for ax in fig.axes}
    assert set(axs) == {"elbo", "kl"}
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    np.testing.assert_allclose(lines["loss"].get_ydata(), hist["loss"])
    np.testing.assert_allclose(lines["expected_nll"].get_ydata(), hist["expected_nll"])
    np.testing.assert_allclose(lines["kl"].get_ydata(), hist["kl"])
    np.testing.assert_allclose(lines["kl"].get_xdata(), hist["epoch"])
    assert "6.0 s" in fig.get_suptitle()


def test_training_history_optional_keys_and_errors():
    fig = plot.training_history({"loss": [3.0, 2.0, 1.5]})
    assert [ax.get_gid() for ax in fig.axes] == ["elbo"]
    np.testing.assert_allclose(fig.axes[0].lines[0].get_xdata(), [1, 2, 3])
    with pytest.raises(ValueError):
        plot.training_history({"loss": [1.0, 2.0], "kl": [1.0]})
    with pytest.raises(ValueError):
        plot.training_history({"kl": [1.0]})
    with pytest.raises(ValueError):
        plot.training_history({"loss": []})


def test_training_history_zooms_past_the_first_epochs():
    rng = np.random.default_rng(5)
    n = 120
    loss = 3.0 + np.exp(-np.arange(n) / 15.0) + 0.02 * rng.normal(size=n)
    loss[0] = 440.0
    nll = loss - 0.5
    kl = 0.5 + 0.3 * (1 - np.exp(-np.arange(n) / 10.0))
    kl[0] = 40.0
    fig = plot.training_history({"loss": loss, "expected_nll": nll, "kl": kl})
    axs = {ax.get_gid(): ax for ax in fig.axes}
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    np.testing.assert_array_equal(lines["loss"].get_ydata(), loss)  # every epoch is drawn
    np.testing.assert_array_equal(lines["kl"].get_ydata(), kl)
    bottom, top = axs["elbo"].get_ylim()
    assert bottom <= nll.min()  # from the lowest value to the settled part, not to 440
    assert loss[n // 2:].max() < top < 10.0
    bottom, top = axs["kl"].get_ylim()
    assert bottom <= kl[1:].min() and kl[1:].max() < top < 5.0
    note = next(t for t in axs["elbo"].texts if t.get_gid() == "off-scale")
    assert "epoch 1" in note.get_text() and "440" in note.get_text()
    # a history without such a start keeps its whole range and has no note
    fig = plot.training_history({"loss": np.linspace(5.0, 1.0, 40)})
    bottom, top = fig.axes[0].get_ylim()
    assert bottom < 1.0 and top > 5.0 and not fig.axes[0].texts
