"""Settings of a command: a TOML job file, ``--option`` literals and flags merged into one :class:`Settings`."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.config import GPVAEConfig
from .common import PROG, UsageError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

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


def _count(value: Any, key: str) -> int:
    value = _integer(value, key)
    if value < 0:
        raise ValueError(f"{key} must be 0 or more, got {value}")
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

    ``512`` -> 512, ``[64, 64]`` -> [64, 64], ``{z = 5}`` -> {"z": 5}, ``null`` -> None, ``matern52`` -> "matern52".
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


@dataclass
class Settings:
    """Everything a job needs, after merging the TOML file and the command line."""

    inputs: list[str] = field(default_factory=list)
    output: str | None = None
    vars: list[str] | None = None
    coords: list[str] | None = None
    mask_var: str | None = None
    log_vars: list[str] = field(default_factory=list)
    engine: str = GPVAEConfig.engine
    neighbours: int = GPVAEConfig.neighbours
    epochs: int | None = GPVAEConfig.epochs
    seed: int = GPVAEConfig.seed
    device: str = GPVAEConfig.device
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
    realizations: int | None = None
    first: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    #: the settings given (command line or config file), not left at their defaults
    given: frozenset[str] = frozenset()


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
    "realizations": _positive,
    "first": _count,
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

    Keys are the long names of the ``impute`` flags (``checkpoint-dir`` or ``checkpoint_dir``), ``input``
    and ``output``; the ``[options]`` table holds engine options.

    Raises
    ------
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


def _lift(
    top: dict[str, Any], options: dict[str, Any], on_command_line: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move options that have their own flag to the top level; one given both ways with two values is a UsageError."""
    options = dict(options)
    lifted = {}
    for key, name in _OPTION_ALIASES.items():
        if key in options:
            lifted[name] = _CONVERT[name](options.pop(key), key)
            if name in top and top[name] != lifted[name]:
                flag = "--" + name.replace("_", "-")
                shown = [",".join(v) if isinstance(v, list) else v for v in (top[name], lifted[name])]
                given = (f"on the command line as {flag} {shown[0]} and --option {key}={shown[1]}"
                         if on_command_line else
                         f"in the config file as {name} = {top[name]!r} and [options] {key} = {lifted[name]!r}")
                raise UsageError(f"{name} is given twice, {given}: give it once")
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
    """Merge defaults, the ``--config`` file and the command line (which wins) of the parsed ``args``.

    ``needs_output``: the last positional path is the output (``impute``); else all are inputs.
    """
    config = read_config(args.config) if getattr(args, "config", None) else {}
    file_top, file_opts = _lift(config, config.pop("options", {}), on_command_line=False)
    cli_top, cli_opts = _lift(_cli_values(args), _cli_options(args), on_command_line=True)
    top = {**file_top, **cli_top}
    settings = Settings(options=_deep_merge(file_opts, cli_opts))
    for key, value in top.items():
        if key not in ("input", "output"):
            setattr(settings, key, value)
    settings.given = frozenset(top) | (frozenset({"options"}) if settings.options else frozenset())
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


