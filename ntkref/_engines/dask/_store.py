"""The Dask engine's out-of-core Gram stores: :func:`store_gram` and :func:`open_gram`.

A Dask Gram is written block by block to a Zarr store (``.zarr``) or a memory-mapped ``.npy`` file and
read back lazily, so a Gram larger than memory can be computed once and used by CG or the kernel machines.
Public as ``ntkref.kernels.store_gram`` / ``ntkref.kernels.open_gram`` (the kernels face loads this engine
on first access).
"""
from __future__ import annotations

import array_api_compat

from ..._lib.backend import to_numpy
from ..._lib.validation import InvalidParameterError
from ._graphs import _da, _name, _offsets, is_dask

__all__ = ["store_gram", "open_gram"]


class _NpyWriter:
    """A picklable ``__setitem__`` target for ``da.store``: opens the ``.npy`` memory map in each task."""

    def __init__(self, path):
        self.path = str(path)

    def __setitem__(self, index, value):
        import numpy as np

        mm = np.load(self.path, mmap_mode="r+")
        mm[index] = to_numpy(value)
        mm.flush()
        del mm


def _finite_block(block, block_id=None):
    """A block of the Gram to be stored, refused if it holds NaN or inf (checked in the task, on its device)."""
    xp = array_api_compat.array_namespace(block)
    if xp.isdtype(block.dtype, "real floating") and not bool(xp.all(xp.isfinite(block))):
        raise InvalidParameterError(f"The 'K' parameter of store_gram must be finite; block {block_id} holds NaN "
                                    "or inf.")
    return block


def _remove(path, settle=0.2, patience=5.0):
    """Remove a partly written store.  Tasks of other blocks that were already running when one block failed
    (threads, distributed workers) may still write theirs and recreate files: removed again until the path has
    stayed absent for ``settle`` seconds (at most ``patience`` seconds)."""
    import os
    import shutil
    import time

    end, absent_since = time.monotonic() + patience, None
    while time.monotonic() < end:
        if os.path.lexists(path):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            absent_since = None
        elif absent_since is None:
            absent_since = time.monotonic()
        elif time.monotonic() - absent_since >= settle:
            return
        time.sleep(0.02)


def store_gram(K, path, *, compute=True, compress=False):
    """Write a Dask Gram block by block: to a Zarr store (``path`` ends in ``.zarr``) or a ``.npy`` file.

    Each task writes its own block (no lock: the blocks are disjoint), so the whole Gram is never in one
    process.  ``.npy``: the file is created first (``numpy.lib.format.open_memmap``) and every block is
    written through a memory map (workers on one machine, or a shared file system).  Returns
    :func:`open_gram` of the result (lazy), or the store's delayed object if ``compute=False``.
    ``compress``: Zarr's default compressor (a float Gram compresses little, and every CG product would
    decompress it); default off.

    ``K`` must hold real numbers (a float, integer or boolean dtype); each task checks that its block is finite
    before writing it, and a NaN or inf raises :class:`~ntkref._lib.validation.InvalidParameterError` (with
    ``compute=True`` the partly written file or store is then removed, unless it existed before, once the
    blocks already being written elsewhere have finished).
    """
    import os

    import numpy as np

    da = _da()
    path = str(path)
    if not is_dask(K) or K.ndim != 2:
        raise InvalidParameterError("The 'K' parameter of store_gram must be a 2-D Dask array.")
    if np.dtype(K.dtype).kind not in "biuf":
        raise InvalidParameterError(f"The 'K' parameter of store_gram must hold real numbers; got dtype {K.dtype}.")
    if not (path.endswith(".zarr") or path.endswith(".npy")):
        raise InvalidParameterError(f"The 'path' parameter of store_gram must end in '.zarr' or '.npy'. Got {path!r}.")
    K = K.map_blocks(_finite_block, dtype=K.dtype, meta=K._meta)
    existed = os.path.exists(path)
    try:
        if path.endswith(".zarr"):
            extra = {} if compress else {"compressors": None}
            out = da.to_zarr(K, path, overwrite=True, compute=compute, **extra)
        else:
            np.lib.format.open_memmap(path, mode="w+", dtype=np.dtype(K.dtype), shape=K.shape).flush()
            out = da.store(K, _NpyWriter(path), lock=False, compute=compute)
    except InvalidParameterError:
        if compute and not existed:
            _remove(path)
        raise
    return open_gram(path, chunks=K.chunks) if compute else out


def _npy_block(path, i0, i1, j0, j1):
    import numpy as np

    mm = np.load(path, mmap_mode="r")
    return np.array(mm[i0:i1, j0:j1])


def _gram_chunks(chunks, shape, dtype):
    """``open_gram``'s ``chunks`` (None, an int >= 1, or ((rows...), (cols...))) as Dask's normalised chunks."""
    import numbers

    from dask.array.core import normalize_chunks

    if isinstance(chunks, bool) or not (isinstance(chunks, (numbers.Integral, tuple, list))):
        raise InvalidParameterError(f"The 'chunks' parameter of open_gram must be an int >= 1 or ((rows...), "
                                    f"(cols...)). Got {chunks!r}.")
    if isinstance(chunks, numbers.Integral):
        chunks = (int(chunks), int(chunks))
    try:
        sizes = [c if isinstance(c, numbers.Integral) else tuple(c) for c in chunks]
        # a block size per axis is >= 1; explicit block lists may hold 0 (an empty Gram's axis is one 0 block)
        if len(sizes) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low
                                  for c in sizes for v, low in (((c, 1),) if isinstance(c, numbers.Integral)
                                                                else ((v, 0) for v in c))):
            raise ValueError("block sizes must be ints >= 1")
        return normalize_chunks(tuple(sizes), shape=shape, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise InvalidParameterError(f"The 'chunks' parameter of open_gram must be an int >= 1 or ((rows...), "
                                    f"(cols...)) summing to the Gram's shape {shape}. Got {chunks!r} ({exc}).") from None


def open_gram(path, *, chunks=None):
    """A Gram written by :func:`store_gram` as a lazy Dask array (each task reads its block from disk).

    ``chunks``: ((rows...), (cols...)) or an int >= 1; default the Zarr chunks, or 4096 for ``.npy``.
    """
    import numpy as np
    from dask.highlevelgraph import HighLevelGraph

    da = _da()
    path = str(path)
    if path.endswith(".zarr"):
        if chunks is None:
            return da.from_zarr(path)
        import zarr

        z = zarr.open_array(path, mode="r")
        return da.from_zarr(z, chunks=_gram_chunks(chunks, z.shape, z.dtype))
    if not path.endswith(".npy"):
        raise InvalidParameterError(f"The 'path' parameter of open_gram must end in '.zarr' or '.npy'. Got {path!r}.")
    mm = np.load(path, mmap_mode="r")
    shape, dtype = mm.shape, mm.dtype
    del mm
    chunks = _gram_chunks(4096 if chunks is None else chunks, shape, dtype)
    r, c = _offsets(chunks[0]), _offsets(chunks[1])
    name = _name("open-gram", path)
    dsk = {(name, i, j): (_npy_block, path, r[i], r[i + 1], c[j], c[j + 1])
           for i in range(len(chunks[0])) for j in range(len(chunks[1]))}
    return da.Array(HighLevelGraph.from_collections(name, dsk, dependencies=[]), name, chunks=chunks, dtype=dtype,
                    meta=np.empty((0, 0), dtype=dtype))
