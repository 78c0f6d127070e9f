"""``geogpvae impute``: plan the job, train with checkpoints (resumable), write the result."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    JobFailure,
    Reporter,
    UsageError,
    _bad_input_types,
    _check_device,
    _one_line,
    _progress,
    drawn_lazily,
)
from .._files import disk_full
from ..fields.zarr_io import remote_store, remove_remote
from .files import (
    _open,
    _same_file,
    check_free_space,
    check_target,
    drop_own_outputs,
    expand_inputs,
    output_exists,
    format_output,
    no_space,
    output_bytes,
    payload_bytes,
    probe_folder,
    select_task,
    unfinished_reason,
    write_output,
)
from .settings import Settings, resolve_settings


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


def plan_job(settings: Settings, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Job:
    """Resolve the files of an ``impute`` job and check the targets, before reading data."""
    env = os.environ if env is None else env
    _check_device(settings.device)
    if settings.skip_existing and settings.overwrite:
        raise UsageError("--skip-existing and --overwrite contradict each other; give one")
    if settings.resume and not settings.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir (the folder holding the checkpoint)")
    files = drop_own_outputs(expand_inputs(settings.inputs), settings.output)
    files, index = select_task(files, settings.task_index, settings.concat_dim, env)
    output = format_output(settings.output, files, index)
    model = format_output(settings.save_model, files, index) if settings.save_model else None
    checkpoint = None
    if settings.checkpoint_dir:
        from .jobs import checkpoint_path

        checkpoint = checkpoint_path(Path(settings.checkpoint_dir).expanduser(), output)
    return Job(settings, files, output, model, index, checkpoint, list(argv))


def check_job_targets(job: Job) -> None:
    """Fail fast: OUT, the model file and the checkpoint folder (a probe file made there), before training."""
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
    probe_folder(folder, "--checkpoint-dir")
    if job.checkpoint.exists() and not (s.resume or s.overwrite):
        raise FileExistsError(
            f"checkpoint {job.checkpoint} exists from an earlier run of this job: pass --resume "
            "to continue it, or --overwrite to start over"
        )


def _identity_options(imputer: Any, settings: Settings) -> dict[str, Any]:
    return {**imputer.job_options(), "concat_dim": settings.concat_dim}


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
    from ..api import GPVAEImputer
    from ..api_imputer import imputer_from

    options = dict(settings.options)
    transforms = _transform(options.pop("transform", None), settings.log_vars)
    imputer = imputer_from(GPVAEImputer, dict(
        engine=settings.engine, neighbours=settings.neighbours, coords=settings.coords, mask=settings.mask_var,
        transforms=transforms, epochs=settings.epochs, seed=settings.seed, device=device, progress=progress,
        **options))
    imputer.engine_config()
    return imputer


class _Checkpointer:
    """Saves the engine's snapshot every few epochs (main process only)."""

    def __init__(
        self, path: Path | None, identity: dict[str, Any], every: int, total: int, active: bool
    ) -> None:
        self.path, self.identity, self.every, self.total = path, identity, every, total
        self.active = active and path is not None
        self.saved_epoch: tuple[float | None, int] = (None, -1)

    def save(self, engine: Any) -> None:
        from .jobs import save_checkpoint

        # during beta="auto"'s selection the epochs are the candidate's: its factor tells them apart
        where = (getattr(engine.selection_, "factor", None), int(engine.train_state.epoch))
        if self.active and where != self.saved_epoch:
            snapshot = engine.checkpoint()
            try:
                save_checkpoint(self.path, snapshot, self.identity)
            except (OSError, RuntimeError) as err:
                if disk_full(err, self.path, payload_bytes(snapshot)):
                    raise no_space(self.path, f"the checkpoint of epoch {where[1]} was not written") from err
                raise
            self.saved_epoch = where

    def after_epoch(self, engine: Any) -> None:
        epoch = int(engine.train_state.epoch)
        if epoch % self.every == 0 or epoch == self.total:
            self.save(engine)


    def discard(self) -> None:
        if self.active and self.path.exists():
            self.path.unlink()


def _on_main(cluster: Any, decide: Callable[[], Any], what: str) -> Any:
    """``decide()`` on rank 0, its result shared with the others (its bad-input error raised on all)."""
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
        raise UsageError(f"rank 0 could not {what}: {result[1]}")
    return result[1]


