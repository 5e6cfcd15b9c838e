"""Infinite-width kernels: NNGP and NTK of fully connected (and convolutional) networks.

Public objects:

- :func:`fc` — NNGP/NTK of FC nets of any depth (neural-tangents' convention; ReLU, erf
  closed forms, any activation by quadrature), blocked and symmetric-aware.
- :func:`fc_diagonal` — the exact diagonal in O(n).
- :func:`two_layer_relu_ntk` — seed 000 eq. (63); :func:`relu_h` its h(u).
- :func:`wei_kernel`, :func:`wei_k1_k2` — seed 002's two-layer kernel.
- :func:`arora_ntk` — seed 004 eq. (8) (c_σ = 2, no 1/d).
- :func:`chen_ntk` — seed 000's convention (W_std = 1, no bias) at any depth.
- :func:`cntk` — NNGP/NTK of ReLU CNNs with SAME convolutions (seed 004), GAP or flatten readout.
- :func:`store_gram`, :func:`open_gram` — a Dask Gram written to / read from disk block by block (Zarr or
  ``.npy``), for Gram matrices larger than memory.

On Dask arrays ``fc``, ``cntk`` (and ``nets.empirical_ntk``) build one task per block without computing
(the Dask engine, ``ntkref/_engines/dask``); ``store_gram`` and ``open_gram`` belong to that engine too and
are loaded on first access (importing ``ntkref.kernels`` imports neither Dask nor the engine).
"""
from .._lib import dispatch
from .._lib.api import set_public_module
from ._activations import ACTIVATIONS, Activation
from ._cntk import cntk
from ._fc import BoundedKernel, Kernel, fc, fc_diagonal
from ._two_layer import arora_ntk, relu_h, two_layer_relu_ntk, wei_k1_k2, wei_kernel


def chen_ntk(x1, x2=None, *, depth=1):
    """Seed 000's NTK (official code: neural-tangents Dense(W_std=1)/Relu, no bias).

    Equal to ``fc(x1, x2, depth=depth, W_std=1.0, b_std=0.0).ntk``; for depth 1
    this is eq. (63), :func:`two_layer_relu_ntk`; ``depth`` ≥ 0 (0: the linear kernel x·x′/d).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.kernels import chen_ntk, two_layer_relu_ntk
    >>> x = np.random.default_rng(0).standard_normal((4, 3))
    >>> bool(np.allclose(chen_ntk(x, depth=0), x @ x.T / 3, rtol=1e-13, atol=1e-13))         # x·x′/d
    True
    >>> bool(np.allclose(chen_ntk(x, depth=1), two_layer_relu_ntk(x), rtol=1e-13, atol=1e-13))  # eq. (63)
    True
    """
    return fc(x1, x2, depth=depth, W_std=1.0, b_std=0.0, get="ntk").ntk


__all__ = [
    "ACTIVATIONS",
    "Activation",
    "BoundedKernel",
    "Kernel",
    "arora_ntk",
    "chen_ntk",
    "cntk",
    "fc",
    "fc_diagonal",
    "open_gram",
    "relu_h",
    "store_gram",
    "two_layer_relu_ntk",
    "wei_k1_k2",
    "wei_kernel",
]

set_public_module(__name__, globals(), [n for n in __all__ if n not in ("store_gram", "open_gram")])


def __getattr__(name):
    # the out-of-core stores are the Dask engine's (PEP 562: loaded on first access, not at import)
    if name in ("store_gram", "open_gram"):
        return getattr(dispatch, name).get("dask")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
