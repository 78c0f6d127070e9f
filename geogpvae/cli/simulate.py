"""``geogpvae simulate``: realisations of a NetCDF field, from a new fit or a saved model."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

from .common import EXIT_OK, PROG, Reporter, UsageError, _check_device, _progress, drawn_lazily
from .files import _open, check_free_space, check_target, expand_inputs, output_bytes, write_output
from .impute import run_job
from .predict import _load_model
from .settings import Settings, resolve_settings

__all__ = ["cmd_simulate"]

#: settings that train a model: a saved one (``--model``) was trained with its own
_TRAINING = ("vars", "coords", "mask_var", "log_vars", "engine", "neighbours", "epochs", "concat_dim",
             "checkpoint_dir", "resume", "save_model", "options")


def cmd_simulate(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae simulate``."""
    settings = resolve_settings(args, needs_output=True)
    if settings.realizations is None:
        raise UsageError("give the number of realisations, e.g. -n 20 (or realizations = 20 in the config file)")
    if args.model is None:
        return run_job(settings, argv)
    return _from_model(args.model, settings, argv)


def _from_model(model: str, settings: Settings, argv: Sequence[str]) -> int:
    """Draw from a model saved by ``impute --save-model`` on the field it was fitted on."""
    given = [name for name in _TRAINING if name in settings.given]
    if given:
        flags = ", ".join("--" + ("option" if g == "options" else g.replace("_", "-")) for g in given)
        raise UsageError(f"--model draws from a trained model, which keeps its own settings: drop {flags}")
    say = Reporter(settings.quiet)
    if settings.device is not None:
        _check_device(settings.device)
    inputs = expand_inputs(settings.inputs)
    check_target(settings.output, inputs=[model, *inputs], overwrite=settings.overwrite)
    device = None if settings.device in (None, "auto") else settings.device
    imputer = _load_model(model, device, _progress(settings.progress))
    with _open(inputs, None, imputer.vars_) as ds:
        check_free_space({settings.output: output_bytes(ds, imputer.vars_, inputs, settings.realizations)})
        out = imputer.simulate(drawn_lazily(ds), settings.realizations,
                               seed=settings.seed if "seed" in settings.given else None, first=settings.first)
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        write_output(out, settings.output, settings.overwrite)
    say(f"wrote {settings.output} ({settings.realizations} realisations of {', '.join(imputer.vars_)})")
    return EXIT_OK

