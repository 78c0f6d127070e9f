"""Input and output paths: globs, SLURM array tasks, output templates and target checks."""

from __future__ import annotations

import errno
import glob
import os
import re
import secrets
import string
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..engine.resources import format_bytes
from .._files import disk_full, free_bytes, refuse_special_target
from ..errors import warn_caller
from ..fields.zarr_io import is_url, is_zarr, open_zarr, remote_store, to_zarr
from .common import _GLOB_CHARS, JobFailure, UsageError, _one_line


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
        if os.path.isdir(text) and not is_zarr(text):
            raise IsADirectoryError(f"input {item} is a folder, neither a NetCDF file nor a Zarr store")
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
    if is_url(path):
        _check_remote_target(path, overwrite, what)
        return
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
    if target.is_dir() and not is_zarr(target):
        raise IsADirectoryError(f"cannot write {what} {path}: it is a folder (a Zarr store is named *.zarr)")
    if not target.is_dir():
        refuse_special_target(target, what)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{what} {path} already exists; pass --overwrite to replace it")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write {what} {path}: folder {folder} is not writable")


def _check_remote_target(url: str, overwrite: bool, what: str) -> None:
    """A target at a URL: only an output, as a Zarr store (object stores hold no NetCDF file being
    written), which must not exist unless ``overwrite``."""
    if what != "output":
        raise UsageError(f"{what} {url} is at a URL: write it to a local path (only outputs, as Zarr "
                         "stores, may be at a URL)")
    if not is_zarr(url):
        raise UsageError(f"{what} {url} is at a URL: it is written as a Zarr store, so name it *.zarr")
    if not overwrite and output_exists(url):
        raise FileExistsError(f"{what} {url} already exists; pass --overwrite to replace it")


def output_exists(path: str) -> bool:
    """Whether the output ``path`` exists: a local file or folder, or a store at a URL."""
    return remote_store(path)[2] if is_url(path) else Path(path).exists()


def probe_folder(folder: Path, what: str) -> None:
    """Create and delete an empty file in ``folder``: the one sure test that it can be written.

    Raises
    ------
    PermissionError
        ``folder`` cannot be written (read-only, no permission); the message names ``what``.
    JobFailure
        No space left on its device.
    """
    probe = folder / f".geogpvae-probe.{os.getpid()}.{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise no_space(folder) from None
        raise PermissionError(
            f"cannot write in {what} {folder} ({err.strerror or _one_line(err)}): make it writable, "
            "or choose another folder"
        ) from None
    os.close(fd)
    os.unlink(probe)




def output_bytes(ds: Any, names: Sequence[str], inputs: Sequence[str], realizations: int | None = None) -> int:
    """About the size of the output of imputing ``names`` in ``ds``: the variables passed through
    compressed as well as in the ``inputs``, ``v`` and ``v_std`` uncompressed, a byte a cell of
    ``v_imputed``; with ``realizations``, that many copies of ``v`` instead of ``v`` and ``v_std``."""
    from ..fields.cf import output_dtype

    raw = sum(v.size * v.dtype.itemsize for v in ds.variables.values())
    on_disk = sum(os.path.getsize(f) for f in inputs)
    ratio = min(1.0, on_disk / raw) if raw else 1.0
    copies = 2 if realizations is None else realizations
    new = sum(ds[n].size * (copies * output_dtype(ds[n].dtype).itemsize + 1) for n in names)
    kept = sum(v.size * v.dtype.itemsize for n, v in ds.variables.items() if n not in names)
    return int(kept * ratio + new)


def check_free_space(needs: Mapping[str | os.PathLike[str], int]) -> None:
    """Refuse to start a job whose files (path -> about the bytes it takes) their devices have no room
    for; files on one device count together."""
    devices: dict[Any, list[Path]] = {}
    total: dict[Any, int] = {}
    for path, need in needs.items():
        if is_url(path):  # an object store's room is not this machine's to know
            continue
        folder = Path(path).expanduser().absolute().parent
        try:
            device = os.stat(folder).st_dev
        except OSError:
            device = folder
        devices.setdefault(device, []).append(Path(path))
        total[device] = total.get(device, 0) + int(need)
    for device, paths in devices.items():
        free = free_bytes(paths[0])
        if free is not None and free < total[device]:
            folder = paths[0].expanduser().absolute().parent
            raise UsageError(
                f"not enough free space on {folder}: need about {format_bytes(total[device])}, have "
                f"{format_bytes(free)}: free some space, or write the output elsewhere"
            )


def no_space(path: str | os.PathLike[str], what: str = "nothing was written") -> JobFailure:
    """The error of a write to ``path`` that found its device full."""
    return JobFailure(f"no space left on device: {path}; {what}: free some space and run again")




def payload_bytes(obj: Any) -> int:
    """The bytes of the tensors and arrays in ``obj`` (nested dicts, lists), as torch.save writes them."""
    if isinstance(obj, Mapping):
        return sum(payload_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(v) for v in obj)
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return int(obj.numel() * obj.element_size())
    return int(getattr(obj, "nbytes", 0))


def unfinished_reason(path: str) -> str | None:
    """Why the existing file ``path`` is not a finished geogpvae output (for ``--skip-existing``); None
    when it is: a NetCDF file or Zarr store with the ``geogpvae_version`` attribute every output gets before it is
    moved into place complete."""
    import netCDF4

    if is_zarr(path):
        try:
            attrs = open_zarr(path).attrs
        except (OSError, ValueError) as err:
            return f"it cannot be read as a Zarr store ({_one_line(err)})"
        return None if "geogpvae_version" in attrs else "it has no geogpvae_version attribute, so geogpvae did not write it"
    try:
        with netCDF4.Dataset(path, "r") as nc:
            if "geogpvae_version" not in nc.ncattrs():
                return "it has no geogpvae_version attribute, so geogpvae did not write it"
    except OSError as err:
        return f"it cannot be read as NetCDF ({_one_line(err)})"
    return None


def write_output(result: Any, output: str, overwrite: bool, compute: bool = True) -> os.stat_result | None:
    """Write ``result`` to ``output`` (created exclusively unless ``overwrite``); the new file's status
    (None for a store at a URL).

    ``compute=False`` (a Zarr store only) writes the metadata and coordinates, the variables empty.

    Raises a FileExistsError naming ``--overwrite`` when another job created ``output`` meanwhile,
    and :func:`no_space` when its device is full (nothing is left behind).
    """
    from ..fields.io import to_netcdf

    try:
        if is_zarr(output):
            path = to_zarr(result, output, overwrite=overwrite, compute=compute)
        else:
            path = to_netcdf(result, output, overwrite=overwrite)
    except FileExistsError:
        raise FileExistsError(
            f"output {output} was created by another job while this one was writing; "
            "nothing was written over it: pass --overwrite to replace it, or choose another name"
        ) from None
    except (OSError, RuntimeError) as err:
        if disk_full(err, output, sum(v.size * v.dtype.itemsize for v in result.variables.values())):
            raise no_space(output) from err
        raise
    return None if is_url(output) else os.stat(path)


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
