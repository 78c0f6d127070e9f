"""Reading and writing Zarr stores: whole stores written atomically, and region writes with
which several jobs fill parts of one store.

Stores are written in Zarr format 3, with consolidated metadata (one read opens a remote
store). A store at a URL (``s3://``, ``gs://``, ``memory://``, ..., through fsspec) cannot be
staged and renamed: it carries the attribute ``geogpvae_write_incomplete`` until its write has
finished, and :func:`open_zarr` refuses a store that still carries it. The imputation flags keep their convention (int8, -127
where there is no value): the Zarr fill value of a flag array is -127, so cells no region
write has reached yet read as "no value", and, with no ``_FillValue``, plain
``xarray.open_zarr`` reads the flags back as int8.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import warnings
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, Union

import numpy as np
import xarray as xr

from .atomic import _fsync_dir, _leftovers, _temp_name
from .cf import FLAG_FILL_VALUE, IMPUTED_SUFFIX, restore_flag_variables
from .encoding import _chunksizes, _kept_chunks, _prepare, check_encoding

__all__ = ["check_region", "is_zarr", "open_zarr", "to_zarr"]

PathLike = Union[str, "os.PathLike[str]"]

#: Encoding keys of a netCDF layout, or of how a store was read, that a Zarr write recomputes
_NOT_ZARR = ("zlib", "complevel", "shuffle", "compression", "compression_opts", "chunksizes", "contiguous",
             "szip", "bzip2", "blosc", "zstd", "blosc_shuffle", "szip_coding", "szip_pixels_per_block",
             "fletcher32", "preferred_chunks", "chunks", "compressors", "filters", "serializer", "shards",
             "fill_value", "source", "original_shape", "unlimited_dims")
_METADATA = (".zgroup", ".zattrs", ".zarray", "zarr.json")
#: the attribute a store at a URL carries while a whole write into it is under way
INCOMPLETE = "geogpvae_write_incomplete"


def is_url(path: PathLike) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    bool
    """
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", os.fspath(path)) is not None


def remote_store(url: str, options: Mapping[str, Any] | None = None) -> tuple[Any, str, bool]:
    """The fsspec filesystem of a store at ``url``, the store's path on it, and whether it exists.

    Parameters
    ----------
    url : str
        A URL fsspec can open (``s3://bucket/out.zarr``, ``memory://...``).
    options : mapping, optional
        fsspec's ``storage_options``.

    Returns
    -------
    fs : fsspec.AbstractFileSystem
    root : str
        The store's path on ``fs``, without a trailing slash.
    exists : bool
        Whether Zarr metadata is there.
    """
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **dict(options or {}))
    root = root.rstrip("/")
    return fs, root, any(fs.exists(f"{root}/{m}") for m in _METADATA)


def remove_remote(fs: Any, root: str) -> None:
    """Remove the store at ``root`` on ``fs`` if it is there (best effort: a store left behind
    still carries its incomplete mark, so it is refused)."""
    try:
        if fs.exists(root):
            fs.rm(root, recursive=True)
    except Exception:  # noqa: BLE001
        pass


def _need_zarr() -> None:
    if importlib.util.find_spec("zarr") is None:
        raise ImportError('Zarr stores need the zarr package: pip install "geogpvae[zarr]"')


def is_zarr(path: PathLike) -> bool:
    """Whether ``path`` names a Zarr store: ends in ``.zarr`` or is a folder holding Zarr metadata.

    Parameters
    ----------
    path : str or os.PathLike
        A local path (it need not exist when it ends in ``.zarr``) or a URL.

    Returns
    -------
    bool
    """
    text = os.fspath(path).rstrip("/")
    if text.endswith(".zarr"):
        return True
    return os.path.isdir(text) and any(os.path.exists(os.path.join(text, m)) for m in _METADATA)


