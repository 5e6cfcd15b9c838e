"""The on-disk format of a stored Gram: the manifest, the block checksums, and reading and writing blocks.

A store written by :func:`ntkref.kernels.store_gram` is complete when, and only when, it carries a valid
*manifest*: a JSON object (UTF-8, keys sorted, one line) written after every block is on disk::

    {"format": "ntkref-gram", "version": 1, "layout": "npy" | "zarr",
     "shape": [n1, n2], "dtype": "<f8", "chunks": [[rows...], [cols...]],
     "checksum": "blake2b-128", "blocks": [[hex of block (0, 0), (0, 1), ...], [... row 1 ...], ...],
     "compressed": false, "producer": {"ntkref": ..., "dask": ..., "graph": K's Dask name, ...}}

``blocks[i][j]`` is the BLAKE2b digest (16 bytes, hex) of block (i, j)'s values, C order, in the manifest's
dtype (byte order included): the same Gram has the same checksums in both layouts.

- ``.npy``: one file, a standard ``.npy`` (``np.load(path, mmap_mode="r")`` reads it; NumPy ignores what
  follows the array) followed by the manifest and a 16-byte footer: ``b"NTKRGRAM"`` and the manifest's length
  (little-endian uint64).  The file's size is exactly header + data + manifest + 16.
- ``.zarr``: a Zarr v3 array store (``zarr.open_array(path)`` reads it; every chunk file is written, empty
  ones too, and a float store's missing values read as NaN, not zeros) with the manifest in ``ntkref.json``.

Readers (:class:`Source`) use ``pread`` (no memory map: a truncated file is an error, never a SIGBUS) and pin
the file or folder they opened (its inode): a store replaced since :func:`open_gram` is refused, not mixed.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np

from ..._lib.validation import InvalidParameterError

FORMAT, VERSION, CHECKSUM = "ntkref-gram", 1, "blake2b-128"
MAGIC = b"NTKRGRAM"
FOOTER = len(MAGIC) + 8
ZARR_MANIFEST = "ntkref.json"
_KEYS = {"format", "version", "layout", "shape", "dtype", "chunks", "checksum", "blocks", "compressed", "producer"}


def offsets(sizes):
    out = [0]
    for s in sizes:
        out.append(out[-1] + int(s))
    return out


def checksum(block, dtype):
    """The hex BLAKE2b-128 digest of ``block``'s values in ``dtype`` (a NumPy dtype string), C order."""
    a = np.ascontiguousarray(block, dtype=np.dtype(dtype))
    return hashlib.blake2b(memoryview(a).cast("B"), digest_size=16).hexdigest()


def encode(manifest):
    return (json.dumps(manifest, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def build(plan, sums):
    """The manifest of a store made by ``plan`` (layout, shape, dtype, chunks, compressed, producer) whose
    block (i, j) has the checksum ``sums[(i, j)]``."""
    n, m = len(plan["chunks"][0]), len(plan["chunks"][1])
    return dict(plan, format=FORMAT, version=VERSION, checksum=CHECKSUM,
                blocks=[[sums[(i, j)] for j in range(m)] for i in range(n)])


class StoreError(InvalidParameterError):
    """A path that is not a complete, intact store written by store_gram (the message says what is wrong)."""


def refuse(path, what, caller="open_gram"):
    raise StoreError(f"The 'path' parameter of {caller} must name a complete store written by store_gram; "
                     f"{path!r} {what}.")


def parse(raw, path):
    """A manifest's bytes as a checked dict (every field of the right type and consistent), else refuse."""
    try:
        man = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        refuse(path, "has a manifest that is not valid JSON (damaged)")
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        refuse(path, f"has no ntkref manifest (format {FORMAT!r})")
    if man.get("version") != VERSION:
        refuse(path, f"has a manifest of version {man.get('version')!r}; this ntkref reads version {VERSION}")
    missing = _KEYS - set(man)
    if missing:
        refuse(path, f"has a manifest without {sorted(missing)}")
    try:
        shape = tuple(man["shape"])
        chunks = tuple(tuple(c) for c in man["chunks"])
        ok = (len(shape) == 2 and len(chunks) == 2 and man["checksum"] == CHECKSUM
              and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for c in chunks for v in c)
              and all(sum(c) == s for c, s in zip(chunks, shape))
              and len(man["blocks"]) == len(chunks[0])
              and all(len(row) == len(chunks[1]) and all(isinstance(h, str) and len(h) == 32 for h in row)
                      for row in man["blocks"]))
        dtype = np.dtype(man["dtype"])
    except (TypeError, ValueError, KeyError):
        ok = False
    if not ok or dtype.kind not in "biuf":
        refuse(path, "has a damaged manifest (its shape, dtype, chunks and block checksums disagree)")
    man["shape"], man["chunks"], man["dtype"] = shape, chunks, dtype.str
    return man


# ------------------------------------------------------------------------------------------------ .npy
def npy_header(shape, dtype):
    """The ``.npy`` header bytes of a C-order array of ``shape`` and ``dtype``."""
    import io

    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:  # pragma: no cover - a header over 64 KiB
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()


def npy_layout(f, path, caller="open_gram"):
    """(data offset, shape, dtype) of the open ``.npy`` file ``f``; refuse anything but a 2-D C-order array."""
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, SyntaxError):
        refuse(path, "is not a .npy file", caller)
    if len(shape) != 2:
        refuse(path, f"holds a {len(shape)}-D array of shape {shape}; a Gram is 2-D", caller)
    if fortran or dtype.kind not in "biuf" or dtype.hasobject:
        refuse(path, f"holds a {'Fortran-order ' if fortran else ''}array of dtype {dtype}", caller)
    return f.tell(), shape, dtype


