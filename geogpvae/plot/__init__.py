"""Figures for imputed fields: layers, maps, profiles, calibration, residual variograms and training curves.

Every public function takes the Dataset :func:`geogpvae.impute` returns and gives back a
:class:`matplotlib.figure.Figure` (no ``plt.show()``, no pyplot state beyond the figure). For each
imputed ``v``: ``v`` is the filled field (NaN only outside the domain; ``geogpvae_transform = "log"``
marks log modelling), ``v_std`` its predictive std (0 where observed, NaN outside) and ``v_imputed``
an int8 flag (0 observed, 1 imputed, -127 outside; where it is missing, as after
``GPVAEImputer.predict``, a positive ``v_std`` marks imputed), found by ``ancillary_variables`` or
the suffixes. Panels and artists carry a ``gid`` (``"observed"``, ``"imputed"``, ``"truth"``,
``"std"``, ``"error"``). cartopy is imported only when :func:`field_map` draws lon/lat data.
"""

from __future__ import annotations

from .calibration import interval_coverage, uncertainty
from .cartography import find_map_shapefile, map_data_dirs
from .history import training_history
from .layers import layer_positions, layers
from .maps import field_map
from .profiles import profile
from .variogram import residual_variogram
from .style import is_log_variable, label_for, make_norm, pretty_units, robust_limits

__all__ = [
    "field_map",
    "find_map_shapefile",
    "interval_coverage",
    "is_log_variable",
    "label_for",
    "layer_positions",
    "layers",
    "make_norm",
    "map_data_dirs",
    "pretty_units",
    "profile",
    "residual_variogram",
    "robust_limits",
    "training_history",
    "uncertainty",
]