def open_zarr(path: PathLike, *, chunks: Any = None, mask_and_scale: bool = True, **kwargs: Any) -> xr.Dataset:
    """Open a Zarr store lazily (dask arrays, chunked as stored unless ``chunks`` says otherwise).

    Parameters
    ----------
    path : str or os.PathLike
        The store's folder, or a URL that :func:`xarray.open_zarr` can read.
    chunks : int, dict or "auto", optional
        Dask chunks; default: those of the store.
    mask_and_scale : bool
        Decode fill values and packing (flag variables keep their integer dtype either way).
    **kwargs
        For :func:`xarray.open_zarr`.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    FileNotFoundError
        No such store.
    ValueError
        ``path`` is not a readable Zarr store (no metadata, or damaged metadata), or a geogpvae
        write into it did not finish (it still carries ``geogpvae_write_incomplete``).
    """
    _need_zarr()
    text = os.fspath(path)
    if "://" not in text:
        if not os.path.exists(text):
            raise FileNotFoundError(f"no such Zarr store: {text}")
        if not any(os.path.exists(os.path.join(text, m)) for m in _METADATA):
            raise ValueError(f"{text} is not a Zarr store (no zarr.json, .zgroup or .zattrs in it)")
    try:
        ds = xr.open_zarr(text, chunks={} if chunks is None else chunks, mask_and_scale=mask_and_scale, **kwargs)
    except (FileNotFoundError, PermissionError):
        raise
    except Exception as err:  # noqa: BLE001 - zarr raises many kinds for damaged metadata
        raise ValueError(f"cannot read {text} as a Zarr store: {type(err).__name__}: {err}") from None
    if INCOMPLETE in ds.attrs:
        raise ValueError(f"{text} is incomplete: a geogpvae write into it did not finish (it failed or was "
                         "stopped); write it again")
    return restore_flag_variables(ds) if mask_and_scale else ds


def _zarr_encoding(name: Hashable, var: xr.Variable, is_coord: bool) -> dict[str, Any]:
    """A Zarr encoding from the netCDF-style one :func:`_prepare` chose: its chunks kept (or
    about 1 MiB), the flags' fill value -127."""
    enc = {k: v for k, v in var.encoding.items() if k not in _NOT_ZARR}
    if var.ndim and var.chunks is None:
        kept = _kept_chunks(var.encoding.get("chunksizes") or var.encoding.get("chunks"), var.shape)
        enc["chunks"] = kept or _chunksizes(var.shape, var.dtype.itemsize)
    if not is_coord and str(name).endswith(IMPUTED_SUFFIX) and var.dtype == np.int8:
        enc["_FillValue"] = None
        enc["fill_value"] = FLAG_FILL_VALUE
    return enc


def _regular(chunks: tuple[int, ...]) -> bool:
    """Dask chunks Zarr can store: all as the first but the last, which may be smaller."""
    return all(c == chunks[0] for c in chunks[:-1]) and chunks[-1] <= chunks[0]


def _zarr_chunked(ds: xr.Dataset) -> xr.Dataset:
    """Uneven dask chunks (several stores or files joined, say) rechunked to their largest along each dim."""
    uneven = {d: max(c) for d, c in ds.chunks.items() if not _regular(tuple(c))} if ds.chunks else {}
    return ds.chunk(uneven) if uneven else ds


def _prepared(ds: xr.Dataset, encoding: Mapping[Hashable, Mapping[str, Any]] | None) -> xr.Dataset:
    ds = _zarr_chunked(ds)
    originals = {name: dict(var.encoding) for name, var in ds.variables.items()}
    out = _prepare(ds, 0)  # CF attributes and fill values as NetCDF files get them
    for name, var in out.variables.items():
        var.encoding = {**var.encoding, "chunksizes": originals[name].get("chunksizes"),
                        "chunks": originals[name].get("chunks")}
        var.encoding = _zarr_encoding(name, var, name in out.coords)
        var.encoding.update(dict((encoding or {}).get(name, {})))
    return out


