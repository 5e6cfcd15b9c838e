"""Data shipped with ntkref: the MNIST digits 0 and 1 of a public 10 000-image subset.

``mnist_digits01.npz`` (``numpy.load(..., allow_pickle=False)``-safe) holds

- ``images``: uint8, shape (2128, 784) — the 28×28 images, row-major, grey levels 0–255;
- ``labels``: uint8, shape (2128,) — the digit, 0 (1001 images) or 1 (1127 images);
- ``source_index``: int32, shape (2128,) — the position of each image in the subset's IDX files.

The images are all the 0s and 1s of the 10 000-digit MNIST subset of the MIT-licensed ``mnist`` package
(version 1.1.0) of the npm registry, in that subset's (shuffled) order; MNIST itself is by Y. LeCun,
C. Cortes and C. J. C. Burges.  See ``README.md`` in this folder.

>>> from ntkref.data import load_digits01
>>> images, labels = load_digits01()
>>> images.shape, images.dtype, int((labels == 1).sum())
((2128, 784), dtype('uint8'), 1127)
"""
from __future__ import annotations

import errno
from importlib import resources

import numpy as np

from .._lib.validation import InvalidParameterError

__all__ = ["DIGITS01_FILE", "N_DIGITS01", "load_digits01", "path"]

DIGITS01_FILE = "mnist_digits01.npz"
N_DIGITS01 = 2128


class _MissingFileError(FileNotFoundError, InvalidParameterError):
    """A path parameter that names no file: a FileNotFoundError that is also an InvalidParameterError (its
    message names the parameter)."""


def _package_file(package, name, caller):
    """A traversable path to the file ``name`` of ``package``'s folder; an error naming 'name' (and listing the
    files there) if there is none."""
    if not isinstance(name, str):
        raise InvalidParameterError(f"The 'name' parameter of {caller} must be a file name (str). Got {name!r} instead.")
    folder = resources.files(package)
    p = folder.joinpath(name)
    if not p.is_file():
        have = sorted(f.name for f in folder.iterdir() if f.is_file() and not f.name.endswith(".pyc"))
        raise _MissingFileError(errno.ENOENT, f"The 'name' parameter of {caller} must be one of {have}; got {name!r}")
    return p


def path(name=DIGITS01_FILE):
    """A traversable path to a data file of this package (an error naming ``name`` if there is no such file)."""
    return _package_file(__name__, name, "ntkref.data.path")


def load_digits01(*, return_index=False):
    """The embedded MNIST 0/1 digits.

    Returns
    -------
    images : numpy.ndarray, uint8, shape (2128, 784)
    labels : numpy.ndarray, uint8, shape (2128,), values 0 or 1
    source_index : numpy.ndarray, int32, shape (2128,), only if ``return_index``
        Position of each image in the 10 000-image subset it was taken from.
    """
    with path().open("rb") as fh, np.load(fh, allow_pickle=False) as z:
        images, labels, index = z["images"], z["labels"], z["source_index"]
    if images.shape != (N_DIGITS01, 784) or labels.shape != (N_DIGITS01,):
        raise ValueError(f"{DIGITS01_FILE} is damaged: images {images.shape}, labels {labels.shape}.")
    return (images, labels, index) if return_index else (images, labels)
