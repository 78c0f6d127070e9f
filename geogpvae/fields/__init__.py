"""The xarray boundary: everything that knows about Datasets, and nothing that needs torch.

:mod:`~geogpvae.fields.stacking` stacks the variables of a Dataset into plain arrays (a
:class:`~geogpvae.fields.stacking.Field`) and puts predictions back in the Dataset's shape,
with :mod:`~geogpvae.fields.variables` (which variables are imputed, their transforms) and
:mod:`~geogpvae.fields.observations` (whether their values can be taken as observed);
:mod:`~geogpvae.fields.coordinates` decides which coordinates form the model's ``x`` (their
roles), :mod:`~geogpvae.fields.geometry` how they become numbers (times, lon/lat on the
sphere, scales) and :mod:`~geogpvae.fields.positions` computes ``x`` at given locations;
:mod:`~geogpvae.fields.placeholders` finds the cells an ocean model wrote without a position
(NEMO's ``nav_lon`` = ``nav_lat`` = 0);
:mod:`~geogpvae.fields.cf` writes the CF attributes and the ``v_std``/``v_imputed`` variables,
with :mod:`~geogpvae.fields.valid` (CF's valid bounds, which fills keep to) and
:mod:`~geogpvae.fields.packing` (whether a packed input stays packed);
:mod:`~geogpvae.fields.labelling` the attributes of the whole Dataset (provenance, point
geometry, coordinate labels);
:mod:`~geogpvae.fields.io` reads and writes NetCDF, with :mod:`~geogpvae.fields.encoding`
(the layout written), :mod:`~geogpvae.fields.atomic` (atomic output) and
:mod:`~geogpvae.fields.joining` (several files must agree before they are joined);
:mod:`~geogpvae.fields.torch_files` saves and reads models and checkpoints.
"""
