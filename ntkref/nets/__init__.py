"""Finite-width networks with hand-written forward, Jacobian and backward passes.

- :class:`FullyConnected` — L-layer ReLU nets in NTK parameterisation.
- :func:`empirical_ntk` — Θ̂(w; x, x') = ⟨∇_w f(w, x), ∇_w f(w, x')⟩ (seed 000 Def. 2.1).
- :class:`ConvNet` — ReLU CNNs (SAME convolutions, GAP or flatten readout), hand-written backward.
- :class:`Antisymmetric` (f₀ ≡ 0), :class:`Linearized` (constant Θ̂ = Θ̂(w₀)) and :class:`Scaled`
  (f_nn = κf, seed 004) wrappers.
- :func:`train` — (sub)gradient descent / SGD on seed 000's (6)/(7) with a record for the bounds.
"""
from ._cnn import ConvNet
from ._fc import FullyConnected, empirical_ntk
from ._train import NetTrajectory, train
from ._wrappers import Antisymmetric, Linearized, Scaled, flatten_params, unflatten_params

__all__ = [
    "Antisymmetric",
    "ConvNet",
    "FullyConnected",
    "Linearized",
    "NetTrajectory",
    "Scaled",
    "empirical_ntk",
    "flatten_params",
    "train",
    "unflatten_params",
]
