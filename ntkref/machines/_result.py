r"""The result of a kernel-machine fit: :class:`KernelMachine` (α, its certificate, ``predict``), the
:class:`ConvergenceWarning` of the solvers, and :func:`predict` and :func:`rkhs_norm` for any α.

g(x) = Σᵢ αᵢ K(x, xᵢ) (seed 000 eq. (7) by the representer theorem, no bias) and ‖β‖_H = √(αᵀKα), β = Σ αᵢ Φ(xᵢ).
A Dask ``K_test_train`` is predicted by the Dask engine through the ``predict`` seam (ntkref/_lib/dispatch.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .._lib import dispatch
from .._lib.backend import device_of, is_array, is_numpy_namespace, namespace
from .._lib.validation import InvalidParameterError, check_array
from . import _duality, _gram


class ConvergenceWarning(UserWarning):
    """A solver stopped before its duality-gap tolerance was met.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     m = machines.solve(kernels.fc(X).ntk, y, "logistic", 1e-3, max_iter=1)   # one Newton step
    >>> m.converged, any(w.category is machines.ConvergenceWarning for w in caught)
    (False, True)
    """



@dataclass
class KernelMachine:
    """An exact kernel-machine solution g(x) = Σᵢ αᵢ K(x, xᵢ) (no bias).

    Attributes
    ----------
    alpha_ : array, shape (n,)
        Coefficients, g = K α on the training points.
    loss : losses.Loss
    lam : float
        λ as given (in the ``reduction`` convention); ``lam_sum`` = λ in the sum convention (7).
    reduction : {"sum", "mean"}
    primal_objective, dual_objective, duality_gap : float
        P(α), D(α̃) and P − D ≥ P(α) − P*, in the ``reduction`` convention (mean = sum / n).
    kkt_residual : float
        max |α − α̂| where α̂ = −l′(Kα)/λ is the stationarity fixed point (smooth
        losses), or the natural residual ‖α − prox(α − τ∇q)‖∞ of the dual QP
        (τ = 1/max Qᵢᵢ); for the hard margin the primal infeasibility max(0, 1 − min yᵢgᵢ).
    n_iter : int
        Newton / active-set iterations (0 for closed forms).
    converged : bool
        Whether the proven bound on the gap met max(gap, 0) + gap_rounding ≤ tol·max(1, P) (P bounded below
        rigorously).  Then, in real arithmetic on the given float K, y, λ and the returned α,
        P(α) − D(α′) ≤ tol·max(1, P(α)) for the dual point α′ of the certificate, hence, for every α̂,
        P(α) − P(α̂) ≤ tol·max(1, P(α)) + (λ_sum·μ/2)‖α̂ − α′‖², μ = ``psd_margin`` (so P(α) − P* ≤ tol·max(1, P(α))
        when ``psd_margin == 0``, K ⪰ 0 proven) — a theorem whenever ``psd_margin`` is finite; when it is inf
        (nothing proven) the theorem ASSUMES K ⪰ 0.
        The same holds for the intercept model of ``fit_intercept=True`` (f = Kα + b; the dual point made exactly
        feasible for Σα′ = 0) and for the Dask engine (blockwise compensated Kα); not for ``krr.solve_cg``'s
        KRRMachine, whose CG certificate is computed in floating point (its ``gap_rounding`` is 0.0, no bound).
    gap_rounding : float
        A proven bound (since this release; before, an estimate): max(duality_gap, 0) + gap_rounding ≥ the exact
        P(α) − D(α′) ≥ P(α) − P*, where the gap is evaluated from the compensated g = Kα (Ogita–Rump–Oishi
        TwoProduct/TwoSum, error bounded) as a sum of Fenchel–Young terms, each bounded over g's enclosure
        (:mod:`ntkref.machines._proof`; assumptions there: IEEE-754 round-to-nearest, logistic's exp/log/log1p
        within 4 ulp).  Same reduction as the gap.
    psd_margin : float
        What the PSD test proved about K (Rump's test, :func:`ntkref.machines._gram.refuse_indefinite`): 0.0 = K ≻ 0
        proven (or K = 0); μ > 0 = only λ_min(K) > −μ proven (a singular Gram cannot be proven PSD in floating
        point; a float XXᵀ is usually slightly indefinite in exact arithmetic): the certificate accounts for it
        (dᵀKd ≤ dᵀ(K + μI)d, αᵀKα ≥ −μ‖α‖²), and P(α) − P(α̂) ≤ gap + gap_rounding + (λ_sum·μ/2)·‖α̂ − α′‖² for
        every α̂ (sum convention); inf = no proof (Lanczos test, ``check_psd=False``, the Dask engine): the
        certificate and ``converged`` then ASSUME K ⪰ 0 (:func:`~ntkref.machines.kernel_gram` proves a margin
        for FC Grams of any n in O(n²)).
    rkhs_norm_ : float
        √(αᵀKα) = ‖β‖.
    beta_error_bound : float
        √(2·(gap_sum + gap_rounding_sum)/λ_sum) ≥ ‖β − β*‖, so |g(x) − g*(x)| ≤ √K(x,x)·beta_error_bound.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels, machines
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> K = kernels.fc(X).ntk
    >>> m = machines.solve(K, y, "hinge", 0.1)
    >>> m.converged, m.duality_gap <= 1e-10 * max(1.0, m.primal_objective)   # the certificate
    (True, True)
    >>> bool(m.beta_error_bound < 1e-4), bool(np.allclose(m.predict(K), K @ m.alpha_))
    (True, True)
    """

    alpha_: object
    loss: object
    lam: float
    lam_sum: float
    reduction: str
    primal_objective: float
    dual_objective: float
    duality_gap: float
    kkt_residual: float
    n_iter: int
    converged: bool
    rkhs_norm_: float
    train_output_: object = None
    gap_rounding: float = 0.0
    psd_margin: float = math.inf

    @property
    def beta_error_bound(self):
        if self.lam_sum == 0:
            return math.nan
        n = self.alpha_.shape[0]
        gap_sum = (max(self.duality_gap, 0.0) + self.gap_rounding) * (n if self.reduction == "mean" else 1)
        return math.sqrt(2 * gap_sum / self.lam_sum)

    def predict(self, K_test_train):
        """g(x) = Σᵢ αᵢ K(x, xᵢ) for the rows of ``K_test_train`` (shape (m, n)) → shape (m,).

        ``K_test_train`` must live where the machine was fitted (``alpha_``'s array library and device)."""
        return _predict(self.alpha_, K_test_train, "KernelMachine.predict", "alpha_ (the fitted coefficients)")

    def rkhs_norm(self):
        """‖β‖ = √(αᵀKα)."""
        return self.rkhs_norm_



def predict(alpha, K_test_train):
    r"""g(x) = Σᵢ αᵢ K(x, xᵢ) for each row x of ``K_test_train`` (shape (m, n)) → shape (m,).

    A Dask ``K_test_train`` gives a lazy Dask result (per block, summed over column chunks).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import machines
    >>> X = np.array([[1.0, 0.0], [-1.0, 0.0]])      # linear kernel K(x, x′) = x·x′
    >>> alpha = np.array([0.5, -0.5])                 # β = Σ αᵢxᵢ = (1, 0)
    >>> x_test = np.array([[3.0, 7.0], [-2.0, 1.0]])
    >>> machines.predict(alpha, x_test @ X.T).tolist()   # g(x) = ⟨β, x⟩
    [3.0, -2.0]
    """
    return _predict(alpha, K_test_train, "machines.predict", "alpha")


def _predict(alpha, K_test_train, caller, alpha_name):
    engine = dispatch.predict.lookup(K_test_train)
    if engine is not None:  # a Dask K_test_train: lazy, per block (ntkref/_engines/dask)
        return engine(alpha, K_test_train)
    K_test_train = check_array(K_test_train, "K_test_train", caller=caller, ndim=2)
    xp = namespace(K_test_train)
    if is_array(alpha) and not is_numpy_namespace(namespace(alpha)) and namespace(alpha) is not xp:
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} comes from another array library than {alpha_name}: "
            f"pass it in {alpha_name}'s namespace (no implicit conversions)."
        )
    if is_array(alpha) and namespace(alpha) is xp and device_of(alpha) != device_of(K_test_train):
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} is on device {device_of(K_test_train)!r} but {alpha_name} "
            f"is on {device_of(alpha)!r}: move one of them explicitly (no implicit copies between devices)."
        )
    alpha = check_array(alpha, alpha_name.split()[0], caller=caller, ndim=1, xp=xp, like=K_test_train)
    if K_test_train.shape[1] != alpha.shape[0]:
        raise InvalidParameterError(
            f"The 'K_test_train' parameter of {caller} must have {alpha.shape[0]} columns (one per "
            f"training point); got shape {tuple(K_test_train.shape)}."
        )
    return K_test_train @ xp.astype(alpha, K_test_train.dtype)


