"""The estimator :class:`GPVAEImputer`: fit a GPVAE on a Dataset, impute it or new fields,
predict at new locations, save and load (re-exported by :mod:`geogpvae.api`).

What it writes back to xarray comes from :mod:`geogpvae.api_output`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from .api_output import assemble, predicted_variable, provenance
from .engine.config import GPVAEConfig
from .engine.core import GPVAEEngine, Prediction
from .errors import InputError, UnreadableFileError
from .fields.cf import IMPUTED_SUFFIX, STD_SUFFIX, already_imputed, output_dtype
from .fields.extent import warn_if_far
from .fields.geometry import Geometry
from .fields.stacking import Field, prepare_field, stack_field
from .fields.stacking import locations as _locations
from .fields.torch_files import atomic_torch_save
from .fields.valid import unpacked_bounds
from .fields.variables import parse_transforms
from .model_file import imputer_state, plain, read_imputer

__all__ = ["GPVAEImputer"]

_UNSET: Any = object()


class GPVAEImputer:
    """Train a GPVAE on a Dataset, fill its holes, predict elsewhere, save and load.

    Parameters
    ----------
    engine : {"spa", "hpa"}
        The engine kind: sparse-precision (Vecchia) or hierarchical neighbour-driven GP prior
        (the trained :class:`~geogpvae.engine.core.GPVAEEngine` object is ``engine_``).
    neighbours : int
        H, the neighbours each location conditions on; the domain needs at least H + 1
        locations. Every default here is :class:`~geogpvae.engine.config.GPVAEConfig`'s.
    coords : str or sequence of str, optional
        Coordinates forming the model's ``x``; default: detected (see
        :mod:`geogpvae.fields`: CF attributes and common names; projected x/y preferred to
        lon/lat; times as days since the earliest; lon/lat as positions on the Earth's sphere).
    mask : DataArray or str, optional
        Domain: a boolean DataArray on (a subset of) the variables' dims, or the name of such
        a variable. Cells where it is False are neither used for training nor filled:
        observed values there come back unchanged, holes stay NaN (flag ``-127``).
    transform : str or dict, optional
        ``{"kx": "log"}`` models ``kx`` in log space (one string applies to every
        variable); values ``"log"`` or None/``"none"``/``"identity"``. Results are in the
        original units: for a log variable the filled value is the *mean* and ``v_std`` the
        standard deviation of the back-transformed predictive (a mixture of log-normals over
        the Monte Carlo samples of the latent field, whose exact moments the engine
        computes); ``v`` gets ``geogpvae_point_estimate = "mean"`` and
        ``geogpvae_transform = "log"``.
    coord_scale : dict of str to float, optional
        Multiplies coordinates before modelling, e.g. ``{"z": 10.0}`` (vertical
        exaggeration); for lon/lat give either name. ``None`` (default): a regular grid in
        plain numbers is modelled in cell steps (each coordinate divided by its step) and
        everything else in its own units; ``{}``: every coordinate in its own units.
    epochs : int, optional
        Training epochs; None: the engine's budget (1,000 whole-field steps up to 1,024
        locations, else about 4,000 steps' worth of mini-batches, at least 1,000; more epochs
        on fields of up to 50,000 locations: ``epochs`` of :class:`~geogpvae.GPVAEConfig`).
    seed : int
        Seed of every random choice; the same data, options and seed give the same result
        on the same device.
    device : str
        ``"auto"`` (CUDA when available, except for fields of up to 1,024 locations, which
        train faster on the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    progress : bool or {"bar", "log", "none"}
        Progress display of training, calibration and prediction (see
        :mod:`geogpvae.engine.progress`): ``True`` gives a bar on a terminal and otherwise log
        lines, one as each stage starts and ends and one every ten seconds between.
    **options
        Any other :class:`~geogpvae.engine.config.GPVAEConfig` option (``kernel``, ``latent_dim``,
        ``encoder_hidden``, ``samples``, ...); the defaults work without tuning.

    Attributes
    ----------
    engine_ : GPVAEEngine
        The trained engine (after :meth:`fit`), for power users.
    vars_ : list of str
        The imputed variables.
    dims_ : tuple of str
        Their dims in the training Dataset.
    geometry_ : geogpvae.fields.geometry.Geometry
        How coordinates became the model's ``x``.
    config_ : GPVAEConfig
        All engine options.

    Raises
    ------
    ValueError
        Unknown engine, kernel, transform or option (:class:`~geogpvae.errors.InputError`
        or the config's ``ValueError``), before any training.

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
        coords: str | Sequence[str] | None = None,
        mask: xr.DataArray | str | None = None,
        transform: str | Mapping[str, str | None] | None = None,
        coord_scale: Mapping[str, float] | None = None,
        epochs: int | None = GPVAEConfig.epochs,
        seed: int = GPVAEConfig.seed,
        device: str = GPVAEConfig.device,
        progress: bool | str = True,
        **options: Any,
    ) -> None:
        self.engine = engine
        self.neighbours = neighbours
        self.coords = coords
        self.mask = mask
        self.transform = transform
        self.coord_scale = coord_scale
        self.epochs = epochs
        self.seed = seed
        self.device = device
        self.progress = progress
        self.options = dict(options)
        base = {
            "engine": engine,
            "neighbours": neighbours,
            "epochs": epochs,
            "seed": seed,
            "device": device,
        }
        self.config_ = GPVAEConfig.from_dict({**GPVAEConfig().to_dict(), **base, **options})
        parse_transforms(transform)
        self.engine_: GPVAEEngine | None = None
        self.vars_: list[str] = []
        self.dims_: tuple[str, ...] = ()
        self.geometry_: Geometry | None = None
        self._transforms: dict[str, str | None] = {}
        self._attrs: dict[str, dict[str, Any]] = {}
        self._dtypes: dict[str, str] = {}
        self._fingerprint: str | None = None

    # ------------------------------------------------------------------ basics
    @property
    def history(self) -> dict[str, list[float]]:
        """Training history: ``epoch``, ``loss`` and its terms, one entry per epoch."""
        return {} if self.engine_ is None else self.engine_.history

    @property
    def epochs_run_(self) -> int:
        """Number of epochs actually trained."""
        self._require_fit()
        ts = self.engine_.train_state
        return 0 if ts is None else int(ts.epoch)

    def _require_fit(self) -> None:
        if self.engine_ is None:
            raise RuntimeError(
                "the imputer is not trained yet: call fit(ds) first (or GPVAEImputer.load)"
            )

    def __repr__(self) -> str:
        state = f"fitted on {self.vars_}" if self.engine_ is not None else "not fitted"
        cfg = self.config_
        return f"GPVAEImputer(engine={cfg.engine!r}, neighbours={cfg.neighbours}, {state})"

    # ------------------------------------------------------------------ fit
    def prepare(self, ds: xr.Dataset, vars: str | Sequence[str] | None = None) -> Field:
        """Check ``ds`` and stack the variables to model into a :class:`Field`, without training.

        The first half of :meth:`fit` (``fit(ds, vars)`` is ``fit_field(prepare(ds, vars))``),
        for callers that look at the field before training, such as the command line.

        Parameters
        ----------
        ds : xarray.Dataset
            The data (see :meth:`fit`); not modified.
        vars : str or sequence of str, optional
            Variables to model together (see :meth:`fit`).

        Returns
        -------
        Field
            The stacked field: ``x`` (N, D), ``values`` (N, K) with NaN where missing, names,
            geometry and the originals.

        Raises
        ------
        InputError
            Bad input, including fewer than ``neighbours + 1`` locations in the domain.
        """
        field = prepare_field(
            ds,
            vars,
            coords=self.coords,
            mask=self.mask,
            transform=self.transform,
            coord_scale=self.coord_scale,
        )
        _refuse_imputed(ds, field.names)
        self.config_.check_locations(field.values.shape[0])
        return field

    def fit_field(
        self,
        field: Field,
        *,
        resume: Mapping[str, Any] | None = None,
        callback: Any = None,
        should_stop: Any = None,
    ) -> GPVAEImputer:
        """Train on a field from :meth:`prepare` (the second half of :meth:`fit`).

        Parameters
        ----------
        field : Field
            From :meth:`prepare`.
        resume, callback, should_stop
            Checkpointing hooks, as in :meth:`fit`.

        Returns
        -------
        GPVAEImputer
            ``self``.
        """
        engine = GPVAEEngine(self.config_, progress=self.progress)
        engine.fit(field.x, field.values, log=field.log, names=field.names,
                   resume=resume, callback=callback, should_stop=should_stop)
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
        """Train on the observed values of ``ds``.

        Parameters
        ----------
        ds : xarray.Dataset
            Gridded or scattered data (see :mod:`geogpvae.fields`); not modified.
            Dask-backed data are computed: only the variables, coordinates and mask used.
        vars : str or sequence of str, optional
            Variables to model together. Default: every numeric data variable on the shared
            dims except flag variables and earlier ``*_std``/``*_imputed`` outputs.
        resume, callback, should_stop
            Checkpointing hooks for batch jobs, passed to
            :meth:`geogpvae.engine.core.GPVAEEngine.fit`: resume from an engine checkpoint, a
            function called with the engine after every epoch, and a function polled after
            every epoch that stops training early when it returns True.

        Returns
        -------
        GPVAEImputer
            ``self``.

        Raises
        ------
        InputError
            Bad input (unknown variable, different dims, no observed value, non-finite
            coordinates, too few locations, a log transform of values <= 0, no coordinates),
            before any training.
        TypeError
            A non-numeric variable or coordinate.
        """
        return self.fit_field(self.prepare(ds, vars), resume=resume, callback=callback, should_stop=should_stop)

    def job_options(self) -> dict[str, Any]:
        """The options that decide what a training run computes, as plain values.

        Every engine option except ``device`` (a run may resume on another device), plus
        ``coords``, ``mask``, ``transform`` and ``coord_scale``; batch jobs store it with a
        checkpoint to refuse resuming a different job.

        Returns
        -------
        dict
            JSON-friendly option values.
        """
        options = self.config_.to_dict()
        options.pop("device", None)
        return {
            **options,
            "coords": self.coords,
            "mask": self.mask,
            "transform": parse_transforms(self.transform),
            "coord_scale": self.coord_scale,
        }

    # ------------------------------------------------------------------ impute
    def _predict_field(self, field: Field) -> Prediction:
        if field.fingerprint() == self._fingerprint:
            return self.engine_.predict()
        rows = self.engine_.training_rows(field.x, field.values)
        if rows is not None:  # the training field, re-sorted, transposed or read back as float32
            return self.engine_.predict().take(rows)
        return self.engine_.predict(field.x, field.values)

    def impute(self, ds: xr.Dataset, *, mask: xr.DataArray | str | None = _UNSET) -> xr.Dataset:
        """Fill the holes of the trained variables in ``ds``.

        When ``ds`` holds the training field (same locations inside the domain, same
        observed values, in any order of dims and rows and to float32's precision) the
        trained field's posterior is used; otherwise the new field is
        imputed with the trained model: its own observed values are encoded and its holes
        are predicted from its own neighbours.

        Parameters
        ----------
        ds : xarray.Dataset
            Holds the trained variables (same dims among them) and coordinates; its grid may
            differ from the training one. Not modified.
        mask : DataArray or str, optional
            Domain; default: the imputer's ``mask``.

        Returns
        -------
        xarray.Dataset
            ``ds`` with ``v`` filled, ``v_std`` and ``v_imputed`` for each trained
            variable and provenance attributes (see :func:`impute`).

        Raises
        ------
        InputError
            Bad input, as for :meth:`fit`; a dim of ``ds`` that the training field did not
            have and along which none of the model's coordinates varies (time steps or members
            of a model fitted on one snapshot: impute them one at a time); the imputer's own
            ``mask`` not fitting ``ds`` (pass ``mask=``).
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
        return assemble(self, ds, field, self._predict_field(field))

    # ------------------------------------------------------------------ predict
    def predict(self, locations: xr.Dataset | xr.DataArray) -> xr.Dataset:
        """Predict every trained variable at new locations, e.g. a grid.

        Parameters
        ----------
        locations : xarray.Dataset or xarray.DataArray
            Coordinates only (values, if any, are ignored), with the coordinate names the
            model was trained on: a grid (1-D coordinates on their own dims; every
            combination is a location) or scattered points (coordinates along one dim).

        Returns
        -------
        xarray.Dataset
            On the locations' dims (in the order of a DataArray's dims, of a Dataset's
            variable on them, else of the training field's dims, e.g. ``(lat, lon)``) and
            coordinates: for each
            variable ``v`` its predictive mean ``v`` (for log variables the mean of the
            back-transformed predictive) and ``v_std``, with the training variable's attributes, in its float dtype; the
            calibration and provenance attributes are those of :func:`impute` (at new
            locations the ``unobserved`` factor applies).

        Raises
        ------
        InputError
            A coordinate is missing or not finite, or every coordinate is a scalar (a scalar
            coordinate alongside others applies to every location, e.g. a time picked with
            ``isel``).

        Warns
        -----
        CoordinateWarning
            Every location lies farther from the training data, along one of its spatial
            coordinates, than the training data's own extent (a grid in metres for a model
            trained in km, lon and lat swapped): the prediction there is the model's prior.
        """
        self._require_fit()
        x, dims, coords = _locations(locations, self.geometry_, self.vars_, self.dims_)
        warn_if_far(x, self.engine_.training_locations, self.geometry_)
        pred = self.engine_.predict(x)
        shape = tuple(int(locations.sizes[d]) for d in dims)
        data_vars: dict[str, xr.DataArray] = {}
        for j, name in enumerate(self.vars_):
            data_vars.update(predicted_variable(self, name, pred, j, dims, shape, coords))
        title = f"{', '.join(self.vars_)} predicted by geogpvae"
        out = xr.Dataset(data_vars, coords=coords, attrs={"title": title})
        return provenance(self, out, call="predict")

    # ------------------------------------------------------------------ save / load
    def _settings(self) -> dict[str, Any]:
        coords = [self.coords] if isinstance(self.coords, str) else self.coords
        return {
            "coords": None if coords is None else [str(c) for c in coords],
            "mask": self.mask if isinstance(self.mask, str) else None,
            "transform": plain(self.transform),
            "coord_scale": None
            if self.coord_scale is None
            else {str(k): float(v) for k, v in self.coord_scale.items()},
            "progress": self.progress if isinstance(self.progress, (bool, str)) else True,
            "options": plain(self._saved_options()),
        }

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the trained model to one file, atomically.

        The file holds a dictionary of tensors and plain values (no pickled objects): the
        engine state (options, standardisation, weights, calibration and the training
        field, which predictions at new locations need), the variable names, dims,
        coordinate geometry (names, sphere/time handling, time origin, scales),
        per-variable transforms, attributes and dtypes. It is written to a hidden temporary
        file beside ``path``, flushed and renamed.

        Parameters
        ----------
        path : str or os.PathLike
            Target file (its folder must exist), conventionally ``*.pt``.
        overwrite : bool
            Replace an existing file.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        FileExistsError
            ``path`` exists and ``overwrite`` is False.
        RuntimeError
            The imputer is not trained.
        """
        return atomic_torch_save(self.saved_state(), path, overwrite=overwrite)

    def saved_state(self) -> dict[str, Any]:
        """The plain values :meth:`save` writes (tensors, numbers, strings, lists, dicts).

        Raises
        ------
        RuntimeError
            The imputer is not trained.
        """
        self._require_fit()
        return imputer_state(self)

    def _saved_options(self) -> dict[str, Any]:
        """The extra options, a gpytorch kernel replaced by its description."""
        options = dict(self.options)
        if "kernel" in options:
            options["kernel"] = self.config_.to_dict()["kernel"]
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
        device : str, optional
            Override the saved device (e.g. ``"cpu"`` for a model trained on a GPU).
        progress : bool or str, optional
            Override the saved progress display.

        Returns
        -------
        GPVAEImputer
            Trained; a mask given as a DataArray is not saved (a mask given by name is).

        Raises
        ------
        FileNotFoundError
            No such file.
        UnreadableFileError (a ValueError)
            The file is not a geogpvae imputer (empty, truncated, damaged, another kind of
            file, or holding Python objects other than tensors and plain values, which are
            never loaded), or was written by a newer version. One line names the file and
            the problem.
        """
        arguments, fitted = read_imputer(path, device=device, progress=progress)
        try:
            imp = cls(**arguments)
        except TypeError as err:
            raise UnreadableFileError(f"{path} is a damaged or incompatible geogpvae model file ({err}); "
                                      "save the model again") from None
        for name, value in fitted.items():
            setattr(imp, name, value)
        return imp


def _refuse_imputed(ds: xr.Dataset, names: Sequence[str]) -> None:
    """Refuse variables whose ``v_imputed`` flags mark filled cells (their holes hold
    predictions, and imputing them again would lose which values are data), and variables
    with a ``v_std`` of the user's own (no ``v_imputed`` beside it), which the output would
    replace."""
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

