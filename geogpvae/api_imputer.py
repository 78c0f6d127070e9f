"""The estimator :class:`GPVAEImputer`: fit, impute, predict at new locations, save and load.

Re-exported by :mod:`geogpvae.api`; what it writes back to xarray comes from :mod:`geogpvae.api_output`.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from .api_lazy import (LazyPrediction, field_chunks, imputed_lazily, is_lazy, lazy_field_prediction,
                       lazy_predict, training_rows_predictor)
from .api_output import assemble, detached, predicted_variable, provenance
from .engine.config import GPVAEConfig, without_retired
from .engine.core import GPVAEEngine, Prediction
from .engine.resources import check_declared_size, check_memory, check_prediction_memory
from ._params import Parameters, parameter_names, store_arguments
from .errors import InputError, NotFittedError, UnreadableFileError, warn_caller
from .fields.cf import IMPUTED_SUFFIX, STD_SUFFIX, already_imputed, output_dtype
from .fields.extent import warn_if_far
from .fields.stacking import Field, prepare_field, stack_field
from .fields.stacking import locations as _locations
from .fields.torch_files import atomic_torch_save
from .fields.valid import unpacked_bounds
from .fields.variables import parse_transforms
from .model_file import imputer_state, plain, read_imputer

__all__ = ["GPVAEImputer", "imputer_from"]

_UNSET: Any = object()


class GPVAEImputer(Parameters):
    """Train a GPVAE on a Dataset, fill its holes, predict elsewhere, save and load.

    A scikit-learn style estimator: the constructor only stores its arguments (checked by
    :meth:`fit`, or at once by :meth:`engine_config`), :meth:`fit` sets the ``*_`` attributes,
    and ``get_params``/``set_params``/:func:`sklearn.base.clone` work. For numpy arrays in a
    scikit-learn pipeline, use :class:`geogpvae.sklearn.GPVAERegressor`.

    Parameters
    ----------
    engine : {"spa", "hpa"}
        Sparse-precision (Vecchia) or hierarchical neighbour-driven GP prior.
    neighbours : int
        H, the neighbours each location conditions on; the domain needs at least H + 1 locations.
    epochs : int, optional
        Training epochs; None: the engine's step budget.
    seed : int
        Seed of every random choice: the same data, options and seed give the same result.
    device : str
        ``"auto"`` (CUDA when available, the CPU under 32,768 locations), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    latent_dim, encoder_hidden, decoder_hidden, context, kernel, lengthscale, noise, beta, \
