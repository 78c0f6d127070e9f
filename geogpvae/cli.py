"""The ``geogpvae`` command: impute NetCDF files, inspect them, predict, plot, run a demo.

Commands
--------
``geogpvae impute IN.nc OUT.nc --vars a,b``
    Fill the holes of variables of one file (or a glob / several files combined with
    ``--concat-dim``, or one file of a sorted list per SLURM array task) and write the
    result, with ``v_std`` and ``v_imputed`` for each variable, to ``OUT`` atomically.
``geogpvae info IN.nc``
    What the toolkit sees in a file: candidate variables, coordinates and how they become
    the model's x, missing fractions, layout, and an estimate of the memory a run needs.
``geogpvae predict MODEL.pt COORDS.nc OUT.nc``
    Predict at new locations with a model saved by ``impute --save-model``.
``geogpvae plot OUT.nc --var v -o fig.png``
    Layer slices, a map or uncertainty panels of an imputed file.
``geogpvae demo [OUT.nc]``
    The built-in default job: a synthetic field with holes, imputed and scored.

Options of ``impute`` may come from a TOML file (``--config job.toml``); flags on the
command line override it. Engine options go in its ``[options]`` table or in repeated
``--option key=value`` flags (values are TOML or JSON literals).

Exit codes
----------
0
    Success.
1
    Failure during the run (training diverged, out of memory, a write failed, ...).
2
    Bad usage or bad input: a one-line message names the problem; nothing is written.
128 + N
    Stopped by signal N after finishing the current epoch and writing a checkpoint
    (143 for SIGTERM, 130 for SIGINT, 138 for SIGUSR1); ``OUT`` is not written. Run the
    same command with ``--resume`` to continue.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shlex
import string
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._version import __version__

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "estimate_memory", "main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
PROG = "geogpvae"
_GLOB_CHARS = set("*?[")


# =========================================================================== errors
class UsageError(ValueError):
    """Bad usage of the command (exit code 2)."""


class JobFailure(RuntimeError):
    """A failure during the run, after the input was accepted (exit code 1)."""


def _bad_input_types() -> tuple[type[BaseException], ...]:
    from .engine import InputError

    return (
        UsageError,
        InputError,
        FileNotFoundError,
        FileExistsError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
        ValueError,
        TypeError,
        KeyError,
    )


def _one_line(err: BaseException) -> str:
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    text = " ".join(str(text).split())
    return text or type(err).__name__


# =========================================================================== values
def _names(value: Any, key: str) -> list[str]:
    """A list of names from ``"a,b,c"`` or a list of strings."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise TypeError(
            f"{key} must be names separated by commas or a list of names, got {value!r}"
        )
    items = [v for v in items if v]
    if not items:
        raise ValueError(f"{key} is empty: give at least one name")
    return items


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _integer(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} must be an integer, got {value!r}")
    return value


def _positive(value: Any, key: str) -> int:
    value = _integer(value, key)
    if value < 1:
        raise ValueError(f"{key} must be at least 1, got {value}")
    return value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false, got {value!r}")
    return value


