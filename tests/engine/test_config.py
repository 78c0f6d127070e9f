"""GPVAEConfig: the one source of defaults, its checks and its derived values."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import geogpvae
from geogpvae.engine.config import GPVAEConfig
from geogpvae.errors import InputError


def test_round_trip_through_a_plain_dict():
    cfg = GPVAEConfig(neighbours=7, encoder_hidden=(32, 16), context=(4, 8), epochs=3)
    again = GPVAEConfig.from_dict(cfg.to_dict())
    assert again == cfg
    assert isinstance(cfg.to_dict()["encoder_hidden"], list)


def test_unknown_option_is_named():
    with pytest.raises(ValueError, match="colour"):
        GPVAEConfig.from_dict({"colour": "red"})


@pytest.mark.parametrize("option, value, words", [
    ("engine", "dense", "unknown engine"),
    ("kernel", "linear", "unknown kernel"),
    ("kernel", 5, "unknown kernel"),  # neither a name nor a gpytorch kernel
    ("kernel", None, "unknown kernel"),
    ("neighbours", -1, "neighbours must be an integer"),
    ("batch_size", 0, "batch_size"),
    ("lr", 0.0, "lr must be a positive number"),
    ("threads", 0, "threads"),
])
def test_bad_values_are_refused_with_their_name(option, value, words):
    with pytest.raises(ValueError, match=words):
        GPVAEConfig(**{option: value})


def test_location_rule_has_one_message():
    cfg = GPVAEConfig(neighbours=10)
    cfg.check_locations(11)
    with pytest.raises(InputError, match=r"10 locations .* fewer than neighbours \+ 1 = 11; "
                                         r"set neighbours \(--neighbours\) to 9 or fewer"):
        cfg.check_locations(10)


def test_default_budget_batches_and_learning_rates():
    cfg = GPVAEConfig()
    # small fields: one full batch per step, 1000 steps, the larger rate
    assert cfg.batch_for(359) == 359 and cfg.n_epochs(359) == 1000 and cfg.lr_for(359) == 0.01
    # larger fields: about 32 steps per epoch in batches of 256..4096; 4000 steps at 256, fewer
    # (at least 1000) with larger batches; at least 5 epochs
    assert cfg.batch_for(2304) == 256 and cfg.n_epochs(2304) == 445 and cfg.lr_for(2304) == 0.003
    assert cfg.batch_for(20_000) == 512 and cfg.step_budget(20_000) == 2000
    # ... but mini-batch fits of up to 50,000 locations train at least 120 epochs, or three
    # times the step budget's (the step budget alone: 50 here, 86 for 12,000 locations, 21 at
    # 50,000), larger ones keep it
    assert cfg.n_epochs(20_000) == 120 and cfg.n_epochs(12_000) == 120 and cfg.n_epochs(50_000) == 63
    assert cfg.n_epochs(50_001) == 21 and cfg.n_epochs(1025) == 800
    # explicit epochs are not raised
    assert GPVAEConfig(epochs=60).n_epochs(20_000) == 60
    assert cfg.batch_for(141_900) == 4096 and cfg.n_epochs(141_900) == 29
    assert cfg.batch_for(10**8) == 4096 and cfg.n_epochs(10**8) == 5
    assert GPVAEConfig(epochs=3).n_epochs(10**6) == 3
    # an explicit budget under half the default's is flagged with the default (same batch size)
    assert GPVAEConfig(epochs=59).short_of_default(17_000) == 120
    assert GPVAEConfig(epochs=60).short_of_default(17_000) is None
    assert GPVAEConfig(epochs=499).short_of_default(359) == 1000
    # with batches of 4096, 20,000 locations are 5 steps an epoch and the budget 200 epochs
    assert GPVAEConfig(epochs=99, batch_size=4096).short_of_default(20_000) == 200
    assert GPVAEConfig(epochs=99).short_of_default(20_000) is None
    assert GPVAEConfig().short_of_default(359) is None
    assert GPVAEConfig(batch_size=256).batch_for(359) == 256 and GPVAEConfig(batch_size=256).lr_for(359) == 0.003
    assert GPVAEConfig(lr=0.05).lr_for(359) == 0.05
    with pytest.raises(ValueError, match="lr"):
        GPVAEConfig(lr=-1.0)


def test_kl_weight_and_latent_size():
    assert GPVAEConfig().kl_weight(1000) == 1.0
    assert GPVAEConfig(engine="hpa", neighbours=20).kl_weight(1000) == 50.0
    assert GPVAEConfig(beta=0.5, engine="hpa").kl_weight(1000) == 0.5
    assert GPVAEConfig().latent_size(7) == 6 and GPVAEConfig().latent_size(1) == 2
    assert GPVAEConfig(latent_dim=3).latent_size(7) == 3


def test_every_public_signature_takes_its_defaults_from_the_config():
    cfg = GPVAEConfig()
    for func in (geogpvae.impute, geogpvae.GPVAEImputer):
        params = inspect.signature(func).parameters
        for name in ("engine", "neighbours", "epochs", "seed", "device"):
            assert params[name].default == getattr(cfg, name), (func, name)
    from geogpvae.cli.settings import Settings

    for name in ("engine", "neighbours", "epochs", "seed", "device"):
        assert getattr(Settings(), name) == getattr(cfg, name), name


def test_reading_the_defaults_does_not_import_torch():
    code = ("import sys; from geogpvae.engine.config import GPVAEConfig; "
            "GPVAEConfig.neighbours; print('torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


