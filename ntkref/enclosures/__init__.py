r"""Enclosures: an assumption-free reference of ntkref's kernels by ball arithmetic (python-flint's ``arb``).

Each function returns rigorous enclosures — balls [mid ± rad] that provably contain the exact value of the
kernel at the given float inputs — computed in python-flint's ``arb`` ball arithmetic at a requested precision
from the *exact* values of the inputs (a float is a dyadic rational).  Nothing is assumed about the floating
point of the machine: arb's operations (+ − × ÷ √, atan2, …) return balls containing the exact results, and
the float64 view ``mid``/``rad`` is rounded outward (proof in :mod:`ntkref.enclosures._ball`).  They are what
ntkref's float kernels and their proven error bounds are checked against.

Public objects:

- :class:`Enclosure` — the balls, their float64 view ``mid``/``rad`` and ``contains``.
- :func:`fc`, :func:`fc_pairs`, :func:`fc_diagonal` — the FC NNGP/NTK of :func:`ntkref.kernels.fc`: seed 004
  eqs. (6)–(8) in neural-tangents' convention with the ReLU (arc-cosine, Cho & Saul) and erf closed forms,
  biases and per-layer W_std/b_std, any depth (seed 000 eq. (63) at depth 1).
- :func:`two_layer_relu_ntk` (seed 000 eq. (63)), :func:`wei_k1_k2` and :func:`wei_kernel` (seed 002 §2,
  App. B.1), :func:`arora_ntk` (seed 004 eq. (8), c_σ = 2) — the closed forms of
  :mod:`ntkref.kernels` evaluated in their own (sum-of-products) forms.
- :func:`cntk` — the CNTK of :func:`ntkref.kernels.cntk` (seed 004 eqs. (6)–(8) per pixel pair, Sec. 4's
  dynamic programming; vanilla/flatten and GAP readouts), for small images.
- :func:`empirical_ntk` — the empirical NTK Θ̂(w; x, x′) = ⟨∇_w f(w, x), ∇_w f(w, x′)⟩ (seed 000 Def. 2.1)
  of a :class:`ntkref.nets.FullyConnected` at given float parameters, from the Jacobian evaluated in arb.

**Host step.**  Ball arithmetic runs on the CPU in python-flint: inputs of any namespace are copied to the
host explicitly (``ntkref._lib.backend.to_numpy``) and the results are NumPy (object arrays of ``arb`` and
float64 views), whatever the inputs' device.  **Cost.**  Pure Python: about 100 µs per FC pair plus 15 µs per
layer (7 000–11 000 pairs/s at depths 0–3, prec = 80), about 0.01 s per 4×4 image pair for the CNTK at depth 3
(O(P²q²L) ball operations: small images only) — a checking tool, not a production kernel.  **Requires** python-flint: ``pip install -e ".[rigorous]"`` (an ImportError
naming the extra otherwise, at the first call).
"""
from .._lib.api import set_public_module
from ._ball import Enclosure
from ._cntk import cntk
from ._empirical import empirical_ntk
from ._fc import fc, fc_diagonal, fc_pairs
from ._two_layer import arora_ntk, two_layer_relu_ntk, wei_k1_k2, wei_kernel

__all__ = ["Enclosure", "arora_ntk", "cntk", "empirical_ntk", "fc", "fc_diagonal", "fc_pairs", "two_layer_relu_ntk", "wei_k1_k2",
           "wei_kernel"]

set_public_module(__name__, globals(), __all__)
