r"""Training dynamics of ℓ2-regularised kernel machines, continuous and discrete.

A kernel machine g(x) = ⟨β, Φ(x)⟩ with K(x, x′) = ⟨Φ(x), Φ(x′)⟩ trained on
L(β) = (λ/2)‖β‖² + c·Σᵢ l(g(xᵢ), yᵢ) (seed 000 eq. (7); c = 1 for
``reduction="sum"``, c = 1/n for ``"mean"`` as in App. A eq. (11)).  Starting
from β₀ with outputs g₀, every iterate has the form

    g_t(x) = w(t)·g₀(x) + Σᵢ α_{t,i} K(x, xᵢ),                             (15)

with w(t) = e^{−λt} (flow) or (1 − ηλ)^t (descent): the trajectories below
carry α, the weight w and the outputs on the training points (rows of K) and
on test points (rows of ``K_test``, shape (m, n)).

Seed 000 equations implemented here
-----------------------------------
- (3), (8), (26)–(27), (51): gradient flow dg/dt(x) = −λ g(x) − c Σᵢ l′(g(xᵢ), yᵢ) K(x, xᵢ),
  i.e. dα/dt = −λ α − c l′(g(X)) — :func:`gradient_flow`;
- (4), (28): its variation-of-constants solution
  g_T = e^{−λT}(g₀ + ∫₀ᵀ Q(t) e^{λt} dt) — :func:`continuous_closed_form`;
- (5), (12), (16), (36)–(37), (53): subgradient descent
  α_{t+1} = (1 − ηλ) α_t − η c l′(g_t(X)), and the minibatch variant of App. A.1
  (decay of all α, as Pegasos, or of the batch's α only, as the official code) —
  :func:`subgradient_descent`;
- (38), (14) (and (13), corrected): g_T = (1 − ηλ)^T g₀ + Σ_{t<T} (1 − ηλ)^{T−1−t} Q(t)
  — :func:`discrete_closed_form`;
- the limits printed in Thm 3.1/3.2, (4), (35), (40):
  C Σᵢ 𝟙(yᵢ g_T(xᵢ) < 1) yᵢ K(x, xᵢ) — :func:`svm_limit_printed` (see the errata below);
- seed 004 eq. (3): λ = 0 kernel regression u(t) = y + e^{−ηHt}(u₀ − y).

Conventions
-----------
- λ here is the λ of eq. (7); the C-form of Thm 3.1/3.2 (½‖β‖² + C Σ hinge) is λ = 1/C
  with time t_C = λ·t (dg/dt_C = −g + C Σ 𝟙(yg<1) y K).  Its rate e^{−2 t_C} is e^{−2λt} here.
- The squared loss is (y − z)² with l′ = 2(z − y) (no ½, Table 1): for λ = 0 the flow is
  u(t) = y + e^{−2cKt}(u₀ − y), seed 004's e^{−ηHt} with ηH = 2cK (seed 004 uses ½(u − y)²).
- The hinge subgradient in the *discrete* recursion is the strict 𝟙(yz < 1) of the paper and of
  :mod:`ntkref.losses`.  The *continuous* flow with a discontinuous l′ is the Filippov solution,
  which is the gradient flow of the convex function L along its minimal-norm subgradient
  (Brezis): a point whose margin the flow pushes back and forth slides along yᵢgᵢ = 1 with an
  effective l′ᵢ ∈ [−c, 0]·yᵢ.  This is the η → 0 limit of the discrete recursion.

Errata in seed 000 (tested in tests/test_dynamics.py)
-----------------------------------------------------
- Thm 3.1/3.2 limits (4), (35), (40): "lim g_T = C Σ 𝟙(yᵢ g_T(xᵢ) < 1) yᵢ K(x, xᵢ)" holds only if no
  training point sits on the margin at the optimum.  Margin support vectors carry fractional
  weights 0 < αᵢyᵢ < C, and the limit is the SVM dual solution (docs/errata.md).
- Eq. (13) multiplies Σ_t (1 − η̂λ)^{−t−1} Q(t) by η̂/n although Q(t) already contains η̂/n: the
  factor is counted twice.  (14) and (38) are right.
- Thm 3.1's rate L(β_t) − L(β*) ≤ e^{−2t}(L(β₀) − L(β*)) is for the C-form (λ = 1 in eq. (7)).
  With eq. (7)'s λ the PL constant is λ (λ-strong convexity) and the rate is e^{−2λt};
  e^{−2t} fails for λ < 1.
"""
from ._discrete import discrete_closed_form, subgradient_descent, svm_limit_printed
from ._flow import continuous_closed_form, gradient_flow
from ._trajectory import Trajectory

__all__ = [
    "Trajectory",
    "gradient_flow",
    "subgradient_descent",
    "discrete_closed_form",
    "continuous_closed_form",
    "svm_limit_printed",
]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
