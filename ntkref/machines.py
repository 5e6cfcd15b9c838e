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
gap ≤ tol·max(1, P(α)) with tol = 1e-10 (float64) / 1e-4 (float32).  Active-set
solutions are exact to rounding once the active set is identified.

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
probabilistic bound, see ``_check_psd``); the default ``check_psd=True`` ("auto") is the
Cholesky certificate for n ≤ 4096 and the Lanczos test above; ``check_psd=False`` skips
it (:func:`checked_gram` runs these checks once for many fits on one K, e.g. a λ sweep); y of shape
(n,), ±1 for classification
losses; λ > 0 (λ = 0 only for the squared loss, with K nonsingular).  A K whose
squared entries overflow is refused by the PSD check.  Finite or error: a solve
(:func:`solve`, :func:`fit`, :func:`hard_margin_svm`) whose objective, duality gap,
KKT residual or coefficients come out non-finite (float overflow, e.g. y ~ 1e300)
raises :class:`~ntkref._validation.InvalidParameterError` naming the inputs whose
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

import math
import warnings
from dataclasses import dataclass, field

import array_api_compat

from . import _compat, _dask
from . import losses as _losses
from ._backend import device_of, is_array, is_numpy_namespace, namespace, to_numpy
from ._validation import InvalidParameterError, check_array, check_int, check_option, check_real

__all__ = [
    "KernelMachine",
    "CheckedGram",
    "checked_gram",
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

REDUCTIONS = ("sum", "mean")
_QP_LOSSES = ("hinge", "squared_hinge", "epsilon_insensitive")


class ConvergenceWarning(UserWarning):
    """A solver stopped before its duality-gap tolerance was met."""


# --------------------------------------------------------------------------- validation


def _eps(dtype, xp):
    return float(xp.finfo(dtype).eps)


def _check_gram(K, caller, *, psd=True, xp=None, name="K"):
    """Square, finite, symmetric (then symmetrised) and, if ``psd``, PSD Gram matrix (``name`` in messages).

    ``psd``: False, True (the certified Cholesky test), or a method of :func:`_check_psd`.
    A :class:`CheckedGram` is not checked again (only a stronger PSD test than the one it passed runs).
    """
    if isinstance(K, CheckedGram):
        _upgrade_psd(K, "cholesky" if psd is True else _psd_method(psd, K.shape[0], caller), caller, name)
        return K.K
    K = check_array(K, name, caller=caller, ndim=2, xp=xp, finite=False)
    xp = namespace(K)
    n, m = K.shape
    if n != m:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a square Gram matrix; got shape {(n, m)}.")
    if n == 0:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have at least one row.")
    if _compat.exactly_symmetric_and_finite(K, xp):  # the common case (NumPy), in ~half the time
        if psd:
            _check_psd(K, caller, name, method="cholesky" if psd is True else _psd_method(psd, n, caller))
        return K
    eps = _eps(K.dtype, xp)
    # max|K − Kᵀ| over 256×256 tiles of the upper triangle: a whole transposed copy reads
    # memory with stride n and is ~4× slower at n = 2000.  The tile maxima stay on the device and
    # are read with max|K| in one host copy (one synchronisation, not two per tile).  Finiteness
    # comes with them: a NaN or ±inf entry makes max K, −min K or a tile difference NaN or inf.
    parts = [xp.max(K), -xp.min(K)]
    for i in range(0, n, _TILE):
        for j in range(i, n, _TILE):
            ie, je = min(i + _TILE, n), min(j + _TILE, n)  # in-bounds stops (array API)
            tile = K[i:ie, j:je] - xp.matrix_transpose(K[j:je, i:ie])
            parts += [xp.max(tile), -xp.min(tile)]
    host = to_numpy(xp.stack(parts)).tolist()
    if not all(math.isfinite(v) for v in host):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} contains NaN or infinite values.")
    scale = max(host[0], host[1])
    asym = max(0.0, *host[2:])
    if asym > math.sqrt(eps) * scale:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be symmetric: max|K - K^T| = {asym:.3g} exceeds "
            f"sqrt(eps)*max|K| = {math.sqrt(eps) * scale:.3g}."
        )
    if asym > 0:
        K = (K + xp.matrix_transpose(K)) / 2
    if psd:
        _check_psd(K, caller, name, method="cholesky" if psd is True else _psd_method(psd, n, caller))
    return K


_TILE = 256
PSD_METHODS = ("auto", "cholesky", "lanczos")
_CHOLESKY_MAX_N = 4096  # "auto": the Cholesky certificate up to this n, the Lanczos test above
_LANCZOS_STEPS = 40


def _psd_method(check_psd, n, caller):
    """The PSD test ``check_psd`` selects for an n×n K: None (no test), 'cholesky' or 'lanczos'."""
    if check_psd is False or check_psd is None:
        return None
    if check_psd is True:
        check_psd = "auto"
    check_option(check_psd, "check_psd", (True, False) + PSD_METHODS, caller=caller)
    if check_psd == "auto":
        return "cholesky" if n <= _CHOLESKY_MAX_N else "lanczos"
    return check_psd


def _check_psd(K, caller, name="K", method="cholesky"):
    r"""Refuse an indefinite K: λ_min(K) below −δ, δ = n·eps·‖K‖_F.

    ``method="cholesky"`` (a certificate, O(n³/3)): K is accepted iff the Cholesky factorization of
    K + δI succeeds, i.e. K + δI is numerically positive definite.  It accepts every K with
    λ_min(K) ≥ −δ + O(n·eps·‖K‖) and refuses every K with λ_min(K) < −δ − O(n·eps·‖K‖).

    ``method="lanczos"`` (a one-sided test, ``_LANCZOS_STEPS`` = 40 mat-vecs, O(40·n²)): k Lanczos
    steps with full reorthogonalisation from a fixed pseudo-random start give the smallest Ritz value
    θ ≥ λ_min(K) and its Ritz vector u; K is refused iff the Rayleigh quotient uᵀKu/uᵀu, recomputed
    with one more mat-vec, is below −δ.  A refusal is a proof (|fl(uᵀKu) − uᵀKu| ≤ n·eps·‖K‖_F·‖u‖²
    = δ‖u‖², so uᵀKu < 0: K is indefinite); a PSD K is never refused.  Acceptance is not a proof: an
    indefinite K with λ_min(K) = −μ, μ > δ, passes with probability at most
    1.648·√n·exp(−(2k − 1)·√((μ − δ)/(λ_max(K) + μ))) over a start vector uniform on the sphere
    (Kuczyński & Woźniakowski 1992, Thm. 4.2(a), applied to λ_max(K)·I − K), e.g. ≤ 1e-6 for n = 20 000
    when μ ≥ 0.064·(λ_max + μ); in practice the extreme Ritz values converge far faster than this
    worst case (isolated negative eigenvalues are found in a few steps).  The start is fixed (seed 0),
    so the bound holds for K chosen independently of it.

    A K whose Frobenius norm overflows (entries near the float maximum) is refused as such, not
    reported as indefinite.
    """
    xp = namespace(K)
    n = K.shape[0]
    eps = _eps(K.dtype, xp)
    fro = _compat.frobenius_norm(K, xp)  # no n×n temporary
    if not math.isfinite(fro):
        kmax, = _read(xp, xp.max(xp.abs(K)))  # (an n×n temporary: only for the message)
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} is too large: its Frobenius norm cannot be computed in {K.dtype} "
            "(the squares of its entries overflow) "
            f"(max|K| = {kmax:.3g}); rescale it."
        )
    if fro == 0:  # K = 0 is PSD
        return
    delta = n * eps * fro
    if method == "cholesky":
        if not _cholesky_ok(K, delta, xp):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be positive semidefinite: its smallest eigenvalue is below "
                f"-n*eps*||K||_F = {-delta:.3g} (Cholesky of K + {delta:.3g} I failed). A kernel machine's "
                "objective is not convex for an indefinite K."
            )
        return
    _lanczos_test(lambda v: K @ v, K, min(n, _LANCZOS_STEPS), delta, xp, name, caller)


