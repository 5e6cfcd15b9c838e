r"""KKT conditions of the kernel machines of seed 000, with and without an intercept: residuals and duality
gaps of any candidate solution, and an exact SVM with an unregularised intercept — an oracle for other solvers.

Model and objective.  f(x) = Σⱼ αⱼ K(x, xⱼ) + b.  Without an intercept (b ≡ 0) this is seed 000's kernel machine
g = Kα of eq. (7) and :mod:`ntkref.machines`; with one, b is a free, *unregularised* parameter, the bias of the
standard soft-margin SVM (seed 000 §2.4 takes the homogeneous model; its footnote 1 folds a bias into Φ, which
regularises it: that is the no-intercept machine with kernel K + 1, not this problem):

.. math::

    P(\alpha, b) = \frac{\lambda}{2}\alpha^\top K\alpha + \sum_{i=1}^n l\big((K\alpha)_i + b,\ y_i\big)
    \qquad\text{(eq. (7) with } g(x_i) \to g(x_i) + b\text{)}.

``reduction="mean"`` divides the loss sum by n; this is the sum problem with λ_sum = n·λ_mean, and every value
returned (objectives, gaps) is then the sum-convention value divided by n — α and b are the same in both.
The losses and their conventions (squared loss without ½, hinge kink) are those of :mod:`ntkref.losses`.

Dual (Fenchel, as in :mod:`ntkref.machines`): with lᵢ* the conjugate of z ↦ l(z, yᵢ),

.. math::

    D(\alpha) = -\sum_i l_i^*(-\lambda\alpha_i) - \frac{\lambda}{2}\alpha^\top K\alpha ,
    \qquad \text{and, with an intercept,}\quad \sum_i \alpha_i = 0 .

The equality is the stationarity of the Lagrangian in b, and b is its multiplier.  Weak duality
D(α′) ≤ P(α, b) holds for every α and every dual-feasible α′; equality at the optimum.  For the hinge loss the
dual is the soft-margin SVM of Def. 2.2: max λ(yᵀα − ½αᵀKα) over 0 ≤ yᵢαᵢ ≤ C = 1/λ (and Σαᵢ = 0).

scikit-learn / libsvm.  ``SVC(kernel="precomputed", C=C)`` minimises ½‖w‖² + C Σ ξᵢ, i.e. (divide by C) this
P with the hinge loss, λ = 1/C and the **sum** convention (for the mean convention λ_mean = 1/(nC)).  Its
``dual_coef_[0, k]`` is αᵢ = yᵢaᵢ (libsvm's a ∈ [0, C]) for i = ``support_[k]``, zero elsewhere; its
``intercept_[0]`` is b; y = +1 for ``classes_[1]`` and −1 for ``classes_[0]`` (``decision_function`` =
Σ αᵢ K(x, xᵢ) + b > 0 predicts ``classes_[1]``).  libsvm's Σ yᵢaᵢ = 0 is ntkref's Σ αᵢ = 0.
:func:`from_sklearn_svc` does this conversion.  libsvm stops when m(a) − M(a) ≤ ``tol``, where m and M are the
extreme values of vᵢ = yᵢ − (Kα)ᵢ over the coordinates that may move up / down — the width by which the interval
of valid intercepts (below) is violated, in units of f.

libsvm's float32 limit.  libsvm caches Qᵢⱼ = yᵢyⱼKᵢⱼ in single precision (``typedef float Qfloat`` in svm.cpp),
so however small its ``tol``, SVC converges to the exact solution for fl32(K), not K.  Measured on the embedded
MNIST 0/1 digits (n = 1700, seed 000's NTK eq. (63), C = 1/λ): ``SVC(tol=1e-12)`` equals
``fit_with_intercept(fl32(K), ...)`` to 6e-13 in the decision values, and that point is 1.7e-7 (λ = 0.064) /
2.9e-8 (λ = 1.7) from the exact solution for K; measured against K its KKT residual is 6.0e-7 / 1.0e-7 and its
relative duality gap 7.3e-8 / 7.2e-10 — the float32 limit (the exact solve: residual ≤ 2e-14, relative gap
≤ 1e-15).  At the default ``tol=1e-3`` SVC's residual is 1.6e-3 / 2.1e-3 and its relative gap 4.4e-4 / 1.3e-5
(≥ 2 600× and 18 000× the limit: flagged as inexact); at ``tol=1e-8`` it is within 1.1× of the limit
(tests/test_kkt.py checks these ratios).  To check SVC below that limit, give it a Gram matrix whose entries are
exact in float32 (e.g. integer features): it then agrees with :func:`fit_with_intercept` to ~1e-12.

float32 inputs.  :func:`kkt_residual` and :func:`duality_gap` evaluate them in float64 (exact copies), so the
values are those of the float32 numbers given, not of float32 arithmetic (whose rounding of Kα at |α| ~ 1/λ
made gaps negative); :func:`fit_with_intercept` solves in float64 and certifies the float32 α it returns.

KKT residual (:func:`kkt_residual`), in units of α.  For the QP losses (hinge, squared hinge, ε-insensitive) the
natural residual of the dual, as :mod:`ntkref.machines`:

.. math::

    r = \max\Big(\big\|\alpha - \Pi\big(\alpha - \tau(\nabla q(\alpha) + b\,\mathbf 1)\big)\big\|_\infty,\
    \Big|\sum_i \alpha_i\Big|\Big),\qquad \tau = 1/\max_i Q_{ii},

with q(α) = ½αᵀQα − yᵀα (+ ε‖α‖₁), Q = K (+ (λ/2)I for the squared hinge), Π the projection on the box
(with soft-thresholding by τε for ε-insensitive).  For the smooth losses (squared, logistic):
r = max(‖α + l′(Kα + b)/λ‖∞, |Σαᵢ|).  Without an intercept (``intercept=None``) both are
:mod:`ntkref.machines`' residual (no Σαᵢ term, b = 0).  r = 0 exactly when α is the solution and b a valid
intercept for it, r > 0 otherwise; for the hinge loss the first term is at most τ times the largest violation
of the KKT conditions in units of f.

Duality gap (:func:`duality_gap`).  Without an intercept: :func:`ntkref.machines.duality_gap`.  With one:
P(α, b) − max(D(α̃₁), D(α̃₂)), where α̃₁ and α̃₂ are the Euclidean projections of α and of −l′(Kα + b)/λ onto
the dual's feasible set {dom l* ∩ Σαᵢ = 0} (computed exactly, by the breakpoints of the piecewise-linear map
τ ↦ Σ clip(α − τ, lo, hi)).  Both are dual-feasible, so the gap is ≥ P(α, b) − P* ≥ 0 for every candidate, and
0 (to rounding) only at a solution.  Up to rounding: |Σ α̃| ≲ n·eps·max|α̃| after the projection, which can lower
the certificate by at most λ·|Σα̃|·|b*|.  P is λ-strongly convex in β, so
‖β − β*‖ ≤ √(2·gap_sum/λ_sum) (``beta_error_bound``); b is not controlled by the gap (it need not be unique).

Exact SVM with an intercept (:func:`fit_with_intercept`).  A primal active-set method for the dual QP
min ½zᵀQz + cᵀz over lo ≤ z ≤ hi, eᵀz = 0 (e ∈ {±1}ⁿ): on each face (fixed coordinates at a bound, the others
free) the equality-constrained minimiser is computed exactly, in the orthogonal complement of e_F (a Householder
reflector; Cholesky of the reduced Hessian, or an eigendecomposition with null-space descent directions when it
is singular), followed by a ratio test; at a face minimiser the multiplier ν of eᵀz = 0 is read from the free
coordinates, and the fixed ones whose bound multiplier has the wrong sign are released.  It stops on the correct
face — with no violation above rounding — not at a tolerance.  b = ν: the mean of vᵢ over the free coordinates;
with no free coordinate every b in the interval [max over "can move up" vᵢ, min over "can move down" vᵢ] is
optimal, and the midpoint is returned (libsvm's choice), or its finite end if the other is infinite; the interval
is ``intercept_interval_``.  The squared loss has the closed form [[K + (λ/2)I, 1], [1ᵀ, 0]]·[α; b] = [y; 0];
logistic regression with an intercept is solved by damped Newton in (β, b).

Devices.  Validation, objectives, gaps and residuals run in K's namespace on K's device.  Two explicit host steps
(as :mod:`ntkref.machines`' active-set solvers): the active-set QP (K and y copied to the host once, solved in
float64 with NumPy, α copied back to K's device in K's dtype) and the exact projection of an O(n) vector onto the
dual's feasible set.  b and all diagnostics are Python floats.
"""
from __future__ import annotations

