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

Verdict and convention slips (:func:`diagnose`).  The duality gap is a certificate: gap ≤ tol·max(1, |P|) proves
P(α, b) − P* ≤ tol·max(1, |P|) (weak duality; in real arithmetic on the given floats, up to the rounding of the gap's
own evaluation).  A candidate that fails it is recomputed under the usual slips — λ′ = 2λ (an SVM's C = 1/(2λ), or
the squared loss with ½), λ/2 (C = 2/λ), 1/λ (C = λ: λ and C swapped), nλ and λ/n (sum vs mean), the intercept
missing or added — by its own duality gap *under that problem*, and a slip is named only when that gap meets the
same tolerance: the candidate provably solves the slipped problem.  The same on K rounded to float32 (libsvm's
kernel cache): the correct problem there is kind ``"precision"``, a slip there is still ``"convention"``.
Otherwise the kind is ``"formula"`` (an inexact solve — a loose stopping tolerance — or a wrong formula), or
``"precision"`` when the gap is within 10·n·eps of K's dtype (the tolerance asked for is below what that precision
certifies).  No hint is better than a wrong one: nothing is named that the certificate does not confirm.

Devices.  Validation, objectives, gaps and residuals run in K's namespace on K's device.  Two explicit host steps
(as :mod:`ntkref.machines`' active-set solvers): the active-set QP (K and y copied to the host once, solved in
float64 with NumPy, α copied back to K's device in K's dtype) and the exact projection of an O(n) vector onto the
dual's feasible set.  b and all diagnostics are Python floats.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from . import losses, machines
from ._lib.api import set_public_module
from ._lib.backend import device_of, namespace
from ._lib.validation import InvalidParameterError, check_int, check_option, check_real
from .machines._intercept import InterceptMachine, duality_gap, fit_with_intercept, kkt_residual

__all__ = ["InterceptMachine", "kkt_residual", "duality_gap", "fit_with_intercept", "from_sklearn_svc",
           "KKTDiagnosis", "diagnose"]


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


# --------------------------------------------------------------------------- verdict and convention slips

_C_LOSSES = ("hinge", "squared_hinge", "epsilon_insensitive", "logistic")  # scikit-learn's C = 1/λ (sum)


def _convention_slips(lam, n, loss_name, reduction, fit_intercept):
    """The usual slips as (labels, message, λ′, fit_intercept′) in the asked ``reduction``, merged where two λ′
    coincide (n = 2: nλ = 2λ); λ′ = λ only for the intercept toggled."""
    c_loss = loss_name in _C_LOSSES
    mean = reduction == "mean"
    trials = [
        ("C = 1/(2*lam)" if c_loss else "lam' = 2*lam", 2 * lam,
         "C = 1/(2λ) where C = 1/λ belongs (scikit-learn's SVC/LogisticRegression: C = ntkref.adapters.svc_C(λ); "
         "docs/conventions.md, 'SVM')"
         if c_loss else "λ′ = 2λ: the squared loss with ½, or KernelRidge(alpha=λ) where alpha = λ/2 belongs "
                        "(docs/conventions.md)"),
        ("C = 2/lam" if c_loss else "lam' = lam/2", lam / 2,
         "C = 2/λ where C = 1/λ belongs" if c_loss else "λ′ = λ/2: λ vs λ/2 the other way round"),
        ("C = lam" if c_loss else "lam' = 1/lam", 1 / lam,
         "C = λ where C = 1/λ belongs (λ and C swapped)" if c_loss else "λ′ = 1/λ: a C-style parameter passed as λ"),
        ("mean vs sum: lam' = n*lam" if not mean else "lam' = n*lam", n * lam,
         ("the loss averaged where the sum was asked (λ′ = nλ; SVC with C = 1/(nλ))" if not mean else
          "λ′ = nλ (the sum and the mean confused the other way round)")),
        ("sum vs mean: lam' = lam/n" if mean else "lam' = lam/n", lam / n,
         ("the loss summed where the mean was asked (λ′ = λ/n; SVC with C = 1/λ where C = 1/(nλ) belongs)" if mean
          else "λ′ = λ/n (C = n/λ: the sum and the mean confused the other way round)")),
    ]
    out = []
    for label, lam2, message in trials:
        if not (math.isfinite(lam2) and lam2 > 0) or lam2 == lam:
            continue
        for item in out:
            if item[2] == lam2:
                item[0].append(label)
                item[1].append(message)
                break
        else:
            out.append(([label], [message], lam2, fit_intercept))
    if fit_intercept:
        out.append((["no intercept"], ["the intercept is missing: α is the machine without intercept f = Kα "
                                       "(fit the unregularised b, e.g. SVC's intercept_)"], lam, False))
    else:
        out.append((["intercept"], ["the candidate fits an unregularised intercept f = Kα + b (scikit-learn's SVC "
                                    "does): check it as the machine with an intercept (check_fit(fit_intercept=True), "
                                    "compare --fit-intercept)"], lam, True))
    return [(" / ".join(labels), "; or ".join(msgs), lam2, fi) for labels, msgs, lam2, fi in out]


