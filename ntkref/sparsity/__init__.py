r"""Dynamics-preserving sparse masks: adversarial winning tickets (seed 003, Ch. 3).

A *mask* for a model's parameters is a list of 0/1 arrays, one per layer, each the shape of that layer's
weight ``W`` (biases are never pruned).  The sparse network is f^s = f_{m⊙w} (seed 003 §3.2.2): its
parameters are the kept weights, so its Jacobian is J_M(x) = ∇_w f(m⊙w; x) = m ⊙ ∇f(m⊙w; x) (pruned
columns are zero) and its tangent kernel is Θ^s(x, x′) = J_M(x) J_M(x′)ᵀ.

Conventions
-----------
- Models: :class:`ntkref.nets.FullyConnected` (ReLU, NTK parameterisation, scalar output) and
  :class:`LinearModel` f_θ(x) = θ·x (the toy classifier of §3.2.3).  Both expose ``features(params, x)``
  (activations h_ℓ and backprop signals δ_ℓ = ∂f/∂z_ℓ), from which the layer-ℓ weight gradient is
  c_ℓ h_ℓᵀ δ_ℓ with c_ℓ = W_std,ℓ/√fan_in_ℓ.
- X is (N, d), one sample a row; f(X) is (N,).
- The squared loss of Ch. 3 is ℓ(f, y) = ½(f − y)² (3.9): the attacks inside the AWT objective ascend it,
  ∇ₓℓ = (f(x) − y) ∇ₓf(x).
- Attacks are deterministic unless the caller's ``attack`` callable is not: PGD starts at x.

Accuracy: every quantity is exact arithmetic up to rounding (float64: kernels to ~1e-15 relative, the AWT
objective's terms to ~1e-14 relative; float32 inputs give float32 results, ~1e-6 relative).  Gradients are
exact (hand-written backward and Hessian-vector passes) wherever no ReLU pre-activation is exactly 0.

Finite or error: parameters, masks and inputs are checked up front, each error naming the argument
(``params``/``params0``/``student``, ``mask``, ``x``/``x_adv``/``x_adv_sparse``/``x1``/``x2``).  A result that
is beyond the dtype's range for valid finite inputs (an attack gradient, a kernel, an AWT term or gradient) is a
``FloatingPointError`` naming the inputs it grows with, never inf or NaN; training that diverges names ``lr``.
Where the mathematics is scale-free the computation is rescaled instead (norms; :func:`adversarial_linear_direction`
solves on X scaled by a power of two, exactly covariant from |x| ~ 1e-300 to 1e300).

Seed 003 equations implemented here
-----------------------------------
- §3.2.2, (3.11): the sparse network f_{m⊙θ}, its Jacobian and (mixed) tangent kernel —
  :func:`apply_mask`, :func:`masked_apply`, :func:`masked_vjp`, :func:`masked_jacobian`,
  :func:`masked_empirical_ntk`;
- (3.13) = (3.20): the AWT objective (target distance + kernel distance)

  .. math::  \mathcal L_{awt}(m; w) = \frac1N\big\|f_{θ_0}(\tilde X_0) - f_{m⊙w}(\tilde X^s)\big\|^2
             + \frac{γ^2}{N^2}\big\|Θ_0(X, \tilde X_0) - Θ^s(X, \tilde X^s)\big\|_F^2,

  with X̃₀ the attack on the dense net at θ₀ and X̃ˢ the same attack on the sparse net; (3.13) evaluates it
  at w = θ₀, Algorithm 2 at the student w.  ε = 0 (X̃ = X) is Neural Tangent Transfer (Liu & Zenke) —
  :func:`awt_objective`, :func:`awt_distances`, :func:`awt_gradient`;
- the closed form of (3.13) for linear models with the exact ℓ2 attack — :func:`linear_awt_objective`;
- (3.45): the AWT objective for a general loss (unsquared norms, loss gradients) — :func:`awt_objective_general`;
- Thm 3.2.2 / 3.5.2, (3.14) = (3.21): the dense-vs-sparse output-gap bound 4(α + 4C_qε)², and the step size
  (3.37) — :func:`awt_gap_bound`, :func:`awt_step_size`;
- Algorithm 2 (finding adversarial winning tickets) — :func:`awt_search`;
- phase two (adversarial training of f_{m⊙θ₀} from θ₀, (3.1)/(3.3) with the mask) —
  :func:`masked_adversarial_training`;
- §3.2.3, (3.15), Table 3.1: the Gaussian-mixture toy example — :func:`gaussian_mixture`,
  :func:`linear_gmm_accuracy`, :func:`linear_gmm_adversarial_accuracy`, :func:`direction_angle`,
  :func:`svm_direction`, :func:`adversarial_linear_direction`.

Errata and ambiguities settled here (tests in tests/test_sparsity.py)
----------------------------------------------------------------------
- Table 3.1 does not state ε.  ε = 2 in ℓ2 with the p_m term of (3.15) reproduces the Bayes (0.843), SVM
  (0.714) and AWT (0.838) "Robustness" entries from their cosines; the same formula gives 0.828 for Adv.Tr.
  (printed 0.823), and the "Accuracy" entries 0.995 of Adv.Tr. and AWT are not Φ(3 cos γ) (0.9984, 0.9986;
  Bayes 0.9987 → 0.999 and SVM 0.9946 → 0.995 do match): those entries are not the analytic values.
- In (3.15), p_adv is the probability that an adversarial example *exists* for a correctly classified
  point, so p_adv-acc = 1 − p_adv = p_m + Φ(‖μ‖cos γ/σ − ε/σ) counts misclassified points as robust
  (p_m = Φ(−‖μ‖cos γ/σ) is the misclassification rate).  The usual robust accuracy (correct *and* no
  adversarial example) is Φ(‖μ‖cos γ/σ − ε/σ) alone: ``include_pm=False``.
- "p_adv-acc attains its maximum at θ = μ" (after (3.15)) is false for the quantity as defined: θ = −μ
  misclassifies nearly every point and scores p_m + Φ(·) = Φ(3) + Φ(−5) ≈ 0.9987 > 0.8427 (‖μ‖ = 3, σ = 1,
  ε = 2).  It holds for the robust accuracy Φ(·) (no p_m), and for p_m + Φ(·) only where ‖μ‖cos γ ≥ ε/2.
- (3.13) leaves open what the sparse kernel differentiates: here Θ^s is the tangent kernel of the sparse
  net's own (kept) parameters, J_M J_Mᵀ.  Biases are not masked.
- Algorithm 2: "update m according to magnitudes of current w" is a top-k of |w| (``scope="global"`` over
  all weights, or per layer); the attacked points X̃ˢ are recomputed at every step and treated as constants
  in ∇_w (no gradient through the attack); w gets the gradient of f_{m⊙w}, i.e. pruned entries get none
  and only the weight decay β m⊙w of line 5 (which acts on kept entries).  The algorithm returns the last
  mask; :func:`awt_search` by default returns the visited mask with the lowest (3.13) value at θ₀
  (``select="best"``), the quantity the mask is meant to minimise, and ``select="last"`` gives Algorithm 2's.
- Algorithm 2 moves the mask only through |w|.  For a linear model (the toy of §3.2.3) the Jacobian does not
  depend on w, so ∇_w of the kernel distance is 0 and the kernel distance never steers the mask: on the toy
  it misses the signal coordinate.  :func:`awt_search`'s default ``method="relaxed"`` optimises a continuous
  relaxation of the mask itself (exact gradient, budget constraint, rounding to the top-k) and finds it.
"""
from ._awt import (
    AWTSearchResult,
    AWTValue,
    awt_distances,
    awt_gap_bound,
    awt_gradient,
    awt_objective,
    awt_objective_general,
    awt_search,
    awt_step_size,
    linear_awt_objective,
    masked_adversarial_training,
)
from ._linear import (
    LinearModel,
    adversarial_linear_direction,
    direction_angle,
    gaussian_mixture,
    linear_gmm_accuracy,
    linear_gmm_adversarial_accuracy,
    normal_cdf,
    svm_direction,
)
from ._masks import (
    apply_mask,
    full_mask,
    magnitude_mask,
    mask_density,
    masked_apply,
    masked_empirical_ntk,
    masked_jacobian,
    masked_vjp,
    random_mask,
)

__all__ = [
    "AWTSearchResult",
    "AWTValue",
    "LinearModel",
    "adversarial_linear_direction",
    "apply_mask",
    "awt_distances",
    "awt_gap_bound",
    "awt_gradient",
    "awt_objective",
    "awt_objective_general",
    "awt_search",
    "awt_step_size",
    "direction_angle",
    "full_mask",
    "gaussian_mixture",
    "linear_awt_objective",
    "linear_gmm_accuracy",
    "linear_gmm_adversarial_accuracy",
    "magnitude_mask",
    "mask_density",
    "masked_adversarial_training",
    "masked_apply",
    "masked_empirical_ntk",
    "masked_jacobian",
    "masked_vjp",
    "normal_cdf",
    "random_mask",
    "svm_direction",
]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
