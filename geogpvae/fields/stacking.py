"""The xarray boundary: a Dataset's variables as the engine's ``x`` (N, D) and values (N, K), and back."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..errors import InputError, warn_caller
from .coordinates import _is_numeric, choose_coordinates
from .geometry import Geometry, build_geometry
from .never_observed import is_time_axis, never_observed_warning
from .observations import _check_values, _undecoded_fills
from .placeholders import placeholder_places, placeholder_warning
from .positions import _take, check_spanned, coordinates_at, unspanned_dims
from .sites import network_sites
from .scales import looks_vertical, unitless_axes, unitless_axes_warning
from .variables import parse_transforms, select_variables, variable_dims

__all__ = [
    "Field",
    "domain_mask",
    "locations",
    "never_observed_warning",
    "prepare_field",
    "stack_field",
]


# --------------------------------------------------------------------------- broadcasting
def _sizes(obj: xr.Dataset | xr.DataArray) -> dict[str, int]:
    return {str(k): int(v) for k, v in obj.sizes.items()}


def _expand(var: xr.DataArray, dims: Sequence[str], shape: Sequence[int]) -> np.ndarray:
    """Values of ``var`` (dims a subset of ``dims``) broadcast to ``shape``, a read-only view."""
    own = [d for d in dims if d in var.dims]
    arr = np.asarray(var.transpose(*own).values)
    arr = arr.reshape([n if d in var.dims else 1 for d, n in zip(dims, shape, strict=True)])
    return np.broadcast_to(arr, tuple(shape))


def domain_mask(
    ds: xr.Dataset,
    mask: xr.DataArray | str | None,
    dims: Sequence[str],
    template: xr.DataArray | None = None,
) -> np.ndarray:
    """The domain as a boolean array over ``dims`` (True inside).

    Parameters
    ----------
    ds : xarray.Dataset
    mask : DataArray, str or None
        Boolean (or 0/1) DataArray on some of ``dims``, or its name in ``ds``; None: everywhere.
    dims : sequence of str
    template : DataArray, optional
        A variable on ``dims``, to check that the mask's coordinates line up.

    Returns
    -------
    ndarray of bool, shape of ``dims``

    Raises
    ------
    InputError
        Unknown mask variable, other dims or coordinates than ``ds``, NaN values.
    """
    sizes = _sizes(ds)
    shape = tuple(sizes[d] for d in dims)
    if mask is None:
        return np.ones(shape, dtype=bool)
    if isinstance(mask, str):
        if mask not in ds.variables:
            coords = [str(n) for n in ds.coords if n not in ds.dims]
            raise InputError(
                f"mask {mask!r} is not a variable of the Dataset (data variables: "
                f"{', '.join(map(str, ds.data_vars)) or 'none'}; coordinates other than the "
                f"dims: {', '.join(coords) or 'none'})"
            )
        label, da = f"mask {mask!r}", ds[mask]
    elif isinstance(mask, xr.DataArray):
        label, da = "mask", mask
    else:
        raise TypeError(
            f"mask must be a boolean DataArray or a variable name, got {type(mask).__name__}"
        )
    extra = [str(d) for d in da.dims if d not in dims]
    if extra:
        raise InputError(
            f"{label} has dims {tuple(da.dims)}; it must lie on the variables' dims {tuple(dims)}"
        )
    if template is not None:
        try:
            xr.align(da, template, join="exact", copy=False)
        except ValueError as err:
            raise InputError(f"{label}'s coordinates do not match the Dataset's: {err}") from None
    for d in da.dims:
        if da.sizes[d] != sizes[str(d)]:
            raise InputError(
                f"{label} has {da.sizes[d]} elements along {d!r}, the Dataset {sizes[str(d)]}"
            )
    arr = np.asarray(da.values)
    if arr.dtype != bool:
        if not _is_numeric(arr.dtype):
            raise TypeError(f"{label} must be boolean, got dtype {arr.dtype}")
        if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
            raise InputError(f"{label} has NaN values; it must be True (inside) or False (outside)")
    return _expand(da.copy(data=arr != 0), dims, shape).copy()


# --------------------------------------------------------------------------- fields
@dataclass
class Field:
    """A Dataset's variables as the arrays the engine takes.

    Attributes
    ----------
    names : list of str
        The K variables.
    dims, shape : tuple of str, tuple of int
        Their dims (in the first variable's order) and sizes.
    domain : ndarray of bool, shape ``shape``
        True at the N locations the engine sees.
    x : ndarray of float64, shape (N, D)
        Model coordinates of those locations, in C order over ``dims``.
    values : ndarray of float64, shape (N, K)
        The variables there, NaN where missing.
    transforms : dict of str to str or None
    geometry : Geometry
    originals : dict of str to xarray.DataArray
        Each variable as input, in memory (observed values are copied from it).
    sites : tuple of int or None
        For a station network, the columns of ``x`` that place a station
        (:func:`~geogpvae.fields.sites.network_sites`).
    """

    names: list[str]
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    domain: np.ndarray
    x: np.ndarray
    values: np.ndarray
    transforms: dict[str, str | None]
    geometry: Geometry
    originals: dict[str, xr.DataArray] = field(repr=False, default_factory=dict)
    sites: tuple[int, ...] | None = None

    @property
    def log(self) -> np.ndarray:
        """Which variables are modelled in log space, shape (K,)."""
        return np.array([self.transforms.get(n) == "log" for n in self.names], dtype=bool)

    @property
    def index(self) -> np.ndarray:
        """Flat (C order) indices of the locations inside the domain, shape (N,)."""
        return np.flatnonzero(self.domain.reshape(-1))

    def fingerprint(self) -> str:
        """A hash of ``x`` and the observed values: equal for the same field."""
        h = hashlib.sha256()
        observed = ~np.isnan(self.values)
        for arr in (self.x, observed, np.where(observed, self.values, 0.0)):
            h.update(str(arr.shape).encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    def unstack(self, columns: np.ndarray, j: int) -> xr.DataArray:
        """Column ``j`` of an (N, K) result on the grid of ``dims``.

        Parameters
        ----------
        columns : ndarray, shape (N, K)
        j : int

        Returns
        -------
        xarray.DataArray
            On ``dims``, NaN outside the domain.
        """
        full = np.full(int(np.prod(self.shape)), np.nan)
        full[self.index] = columns[:, j]
        return xr.DataArray(full.reshape(self.shape), dims=self.dims)


def _stack_values(
    ds: xr.Dataset,
    names: Sequence[str],
    dims: Sequence[str],
    shape: Sequence[int],
    index: np.ndarray,
) -> tuple[np.ndarray, dict[str, xr.DataArray]]:
    values = np.empty((len(index), len(names)))
    originals = {}
    for j, name in enumerate(names):
        var = ds[name]
        if var.chunks is not None:
            var = var.compute()
        originals[name] = var
        values[:, j] = _undecoded_fills(name, var, _take(var, dims, shape, index))
    return values, originals


def stack_field(
    ds: xr.Dataset,
    names: Sequence[str],
    geometry: Geometry,
    transforms: Mapping[str, str | None],
    mask: xr.DataArray | str | None = None,
    *,
    trained_dims: Sequence[str] | None = None,
) -> Field:
    """The :class:`Field` of ``names`` with a given geometry (e.g. a trained model's).

    Parameters
    ----------
    ds : xarray.Dataset
    names : sequence of str
    geometry : Geometry
    transforms : mapping of str to str or None
    mask : DataArray or str, optional
        The domain (see :func:`domain_mask`).
    trained_dims : sequence of str, optional
        The training field's dims: another dim no coordinate spans is refused.

    Returns
    -------
    Field

    Raises
    ------
    InputError
        As :func:`prepare_field`; a dim no coordinate spans.
    """
    missing = [n for n in names if n not in ds.data_vars]
    if missing:
        raise InputError(
            f"variables {missing} (used by the model) are not in the Dataset; "
            f"available: {', '.join(map(str, ds.data_vars))}"
        )
    names = list(names)
    select_variables(ds, names)
    dims = variable_dims(ds, names)
    shape = tuple(_sizes(ds)[d] for d in dims)
    domain = domain_mask(ds, mask, dims, template=ds[names[0]])
    index = np.flatnonzero(domain.reshape(-1))
    if trained_dims is not None:
        check_spanned(ds, geometry, dims, shape, trained_dims)
    x = coordinates_at(ds, geometry, dims, shape, index)
    values, originals = _stack_values(ds, names, dims, shape, index)
    _check_values(values, names, transforms, masked=mask is not None, originals=originals)
    return Field(names, dims, shape, domain, x, values, dict(transforms), geometry, originals,
                 sites=network_sites(ds, geometry, dims))


#: 99th / 1st percentile ratio of a positive variable above which a log transform is proposed
HEAVY_TAIL_RATIO = 1e4


def heavy_tail_warnings(values: np.ndarray, names: list[str]) -> list[str]:
    """Texts of warnings proposing a log transform.

    Parameters
    ----------
    values : ndarray of float, shape (N, K)
    names : list of str, length K

    Returns
    -------
    list of str
        One per positive variable whose 99th / 1st percentile exceeds :data:`HEAVY_TAIL_RATIO`.
    """
    out = []
    for j, name in enumerate(names):
        v = values[np.isfinite(values[:, j]), j]
        if v.size >= 10 and v.min() > 0:
            low, high = np.percentile(v, [1, 99])
            if high > HEAVY_TAIL_RATIO * low:
                out.append(f"{name}: positive values spanning {np.log10(high / low):.1f} orders of magnitude "
                           f"(1st to 99th percentile {low:.3g} to {high:.3g}): consider modelling it in log "
                           f"space (transforms={{{name!r}: 'log'}}), or say transforms={{{name!r}: None}} "
                           "to keep it linear without this warning")
    return out


def prepare_field(
    ds: xr.Dataset,
    vars: str | Sequence[str] | None = None,
    *,
    coords: str | Sequence[str] | None = None,
    mask: xr.DataArray | str | None = None,
    transforms: str | Mapping[str, str | None] | None = None,
    coord_scale: Mapping[str, float] | None = None,
) -> Field:
    """Choose the variables and coordinates of a Dataset and stack them for the engine.

    Parameters
    ----------
    ds : xarray.Dataset
        Not modified; only the dask variables needed are computed.
    vars : str or sequence of str, optional
        See :func:`~geogpvae.fields.variables.select_variables`.
    coords : str or sequence of str, optional
        See :func:`~geogpvae.fields.coordinates.choose_coordinates`.
    mask : DataArray or str, optional
        See :func:`domain_mask`.
    transforms : str or mapping, optional
        See :func:`~geogpvae.fields.variables.parse_transforms`.
    coord_scale : mapping of str to float, optional
        See :func:`~geogpvae.fields.geometry.build_geometry`.

    Returns
    -------
    Field

    Raises
    ------
    InputError
        Unknown names, variables on different dims or never observed, non-finite coordinates,
        log of values <= 0, scattered data without coordinates.
    """
    if not isinstance(ds, xr.Dataset):
        hint = " (use da.to_dataset())" if isinstance(ds, xr.DataArray) else ""
        raise TypeError(f"expected an xarray.Dataset, got {type(ds).__name__}{hint}")
    exclude = [mask] if isinstance(mask, str) else []
    if coords is not None:
        exclude += [coords] if isinstance(coords, str) else [str(c) for c in coords]
    names = select_variables(ds, vars, exclude=exclude)
    if vars is not None and set(names) & set(exclude):
        clash = sorted(set(names) & set(exclude))
        raise InputError(f"{clash} cannot be both imputed and used as coordinates or mask")
    dims = variable_dims(ds, names)
    parsed = parse_transforms(transforms, names)
    chosen = choose_coordinates(ds, dims, coords)
    geometry = build_geometry(ds, chosen, coord_scale)
    field = stack_field(ds, names, geometry, parsed, mask)
    shared = unspanned_dims(ds, geometry, dims, [ds.sizes[d] for d in dims])
    if shared:  # named coordinates that leave dims out: their slices become repeats of one place
        warn_caller(_shared_places_warning(ds, geometry, shared))
    # levels only (a unitless time index or month number is left alone), and not those scaled by hand
    skip = frozenset(a.names[0] for a in geometry.axes if not looks_vertical(a.names[0], ds.variables.get(a.names[0])) or a.names[0] in
                     (coord_scale or {}) or is_time_axis(ds, a))
    unitless = unitless_axes(geometry, field.x, skip)
    if unitless:  # an s-coordinate beside km: every location's neighbours in its own column
        warn_caller(unitless_axes_warning(unitless))
    # a log transform proposed for heavy-tailed variables, unless the user chose their transform
    chosen_by_user = set(names) if isinstance(transforms, str) else set(transforms or ())
    linear = [j for j, n in enumerate(names) if parsed[n] is None and n not in chosen_by_user]
    for text in heavy_tail_warnings(field.values[:, linear], [names[j] for j in linear]):
        warn_caller(text)
    blank = placeholder_places(ds, field)  # NEMO's cells at (0, 0) without a position
    never = never_observed_warning(ds, field, blank, masked=mask is not None)
    for text in (never, placeholder_warning(ds, field, blank)):
        if text:
            warn_caller(text)
    return field


def _shared_places_warning(ds: xr.Dataset, geometry: Geometry, shared: list[tuple[str, int]]) -> str:
    """Text of the warning that the chosen coordinates leave ``shared`` dims out."""
    names = [n for a in geometry.axes for n in a.names]
    along = ", ".join(f"{d} ({n})" for d, n in shared)
    repeats = int(np.prod([n for _, n in shared]))
    hint = [*names, *(d for d, _ in shared)]  # a dim without a coordinate counts its positions
    return (
        f"none of the coordinates ({', '.join(names)}) varies along {along}: the {repeats} cells at "
        "each place share its coordinates and are modelled as repeated values of one location, so a "
        "gap is filled from the other cells at that place; unless that is meant, name coordinates for "
        f"those dims too (coordinates {', '.join(hint)})"
    )


# --------------------------------------------------------------------------- new locations
def _location_dims(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    variables: Sequence[str] = (),
    trained_dims: Sequence[str] = (),
) -> tuple[str, ...]:
    found: list[str] = []
    for name in geometry.names:
        if name in source.coords or (isinstance(source, xr.Dataset) and name in source.variables):
            dims = [str(d) for d in source[name].dims]
        elif name in source.dims:
            dims = [name]
        else:
            have = ", ".join(map(str, source.coords)) or "none"
            raise InputError(
                f"the locations lack coordinate {name!r}, which the model was trained on "
                f"(their coordinates: {have})"
            )
        found += [d for d in dims if d not in found]
    template = source
    if isinstance(source, xr.Dataset):  # a variable on these dims: the first trained one, else any
        names = [v for v in variables if v in source.data_vars] + list(source.data_vars)
        template = next((source[v] for v in names if set(found) <= set(map(str, source[v].dims))), None)
    if template is not None:
        order = [str(d) for d in template.dims if str(d) in found]
    else:  # coordinates only: the training field's order, e.g. (lat, lon) rather than (lon, lat),
        # then the order in which the locations give their dims
        order = [str(d) for d in trained_dims if str(d) in found]
        order += [str(d) for d in source.dims if str(d) in found and str(d) not in order]
    found = order + [d for d in found if d not in order]
    if not found:
        raise InputError(
            "the locations' coordinates are scalars (one point without a dim): give them along "
            "a dim, e.g. xr.Dataset(coords={'x': ('site', [0.5]), 'y': ('site', [0.5])})"
        )
    return tuple(found)


def locations(
    source: xr.Dataset | xr.DataArray,
    geometry: Geometry,
    variables: Sequence[str] = (),
    trained_dims: Sequence[str] = (),
    check_count: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, tuple[str, ...], dict[str, Any]]:
    """Model coordinates of new locations, e.g. a grid or a list of sites.

    Parameters
    ----------
    source : xarray.Dataset or xarray.DataArray
        Holds the coordinates of ``geometry``; its values are ignored.
    geometry : Geometry
    variables : sequence of str, optional
        The trained variables: the first on the locations' dims sets the dims' order.
    trained_dims : sequence of str, optional
        The training field's dims: their order where no variable sets it.
    check_count : callable, optional
        Called with the number of locations M before any coordinate is read (it may raise).

    Returns
    -------
    x : ndarray of float64, shape (M, D)
        In C order over ``dims``.
    dims : tuple of str
    coords : dict
        The coordinates of ``source`` on ``dims``.

    Raises
    ------
    InputError
        A coordinate is missing or not finite, or every coordinate is a scalar.
    """
    if not isinstance(source, (xr.Dataset, xr.DataArray)):
        raise TypeError(
            f"locations must be an xarray Dataset or DataArray, got {type(source).__name__}"
        )
    dims = _location_dims(source, geometry, variables, trained_dims)
    sizes = _sizes(source)
    shape = tuple(sizes[d] for d in dims)
    if check_count is not None:
        check_count(int(np.prod(shape)))
    x = coordinates_at(source, geometry, dims, shape, np.arange(int(np.prod(shape))))
    coords = {str(k): v for k, v in source.coords.items() if set(map(str, v.dims)) <= set(dims)}
    return x, dims, coords