ordering, mask_rate, batch_size, lr, samples, predict_mode, calibrate, threads, dtype, \
neighbour_backend
        The other engine options, with the meanings and defaults of
        :class:`~geogpvae.engine.config.GPVAEConfig`.
    coords : str or sequence of str, optional
        Coordinates forming the model's ``x``; default: detected (see :mod:`geogpvae.fields`).
    mask : DataArray or str, optional
        Domain (a boolean DataArray or its name); where False, nothing is trained on or filled.
    transforms : str or dict, optional
        ``{"kx": "log"}`` models ``kx`` in log space (a string: every variable); results stay in data units.
    coord_scale : dict of str to float, optional
        Multiplies coordinates, e.g. ``{"z": 10.0}``; None: plain-number grids in cell steps; ``{}``: none.
    progress : bool or {"bar", "log", "none"}
        Progress display; True: a bar on a terminal, else log lines.

    Attributes
    ----------
    engine_ : GPVAEEngine
        The trained engine.
    vars_, dims_ : list of str, tuple of str
        The imputed variables, and their dims in the training Dataset.
    geometry_ : geogpvae.fields.geometry.Geometry
        How coordinates became the model's ``x``.
    config_ : GPVAEConfig
        All engine options, as checked by :meth:`prepare`.

    Examples
    --------
    >>> from geogpvae.datasets import make_gaussian_field
    >>> ds = make_gaussian_field((20, 20), seed=0)
    >>> imp = GPVAEImputer(neighbours=8, epochs=3, progress=False).fit(ds)
    >>> sorted(imp.impute(ds).data_vars)[:3]
    ['v0', 'v0_imputed', 'v0_std']
    """

    def __init__(
        self,
        *,
        engine: str = GPVAEConfig.engine,
        neighbours: int = GPVAEConfig.neighbours,
        epochs: int | None = GPVAEConfig.epochs,
        seed: int = GPVAEConfig.seed,
        device: str = GPVAEConfig.device,
        latent_dim: int | None = GPVAEConfig.latent_dim,
        encoder_hidden: Sequence[int] = GPVAEConfig.encoder_hidden,
        decoder_hidden: Sequence[int] = GPVAEConfig.decoder_hidden,
        context: int | Sequence[int] = GPVAEConfig.context,
        kernel: Any = GPVAEConfig.kernel,
        lengthscale: float | None = GPVAEConfig.lengthscale,
        noise: float | None = GPVAEConfig.noise,
        beta: float | str | None = GPVAEConfig.beta,
        ordering: str = GPVAEConfig.ordering,
        mask_rate: float = GPVAEConfig.mask_rate,
        batch_size: int | None = GPVAEConfig.batch_size,
        lr: float | None = GPVAEConfig.lr,
        samples: int = GPVAEConfig.samples,
        predict_mode: str = GPVAEConfig.predict_mode,
        calibrate: bool = GPVAEConfig.calibrate,
        threads: int | None = GPVAEConfig.threads,
        dtype: str = GPVAEConfig.dtype,
        neighbour_backend: str = GPVAEConfig.neighbour_backend,
        coords: str | Sequence[str] | None = None,
        mask: xr.DataArray | str | None = None,
        transforms: str | Mapping[str, str | None] | None = None,
        coord_scale: Mapping[str, float] | None = None,
        progress: bool | str = True,
    ) -> None:
        store_arguments(self, locals())

    def engine_config(self) -> GPVAEConfig:
        """The engine options :meth:`fit` would use, checked, and the ``transforms`` checked too.

        Returns
        -------
        GPVAEConfig

        Raises
        ------
        ValueError
            Unknown engine, kernel or transform, or an option out of range, naming it.
        TypeError
            A hidden-layer or context list that is not a list of integers.
        """
        config = GPVAEConfig.from_attributes(self)
        parse_transforms(self.transforms)
        return config

    # ------------------------------------------------------------------ basics
    @property
    def history(self) -> dict[str, list[float]]:
        """Training history: ``epoch``, ``loss`` and its terms, one entry per epoch."""
        return self.engine_.history if hasattr(self, "engine_") else {}

    @property
    def epochs_run_(self) -> int:
        """Number of epochs actually trained."""
        self._require_fit()
        ts = self.engine_.train_state
        return 0 if ts is None else int(ts.epoch)

    def _require_fit(self) -> None:
        if not hasattr(self, "engine_"):
            raise NotFittedError(
                "the imputer is not trained yet: call fit(ds) first (or GPVAEImputer.load)"
            )

    def __repr__(self) -> str:
        state = f"fitted on {self.vars_}" if hasattr(self, "engine_") else "not fitted"
        return f"GPVAEImputer(engine={self.engine!r}, neighbours={self.neighbours!r}, {state})"

    # ------------------------------------------------------------------ fit
    def prepare(self, ds: xr.Dataset, vars: str | Sequence[str] | None = None) -> Field:
        """Check ``ds`` and stack the variables into a :class:`Field`: the first half of :meth:`fit`.

        Parameters
        ----------
        ds, vars
            As for :meth:`fit`.

        Returns
        -------
        Field
            ``x`` (N, D), ``values`` (N, K) with NaN where missing, names, geometry, originals.

        Raises
        ------
        InputError
            Bad input, including fewer than ``neighbours + 1`` locations in the domain.
        ValueError, TypeError
            A bad option (:meth:`engine_config`), before the data are read.
        """
        _refuse_unnamed(ds, vars)
        if isinstance(ds, xr.Dataset):  # (anything else is refused with its own message below)
            check_declared_size(ds, [vars] if isinstance(vars, str) else vars)  # before any value is read
        self.config_ = self.engine_config()
        field = prepare_field(
            ds,
            vars,
            coords=self.coords,
            mask=self.mask,
            transforms=self.transforms,
            coord_scale=self.coord_scale,
        )
        _refuse_imputed(ds, field.names)
        self.config_.check_locations(field.values.shape[0])
        check_memory(self.config_, *field.values.shape, field.x.shape[1])
        return field

    def fit_field(
        self,
        field: Field,
        *,
        resume: Mapping[str, Any] | None = None,
        callback: Any = None,
        should_stop: Any = None,
    ) -> GPVAEImputer:
        """Train on a field from :meth:`prepare` (the second half of :meth:`fit`); returns ``self``.

        Parameters
        ----------
        field : Field
            From :meth:`prepare`.
        resume, callback, should_stop
            As in :meth:`fit`.
        """
        self.config_ = self.engine_config()
        engine = GPVAEEngine(self.config_, progress=self.progress)
        engine.fit(field.x, field.values, log=field.log, names=field.names,
                   resume=resume, callback=callback, should_stop=should_stop, site_axes=field.sites)
        self.engine_ = engine
        self.vars_ = list(field.names)
        self.dims_ = tuple(field.dims)
        self.geometry_ = field.geometry
        self._transforms = dict(field.transforms)
        self._attrs = {  # predictions are never packed: valid bounds in the values' units
            n: unpacked_bounds(field.originals[n].attrs, field.originals[n].encoding,
                               output_dtype(field.originals[n].dtype))
            for n in field.names
        }
        self._dtypes = {n: field.originals[n].dtype.str for n in field.names}
        self._fingerprint = field.fingerprint()
        return self

    def fit(
        self,
        ds: xr.Dataset,
        vars: str | Sequence[str] | None = None,
        *,
        resume: Mapping[str, Any] | None = None,
        callback: Any = None,
        should_stop: Any = None,
    ) -> GPVAEImputer:
        """Train on the observed values of ``ds``; returns ``self``.

        Parameters
        ----------
        ds : xarray.Dataset
            Gridded or scattered data (see :func:`geogpvae.api.impute`); dask data are computed.
        vars : str or sequence of str, optional
            Variables to model together; default as for :func:`geogpvae.api.impute`.
        resume, callback, should_stop
            Hooks of :meth:`geogpvae.engine.core.GPVAEEngine.fit`: a checkpoint to resume from,
            a function called with the engine after every epoch, a function that stops on True.

        Raises
        ------
        InputError
            Bad input (see :func:`geogpvae.api.impute`), before any training.
        TypeError
            A non-numeric variable or coordinate.
        """
        return self.fit_field(self.prepare(ds, vars), resume=resume, callback=callback, should_stop=should_stop)

    def job_options(self) -> dict[str, Any]:
        """The options that decide what a training run computes, stored with a batch job's checkpoint.

        Returns
        -------
        dict
            Every engine option but ``device``, plus ``coords``, ``mask``, ``transform`` (the
            ``transforms``, under the name checkpoints have always used) and ``coord_scale``.
        """
        options = self.engine_config().to_dict()
        options.pop("device", None)
        return {
            **options,
            "coords": self.coords,
            "mask": self.mask,
            "transform": parse_transforms(self.transforms),
            "coord_scale": self.coord_scale,
        }

    # ------------------------------------------------------------------ impute
    def _predict_field(self, field: Field, chunks: tuple[tuple[int, ...], ...] | None = None
                       ) -> Prediction | LazyPrediction:
        """The prediction of ``field``; with ``chunks`` (:func:`~geogpvae.api_lazy.field_chunks`), that
        of the training field is dask-backed, one task per block (another field's is computed now)."""
        same = field.fingerprint() == self._fingerprint
        # else the training field re-sorted, transposed or read back as float32, or None: another field
        rows = None if same else self.engine_.training_rows(field.x, field.values)
        if chunks is not None and (same or rows is not None):
            return lazy_field_prediction(training_rows_predictor(self.engine_, rows), field, chunks)
        if same:
            return self.engine_.predict()
        if rows is not None:
            return self.engine_.predict().take(rows)
        return self.engine_.predict(field.x, field.values)

    def impute(self, ds: xr.Dataset, *, mask: xr.DataArray | str | None = _UNSET) -> xr.Dataset:
        """Fill the holes of the trained variables in ``ds``.

        For the training field (same locations and observed values, in any order, to float32
        precision) the trained posterior is used; a new field is encoded from its own values.

        Parameters
        ----------
        ds : xarray.Dataset
            Holds the trained variables and coordinates; its grid may differ. Not modified.
        mask : DataArray or str, optional
            Domain; default: the imputer's ``mask``.

        Returns
        -------
        xarray.Dataset
            ``ds`` with ``v``, ``v_std`` and ``v_imputed`` per variable (see :func:`geogpvae.api.impute`);
            it shares no memory with ``ds``. Dask-backed variables give them dask-backed, chunked like
            the input ``v``. The field is read into memory at the call; the training field is then
            predicted block by block when they are computed (written unpacked, with NaN as the fill
            value, as for :func:`geogpvae.api.impute`), another field at the call (its posterior
            needs the whole field; its outputs keep the input's packing).

        Raises
        ------
        InputError
            Bad input, as for :meth:`fit`, a ``mask`` that does not fit, or a new dim along which no
            model coordinate varies (impute the time steps of a one-snapshot model one at a time).
        """
        self._require_fit()
        try:
            field = stack_field(ds, self.vars_, self.geometry_, self._transforms,
                                self.mask if mask is _UNSET else mask, trained_dims=self.dims_)
        except InputError as err:
            if mask is _UNSET and self.mask is not None and str(err).startswith("mask"):
                raise InputError(
                    f"the imputer's mask (given when it was made) does not fit this Dataset ({err}); "
                    "pass mask= for this Dataset, or mask=None to model all of it"
                ) from None
            raise
        chunks = field_chunks(ds, field) if imputed_lazily(ds, field) else None
        return assemble(self, ds, field, self._predict_field(field, chunks))

    def simulate(self, ds: xr.Dataset, n: int, *, seed: int | None = None, first: int = 0) -> xr.Dataset:
        """Realisations of the training field: ``n`` equally likely fillings of its holes, drawn jointly.

        Parameters
        ----------
        ds : xarray.Dataset
            The Dataset the imputer was fitted on (the same locations and observed values, in
            any order). Not modified. Dask-backed, it gives a dask-backed result: four
            realisations a chunk, drawn when computed, so that ``to_netcdf`` or ``to_zarr``
            writes a long ensemble a few realisations at a time.
        n : int
            Number of realisations.
        seed : int, optional
            Seed of the draws (default: the model's). Realisation ``i`` of a seed is the same
            whatever ``first`` and ``n``, so a long ensemble can be drawn in parts.
        first : int
            Number of the first realisation.

        Returns
        -------
        xarray.Dataset
            As :func:`geogpvae.simulate`.

        Raises
        ------
        InputError
            ``ds`` is not the training field, or ``n`` or ``first`` is not a whole number.
        """
        from .api_simulate import realisations

        self._require_fit()
        field = stack_field(ds, self.vars_, self.geometry_, self._transforms, self.mask, trained_dims=self.dims_)
        return realisations(self, ds, field, n, seed=seed, first=first, lazy=is_lazy(ds))

    # ------------------------------------------------------------------ predict
    def predict(self, locations: xr.Dataset | xr.DataArray, *, chunks: Mapping[Hashable, int] | None = None
                ) -> xr.Dataset:
        """Predict every trained variable at new locations, e.g. a grid.

        Parameters
        ----------
        locations : xarray.Dataset or xarray.DataArray
            The trained coordinates (values ignored): 1-D coordinates on their own dims, or along one dim.
            Dask-backed locations give a dask-backed result, one task per block.
        chunks : mapping of dim to int, optional
            Predict lazily in blocks of these sizes (dims not named stay whole, or keep the
            chunks of dask-backed ``locations``): nothing is computed until the result is, on
            whichever dask scheduler is active (a ``distributed`` cluster spreads the blocks over
            its workers); each block's memory is that of predicting it alone.

        Returns
        -------
        xarray.Dataset
            ``v`` (predictive mean) and ``v_std`` per variable on the locations, with training attributes
            and dtype and the attributes of :func:`geogpvae.api.impute` (the ``unobserved`` factor applies);
            its coordinates are copies of those of ``locations``. Dims: in the order of a variable of
            ``locations`` (a DataArray's own), else the training field's dims first, then as ``locations``
            gives them.

        Raises
        ------
        InputError
            A coordinate is missing or not finite, every coordinate is a scalar, or the prediction
            would not fit in memory (checked before any coordinate is read).

        Warns
        -----
        CoordinateWarning
            Every location lies farther from the training data than their own extent: the prediction is the prior.
            (Lazily: every location of a block, when the block is computed.)
        """
        self._require_fit()
        if chunks is not None or is_lazy(locations):
            return lazy_predict(self, locations, chunks)
        n_dims = self.engine_.training_locations.shape[1]
        x, dims, coords = _locations(locations, self.geometry_, self.vars_, self.dims_, check_count=lambda n: (
            check_prediction_memory(self.config_, n, len(self.vars_), n_dims)))
        warn_if_far(x, self.engine_.training_locations, self.geometry_)
        pred = self.engine_.predict(x)
        shape = tuple(int(locations.sizes[d]) for d in dims)
        data_vars: dict[str, xr.DataArray] = {}
        for j, name in enumerate(self.vars_):
            data_vars.update(predicted_variable(self, name, pred, j, dims, shape, coords))
        title = f"{', '.join(self.vars_)} predicted by geogpvae"
        out = detached(xr.Dataset(data_vars, coords=coords, attrs={"title": title}), coords)
        return provenance(self, out, call="predict")

    # ------------------------------------------------------------------ save / load
    def _settings(self) -> dict[str, Any]:
        coords = [self.coords] if isinstance(self.coords, str) else self.coords
        return {
            "coords": None if coords is None else [str(c) for c in coords],
            "mask": self.mask if isinstance(self.mask, str) else None,
            "transform": plain(self.transforms),
            "coord_scale": None
            if self.coord_scale is None
            else {str(k): float(v) for k, v in self.coord_scale.items()},
            "progress": self.progress if isinstance(self.progress, (bool, str)) else True,
            "options": plain(self._saved_options()),
        }

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the trained model to one file, atomically (tensors and plain values); returns the path.

        Parameters
        ----------
        path : str or os.PathLike
            Target file (its folder must exist), conventionally ``*.pt``.
        overwrite : bool
            Replace an existing file.

        Raises
        ------
        FileExistsError
            ``path`` exists and ``overwrite`` is False.
        RuntimeError
            The imputer is not trained.
        OSError
            ``errno.ENOSPC``, "no space left on device: PATH": the device filled up (nothing is left behind).
        """
        return atomic_torch_save(self.saved_state(), path, overwrite=overwrite)

    def saved_state(self) -> dict[str, Any]:
        """The plain values :meth:`save` writes (tensors, numbers, strings, lists, dicts); RuntimeError if untrained."""
        self._require_fit()
        fitted = {"vars": list(self.vars_), "dims": list(self.dims_), "geometry": self.geometry_.to_dict(),
                  "transforms": dict(self._transforms), "attrs": {n: plain(a) for n, a in self._attrs.items()},
                  "dtypes": dict(self._dtypes), "fingerprint": self._fingerprint}
        return imputer_state(self.engine_.state_dict(include_data=True), self._settings(), fitted)

    def _saved_options(self) -> dict[str, Any]:
        """The engine options besides those of the engine's own state, a gpytorch kernel as its description."""
        options = self.config_.to_dict()
        for name in ("engine", "neighbours", "epochs", "seed", "device"):
            options.pop(name)
        return options

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        device: str | None = None,
        progress: bool | str | None = None,
    ) -> GPVAEImputer:
        """Read a model written by :meth:`save` (``torch.load(..., weights_only=True)``).

        Parameters
        ----------
        path : str or os.PathLike
        device, progress : str, bool or str, optional
            Override the saved device (e.g. ``"cpu"`` for a model trained on a GPU) and progress display.

        Returns
        -------
        GPVAEImputer
            Trained; a mask given as a DataArray is not saved (one given by name is).

        Raises
        ------
        FileNotFoundError
            No such file.
        UnreadableFileError (a ValueError)
            Not a geogpvae imputer (damaged, another kind, holding Python objects) or too new.
        """
        arguments, fitted = read_imputer(path, device=device, progress=progress)
        try:
            imp = imputer_from(cls, arguments)
        except (TypeError, ValueError) as err:
            raise UnreadableFileError(f"{path} is a damaged or incompatible geogpvae model file ({err}); "
                                      "save the model again") from None
        for name, value in fitted.items():
            setattr(imp, name, value)
        return imp


