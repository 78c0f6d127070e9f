"""xarray in, xarray out: :func:`impute` and :class:`GPVAEImputer`.

:func:`impute` fills the holes of a Dataset's variables in one call; :class:`GPVAEImputer`
(:mod:`geogpvae.api_imputer`) does it in steps (fit, impute, predict at new locations, save).
How a Dataset becomes the engine's arrays: :mod:`geogpvae.fields.stacking`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import xarray as xr

from .api_imputer import GPVAEImputer, imputer_from
from .api_lazy import field_chunks, imputed_lazily, is_lazy, lazy_field_prediction, training_rows_predictor
from .api_output import assemble
from .api_simulate import check_count, realisations
from .engine.config import GPVAEConfig
from .model_file import SAVE_FORMAT

__all__ = ["GPVAEImputer", "impute", "simulate", "SAVE_FORMAT"]


def impute(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
    *,
    engine: str = GPVAEConfig.engine,
    neighbours: int = GPVAEConfig.neighbours,
    coords: str | Sequence[str] | None = None,
    mask: xr.DataArray | str | None = None,
    transforms: str | Mapping[str, str | None] | None = None,
    coord_scale: Mapping[str, float] | None = None,
    epochs: int | None = GPVAEConfig.epochs,
    seed: int = GPVAEConfig.seed,
    device: str = GPVAEConfig.device,
    progress: bool | str = True,
    **options: Any,
) -> xr.Dataset:
    """Fill the holes of a Dataset's variables, with their uncertainty.

    Parameters
    ----------
    ds : xarray.Dataset
        Gridded (1-4 dims with 1-D coordinates) or scattered variables (coordinates ``x``, ``y``,
        ... along one dim such as ``site``); NaN marks a missing value. Not modified.
    vars : str or sequence of str, optional
        Variables to impute together. Default: every numeric data variable on the shared dims,
        except CF flag variables and earlier ``v_std``/``v_imputed`` outputs; others pass through.
    engine, neighbours, coords, mask, transforms, coord_scale, epochs, seed, device, progress
        See :class:`GPVAEImputer`.
    **options
        Any other :class:`GPVAEImputer` argument (the engine options ``kernel``, ``samples``, ...).

    Returns
    -------
    xarray.Dataset
        ``ds`` (same dims, coordinates and attributes) with, for each imputed variable ``v``:

        * ``v``: holes inside the domain filled with the predictive mean (for a log-transformed
          variable the mean of the back-transformed predictive, ``geogpvae_point_estimate =
          "mean"``); observed values bit-for-bit unchanged; holes outside the domain NaN;
        * ``v_std``: predictive standard deviation (0 where observed, NaN where ``v`` is), with
          ``geogpvae_variance_factor_observed``/``_unobserved``: the calibration factors of the
          (modelled-space) variance at locations with and without observed values of their own;
        * ``v_imputed``: int8 flag, 0 observed, 1 imputed, -127 no value.

        ``history`` and ``geogpvae_*`` global attributes record the call, every option and what
        the fit chose (``geogpvae_kl_factor``, ``geogpvae_clustered_gaps``,
        ``geogpvae_predict_mode_chosen``, ``geogpvae_noise_chosen``: see docs/conventions.md).
        Dask-backed variables (``ds.chunk()``, ``open_dataset(..., chunks=)``) give dask-backed
        ``v``, ``v_std`` and ``v_imputed``, chunked like the input ``v`` and predicted block by
        block when computed (``.compute()``, ``to_netcdf``, ``to_zarr``), on any dask scheduler;
        their values equal the in-memory path's (observed values and flags exactly, fills and
        stds to float32 rounding), they are written unpacked with NaN as the fill value, and a
        fill clipped to a valid range is warned about per block, when computed. Training reads
        the whole field into memory at the call. Other variables stay as they were (lazy ones lazy).
        The output shares no memory with ``ds``: variables passed through and coordinates are copies.

    Raises
    ------
    InputError (a ValueError)
        Before any training, with what to do: an unknown name in ``vars``, variables on
        different dims, no observed value in the domain, non-finite coordinates, fewer than
        ``neighbours + 1`` locations, a bad transform or a log of values <= 0, no x coordinate.
    ValueError
        Unknown engine, kernel or option.
    TypeError
        A non-numeric variable or coordinate.

    Notes
    -----
    Memory: besides the outputs, (N, D) + (N, K) float64 for the N locations in the domain.
    Duplicate locations are kept as separate points.

    Examples
    --------
    >>> from geogpvae.datasets import make_gaussian_field
    >>> ds = make_gaussian_field((20, 20), seed=0)
    >>> out = impute(ds, ["v0", "v1"], neighbours=8, epochs=3, progress=False)
    >>> int(out.v0.isnull().sum()), sorted(out.v0.attrs["ancillary_variables"].split())
    (0, ['v0_imputed', 'v0_std'])
    """
    imputer = imputer_from(GPVAEImputer, dict(
        engine=engine, neighbours=neighbours, coords=coords, mask=mask, transforms=transforms,
        coord_scale=coord_scale, epochs=epochs, seed=seed, device=device, progress=progress, **options))
    field = imputer.prepare(ds, vars)
    imputer.fit_field(field)
    if imputed_lazily(ds, field):  # predicted block by block when the outputs are computed
        return assemble(imputer, ds, field, lazy_field_prediction(training_rows_predictor(imputer.engine_), field,
                                                                  field_chunks(ds, field)))
    return assemble(imputer, ds, field, imputer.engine_.predict())


def simulate(
    ds: xr.Dataset,
    n: int,
    vars: str | Sequence[str] | None = None,
    *,
    seed: int = GPVAEConfig.seed,
    progress: bool | str = True,
    **options: Any,
) -> xr.Dataset:
    """Equally likely filled fields: ``n`` joint draws of every hole, given the observed values.

    The model is trained as :func:`geogpvae.impute` trains it (the same options, the same
    defaults), then every hole is drawn jointly with the others: the latent GPs given the
    observed locations, decoded, with the likelihood's noise and the calibration of the
    intervals, back-transformed. The pointwise mean and standard deviation of many realisations
    are ``impute``'s ``v`` and ``v_std``; unlike the mean, each realisation has the spatial
    texture of the field (the mean is smoother than any real field).

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified.
    n : int
        Number of realisations.
    vars, progress
        As for :func:`geogpvae.impute`.
    **options
        ``engine``, ``neighbours``, ``coords``, ``mask``, ``transforms``, ``coord_scale``,
        ``epochs``, ``device`` and any engine option, as for :func:`geogpvae.impute`.
    seed : int
        Seeds the training and the draws: the same seed gives the same realisations.

    Returns
    -------
    xarray.Dataset
        ``ds`` with each variable ``v`` on ``(realization, *dims)`` (observed values bit for bit
        in every realisation; the coordinate ``realization`` numbers them from 0, CF
        ``standard_name: realization``) and its flag ``v_imputed``; the global attribute
        ``geogpvae_realizations`` records the count and the seed.

    Raises
    ------
    InputError
        As :func:`geogpvae.impute`, or ``n`` not a whole number >= 1, before any training.

    Notes
    -----
    Memory: the realisations themselves, ``n`` times the field in float64, plus the latent
    draws of 16 realisations at a time. A dask-backed ``ds`` gives a dask-backed result, four
    realisations a chunk, drawn when computed, one chunk at a time in a process (``to_netcdf``
    and ``to_zarr`` then write it four realisations at a time, in the memory of four).

    Examples
    --------
    >>> from geogpvae.datasets import make_gaussian_field
    >>> ds = make_gaussian_field((16, 16), seed=0)
    >>> out = simulate(ds, 3, ["v0"], neighbours=8, epochs=3, progress=False)
    >>> out.v0.dims, int(out.v0.isnull().sum())
    (('realization', 'y', 'x'), 0)
    """
    check_count(n, 0)
    imputer = imputer_from(GPVAEImputer, dict(seed=seed, progress=progress, **options))
    field = imputer.prepare(ds, vars)
    imputer.fit_field(field)
    return realisations(imputer, ds, field, n, seed=seed, lazy=is_lazy(ds))
