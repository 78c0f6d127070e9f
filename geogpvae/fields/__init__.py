"""The xarray boundary: everything that knows about Datasets, and nothing that needs torch.

:mod:`~geogpvae.fields.stacking` chooses the variables of a Dataset, stacks them into plain
arrays (a :class:`~geogpvae.fields.stacking.Field`) and puts predictions back in the
Dataset's shape; :mod:`~geogpvae.fields.geometry` decides which coordinates form the model's
``x`` and how they become numbers (coordinate roles, times, lon/lat on the sphere, scales);
:mod:`~geogpvae.fields.placeholders` finds the cells an ocean model wrote without a position
(NEMO's ``nav_lon`` = ``nav_lat`` = 0);
:mod:`~geogpvae.fields.cf` writes the CF attributes and the ``v_std``/``v_imputed`` variables,
with :mod:`~geogpvae.fields.valid` (CF's valid bounds, which fills keep to) and
:mod:`~geogpvae.fields.packing` (whether a packed input stays packed);
:mod:`~geogpvae.fields.io` reads and writes NetCDF (atomically), with
:mod:`~geogpvae.fields.joining` checking that several files agree before they are joined.
"""