def read_npy(path, caller="open_gram"):
    """(manifest, data offset, (st_dev, st_ino)) of a ``.npy`` store; refuse it if it is not complete."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        refuse(path, "does not exist", caller)
    except IsADirectoryError:
        refuse(path, "is a folder", caller)
    except OSError as exc:
        refuse(path, f"cannot be read ({exc.strerror})", caller)
    with f:
        st = os.fstat(f.fileno())
        offset, shape, dtype = npy_layout(f, path, caller)
        end = offset + int(np.prod(shape)) * dtype.itemsize
        tail = os.pread(f.fileno(), FOOTER, st.st_size - FOOTER) if st.st_size >= end + FOOTER else b""
        if tail[:len(MAGIC)] != MAGIC:
            refuse(path, "has no ntkref manifest: it was not written by store_gram, or its writing was "
                         "interrupted (its data may be incomplete)", caller)
        (length,) = struct.unpack("<Q", tail[len(MAGIC):])
        if end + length + FOOTER != st.st_size:
            refuse(path, f"has {st.st_size} bytes where its header and manifest account for "
                         f"{end + length + FOOTER} (truncated or appended to)", caller)
        man = parse(os.pread(f.fileno(), length, end), path)
    if man["layout"] != "npy" or man["shape"] != tuple(shape) or man["dtype"] != dtype.str:
        refuse(path, f"has a manifest of another store ({man['layout']}, shape {man['shape']}, dtype "
                     f"{man['dtype']}) than its data (npy, shape {tuple(shape)}, dtype {dtype.str})", caller)
    return man, offset, (st.st_dev, st.st_ino)


def pwrite_block(fd, offset, ncols, r0, c0, block):
    """Write the C-contiguous 2-D array ``block`` at rows r0.., columns c0.. of the ``.npy`` data at ``offset``."""
    item = block.dtype.itemsize
    rows = [memoryview(block).cast("B")] if block.shape[1] == ncols else [memoryview(r).cast("B") for r in block]
    for k, buf in enumerate(rows):
        pos = offset + ((r0 + k) * ncols + c0) * item
        while len(buf):
            done = os.pwrite(fd, buf, pos)
            buf, pos = buf[done:], pos + done


# ------------------------------------------------------------------------------------------------ .zarr
def read_zarr(path, caller="open_gram"):
    """(manifest, (st_dev, st_ino)) of a ``.zarr`` store; refuse it if it is not complete: no manifest, Zarr
    metadata that disagree with it (another shape, dtype or chunking), or chunk files missing."""
    if not os.path.exists(path):
        refuse(path, "does not exist", caller)
    if not os.path.isdir(path):
        refuse(path, "is not a folder (a Zarr store is one)", caller)
    try:
        with open(os.path.join(path, ZARR_MANIFEST), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        refuse(path, f"has no ntkref manifest ({ZARR_MANIFEST}): it was not written by store_gram, or its "
                     "writing was interrupted (its data may be incomplete)", caller)
    man = parse(raw, path)
    st = os.stat(path)
    import zarr

    try:
        z = zarr.open_array(path, mode="r")
        shape, dtype, grid = tuple(z.shape), np.dtype(z.dtype), tuple(z.chunks)
    except Exception as exc:  # zarr raises many kinds on damaged metadata
        refuse(path, f"has damaged Zarr metadata ({type(exc).__name__}: {exc})", caller)
    chunks = tuple(tuple(min(g, s - k) for k in range(0, s, g)) for g, s in zip(grid, shape))
    if man["layout"] != "zarr" or shape != man["shape"] or dtype != np.dtype(man["dtype"]) or chunks != man["chunks"]:
        refuse(path, f"has Zarr metadata (shape {shape}, dtype {dtype.str}, chunks {grid}) that disagree with its "
                     f"manifest ({man['layout']}, shape {man['shape']}, dtype {man['dtype']}, blocks of "
                     f"{man['chunks'][0][0]} x {man['chunks'][1][0]}): it was changed after store_gram wrote it",
               caller)
    key = getattr(z.metadata, "encode_chunk_key", None)
    if key is not None:
        missing = [key((i, j)) for i in range(len(chunks[0])) for j in range(len(chunks[1]))
                   if not os.path.isfile(os.path.join(path, key((i, j))))]
        if missing:
            refuse(path, f"is missing {len(missing)} of its {len(chunks[0]) * len(chunks[1])} chunk files "
                         f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''})", caller)
    return man, (st.st_dev, st.st_ino)


# ------------------------------------------------------------------------------------------------ readers
_ZARR = {}  # (path, mode, pin) -> an open Zarr array (opening one per task reads and parses its metadata)


def zarr_array(path, mode, pin):
    """The Zarr array at ``path``, opened once per process for each ``pin`` (the folder's identity: a store
    replaced at the same path is opened anew)."""
    import zarr

    key = (path, mode, None if pin is None else tuple(pin))
    z = _ZARR.get(key)
    if z is None:
        if len(_ZARR) > 64:
            _ZARR.clear()
        z = _ZARR[key] = zarr.open_array(path, mode=mode)
    return z


class Source:
    """A picklable reader of one store's values: ``read(r0, r1, c0, c1)`` as a NumPy array."""

    def __init__(self, path, layout, shape, dtype, offset=None, pin=None):
        self.path, self.layout, self.shape, self.dtype = path, layout, tuple(shape), np.dtype(dtype)
        self.offset, self.pin = offset, pin

    def _check_pin(self, st):
        if self.pin is not None and (st.st_dev, st.st_ino) != tuple(self.pin):
            raise StoreError(f"The 'path' parameter of open_gram: the store {self.path!r} was replaced since it was "
                             "opened; call open_gram again.")

    def read(self, r0, r1, c0, c1):
        out = np.empty((r1 - r0, c1 - c0), dtype=self.dtype)
        if out.size == 0:
            return out
        if self.layout == "zarr":
            try:
                self._check_pin(os.stat(self.path))
            except FileNotFoundError:
                raise StoreError(f"The 'path' parameter of open_gram: the store {self.path!r} was removed since it "
                                 "was opened.") from None
            out[...] = zarr_array(self.path, "r", self.pin)[r0:r1, c0:c1]
            return out
        fd = os.open(self.path, os.O_RDONLY)
        try:
            self._check_pin(os.fstat(fd))
            ncols, item = self.shape[1], self.dtype.itemsize
            rows = [out] if (c0 == 0 and c1 == ncols) else list(out)
            for k, row in enumerate(rows):
                buf, pos = memoryview(row).cast("B"), self.offset + ((r0 + k) * ncols + c0) * item
                while len(buf):
                    got = os.preadv(fd, [buf], pos)
                    if got == 0:
                        raise StoreError(f"The 'path' parameter of open_gram: the store {self.path!r} was truncated "
                                         "since it was opened.")
                    buf, pos = buf[got:], pos + got
        finally:
            os.close(fd)
        return out