def _seconds(value: Any, key: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a positive number of seconds, got {value!r}")
    return float(value)


def _choice(*allowed: str) -> Callable[[Any, str], str]:
    def check(value: Any, key: str) -> str:
        if value not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return check


def _paths(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"{key} must be a path or a list of paths, got {value!r}")


def _table(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{key} must be a table of engine options, got {value!r}")
    return dict(value)


def parse_literal(raw: str) -> Any:
    """A command-line value as a TOML literal, else JSON, else the plain string.

    ``512`` -> 512, ``true`` -> True, ``[64, 64]`` -> [64, 64], ``{z = 5}`` or
    ``{"z": 5}`` -> {"z": 5}, ``null`` -> None, ``matern52`` -> "matern52".
    """
    if tomllib is not None:
        try:
            return tomllib.loads(f"value = {raw}")["value"]
        except tomllib.TOMLDecodeError:
            pass
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_option(text: str) -> dict[str, Any]:
    """``key=value`` (``key`` may be dotted, e.g. ``coord_scale.z=5``) as a nested dict."""
    key, sep, raw = text.partition("=")
    parts = [p.strip() for p in key.split(".")]
    if not sep or not all(parts):
        raise UsageError(
            f"--option {text!r}: expected KEY=VALUE, e.g. --option batch_size=512 "
            "or --option coord_scale.z=5"
        )
    value: Any = parse_literal(raw.strip())
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}


def _deep_merge(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# =========================================================================== settings
@dataclass
class Settings:
    """Everything a job needs, after merging the TOML file and the command line."""

    inputs: list[str] = field(default_factory=list)
    output: str | None = None
    vars: list[str] | None = None
    coords: list[str] | None = None
    mask_var: str | None = None
    log_vars: list[str] = field(default_factory=list)
    engine: str = "spa"
    neighbours: int = 20
    epochs: int | None = None
    seed: int = 0
    device: str = "auto"
    concat_dim: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 10
    resume: bool = False
    overwrite: bool = False
    save_model: str | None = None
    task_index: int | None = None
    progress: str = "auto"
    quiet: bool = False
    skip_existing: bool = False
    distributed: str = "auto"
    dist_timeout: float = 3600.0
    options: dict[str, Any] = field(default_factory=dict)


_CONVERT: dict[str, Callable[[Any, str], Any]] = {
    "input": _paths,
    "output": _text,
    "vars": _names,
    "coords": _names,
    "mask_var": _text,
    "log_vars": _names,
    "engine": _text,
    "neighbours": _integer,
    "epochs": _integer,
    "seed": _integer,
    "device": _text,
    "concat_dim": _text,
    "checkpoint_dir": _text,
    "checkpoint_every": _positive,
    "resume": _flag,
    "overwrite": _flag,
    "save_model": _text,
    "task_index": _integer,
    "progress": _choice("auto", "bar", "log", "none"),
    "quiet": _flag,
    "skip_existing": _flag,
    "distributed": _choice("auto", "off"),
    "dist_timeout": _seconds,
    "options": _table,
}
_PATH_KEYS = ("input", "output", "checkpoint_dir", "save_model")
#: Engine options that have their own flag: given in [options] / --option they count as it.
_OPTION_ALIASES = {
    "engine": "engine",
    "neighbours": "neighbours",
    "epochs": "epochs",
    "seed": "seed",
    "device": "device",
    "coords": "coords",
    "mask": "mask_var",
    "progress": "progress",
}


def _require_toml() -> None:
    if tomllib is None:  # pragma: no cover - Python 3.10 without tomli
        raise UsageError("reading TOML needs Python 3.11 or the 'tomli' package")


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a TOML job file, keys checked, paths relative to the file's folder.

    Top-level keys are the long names of the ``impute`` flags (``vars``, ``engine``,
    ``checkpoint-dir`` or ``checkpoint_dir``, ...) plus ``input`` and ``output``; the
    ``[options]`` table holds engine options.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not valid TOML, an unknown key or a value of the wrong type (the message names it).
    """
    _require_toml()
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"config file {path} is not valid TOML: {err}") from None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name not in _CONVERT:
            known = ", ".join(sorted(k.replace("_", "-") for k in _CONVERT))
            raise ValueError(f"config file {path}: unknown key {key!r}; known keys: {known}")
        value = _CONVERT[name](value, f"{key} (in {path.name})")
        if name in _PATH_KEYS:
            value = _relative_to(value, path.parent)
        out[name] = value
    return out


def _relative_to(value: str | list[str], folder: Path) -> str | list[str]:
    def one(p: str) -> str:
        p = os.path.expanduser(p)
        return p if os.path.isabs(p) else str(folder / p)

    return [one(v) for v in value] if isinstance(value, list) else one(value)


def _lift(top: dict[str, Any], options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move options that have their own flag to the top level (the flag wins)."""
    options = dict(options)
    lifted = {}
    for key, name in _OPTION_ALIASES.items():
        if key in options:
            lifted[name] = _CONVERT[name](options.pop(key), key)
    return {**lifted, **top}, options


def _cli_values(args: argparse.Namespace) -> dict[str, Any]:
    values = {}
    for key, convert in _CONVERT.items():
        value = getattr(args, key, None)
        if value is not None and key not in ("input", "output", "options"):
            values[key] = convert(value, "--" + key.replace("_", "-"))
    return values


def _cli_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for text in getattr(args, "option", None) or []:
        options = _deep_merge(options, parse_option(text))
    return options


def resolve_settings(args: argparse.Namespace, *, needs_output: bool) -> Settings:
    """Merge defaults, the ``--config`` file and the command line (which wins).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed command line.
    needs_output : bool
        Whether the last positional path is the output (``impute``) or all are inputs.
    """
    config = read_config(args.config) if getattr(args, "config", None) else {}
    file_top, file_opts = _lift(config, config.pop("options", {}))
    cli_top, cli_opts = _lift(_cli_values(args), _cli_options(args))
    top = {**file_top, **cli_top}
    settings = Settings(options=_deep_merge(file_opts, cli_opts))
    for key, value in top.items():
        if key not in ("input", "output"):
            setattr(settings, key, value)
    settings.inputs, settings.output = _positional(args.paths, top, needs_output)
    if settings.quiet and "progress" not in top:
        settings.progress = "none"
    return settings


def _positional(
    paths: Sequence[str], top: Mapping[str, Any], needs_output: bool
) -> tuple[list[str], str | None]:
    if not needs_output:
        inputs = list(paths) or list(top.get("input", []))
        if not inputs:
            raise UsageError("no input file: give IN (or input = ... in the --config file)")
        return inputs, None
    if paths:
        if len(paths) < 2:
            raise UsageError(
                f"give the input file(s) and then the output file, e.g. {PROG} impute IN.nc OUT.nc"
            )
        return list(paths[:-1]), paths[-1]
    if "input" not in top or "output" not in top:
        raise UsageError(
            "no input or output file: give IN and OUT on the command line, or input = ... and "
            "output = ... in the --config file"
        )
    return list(top["input"]), top["output"]


# =========================================================================== files
def expand_inputs(items: Sequence[str]) -> list[str]:
    """Input paths with glob patterns expanded (sorted); every file must exist.

    Raises
    ------
    FileNotFoundError
        A file is missing or a pattern matches nothing.
    """
    files: list[str] = []
    for item in items:
        text = os.path.expanduser(item)
        if _GLOB_CHARS & set(text) and not os.path.exists(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise FileNotFoundError(f"no file matches the pattern {item!r}")
            files.extend(matches)
            continue
        if not os.path.exists(text):
            raise FileNotFoundError(f"input file {item} not found")
        if os.path.isdir(text):
            raise IsADirectoryError(f"input {item} is a folder, not a NetCDF file")
        files.append(text)
    return files


def select_task(
    files: list[str], task_index: int | None, concat_dim: str | None, env: Mapping[str, str]
) -> tuple[list[str], int | None]:
    """The file of this job-array task, or every file.

    An explicit ``task_index`` always picks one file; ``SLURM_ARRAY_TASK_ID`` does when
    the inputs are several files and ``concat_dim`` is not given.

    Returns
    -------
    files : list of str
    index : int or None
        The task index used.
    """
    label = "--task-index"
    if task_index is None and "SLURM_ARRAY_TASK_ID" in env and len(files) > 1 and not concat_dim:
        try:
            task_index = int(env["SLURM_ARRAY_TASK_ID"])
        except ValueError:
            raise UsageError(
                f"SLURM_ARRAY_TASK_ID={env['SLURM_ARRAY_TASK_ID']!r} is not an integer"
            ) from None
        label = "SLURM_ARRAY_TASK_ID"
    if task_index is None:
        return files, None
    if concat_dim:
        raise UsageError(
            "--task-index picks one input file; it cannot be combined with --concat-dim"
        )
    if not 0 <= task_index < len(files):
        raise UsageError(
            f"{label} {task_index} is outside 0..{len(files) - 1}: the input matches "
            f"{len(files)} file(s) (task indices are 0-based positions in the sorted list)"
        )
    return [files[task_index]], task_index


def format_output(template: str, inputs: Sequence[str], index: int | None) -> str:
    """Fill ``{stem}``, ``{name}`` and ``{index}`` in an output path.

    ``{stem}`` and ``{name}`` are the input file's name without and with its extension
    (one input file only); ``{index}`` the job-array task index.
    """
    fields_used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    if not fields_used:
        return template
    unknown = sorted(fields_used - {"stem", "name", "index"})
    if unknown:
        raise UsageError(
            f"output {template!r} has unknown placeholder(s) {unknown}; "
            "use {stem}, {name} or {index}"
        )
    if fields_used & {"stem", "name"} and len(inputs) != 1:
        raise UsageError(
            f"output {template!r} uses {{stem}}/{{name}}, but there are {len(inputs)} input files"
        )
    if "index" in fields_used and index is None:
        raise UsageError(
            f"output {template!r} uses {{index}}, but no task index is set (--task-index or "
            "SLURM_ARRAY_TASK_ID with several input files)"
        )
    first = Path(inputs[0])
    return template.format(stem=first.stem, name=first.name, index=index)


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_target(
    path: str, *, inputs: Sequence[str], overwrite: bool, what: str = "output"
) -> None:
    """Refuse a target that is an input, exists (unless ``overwrite``) or cannot be written.

    Raises
    ------
    ValueError
        ``path`` is one of ``inputs`` (also through links), even with ``overwrite``.
    FileExistsError, FileNotFoundError, IsADirectoryError, PermissionError
        As named.
    """
    target = Path(path).expanduser()
    for source in inputs:
        if _same_file(str(target), source):
            raise UsageError(
                f"{what} {path} is the input file {source}: geogpvae never writes over its "
                "input, not even with --overwrite; choose another name"
            )
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write {what} {path}: folder {folder} does not exist")
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {what} {path}: it is a folder")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{what} {path} already exists; pass --overwrite to replace it")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write {what} {path}: folder {folder} is not writable")


# =========================================================================== messages
class Reporter:
    """One-line messages on stderr, from the main process only, unless quiet."""

    def __init__(self, quiet: bool = False, active: bool = True) -> None:
        self.quiet, self.active = quiet, active

    def __call__(self, message: str) -> None:
        if self.active and not self.quiet:
            print(f"{PROG}: {message}", file=sys.stderr, flush=True)


@contextmanager
def _plain_warnings() -> Iterator[None]:
    """Show warnings as one line ``geogpvae: warning: ...``."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _progress(mode: str) -> bool | str:
    return True if mode == "auto" else mode


# =========================================================================== impute
@dataclass
class Job:
    """A resolved ``impute`` job: settings plus the concrete files."""

    settings: Settings
    inputs: list[str]
    output: str
    save_model: str | None
    task_index: int | None
    checkpoint: Path | None
    argv: list[str]


def _check_device(device: str) -> None:
    import torch

    try:
        dev = torch.device("cuda" if device == "auto" else device)
    except (RuntimeError, ValueError):
        raise UsageError(
            f"--device {device!r} is not a device: use auto, cpu, cuda or cuda:N"
        ) from None
    if device != "auto" and dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: CUDA is not available here; use --device auto or cpu")


def plan_job(settings: Settings, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Job:
    """Resolve the files of an ``impute`` job and check the targets, before reading data."""
    env = os.environ if env is None else env
    _check_device(settings.device)
    if settings.skip_existing and settings.overwrite:
        raise UsageError("--skip-existing and --overwrite contradict each other; give one")
    if settings.resume and not settings.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir (the folder holding the checkpoint)")
    files = expand_inputs(settings.inputs)
    files, index = select_task(files, settings.task_index, settings.concat_dim, env)
    output = format_output(settings.output, files, index)
    model = format_output(settings.save_model, files, index) if settings.save_model else None
    checkpoint = None
    if settings.checkpoint_dir:
        from .jobs import checkpoint_path

        checkpoint = checkpoint_path(Path(settings.checkpoint_dir).expanduser(), output)
    return Job(settings, files, output, model, index, checkpoint, list(argv))


def check_job_targets(job: Job) -> None:
    """Fail fast: OUT, the model file and the checkpoint folder, before any training."""
    s = job.settings
    check_target(job.output, inputs=job.inputs, overwrite=s.overwrite)
    if job.save_model:
        if _same_file(job.save_model, job.output):
            raise UsageError(f"--save-model {job.save_model} is the same file as the output")
        check_target(job.save_model, inputs=job.inputs, overwrite=s.overwrite, what="model file")
    if job.checkpoint is None:
        return
    folder = job.checkpoint.parent
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"--checkpoint-dir {folder} is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    if job.checkpoint.exists() and not (s.resume or s.overwrite):
        raise FileExistsError(
            f"checkpoint {job.checkpoint} exists from an earlier run of this job: pass --resume "
            "to continue it, or --overwrite to start over"
        )


def _identity_options(imputer: Any, settings: Settings) -> dict[str, Any]:
    from .fields import parse_transforms

    config = imputer.config_.to_dict()
    config.pop("device", None)
    return {
        **config,
        "coords": imputer.coords,
        "mask": imputer.mask,
        "transform": parse_transforms(imputer.transform),
        "coord_scale": imputer.coord_scale,
        "concat_dim": settings.concat_dim,
    }


def _transform(base: Any, log_vars: Sequence[str]) -> Any:
    if not log_vars:
        return base
    if isinstance(base, str):
        raise UsageError("give either transform = '...' for every variable or --log-vars, not both")
    merged = dict(base or {})
    merged.update({name: "log" for name in log_vars})
    return merged


def make_imputer(settings: Settings, device: str, progress: bool | str) -> Any:
    """The :class:`~geogpvae.api.GPVAEImputer` of a job (options checked here)."""
    from .api import GPVAEImputer

    options = dict(settings.options)
    transform = _transform(options.pop("transform", None), settings.log_vars)
    return GPVAEImputer(
        engine=settings.engine,
        neighbours=settings.neighbours,
        coords=settings.coords,
        mask=settings.mask_var,
        transform=transform,
        epochs=settings.epochs,
        seed=settings.seed,
        device=device,
        progress=progress,
        **options,
    )


def _open(inputs: Sequence[str], concat_dim: str | None) -> Any:
    from .io import open_dataset

    return open_dataset(list(inputs) if len(inputs) > 1 else inputs[0], concat_dim=concat_dim)


class _Checkpointer:
    """Saves the engine's snapshot every few epochs (main process only)."""

    def __init__(
        self, path: Path | None, identity: dict[str, Any], every: int, total: int, active: bool
    ) -> None:
        self.path, self.identity, self.every, self.total = path, identity, every, total
        self.active = active and path is not None
        self.saved_epoch = -1

    def save(self, engine: Any) -> None:
        from .jobs import save_checkpoint

        epoch = int(engine.train_state.epoch)
        if self.active and epoch != self.saved_epoch:
            save_checkpoint(self.path, engine.checkpoint(), self.identity)
            self.saved_epoch = epoch

    def after_epoch(self, engine: Any) -> None:
        epoch = int(engine.train_state.epoch)
        if epoch % self.every == 0 or epoch == self.total:
            self.save(engine)

    def discard(self) -> None:
        if self.active and self.path.exists():
            self.path.unlink()


def _starting_point(job: Job, identity: dict[str, Any], cluster: Any, say: Reporter) -> Any:
    """The snapshot to resume from (or None), decided by rank 0 and shared with the others."""
    from .jobs import checkpoint_epoch, load_checkpoint

    def decide() -> Any:
        path = job.checkpoint
        if path is None or not path.exists():
            if job.settings.resume:
                say(f"no checkpoint {path} yet: starting from the beginning")
            return None
        if not job.settings.resume:
            say(f"--overwrite: discarding the checkpoint {path}")
            path.unlink()
            return None
        snapshot = load_checkpoint(path, identity)
        say(f"resuming from {path} after epoch {checkpoint_epoch(snapshot)}")
        return snapshot

    if not cluster.parallel:
        return decide()
    result: tuple[str, Any] = ("ok", None)
    if cluster.is_main:
        try:
            result = ("ok", decide())
        except _bad_input_types() as err:
            result = ("error", _one_line(err))
            cluster.share(result)
            raise
    result = cluster.share(result)
    if result[0] == "error":
        raise UsageError(f"rank 0 could not resume: {result[1]}")
    return result[1]


def _train(
    imputer: Any,
    field: Any,
    resume: Any,
    checkpointer: _Checkpointer,
    should_stop: Callable[[], bool],
) -> Any:
    """Fit, turning errors after the input was accepted into :class:`JobFailure`."""
    from .engine import InputError
    from .jobs import fit_imputer

    try:
        fit_imputer(
            imputer,
            field,
            resume=resume,
            callback=checkpointer.after_epoch,
            should_stop=should_stop,
        )
    except InputError:
        raise
    except (ValueError, TypeError, KeyError) as err:
        raise JobFailure(f"training failed: {type(err).__name__}: {_one_line(err)}") from err
    return imputer.engine_


def _write_results(job: Job, imputer: Any, ds: Any, say: Reporter) -> None:
    from .io import to_netcdf

    result = imputer.impute(ds)
    result.attrs["geogpvae_command"] = shlex.join([PROG, *job.argv])
    if job.save_model:
        imputer.save(job.save_model, overwrite=job.settings.overwrite)
        say(f"saved the model to {job.save_model}")
    to_netcdf(result, job.output, overwrite=job.settings.overwrite)
    say(f"wrote {job.output}")


def _describe_field(field: Any, imputer: Any) -> str:
    n, k = field.values.shape
    missing = float(1 - (~_isnan(field.values)).mean())
    return (
        f"{n} locations x {k} variables ({', '.join(field.names)}), {missing:.1%} missing; "
        f"x from {field.geometry.describe()}; engine {imputer.config_.engine}, "
        f"{imputer.config_.neighbours} neighbours, {imputer.config_.n_epochs(n)} epochs"
    )


def _check_enough_locations(n: int, neighbours: int) -> None:
    from .engine import InputError

    if n < neighbours + 1:
        raise InputError(
            f"{n} locations (inside the domain) are fewer than neighbours + 1 = {neighbours + 1}; "
            f"use --neighbours {max(n - 1, 0)} or fewer"
        )


def _isnan(a: Any) -> Any:
    import numpy as np

    return np.isnan(a)


def run_impute(job: Job) -> int:
    """Run a planned ``impute`` job (targets already checked); returns the exit code."""
    from .jobs import start_cluster

    s = job.settings
    if s.distributed == "off":
        from .jobs import Cluster

        cluster, device = Cluster(), s.device
    else:
        cluster, device = start_cluster(s.device, timeout_s=s.dist_timeout)
    try:
        return _impute_on(job, cluster, device)
    finally:
        cluster.close()


def _impute_on(job: Job, cluster: Any, device: str) -> int:
    from .fields import prepare_field
    from .jobs import JobInterrupted, SignalTrap, job_identity

    s = job.settings
    say = Reporter(s.quiet, cluster.is_main)
    if cluster.parallel:
        say(f"{cluster.world} processes ({cluster.backend}); this is rank 0 on {device}")
    imputer = make_imputer(s, device, _progress(s.progress) if cluster.is_main else False)
    say(f"reading {', '.join(job.inputs)}")
    with _open(job.inputs, s.concat_dim) as ds:
        field = prepare_field(
            ds,
            s.vars,
            coords=imputer.coords,
            mask=imputer.mask,
            transform=imputer.transform,
            coord_scale=imputer.coord_scale,
        )
        _check_enough_locations(field.values.shape[0], imputer.config_.neighbours)
        say(_describe_field(field, imputer))
        identity = job_identity(
            job.inputs, field.names, _identity_options(imputer, s), field.fingerprint()
        )
        resume = _starting_point(job, identity, cluster, say)
        total = imputer.config_.n_epochs(field.values.shape[0])
        checkpointer = _Checkpointer(
            job.checkpoint, identity, s.checkpoint_every, total, cluster.is_main
        )
        with SignalTrap(announce=say) as trap:
            stop = {"signum": 0}

            def should_stop() -> bool:
                stop["signum"] = cluster.max(trap.signum or 0)
                return stop["signum"] > 0

            engine = _train(imputer, field, resume, checkpointer, should_stop)
            if engine.interrupted:
                if cluster.is_main:
                    checkpointer.save(engine)
                cluster.max(0)  # everyone waits for the checkpoint
                raise JobInterrupted(
                    stop["signum"], job.checkpoint, int(engine.train_state.epoch), total
                )
            return _finish(job, imputer, ds, checkpointer, cluster, say)


def _finish(
    job: Job, imputer: Any, ds: Any, checkpointer: _Checkpointer, cluster: Any, say: Reporter
) -> int:
    """Rank 0 writes the outputs; every rank waits for it and ends with the same code."""
    status, error = EXIT_OK, None
    if cluster.is_main:
        try:
            _write_results(job, imputer, ds, say)
            checkpointer.discard()
        except Exception as err:  # noqa: BLE001 - re-raised below, after the others are told
            status, error = EXIT_FAILURE, err
    status = cluster.max(status)
    if error is not None:
        raise error
    if status != EXIT_OK:
        raise JobFailure("rank 0 failed to write the output")
    return EXIT_OK


def cmd_impute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae impute``."""
    settings = resolve_settings(args, needs_output=True)
    job = plan_job(settings, argv)
    if settings.skip_existing and Path(job.output).exists():
        Reporter(settings.quiet)(f"{job.output} exists: skipping (--skip-existing)")
        return EXIT_OK
    check_job_targets(job)
    return run_impute(job)


# =========================================================================== info
def estimate_memory(
    n: int, cells: int, d: int, k: int, h: int, context_sizes: int, *, model_bytes: int = 4
) -> dict[str, int]:
    """Bytes a run needs, roughly, by part.

    Parameters
    ----------
    n : int
        Locations inside the domain (N).
    cells : int
        Cells of the variables' full shape (the output grid).
    d, k, h : int
        Columns of x (D), variables (K), neighbours (H).
    context_sizes : int
        Number of neighbourhood sizes the encoder summarises (its context has 2K of each).
    model_bytes : int
        Bytes of the model's floats (4 for float32, 8 for float64).

    Returns
    -------
    dict of str to int
        ``field`` (x (N, D) and values (N, K) float64 plus the variables as read),
        ``model`` (the training tensors: x, values, mask, context and neighbour indices:
        about N (D + 2K + 2K context + H) numbers), ``outputs`` (filled values, std and flags
        on the grid, and the predictive moments) and ``total``.
    """
    field_bytes = 8 * n * (d + k) + 8 * cells * k
    model = n * (d + k + 2 * k * context_sizes) * model_bytes + n * k + 8 * n * (h + 1)
    outputs = cells * k * (8 + 8 + 1) + 4 * 8 * n * k
    return {
        "field": field_bytes,
        "model": model,
        "outputs": outputs,
        "total": field_bytes + model + outputs,
    }


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"  # pragma: no cover


def _exclusion_reason(ds: Any, name: str, chosen: Sequence[str]) -> str:
    import numpy as np

    var = ds[name]
    if not np.issubdtype(var.dtype, np.number):
        return f"not numeric ({var.dtype})"
    if not var.dims:
        return "a scalar"
    if any(a in var.attrs for a in ("flag_values", "flag_meanings", "flag_masks")):
        return "a flag variable"
    for suffix in ("_std", "_imputed"):
        if name.endswith(suffix) and name[: -len(suffix)] in ds.data_vars:
            return f"output of an earlier run ({suffix[1:]} of {name[: -len(suffix)]})"
    if chosen and set(var.dims) != set(ds[chosen[0]].dims):
        return f"on other dims {tuple(map(str, var.dims))}"
    return "used as coordinate, mask, bounds or other reference"


def _missing_fraction(ds: Any, name: str, domain: Any) -> float:
    null = ds[name].isnull()
    if domain is None:
        return float(null.mean())
    inside = int(domain.sum())
    return float((null & domain).sum()) / inside if inside else float("nan")


def describe_input(ds: Any, settings: Settings) -> dict[str, Any]:
    """What :func:`cmd_info` reports, as a JSON-friendly dict."""
    import xarray as xr

    from .config import GPVAEConfig
    from .fields import (
        build_geometry,
        choose_coordinates,
        domain_mask,
        select_variables,
        variable_dims,
    )

    exclude = ([settings.mask_var] if settings.mask_var else []) + list(settings.coords or [])
    names = select_variables(ds, settings.vars, exclude=exclude)
    dims = variable_dims(ds, names)
    chosen = choose_coordinates(ds, dims, settings.coords)
    options = {k: v for k, v in settings.options.items() if k not in ("transform", "coord_scale")}
    geometry = build_geometry(ds, chosen, settings.options.get("coord_scale"))
    config = GPVAEConfig().replace(
        engine=settings.engine, neighbours=settings.neighbours, epochs=settings.epochs, **options
    )
    sizes = {d: int(ds.sizes[d]) for d in dims}
    cells = int(math.prod(sizes.values()))
    domain = None
    if settings.mask_var:
        domain = xr.DataArray(domain_mask(ds, settings.mask_var, dims), dims=dims)
    n = cells if domain is None else int(domain.sum())
    d, k = geometry.n_columns, len(names)
    memory = estimate_memory(
        n,
        cells,
        d,
        k,
        config.neighbours,
        len(config.context_scales),
        model_bytes=8 if config.dtype == "float64" else 4,
    )
    return {
        "dims": sizes,
        "layout": "scattered" if len(dims) == 1 else "gridded",
        "locations": n,
        "cells": cells,
        "variables": {
            v: {
                "dtype": str(ds[v].dtype),
                "units": ds[v].attrs.get("units"),
                "missing": _missing_fraction(ds, v, domain),
            }
            for v in names
        },
        "other_variables": {
            str(v): _exclusion_reason(ds, str(v), names)
            for v in ds.data_vars
            if str(v) not in names
        },
        "coordinates": [{"name": n_, "role": r} for n_, r in chosen],
        "x": {"columns": d, "description": geometry.describe()},
        "engine": {
            "engine": config.engine,
            "neighbours": config.neighbours,
            "epochs": config.n_epochs(n),
            "batch_size": config.batch_size,
            "dtype": config.dtype,
            "context": list(config.context_scales),
        },
        "memory_bytes": memory,
    }


def _info_text(files: Sequence[str], info: Mapping[str, Any]) -> str:
    dims = " x ".join(f"{d} {s}" for d, s in info["dims"].items())
    lines = [
        f"input: {', '.join(files)}",
        f"layout: {info['layout']} ({dims}); {info['locations']} locations to model",
    ]
    lines.append("variables imputed by default (or as chosen):")
    for name, v in info["variables"].items():
        units = f" [{v['units']}]" if v["units"] else ""
        lines.append(f"  {name}{units}: {v['dtype']}, {v['missing']:.1%} missing")
    for name, reason in info["other_variables"].items():
        lines.append(f"  (not imputed) {name}: {reason}")
    coords = ", ".join(f"{c['name']} ({c['role']})" for c in info["coordinates"])
    lines.append(f"coordinates: {coords}")
    lines.append(f"model x: {info['x']['columns']} column(s): {info['x']['description']}")
    e = info["engine"]
    lines.append(
        f"run: engine {e['engine']}, {e['neighbours']} neighbours, {e['epochs']} epochs "
        f"of batches of {e['batch_size']}, {e['dtype']}"
    )
    m = info["memory_bytes"]
    lines.append(
        f"memory estimate: about {_size(m['total'])} (field {_size(m['field'])}, model tensors "
        f"{_size(m['model'])}, outputs {_size(m['outputs'])}); an estimate: add about 1 GiB for "
        "Python and PyTorch, and the model tensors live on the GPU when there is one"
    )
    return "\n".join(lines)


def cmd_info(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae info``."""
    settings = resolve_settings(args, needs_output=False)
    files = expand_inputs(settings.inputs)
    with _open(files, settings.concat_dim) as ds:
        info = describe_input(ds, settings)
    if args.json:
        print(json.dumps({"input": files, **info}, indent=2, default=str))
    else:
        print(_info_text(files, info))
    return EXIT_OK


# =========================================================================== predict
def _load_model(path: str, device: str | None) -> Any:
    from .api import GPVAEImputer

    if not Path(path).is_file():
        raise FileNotFoundError(f"model file {path} not found")
    try:
        return GPVAEImputer.load(path, device=device, progress=False)
    except (ValueError, KeyError, TypeError):
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise UsageError(
            f"{path} is not a model written by '{PROG} impute --save-model' "
            f"(torch.load with weights_only=True failed: {type(err).__name__})"
        ) from None


def cmd_predict(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae predict``."""
    from .io import to_netcdf

    say = Reporter(args.quiet)
    if args.device is not None:
        _check_device(args.device)
    coords = expand_inputs([args.coords])
    check_target(args.output, inputs=[args.model, *coords], overwrite=bool(args.overwrite))
    device = None if args.device in (None, "auto") else args.device
    imputer = _load_model(args.model, device)
    with _open(coords, None) as ds:
        out = imputer.predict(ds)
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        to_netcdf(out, args.output, overwrite=bool(args.overwrite))
    where = " x ".join(f"{d} {n}" for d, n in out.sizes.items())
    say(f"wrote {args.output} ({', '.join(imputer.vars_)} at {where})")
    return EXIT_OK


# =========================================================================== plot
_PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg", "tif", "tiff", "eps", "ps")


def _plot_kind(args: argparse.Namespace, ndim: int) -> str:
    if args.layer is not None:
        return "layers"
    if args.map:
        return "map"
    if args.uncertainty:
        return "uncertainty"
    return "layers" if ndim >= 3 else "map"


def _figure(ds: Any, var: str, kind: str, args: argparse.Namespace, truth: Any) -> Any:
    from . import plot

    if kind == "layers":
        layer = args.layer if args.layer is not None else [0]
        return plot.layers(
            ds, var, layer=layer if len(layer) > 1 else layer[0], axis=args.axis, truth=truth
        )
    if kind == "map":
        return plot.field_map(ds, var, truth=truth)
    return plot.uncertainty(ds, var, truth=truth)


def _default_variable(ds: Any) -> str:
    for name in ds.data_vars:
        if f"{name}_std" in ds.data_vars:
            return str(name)
    raise UsageError("the file holds no imputed variable (v with v_std); name one with --var")


def _save_figure(fig: Any, path: Path, dpi: int) -> None:
    import secrets

    fmt = path.suffix.lstrip(".").lower()
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def cmd_plot(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae plot``."""
    out = Path(args.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in _PLOT_FORMATS:
        raise UsageError(
            f"-o {args.output}: unknown figure format {out.suffix or '(none)'!r}; "
            f"use one of .{', .'.join(_PLOT_FORMATS)}"
        )
    files = expand_inputs([args.input])
    check_target(args.output, inputs=files, overwrite=bool(args.overwrite), what="figure")
    import matplotlib

    matplotlib.use("Agg")
    with _open(files, None) as ds:
        var = args.var or _default_variable(ds)
        if var not in ds.data_vars:
            raise UsageError(
                f"variable {var!r} is not in {args.input}; available: "
                f"{', '.join(map(str, ds.data_vars))}"
            )
        truth = None
        if args.truth:
            truth = _open(expand_inputs([args.truth]), None)
        kind = _plot_kind(args, ds[var].ndim)
        fig = _figure(ds, var, kind, args, truth)
        try:
            _save_figure(fig, out, args.dpi)
        finally:
            import matplotlib.pyplot as plt

            plt.close(fig)
            if truth is not None:
                truth.close()
    Reporter(args.quiet)(f"wrote {args.output} ({kind} of {var})")
    return EXIT_OK


# =========================================================================== demo
def demo_scores(ds: Any, truth: Any, out: Any, names: Sequence[str]) -> dict[str, dict[str, float]]:
    """RMSE, mean-imputation RMSE and 95 % coverage at the hidden values, per variable and all."""
    import numpy as np

    rows: dict[str, dict[str, float]] = {}
    pooled: dict[str, list[Any]] = {"err": [], "mean": [], "z": []}
    for name in names:
        hidden = ds[name].isnull().values & truth[name].notnull().values
        t = truth[name].values[hidden]
        err = out[name].values[hidden] - t
        mean_err = float(np.nanmean(ds[name].values)) - t
        z = np.abs(err) / out[f"{name}_std"].values[hidden]
        rows[name] = _score_row(err, mean_err, z)
        for key, arr in zip(("err", "mean", "z"), (err, mean_err, z)):
            pooled[key].append(arr)
    rows["all"] = _score_row(*(np.concatenate(pooled[k]) for k in ("err", "mean", "z")))
    return rows


def _score_row(err: Any, mean_err: Any, z: Any) -> dict[str, float]:
    import numpy as np

    return {
        "rmse": float(np.sqrt(np.mean(err**2))),
        "rmse_mean_imputation": float(np.sqrt(np.mean(mean_err**2))),
        "coverage95": float(np.mean(z < 1.959964)),
        "hidden": int(err.size),
    }


def _demo_table(scores: Mapping[str, Mapping[str, float]]) -> str:
    lines = [f"{'variable':<10}{'hidden':>8}{'RMSE':>9}{'mean-fill RMSE':>16}{'95% coverage':>14}"]
    for name, s in scores.items():
        lines.append(
            f"{name:<10}{s['hidden']:>8d}{s['rmse']:>9.3f}"
            f"{s['rmse_mean_imputation']:>16.3f}{s['coverage95']:>14.1%}"
        )
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae demo``."""
    from .datasets import make_gaussian_field
    from .io import to_netcdf

    say = Reporter(args.quiet)
    shape = tuple(_positive(int(v), "--shape") for v in _names(args.shape, "--shape"))
    if not 0 <= args.missing < 1:
        raise UsageError(f"--missing must be in [0, 1), got {args.missing}")
    _check_device(args.device)
    if args.output:
        check_target(args.output, inputs=[], overwrite=bool(args.overwrite))
    settings = Settings(
        engine=args.engine,
        epochs=args.epochs,
        seed=args.seed,
        device=args.device,
        options=_cli_options(args),
    )
    progress = _progress(args.progress or ("none" if args.quiet else "auto"))
    imputer = make_imputer(settings, args.device, progress)
    ds, truth = make_gaussian_field(shape, missing=args.missing, seed=args.seed, return_truth=True)
    names = [str(v) for v in ds.data_vars]
    say(
        f"synthetic field: {' x '.join(map(str, shape))} grid, {len(names)} variables, "
        f"{args.missing:.0%} hidden; engine {imputer.config_.engine}, "
        f"{imputer.config_.n_epochs(int(math.prod(shape)))} epochs"
    )
    start = time.perf_counter()
    out = imputer.fit(ds).impute(ds)
    seconds = time.perf_counter() - start
    scores = demo_scores(ds, truth, out, names)
    print(_demo_table(scores))
    total = scores["all"]
    print(
        f"RMSE {total['rmse']:.3f} against {total['rmse_mean_imputation']:.3f} for mean "
        f"imputation; 95% interval coverage {total['coverage95']:.1%}; {seconds:.0f} s"
    )
    if args.output:
        out.attrs["geogpvae_command"] = shlex.join([PROG, *argv])
        to_netcdf(out, args.output, overwrite=bool(args.overwrite))
        say(f"wrote {args.output}")
    return EXIT_OK


# =========================================================================== parser
class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors become :class:`UsageError` (one line, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see '{self.prog} --help')")


_FORMATTER = argparse.RawDescriptionHelpFormatter

_IMPUTE_EPILOG = f"""\
examples:
  {PROG} impute soil.nc soil_filled.nc --vars Cd,Cu,Pb
  {PROG} impute spe10.nc spe10_filled.nc --vars porosity,kx --log-vars kx --engine hpa \\
      --neighbours 30 --option coord_scale.z=5 --option batch_size=1024
  {PROG} impute "era5/*.nc" t2m_filled.nc --concat-dim time --vars t2m
  {PROG} impute in.nc out.nc --config job.toml --epochs 500      # flags override job.toml
  {PROG} impute in.nc out.nc --checkpoint-dir ckpt --resume     # continue after SIGTERM
  {PROG} impute "tiles/*.nc" "filled/{{stem}}_filled.nc" --task-index 3   # one file per array task

job.toml:
  vars = ["Cd", "Cu"]
  engine = "spa"
  neighbours = 20
  checkpoint-dir = "ckpt"
  [options]
  batch_size = 512
  coord_scale = {{ z = 5 }}

exit codes: 0 done; 1 failed; 2 bad usage or input (nothing written);
  128+N stopped by signal N (143 SIGTERM) after writing a checkpoint, OUT not written.
"""

_INFO_EPILOG = f"""\
examples:
  {PROG} info soil.nc
  {PROG} info "era5/*.nc" --concat-dim time --vars t2m --neighbours 30
  {PROG} info spe10.nc --json
"""

_PREDICT_EPILOG = f"""\
examples:
  {PROG} impute soil.nc soil_filled.nc --save-model soil.pt
  {PROG} predict soil.pt grid.nc soil_on_grid.nc
COORDS.nc needs the coordinates the model was trained on (a grid: 1-D coordinates on their
own dims; scattered points: coordinates along one dim); its data variables are ignored.
"""

_PLOT_EPILOG = f"""\
examples:
  {PROG} plot spe10_filled.nc --var kx --layer 0,42 -o kx_layers.png
  {PROG} plot soil_filled.nc --var Cd --map -o cd_map.pdf
  {PROG} plot demo.nc --var v0 --uncertainty -o v0_std.png
Without --layer/--map/--uncertainty: layers for 3-D variables, a map otherwise.
"""

_DEMO_EPILOG = f"""\
examples:
  {PROG} demo
  {PROG} demo demo.nc --shape 64,64 --epochs 100
  {PROG} plot demo.nc --var v0 -o demo_v0.png
"""


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=None,
        help="no messages except errors (and no progress unless --progress)",
    )
    sub.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of an error",
    )


def _engine_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--vars",
        help="variables to impute together, comma separated "
        "(default: every numeric data variable on the shared dims)",
    )
    sub.add_argument(
        "--coords", help="coordinates forming the model's x, comma separated (default: detected)"
    )
    sub.add_argument(
        "--mask-var", help="boolean variable marking the domain (False: not modelled, left as is)"
    )
    sub.add_argument(
        "--engine", choices=["spa", "hpa"], help="GP prior approximation (default spa)"
    )
    sub.add_argument("--neighbours", type=int, help="neighbours H per location (default 20)")
    sub.add_argument("--concat-dim", help="combine several input files along this dim")
    sub.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="any engine option, repeatable; VALUE is a TOML/JSON literal "
        "(batch_size=512, encoder_hidden=[64,64], coord_scale.z=5)",
    )
    sub.add_argument(
        "--config",
        metavar="JOB.toml",
        help="read settings from a TOML file; command-line flags override it",
    )


def _impute_parser(subs: Any) -> None:
    p = subs.add_parser(
        "impute",
        help="fill the holes of a NetCDF file",
        epilog=_IMPUTE_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} impute [options] IN [IN ...] OUT",
        description="Fill the holes of variables in NetCDF file(s) and write the "
        "result (with v_std and v_imputed) to OUT, atomically.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="input file(s) or glob pattern(s), then the output file (may contain "
        "{stem}, {name}, {index})",
    )
    _engine_flags(p)
    p.add_argument("--log-vars", help="variables to model in log space, comma separated")
    p.add_argument("--epochs", type=int, help="training epochs (default: about 4000 steps)")
    p.add_argument("--device", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=int, help="random seed (default 0)")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="save resumable checkpoints here")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="N",
        help="checkpoint every N epochs (default 10), and always on SIGTERM/SIGINT/SIGUSR1",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        default=None,
        help="continue from the checkpoint in --checkpoint-dir (starts afresh if none)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        default=None,
        help="replace an existing OUT, model file or checkpoint (never the input)",
    )
    p.add_argument(
        "--skip-existing",
        action="store_true",
        default=None,
        help="do nothing (exit 0) when OUT exists, e.g. in a rerun job array",
    )
    p.add_argument("--save-model", metavar="M.pt", help="also save the trained model")
    p.add_argument(
        "--task-index",
        type=int,
        metavar="I",
        help="process only file I (0-based) of "
        "the sorted input list (default: $SLURM_ARRAY_TASK_ID with several files)",
    )
    p.add_argument(
        "--progress",
        choices=["auto", "bar", "log", "none"],
        help="progress display (auto: a bar on a terminal, log lines otherwise)",
    )
    p.add_argument(
        "--distributed",
        choices=["auto", "off"],
        help="auto (default): join a torchrun/srun launch of several processes; off: run alone",
    )
    p.add_argument(
        "--dist-timeout",
        type=float,
        metavar="S",
        help="longest wait of one process for the others, seconds (default 3600)",
    )
    _common(p)
    p.set_defaults(handler=cmd_impute)


def _info_parser(subs: Any) -> None:
    p = subs.add_parser(
        "info",
        help="what a file holds, for geogpvae",
        epilog=_INFO_EPILOG,
        formatter_class=_FORMATTER,
        usage=f"{PROG} info [options] IN [IN ...]",
        description="Candidate variables, coordinates and how they form the "
        "model's x, missing fractions, layout and a memory estimate.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="input file(s) or glob pattern(s)")
    _engine_flags(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    _common(p)
    p.set_defaults(handler=cmd_info, epochs=None)


def _predict_parser(subs: Any) -> None:
    p = subs.add_parser(
        "predict",
        help="predict at new locations with a saved model",
        epilog=_PREDICT_EPILOG,
        formatter_class=_FORMATTER,
        description="Predict every variable of a saved model (impute "
        "--save-model) at the locations of COORDS.nc.",
    )
    p.add_argument("model", metavar="MODEL.pt")
    p.add_argument("coords", metavar="COORDS.nc")
    p.add_argument("output", metavar="OUT.nc")
    p.add_argument("--device", help="auto (default: as saved), cpu, cuda or cuda:N")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    _common(p)
    p.set_defaults(handler=cmd_predict)


def _layer_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"layers must be integers, e.g. 0 or 0,5,-1; got {text!r}"
        ) from None


def _plot_parser(subs: Any) -> None:
    p = subs.add_parser(
        "plot",
        help="plot an imputed file",
        epilog=_PLOT_EPILOG,
        formatter_class=_FORMATTER,
        description="Layer slices, a map or uncertainty panels of an imputed "
        "variable, as PNG, PDF or SVG (by the extension of -o).",
    )
    p.add_argument("input", metavar="OUT.nc", help="a file written by geogpvae impute")
    p.add_argument("--var", help="variable (default: the first imputed one)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--layer",
        type=_layer_list,
        metavar="K[,K...]",
        help="layer slices at these indices along --axis",
    )
    kind.add_argument("--map", action="store_true", help="a map of the field and its std")
    kind.add_argument("--uncertainty", action="store_true", help="uncertainty panels")
    p.add_argument("--axis", default="z", help="dim to slice layers along (default z)")
    p.add_argument("--truth", metavar="TRUTH.nc", help="the complete field, for error panels")
    p.add_argument(
        "-o", "--output", required=True, metavar="FIG", help="figure file (.png, .pdf, ...)"
    )
    p.add_argument(
        "--dpi", type=int, default=150, help="resolution of raster formats (default 150)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing figure")
    _common(p)
    p.set_defaults(handler=cmd_plot)


def _demo_parser(subs: Any) -> None:
    p = subs.add_parser(
        "demo",
        help="impute a built-in synthetic field and score it",
        epilog=_DEMO_EPILOG,
        formatter_class=_FORMATTER,
        description="The built-in default job: a synthetic 3-variable "
        "Gaussian-process field with half of its values hidden is imputed; "
        "prints RMSE against mean imputation and the 95%% interval coverage.",
    )
    p.add_argument("output", nargs="?", metavar="OUT.nc", help="also write the imputed field")
    p.add_argument("--shape", default="48,48", help="grid shape, comma separated (default 48,48)")
    p.add_argument("--engine", choices=["spa", "hpa"], default="spa")
    p.add_argument("--epochs", type=int, default=60, help="training epochs (default 60)")
    p.add_argument("--missing", type=float, default=0.5, help="fraction hidden (default 0.5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--progress", choices=["auto", "bar", "log", "none"])
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="engine option")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    _common(p)
    p.set_defaults(handler=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``geogpvae`` argument parser."""
    parser = _Parser(
        prog=PROG,
        formatter_class=_FORMATTER,
        description="Fill the holes in spatial fields with neighbour-driven GP variational "
        "autoencoders, with their uncertainty.",
        epilog=f"examples:\n  {PROG} demo\n  {PROG} info in.nc\n  {PROG} impute in.nc out.nc "
        f"--vars a,b\n  {PROG} plot out.nc --var a -o a.png\n\n"
        f"'{PROG} COMMAND --help' describes each command.",
    )
    parser.add_argument("--version", action="version", version=_version_text())
    parser.add_argument("--debug", action="store_true", default=False, help=argparse.SUPPRESS)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in (_impute_parser, _info_parser, _predict_parser, _plot_parser, _demo_parser):
        add(subs)
    return parser


def _version_text() -> str:
    return f"{PROG} {__version__} (Python {sys.version.split()[0]})"


# =========================================================================== main
def _rank() -> int:
    """This process's rank in a torchrun/srun launch (0 when alone or unknown)."""
    from .jobs import launch_environment

    try:
        launch = launch_environment()
    except ValueError:
        return 0
    return 0 if launch is None else launch.rank


def _report(err: BaseException, debug: bool, prefix: str | None = "error") -> None:
    if debug:
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    rank = _rank()
    name = f"{PROG} (rank {rank})" if rank else PROG
    lead = f"{name}: {prefix}: " if prefix else f"{name}: "
    print(f"{lead}{_one_line(err)}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``geogpvae`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 success, 1 failure, 2 bad usage or input, 128 + N stopped by
        signal N after checkpointing.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    with _plain_warnings():
        return _dispatch(argv, debug)


def _dispatch(argv: list[str], debug: bool) -> int:
    from .jobs import JobInterrupted, flush_streams

    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError(
                f"choose a command: impute, info, predict, plot or demo (see '{PROG} --help')"
            )
        return args.handler(args, argv)
    except SystemExit as exc:  # --help, --version
        return (
            exc.code
            if isinstance(exc.code, int)
            else (EXIT_OK if exc.code is None else EXIT_FAILURE)
        )
    except JobInterrupted as exc:
        if _rank() == 0:
            _report(exc, debug, prefix=None)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    except _bad_input_types() as exc:
        _report(exc, debug)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the command's last line of defence
        if not debug:
            print(
                f"{PROG}: error: {type(exc).__name__}: {_one_line(exc)} (run with --debug for "
                "the traceback)",
                file=sys.stderr,
                flush=True,
            )
        else:
            _report(exc, debug)
        return EXIT_FAILURE
    finally:
        flush_streams()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
