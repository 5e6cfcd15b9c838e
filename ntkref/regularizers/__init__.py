r"""The NTK function-norm regulariser and its kernel-ridge-regression equivalence (seed 003, Chapter 2).

Seed equations implemented here (seed 003 = Shi, *Applications of NTK theory in deep learning*):

- (2.1)/(1.12) dual and (2.2) primal RKHS norm: ‖f‖²_H = αᵀKα = f(X)ᵀK⁻¹f(X) for f = Σⱼ αⱼK(xⱼ, ·)
  (:func:`rkhs_norm_sq`, :func:`rkhs_norm_sq_dual`).  For a general f, f(X)ᵀK⁻¹f(X) is the squared norm
  of the minimum-norm interpolant of f on X, hence ≤ ‖f‖²_H.
- (1.13)–(1.17), (2.5): kernel ridge regression with the dissertation's **mean** convention
  (1/N)Σ(f(xᵢ) − yᵢ)² + ζ‖f‖²_H (squared loss without ½), α = (K + ζN I)⁻¹Y (:func:`krr_fit`,
  :func:`krr_predict`, :func:`krr_objective`); ``reduction="sum"`` gives Σ(f − y)² + ζ‖f‖², α = (K + ζI)⁻¹Y.
- (2.4)/(2.14): the regularised training objective; (2.15)–(2.17) and Algorithm 1: the regulariser
  τ f(X_𝓘)ᵀΘ(X_𝓘, X_𝓘)⁻¹f(X_𝓘) of a finite network with Θ held constant (stop-gradient, §2.6.1), its
  parameter gradient 2τ J_𝓘ᵀΘ⁻¹f(X_𝓘) by the net's backward pass (:func:`ntk_regularizer`), and full-batch
  gradient descent on MSE + ζ·regulariser (:func:`train_regularized`).
- Approximation 1: the sub-batch estimator (N/b)·E_𝓘[f_𝓘ᵀK_𝓘𝓘⁻¹f_𝓘] (:func:`sub_batch_rkhs_norm`); it is
  biased (Schur complement: every sub-batch term is ≤ the full norm) except in special cases (diagonal K:
  unbiased over uniform subsets; block-diagonal K with block-aligned sub-batches: additive), all tested.
- (2.31)–(2.33): the regularised gradient flow in closed form (:func:`regularized_flow`).  **Seed error**:
  (2.33) as printed, K(x, X)(K + ζNI)⁻¹(I − e^{−(2η/N)tK})Y, does not solve (2.32) for ζ > 0; the exponent
  must be −(2η/N)t(K + ζNI).  ``printed=True`` evaluates the printed (wrong) form for comparison.
- (2.34)–(2.36): the gap between the flows with the empirical Θ and the analytic 𝒦
  (:func:`flow_gap_bound`); **seed error**: (2.36) integrates with ‖B‖ instead of λ_min(B).
- (1.29): the linearised MSE flow (:func:`linearized_mse_flow`).  **Seed convention**: (1.29) holds for the
  *sum* Σ½(f − y)²; with the 1/N mean of (1.3) the exponent is −ηΘt/N (``reduction`` argument).
- Theorem 2.2.1's exact finite-dimensional analogue: a linear-in-parameters model f = Φθ (random features,
  or :class:`ntkref.nets.Linearized`) trained by gradient descent from θ = 0 on the NTK-regularised
  objective converges to the KRR predictor Θ(x, X)(Θ + ζNI)⁻¹Y at every x (:func:`regularized_gd_linear`).
- Proposition 2.2.3, (2.42)–(2.48): the linearised Gaussian prior N(f(X; μ), σ²JJᵀ) (:func:`linearized_prior`),
  its log-density **with** the log-det term the dissertation drops (:func:`gaussian_logpdf`,
  :func:`fs_map_log_prior`), Kolmogorov-consistent marginals (2.53) (:func:`gaussian_marginal`).
- (2.10)/(2.11): the FS-MAP / continual-learning objectives.  **Seed error**: both are printed with
  +Σ log p(y | f) under a minimisation; the correct objective is −Σ log p + τ·penalty
  (:func:`fs_map_objective`, ``printed=True`` for the printed sign; :func:`continual_learning_penalty`).
- Theorem 1.2.1 (1.19)/(1.20) and Theorem 2.2.2 (2.7): generalisation bounds, with Tr of the **sample**
  Gram matrix K(X, X) (Mohri et al. Thm 10.7, the theorem the dissertation cites); the dissertation's
  operator trace Tr(𝒦) = O(1) makes its bound √N too small (:func:`kernel_generalization_bound`,
  :func:`ntk_regularized_generalization_bound`, :func:`krr_norm_bound`).

Conventions: X has shape (N, d), one sample a row; f(X) and Y have shape (N,) (or (N, k) where stated,
column by column); kernels are (N, N) Gram matrices, symmetrised before use.  All linear algebra goes
through the symmetric eigendecomposition (``_compat.eigh``): a matrix that must be inverted is checked to be
positive definite, λ_min > 10·N·eps·λ_max, and a singular or indefinite one is an
:class:`~ntkref.InvalidParameterError` suggesting an explicit ``jitter`` (added as K + jitter·I, never
silently).  Accuracy: relative errors ≈ cond(K)·eps (float64: eps = 2.2e-16; float32: 1.2e-7).

Finite or error: quadratic forms fᵀK⁻¹f, αᵀKα, sums of squares and ‖Y‖ are computed from f/max|f| and scaled
back (exact), so every result that is representable is returned (e.g. (cf)ᵀ(cK)⁻¹(cf) = c·fᵀK⁻¹f at c = 1e300);
a result outside the dtype's range, or a diverged gradient descent, is a ``FloatingPointError`` naming the
argument to rescale (or ``lr``), never a silent inf/NaN.
"""
from __future__ import annotations

from ._priors import (
    continual_learning_penalty,
    fs_map_log_prior,
    fs_map_objective,
    gaussian_logpdf,
    gaussian_marginal,
    kernel_generalization_bound,
    linearized_prior,
    ntk_regularized_generalization_bound,
)
from ._rkhs import (
    krr_fit,
    krr_norm_bound,
    krr_objective,
    krr_predict,
    rkhs_norm_sq,
    rkhs_norm_sq_dual,
    sub_batch_rkhs_norm,
    sub_batch_term,
    tau_from_zeta,
)
from ._training import (
    Flow,
    RegularizedTrajectory,
    flow_gap_bound,
    linearized_mse_flow,
    ntk_regularizer,
    regularized_flow,
    regularized_gd_linear,
    train_regularized,
)

__all__ = [
    "Flow",
    "RegularizedTrajectory",
    "continual_learning_penalty",
    "flow_gap_bound",
    "fs_map_log_prior",
    "fs_map_objective",
    "gaussian_logpdf",
    "gaussian_marginal",
    "kernel_generalization_bound",
    "krr_fit",
    "krr_norm_bound",
    "krr_objective",
    "krr_predict",
    "linearized_mse_flow",
    "linearized_prior",
    "ntk_regularized_generalization_bound",
    "ntk_regularizer",
    "regularized_flow",
    "regularized_gd_linear",
    "rkhs_norm_sq",
    "rkhs_norm_sq_dual",
    "sub_batch_rkhs_norm",
    "sub_batch_term",
    "tau_from_zeta",
    "train_regularized",
]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