def rkhs_norm(alpha, K, *, check_psd=False):
    r"""‖β‖_H = √(αᵀKα) for β = Σ αᵢ Φ(xᵢ) (negative rounding clamped to 0).

    Computed scale-free (α and K divided by powers of two first), so it is finite and exact to rounding for
    every finite α and K, e.g. α ~ 1e300 where αᵀKα itself overflows; float32 inputs in float64 arithmetic
    (the value of the float32 numbers given, as a float32 solve's ``rkhs_norm_``).

    ``check_psd`` (default False: K is checked square, finite and symmetric only): True runs the Cholesky
    certificate of :func:`~ntkref.machines.checked_gram`'s PSD test, "auto", "cholesky" or "lanczos" the test
    of that name (as in :func:`~ntkref.machines.solve`); any other value (None included) is refused.  The
    return value is the norm alone: what the test proved (Rump's margin, 0.0 = K ≻ 0 proven) is
    ``machines.checked_gram(K, check_psd=...).psd_margin`` (run the test once there and pass the CheckedGram on).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import machines
    >>> rng = np.random.default_rng(0)
    >>> X, alpha = rng.standard_normal((5, 3)), rng.standard_normal(5)
    >>> # linear kernel: β = Σ αᵢxᵢ, so ‖β‖_H = ‖Xᵀα‖₂
    >>> print(f"{machines.rkhs_norm(alpha, X @ X.T):.6f} {np.linalg.norm(X.T @ alpha):.6f}")
    3.927749 3.927749
    """
    K = _gram.check_gram(K, "machines.rkhs_norm", psd=check_psd)
    xp = namespace(K)
    alpha = check_array(alpha, "alpha", caller="machines.rkhs_norm", xp=xp, shape=(K.shape[0],), like=K)
    alpha, K = _duality.as_float64(xp, alpha, K)  # float32 inputs evaluated in float64, as the objectives
    # scale-free: α = 2^a·ᾱ, K = 4^k·K̄ (powers of two: exact, so results at ordinary scales are unchanged bit
    # for bit) and ‖β‖ = 2^(a+k)·√(ᾱᵀK̄ᾱ), finite for α ~ 1e300 or K ~ 1e300 (αᵀKα itself would overflow)
    a_max, k_max = _gram.read(xp, xp.max(xp.abs(alpha)), xp.max(xp.abs(K)))
    if a_max == 0.0 or k_max == 0.0:
        return 0.0
    ea, ek = _pow2_exponent(a_max), _pow2_exponent(k_max) // 2
    a_bar, K_bar = alpha * 2.0 ** -ea, K * 4.0 ** -ek
    return math.ldexp(math.sqrt(max(float(a_bar @ (K_bar @ a_bar)), 0.0)), ea + ek)


def _pow2_exponent(m):
    """e with 2^e ≈ m (frexp's exponent, kept in ±1000 so that 2^-e is a finite float)."""
    return max(min(math.frexp(m)[1], 1000), -1000)

