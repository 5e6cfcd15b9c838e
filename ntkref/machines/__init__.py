r"""Exact ℓ2-regularized kernel machines of seed 000 Table 1.

Seed 000 eq. (7) (with the representer theorem, β = Σᵢ αᵢ Φ(xᵢ), g = K α):

.. math::

    L(\beta) = \frac{\lambda}{2}\|\beta\|^2 + \sum_{i=1}^n l(g(x_i), y_i),
    \qquad g(x) = \sum_i \alpha_i K(x, x_i),\quad \|\beta\|^2 = \alpha^\top K \alpha .

There is **no bias term** (the paper's kernel machine g(x) = Σ αᵢ K(x, xᵢ) has
none).  This module returns the exact minimiser α for every loss of
:mod:`ntkref.losses`:

==========================  ==================================================================
loss                        solver (all derived for the *sum* convention above, C = 1/λ)
==========================  ==================================================================
``squared`` (y − z)²        KRR closed form α = (K + (λ/2) I)⁻¹ y (no ½ in the loss, as the
                            official code); λ = 0 is kernel regression α = K⁻¹ y.
``hinge``                   SVM dual: max yᵀα − ½ αᵀKα  s.t. 0 ≤ yᵢαᵢ ≤ 1/λ (no bias ⇒ no
                            equality constraint).  λ → 0: :func:`hard_margin_svm`.
``squared_hinge``           2-norm SVM dual: max yᵀα − ½ αᵀ(K + (λ/2) I)α  s.t. yᵢαᵢ ≥ 0.
``epsilon_insensitive``     SVR dual: max yᵀα − ε‖α‖₁ − ½ αᵀKα  s.t. |αᵢ| ≤ 1/λ.
``logistic``                damped Newton on the primal in β-space (see :func:`solve`).
==========================  ==================================================================

Derivation (Fenchel duality).  With lᵢ* the convex conjugate of z ↦ l(z, yᵢ),
the dual of (7) is

.. math::

    D(\alpha) = -\sum_i l_i^*(-\lambda\alpha_i) - \frac{\lambda}{2}\alpha^\top K\alpha ,

and at the optimum α = −l′(Kα)/λ (stationarity λβ + Σ l′ᵢ Φ(xᵢ) = 0).  The
conjugates are: hinge −t with t = λyα ∈ [0, 1]; squared hinge −t + t²/4, t ≥ 0;
ε-insensitive −λαy + ελ|α| on |λα| ≤ 1; squared −λαy + λ²α²/4; logistic
t log t + (1 − t) log(1 − t), t = λyα ∈ [0, 1].  The three piecewise-linear
losses thus give box-constrained quadratic programmes (times −λ), solved here by
a primal active-set method (exact solves of the face equations Q_FF a_F = r_F,
projected steps that fix many bounds at once, ratio-test steps and null-space
directions when K is singular) on a growing working set (chunking) — array-API
only.  Logistic: damped Newton, then one extra full Newton step.

Devices.  Every array returned is on K's device.  The active-set solvers (hinge,
squared hinge, ε-insensitive, hard margin) run in K's namespace on K's device: the
Gram mat-vecs, the working-set gathers and the face solves stay there, and the host
reads a few stacked scalars per iteration (the decisions).  For a namespace other
than NumPy and n ≤ 4096 they run instead as one explicit host step (K and y copied
to the host once, results copied back), identical to the NumPy solve: there the
synchronisations would cost more than the arithmetic.

Exactness.  Every solve reports the duality gap P(α) − D(α̃) ≥ P(α) − P* (α̃ the
dual point; α itself for the QPs).  P is λ-strongly convex in β, so

.. math::  \|\beta - \beta^*\|_{\mathcal H} \le \sqrt{2\,\mathrm{gap}/\lambda},
           \qquad |g(x) - g^*(x)| \le \sqrt{K(x,x)}\,\sqrt{2\,\mathrm{gap}/\lambda},

which :attr:`KernelMachine.beta_error_bound` gives.  The default stopping rule is
gap ≤ tol·max(1, P(α)) with tol = 1e-10 (float64) / 1e-4 (float32), and the certificate is PROVEN
(:mod:`ntkref.machines._proof`): g = Kα is evaluated with compensated products (Ogita–Rump–Oishi TwoProduct and
TwoSum, no FMA) with a rigorous error bound, the gap is computed as a sum of non-negative Fenchel–Young terms
bounded over g's enclosure, and ``gap_rounding`` (an estimate before this release) is the proven bound of its
rounding; P is bounded below rigorously.  So ``converged=True`` means: in real arithmetic on the given float K,
y, λ and the returned α, P(α) − D(α′) ≤ tol·max(1, P(α)) for the certificate's dual point α′, hence
P(α) − P(α̂) ≤ tol·max(1, P(α)) + (λμ/2)‖α̂ − α′‖² for EVERY α̂, μ = ``psd_margin`` (λ_min(K) > −μ, proven by the
PSD test; the bounds use K + μI ⪰ 0).  With ``psd_margin == 0`` (Rump's test proved K ≻ 0) that is
P(α) − P* ≤ tol·max(1, P(α)).  A rank-deficient float Gram (XXᵀ, duplicated points) is usually slightly
indefinite in exact arithmetic, so P* = −∞ there and only the μ-form can hold; it is a theorem about the given K
whenever ``psd_margin`` is finite.  With ``psd_margin = inf`` (``check_psd=False``, the Lanczos test, the Dask
engine: nothing proven) the certificate ASSUMES K ⪰ 0.  For n > 4096, where ``check_psd=True`` runs the Lanczos
test, :func:`kernel_gram` proves the margin of an FC NNGP/NTK Gram in O(n²) from the kernel's own error bound.  The precise inputs: with ``reduction="mean"`` the
certificate is for λ_sum = fl(λ·n) (the float product), and a float32 K is paired with y rounded to float32
(the problem solved is that of the rounded y).  Assumptions: IEEE-754 round-to-nearest with gradual underflow,
conventional BLAS/LAPACK sums; logistic's exp/log/log1p within 4 ulp.  (Measured: a λ = 1e-12 hinge solve whose plain float64 gap was 2e-15 has exact P(α) − P* =
2.6e-4; its proven gap is that, converged=False.)  Also proven: ``fit_intercept=True`` (f = Kα + b; the dual point
t = clip(λyα) shifted, in real arithmetic, onto Σα′ = 0 within the domain — ``_proof.feasible_dual_point`` —
and each Fenchel–Young term bounded over the corners of its (f, τ) box) and the Dask engine (Kα compensated block
by block, the blocks' unrounded pairs combined by TwoSum; logistic with the dual point −l′(g)/λ and dᵀKd through a
second compensated product).  Not proven: ``krr.solve_cg``'s CG certificate (floating point).  The floor max(1, P) makes the rule absolute where P < 1:
there (e.g. a logistic loss with P* ≪ 1) a converged α can be far from α* relatively, though
|g − g*| ≤ √K(x,x)·beta_error_bound holds; pass a smaller tol.  Active-set
solutions are exact to rounding once the active set is identified.  float32 inputs are solved and
certified in float64 arithmetic and α is returned in float32 (:func:`solve`, Notes); the objective
functions (:func:`objective`, :func:`dual_objective`, :func:`duality_gap`) also evaluate float32
inputs in float64, so they reproduce a solve's certificate.

Sum vs mean (docs/conventions.md, 'Losses and regularisation').  ``reduction="mean"`` minimises (λ/2)‖β‖² + (1/n)Σ l,
which is the sum problem with λ_sum = n·λ_mean.  The paper's experiments
(App. A, footnote 5) and its official code use the mean: Figure 1's
λ = 0.001 mean-hinge on n = 128 is ``reduction="mean", lam=0.001``; Table 3's
SVM "λ = 0.064" is the code's 0.001 × batch 64 in the sum convention (its
minibatch-SGD objective per batch).  Table 3's KRR rows use the **sum**
convention (official ``regression.py``: (Θ + (λ/2) I)⁻¹ y), i.e.
``reduction="sum"``.

Validation (every public function): K square, finite, symmetric to
max|K − Kᵀ| ≤ √eps·max|K| (then symmetrised), and positive semidefinite to
λ_min(K) ≥ −δ, δ = n·eps·‖K‖_F: ``check_psd="cholesky"`` certifies it by a Cholesky
factorization of K + δI (O(n³/3)); ``check_psd="lanczos"`` is a one-sided test (40
Lanczos mat-vecs; a refusal comes with a vector u, uᵀKu < 0, acceptance is a stated
probabilistic bound, see ``ntkref.machines._gram.refuse_indefinite``); the default ``check_psd=True`` ("auto") is the
Cholesky certificate for n ≤ 4096 and the Lanczos test above; ``check_psd=False`` skips
it, and any other value (``None``, ``"yes"``, ``1``) is refused naming ``check_psd``, never read as "no test"
(:func:`checked_gram` runs these checks once for many fits on one K, e.g. a λ sweep); y of shape
(n,), ±1 for classification
losses; λ > 0 (λ = 0 only for the squared loss, with K nonsingular).  A K whose
squared entries overflow is refused by the PSD check.  Finite or error: a solve
(:func:`solve`, :func:`fit`, :func:`hard_margin_svm`) whose objective, duality gap,
KKT residual or coefficients come out non-finite (float overflow, e.g. y ~ 1e300)
raises :class:`~ntkref._lib.validation.InvalidParameterError` naming the inputs whose
scale is beyond √(float max) — never ``converged=True`` with a NaN gap.

Note on scikit-learn.  ``SVC(kernel="precomputed")`` solves a different problem
(it fits an unregularised bias: Σ αᵢ = 0 in its dual) and libsvm caches kernel
entries in single precision, so even at ``tol=1e-12`` its decision values agree
with an exact solution only to ~1e-5 relative (tests/test_machines.py compares
on a point-symmetric data set, where its bias is 0 and the problems coincide).

Cost: ``validation/bench/bench_machines.py`` measures validation, the PSD tests and the
solves against scikit-learn's SVC in one run (JSON output).
"""
from __future__ import annotations

from ._duality import dual_objective, duality_gap, objective
from ._gram import CheckedGram, checked_gram
from ._kernel_gram import kernel_gram
from ._result import ConvergenceWarning, KernelMachine, predict, rkhs_norm
from ._solve import fit, hard_margin_svm, solve

__all__ = [
    "KernelMachine",
    "CheckedGram",
    "checked_gram",
    "kernel_gram",
    "ConvergenceWarning",
    "fit",
    "solve",
    "hard_margin_svm",
    "predict",
    "rkhs_norm",
    "objective",
    "dual_objective",
    "duality_gap",
]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