def _lanczos_test(matvec, like, k, delta, xp, name, caller):
    """Refuse K (an error naming ``name``) if k Lanczos steps of ``matvec`` find uᵀKu/uᵀu < −δ (see
    :func:`_check_psd`); ``like`` gives the vectors' namespace, dtype and device (K itself for a dense K, a host
    float64 array for the Dask operator)."""
    rho = _lanczos_min(matvec, like, k, delta, xp)
    if rho < -delta:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be positive semidefinite: Lanczos found a vector u with "
            f"u^T K u / u^T u = {rho:.3g} < -n*eps*||K||_F = {-delta:.3g}, so K has a negative eigenvalue. A kernel "
            "machine's objective is not convex for an indefinite K."
        )


def _lanczos_min(matvec, like, k, delta, xp):
    """Rayleigh quotient uᵀKu/uᵀu of the smallest Ritz vector u after ≤ k Lanczos steps of the symmetric operator
    ``matvec`` (see :func:`_check_psd`); vectors of ``like``'s length, dtype and device, in namespace ``xp``.

    The Krylov basis and the mat-vecs stay on that device; the host holds the k×k tridiagonal matrix
    (O(k²)) and reads two scalars a step.  Stops early once a Ritz value is below −δ or the Krylov space
    is invariant.
    """
    import numpy as np

    n = like.shape[0]
    dev = device_of(like)
    v = np.random.default_rng(0).standard_normal(n)
    v = xp.asarray(v / np.linalg.norm(v), dtype=like.dtype, device=dev)
    V = xp.reshape(v, (1, n))
    diag, off = [], []
    theta, s = None, None
    for j in range(k):
        w = matvec(v)
        c = V @ w  # full reorthogonalisation, twice (classical Gram–Schmidt is stable when repeated)
        w = w - c @ V
        c2 = V @ w
        w = w - c2 @ V
        a_j, b_j, wn = _read(xp, c[j] + c2[j], xp.linalg.vector_norm(w), xp.max(xp.abs(w)))
        diag.append(a_j)
        T = np.diag(diag) + np.diag(off, 1) + np.diag(off, -1)
        evals, evecs = np.linalg.eigh(T)
        theta, s = evals[0], evecs[:, 0]
        if theta < -delta or j == k - 1 or not b_j > 1e-12 * max(abs(x) for x in diag) or not wn > 0:
            break
        off.append(b_j)
        v = w / b_j
        V = xp.concat([V, xp.reshape(v, (1, n))], axis=0)
    u = xp.asarray(s, dtype=like.dtype, device=dev) @ V
    num, den = _read(xp, u @ matvec(u), u @ u)
    return num / den


def _eye(n, like, xp):
    return xp.eye(n, dtype=like.dtype, device=device_of(like))


def _cholesky_ok(K, shift, xp):
    """Whether K + shift·I is numerically positive definite (Cholesky succeeds)."""
    ok = _compat.cholesky_succeeds(K, shift, xp)
    if ok is not None:
        return ok
    try:
        L = xp.linalg.cholesky(K + shift * _eye(K.shape[0], K, xp))
    except Exception:  # numpy/array_api_strict raise LinAlgError, torch its own error
        return False
    return bool(xp.all(xp.isfinite(L)))  # cupy returns NaN instead of raising


_PSD_STRENGTH = {None: 0, "lanczos": 1, "cholesky": 2}


_CHECKED = object()  # the private token of checked_gram: a CheckedGram exists only as its result


@dataclass(frozen=True, repr=False, eq=False)
class CheckedGram:
    """A Gram matrix validated once, for many fits (a λ sweep): made by :func:`checked_gram`.

    The machines (:func:`solve`, :func:`fit`, :func:`hard_margin_svm`, the objectives, :func:`rkhs_norm`)
    and :mod:`ntkref.kkt` accept it wherever they take ``K`` and do not check it again; they run a PSD test
    only when they ask for a stronger one than ``psd_test`` (None < "lanczos" < "cholesky").

    Attributes
    ----------
    K : array, shape (n, n)
        ntkref's own copy of the validated Gram (finite, symmetric: symmetrised if it was within the
        tolerance), on the input's device; read-only for NumPy.  Do not modify it: the checks would no
        longer describe it.
    psd_test : {"cholesky", "lanczos"} or None
        The PSD test it passed (``check_psd`` of :func:`checked_gram`, "auto" resolved by n).
    """

    K: object
    psd_test: object
    _token: object = field(default=None, repr=False)
    _ntkref_checked_gram = True  # (class attribute) lets array validation name it

    def __post_init__(self):
        if self._token is not _CHECKED:
            raise TypeError("A CheckedGram is made by machines.checked_gram(K), which runs the checks it vouches for.")

    @property
    def shape(self):
        return tuple(self.K.shape)

    @property
    def dtype(self):
        return self.K.dtype

    def __repr__(self):
        return f"CheckedGram(shape={self.shape}, dtype={self.dtype}, psd_test={self.psd_test!r})"


def checked_gram(K, *, check_psd=True):
    """Validate a Gram matrix once (finite, square, symmetric, PSD test) for repeated fits.

    The checks of :func:`solve` cost more than an SVM solve on a few thousand points (at n = 1 700:
    ~3 ms for finiteness and symmetry, 40–80 ms for the Cholesky certificate, against ~5 ms for the
    solve), so a λ sweep or a comparison of losses on one Gram pays them once::

        G = machines.checked_gram(K)            # the default checks, once
        fits = [machines.fit(G, y, "hinge", lam) for lam in (1.0, 0.1, 0.01)]

    Parameters
    ----------
    K : array, shape (n, n)
        The Gram matrix (the module docstring gives the tolerances).
    check_psd : bool or {"auto", "cholesky", "lanczos"}
        The PSD test, as in :func:`solve` (default True = "auto": the Cholesky certificate for
        n ≤ 4096, the Lanczos test above).

    Returns
    -------
    CheckedGram
        Holding a private copy of the validated K (n² more memory, once), so later changes to the
        caller's array do not invalidate the checks.
    """
    caller = "machines.checked_gram"
    if isinstance(K, CheckedGram):
        method = _psd_method(check_psd, K.shape[0], caller)
        _upgrade_psd(K, method, caller, "K")
        return K if _PSD_STRENGTH[method] <= _PSD_STRENGTH[K.psd_test] else CheckedGram(K.K, method, _CHECKED)
    if _dask.is_dask(K):
        raise InvalidParameterError(
            f"The 'K' parameter of {caller} is a Dask array: the Dask solvers do not take a checked Gram "
            "(they validate block by block); pass the Dask Gram to machines.solve directly."
        )
    K_in = K
    K = _check_gram(K, caller, psd=False)
    method = _psd_method(check_psd, K.shape[0], caller)
    if method:
        _check_psd(K, caller, method=method)
    xp = namespace(K)
    if K is K_in or not is_numpy_namespace(xp) or getattr(K, "base", None) is not None:
        K = xp.asarray(K, copy=True)  # ntkref's own copy
    return CheckedGram(_compat.read_only(K, xp), method, _CHECKED)


def _upgrade_psd(G, method, caller, name):
    """Run the PSD test ``method`` on a CheckedGram if it is stronger than the one it passed."""
    if _PSD_STRENGTH[method] > _PSD_STRENGTH[G.psd_test]:
        _check_psd(G.K, caller, name, method=method)


def _check_lam(lam, loss, caller, *, allow_zero):
    if loss.name == "squared" and allow_zero:
        return check_real(lam, "lam", caller=caller, low=0.0)
    lam = check_real(lam, "lam", caller=caller, low=0.0)
    if lam == 0.0:
        hint = " (the λ → 0 limit of the hinge loss is hard_margin_svm(K, y))" if loss.name == "hinge" else ""
        raise InvalidParameterError(
            f"The 'lam' parameter of {caller} must be > 0 for the {loss.name!r} loss{hint}. Got 0.0 instead."
        )
    return lam


