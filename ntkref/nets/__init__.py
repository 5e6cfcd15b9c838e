"""Finite-width networks with hand-written forward, Jacobian and backward passes.

- :class:`FullyConnected` — L-layer ReLU nets in NTK parameterisation.
- :func:`empirical_ntk` — Θ̂(w; x, x') = ⟨∇_w f(w, x), ∇_w f(w, x')⟩ (seed 000 Def. 2.1).
- :class:`ConvNet` — ReLU CNNs (SAME convolutions, GAP or flatten readout), hand-written backward.
- :class:`Antisymmetric` (f₀ ≡ 0), :class:`Linearized` (constant Θ̂ = Θ̂(w₀)) and :class:`Scaled`
  (f_nn = κf, seed 004) wrappers.
- :func:`train` — (sub)gradient descent / SGD on seed 000's (6)/(7) with a record for the bounds.
- :class:`HomogeneousNet` — seed 002's bias-free ReLU nets (no 1/√m), q-positive-homogeneous in the parameters;
  the Prop. B.10 (:func:`balanced_two_layer`, :func:`two_layer_measure`), Thm 4.3 (:func:`zero_pad`) and
  Prop. D.1 (:func:`rebalance`) constructions and the width-4 max-margin net on 𝒟 (:func:`width4_net`).
"""
from .._lib.api import set_public_module
from ._cnn import ConvNet
from ._fc import FullyConnected, empirical_ntk
from ._homogeneous import HomogeneousNet, balanced_two_layer, rebalance, two_layer_measure, width4_net, zero_pad
from ._train import NetTrajectory, train
from ._wrappers import Antisymmetric, Linearized, Scaled, flatten_params, unflatten_params

__all__ = [
    "Antisymmetric",
    "ConvNet",
    "FullyConnected",
    "HomogeneousNet",
    "Linearized",
    "NetTrajectory",
    "Scaled",
    "balanced_two_layer",
    "empirical_ntk",
    "flatten_params",
    "rebalance",
    "train",
    "two_layer_measure",
    "unflatten_params",
    "width4_net",
    "zero_pad",
]

set_public_module(__name__, globals(), __all__)
