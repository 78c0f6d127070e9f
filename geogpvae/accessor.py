"""The ``.gpvae`` accessor on xarray Datasets.

Importing this module registers the accessor::

    import geogpvae.accessor  # noqa: F401  (geogpvae does this on import)

    filled = ds.gpvae.impute(...)
    fig = filled.gpvae.plot_layers("kx", layer=[0, -1])
    fig = filled.gpvae.plot_map("zn")
    fig = filled.gpvae.plot_uncertainty("zn", truth=truth)

Matplotlib, cartopy and the modelling code are imported only when a method is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import xarray as xr

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["GPVAEAccessor"]


@xr.register_dataset_accessor("gpvae")
class GPVAEAccessor:
    """Imputation and plots for a Dataset, as ``ds.gpvae``.

    Parameters
    ----------
    ds : xarray.Dataset
        The Dataset the accessor is attached to.
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def impute(self, *args: Any, **kwargs: Any) -> xr.Dataset:
        """Fill the holes of this Dataset; see :func:`geogpvae.api.impute`.

        Parameters
        ----------
        *args, **kwargs
            Passed on to :func:`geogpvae.api.impute` after the Dataset.

        Returns
        -------
        xarray.Dataset
            The imputed Dataset, with ``v_std`` and ``v_imputed`` for each variable.
        """
        from geogpvae.api import impute

        return impute(self._ds, *args, **kwargs)

    def plot_layers(self, var: str, **kwargs: Any) -> Figure:
        """Layers of a 3-D imputed field; see :func:`geogpvae.plot.layers`.

        Parameters
        ----------
        var : str
            Name of the imputed variable.
        **kwargs
            Passed on to :func:`geogpvae.plot.layers` (``layer``, ``axis``, ``truth``, ...).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from geogpvae import plot

        return plot.layers(self._ds, var, **kwargs)

    def plot_map(self, var: str, **kwargs: Any) -> Figure:
        """Maps of an imputed field and its std; see :func:`geogpvae.plot.field_map`.

        Parameters
        ----------
        var : str
            Name of the imputed variable.
        **kwargs
            Passed on to :func:`geogpvae.plot.field_map` (``truth``, ``std``,
            ``projection``, ...).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from geogpvae import plot

        return plot.field_map(self._ds, var, **kwargs)

    def plot_uncertainty(self, var: str, **kwargs: Any) -> Figure:
        """Calibration of the predictive std; see :func:`geogpvae.plot.uncertainty`.

        Parameters
        ----------
        var : str
            Name of the imputed variable.
        **kwargs
            Passed on to :func:`geogpvae.plot.uncertainty` (``truth``, ``levels``, ...).

        Returns
        -------
        matplotlib.figure.Figure
            The figure.
        """
        from geogpvae import plot

        return plot.uncertainty(self._ds, var, **kwargs)