def _prepare(K, y, loss, lam, reduction, caller, *, psd=True, allow_zero=True):
    loss = _get_loss(loss, caller)
    check_option(reduction, "reduction", REDUCTIONS, caller=caller)
    checked = K if isinstance(K, CheckedGram) else None
    K = _check_gram(K, caller, psd=False)
    xp = namespace(K)
    n = K.shape[0]
    y = loss.check_targets(check_array(y, "y", caller=caller, xp=xp, like=K), "y", caller=caller)
    if y.shape != (n,):
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},) to match K; got {tuple(y.shape)}.")
    y = xp.astype(y, K.dtype) if y.dtype != K.dtype else y
    lam = _check_lam(lam, loss, caller, allow_zero=allow_zero)
    lam_sum = lam * n if reduction == "mean" else lam
    method = _psd_method(psd, n, caller)
    if checked is not None:  # checked once: only a stronger PSD test than the one it passed runs
        _upgrade_psd(checked, method, caller, "K")
    elif method:  # last: the only check costlier than O(n²)
        _check_psd(K, caller, method=method)
    return K, y, loss, lam, lam_sum, xp


def _get_loss(loss, caller):
    if isinstance(loss, _losses.Loss):
        return loss
    if not isinstance(loss, str):
        raise InvalidParameterError(
            f"The 'loss' parameter of {caller} must be a loss name or a losses.Loss. Got {loss!r} instead."
        )
    try:
        return _losses.get(loss)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"The 'loss' parameter of {caller}: {exc}") from exc


_HOST_MAX_N = 4096  # active-set solves of at most this n run on the host for non-NumPy namespaces


def _on_host(solver, K, y):
    """``solver(K, y, xp)`` where it is fastest: an explicit host step for small non-NumPy problems.

    The box-QP solvers are sequences of small data-dependent decisions (which coordinates enter or
    leave the face, a ratio test, a duality-gap test), a few batched host reads per iteration; on a
    GPU each is a synchronisation, which costs more than the whole iteration's arithmetic when n is
    small.  So for a namespace other than NumPy and n ≤ ``_HOST_MAX_N`` (4096), K and y are copied to
    the host once (:func:`~ntkref._backend.to_numpy`), the NumPy code runs there, and the arrays it
    returns are copied back to K's device (``xp.asarray(..., device=device_of(K))``): the result is the
    NumPy solve of the same (validated, symmetrised) K and y, bit for bit.  Above that size the solver
    runs in K's namespace on K's device (Gram mat-vecs, working-set gathers and face solves there; the
    host reads only scalars and index counts).  Non-array outputs (floats, ints, bools) are returned as
    they are.
    """
    xp = namespace(K)
    if is_numpy_namespace(xp) or K.shape[0] > _HOST_MAX_N:
        return solver(K, y, xp)
    K_host, y_host = to_numpy(K), to_numpy(y)
    out = solver(K_host, y_host, namespace(K_host))
    dev = device_of(K)
    return tuple(xp.asarray(o, device=dev) if is_array(o) else o for o in out)


def _overflow_error(caller, what, K, y, lam, xp, alpha=None):
    """The error for a solve or an objective that is not finite: names the inputs whose scale overflows
    (``alpha`` too where the coefficients are an input, as in :func:`objective`)."""
    kmax = float(xp.max(xp.abs(K)))
    ymax = float(xp.max(xp.abs(y))) if y.shape[0] else 0.0
    big = math.sqrt(float(xp.finfo(K.dtype).max))
    scales = [("K", kmax), ("y", ymax), ("lam", abs(lam))]
    if alpha is not None:
        scales.insert(0, ("alpha", float(xp.max(xp.abs(alpha))) if alpha.shape[0] else 0.0))
    names = [nm for nm, v in scales if v > big]
    if not names:  # no single input is near the limit: their product is
        names = [nm for nm, _ in scales]
    return InvalidParameterError(
        f"{caller}: the {what} is not finite (float overflow in {K.dtype}): the scale of "
        + ", ".join(repr(nm) for nm in names) + " is too large ("
        + ", ".join(f"max|{nm}| = {v:.3g}" if nm != "lam" else f"lam = {v:.3g}" for nm, v in scales)
        + "); rescale the problem."
    )


def _check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha):
    """Finite or error: never ``converged=True`` with a NaN/inf objective, duality gap or coefficient."""
    values = [primal, dual, primal - dual, kkt]
    if not all(math.isfinite(v) for v in values) or not bool(xp.all(xp.isfinite(alpha))):
        raise _overflow_error(caller, "objective, duality gap or solution", K, y, lam, xp)


def _default_tol(dtype, xp):
    return 1e-10 if dtype == xp.float64 else 1e-4


# --------------------------------------------------------------------------- objectives


def _primal_from_g(alpha, g, y, loss, lam_sum, xp):
    """(λ/2)αᵀg + Σ l(g, y) with g = Kα (sum convention)."""
    reg = 0.5 * lam_sum * float(xp.sum(alpha * g))
    try:
        values = loss._value(g, y, xp)  # g, y validated by the caller
    except _losses.LossOverflowError:
        return math.inf  # the caller's finiteness check names the inputs (K, y, lam, alpha) that overflow
    return reg + float(xp.sum(values))


def _dual_from_g(alpha, g, y, loss, lam_sum, xp, slack=1e-9, on_overflow=None):
    """D(α) = −Σ l*(−λα) − (λ/2)αᵀg, or −inf if α is dual-infeasible beyond ``slack``.

    ``on_overflow``: a function returning the error to raise when a dual-feasible α gives a non-finite value
    (float overflow; the −inf of an infeasible α is a value, not an overflow)."""
    quad = 0.5 * lam_sum * float(xp.sum(alpha * g))
    name = loss.name
    if name in ("hinge", "squared_hinge", "logistic"):
        t = lam_sum * y * alpha
        hi = 1.0 + slack if name != "squared_hinge" else math.inf
        if not bool(xp.all((t >= -slack) & (t <= hi))):
            return -math.inf
        t = xp.clip(t, 0.0, None) if name == "squared_hinge" else xp.clip(t, 0.0, 1.0)
        if name == "hinge":
            conj = -t
        elif name == "squared_hinge":
            conj = -t + t * t / 4
        else:  # logistic: negative binary entropy, 0·log 0 = 0
            tlog = xp.where(t > 0, t * xp.log(xp.where(t > 0, t, 1.0)), 0.0)
            u = 1 - t
            ulog = xp.where(u > 0, u * xp.log(xp.where(u > 0, u, 1.0)), 0.0)
            conj = tlog + ulog
    elif name == "epsilon_insensitive":
        s = lam_sum * alpha
        if not bool(xp.all(xp.abs(s) <= 1.0 + slack)):
            return -math.inf
        conj = -s * y + loss.epsilon * xp.abs(s)
    else:  # squared
        s = lam_sum * alpha
        conj = -s * y + s * s / 4
    val = -float(xp.sum(conj)) - quad
    if on_overflow is not None and not math.isfinite(val):
        raise on_overflow()
    return val


# --------------------------------------------------------------------------- array helpers


def _scatter(mask, values, xp):
    """Vector v with v[mask] = values (in order) and 0 elsewhere, without index assignment."""
    if values.shape[0] == 0:
        return xp.zeros(mask.shape, dtype=values.dtype, device=device_of(values))
    pos = xp.cumulative_sum(xp.astype(mask, xp.int64)) - 1
    pos = xp.clip(pos, 0, values.shape[0] - 1)
    return xp.where(mask, xp.take(values, pos), xp.zeros_like(xp.take(values, pos)))


