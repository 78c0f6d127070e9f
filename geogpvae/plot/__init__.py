"""Figures for imputed fields: layers, maps, profiles, calibration and training curves.

Every public plotting function takes the Dataset that :func:`geogpvae.impute` returns and
gives back a :class:`matplotlib.figure.Figure`. None of them calls ``plt.show()``, and
none of them touches pyplot's global state beyond creating the figure. They all rely on
these conventions for each imputed variable ``v``:

``v``
    The field with its holes filled. It is NaN only outside an optional domain mask. Its
    attrs give ``units`` and ``long_name``. ``geogpvae_transform = "log"`` marks a
    variable that was modelled in log space, such as permeability.
``v_std``
    The predictive standard deviation, in the same units. It is 0 at observed cells and
    NaN outside the domain.
``v_imputed``
    An int8 flag: 0 for observed, 1 for imputed, -127 outside the domain. It may have
    been decoded to float with NaN outside the domain. It may also be missing, as in the
    output of ``GPVAEImputer.predict``: a positive ``v_std`` then marks a value as imputed
    (predicted), a ``v_std`` of 0 as observed.

The names of ``v_std`` and ``v_imputed`` come from ``ancillary_variables`` when that is
present, and otherwise from the suffixes.

Units are typeset from their CF/UDUNITS strings (``"mg kg-1"`` reads mg kg⁻¹, see
:func:`pretty_units`).

Panels, colourbars and the data artists carry a ``gid`` (``ax.get_gid()``), so scripts
and tests can find them: ``"observed"``, ``"imputed"``, ``"truth"``, ``"std"`` and
``"error"`` for the panels of :func:`layers` and :func:`field_map`.

cartopy is optional. It is imported only when :func:`field_map` draws lon/lat data, and
never when this module is imported.
"""

from __future__ import annotations

from .calibration import interval_coverage, uncertainty
from .cartography import find_map_shapefile, map_data_dirs
from .history import training_history
from .layers import layer_positions, layers
from .maps import field_map
from .profiles import profile
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
    "robust_limits",
    "training_history",
    "uncertainty",
]