def imputer_from(cls: type[GPVAEImputer], arguments: Mapping[str, Any]) -> GPVAEImputer:
    """``cls(**arguments)``, an unknown name refused with the list of known ones.

    ``transform`` (the earlier name of ``transforms``) is read as ``transforms`` with a
    ``FutureWarning``; options of earlier versions at the value every model now uses (in
    saved models) are dropped, at another value refused.

    Raises
    ------
    ValueError
        An unknown or retired argument.
    """
    arguments = dict(arguments)
    if "transform" in arguments:
        if arguments.get("transforms") is not None:
            raise ValueError("give transforms= only (transform= is its earlier name)")
        warn_caller("transform= is now called transforms=; the old name will stop working", FutureWarning)
        arguments["transforms"] = arguments.pop("transform")
    known = parameter_names(cls)
    arguments = without_retired(arguments, set(known))
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; known options: {', '.join(sorted(known))}")
    return cls(**arguments)


def _refuse_unnamed(ds: xr.Dataset, vars: str | Sequence[str] | None) -> None:
    """Refuse a variable to impute whose name is not text: its outputs are named ``v_std``, ``v_imputed``."""
    if not isinstance(ds, xr.Dataset):
        return  # refused with its own message by prepare_field
    names = list(ds.data_vars) if vars is None else [vars] if isinstance(vars, str) else list(vars)
    for name in names:
        if not isinstance(name, str) and isinstance(name, Hashable) and name in ds.data_vars:
            raise InputError(
                f"variable {name!r} has a name that is not text ({type(name).__name__}), but its outputs are "
                f"named after it ({name}{STD_SUFFIX}, {name}{IMPUTED_SUFFIX}): rename it, e.g. "
                f"ds.rename({{{name!r}: {str(name)!r}}})"
            )


def _refuse_imputed(ds: xr.Dataset, names: Sequence[str]) -> None:
    """Refuse variables already imputed (``v_imputed`` present), and those with a ``v_std`` of the
    user's own that the output would replace."""
    for n in names:
        if f"{n}{STD_SUFFIX}" in ds.variables and f"{n}{IMPUTED_SUFFIX}" not in ds.data_vars:
            raise InputError(
                f"the input has a variable {n}{STD_SUFFIX} of its own, where the output puts {n}'s "
                f"predictive standard deviation: rename it (e.g. ds.rename({{{n + STD_SUFFIX!r}: "
                f"{n + '_sd_measured'!r}}})) or leave {n} out of vars"
            )
    filled = already_imputed(ds, names)
    if filled:
        name = filled[0]
        raise InputError(
            f"{', '.join(filled)} already went through impute ({name}{IMPUTED_SUFFIX} is present), so "
            f"{'their' if len(filled) > 1 else 'its'} holes hold predictions, not data: use the data as "
            "it was before imputing, or reopen "
            f"the holes with ds[{name!r}].where(ds[{name + IMPUTED_SUFFIX!r}] != 1)"
        )

