"""The Dask engine's out-of-core Gram stores: :func:`store_gram` and :func:`open_gram`, crash-safe and resumable.

A Dask Gram is written block by block to a Zarr store (``.zarr``) or a ``.npy`` file and read back lazily, so a
Gram larger than memory is computed once and used by CG or the kernel machines.  Public as
``ntkref.kernels.store_gram`` / ``ntkref.kernels.open_gram`` (the kernels face loads this engine on first access).
The standard is a database's: a write is all or nothing, its commit is recorded last, a reader verifies before
it trusts, and a crash loses at most the blocks being written.

The format (:mod:`._manifest`): a store is complete when it carries a *manifest* — shape, dtype, chunking, the
producing call (ntkref's and Dask's versions, K's Dask name, the caller's ``producer``) and a BLAKE2b checksum
of every block.  ``X.npy`` is one file: a standard ``.npy`` (``np.load(X, mmap_mode="r")`` reads it) followed
by the manifest and a 16-byte footer; ``X.zarr`` is a Zarr v3 array store with the manifest in
``X.zarr/ntkref.json``.

The protocol of one :func:`store_gram` call:

1. *Prepare* a hidden sibling folder ``.ntkref-X.<token>.partial`` next to the target (same file system, so
   the final rename is atomic): ``data.npy`` (header written, the whole size reserved with
   ``posix_fallocate``: a full disk is an :class:`OSError` here, never a SIGBUS later) or ``store/`` (the Zarr
   array's metadata; the free space is checked first when uncompressed), ``blocks/``, two lock files and
   ``plan.json`` (shape, dtype, chunks, producer), written last.  Stale ``.partial`` siblings of the target
   whose writer is dead (no process holds their ``live.lock``) are removed.
2. *Blocks*: one task per block checks it is finite, writes it (``pwrite`` or Zarr), fsyncs it, and only then
   records its checksum as an empty file ``blocks/<i>.<j>.<blake2b hex>``.  The tasks hold ``write.lock``
   shared; a clean-up takes it exclusively, so no late task recreates files after the clean-up.
3. *Commit*: the manifest is appended (``.npy``) or written to ``ntkref.json`` (``.zarr``), fsync'd; the
   target is checked again (a target that is not a store written by store_gram is never replaced or deleted;
   a previous store only with ``overwrite=True``), then the result is renamed onto the target — a file in one
   ``os.replace``; a folder onto an existing one by an atomic exchange (``renameat2``) where the system has
   one — the folder fsync'd, and the partial folder (holding the old store after an exchange) removed.

On *any* exception the partial folder is removed and the target is what it was.  After a crash or a kill the
target is also what it was (or the new, complete store if the kill came after the rename); the partial folder
is left for ``store_gram(K, path, resume=True)``: it verifies each recorded block against its checksum,
recomputes one recorded block per row chunk and per column chunk to check that K is the Gram being written
(a Gram's block (i, j) depends on its inputs' chunks i and j; an arbitrary Dask array could change entries
independently, and resume is for the same Gram), recomputes only the blocks without a valid record, and commits — the same bytes as an uninterrupted run.  A ``store_gram`` without ``resume``
removes the stale partial instead.  :func:`open_gram` refuses anything without a valid manifest (naming what
is missing) and verifies the checksums of every block a task reads (``verify="read"``), all of them at once
(``verify=True``) or none (``verify=False``).
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..._lib import files
from ..._lib.validation import InvalidParameterError
from . import _manifest as M
from . import _partial as P
from ._graphs import _da, _name, is_dask

__all__ = ["store_gram", "open_gram"]


# ------------------------------------------------------------------------------------------------ store_gram
def _flag(value, name, caller):
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be True or False. Got {value!r} instead.")
    return bool(value)


def store_gram(K, path, *, compute=True, compress=False, overwrite=True, resume=False, producer=None):
    """Write a Dask Gram block by block, crash-safely: to a Zarr store (``path`` ends in ``.zarr``) or a ``.npy`` file.

    Each task writes its own block into a hidden temporary sibling of ``path`` and records its checksum; the
    store appears at ``path`` complete, with its manifest, in one atomic rename, or not at all (see the module
    docstring for the format and the protocol).  ``.npy`` needs the workers on one machine or a shared file
    system; the whole size is reserved first, so a full disk is an :class:`OSError` before any block is written.
    Returns :func:`open_gram` of the result (lazy), or, with ``compute=False``, a delayed object whose
    computation runs the whole protocol (nothing is written before) and returns ``path``.

    - ``overwrite``: True (default) replaces an existing store written by store_gram, once the new one is
      complete; False refuses it.  A path holding anything else (a user's folder, a ``.npy`` without an ntkref
      manifest) is always refused and left untouched.
    - ``resume``: finish the store of ``path`` that a crash or a kill interrupted: the blocks already written
      are verified against their checksums, one of them is recomputed to check that K is the same Gram, and only
      the others are computed.  With nothing to resume, a new store is written.
    - ``compress``: Zarr's default compressor (a float Gram compresses little, and every CG product would
      decompress it); default off.  Zarr needs regular chunks: an irregular K is rechunked to its largest block.
    - ``producer``: a JSON-serialisable dict describing the call that made K (e.g. ``{"kernel": "fc", "depth":
      3}``), recorded in the manifest next to ntkref's and Dask's versions and K's Dask name.

    ``K`` must hold real numbers (a float, integer or boolean dtype); each task checks that its block is finite
    before writing it, and a NaN or inf raises :class:`~ntkref._lib.validation.InvalidParameterError`.  On any
    exception the temporary store is removed and ``path`` is left as it was.

    Examples
    --------
    >>> import os, tempfile
    >>> import dask.array as da
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> x = da.from_array(np.random.default_rng(0).standard_normal((6, 3)), chunks=3)
    >>> K = kernels.fc(x, get="ntk").ntk                  # lazy: one task per 3×3 block
    >>> tmp = tempfile.TemporaryDirectory()
    >>> G = kernels.store_gram(K, os.path.join(tmp.name, "ntk.npy"))   # written block by block
    >>> G.chunks, bool(np.array_equal(G.compute(), K.compute()))
    (((3, 3), (3, 3)), True)
    >>> tmp.cleanup()
    """
    import dask

    from ... import __version__

    _da()  # dask[array] is there, or an error that says how to install it
    caller = "store_gram"
    path = os.path.abspath(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else path
    if not is_dask(K) or K.ndim != 2:
        raise InvalidParameterError("The 'K' parameter of store_gram must be a 2-D Dask array.")
    if np.dtype(K.dtype).kind not in "biuf":
        raise InvalidParameterError(f"The 'K' parameter of store_gram must hold real numbers; got dtype {K.dtype}.")
    if any(c != c for c in K.chunks[0] + K.chunks[1]):
        raise InvalidParameterError("The 'K' parameter of store_gram has unknown chunk sizes (NaN); call "
                                    "K.compute_chunk_sizes() first.")
    if 0 in K.shape:
        raise InvalidParameterError(f"The 'K' parameter of store_gram must not be empty; got shape {K.shape}.")
    if not isinstance(path, str) or not (path.endswith(".zarr") or path.endswith(".npy")):
        raise InvalidParameterError(f"The 'path' parameter of store_gram must end in '.zarr' or '.npy'. Got {path!r}.")
    compute, compress = _flag(compute, "compute", caller), _flag(compress, "compress", caller)
    overwrite, resume = _flag(overwrite, "overwrite", caller), _flag(resume, "resume", caller)
    try:
        extra = json.loads(json.dumps(producer if producer is not None else {}, allow_nan=False))
        if not isinstance(extra, dict):
            raise TypeError
    except (TypeError, ValueError):
        raise InvalidParameterError("The 'producer' parameter of store_gram must be None or a JSON-serialisable "
                                    f"dict. Got {producer!r} instead.") from None
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise InvalidParameterError(f"The 'path' parameter of store_gram names a folder that does not exist: {path!r}.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"The 'path' parameter of store_gram names a folder that is not writable (a "
                                    f"read-only file system, or its permissions): {folder!r}.")
    layout, name = ("zarr" if path.endswith(".zarr") else "npy"), K.name
    if layout == "zarr" and not all(all(x == c[0] for x in c[:-1]) and c[-1] <= c[0] for c in K.chunks):
        K = K.rechunk((max(K.chunks[0]), max(K.chunks[1])))
    plan = {"layout": layout, "shape": list(K.shape), "dtype": np.dtype(K.dtype).str,
            "chunks": [list(c) for c in K.chunks], "compressed": compress and layout == "zarr",
            "producer": {**extra, "ntkref": __version__, "dask": dask.__version__, "graph": name}}
    found = P.resume(K, path, plan, overwrite) if resume else None
    if found is not None and found[1]:  # the interrupted call had committed: only its clean-up is left
        if not compute:
            return dask.delayed(P.finish_committed, pure=False)(found[0].partial, path)
        P.finish_committed(found[0].partial, path)
        return open_gram(path, chunks=K.chunks)
    P.check_target(path, layout, overwrite)
    if found is None:
        import secrets

        run = P.Run(path, files.sibling(path, secrets.token_hex(6) + P.PARTIAL), plan, overwrite, [], {}, False)
    else:
        run = found[0]
    run.todo = [(i, j) for i in range(len(K.chunks[0])) for j in range(len(K.chunks[1])) if (i, j) not in run.done]
    graph = P.graph(K, run)
    if not compute:
        return graph
    try:
        graph.compute()
    except BaseException:
        P.discard(run.partial)
        raise
    return open_gram(path, chunks=K.chunks)


# ------------------------------------------------------------------------------------------------ open_gram
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


def _read(src, r0, r1, c0, c1, rect, checks):
    """One task of open_gram: the region r0:r1 x c0:c1, the stored blocks it touches verified first."""
    if checks is None:
        return src.read(r0, r1, c0, c1)
    values = M.check_blocks(src, list(checks), rect)
    R0, R1, C0, C1 = rect
    # values were read from disk into host memory: the copy keeps only the region, not the rest of the block
    return values if (R0, R1, C0, C1) == (r0, r1, c0, c1) else np.array(values[r0 - R0:r1 - R0, c0 - C0:c1 - C0])


def open_gram(path, *, chunks=None, verify="read"):
    """A Gram written by :func:`store_gram` as a lazy Dask array (each task reads its block from disk).

    A path without a complete store is refused, naming what is missing: no manifest (not written by
    store_gram, or its writing was interrupted — ``store_gram(K, path, resume=True)`` finishes it), Zarr metadata
    that disagree with the manifest, missing chunk files, a truncated file.

    - ``chunks``: ((rows...), (cols...)) or an int >= 1; default the stored blocks.
    - ``verify``: ``"read"`` (default) — every task checks the BLAKE2b checksums of the stored blocks it reads
      and raises naming a block that does not match (a task whose region cuts stored blocks reads them whole);
      ``True`` — all blocks are checked now, before returning (one pass over the store), and not again;
      ``False`` — no checks.

    Examples
    --------
    >>> import os, tempfile
    >>> import dask.array as da
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> x = da.from_array(np.random.default_rng(0).standard_normal((6, 3)), chunks=3)
    >>> K = kernels.fc(x, get="ntk").ntk
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "ntk.zarr")
    >>> _ = kernels.store_gram(K, path)
    >>> G = kernels.open_gram(path, chunks=2)              # read back in other blocks
    >>> G.chunks, bool(np.array_equal(G.compute(), K.compute()))
    (((2, 2, 2), (2, 2, 2)), True)
    >>> tmp.cleanup()
    """
    import dask
    from dask.highlevelgraph import HighLevelGraph

    da = _da()
    path = os.path.abspath(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else path
    if not (verify is True or verify is False or (isinstance(verify, str) and verify == "read")):
        raise InvalidParameterError(f"The 'verify' parameter of open_gram must be 'read', True or False. Got {verify!r} "
                                    "instead.")
    if not isinstance(path, str) or not (path.endswith(".zarr") or path.endswith(".npy")):
        raise InvalidParameterError(f"The 'path' parameter of open_gram must end in '.zarr' or '.npy'. Got {path!r}.")
    try:
        if path.endswith(".npy"):
            (man, offset, pin), layout = M.read_npy(path), "npy"
        else:
            (man, pin), offset, layout = M.read_zarr(path), None, "zarr"
    except M.StoreError as exc:
        if files.siblings(path, P.PARTIAL):
            raise M.StoreError(f"{exc} An interrupted store_gram left its work next to it: "
                               f"store_gram(K, {path!r}, resume=True) finishes it.") from None
        raise
    shape, dtype, stored = man["shape"], np.dtype(man["dtype"]), man["chunks"]
    src = M.Source(path, layout, shape, dtype, offset=offset, pin=pin)
    chunks = _gram_chunks(stored if chunks is None else chunks, shape, dtype)
    ro, co = M.offsets(stored[0]), M.offsets(stored[1])
    if verify is True:
        checks = [dask.delayed(M.check_blocks, pure=False)(src, [(i, j, ro[i], ro[i + 1], co[j], co[j + 1], hx)])
                  for i, row in enumerate(man["blocks"]) for j, hx in enumerate(row)]
        dask.compute(*checks)
    r, c = M.offsets(chunks[0]), M.offsets(chunks[1])
    name = _name("open-gram", path)
    dsk = {}
    for i in range(len(chunks[0])):
        for j in range(len(chunks[1])):
            rect, checks = None, None
            if verify == "read":
                rect, cover = M.covering(stored, r[i], r[i + 1], c[j], c[j + 1])
                checks = tuple(b + (man["blocks"][b[0]][b[1]],) for b in cover) or None
            dsk[(name, i, j)] = (_read, src, r[i], r[i + 1], c[j], c[j + 1], rect, checks)
    return da.Array(HighLevelGraph.from_collections(name, dsk, dependencies=[]), name, chunks=chunks, dtype=dtype,
                    meta=np.empty((0, 0), dtype=dtype))


def open_zarr(path):
    """A Zarr array opened read-only (``zarr.open_array(path, mode="r")``): the candidate Gram of a sampled check
    (``ntkref compare --sample/--rows``), of which only the sampled entries or rows are read.  Any Zarr array
    (no ntkref manifest needed: this is the user's file, not a store of :func:`store_gram`); an error naming
    ``path`` if it is not one, or if zarr is not installed."""
    try:
        import zarr
    except ImportError:
        raise InvalidParameterError(f"The 'path' parameter of open_zarr names a Zarr array ({path!r}), which needs the "
                                    "zarr package: pip install -e \".[dask]\" from ntkref's checkout.") from None
    try:
        return zarr.open_array(path, mode="r")
    except Exception as exc:  # noqa: BLE001 - zarr's errors vary by version; one message naming the path
        raise InvalidParameterError(f"The 'path' parameter of open_zarr must name a readable Zarr array. Got {path!r} "
                                    f"({type(exc).__name__}: {exc}).") from None
