"""xarray in, xarray out: :func:`impute` and :class:`GPVAEImputer`.

:func:`impute` fills every hole of the chosen variables of a Dataset and returns the
Dataset with, for each imputed variable ``v``, ``v`` filled (observed values bit-for-bit
unchanged), ``v_std`` (predictive standard deviation) and ``v_imputed`` (CF flag), see
:mod:`geogpvae.fields.cf`. :class:`GPVAEImputer` does the same in steps — fit, impute, predict at
new locations — and saves the trained model in one file (it lives in
:mod:`geogpvae.api_imputer`, and what both write back to xarray in :mod:`geogpvae.api_output`).

How a Dataset becomes the arrays the engine trains on (layouts, coordinate detection, time,
longitude/latitude, masks, duplicates) is described in :mod:`geogpvae.fields`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import xarray as xr

from .api_imputer import GPVAEImputer
from .api_output import assemble
from .engine.config import GPVAEConfig
from .model_file import SAVE_FORMAT

__all__ = ["GPVAEImputer", "impute", "SAVE_FORMAT"]


def impute(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
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
) -> xr.Dataset:
    """Fill the holes of a Dataset's variables, with their uncertainty.

    Parameters
    ----------
    ds : xarray.Dataset
        Gridded variables (1-4 dims with 1-D coordinates, e.g. ``(z, y, x)`` or
        ``(time, lat, lon)``, dims in any order, coordinates ascending or descending,
        unevenly spaced) or scattered ones (one dim such as ``site`` with coordinate
        variables ``x``, ``y``, ... along it). NaN marks a missing value (xarray decodes
        ``_FillValue``/``missing_value`` on open). Not modified.
    vars : str or sequence of str, optional
        Variables to impute together. Default: every numeric data variable on the shared
        dims, except CF flag variables (``flag_values``/``flag_meanings``) and earlier
        ``v_std``/``v_imputed`` outputs. Variables not imputed pass through untouched.
    engine, neighbours, coords, mask, transform, coord_scale, epochs, seed, device, progress
        See :class:`GPVAEImputer`. In short: ``coords`` names the coordinates (default:
        detected; projected x/y preferred over lon/lat; times as days since the earliest;
        lon/lat as km positions on the Earth's sphere; a grid dim without coordinate uses
        its positions, with a warning), ``mask`` the domain, ``transform={"v": "log"}``
        log-models a variable, ``coord_scale={"z": 10.0}`` stretches an axis,
        ``epochs=None`` the engine's default, other engine options via ``**options``.

    Returns
    -------
    xarray.Dataset
        Same dims, coordinates, dim order and attributes as ``ds``; for each imputed
        variable ``v``:

        * ``v``: holes inside the domain filled with the predictive mean, observed values
          bit-for-bit unchanged, holes outside the domain NaN; ``ancillary_variables``
          names ``v_std v_imputed``. For a log-transformed variable the fill is the mean of
          the back-transformed (log-normal mixture) predictive, with
          ``geogpvae_point_estimate = "mean"``, and ``v_std`` its exact standard deviation;
        * ``v_std``: predictive standard deviation (0 where observed, NaN where ``v`` is),
          with the variance calibration it went through (absent with ``calibrate=False``):
          ``geogpvae_variance_factor_observed`` and ``geogpvae_variance_factor_unobserved``
          (floats), the factors the predictive variance of ``v`` was multiplied by (in the
          modelled space: the log for a log-transformed variable) at locations with observed
          values of their own and at locations with none;
        * ``v_imputed``: int8 flag, 0 observed, 1 imputed, -127 no value.

        ``history`` and ``geogpvae_*`` global attributes record the call and every option,
        and what the fit chose from the data: ``geogpvae_kl_factor`` (the KL weight
        ``beta="auto"`` picked, times the base weight), ``geogpvae_clustered_gaps`` (the
        variables whose gaps cluster, held out and calibrated in gaps) and, with
        ``predict_mode="auto"`` and calibration on, ``geogpvae_predict_mode_chosen`` (the
        latent source calibration chose for each regime, a JSON object such as
        ``{"observed": "combined", "unobserved": "neighbours*2"}``, where ``"neighbours*2"`` is
        the neighbours' GP conditional with the latent lengthscales doubled) and, with
        ``hidden_variance`` on and calibration on, ``geogpvae_noise_chosen`` (the variance the
        predictive adds to the decoded latent spread of each variable in each regime:
        ``"likelihood"``, ``"hidden"``, ``"patterns"`` or ``"scaled"``, e.g. ``{"observed": {"Cd":
        "likelihood", "Ni": "patterns"}, ...}``; see :class:`~geogpvae.engine.config.GPVAEConfig`).
        Imputed variables are in memory; other variables stay as they were (lazy ones lazy).

    Raises
    ------
    InputError (a ValueError)
        Before any training, with what to do: a name in ``vars`` not in ``ds`` (the
        available ones are listed); variables on different dims; a variable with no observed
        value inside the domain; coordinates with NaN/inf (named); fewer locations than
        ``neighbours + 1``; an unknown transform; a log transform of values <= 0 (variable,
        count, minimum); no coordinates that can serve as x. ``ds`` is left unchanged.
    ValueError
        Unknown engine, kernel or option.
    TypeError
        A non-numeric variable or coordinate.

    Notes
    -----
    Memory: besides the outputs, ``x`` (N, D) float64 for the N locations inside the
    domain, the K variables as (N, K) float64, and each imputed variable's input array
    (computed, for dask). Duplicate locations are kept as separate points; no value is
    merged or moved.

    Examples
    --------
    >>> from geogpvae.datasets import make_gaussian_field
    >>> ds = make_gaussian_field((20, 20), seed=0)
    >>> out = impute(ds, ["v0", "v1"], neighbours=8, epochs=3, progress=False)
    >>> int(out.v0.isnull().sum()), sorted(out.v0.attrs["ancillary_variables"].split())
    (0, ['v0_imputed', 'v0_std'])
    """
    imputer = GPVAEImputer(
        engine=engine,
        neighbours=neighbours,
        coords=coords,
        mask=mask,
        transform=transform,
        coord_scale=coord_scale,
        epochs=epochs,
        seed=seed,
        device=device,
        progress=progress,
        **options,
    )
    field = imputer.prepare(ds, vars)
    imputer.fit_field(field)
    return assemble(imputer, ds, field, imputer.engine_.predict())
