"""The xarray boundary: everything that knows about Datasets, and nothing that needs torch.

:mod:`~geogpvae.fields.stacking` chooses the variables and coordinates of a Dataset, stacks
them into plain arrays (a :class:`~geogpvae.fields.stacking.Field`) and puts predictions
back in the Dataset's shape; :mod:`~geogpvae.fields.cf` writes the CF attributes and the
``v_std``/``v_imputed`` variables; :mod:`~geogpvae.fields.io` reads and writes NetCDF
(atomically).
"""
