"""Dask-backed outputs: prediction block by block on any dask scheduler, outputs chunked like the input.

A trained :class:`~geogpvae.api.GPVAEImputer` predicts each location from the training field
alone, so the blocks of a grid are independent tasks: :func:`lazy_predict` maps
:meth:`GPVAEImputer.predict` over them with :func:`xarray.map_blocks`, and nothing is computed
until the result is (``.compute()``, ``to_netcdf``, ``to_zarr``). The imputer travels to the
workers with the task graph (it pickles to well under a megabyte for a small field).

The same holds for the training field itself: :func:`lazy_field_prediction` predicts the cells of
one block of a chunked input per task (:meth:`GPVAEEngine.predict` with ``rows``), which
:func:`~geogpvae.api_output.assemble` turns into dask-backed ``v``, ``v_std`` and ``v_imputed``.
"""

from __future__ import annotations

import copy
import functools
import uuid
import warnings
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from .errors import CoordinateWarning, InputError

__all__ = ["LazyPrediction", "chunked_like", "field_chunks", "imputed_lazily", "is_lazy", "lazy_field_prediction",
           "lazy_predict", "training_rows_predictor"]


def is_lazy(obj: xr.Dataset | xr.DataArray) -> bool:
    """Whether any variable of ``obj`` (coordinates included) holds a dask array."""
    variables = obj.variables.values() if isinstance(obj, xr.Dataset) else [obj.variable, *obj.coords.values()]
    return any(getattr(v, "chunks", None) is not None for v in variables)


def _dim_chunks(locations: xr.Dataset | xr.DataArray, chunks: Mapping[Hashable, int] | None) -> dict[Hashable, Any]:
    """The chunks of every dim of ``locations``: ``chunks`` where given, else the input's, else whole."""
    found: dict[Hashable, Any] = {}
    variables = locations.variables.values() if isinstance(locations, xr.Dataset) else [locations.variable]
    for var in variables:
        if getattr(var, "chunks", None) is not None:
            for dim, sizes in zip(var.dims, var.chunks):
                found.setdefault(dim, sizes)
    for dim, size in (chunks or {}).items():
        if dim not in locations.dims:
            raise InputError(f"chunks names {dim!r}, which is not a dim of the locations {tuple(locations.dims)}")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise InputError(f"chunks[{dim!r}] must be a whole number of locations >= 1, got {size!r}")
        found[dim] = int(size)
    return found


def lazy_predict(imp: Any, locations: xr.Dataset | xr.DataArray, chunks: Mapping[Hashable, int] | None = None,
                 ) -> xr.Dataset:
    """:meth:`GPVAEImputer.predict` as a dask graph: one task per block of ``locations``.

    Parameters
    ----------
    imp : GPVAEImputer
        Trained.
    locations : xarray.Dataset or xarray.DataArray
        As for :meth:`~geogpvae.api.GPVAEImputer.predict`; its dask chunks (if any) set the blocks.
    chunks : mapping of dim to int, optional
        Block sizes along dims of ``locations`` (overrides its own chunks); dims not named in
        either stay whole.

    Returns
    -------
    xarray.Dataset
        What ``imp.predict(locations)`` returns, with dask-backed ``v`` and ``v_std``. Each block's
        values equal those of a one-shot prediction up to float32 rounding (the networks run in
        batches of another size).
    """
    import dask.array as da

    sizes = _dim_chunks(locations, chunks)
    if isinstance(locations, xr.DataArray):
        locations = locations.to_dataset(name=locations.name if locations.name is not None else "__locations__")
    with warnings.catch_warnings():  # one location says nothing of how far the others lie
        warnings.simplefilter("ignore", CoordinateWarning)
        piece = imp.predict(locations.isel({d: slice(0, 1) for d in locations.dims}).compute())  # names, dims, attrs
    spec = {d: sizes.get(d, -1) for d in locations.dims}
    blocks = locations.chunk(spec)
    first = next(iter(piece.data_vars.values()))
    dims = (*first.dims, *(d for d in blocks.dims if d not in first.dims))
    marker = da.zeros(tuple(blocks.sizes[d] for d in dims), dtype=np.int8, chunks=tuple(spec[d] for d in dims))
    blocks = blocks.assign({_MARKER: (dims, marker)})  # map_blocks maps over dask variables only
    template = xr.Dataset(coords=blocks.coords, attrs=piece.attrs)
    for name, var in piece.data_vars.items():
        shape = tuple(blocks.sizes[d] for d in var.dims)
        block_sizes = tuple(blocks.chunksizes[d] for d in var.dims)
        template[name] = xr.Variable(var.dims, da.empty(shape, dtype=var.dtype, chunks=block_sizes), var.attrs,
                                     var.encoding)
    out = xr.map_blocks(_predict_block, blocks, args=[imp], template=template)
    for name, var in piece.data_vars.items():  # map_blocks keeps the template's attributes, not its encoding
        out[name].encoding = dict(var.encoding)
    return out


def _predict_block(block: xr.Dataset, imp: Any) -> xr.Dataset:
    """One task of :func:`lazy_predict`: the prediction at one block of locations."""
    out = imp.predict(block.drop_vars(_MARKER))
    return out.drop_vars([v for v in out.coords if v not in block.coords])


#: the dask variable that carries the blocks of a Dataset of coordinates alone
_MARKER = "__geogpvae_block__"