def to_zarr(
    ds: xr.Dataset,
    path: PathLike,
    overwrite: bool = False,
    *,
    region: str | Mapping[Hashable, slice] | None = None,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> Path | str:
    """Write a Dataset to a Zarr store (format 3), with the attributes of :func:`geogpvae.to_netcdf`.

    A new local store is written in a private staging folder beside ``path`` and moved into
    place when complete: a failed or killed write leaves no store, or the previous one. A store
    at a URL is written in place (object stores cannot rename): it is marked incomplete until
    the write has finished (:func:`open_zarr` refuses it meanwhile), and a failed write removes
    what it wrote. Replacing a remote store (``overwrite``) writes the new one beside it first
    (``ds`` may read from the old one), then replaces the old one by a copy of it. With
    ``region``, ``ds`` is written into part of an existing store instead: several jobs can fill
    disjoint parts of one store at the same time, each region covering whole chunks of it.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified; dask-backed variables are written chunk by chunk (on the active dask
        scheduler), each dask chunk one Zarr chunk.
    path : str or os.PathLike
        The store (a folder, conventionally ``*.zarr``; its parent folder must exist), or a URL
        that fsspec can write (``s3://bucket/out.zarr`` with s3fs installed, ``memory://...``).
    overwrite : bool
        Replace an existing store (a whole write only).
    region : "auto" or mapping of dim to slice, optional
        Write into the existing store at ``path``: ``"auto"`` finds the place of ``ds`` from its
        index coordinates. The store must hold every data variable of ``ds`` with the same dims
        and dtype; variables without any dim of the region are left out (the store has them).
    encoding : mapping of variable name to dict, optional
        Zarr encodings that replace those chosen here (``chunks``, ``compressors``, ...).
    compute : bool
        False: write the metadata, coordinates and attributes, and leave dask-backed variables
        unwritten (their fill value: NaN, and -127 for flags) for region writes to fill.
    storage_options : mapping, optional
        For fsspec, with a URL (credentials, endpoint, ...).

    Returns
    -------
    pathlib.Path or str
        The store (the URL as given, for a remote one).

    Raises
    ------
    FileExistsError
        The store exists (or appeared during the write) and neither ``overwrite`` nor ``region``.
    FileNotFoundError
        The parent folder, or for a region write the store, does not exist.
    ValueError
        ``encoding`` naming a variable ``ds`` does not hold, a region that cuts through chunks of the store (concurrent writers would overwrite each
        other's cells), that does not fit the store, or variables the store does not hold.
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
    _need_zarr()
    check_encoding(ds, encoding)
    if is_url(path):
        options = dict(storage_options or {})
        if region is not None:
            return _write_region(ds, os.fspath(path), region, options)
        return _to_remote(_prepared(ds, encoding), os.fspath(path), overwrite, compute, options)
    if storage_options:
        raise ValueError("storage_options are for a store at a URL; this path is local")
    target = Path(os.fspath(path)).expanduser()
    if region is not None:
        return _write_region(ds, target, region)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: folder {target.parent} does not exist (create it first)")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists; pass overwrite=True to replace it")
    prepared = _prepared(ds, encoding)
    _leftovers(target)
    staging = _temp_name(target)
    os.mkdir(staging, 0o700)
    store = staging / target.name
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Consolidated metadata")
            prepared.to_zarr(store, mode="w-", compute=compute, zarr_format=3, consolidated=True)
        _move_into_place(store, target, overwrite)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(target.parent)
    return target


def _to_remote(prepared: xr.Dataset, url: str, overwrite: bool, compute: bool, options: dict[str, Any]) -> str:
    """Write a whole store at ``url`` in place, marked incomplete until done; a failure removes what
    this call wrote. An existing store (``overwrite``) stays whole until the new one is written
    beside it, then is replaced by a copy of it (the copy marked until it is complete)."""
    import secrets

    fs, root, exists = remote_store(url, options)
    if exists and not overwrite:
        raise FileExistsError(f"{url} already exists; pass overwrite=True to replace it")
    if not exists:
        _write_marked(prepared, url, fs, root, compute, options)
        _finish_remote(url, options)
        return url
    suffix = f".geogpvae-{secrets.token_hex(6)}"
    staging, staging_root = url.rstrip("/") + suffix, root + suffix
    try:
        _write_marked(prepared, staging, fs, staging_root, compute, options)  # may read the old store
        fs.rm(root, recursive=True)
        fs.copy(staging_root, root, recursive=True)  # still marked: refused until finished
        _finish_remote(url, options)
    finally:
        remove_remote(fs, staging_root)
    return url


def _write_marked(prepared: xr.Dataset, url: str, fs: Any, root: str, compute: bool, options: dict[str, Any]) -> None:
    """Create the store at ``url`` with the incomplete mark; on failure remove it, unless another
    writer created it first (that one is left alone)."""
    marked = prepared.assign_attrs({INCOMPLETE: "a geogpvae write into this store has not finished"})
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Consolidated metadata")
            marked.to_zarr(url, mode="w-", compute=compute, zarr_format=3, consolidated=False,
                           storage_options=options or None)
    except FileExistsError:
        raise FileExistsError(f"{url} was created by another writer meanwhile; nothing was written over it: "
                              "pass overwrite=True to replace it") from None
    except BaseException:
        remove_remote(fs, root)
        raise


def _finish_remote(url: str, options: dict[str, Any]) -> None:
    """Take the incomplete mark off the store at ``url`` and consolidate its metadata."""
    import zarr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Consolidated metadata")
        group = zarr.open_group(url, mode="r+", storage_options=options or None)
        del group.attrs[INCOMPLETE]
        zarr.consolidate_metadata(group.store)


def _move_into_place(store: Path, target: Path, overwrite: bool) -> None:
    if target.exists() and overwrite:
        old = store.with_name(store.name + ".old")
        os.rename(target, old)
        os.rename(store, target)
        return  # (the staging folder, with the old store in it, is removed by the caller)
    try:
        os.rename(store, target)
    except OSError as err:  # a store created meanwhile: a folder that is not empty
        if target.exists():
            raise FileExistsError(f"{target} already exists (another process created it while this one "
                                  "was writing); nothing was written over it: pass overwrite=True to replace it"
                                  ) from None
        raise err


def _write_region(ds: xr.Dataset, target: Path | str, region: str | Mapping[Hashable, slice],
                  options: dict[str, Any] | None = None) -> Path | str:
    extra = {"storage_options": options} if options else {}
    store = open_zarr(target, mask_and_scale=False, **extra)  # (raises for a missing or damaged store)
    if isinstance(region, str) and region != "auto":
        raise ValueError(f'region must be "auto" or a mapping of dims to slices, got {region!r}')
    slices = _region_slices(ds, store) if region == "auto" else dict(region)
    dims = set(slices)
    part = ds.drop_vars([n for n, v in ds.variables.items() if not dims & set(v.dims)]).copy(deep=False)
    for name, var in part.data_vars.items():
        if name not in store.data_vars:
            raise ValueError(f"the store {target} holds no variable {name}: write the whole store first "
                             "(to_zarr(..., compute=False) makes one to fill by regions)")
        if store[name].dims != var.dims:
            raise ValueError(f"{name} is on {var.dims} here but on {store[name].dims} in {target}")
        stored = np.dtype(store[name].dtype)
        if var.dtype != stored and not (var.dtype.kind == stored.kind == "f"):
            raise ValueError(f"{name} is {var.dtype} here but {stored} in {target}")
        _check_aligned(name, store[name], slices, target)
    for var in part.variables.values():  # the store's own attributes and encodings apply
        var.attrs, var.encoding = {}, {}
    part.attrs = {}
    written = part.assign({n: v.astype(store[n].dtype) for n, v in part.data_vars.items()})
    written.to_zarr(target, mode="r+", region={d: slices[d] for d in dims}, consolidated=False, **extra)
    return target


def _region_slices(ds: xr.Dataset, store: xr.Dataset) -> dict[Hashable, slice]:
    """Where the index coordinates of ``ds`` lie in those of ``store``: one slice per dim."""
    slices: dict[Hashable, slice] = {}
    for dim in ds.dims:
        if dim not in ds.indexes:
            if ds.sizes[dim] != store.sizes.get(dim):
                raise ValueError(f"dim {dim} has no coordinate to place it in the store, and its size "
                                 f"{ds.sizes[dim]} is not the store's ({store.sizes.get(dim)}): pass region=")
            continue
        if dim not in store.indexes:
            raise ValueError(f"the store has no coordinate {dim} to place this Dataset along")
        where = store.indexes[dim].get_indexer(ds.indexes[dim])
        if (where < 0).any():
            raise ValueError(f"some {dim} values of this Dataset are not in the store's {dim}")
        start = int(where[0])
        if not np.array_equal(where, np.arange(start, start + len(where))):
            raise ValueError(f"the {dim} values of this Dataset are not a contiguous run of the store's")
        if len(where) != store.sizes[dim]:
            slices[dim] = slice(start, start + len(where))
    if not slices:
        raise ValueError("this Dataset covers the whole store: write it with region=None and overwrite=True")
    return slices


def _check_aligned(name: Hashable, stored: xr.DataArray, slices: Mapping[Hashable, slice], target: Path) -> None:
    chunks = stored.encoding.get("chunks") or stored.encoding.get("preferred_chunks")
    if isinstance(chunks, dict):
        chunks = tuple(chunks[d] for d in stored.dims)
    if chunks is None:
        return
    for dim, size in zip(stored.dims, chunks):
        if dim not in slices:
            continue
        part, n = slices[dim], stored.sizes[dim]
        start, stop = part.start or 0, n if part.stop is None else part.stop
        if start % size or (stop % size and stop != n):
            raise ValueError(
                f"the region {dim}={start}:{stop} cuts through chunks of {name} in {target} ({size} along "
                f"{dim}): concurrent writers would overwrite each other's cells; write regions that "
                f"start and end at multiples of {size}"
            )


def check_region(path: PathLike, slices: Mapping[Hashable, slice]) -> xr.Dataset:
    """Check that a region of whole chunks fits the existing store at ``path``, before any work.

    Parameters
    ----------
    path : str or os.PathLike
        The store.
    slices : mapping of dim to slice
        Integer start and stop (step 1) along each dim of the region.

    Returns
    -------
    xarray.Dataset
        The store, opened lazily without masking.

    Raises
    ------
    FileNotFoundError, ValueError
        No store at ``path``; a dim the store lacks, a slice outside it or empty, or a region
        that cuts through chunks of a variable.
    """
    target = os.fspath(path) if is_url(path) else Path(path).expanduser()
    if isinstance(target, Path) and not target.is_dir():
        raise FileNotFoundError(f"the store {target} does not exist: write it first, without its values "
                                "(to_zarr(..., compute=False), or geogpvae predict --template)")
    store = open_zarr(target, mask_and_scale=False)
    for dim, part in slices.items():
        if dim not in store.dims:
            raise ValueError(f"the store {target} has no dim {dim}; its dims: {list(store.dims)}")
        n = store.sizes[dim]
        if not (0 <= part.start < part.stop <= n):
            raise ValueError(f"the region {dim}={part.start}:{part.stop} is empty or outside the store's "
                             f"{dim} (0:{n})")
    for name, var in store.data_vars.items():
        if set(slices) & set(var.dims):
            _check_aligned(name, var, slices, target)
    return store
