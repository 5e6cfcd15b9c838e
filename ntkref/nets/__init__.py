"""Finite-width networks with hand-written forward, Jacobian and backward passes.

- :class:`FullyConnected` — L-layer ReLU nets in NTK parameterisation.
- :func:`empirical_ntk` — Θ̂(w; x, x') = ⟨∇_w f(w, x), ∇_w f(w, x')⟩ (seed 000 Def. 2.1).
"""
from ._fc import FullyConnected, empirical_ntk

__all__ = ["FullyConnected", "empirical_ntk"]