def _objective(alpha, K, y, loss, lam, intercept, reduction):
    """P(α) of seed 000 eq. (7), or P(α, b) with the intercept b (the ``reduction`` convention), in float64."""
    if intercept is None:
        return float(machines.objective(alpha, K, y, loss, lam, reduction=reduction))
    xp = namespace(K)
    K, y, alpha = (xp.astype(a, xp.float64) for a in (K, y, alpha))
    n = K.shape[0]
    g = K @ alpha
    lam_sum = lam * n if reduction == "mean" else lam
    val = 0.5 * lam_sum * float(xp.sum(alpha * g)) + float(xp.sum(loss.value(g + intercept, y)))
    return val / (n if reduction == "mean" else 1)


def _relative_gap(alpha, K, y, loss, lam, intercept, reduction):
    """(gap, P, gap / max(1, |P|)) of the candidate for one problem; inf where it cannot be evaluated."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gap = float(duality_gap(alpha, K, y, loss, lam, intercept=intercept, reduction=reduction))
            P = _objective(alpha, K, y, loss, lam, intercept, reduction)
    except (InvalidParameterError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return math.inf, math.nan, math.inf
    rel = gap / max(1.0, abs(P)) if math.isfinite(gap) and math.isfinite(P) else math.inf
    return gap, P, max(rel, 0.0) if not math.isnan(rel) else math.inf


def _best_intercept(K, y, loss, lam, reduction):
    """ntkref's b for the machine with an intercept (to test a bias-free candidate α as that machine's)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_with_intercept(K, y, loss, lam, reduction=reduction, check_psd=False).intercept_
    except (InvalidParameterError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return None


@dataclass(frozen=True)
class KKTDiagnosis:
    """The verdict of :func:`diagnose` on a candidate (α, b).

    Attributes
    ----------
    optimal : bool
        relative_gap ≤ tol: P(α, b) − P* ≤ tol·max(1, |P|) is then proven (weak duality).
    kind : {"ok", "convention", "precision", "formula"}
        Why not (module docstring, 'Verdict and convention slips').
    hint : str
        The slip that the candidate provably solves, or ``""`` (no hint rather than a wrong one).
    slips : tuple of str
        Labels of the slips matched (e.g. ``("C = 1/(2*lam)",)``; ``"float32 K"`` for the exact problem on K rounded
        to float32).
    relative_gap, duality_gap, objective, kkt_residual, tol : float
        The certificate of the problem asked (the ``reduction`` convention) and the threshold applied.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kkt
    >>> d = kkt.diagnose(np.zeros(2), np.eye(2), np.array([1.0, -1.0]), "squared", 1.0)   # α = 0: no solution
    >>> d.optimal, d.kind, d.hint
    (False, 'formula', '')
    """

    optimal: bool
    kind: str
    hint: str
    slips: tuple
    relative_gap: float
    duality_gap: float
    objective: float
    kkt_residual: float
    tol: float

    def __str__(self):
        head = (f"{'optimal' if self.optimal else 'NOT optimal'}: relative duality gap {self.relative_gap:.3g} "
                f"{'<=' if self.optimal else '>'} tol {self.tol:g} (KKT residual {self.kkt_residual:.3g})")
        return head + ("" if self.optimal else f"; kind {self.kind}") + (f"; hint: {self.hint}" if self.hint else "")


def diagnose(alpha, K, y, loss, lam, *, intercept=None, reduction="sum", tol=1e-8, loss_options=None):
    r"""Is a candidate (α, b) the solution, to a stated tolerance — and if not, which usual slip does it solve?

    The verdict is the certificate of the module docstring: ``optimal`` when the relative duality gap
    gap/max(1, |P(α, b)|) ≤ ``tol`` (then P − P* ≤ tol·max(1, |P|), proven by weak duality up to the rounding of
    the gap's evaluation).  When it fails, the candidate's own duality gap is evaluated under each usual slip
    (λ′ = 2λ, λ/2, 1/λ, nλ, λ/n — for SVM losses named as C = 1/(2λ), 2/λ, λ, … with C = 1/λ the correct
    mapping — and the intercept missing or added), on K and on K rounded to float32 (libsvm's cache); a slip is
    named only when the gap under it meets the same ``tol``.

    Parameters
    ----------
    alpha, K, y, loss, lam, intercept, reduction
        As :func:`kkt_residual` (``intercept=None``: the machine without intercept; a number: with one, at b).
    tol : float
        Threshold on the relative duality gap (default 1e-8; the exact solvers reach ~1e-15, libsvm on a float64
        K ~1e-7: its float32 kernel cache).
    loss_options : dict, optional
        For :func:`ntkref.losses.get` (e.g. ``{"epsilon": 0.2}``).

    Returns
    -------
    KKTDiagnosis

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, kkt
    >>> X = np.random.default_rng(5).standard_normal((40, 3))
    >>> y = np.where(X[:, 0] + 0.7 > 0, 1.0, -1.0)
    >>> K, lam = kernels.fc(X, depth=1).ntk, 0.1
    >>> m = kkt.fit_with_intercept(K, y, "hinge", lam)
    >>> kkt.diagnose(m.alpha_, K, y, "hinge", lam, intercept=m.intercept_).optimal
    True
    >>> slipped = kkt.fit_with_intercept(K, y, "hinge", 2 * lam)        # an SVC with C = 1/(2λ)
    >>> d = kkt.diagnose(slipped.alpha_, K, y, "hinge", lam, intercept=slipped.intercept_)
    >>> d.optimal, d.kind, d.slips
    (False, 'convention', ('C = 1/(2*lam)',))
    """
    caller = "kkt.diagnose"
    tol = check_real(tol, "tol", caller=caller, low=0.0)
    reduction = check_option(reduction, "reduction", ("sum", "mean"), caller=caller)
    loss_obj = losses.get(loss, **(loss_options or {})) if isinstance(loss, str) else loss
    if getattr(intercept, "shape", None) == (1,):
        intercept = intercept[0]
    b = None if intercept is None else check_real(intercept, "intercept", caller=caller)
    resid = float(kkt_residual(alpha, K, y, loss_obj, lam, intercept=b, reduction=reduction))
    gap, P, rel = _relative_gap(alpha, K, y, loss_obj, lam, b, reduction)
    lam = float(lam)
    if rel <= tol:
        return KKTDiagnosis(True, "ok", "", (), rel, gap, P, resid, tol)
    xp = namespace(K)
    n = K.shape[0]
    K32 = xp.astype(xp.astype(K, xp.float32), K.dtype)
    grams = [(K, "")]
    if bool(xp.any(K32 != K)):
        grams.append((K32, " (on K rounded to float32, as libsvm's kernel cache holds it)"))
    if len(grams) == 2 and _relative_gap(alpha, K32, y, loss_obj, lam, b, reduction)[2] <= tol:
        return KKTDiagnosis(False, "precision", "the candidate solves this problem exactly for K rounded to float32 "
                            "(libsvm, behind scikit-learn's SVC, caches K in single precision): check it on a Gram "
                            "exact in float32, or with a tolerance of ~1e-6", ("float32 K",), rel, gap, P, resid, tol)
    matched, messages = [], []
    for label, message, lam2, fi in _convention_slips(lam, n, loss_obj.name, reduction, b is not None):
        for Kt, where in grams:
            if fi and b is None:
                b2 = _best_intercept(Kt, y, loss_obj, lam2, reduction)
                if b2 is None:
                    continue
            else:
                b2 = b if fi else None
            if _relative_gap(alpha, Kt, y, loss_obj, lam2, b2, reduction)[2] <= tol:
                matched.append(label + (" (float32 K)" if where else ""))
                messages.append(f"the candidate solves the problem with {label}: {message}{where}")
                break
    if matched:
        return KKTDiagnosis(False, "convention", "; ".join(messages), tuple(matched), rel, gap, P, resid, tol)
    eps = float(np.finfo(np.float32 if K.dtype == xp.float32 else np.float64).eps)
    kind = "precision" if rel <= 10 * n * eps else "formula"
    return KKTDiagnosis(False, kind, "", (), rel, gap, P, resid, tol)


set_public_module(__name__, globals(), __all__)