def chunked_like(var: xr.Variable, original: xr.DataArray | None) -> xr.Variable:
    """``var`` as a dask array chunked like ``original`` along the dims they share (as is when
    ``original`` is not dask-backed)."""
    if original is None or getattr(original.variable, "chunks", None) is None:
        return var
    sizes = dict(zip(original.dims, original.variable.chunks))
    return var.chunk({d: sizes[d] for d in var.dims if d in sizes})


@dataclass
class LazyPrediction:
    """A prediction of a field's locations as dask arrays on its grid, computed block by block.

    Attributes
    ----------
    mean, std : dask.array.Array, shape (K, ...)
        Each variable's predictive mean and standard deviation on the field's dims (the trailing
        axes, NaN outside its domain), chunked along them like the input, whole along K.
    """

    mean: Any
    std: Any

    def column(self, field: Any, j: int) -> tuple[xr.DataArray, xr.DataArray]:
        """Variable ``j``'s mean and std as DataArrays on ``field.dims``."""
        return (xr.DataArray(self.mean[j], dims=field.dims), xr.DataArray(self.std[j], dims=field.dims))


def imputed_lazily(ds: xr.Dataset, field: Any) -> bool:
    """Whether any variable of ``field`` is dask-backed in ``ds``: its outputs are then predicted lazily.

    Parameters
    ----------
    ds : xarray.Dataset
    field : Field
        Its ``names``, the imputed variables (other variables of ``ds`` do not count).

    Returns
    -------
    bool
    """
    return any(getattr(ds[name].variable, "chunks", None) is not None for name in field.names)


def field_chunks(ds: xr.Dataset, field: Any) -> tuple[tuple[int, ...], ...]:
    """The dask chunks of a field's dims, as its variables in ``ds`` are chunked.

    Parameters
    ----------
    ds : xarray.Dataset
    field : Field
        Its ``names`` (the variables) and ``dims``.

    Returns
    -------
    tuple of tuple of int
        Per dim of ``field.dims``: the chunks of the first of its variables that chunks that dim,
        else the whole dim.
    """
    found = _dim_chunks(ds[list(field.names)], None)
    return tuple(tuple(found[d]) if d in found else (size,) for d, size in zip(field.dims, field.shape))


def lazy_field_prediction(predict_rows: Callable[[np.ndarray], Any], field: Any,
                          chunks: tuple[tuple[int, ...], ...]) -> LazyPrediction:
    """The prediction of every location of ``field``, one dask task per block of its grid.

    Parameters
    ----------
    predict_rows : callable
        ``predict_rows(rows)`` gives the :class:`~geogpvae.engine.posterior.Prediction` at rows
        ``rows`` (int, shape (M,)) of the field (its locations in C order over its dims); a row's
        prediction must not depend on the others.
    field : Field
    chunks : tuple of tuple of int
        Block sizes along ``field.dims`` (see :func:`field_chunks`).

    Returns
    -------
    LazyPrediction
        Its blocks equal those of a one-shot prediction to float32 rounding (the networks run in
        batches of another size).
    """
    import dask
    import dask.array as da

    k = len(field.names)
    rows = np.full(field.domain.size, -1, dtype=np.int64)  # each cell's row of the field, -1 outside
    rows[field.index] = np.arange(field.index.size)
    cells = da.from_array(rows.reshape(field.shape), chunks=chunks, name=f"geogpvae-rows-{uuid.uuid4().hex}")
    predictor = dask.delayed(predict_rows, pure=False)  # one key in the graph, sent once to a worker
    both = da.map_blocks(_predicted_block, cells, predictor, k, new_axis=[0, 1], chunks=((2,), (k,), *chunks),
                         dtype=np.float64, name=f"geogpvae-prediction-{uuid.uuid4().hex}")
    return LazyPrediction(mean=both[0], std=both[1])


def _predicted_block(rows: np.ndarray, predict_rows: Callable[[np.ndarray], Any], k: int) -> np.ndarray:
    """One task of :func:`lazy_field_prediction`: mean and std (2, K, block shape) at one block's cells,
    ``rows`` their rows of the field (-1 outside its domain)."""
    out = np.full((2, k, *rows.shape), np.nan)
    inside = rows >= 0
    if inside.any():
        pred = predict_rows(rows[inside])
        out[:, :, inside] = np.stack([pred.mean.T, pred.std.T])
    return out


def training_rows_predictor(engine: Any, order: np.ndarray | None = None) -> Callable[[np.ndarray], Any]:
    """``predict_rows`` of :func:`lazy_field_prediction` for a field of the training locations.

    Parameters
    ----------
    engine : GPVAEEngine
        Trained, holding its training field; a silent shallow copy of it is kept (no progress
        display per block).
    order : array of int, shape (N,), optional
        Row ``i`` of the field is training location ``order[i]`` (default: the same order).

    Returns
    -------
    callable
        ``predict_rows(rows)``, picklable (it carries the engine to dask's workers).
    """
    quiet = copy.copy(engine)
    quiet.progress = False
    return functools.partial(_predict_training_rows, quiet, order)


def _predict_training_rows(engine: Any, order: np.ndarray | None, rows: np.ndarray) -> Any:
    return engine.predict(rows=rows if order is None else order[rows])  # one at a time in a process
