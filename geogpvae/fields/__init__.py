"""The xarray boundary: everything that knows about Datasets, and nothing that needs torch.

:mod:`~geogpvae.fields.stacking` turns a Dataset into the engine's arrays and back (with
:mod:`~geogpvae.fields.coordinates`, :mod:`~geogpvae.fields.geometry` and
:mod:`~geogpvae.fields.variables`); :mod:`~geogpvae.fields.cf` and
:mod:`~geogpvae.fields.labelling` write the CF metadata; :mod:`~geogpvae.fields.io` reads and
writes NetCDF, :mod:`~geogpvae.fields.torch_files` models and checkpoints.
"""
