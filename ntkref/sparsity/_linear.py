r"""The linear toy of seed 003 §3.2.3: the model f_θ(x) = θ·x and the Gaussian-mixture example ((3.15), Table 3.1).

- :class:`LinearModel` — f_θ(x) = θ·x with the net interface of the package, so masks, the AWT objective and the
  search treat it like a one-layer net;
- the mixture ½N(μ, σ²I) + ½N(−μ, σ²I) and the analytic accuracies of sgn(θ·x) on it, (3.15) —
  :func:`normal_cdf`, :func:`gaussian_mixture`, :func:`linear_gmm_accuracy`,
  :func:`linear_gmm_adversarial_accuracy`, :func:`direction_angle`;
- the directions of Table 3.1: the linear SVM (by :func:`ntkref.machines.fit`, seed 000 eq. (7)) —
  :func:`svm_direction`; exact adversarial training (3.1) of θ·x with the squared loss, certified by a duality
  gap — :func:`adversarial_linear_direction`.

The shared checks (``check_params``, ``NORMS``, ``scaled``) come from :mod:`ntkref.sparsity._masks`.  The errata of
Table 3.1 and (3.15) are in the package docstring (:mod:`ntkref.sparsity`).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import machines
from .._lib.backend import device_of, namespace, to_numpy
from .._lib.compat import erf
from .._lib.validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_labels,
    check_option,
    check_real,
)
from ..nets._common import init_target
from ._masks import NORMS, check_params, scaled


# ==================================================================================================
# the linear model of §3.2.3
# ==================================================================================================
class LinearModel:
    r"""The linear score f_θ(x) = θ·x of seed 003 §3.2.3 (no bias), with the net interface of this module.

    ``params = [(W, None)]`` with ``W`` of shape (d, 1) holding θ, so masks, the AWT objective and the
    search treat it like a one-layer net: h₀ = x, δ₀ = 1, c₀ = 1, J(x) = x, Θ(x, x′) = x·x′.
    """

    depth = 0

    def __init__(self, d_in):
        self.d_in = check_int(d_in, "d_in", caller="LinearModel", low=1)
        self.W_std = (1.0,)
        self.b_std = (0.0,)
        self.fan_in = (self.d_in,)
        self.fan_out = (1,)
        self.layer_scales = (1.0,)  # z = h W (no 1/√fan_in): f = θ·x exactly

    def __repr__(self):
        return f"LinearModel(d_in={self.d_in})"

    @property
    def n_params(self):
        return self.d_in

    def init(self, seed, *, xp=None, dtype=None, device=None):
        """θ ~ N(0, I_d) from ``numpy.random.default_rng(seed)``, as ``[(θ[:, None], None)]``.

        Drawn on the host and copied to ``xp`` (default: the ``NTKREF_BACKEND`` namespace) on ``device`` (default:
        ``NTKREF_DEVICE`` when ``xp`` is the default namespace, else the namespace's default device)."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        xp, dtype, device = init_target(xp, dtype, device, "LinearModel.init")
        return [(xp.asarray(rng.standard_normal((self.d_in, 1)), dtype=dtype, device=device), None)]

    @staticmethod
    def from_direction(theta):
        """``[(θ[:, None], None)]`` for a 1-D array θ."""
        xp = namespace(theta)
        theta = check_array(theta, "theta", caller="LinearModel.from_direction", ndim=1, xp=xp)
        return [(xp.reshape(theta, (-1, 1)), None)]

    def _check(self, params, x, name="x"):
        check_params(self, params, "params", "LinearModel")  # [(W, None)], W of shape (d, 1), finite and real
        W = params[0][0]
        xp = namespace(W, x)
        x = check_array(x, name, caller="LinearModel", ndim=2, xp=xp, dtype=W.dtype)
        if x.shape[1] != self.d_in:
            raise InvalidParameterError(f"{name} has {x.shape[1]} features; the model expects d_in = {self.d_in}.")
        return xp, x

    def apply(self, params, x):
        xp, x = self._check(params, x)
        return (x @ params[0][0])[:, 0]

    def features(self, params, x, *, name="x"):
        xp, x = self._check(params, x, name)
        return [x], [xp.ones((x.shape[0], 1), dtype=x.dtype, device=device_of(x))], xp

    def jacobian(self, params, x):
        xp, x = self._check(params, x)
        return x

    def vjp(self, params, x, cotangent):
        xp, x = self._check(params, x)
        c = check_array(cotangent, "cotangent", caller="LinearModel.vjp", ndim=1, xp=xp, shape=(x.shape[0],))
        return [(xp.matrix_transpose(x) @ xp.reshape(c, (-1, 1)), None)]

    def empirical_ntk(self, params, x1, x2=None):
        xp, x1 = self._check(params, x1, "x1")
        if x2 is None:
            return x1 @ xp.matrix_transpose(x1)
        _, x2 = self._check(params, x2, "x2")
        return x1 @ xp.matrix_transpose(x2)

    def input_gradient(self, params, x):
        xp, x = self._check(params, x)
        return xp.zeros_like(x) + xp.reshape(params[0][0], (1, -1))


# ==================================================================================================
# the Gaussian-mixture toy example (§3.2.3, (3.15), Table 3.1)
# ==================================================================================================
def normal_cdf(z):
    """Φ(z) = ½(1 + erf(z/√2)) elementwise (absolute accuracy ~1e-16 in float64).

    ``z`` is any real array (integers and booleans become float64; lists become arrays on the default device);
    ±inf are valid and give the limits Φ(−∞) = 0, Φ(+∞) = 1; NaN is refused."""
    z = check_array(z, "z", caller="normal_cdf", finite=False)
    xp = namespace(z)
    if z.size and bool(xp.any(xp.isnan(z))):
        raise InvalidParameterError("The 'z' parameter of normal_cdf contains NaN values.")
    return _normal_cdf(z)


def _normal_cdf(z):
    """normal_cdf without checks (for the functions of this module)."""
    xp = namespace(z)
    return 0.5 * (1.0 + erf(z / math.sqrt(2.0), xp))


def gaussian_mixture(n, d=100, *, mu_norm=3.0, sigma=1.0, seed=None, xp=None, dtype=None, device=None):
    r"""Sample the mixture ½N(μ, σ²I) + ½N(−μ, σ²I) of seed 003 §3.2.3 with μ = (‖μ‖, 0, …, 0).

    y ~ uniform{−1, +1}, x = yμ + σ·ξ, ξ ~ N(0, I_d) (μ₊ = μ = −μ₋, so μ = ½(μ₊ − μ₋) as in (3.15)).
    The seed's Table 3.1 uses n = 5000, d = 100, ‖μ‖ = 3, σ = 1.  Returns (x (n, d), y (n,), μ (d,)), drawn
    with ``numpy.random.default_rng(seed)`` and moved to ``xp`` (default: the ``NTKREF_BACKEND`` namespace) on
    ``device`` (default: ``NTKREF_DEVICE`` for the default namespace).
    """
    caller = "gaussian_mixture"
    n = check_int(n, "n", caller=caller, low=1)
    d = check_int(d, "d", caller=caller, low=1)
    mu_norm = check_real(mu_norm, "mu_norm", caller=caller, low=0.0)
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    xp, dtype, device = init_target(xp, dtype, device, caller)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    mu = np.zeros(d)
    mu[0] = mu_norm
    x = y[:, None] * mu[None, :] + sigma * rng.standard_normal((n, d))
    return (xp.asarray(x, dtype=dtype, device=device), xp.asarray(y, dtype=dtype, device=device),
            xp.asarray(mu, dtype=dtype, device=device))


def _theta_mu(theta, mu, caller):
    """Validated θ and μ, rescaled: returns (xp, θ̂ = θ/max|θ| per row, μ̂ = μ/max|μ|, ‖θ̂‖₂, max|μ|).

    Everything in (3.15) depends on θ only through its direction, so working with θ̂ loses nothing and makes the
    formulas exact up to rounding for any finite nonzero θ (no overflow of ‖θ‖², no underflow to 0)."""
    xp = namespace(theta, mu)
    theta = check_array(theta, "theta", caller=caller, ndim=(1, 2), xp=xp)
    mu = check_array(mu, "mu", caller=caller, ndim=1, xp=xp, shape=(theta.shape[-1],), dtype=theta.dtype)
    th, tscale = scaled(theta, xp)
    if not bool(xp.all(tscale > 0)):
        raise InvalidParameterError(f"The 'theta' parameter of {caller} must be nonzero (it defines sgn(θ·x)).")
    mh, mscale = scaled(mu, xp)
    return xp, th, mh, xp.linalg.vector_norm(th, axis=-1), mscale[0]


def linear_gmm_accuracy(theta, mu, sigma=1.0):
    r"""Natural accuracy of sgn(θ·x) on ½N(μ, σ²I) + ½N(−μ, σ²I): Φ(θ·μ/(‖θ‖σ)) = Φ(‖μ‖cos γ/σ).

    y θ·x ~ N(θ·μ, σ²‖θ‖²) for either class, hence the formula (the 1 − p_m of (3.15)).  ``theta`` (d,) or
    (k, d) (one direction per row); returns a 0-d or (k,) array.  Exact up to erf's rounding (~1e-16), for any
    finite nonzero scale of θ (it is rescaled by its largest entry first).
    """
    xp, th, mh, nrm, mscale = _theta_mu(theta, mu, "linear_gmm_accuracy")
    sigma = check_real(sigma, "sigma", caller="linear_gmm_accuracy", low=0.0, closed="neither")
    return _normal_cdf(((th @ mh) / nrm) * (mscale / sigma))


def linear_gmm_adversarial_accuracy(theta, mu, sigma=1.0, eps=2.0, *, norm="l2", include_pm=True):
    r"""Seed 003 (3.15): adversarial accuracy of sgn(θ·x) on the Gaussian mixture.

    .. math::  p_{adv-acc} = p_m + Φ\Big(\frac{θ·μ}{‖θ‖_2σ} - \frac{ε\,‖θ‖_*}{‖θ‖_2σ}\Big),\qquad
               p_m = Φ\Big(-\frac{θ·μ}{‖θ‖_2σ}\Big),

    ‖θ‖_* the dual norm of the attack (ℓ2 attack: ‖θ‖₂, the seed's ε/σ; ℓ∞ attack: ‖θ‖₁, an extension).
    The worst perturbation moves y θ·x by −ε‖θ‖_*, so a point is *robust* iff yθ·x > ε‖θ‖_*:
    P = Φ(·) above.  p_adv (the probability that a correctly classified point has an adversarial example)
    = (1 − p_m) − Φ(·), so 1 − p_adv = p_m + Φ(·): the seed's quantity counts misclassified points as
    not attackable, and Table 3.1's "Robustness" row uses it (ε = 2, ℓ2; see the module notes).
    ``include_pm=False`` gives the usual robust accuracy Φ(·) (correct and robust).
    """
    caller = "linear_gmm_adversarial_accuracy"
    xp, th, mh, nrm, mscale = _theta_mu(theta, mu, caller)
    sigma = check_real(sigma, "sigma", caller=caller, low=0.0, closed="neither")
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    a = ((th @ mh) / nrm) * (mscale / sigma)
    dual = nrm if norm == "l2" else xp.sum(xp.abs(th), axis=-1)
    robust = _normal_cdf(a - (dual / nrm) * (eps / sigma))
    return _normal_cdf(-a) + robust if include_pm else robust


def direction_angle(theta, mu):
    r"""Angle γ ∈ [0, π] between θ and μ (rows of ``theta``), computed stably as 2·atan2(‖θ̂ − μ̂‖, ‖θ̂ + μ̂‖).

    The stable form is accurate to ~1e-16 rad also near 0 and π, where arccos(cos γ) loses half the digits.  θ and
    μ are rescaled by their largest entry first, so any finite nonzero scale (1e-300 … 1e300) gives the same angle.
    """
    xp, th, mh, nrm, mscale = _theta_mu(theta, mu, "direction_angle")
    if not bool(mscale > 0):
        raise InvalidParameterError("The 'mu' parameter of direction_angle must be nonzero.")
    th = th / (nrm[..., None] if th.ndim == 2 else nrm)
    mh = mh / xp.linalg.vector_norm(mh)
    return 2.0 * xp.atan2(xp.linalg.vector_norm(th - mh, axis=-1), xp.linalg.vector_norm(th + mh, axis=-1))


def svm_direction(x, y, *, lam=None, C=1.0, mask=None):
    r"""Direction θ = Xᵀα of the linear soft-margin SVM (hinge loss, no bias) on (x, y).

    Solved exactly in the dual by :func:`ntkref.machines.fit` with the linear kernel K = XXᵀ and the *sum*
    loss (seed 000 eq. (7)): λ = 1/C unless ``lam`` is given.  ``mask`` (d,) 0/1 restricts θ to a support
    (features outside it are dropped).  Cost O(n²d) memory n² — meant for n ≲ 5000.
    """
    caller = "svm_direction"
    xp = namespace(x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    y = check_labels(y, "y", caller=caller, xp=xp)
    if y.shape[0] != x.shape[0]:
        raise InvalidParameterError(f"The 'y' parameter of {caller} must have {x.shape[0]} entries.")
    lam = 1.0 / check_real(C, "C", caller=caller, low=0.0, closed="neither") if lam is None else lam
    xm = x if mask is None else x * xp.reshape(_check_direction_mask(mask, x, caller), (1, -1))
    K = xm @ xp.matrix_transpose(xm)
    if K.size and not bool(xp.all(xp.isfinite(K))):
        raise InvalidParameterError(
            f"The 'x' parameter of {caller} is too large: its linear kernel XXᵀ overflows {x.dtype} "
            f"(max |x| = {float(xp.max(xp.abs(x))):.3g}); rescale x (θ(s·x, λ) = θ(x, λ/s²)/s).")
    alpha = machines.fit(K, y, "hinge", lam)
    return xp.matrix_transpose(xm) @ alpha


def _check_direction_mask(mask, x, caller):
    """A (d,) 0/1 mask over the features of ``x`` (a (d, 1) LinearModel mask is accepted and flattened)."""
    xp = namespace(x)
    d = x.shape[1]
    m = check_array(mask, "mask", caller=caller, ndim=(1, 2), xp=xp, dtype=x.dtype, like=x)
    if tuple(m.shape) not in ((d,), (d, 1)):
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must have shape ({d},) (one entry per feature of 'x'); "
            f"got {tuple(m.shape)}.")
    m = xp.reshape(m, (d,))
    if not bool(xp.all((m == 0) | (m == 1))):
        raise InvalidParameterError(f"The 'mask' parameter of {caller} must contain only 0 and 1.")
    return m


def _alin_primal(X, Y, eps, norm, t):
    """P(θ) = (1/N) Σ ½(|xᵢ·θ − yᵢ| + ε‖θ‖_*)² on the host."""
    n_t = np.linalg.norm(t) if norm == "l2" else np.abs(t).sum()
    return 0.5 * np.mean((np.abs(X @ t - Y) + eps * n_t) ** 2)


def _alin_gap(X, Y, eps, norm, t, zero_tol):
    r"""Duality gap P(θ) − D(α, λ) ≥ P(θ) − P* at a dual point built from θ (ε > 0).

    The dual of min_θ (1/N)Σ ½(|rᵢ| + ε‖θ‖_*)² (from ½g² = max_λ λg − ½λ², λ|r| = max_{|α|≤λ} αr and
    ελ̄‖θ‖_* = max_{‖v‖≤ελ̄} v·θ) is  max −(1/N)(α·y + ½‖λ‖²)  s.t. |αᵢ| ≤ λᵢ, ‖Xᵀα‖ ≤ εΣλᵢ  (‖·‖ the attack
    norm: ℓ2, or ℓ∞ for the ℓ∞ attack).  At the optimum λᵢ = gᵢ = |rᵢ| + ε‖θ‖_*, αᵢ = gᵢ sign(rᵢ) where rᵢ ≠ 0;
    the αᵢ of residuals within ``zero_tol`` of 0 are fitted by least squares to stationarity, clipped to
    [−gᵢ, gᵢ], and λ is raised uniformly until ‖Xᵀα‖ ≤ εΣλ (then the point is dual feasible: weak duality)."""
    N = X.shape[0]
    r = X @ t - Y
    n_t = np.linalg.norm(t) if norm == "l2" else np.abs(t).sum()
    g = np.abs(r) + eps * n_t
    alpha = g * np.sign(r)
    Z = np.abs(r) <= zero_tol
    if norm == "l2":
        u = t / n_t if n_t > 0 else np.zeros_like(t)
    else:
        u = np.sign(t)
    if np.any(Z):
        alpha[Z] = 0.0
        target = -(X.T @ alpha) - eps * g.sum() * u
        # ℓ1 dual norm: at a zero coordinate of θ the subgradient is anywhere in [−1, 1], so only the nonzero
        # coordinates pin α_Z (the others need |(Xᵀα)_j| ≤ εΣλ only)
        rows = np.ones(X.shape[1], bool) if norm == "l2" else u != 0
        if np.any(rows):
            a_z = np.linalg.lstsq(X[Z][:, rows].T, target[rows], rcond=None)[0]
            alpha[Z] = np.clip(a_z, -g[Z], g[Z])
    lam = g.copy()
    c = np.linalg.norm(X.T @ alpha, ord=2 if norm == "l2" else np.inf)
    if c > eps * lam.sum():
        lam += (c - eps * lam.sum()) / (eps * N)
    dual = -(alpha @ Y + 0.5 * lam @ lam) / N
    return 0.5 * np.mean(g ** 2) - dual


def _alin_polish(X, Y, eps, norm, t, zero_tol):
    """Active-set Newton from θ: fix the residuals within ``zero_tol`` of 0 at 0 (and, for the ℓ1 dual norm, the
    coordinates within ``zero_tol`` of 0 at 0), fix the other signs, and minimise the now smooth objective on that
    affine piece (quadratic for ℓ1, damped Newton for ℓ2).  A step that would flip a fixed sign stops at the kink
    (ratio test) and adds that residual/coordinate to the zero set, so every iterate stays on its piece and P
    decreases monotonically."""
    N, d = X.shape
    r = X @ t - Y
    Z = np.abs(r) <= zero_tol * (1.0 + np.abs(Y).max(initial=0.0))
    s_r = np.sign(r)
    free = np.ones(d, bool) if norm == "l2" else np.abs(t) > zero_tol * (1.0 + np.abs(t).max(initial=0.0))
    s_t = np.sign(t)
    t = np.where(free, t, 0.0)
    for _ in range(2 * (N + d) + 2):  # each restart adds one kink: at most N + d of them
        if not np.any(free):
            return np.zeros(d)
        XF, idx = X[:, free], np.flatnonzero(free)
        if np.any(Z):
            A = XF[Z]
            tp = np.linalg.lstsq(A, Y[Z], rcond=None)[0]
            _, sv, Vt = np.linalg.svd(A)
            rank = int(np.sum(sv > sv[0] * max(A.shape) * np.finfo(float).eps)) if sv.size and sv[0] > 0 else 0
            B = Vt[rank:].T
        else:
            tp, B = np.zeros(idx.size), np.eye(idx.size)
        if B.shape[1] == 0:
            out = np.zeros(d)
            out[free] = tp
            return out
        nz = ~Z
        st = s_t[free]

        def piece(tf):  # objective on the piece (signs fixed), gradient and Hessian in θ_F
            if norm == "l2":
                nt = np.linalg.norm(tf)
                dn = tf / nt if nt > 0 else np.zeros_like(tf)
                d2n = (np.eye(tf.size) - np.outer(dn, dn)) / nt if nt > 0 else np.zeros((tf.size, tf.size))
            else:
                nt, dn, d2n = st @ tf, st, np.zeros((tf.size, tf.size))
            gi = s_r[nz] * (XF[nz] @ tf - Y[nz]) + eps * nt
            a = s_r[nz, None] * XF[nz] + eps * dn[None, :]
            nZ = int(Z.sum())
            val = 0.5 * (gi @ gi + nZ * (eps * nt) ** 2) / N
            grad = (a.T @ gi + nZ * eps ** 2 * nt * dn) / N
            hess = (a.T @ a + eps * gi.sum() * d2n + nZ * eps ** 2 * (np.outer(dn, dn) + nt * d2n)) / N
            return val, grad, hess

        z = np.linalg.lstsq(B, t[free] - tp, rcond=None)[0]
        hit = None
        for _ in range(100):
            tf = tp + B @ z
            val, grad, hess = piece(tf)
            gz, Hz = B.T @ grad, B.T @ hess @ B
            try:
                step = -np.linalg.solve(Hz, gz)
            except np.linalg.LinAlgError:
                step = -np.linalg.lstsq(Hz, gz, rcond=None)[0]
            dt = B @ step
            # ratio test: the first fixed sign (residual off Z, or free coordinate for ℓ1) the step would flip
            a_max, hit = 1.0, None
            r_now, dr = XF[nz] @ tf - Y[nz], XF[nz] @ dt
            with np.errstate(divide="ignore", invalid="ignore"):
                ar = np.where(s_r[nz] * dr < 0, -r_now / dr, np.inf)
            if ar.size and ar.min() < a_max:
                a_max, hit = ar.min(), ("r", np.flatnonzero(nz)[np.argmin(ar)])
            if norm == "linf":
                with np.errstate(divide="ignore", invalid="ignore"):
                    at = np.where(st * dt < 0, -tf / dt, np.inf)
                if at.min() < a_max:
                    a_max, hit = at.min(), ("t", idx[np.argmin(at)])
            a = max(a_max, 0.0)
            while a > 1e-14 and piece(tp + B @ (z + a * step))[0] > val + 1e-4 * a * (gz @ step) + 1e-16 * abs(val):
                a *= 0.5
                hit = None
            z = z + a * step
            if hit is not None:
                break
            if np.linalg.norm(a * step) <= 1e-15 * (1.0 + np.linalg.norm(z)):
                break
        t = np.zeros(d)
        t[free] = tp + B @ z
        if hit is None:
            return t
        if hit[0] == "r":
            Z[hit[1]] = True
        else:
            free[hit[1]] = False
            t[hit[1]] = 0.0
    return t


def adversarial_linear_direction(x, y, eps, *, norm="l2", mask=None, tol=1e-12, max_iter=10_000,
                                 return_certificate=False):
    r"""Adversarially trained linear direction: argmin_θ P(θ) = (1/N) Σᵢ ½(|θ·xᵢ − yᵢ| + ε‖θ‖_*)².

    This is the exact adversarial-training objective (3.1) of f_θ(x) = θ·x with the squared loss ½(f − y)²
    of Ch. 3: max over ‖r‖ ≤ ε of |θ·(x + r) − y| is |θ·x − y| + ε‖θ‖_* (‖·‖_* dual to the attack norm: ℓ2 for
    ``norm="l2"``, ℓ1 for ``"linf"``).  P is convex but not smooth: its minimiser typically interpolates some
    points exactly (rᵢ = 0, the |r| kinks) and, for the ℓ1 dual norm, has zero coordinates.

    Host-side reference solver (SciPy/NumPy; the problem is a small convex program): L-BFGS-B from the
    least-squares solution, then an active-set Newton polish (residuals and, for ℓ1, coordinates near 0 fixed at
    0, the smooth piece minimised exactly), keeping the candidate (also θ = 0) with the lowest P.  The result is
    **certified** by a dual feasible point (see ``_alin_gap``): gap = P(θ) − D ≥ P(θ) − P*, floored at 4·N·eps·P,
    the rounding of P and D (a gap computed as 0 certifies nothing finer).  With
    μ = λ_min(XᵀX/N) > 0 (P is μ-strongly convex), ‖θ − θ*‖₂ ≤ √(2·gap/μ).  ε = 0 is least squares (lstsq) with
    gap ½∇Pᵀ(XᵀX/N)⁺∇P.  If the gap exceeds ``tol``·(m² + P), m = 2^⌈log₂ max|yᵢ|⌉ (P and the gap scale like y²),
    a RuntimeWarning says so (measured: computed gaps ≲ 1e-15·P on random instances, so the floor is what is
    reported there; θ errors ≲ 1e-8 against an independent SLSQP epigraph solve).

    Scale-free: θ*(X, ty, ε) = tθ*(X, y, ε) and θ*(sX, y, sε) = θ*(X, y, ε)/s; the solver works on X and y divided
    by powers of two (exact), so these hold bit for bit for powers of two t, s (away from under/overflow of θ).
    A θ* beyond the dtype's range is refused ('y').

    ``mask`` (d,) 0/1 restricts θ to a support (sparse adversarial training).  Returns θ (d,) in x's namespace,
    or (θ, {"objective": P(θ), "gap": gap, "theta_error_bound": √(2 gap/μ) or inf}) if ``return_certificate``.
    """
    from scipy.optimize import minimize  # host-side reference solver

    caller = "adversarial_linear_direction"
    xp = namespace(x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    y = check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(x.shape[0],), dtype=x.dtype)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    tol = check_real(tol, "tol", caller=caller, low=0.0, closed="neither")
    max_iter = check_int(max_iter, "max_iter", caller=caller, low=1)
    X, Y = to_numpy(x), to_numpy(y)
    n, d = X.shape
    if mask is None:
        keep = np.arange(d)
    else:
        keep = np.flatnonzero(to_numpy(_check_direction_mask(mask, x, caller)))
    # Scale invariance: P(θ; X, ε) = P(sθ; X/s, ε/s).  Solve with X/s, s = 2^e the power of two that puts max|X| in
    # [1/2, 1) (exact division), so XᵀX and the solver's tolerances neither overflow nor underflow, then θ = θ'/s.
    def unscale(v, k):  # v·2^k in float64, rounded once; inf beyond the largest float
        try:
            return math.ldexp(v, k)
        except OverflowError:
            return math.inf

    amax = float(np.abs(X).max(initial=0.0))
    e_x = math.frexp(amax)[1] if amax > 0 else 0
    X = np.ldexp(X, -e_x)
    eps = unscale(eps, -e_x)
    # Homogeneity in y: P(tθ; X, ty, ε) = t²P(θ; X, y, ε), so θ*(X, ty, ε) = tθ*(X, y, ε).  Solve with y/2^f, max|y|/2^f
    # in [1/2, 1) (exact), so the solver's tolerances (absolute, in units of that y) are scale-free, then θ = 2^f θ'.
    ymax = float(np.abs(Y).max(initial=0.0))
    e_y = math.frexp(ymax)[1] if ymax > 0 else 0
    Y = np.ldexp(Y, -e_y)
    Xs = X[:, keep]
    theta = np.zeros(d)
    if keep.size == 0:
        best, gap = np.zeros(0), 0.0
    elif not math.isfinite(eps):  # ε/s beyond float64: θ* = 0 (‖Xᵀy‖ ≤ εΣ|yᵢ|, the optimality condition at 0, holds)
        best, gap = np.zeros(keep.size), 0.0
    elif eps == 0:
        best = np.linalg.lstsq(Xs, Y, rcond=None)[0]
        grad = Xs.T @ (Xs @ best - Y) / n
        gap = 0.5 * grad @ np.linalg.lstsq(Xs.T @ Xs / n, grad, rcond=None)[0]
    else:
        r_scale = 1.0 + np.abs(Y).max(initial=0.0)
        # P(θ) ≥ ½ mean(rᵢ²) ≥ P_LS* (the ε‖θ‖_* term only adds): P(θ) − P_LS* also bounds P(θ) − P*.  It is the
        # certificate that stays finite as ε → 0, where the dual point of _alin_gap needs λ ~ 1/ε.
        p_ls = 0.5 * np.mean((Xs @ np.linalg.lstsq(Xs, Y, rcond=None)[0] - Y) ** 2)

        def certificate(t):  # the best duality gap over a few guesses of which residuals are exactly 0
            with np.errstate(over="ignore", invalid="ignore"):
                dual = min(_alin_gap(Xs, Y, eps, norm, t, zt * r_scale) for zt in (0.0, 1e-9, 1e-7, 1e-5, 1e-3))
            p_t = _alin_primal(Xs, Y, eps, norm, t)
            # P and D are means of N terms of size ≲ P: a computed gap below their rounding (~N·eps·P) certifies
            # nothing smaller than that rounding (it came out as exactly 0, and a θ error bound of 0)
            return max(4 * n * np.finfo(np.float64).eps * p_t, min(dual, p_t - p_ls))

        def fun(t):
            r = Xs @ t - Y
            if norm == "l2":
                nt = np.linalg.norm(t)
                gn = t / nt if nt > 0 else np.zeros_like(t)
            else:
                nt = np.abs(t).sum()
                gn = np.sign(t)
            u = np.abs(r) + eps * nt
            return 0.5 * np.mean(u ** 2), (Xs.T @ (u * np.sign(r))) / n + eps * np.mean(u) * gn

        zero = np.zeros(Xs.shape[1])
        best, gap = zero, certificate(zero)  # large ε: θ* = 0 (the ε‖θ‖_* term wins), where L-BFGS-B is slow
        if gap > tol * (1.0 + _alin_primal(Xs, Y, eps, norm, zero)):
            t0 = np.linalg.lstsq(Xs, Y, rcond=None)[0]
            res = minimize(fun, t0, jac=True, method="L-BFGS-B",
                           options={"maxiter": max_iter, "gtol": 1e-11, "ftol": 1e-16})
            candidates, start = [res.x], res.x
            for _ in range(3):  # active-set rounds: re-identify the zero sets at the polished point
                polished = [_alin_polish(Xs, Y, eps, norm, start, zt) for zt in (1e-3, 1e-5, 1e-7, 1e-9)]
                candidates += polished
                start = min(polished, key=lambda t: _alin_primal(Xs, Y, eps, norm, t))
            # P is flat (quadratic) at θ*, so P cannot rank candidates that differ by 1e-8 in θ: the gap can
            for t in candidates:
                g_t = certificate(t)
                if g_t < gap or (g_t == gap and _alin_primal(Xs, Y, eps, norm, t) < _alin_primal(Xs, Y, eps, norm, best)):
                    best, gap = t, g_t
    theta[keep] = best
    value = _alin_primal(Xs, Y, eps, norm, best) if keep.size and math.isfinite(eps) else 0.5 * np.mean(Y ** 2)
    if gap > tol * (1.0 + value):
        warnings.warn(f"{caller}: duality gap {unscale(gap, 2 * e_y):.3g} exceeds tol·(m² + P) = "
                      f"{unscale(tol * (1 + value), 2 * e_y):.3g} (m = 2^{e_y}, the power of two above max|yᵢ|); "
                      f"the returned direction is not certified to that accuracy.", RuntimeWarning, stacklevel=2)
    with np.errstate(over="ignore"):
        theta = np.ldexp(theta, e_y - e_x)
    if float(np.abs(theta).max(initial=0.0)) > float(xp.finfo(x.dtype).max):
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} is too large for 'x': the minimiser θ* (~ max|y|/max|x| = "
            f"{ymax:.3g}/{amax:.3g}) overflows {x.dtype}; rescale y or x (θ*(s·x, t·y, s·ε) = (t/s)·θ*(x, y, ε)).")
    out = xp.asarray(theta, dtype=x.dtype, device=device_of(x))
    if not return_certificate:
        return out
    mu = np.linalg.eigvalsh(Xs.T @ Xs / n)[0] if keep.size else 0.0
    bound = (unscale(math.sqrt(2.0 * gap / mu), e_y - e_x) if mu > 1e-14 * max(1.0, np.abs(Xs).max(initial=0.0) ** 2)
             else math.inf)
    return out, {"objective": unscale(float(value), 2 * e_y), "gap": unscale(float(gap), 2 * e_y),
                 "theta_error_bound": bound}