def _check_output(job: Job, ds: Any, field: Any, config: Any) -> None:
    """Before training: the output can be written to NetCDF, and the folders have room for the
    output, the model file and a checkpoint being replaced (two copies)."""
    from ..engine.resources import file_bytes
    from ..fields.encoding import check_writable

    check_writable(ds)
    n, k = field.values.shape
    sizes = file_bytes(config, n, k, field.x.shape[1])
    needs = {job.output: output_bytes(ds, field.names, job.inputs, job.settings.realizations)}
    if job.save_model:
        needs[job.save_model] = sizes["model"]
    if job.checkpoint is not None:
        needs[job.checkpoint] = 2 * sizes["checkpoint"]
    check_free_space(needs)


def _starting_point(job: Job, identity: dict[str, Any], cluster: Any, say: Reporter) -> Any:
    """The snapshot to resume from (or None), decided by rank 0 and shared with the others."""
    from .jobs import checkpoint_stage, load_checkpoint

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
        say(f"resuming from {path} {checkpoint_stage(snapshot)}")
        return snapshot

    return _on_main(cluster, decide, "resume")


def _train(
    imputer: Any,
    field: Any,
    resume: Any,
    after_epoch: Callable[[Any], None],
    should_stop: Callable[[], bool],
) -> Any:
    """Fit, turning errors after the input was accepted into :class:`JobFailure`."""
    from ..errors import InputError

    try:
        imputer.fit_field(
            field,
            resume=resume,
            callback=after_epoch,
            should_stop=should_stop,
        )
    except InputError:
        raise
    except (ValueError, TypeError, KeyError) as err:
        raise JobFailure(f"training failed: {type(err).__name__}: {_one_line(err)}") from err
    return imputer.engine_


def _write_results(job: Job, imputer: Any, ds: Any, say: Reporter) -> None:
    """Write OUT and the model file; on failure neither is left (without --overwrite).

    The model is staged and moved into place once OUT (created exclusively) exists.
    """
    from ..fields.torch_files import stage_torch_save

    s = job.settings
    result = (imputer.impute(ds) if s.realizations is None
              else imputer.simulate(drawn_lazily(ds), s.realizations, first=s.first))
    result.attrs["geogpvae_command"] = shlex.join([PROG, *job.argv])
    first = result[imputer.vars_[0]].data
    if s.realizations is None and hasattr(first, "npartitions"):  # a chunked input: predicted while written
        count = first.npartitions
        say(f"predicting the holes chunk by chunk ({count} chunk{'' if count == 1 else 's'}) "
            f"while {job.output} is written")
    overwrite = job.settings.overwrite
    model = None
    if job.save_model:
        state = imputer.saved_state()
        try:
            model = stage_torch_save(state, job.save_model, overwrite=overwrite)
        except (OSError, RuntimeError) as err:
            if disk_full(err, job.save_model, payload_bytes(state)):
                raise no_space(job.save_model, f"neither it nor {job.output} was written") from err
            raise
    try:
        written = write_output(result, job.output, overwrite)
        if model is not None:
            _commit_model(model, job.output, written)
            say(f"saved the model to {job.save_model}")
    finally:
        if model is not None:
            model.discard()  # nothing left to remove once committed
    say(f"wrote {job.output}")


def _commit_model(model: Any, output: str, written: os.stat_result | None) -> None:
    """Move the staged model into place; if that fails, take back the OUT this job created."""
    try:
        model.commit()
    except BaseException as err:
        if not model.overwrite:
            _remove_if_same(output, written)
        if isinstance(err, FileExistsError):
            raise FileExistsError(
                f"model file {model.target} was created by another job while this one ran; "
                f"neither it nor {output} was written: pass --overwrite to replace them"
            ) from None
        raise


def _remove_if_same(path: str, written: os.stat_result | None) -> None:
    try:
        if written is None:  # a store at a URL, which this job created: no inode to compare
            fs, root, _ = remote_store(path)
            remove_remote(fs, root)
            return
        now = os.stat(path)
        if (now.st_dev, now.st_ino) == (written.st_dev, written.st_ino):
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)  # a Zarr store is a folder
    except OSError:
        pass