def _scatter_idx(idx, values, n, xp):
    """Vector v of length n with v[idx] = values and 0 elsewhere (``idx`` ascending, as ``nonzero`` returns).

    NumPy, CuPy and PyTorch assign in place; other namespaces go through the standard
    (``searchsorted`` of each position in ``idx``), O(n log |idx|).
    """
    dev = device_of(values)
    out = xp.zeros((n,), dtype=values.dtype, device=dev)
    k = idx.shape[0]
    if k == 0:
        return out
    if array_api_compat.is_numpy_namespace(xp) or array_api_compat.is_cupy_namespace(xp) or \
            array_api_compat.is_torch_namespace(xp):
        out[idx] = values
        return out
    pos = xp.arange(n, device=dev)
    j = xp.clip(xp.searchsorted(idx, xp.astype(pos, idx.dtype)), 0, k - 1)
    return xp.where(xp.take(idx, j) == xp.astype(pos, idx.dtype), xp.take(values, j), out)


def _soft(v, thr, xp):
    return xp.sign(v) * xp.maximum(xp.abs(v) - thr, 0.0)


def _solve_vec(A, b, xp):
    x = _compat.lu_solve_small(A, b, xp)  # NumPy: LAPACK gesv directly (the wrappers cost more than the solve)
    return x if x is not None else xp.linalg.solve(A, b[:, None])[:, 0]


# --------------------------------------------------------------------------- box-QP solver


def _read(xp, *values):
    """Device scalars (0-d arrays, bools or numbers) as Python floats, in ONE host copy.

    The solvers' decisions (a ratio, a count, a test) are host reads; on a GPU each is a
    synchronisation, so every iteration stacks what it needs and reads it once.
    """
    if is_numpy_namespace(xp):  # already on the host: no copy to batch
        return [float(v) for v in values]
    arrays = [v for v in values if is_array(v)]
    if not arrays:
        return [float(v) for v in values]
    ref = arrays[0]
    dt = xp.float64 if ref.dtype == xp.float64 else xp.float32
    dev = device_of(ref)
    parts = [xp.astype(v, dt) if is_array(v) else xp.asarray(float(v), dtype=dt, device=dev) for v in values]
    return to_numpy(xp.stack([xp.reshape(p, ()) for p in parts])).tolist()


def _qp_obj(a, Qa, b, eps, xp):
    """q(a) = ½aᵀQa − bᵀa + ε‖a‖₁ given Qa, as a 0-d device array (columns: one value per column)."""
    val = xp.sum(a * (0.5 * Qa - b), axis=0)
    return val + eps * xp.sum(xp.abs(a), axis=0) if eps else val


def _face_direction(Qff, r, xp, qmax=None):
    """Direction d on the current face: Q_FF d = r, or, if Q_FF is singular and r has a
    component in its null space, that component (a direction of linear descent).

    Returns (d, is_newton): is_newton says the full step d reaches the face minimiser.
    One host read when the LU solve is accepted (its residual, scale and rᵀd together).  ``qmax``: max|Q_FF|
    when the caller knows it cheaply (for a PSD Q the largest diagonal entry of Q_FF: O(|F|), not O(|F|²)).
    """
    m = Qff.shape[0]
    try:  # exact solve first (LU, backward stable)
        d = _solve_vec(Qff, r, xp)
        res, qmax, dmax, rmax, rd = _read(xp, xp.max(xp.abs(Qff @ d - r)),
                                          xp.max(xp.abs(Qff)) if qmax is None else qmax,
                                          xp.max(xp.abs(d)), xp.max(xp.abs(r)), xp.sum(r * d))
        # NaN (CuPy's singular solve) fails every comparison below
        if res <= 1e3 * m * _eps(Qff.dtype, xp) * (qmax * dmax + rmax) and rd > 0:
            return d, True
    except Exception:  # numpy/array_api_strict LinAlgError for an exactly singular Q_FF
        pass
    w, V = _compat_eigh(Qff, xp)
    c = xp.matrix_transpose(V) @ r
    wmax, = _read(xp, xp.max(xp.abs(w)))
    keep = w > m * _eps(Qff.dtype, xp) * wmax
    null = xp.where(keep, 0.0, c)
    nn, nc = _read(xp, xp.linalg.vector_norm(null), xp.linalg.vector_norm(c))
    if nn > 1e-8 * nc:
        return V @ null, False  # Q_FF·d = 0 and rᵀd = ‖P_null r‖² > 0: q decreases linearly
    return V @ xp.where(keep, c / xp.where(keep, w, 1.0), 0.0), True


_LINE_STEPS = 8  # projected search along the arc P(a + t·d), t = 1, 1/2, …, 1/128, in one batch