def covering(chunks, r0, r1, c0, c1):
    """The stored blocks (i, j, rows a0:a1, columns b0:b1) that the region r0:r1 x c0:c1 touches, and the
    rectangle (R0, R1, C0, C1) they cover."""
    ro, co = offsets(chunks[0]), offsets(chunks[1])
    out = []
    for i in range(len(chunks[0])):
        if ro[i + 1] <= r0 or ro[i] >= r1:
            continue
        for j in range(len(chunks[1])):
            if co[j + 1] > c0 and co[j] < c1:
                out.append((i, j, ro[i], ro[i + 1], co[j], co[j + 1]))
    if not out:
        return (r0, r1, c0, c1), []
    return (min(b[2] for b in out), max(b[3] for b in out), min(b[4] for b in out), max(b[5] for b in out)), out


def check_blocks(src, blocks, rect=None, values=None, caller="open_gram"):
    """Raise naming the first of ``blocks`` ((i, j, a0, a1, b0, b1, hex), ...) whose values differ from its
    checksum; ``values`` (the rectangle ``rect``) are read from ``src`` if not given.  Returns the values."""
    if rect is None:
        rect = (min(b[2] for b in blocks), max(b[3] for b in blocks), min(b[4] for b in blocks),
                max(b[5] for b in blocks))
    if values is None:
        values = src.read(*rect)
    R0, _, C0, _ = rect
    for i, j, a0, a1, b0, b1, hx in blocks:
        if checksum(values[a0 - R0:a1 - R0, b0 - C0:b1 - C0], src.dtype) != hx:
            raise StoreError(f"The 'path' parameter of {caller}: block ({i}, {j}) (rows {a0}:{a1}, columns {b0}:{b1}) "
                             f"of {src.path!r} does not match its checksum: the file was damaged or changed after "
                             "store_gram wrote it.")
    return values