def _describe_field(field: Any, imputer: Any, epochs: int) -> str:
    n, k = field.values.shape
    missing = float(1 - (~_isnan(field.values)).mean())
    return (
        f"{n} locations \u00d7 {k} variable{'s' if k != 1 else ''} ({', '.join(field.names)}), {missing:.1%} missing; "
        f"x from {field.geometry.describe()}; engine {imputer.config_.engine}, "
        f"{imputer.config_.neighbours} neighbours, {epochs} epoch{'s' if epochs != 1 else ''}"
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
    from .jobs import job_identity

    s = job.settings
    say = Reporter(s.quiet, cluster.is_main)
    if cluster.parallel:
        say(f"{cluster.world} processes ({cluster.backend}); this is rank 0 on {device}")
    imputer = make_imputer(s, device, _progress(s.progress) if cluster.is_main else False)
    say(f"reading {', '.join(job.inputs)}")
    with _open(job.inputs, s.concat_dim, s.vars) as ds:
        field = imputer.prepare(ds, s.vars)
        _on_main(cluster, lambda: _check_output(job, ds, field, imputer.config_), "check the output")
        # epochs=None resolved once for the job: the engine's training plan does the same
        total = imputer.config_.n_epochs(field.values.shape[0])
        say(_describe_field(field, imputer, total))
        identity = job_identity(
            job.inputs, field.names, _identity_options(imputer, s), field.fingerprint()
        )
        resume = _starting_point(job, identity, cluster, say)
        checkpointer = _Checkpointer(
            job.checkpoint, identity, s.checkpoint_every, total, cluster.is_main
        )
        return _train_and_write(job, imputer, field, ds, resume, checkpointer, cluster, say)


def _train_and_write(
    job: Job,
    imputer: Any,
    field: Any,
    ds: Any,
    resume: Any,
    checkpointer: _Checkpointer,
    cluster: Any,
    say: Reporter,
) -> int:
    """Train and write under the job's signal trap (see :class:`~.jobs.SignalTrap`)."""
    from .jobs import JobInterrupted, SignalTrap

    final = f"training is finished: predicting and writing {job.output}, then exiting 0"
    with SignalTrap(announce=say, speak=cluster.is_main) as trap:
        stop = {"signum": 0}

        def should_stop() -> bool:
            stop["signum"] = cluster.max(trap.signum or 0)
            return stop["signum"] > 0

        def after_epoch(engine: Any) -> None:
            checkpointer.after_epoch(engine)
            if engine.selection_ is None and int(engine.train_state.epoch) >= checkpointer.total:
                trap.plan = final  # not after a beta candidate's last epoch

        engine = _train(imputer, field, resume, after_epoch, should_stop)
        if engine.interrupted:
            if cluster.is_main and int(engine.train_state.epoch) > 0:  # nothing to keep before epoch 1
                checkpointer.save(engine)
            cluster.max(0)  # everyone waits for the checkpoint
            selection = engine.selection_
            raise JobInterrupted(
                stop["signum"], job.checkpoint, int(engine.train_state.epoch), checkpointer.total,
                selection=None if selection is None else (selection.factor, selection.epochs),
            )
        trap.plan = final
        return _finish(job, imputer, ds, checkpointer, cluster, say)


def _finish(
    job: Job, imputer: Any, ds: Any, checkpointer: _Checkpointer, cluster: Any, say: Reporter
) -> int:
    """Rank 0 writes the outputs (in a worker thread, so a second signal stops it at once); every rank
    waits for it and ends with the same code."""
    from .jobs import run_interruptible

    status, error = EXIT_OK, None
    if cluster.is_main:
        try:
            run_interruptible(lambda: _write_results(job, imputer, ds, say))
            checkpointer.discard()
        except Exception as err:  # noqa: BLE001 - re-raised below, after the others are told
            bad_input = isinstance(err, _bad_input_types())
            status, error = (EXIT_USAGE if bad_input else EXIT_FAILURE), err
    status = cluster.max(status)
    if error is not None:
        raise error
    if status == EXIT_USAGE:
        raise UsageError("rank 0 could not write the output (see its message)")
    if status != EXIT_OK:
        raise JobFailure("rank 0 failed to write the output")
    return EXIT_OK


def cmd_impute(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``geogpvae impute``."""
    settings = resolve_settings(args, needs_output=True)
    if settings.realizations is not None:
        raise UsageError(f"realizations are drawn by '{PROG} simulate', not by impute: drop realizations from the config file")
    return run_job(settings, argv)


def run_job(settings: Settings, argv: Sequence[str]) -> int:
    """Plan, check and run an ``impute`` (or, with ``settings.realizations``, a ``simulate``) job."""
    job = plan_job(settings, argv)
    if settings.skip_existing and output_exists(job.output):
        reason = unfinished_reason(job.output)
        if reason is not None:
            raise UsageError(
                f"{job.output} exists but is not a finished output: {reason}; --skip-existing "
                "skips only finished outputs. Remove it, or pass --overwrite instead of "
                "--skip-existing to replace it"
            )
        Reporter(settings.quiet)(f"{job.output} exists: skipping (--skip-existing)")
        return EXIT_OK
    check_job_targets(job)
    return run_impute(job)