import numpy as np

from ._lib.api import set_public_module
from ._lib.backend import device_of, namespace
from ._lib.validation import InvalidParameterError, check_int
from .machines._intercept import InterceptMachine, duality_gap, fit_with_intercept, kkt_residual

__all__ = ["InterceptMachine", "kkt_residual", "duality_gap", "fit_with_intercept", "from_sklearn_svc"]


def from_sklearn_svc(svc, n, *, like=None):
    r"""(α, b) of a fitted binary ``sklearn.svm.SVC`` on n training points, for :func:`kkt_residual` and
    :func:`duality_gap` with ``loss="hinge"``, ``lam=1/svc.C``, ``reduction="sum"`` and ``intercept=b``.

    α has shape (n,): ``dual_coef_[0]`` at ``support_``, zero elsewhere; b = ``intercept_[0]``.  The labels
    to pass are y = +1 for ``svc.classes_[1]``, −1 for ``classes_[0]``.  K must be the Gram matrix SVC was fitted
    on (``kernel="precomputed"``: the matrix given to ``fit``).  ``like``: an array whose namespace and device α
    is placed on (default: a NumPy array).  Class weights (a per-class C) are a different problem and refused.
    """
    caller = "kkt.from_sklearn_svc"
    n = check_int(n, "n", caller=caller, low=1)
    for attr in ("dual_coef_", "support_", "intercept_"):
        if not hasattr(svc, attr):
            raise InvalidParameterError(f"The 'svc' parameter of {caller} must be a fitted sklearn.svm.SVC (no {attr}).")
    coef = np.asarray(svc.dual_coef_, dtype=np.float64)
    support = np.asarray(svc.support_)
    if coef.ndim != 2 or coef.shape[0] != 1:
        raise InvalidParameterError(
            f"The 'svc' parameter of {caller} must be a binary classifier; got dual_coef_ of shape {coef.shape}."
        )
    if support.size and int(support.max()) >= n:
        raise InvalidParameterError(
            f"The 'n' parameter of {caller} must exceed every index in svc.support_ (max {int(support.max())}); got {n}."
        )
    weights = np.asarray(getattr(svc, "class_weight_", np.ones(2)), dtype=np.float64)
    if not np.all(weights == 1.0):
        raise InvalidParameterError(
            f"The 'svc' parameter of {caller} was fitted with class weights {weights.tolist()} (a per-class C); "
            "ntkref's machines have one λ = 1/C."
        )
    alpha = np.zeros(n)
    alpha[support] = coef[0]
    b = float(np.asarray(svc.intercept_, dtype=np.float64).reshape(-1)[0])
    if like is not None:
        xp = namespace(like)
        alpha = xp.asarray(alpha, dtype=like.dtype, device=device_of(like))
    return alpha, b


set_public_module(__name__, globals(), __all__)
