"""Data loading: IDX files (the MNIST format), without pickling.

:func:`load_idx` reads one IDX file (raw or gzip-compressed), checking the
magic number, the element type and the size; :func:`load_mnist` reads an
image/label pair and :func:`binary_digits` makes the seed-000 task (digits 0
vs 1 with labels −1/+1, pixels scaled to [0, 1], flattened to 784 features,
no other normalisation — as the official code).

The readers return host NumPy arrays (file contents; move them to a device
explicitly with ``xp.asarray(..., device=...)``);
:func:`binary_digits` works in the namespace and on the device of its inputs.
"""
from __future__ import annotations

import errno
import gzip
import math
import os
import struct

import numpy as np

from ._lib.backend import device_of, namespace
from ._lib.validation import InvalidParameterError, check_int
from .data import _MissingFileError

__all__ = ["load_idx", "load_mnist", "binary_digits", "IDXFormatError"]

_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


class IDXFormatError(InvalidParameterError):
    """A file is not a well-formed IDX file."""


def load_idx(path):
    """Read an IDX file (optionally gzip-compressed) into a NumPy array (host memory).

    Raises
    ------
    FileNotFoundError
        If ``path`` names no file (also an InvalidParameterError naming ``path``).
    IDXFormatError
        Bad magic number, unknown element type, or a size that does not match
        the header.
    """
    path = _fspath(path, "path", "load_idx")
    if not os.path.isfile(path):
        raise _MissingFileError(errno.ENOENT, "The 'path' parameter of load_idx names no file", path)
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        raw = gzip.decompress(fh.read()) if head == b"\x1f\x8b" else fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise IDXFormatError(f"{path}: not an IDX file (the first two bytes of the magic number must be zero).")
    code, ndim = raw[2], raw[3]
    if code not in _TYPES:
        raise IDXFormatError(f"{path}: unknown IDX element type 0x{code:02x}.")
    if ndim == 0 or len(raw) < 4 + 4 * ndim:
        raise IDXFormatError(f"{path}: truncated header ({ndim} dimensions).")
    shape = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    dtype = np.dtype(_TYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    body = raw[4 + 4 * ndim :]
    if len(body) != expected:
        raise IDXFormatError(f"{path}: header says shape {shape} ({expected} bytes of data) but the file has {len(body)}.")
    return np.frombuffer(body, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _fspath(p, name, caller):
    try:
        return os.fspath(p)
    except TypeError:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be a str or os.PathLike path. Got {p!r} instead.") from None


_IMAGE_NAMES = ("images-idx3-ubyte", "train-images-idx3-ubyte", "t10k-images-idx3-ubyte")


def _find(directory, stem):
    for suffix in (".gz", ""):
        p = os.path.join(directory, stem + suffix)
        if os.path.exists(p):
            return p
    return None


def load_mnist(directory, split=None):
    """Images (n, 28, 28) uint8 and labels (n,) from ``directory``, as NumPy arrays (host memory).

    ``split=None`` reads ``images-idx3-ubyte[.gz]``/``labels-idx1-ubyte[.gz]``
    (a subset as shipped with ntkref); ``"train"``/``"test"`` read the
    standard MNIST names ``train-…``/``t10k-…``.
    """
    prefix = {None: "", "train": "train-", "test": "t10k-"}
    if not isinstance(split, (str, type(None))) or split not in prefix:
        raise InvalidParameterError(f"The 'split' parameter of load_mnist must be None, 'train' or 'test'. Got {split!r}.")
    directory = _fspath(directory, "directory", "load_mnist")
    if not os.path.isdir(directory):
        raise _MissingFileError(errno.ENOENT, "The 'directory' parameter of load_mnist names no folder", directory)
    img = _find(directory, prefix[split] + "images-idx3-ubyte")
    lab = _find(directory, prefix[split] + "labels-idx1-ubyte")
    if img is None or lab is None:
        raise _MissingFileError(
            errno.ENOENT,
            f"The 'directory' parameter of load_mnist names a folder without {prefix[split]}images-idx3-ubyte[.gz] "
            f"/ {prefix[split]}labels-idx1-ubyte[.gz]", directory)
    images, labels = load_idx(img), load_idx(lab)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise IDXFormatError(f"images {images.shape} and labels {labels.shape} do not form an MNIST pair.")
    return images, labels


def binary_digits(images, labels, negative=0, positive=1):
    """The two-digit task: X (n, 784) float64 in [0, 1] and y ∈ {−1, +1} (``positive`` → +1).

    ``negative`` and ``positive`` are two different digits 0–9.  In the namespace and on the device of
    ``images``/``labels`` (NumPy in, NumPy out).
    """
    negative = check_int(negative, "negative", caller="binary_digits", low=0, high=9)
    positive = check_int(positive, "positive", caller="binary_digits", low=0, high=9)
    if negative == positive:
        raise InvalidParameterError(
            f"The 'negative' and 'positive' parameters of binary_digits must be different digits; both are {negative}.")
    xp = namespace(images, labels)
    images, labels = xp.asarray(images), xp.asarray(labels)
    dev = device_of(labels)
    keep = (labels == negative) | (labels == positive)
    idx = xp.nonzero(keep)[0]
    n_features = math.prod(images.shape[1:])
    X = xp.reshape(xp.take(images, idx, axis=0), (idx.shape[0], n_features))
    X = xp.astype(X, xp.float64) / 255.0
    one = xp.ones((idx.shape[0],), dtype=xp.float64, device=dev)
    y = xp.where(xp.take(labels, idx) == positive, one, -one)
    return X, y
