"""The Dask engine: kernels, kernel machines, dynamics and certificates on Dask arrays.

- :mod:`._graphs` — blockwise Grams (``kernels.fc``, ``kernels.cntk``, ``nets.empirical_ntk``), the
  symmetric block operations CG uses, lazy ``machines.predict`` and ``certify.certified_radius``;
- :mod:`._machines` — ``machines.solve`` / ``hard_margin_svm`` / ``krr.solve_cg``'s operator /
  ``dynamics.subgradient_descent`` on a Dask Gram, with the certificates of the dense solvers;
- :mod:`._store` — ``kernels.store_gram`` / ``kernels.open_gram``, out-of-core Grams on disk, crash-safe and
  resumable (:mod:`._manifest` their format, :mod:`._partial` the temporary store being written).

Importing this package imports no Dask: the modules import ``dask`` inside the functions that build graphs.
"""
from ..._lib import dispatch
from ..._lib.api import set_public_module
from . import _graphs, _machines, _store

#: seam -> what this engine does there (the README's backend table is made from this)
SEAMS = {
    "fc": "lazy Gram, one task per block of rows",
    "cntk": "lazy Gram, one task per block of image rows",
    "empirical_ntk": "lazy Gram, one task per block of rows",
    "store_gram": "writes a Dask Gram block by block (Zarr or `.npy`)",
    "open_gram": "reads a stored Gram lazily",
    "solve": "every loss: CG (squared), working sets of gathered columns (SVM losses), Newton-CG (logistic)",
    "hard_margin_svm": "soft-margin path on working sets of gathered columns",
    "predict": "lazy, per block",
    "checked_gram": "refused: the Dask solvers validate block by block",
    "gram_operator": "blocked mat-vecs, diagonal and columns (upper blocks only)",
    "gradient_flow": "refused: the flows need K in one process",
    "subgradient_descent": "one blocked mat-vec per step",
    "certified_radius": "lazy radii, one task per row chunk of `x_test`",
    "open_zarr": "opens the Zarr array read-only (`zarr.open_array`); the sampled entries are read, nothing else",
}


def register():
    """Fill the seams this engine serves (called once by :func:`ntkref._lib.dispatch.load`)."""
    # the stores are public as ntkref.kernels.store_gram / open_gram
    set_public_module("ntkref.kernels", vars(_store), ("store_gram", "open_gram"))
    for name, impl in (
        ("fc", _graphs.fc),
        ("cntk", _graphs.cntk),
        ("empirical_ntk", _graphs.empirical_ntk),
        ("store_gram", _store.store_gram),
        ("open_gram", _store.open_gram),
        ("solve", _machines.solve),
        ("hard_margin_svm", _machines.hard_margin_svm),
        ("predict", _graphs.predict),
        ("checked_gram", _machines.refuse_checked_gram),
        ("gram_operator", _machines.DaskGram),
        ("gradient_flow", _machines.refuse_gradient_flow),
        ("subgradient_descent", _machines.subgradient_descent),
        ("certified_radius", _graphs.certified_radius),
        ("open_zarr", _store.open_zarr),
    ):
        getattr(dispatch, name).register("dask", impl)
