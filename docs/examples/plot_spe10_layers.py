"""
SPE10: permeability at layers 22, 26 and 41
===========================================

The README's first figure. A slab of SPE10 model 2 with half of the porosity and permeability
values dropped at random is imputed with permeability modelled in log space, and layers 22
and 26 (smooth Tarbert formation) and 41 (channelised Upper Ness) are drawn: observed,
imputed, truth, predictive standard deviation and error.

The documentation build runs a reduced version (every fourth cell laterally, two epochs);
unset ``GEOGPVAE_DOCS_QUICK`` for the run behind the README figure (every second cell, eight
epochs, a few minutes on one core). The SPE10 files are third-party data: put them where
``GEOGPVAE_DATA_DIR`` points (see ``datasets/README.md``).
"""

import os
import warnings

import numpy as np

import geogpvae
import geogpvae.errors
import geogpvae.plot
from geogpvae.datasets import available, load_spe10

QUICK = os.environ.get("GEOGPVAE_DOCS_QUICK") == "1"
LAYERS = (20, 43) if QUICK else (15, 48)  # first and last layer kept, 1 = top
LATERAL = 4 if QUICK else 2
EPOCHS = 2 if QUICK else 8
OPTIONS = {"dtype": "float64", "samples": 16} if QUICK else {}
VARS = ["porosity", "kx", "ky", "kz"]
if QUICK:  # the build's short budget is on purpose: its TrainingWarning would only repeat that
    warnings.simplefilter("ignore", geogpvae.errors.TrainingWarning)

if available().get("spe10") is None:
    print("The SPE10 files were not found; see datasets/README.md. Nothing to draw.")
else:
    spe = load_spe10().isel(z=slice(LAYERS[0] - 1, LAYERS[1]), y=slice(None, None, LATERAL),
                            x=slice(None, None, LATERAL))
    rng = np.random.default_rng(0)
    work = spe[VARS].copy()
    for name in VARS:
        work[name] = spe[name].where(rng.random(spe[name].shape) >= 0.5)
    out = geogpvae.impute(work, vars=VARS, transforms={v: "log" for v in VARS[1:]},
                          epochs=EPOCHS, progress=False, **OPTIONS)
    print(f"{dict(spe.sizes)}: imputed in {out.attrs['geogpvae_epochs']} epochs")

    # %%
    # Layers are named by their number in the full model (the ``layer`` coordinate).
    fig = geogpvae.plot.layers(out, "kx", layer=[22, 26, 41], truth=spe, figsize=(9.6, 12.8))
