"""Input and output paths: globs, SLURM array tasks, output templates and target checks."""

from __future__ import annotations

import glob
import os
import re
import string
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._files import refuse_special_target
from ..errors import warn_caller
from .common import _GLOB_CHARS, UsageError, _one_line


def expand_inputs(items: Sequence[str]) -> list[str]:
    """Input paths with glob patterns expanded (sorted); FileNotFoundError for a missing file or empty pattern."""
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


def drop_own_outputs(files: list[str], template: str) -> list[str]:
    """``files`` without those that another of them writes under the output ``template`` (each named in
    a warning), so a job array writing into its input folder never takes outputs for inputs.
    Templates without ``{stem}``/``{name}``, or with ``{index}``, are left alone.
    """
    used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    if not used & {"stem", "name"} or "index" in used or len(files) < 2:
        return files
    kept = list(files)
    while True:
        made = {os.path.realpath(f): os.path.realpath(format_output(template, [f], None)) for f in kept}
        drop = [f for f in kept if any(out == os.path.realpath(f) != src for src, out in made.items())]
        if not drop:
            return kept
        for f in drop:
            warn_caller(f"leaving out input {f}: it is the output of another input under {template!r}")
        kept = [f for f in kept if f not in drop]


def select_task(
    files: list[str], task_index: int | None, concat_dim: str | None, env: Mapping[str, str]
) -> tuple[list[str], int | None]:
    """The file of this job-array task and its index, or every file and None.

    An explicit ``task_index`` always picks one file; ``SLURM_ARRAY_TASK_ID`` does when the inputs
    are several files and ``concat_dim`` is not given. Bad indices raise :class:`~geogpvae.cli.common.UsageError`.
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
    """Fill ``{stem}``/``{name}`` (the one input's name without/with extension) and ``{index}`` (the
    task index) in an output path; a :class:`~geogpvae.cli.common.UsageError` when one cannot be filled."""
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
    UsageError (a ValueError)
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
    refuse_special_target(target, what)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{what} {path} already exists; pass --overwrite to replace it")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write {what} {path}: folder {folder} is not writable")


def unfinished_reason(path: str) -> str | None:
    """Why the existing file ``path`` is not a finished geogpvae output (for ``--skip-existing``); None
    when it is: a NetCDF file with the ``geogpvae_version`` attribute every output gets before it is
    moved into place complete."""
    import netCDF4

    try:
        with netCDF4.Dataset(path, "r") as nc:
            if "geogpvae_version" not in nc.ncattrs():
                return "it has no geogpvae_version attribute, so geogpvae did not write it"
    except OSError as err:
        return f"it cannot be read as NetCDF ({_one_line(err)})"
    return None


def write_output(result: Any, output: str, overwrite: bool) -> os.stat_result:
    """Write ``result`` to ``output`` (created exclusively unless ``overwrite``); the new file's status.

    Raises a FileExistsError naming ``--overwrite`` when another job created ``output`` meanwhile.
    """
    from ..fields.io import to_netcdf

    try:
        path = to_netcdf(result, output, overwrite=overwrite)
    except FileExistsError:
        raise FileExistsError(
            f"output {output} was created by another job while this one was writing; "
            "nothing was written over it: pass --overwrite to replace it, or choose another name"
        ) from None
    return os.stat(path)


#: xarray's warning about a variable with two fill values (``_FillValue`` and ``missing_value``)
_MULTIPLE_FILLS = re.compile(r"variable '(.+?)' has multiple fill values")


def _open(inputs: Sequence[str], concat_dim: str | None, variables: Sequence[str] | None = None) -> Any:
    """The inputs as one Dataset; with ``variables``, xarray's two-fill-values warnings of others are dropped."""
    from ..fields.io import open_dataset

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = open_dataset(list(inputs) if len(inputs) > 1 else inputs[0], concat_dim=concat_dim)
    for w in caught:
        found = _MULTIPLE_FILLS.match(str(w.message))
        if found and variables is not None and found.group(1) not in variables:
            continue
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return ds
