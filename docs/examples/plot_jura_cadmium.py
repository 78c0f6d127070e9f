"""
Jura: cadmium at the validation sites
=====================================

The README's second figure. Cadmium is hidden at the 100 validation sites of the Jura soil
survey and imputed from nickel and zinc at every site and cadmium at the other 259; the map
shows the imputed values, the truth, the predictive standard deviation and the error.

The documentation build trains for a few epochs only; unset ``GEOGPVAE_DOCS_QUICK`` for the
package default (1,000 optimiser steps on the whole survey, a few seconds on one core). The Jura files are
third-party data: put them where ``GEOGPVAE_DATA_DIR`` points (see ``datasets/README.md``).
"""

import os
import warnings

import numpy as np

import geogpvae
import geogpvae.errors
import geogpvae.plot
from geogpvae.datasets import available, load_jura

QUICK = os.environ.get("GEOGPVAE_DOCS_QUICK") == "1"
EPOCHS = 200 if QUICK else None  # None: the package default
if QUICK:  # the build's short budget is on purpose: its TrainingWarning would only repeat that
    warnings.simplefilter("ignore", geogpvae.errors.TrainingWarning)

if available().get("jura") is None:
    print("The Jura files were not found; see datasets/README.md. Nothing to draw.")
else:
    jura = load_jura()
    validation = jura.split == "validation"
    work = jura[["Ni", "Zn", "Cd"]].copy()
    work["Cd"] = work.Cd.where(~validation)
    imputer = geogpvae.GPVAEImputer(neighbours=10, epochs=EPOCHS, progress=False).fit(work)
    out = imputer.impute(work)
    err = (out.Cd - jura.Cd).values[validation.values]
    print(f"RMSE at the validation sites: {np.sqrt(np.mean(err ** 2)):.2f} mg/kg")

    # %%
    # Circles are observed sites, triangles imputed ones.
    fig = geogpvae.plot.field_map(out, "Cd", truth=jura, coords="xy", panel_width=3.0)

    # %%
    # The training history.
    fig = geogpvae.plot.training_history(imputer.history)