def _active_set_qp(Q, b, lo, hi, eps, a, max_iter, xp):
    """Minimise q(a) = ½aᵀQa − bᵀa + ε‖a‖₁ over lo ≤ a ≤ hi (Q PSD), from feasible ``a``.

    A primal active-set method.  Coordinates are *fixed* at a breakpoint
    (lo, hi, or 0 when ε > 0) or *free* inside a piece where q is quadratic
    ([lo, hi] if ε = 0; [0, hi] or [lo, 0] by the sign s if ε > 0).  Each
    iteration moves the free coordinates towards the face minimiser
    (Q_FF d = −(∇q)_F, or a null-space descent direction of a singular Q_FF):
    the projected full step is taken if it lowers q (the eight trial points
    P(a + t·d), t = 1, …, 1/128, are evaluated as one matrix product, so several
    bounds may become active at once, as in gradient-projection methods),
    otherwise the longest feasible step (ratio test), fixing the blocking
    coordinate.  At a face minimiser the fixed coordinates whose one-sided slope
    is negative (KKT violators) are released, the worst ``max(16, |F|)`` at a
    time.  q decreases monotonically; with no violator left, a satisfies the KKT
    conditions up to rounding (the face equations are solved exactly).

    Everything runs in Q's namespace on Q's device; the decisions are a few batched host reads
    per iteration (:func:`_read`).  Returns (a, iterations, exact_stop).
    """
    m = Q.shape[0]
    dtype_eps = _eps(Q.dtype, xp)
    dev = device_of(Q)
    zero = xp.zeros_like(b)
    if eps:
        free = (a != 0) & (a != lo) & (a != hi)
        s = xp.where(free, xp.sign(a), zero)
    else:
        free = (a != lo) & (a != hi)
        s = zero
    Qa = Q @ a
    L, bmax = _read(xp, xp.max(xp.sum(xp.abs(Q), axis=1)), xp.max(xp.abs(b)))
    qdiag = xp.linalg.diagonal(Q)  # for PSD Q, max|Q_FF| = max over F of Q_ii (|Q_ij| ≤ √(Q_ii Q_jj))
    steps = xp.asarray([0.5**j for j in range(_LINE_STEPS)], dtype=Q.dtype, device=dev)
    big = xp.asarray(math.inf, dtype=Q.dtype, device=dev)
    singular_seen = False
    for it in range(1, max_iter + 1):
        plo = xp.where(s > 0, 0.0, lo) if eps else lo  # bounds of each free coordinate's piece
        phi = xp.where(s < 0, 0.0, hi) if eps else hi
        idx = xp.nonzero(free)[0]
        at_min = idx.shape[0] == 0
        if not at_min:
            G = Qa - b + eps * s if eps else Qa - b  # gradient of q on the current pieces
            d_f, is_newton = _face_direction(_compat.submatrix(Q, idx, xp), -xp.take(G, idx), xp,
                                             xp.max(xp.take(qdiag, idx)))
            singular_seen = singular_seen or not is_newton
            d = _scatter_idx(idx, d_f, m, xp)
            target = a + d
            proj = xp.minimum(xp.maximum(target, plo), phi)
            moved, clipped = _read(xp, xp.any(d != 0), xp.any(proj != target))
            if not moved:
                at_min = True
            elif is_newton and not clipped:
                a, Qa = target, Qa + Q @ d  # the face minimiser
                at_min = True
            else:
                q0 = _qp_obj(a, Qa, b, eps, xp)
                accepted = False
                if is_newton:
                    P = xp.minimum(xp.maximum(a[:, None] + d[:, None] * steps[None, :], plo[:, None]), phi[:, None])
                    QP = Q @ P
                    lower = xp.astype(_qp_obj(P, QP, b[:, None], eps, xp) < q0, xp.int32)
                    # the first accepted step (argmax returns the first maximum), if any: one host read
                    j, accepted = _read(xp, xp.argmax(lower), xp.max(lower))
                    j = int(j)
                if accepted:
                    proj, target = P[:, j], a + steps[j] * d
                    hit = free & (proj != target)
                    a, Qa = proj, QP[:, j]
                else:  # ratio test: longest step along d inside the pieces
                    room = xp.where(d > 0, phi - a, xp.where(d < 0, plo - a, big))
                    ratio = xp.where(d != 0, room / xp.where(d != 0, d, 1.0), big)
                    t, = _read(xp, xp.min(ratio))
                    if is_newton:
                        t = min(t, 1.0)
                    if not math.isfinite(t):
                        raise RuntimeError("internal error: unbounded direction in a box-constrained QP")
                    a = xp.minimum(xp.maximum(a + t * d, plo), phi)
                    hit = free & (ratio <= t)
                    a = xp.where(hit, xp.where(d > 0, phi, plo), a)
                    Qa = Q @ a
                # coordinates that reached a bound of their piece become fixed
                free = free & ~hit
                s = xp.where(free, s, 0.0)
                continue
        # face minimiser: release fixed coordinates with a negative one-sided slope
        G0 = Qa - b
        if eps:  # one-sided derivatives of ε|a| (a = 0: +ε either way)
            sa = xp.sign(a)
            up = G0 + eps * xp.where(a != 0, sa, 1.0)  # slope of q when increasing a_i
            down = -G0 - eps * xp.where(a != 0, sa, -1.0)  # slope when decreasing a_i
        else:
            up, down = G0, -G0
        up = xp.where(free | (a >= hi), 0.0, up)
        down = xp.where(free | (a <= lo), 0.0, down)
        thr = 1e3 * m * dtype_eps * (L * xp.max(xp.abs(a)) + bmax + eps)
        viol = xp.where(free, 0.0, xp.maximum(-up, -down))
        n_viol, = _read(xp, xp.sum(xp.astype(viol > thr, xp.int64)))
        if n_viol == 0:
            return a, it, True
        # release many at once while the face systems are nonsingular (few SVs: few rounds);
        # one at a time once Q_FF was singular (low-rank K), as the classical active-set method
        k = 1 if singular_seen else min(int(n_viol), max(16, int(idx.shape[0]), m // 8))
        cut = xp.sort(viol)[m - k]
        release = (viol >= cut) & (viol > thr)
        free = free | release
        if eps:  # a released coordinate stays in the piece it sits at (0 only: the descent side)
            new_sign = xp.where(-up >= -down, xp.ones_like(up), -xp.ones_like(up))
            s = xp.where(release, xp.where(a > 0, 1.0, xp.where(a < 0, -1.0, new_sign)), s)
    return a, max_iter, False


def _compat_eigh(a, xp):
    from ._compat import eigh

    return eigh(a, xp)


def _qp_bounds(y, loss, lam_sum, xp):
    C = 1.0 / lam_sum
    if loss.name == "hinge":
        zero = xp.zeros_like(y)
        lo = xp.where(y > 0, zero, -C)
        hi = xp.where(y > 0, C, zero)
        return lo, hi, 0.0, 0.0
    if loss.name == "squared_hinge":
        zero = xp.zeros_like(y)
        lo = xp.where(y > 0, zero, -math.inf)
        hi = xp.where(y > 0, math.inf, zero)
        return lo, hi, 0.0, lam_sum / 2
    C_arr = xp.full(y.shape, C, dtype=y.dtype, device=device_of(y))
    return -C_arr, C_arr, loss.epsilon, 0.0


def _chunked_qp(K, y, lo, hi, eps, shift, gap_fn, tol, max_iter, xp, alpha0=None, chunk=None):
    """Box QP over all n coordinates: exact active-set solves on a working set W (chunking with shrinking).

    Coordinates outside W are held at 0 (always feasible).  Each round solves the QP on W
    exactly (:func:`_active_set_qp`, warm-started from the previous α and its free set), computes
    g = Kα from the rows of the support only (|S|·n, not n²), evaluates the duality gap of the full
    problem, and tests the optimality of αᵢ = 0 outside W with one prox step (KKT).  The next W is
    W, plus the worst violators outside W (at least ``chunk``, at most |W| of them); once |W| exceeds
    twice |S| + ``chunk`` (S the support), the zeros of W are dropped first (shrinking).  Each round that adds a violator lowers the objective
    strictly (a violator is a descent direction), so no working set repeats and the loop ends; the gap
    certifies the result.  All matrix work is in K's namespace on K's device; the host reads O(1)
    scalars and the working-set size per round.  Returns (alpha, g, total inner iterations, converged).
    """
    n = K.shape[0]
    dev = device_of(K)
    zero = xp.zeros_like(y)
    tau = 1.0 / max(_read(xp, xp.max(xp.linalg.diagonal(K)))[0] + shift, 1e-300)
    chunk = chunk or min(n, 64)  # measured at n = 1 700: 12% faster than 128; no difference at n = 6 000
    if alpha0 is None or not _read(xp, xp.any(alpha0 != 0))[0]:
        alpha = zero
        inW = xp.arange(n, device=dev) % max(n // chunk, 1) == 0 if chunk < n else xp.ones(n, dtype=xp.bool, device=dev)
    else:
        alpha = alpha0
        inW = alpha != 0
    total = 0
    for _ in range(n + 1):
        idx = xp.nonzero(inW)[0]
        m = idx.shape[0]
        Qw = _compat.submatrix(K, idx, xp) if m < n else K
        if shift:
            Qw = Qw + shift * _eye(m, Qw, xp)
        a, its, _exact = _active_set_qp(Qw, xp.take(y, idx), xp.take(lo, idx), xp.take(hi, idx), eps,
                                        xp.take(alpha, idx), max_iter, xp)
        total += its
        alpha = _scatter_idx(idx, a, n, xp)
        sv = xp.nonzero(alpha != 0)[0]  # g = K α from the rows of the support S (|S|·n read); K is symmetric
        g = xp.take(alpha, sv) @ xp.take(K, sv, axis=0) if sv.shape[0] < n else alpha @ K
        primal, dual = gap_fn(alpha, g)
        if primal - dual <= tol * max(1.0, primal):
            return alpha, g, total, True
        if m == n:
            return alpha, g, total, False
        # optimality of αᵢ = 0 for i outside W: the prox step from 0 must stay at 0
        step = -tau * (g + shift * alpha - y)
        viol = xp.abs(xp.minimum(xp.maximum(_soft(step, tau * eps, xp) if eps else step, lo), hi))
        out = xp.where(inW, 0.0, viol)
        n_viol, = _read(xp, xp.sum(xp.astype(out > 0, xp.int64)))
        if n_viol == 0:
            return alpha, g, total, False
        k = int(min(n_viol, max(chunk, m)))
        thr = xp.sort(out)[n - k]
        # shrinking: once W is large against the support, its zeros (optimal at 0) leave it
        n_sv, = _read(xp, xp.sum(xp.astype(alpha != 0, xp.int64)))
        keep = (alpha != 0) if m > 2 * (n_sv + chunk) else inW
        inW = keep | ((out >= thr) & (out > 0))
    return alpha, g, total, False


# --------------------------------------------------------------------------- logistic Newton


def _logistic_newton(K, y, loss, lam_sum, tol, max_iter, xp):
    """Damped Newton for the ℓ2-regularised logistic loss, in α.

    The Newton step in β-space restricted to span{Φ(xᵢ)} solves
    (λI + D K) Δ = −(λα + l′(Kα)), D = diag l″(Kα) (this is the primal Newton
    step Φᵀ(λI + ΦDΦᵀ)… pulled back to α); a backtracking Armijo search on the
    primal P(α + tΔ) (evaluated in O(n) from KΔ) makes it globally convergent.
    """
    n = K.shape[0]
    alpha = xp.zeros_like(y)
    g = xp.zeros_like(y)
    eye = _eye(n, K, xp)
    it = 0
    polished = False
    for it in range(1, max_iter + 1):
        l1 = loss._derivative(g, y, xp)
        primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
        done = primal - dual <= tol * max(1.0, primal)
        if done and polished:
            return alpha, g, it - 1, True
        r = lam_sum * alpha + l1
        e = xp.exp(-xp.abs(y * g))
        l2 = e / (1 + e) ** 2
        delta = _solve_vec(lam_sum * eye + l2[:, None] * K, -r, xp)
        Kd = K @ delta
        slope = float(xp.sum(r * Kd))  # = ∇_β P · Δβ
        if done:
            # one more full Newton step once the gap test passes: the gap bounds ‖β − β*‖ only
            # by √(2·gap/λ), while Newton's quadratic convergence makes this step exact to rounding
            polished = True
            if slope < 0:
                a_t, g_t = alpha + delta, g + Kd
                if _primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= primal:
                    alpha, g = a_t, g_t
            continue
        if not slope < 0:
            return alpha, g, it, False  # no descent left: rounding floor
        t = 1.0
        p0 = primal
        for _ in range(60):
            a_t, g_t = alpha + t * delta, g + t * Kd
            if _primal_from_g(a_t, g_t, y, loss, lam_sum, xp) <= p0 + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return alpha, g, it, False
        alpha, g = a_t, g_t
    l1 = loss._derivative(g, y, xp)
    primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
    dual = _dual_from_g(-l1 / lam_sum, K @ (-l1 / lam_sum), y, loss, lam_sum, xp)
    return alpha, g, max_iter, primal - dual <= tol * max(1.0, primal)


# --------------------------------------------------------------------------- results


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
        Whether the duality gap met gap ≤ tol·max(1, P) (closed forms: True).
    rkhs_norm_ : float
        √(αᵀKα) = ‖β‖.
    beta_error_bound : float
        √(2·gap_sum/λ_sum) ≥ ‖β − β*‖, so |g(x) − g*(x)| ≤ √K(x,x)·beta_error_bound.
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

    @property
    def beta_error_bound(self):
        if self.lam_sum == 0:
            return math.nan
        n = self.alpha_.shape[0]
        gap_sum = self.duality_gap * (n if self.reduction == "mean" else 1)
        return math.sqrt(2 * max(gap_sum, 0.0) / self.lam_sum)

    def predict(self, K_test_train):
        """g(x) = Σᵢ αᵢ K(x, xᵢ) for the rows of ``K_test_train`` (shape (m, n)) → shape (m,).

        ``K_test_train`` must live where the machine was fitted (``alpha_``'s array library and device)."""
        return _predict(self.alpha_, K_test_train, "KernelMachine.predict", "alpha_ (the fitted coefficients)")

    def rkhs_norm(self):
        """‖β‖ = √(αᵀKα)."""
        return self.rkhs_norm_


def _kkt_residual(alpha, g, y, K, loss, lam_sum, xp):
    if loss.name in _QP_LOSSES:
        lo, hi, eps, shift = _qp_bounds(y, loss, lam_sum, xp)
        G = g + shift * alpha - y
        # the solver's scale-free step τ = 1/max Qᵢᵢ (τ = 1 would mix the units of α and g)
        tau = 1.0 / max(float(xp.max(xp.linalg.diagonal(K))) + shift, 1e-300)
        v = alpha - tau * G
        prox = xp.minimum(xp.maximum(_soft(v, tau * eps, xp) if eps else v, lo), hi)
        return float(xp.max(xp.abs(alpha - prox)))
    return float(xp.max(xp.abs(alpha + loss._derivative(g, y, xp) / lam_sum)))


# --------------------------------------------------------------------------- public API


def solve(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, fit_intercept=False):
    r"""Exact minimiser of seed 000 eq. (7) in kernel form, with its certificate.

    .. math::  \min_\beta \frac{\lambda}{2}\|\beta\|^2 + \sum_i l(\langle\beta, \Phi(x_i)\rangle, y_i),
               \quad \beta = \sum_i \alpha_i \Phi(x_i),\ g = K\alpha .

    Parameters
    ----------
    K : array, shape (n, n)
        Gram matrix K(xᵢ, xⱼ), symmetric PSD (see the module docstring for the tolerances).
    y : array, shape (n,)
        Targets; ±1 for ``hinge``, ``squared_hinge`` and ``logistic``.
    loss : str or losses.Loss
        One of ``losses.NAMES`` or a Loss (e.g. ``losses.get("epsilon_insensitive", epsilon=0.5)``).
    lam : float
        λ > 0 (λ = 0 only for ``squared``: kernel regression α = K⁻¹y, K must be nonsingular).
    reduction : {"sum", "mean"}
        "sum" is eq. (7); "mean" divides the loss sum by n (⇔ λ_sum = n·λ); the paper's
        experiments use "mean" (module docstring).
    tol : float, optional
        Relative duality-gap tolerance: stop when gap ≤ tol·max(1, P). Default 1e-10 (float64),
        1e-4 (float32).
    max_iter : int, optional
        Iteration cap of the Newton loop (default 200) / of each active-set solve (default max(1000, 10n)).
    check_psd : bool or {"auto", "cholesky", "lanczos"}
        Verify K ⪰ 0 (to −n·eps·‖K‖_F): "cholesky" certifies it (O(n³/3)); "lanczos" refuses K
        only with a proof of a negative eigenvalue, in 40 mat-vecs (O(40·n²)), and may accept an
        indefinite K (bound in the module's ``_check_psd``); True (default) = "auto": Cholesky for
        n ≤ 4096, Lanczos above; False skips it.
    fit_intercept : bool
        False (default): eq. (7), g = Kα, no bias (the paper's model).  True: the machine with an
        unregularised intercept, f = Kα + b (scikit-learn's ``SVC``/libsvm model), solved exactly by
        :func:`ntkref.kkt.fit_with_intercept`, which returns an ``InterceptMachine`` (a KernelMachine
        with ``intercept_``, ``intercept_interval_`` and its own duality gap and KKT residual).

    Returns
    -------
    KernelMachine
        with ``alpha_``, the duality gap, KKT residual, iterations, convergence flag.

    Notes
    -----
    Cost: squared O(n³) (one solve); QP losses O(n·|W|) per round plus O(|F|³) per active-set
    step (W working set, F free support vectors); logistic O(n³) per Newton step.
    Accuracy: the duality gap bounds the error (module docstring); active-set solutions are
    exact to rounding (relative gap ~1e-15 in float64, ~1e-6 in float32 at n ~ 100).

    A Dask K: every loss, by ``ntkref._dask_machines``: the QP losses exactly by active-set solves on
    working sets of gathered columns (the client holds n·|W|), logistic by Newton-CG with block
    mat-vecs, the squared loss by :func:`ntkref.krr.solve_cg`; the same duality-gap certificate; K
    checked (finite, symmetric) in one pass over its blocks and ``check_psd`` by the Lanczos test
    ("cholesky" is refused: it needs the whole K in one process).

    Where it runs: validation (symmetry, the PSD test), the squared loss (one solve), the
    logistic Newton loop and the active-set solver of ``hinge``, ``squared_hinge`` and
    ``epsilon_insensitive`` run in K's namespace on K's device, reading a few stacked scalars
    per iteration.  For a non-NumPy K with n ≤ 4096 the active-set solver is instead an explicit
    host step: K and y are copied to the host once, solved by the NumPy code, and
    ``alpha_``/``train_output_`` are copied back to K's device (the NumPy solve's result, bit
    for bit).
    """
    caller = "machines.solve"
    if not isinstance(fit_intercept, bool):
        raise InvalidParameterError(
            f"The 'fit_intercept' parameter of {caller} must be True or False. Got {fit_intercept!r} instead."
        )
    if _dask.is_dask(K):  # every loss, by ntkref._dask_machines (working sets of gathered columns / Newton-CG)
        if fit_intercept:
            raise InvalidParameterError(
                f"{caller}: fit_intercept=True is not supported on a Dask Gram; use K.compute() when it fits in "
                f"memory, or the bias-free model (fit_intercept=False)."
            )
        return _dask.solve(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter, check_psd=check_psd)
    if fit_intercept:
        from . import kkt  # (kkt imports this module)

        return kkt.fit_with_intercept(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter,
                                      check_psd=check_psd)
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, caller, psd=check_psd)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    if max_iter is not None:  # checked for every loss (the squared loss's closed form has no iterations)
        max_iter = check_int(max_iter, "max_iter", caller=caller, low=1)
    div = n if reduction == "mean" else 1

    if loss.name == "squared":
        if lam_sum == 0.0:
            delta = n * _eps(K.dtype, xp) * float(xp.linalg.vector_norm(K))
            if not _cholesky_ok(K, -delta, xp):
                raise InvalidParameterError(
                    f"With lam=0 (kernel regression) {caller} needs a nonsingular K, but its smallest eigenvalue is "
                    f"≤ n*eps*||K||_F = {delta:.3g}; use lam > 0."
                )
            alpha = _solve_vec(K, y, xp)
        else:
            alpha = _solve_vec(K + (lam_sum / 2) * _eye(n, K, xp), y, xp)
        g = K @ alpha
        primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _dual_from_g(alpha, g, y, loss, lam_sum, xp) if lam_sum > 0 else 0.0
        kkt = _kkt_residual(alpha, g, y, K, loss, lam_sum, xp) if lam_sum > 0 else float(xp.max(xp.abs(g - y)))
        its, conv = 0, True
        norm2 = float(xp.sum(alpha * g))
    elif loss.name in _QP_LOSSES:
        max_iter = max(1000, 10 * n) if max_iter is None else max_iter

        def qp(K, y, xp):
            lo, hi, eps, shift = _qp_bounds(y, loss, lam_sum, xp)

            last = {}

            def gap_fn(a, g):  # the last evaluation is kept (with its arrays): the solver's final one is the result's
                if last.get("a") is not a or last.get("g") is not g:
                    last.update(a=a, g=g, pd=(_primal_from_g(a, g, y, loss, lam_sum, xp),
                                              _dual_from_g(a, g, y, loss, lam_sum, xp)))
                return last["pd"]

            alpha, g, its, conv = _chunked_qp(K, y, lo, hi, eps, shift, gap_fn, tol, max_iter, xp)
            primal, dual = gap_fn(alpha, g)
            kkt = _kkt_residual(alpha, g, y, K, loss, lam_sum, xp)
            return alpha, g, its, conv, primal, dual, kkt, float(xp.sum(alpha * g))

        alpha, g, its, conv, primal, dual, kkt, norm2 = _on_host(qp, K, y)
    else:  # logistic
        max_iter = 200 if max_iter is None else max_iter
        alpha, g, its, conv = _logistic_newton(K, y, loss, lam_sum, tol, max_iter, xp)
        a_dual = -loss._derivative(g, y, xp) / lam_sum
        g_dual = K @ a_dual
        primal = _primal_from_g(alpha, g, y, loss, lam_sum, xp)
        dual = _dual_from_g(a_dual, g_dual, y, loss, lam_sum, xp)
        if conv:
            # return the representer form α = −l′(g)/λ (stationarity), free of null(K) components when K is
            # singular, if it is certified too (its primal with the same dual); else the certified iterate
            primal_rep = _primal_from_g(a_dual, g_dual, y, loss, lam_sum, xp)
            if primal_rep - dual <= tol * max(1.0, primal_rep):
                alpha, g, primal = a_dual, g_dual, primal_rep
        kkt = _kkt_residual(alpha, g, y, K, loss, lam_sum, xp)
        norm2 = float(xp.sum(alpha * g))
    _check_finite_solution(caller, K, y, lam, xp, primal, dual, kkt, alpha)
    if not conv:
        warnings.warn(
            f"{caller}: the {loss.name} solver stopped with duality gap {primal - dual:.3g} > "
            f"tol·max(1, P) = {tol * max(1.0, primal):.3g} after {its} iterations.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=lam, lam_sum=lam_sum, reduction=reduction,
        primal_objective=primal / div, dual_objective=dual / div, duality_gap=(primal - dual) / div,
        kkt_residual=kkt, n_iter=its, converged=bool(conv),
        rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g,
    )


def fit(K, y, loss, lam, *, reduction="sum", tol=None, max_iter=None, check_psd=True, fit_intercept=False):
    r"""Coefficients α (shape (n,), g = Kα) of the exact minimiser of seed 000 eq. (7).

    Same as ``solve(...).alpha_``; see :func:`solve` for the parameters, the
    conventions (sum/mean, no bias, squared loss without ½) and the accuracy.
    With ``fit_intercept=True`` it returns the pair ``(alpha, b)`` of the machine f = Kα + b.
    """
    m = solve(K, y, loss, lam, reduction=reduction, tol=tol, max_iter=max_iter, check_psd=check_psd,
              fit_intercept=fit_intercept)
    return (m.alpha_, m.intercept_) if fit_intercept else m.alpha_


def hard_margin_svm(K, y, *, tol=None, max_iter=None, C_max=None, check_psd=True):
    r"""Hard-margin SVM: min ½‖β‖² s.t. yᵢ g(xᵢ) ≥ 1 — the λ → 0 limit of the hinge machine (Table 1).

    Dual: max yᵀα − ½αᵀKα s.t. yᵢαᵢ ≥ 0.  Solved as soft-margin SVMs with C = 1/λ
    growing tenfold (warm-started) until no coefficient sits at its upper bound C:
    that soft-margin solution satisfies the hard-margin KKT conditions exactly, so
    soft margin = hard margin for every λ ≤ 1/max yᵢαᵢ.

    Raises
    ------
    InvalidParameterError
        If the data are not separable in the RKHS with geometric margin ≥ 1/√C_max
        (C_max default 1e12/mean Kᵢᵢ): if a hard-margin β* existed, ‖β*‖² = Σ yᵢαᵢ* ≥ max yᵢαᵢ*,
        so a solution needing C > C_max has margin 1/‖β*‖ < 1/√C_max.

    Returns
    -------
    KernelMachine
        ``lam = 0``; primal ½αᵀKα, dual yᵀα − ½αᵀKα, ``kkt_residual`` = max(0, 1 − min yᵢgᵢ).

    Notes
    -----
    Validation runs on K's device; so does the soft-margin path (active-set solves), except for a
    non-NumPy K with n ≤ 4096, an explicit host step as in :func:`solve`.
    """
    caller = "machines.hard_margin_svm"
    loss = _losses.get("hinge")
    K, y, loss, _, _, xp = _prepare(K, y, loss, 1.0, "sum", caller, psd=check_psd)
    n = K.shape[0]
    tol = _default_tol(K.dtype, xp) if tol is None else check_real(tol, "tol", caller=caller, low=0.0, closed="right")
    max_iter = max(1000, 10 * n) if max_iter is None else check_int(max_iter, "max_iter", caller=caller, low=1)
    scale = float(xp.mean(xp.linalg.diagonal(K)))
    if scale <= 0:
        raise InvalidParameterError(f"The 'K' parameter of {caller} is zero on the diagonal: no point can be separated.")
    C_max = 1e12 / scale if C_max is None else check_real(C_max, "C_max", caller=caller, low=0.0, closed="right")

    def soft_margin_path(K, y, xp):
        C = min(1.0 / scale, C_max)
        alpha = None
        its_total = 0
        while True:
            lam = 1.0 / C
            lo, hi, _, _ = _qp_bounds(y, loss, lam, xp)

            def gap_fn(a, g, lam=lam):
                return (_primal_from_g(a, g, y, loss, lam, xp), _dual_from_g(a, g, y, loss, lam, xp))

            alpha, g, its, conv = _chunked_qp(K, y, lo, hi, 0.0, 0.0, gap_fn, tol, max_iter, xp, alpha0=alpha)
            its_total += its
            at_bound = bool(xp.any(y * alpha >= C * (1 - 1e-9)))
            if not at_bound:
                break
            if C >= C_max:
                raise InvalidParameterError(
                    f"The data given to {caller} are not separable in the RKHS of K with geometric margin "
                    f">= 1/sqrt(C_max) = {1 / math.sqrt(C_max):.3g} (soft-margin SVM with C = {C:.3g} still has "
                    "coefficients at the bound C). Use a soft margin (machines.fit(K, y, 'hinge', lam))."
                )
            C = min(10.0 * C, C_max)
            if alpha is not None and not bool(xp.any(alpha != 0)):
                alpha = None
        norm2 = float(xp.sum(alpha * g))
        dual = float(xp.sum(y * alpha)) - 0.5 * norm2
        infeas = max(0.0, 1.0 - float(xp.min(y * g)))
        return alpha, g, its_total, norm2, dual, infeas

    alpha, g, its_total, norm2, dual, infeas = _on_host(soft_margin_path, K, y)
    primal = 0.5 * norm2
    _check_finite_solution(caller, K, y, 0.0, xp, primal, dual, infeas, alpha)
    conv = primal - dual <= tol * max(1.0, primal) and infeas <= math.sqrt(tol)
    if not conv:
        warnings.warn(f"{caller}: gap {primal - dual:.3g}, margin violation {infeas:.3g}.", ConvergenceWarning, stacklevel=2)
    return KernelMachine(
        alpha_=alpha, loss=loss, lam=0.0, lam_sum=0.0, reduction="sum", primal_objective=primal,
        dual_objective=dual, duality_gap=primal - dual, kkt_residual=infeas, n_iter=its_total,
        converged=bool(conv), rkhs_norm_=math.sqrt(max(norm2, 0.0)), train_output_=g,
    )


def predict(alpha, K_test_train):
    r"""g(x) = Σᵢ αᵢ K(x, xᵢ) for each row x of ``K_test_train`` (shape (m, n)) → shape (m,).

    A Dask ``K_test_train`` gives a lazy Dask result (per block, summed over column chunks)."""
    return _predict(alpha, K_test_train, "machines.predict", "alpha")


def _predict(alpha, K_test_train, caller, alpha_name):
    if _dask.is_dask(K_test_train):
        return _dask.predict(alpha, K_test_train)
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
    every finite α and K, e.g. α ~ 1e300 where αᵀKα itself overflows."""
    K = _check_gram(K, "machines.rkhs_norm", psd=check_psd)
    xp = namespace(K)
    alpha = check_array(alpha, "alpha", caller="machines.rkhs_norm", xp=xp, shape=(K.shape[0],), like=K)
    # scale-free: α = 2^a·ᾱ, K = 4^k·K̄ (powers of two: exact, so results at ordinary scales are unchanged bit
    # for bit) and ‖β‖ = 2^(a+k)·√(ᾱᵀK̄ᾱ), finite for α ~ 1e300 or K ~ 1e300 (αᵀKα itself would overflow)
    a_max, k_max = _read(xp, xp.max(xp.abs(alpha)), xp.max(xp.abs(K)))
    if a_max == 0.0 or k_max == 0.0:
        return 0.0
    ea, ek = _pow2_exponent(a_max), _pow2_exponent(k_max) // 2
    a_bar, K_bar = alpha * 2.0 ** -ea, K * 4.0 ** -ek
    return math.ldexp(math.sqrt(max(float(a_bar @ (K_bar @ a_bar)), 0.0)), ea + ek)


def _pow2_exponent(m):
    """e with 2^e ≈ m (frexp's exponent, kept in ±1000 so that 2^-e is a finite float)."""
    return max(min(math.frexp(m)[1], 1000), -1000)


def objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Primal value P(α) = (λ/2)αᵀKα + Σ l((Kα)ᵢ, yᵢ) (``reduction="mean"``: loss term / n).

    This is eq. (7) at β = Σ αᵢ Φ(xᵢ).  K is checked square/symmetric but not PSD.  Finite or error: a value
    beyond the float range (e.g. α or y ~ 1e300) is an InvalidParameterError naming the input at fault.
    """
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, "machines.objective", psd=False)
    alpha = check_array(alpha, "alpha", caller="machines.objective", xp=xp, shape=(K.shape[0],), like=K)
    overflow = lambda: _overflow_error("machines.objective", "objective", K, y, lam, xp, alpha=alpha)  # noqa: E731
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is reported below, naming the input
            val = _primal_from_g(alpha, K @ alpha, y, loss, lam_sum, xp)
    except InvalidParameterError as exc:  # the loss's own overflow check: it names z = Kα, not an input
        raise overflow() from exc
    if not math.isfinite(val):  # finite inputs, overflowing products: an error naming the input at fault
        raise overflow()
    return val / (K.shape[0] if reduction == "mean" else 1)


def dual_objective(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""Fenchel dual D(α) = −Σ lᵢ*(−λαᵢ) − (λ/2)αᵀKα (−inf outside the dual domain).

    Weak duality: D(α′) ≤ P(α) for all α, α′ (K PSD); equality at the optimum.  A dual-feasible α whose
    value overflows (e.g. the squared loss at α ~ 1e300) is an InvalidParameterError naming the input.
    """
    K, y, loss, lam, lam_sum, xp = _prepare(K, y, loss, lam, reduction, "machines.dual_objective", psd=False,
                                            allow_zero=False)
    alpha = check_array(alpha, "alpha", caller="machines.dual_objective", xp=xp, shape=(K.shape[0],), like=K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an overflow is an error naming the input (on_overflow)
        val = _dual_from_g(alpha, K @ alpha, y, loss, lam_sum, xp, on_overflow=lambda: _overflow_error(
            "machines.dual_objective", "dual objective", K, y, lam, xp, alpha=alpha))
    return val / (K.shape[0] if reduction == "mean" else 1)


def duality_gap(alpha, K, y, loss, lam, *, reduction="sum"):
    r"""P(α) − D(α̃) ≥ P(α) − P*: α̃ = α for the nonsmooth losses; for the smooth ones the better (larger) of
    D(α) and D(−l′(Kα)/λ), both lower bounds on P* by weak duality (α itself can be dual-feasible yet a poor
    dual point, e.g. an optimal α with a null(K) component)."""
    P = objective(alpha, K, y, loss, lam, reduction=reduction)
    D = dual_objective(alpha, K, y, loss, lam, reduction=reduction)
    loss_obj = _get_loss(loss, "machines.duality_gap")
    if loss_obj.smoothness is not None:
        K = K.K if isinstance(K, CheckedGram) else K
        xp = namespace(K)
        Kx = check_array(K, "K", xp=xp)
        n = Kx.shape[0]
        lam_sum = lam * n if reduction == "mean" else lam
        a = check_array(alpha, "alpha", xp=xp, like=Kx)
        yy = xp.astype(check_array(y, "y", xp=xp, like=Kx), Kx.dtype)
        ad = -loss_obj.derivative(Kx @ a, yy) / lam_sum
        D = max(D, dual_objective(ad, K, y, loss, lam, reduction=reduction))
    return P - D
