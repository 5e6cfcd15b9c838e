r"""Seed 002's distribution 𝒟 and the machinery of its kernel lower bound (§2, Thm 2.1, App. B.1).

Implements (seed 002 = Wei, Lee, Liu, Ma, *Regularization Matters*):

- eq. (2.1), the distribution 𝒟 on ℝ^d × {±1}: :func:`sample_sparse_xor`.  Coordinates 3..d are
  independent uniform bits (noise); (x₁, x₂, y) is one of four equally likely atoms
  (±1, 0, +1) or (0, ±1, −1).  So y = x₁² − x₂² ("sparse XOR": the label is the *position* of the
  signal coordinate, its sign is irrelevant), ‖x‖² = d − 1, and supp 𝒟 has 4·2^{d−2} points.
- App. B.1 notation: for z ∈ {±1}^{d−2}, (a, b, z) ∈ ℝ^d; the *sign orbit* of z, the four points
  (1, 0, z), (−1, 0, z), (0, 1, z), (0, −1, z), equally likely given z (:func:`sign_orbit`);
  the hypercube {±1}^k (:func:`hypercube`, :func:`sample_hypercube`).
- §2, eq. (B.1): kernel predictors f(x; β) = Σᵢ βᵢ K(xᵢ, x) with the two-layer ReLU NTK
  K = τ₁K₁ + τ₂(K₁ + K₂), τ₁ = r_w²/2, τ₂ = r_u²/2 (:func:`ntkref.kernels.wei_kernel`), fitted by
  min-norm interpolation, kernel ridge regression, soft/hard-margin SVM or kernel logistic regression
  (:func:`fit_kernel_predictor` → :class:`KernelPredictor`).  Theorem 2.1 holds for *every* β.
- Lemma B.2: f⁺(z) = f((1,0,z)) + f((−1,0,z)), f⁻(z) = f((0,1,z)) + f((0,−1,z)),
  f̃(z) = Σᵢ βᵢ[(τ₁+τ₂)K̃₁(zᵢ, z) + τ₂K̃₂(zᵢ, z)] with K̃ⱼ(z′, z) = Kⱼ((0,1,z′), (1,0,z)), and the
  polynomial surrogate f̂(z) = Σᵢ βᵢ g(zᵀzᵢ/(d−1)) with g of Lemma B.5 (:func:`lemma_b2_functions`).
- Proof of Thm B.1, made exact: if sign f⁺(z) = sign f⁻(z), at least one of the four orbit points
  of z is misclassified (y f ≤ 0), hence for every β, n, d

  .. math::  \Pr_{(x,y)\sim\mathcal D}[y f(x;\beta) \le 0] \;\ge\; \tfrac14 \Pr_z[\operatorname{sign} f^+(z;\beta)
             = \operatorname{sign} f^-(z;\beta)],

  and the same inequality holds exactly, z by z, on any finite set of z (:func:`orbit_error_bound`;
  with z = all of {±1}^{d−2} the left side *is* the population error).
- Lemma B.5: the coefficients of g (:func:`lemma_b5_coefficients`).
- Lemma B.6: the Gram matrix Ñᵀ Ñ = (Z Zᵀ)∘(Z Zᵀ) − k of the off-diagonal quadratic features
  (:func:`quadratic_feature_gram`), whose smallest eigenvalue is the "d² threshold".

Errata of the seed in this part (inventory §5, items 3–9; tests in ``tests/test_distributions.py``):

1. App. B.1, the arc argument: E_ū[𝟙(xᵀū ≥ 0)𝟙(x′ᵀū ≥ 0)] is (π − θ)/(2π), not 1 − θ/π as printed
   (off by a factor 2 — harmless, absorbed into τ₁).  Likewise E_ū[[xᵀū]₊[x′ᵀū]₊] = (K₁ + K₂)/(2d)
   for ū uniform on the sphere (c_relu = 1/(2d) under the probability measure).
2. Lemma B.5: the Taylor remainders are O(x⁶), not O(|x|⁵): h₁ − g₁ = 3x⁶/(40π) + …,
   h₂ − g₂ = −x⁶/(16π) + … (the printed bound still holds; it is loose).  "log^{2.5}" means log^{2.5} d.
3. Lemma B.6: E_z[z^{⊗2} z^{⊗2ᵀ}] is 1_S1_Sᵀ + (I + P_swap) restricted off S (the printed form drops
   the transposed pairing), so E_z[(zᵀa)²(zᵀb)²] = k² + 2(aᵀb)² − 2k for a, b ∈ {±1}^k (printed:
   k² + (aᵀb)² − k).  The lower bound survives with constant 2.  Lemma B.6 is stated for g without a
   constant term but applied to Lemma B.5's g, which has one, τ₂(d−1)/π (harmless: cross terms ≥ 0).
4. Lemma B.2: "c₁(τ₁+τ₁)" means c₁(τ₁+τ₂); the bars of (B.2) are misplaced; the chain after
   "E_z[f̂(z;β)²] ≥" is truncated.  Proof of B.1: "any choice of l" means β, and z is drawn from
   {±1}^{d−2}, not {±1}^d.
5. Lemma B.6 as stated ("for n ≤ d²", z ∈ {±1}^k, any g with aⱼ ≥ 0) is **false**.  Ñᵀ Ñ has rank
   ≤ k(k−1)/2 (k = d − 2 here), so λ_min(ÑᵀÑ) = 0 exactly once n > k(k−1)/2 — this is where the d²
   threshold comes from — and once n ≥ k(k−1)/2 + 2 its null space meets 1^⊥: for β there and
   g(x) = x², E_z[(Σᵢβᵢ(zᵀzᵢ)²)²] = k²(Σβᵢ)² + 2βᵀÑᵀÑβ = 0 < a₂²k²‖β‖², for *every* draw of z₁…zₙ
   (probability 1, not exp(−Ω(√n))).  Counterexample: k = 6, n = 20 ≤ k² = 36 (test
   ``test_lemma_b6_counterexample``).  Only "n ≤ c·k²" with c < ½ can hold, so Thm 2.1 / Thm B.1's
   "n ≤ d²" is proved only for n ≤ c·d² (Lemma B.2's own hypothesis n ≤ c₂d²/(4c₁²)).

Random draws are made on the host with ``numpy.random.default_rng(seed)`` (reproducible across
backends) and moved to ``xp``; everything else is array-API code in the inputs' namespace.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import machines as _machines
from ._lib.backend import creation_target, device_of, is_array, namespace
from ._lib.compat import eigh
from ._lib.memory import check_memory
from ._lib.validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_labels,
    check_option,
    check_real,
)
from .kernels import wei_kernel
from .kernels._layers import check_input_scale, row_norms

__all__ = [
    "sample_sparse_xor",
    "sample_hypercube",
    "hypercube",
    "sign_orbit",
    "ORBIT_LABELS",
    "KernelPredictor",
    "fit_kernel_predictor",
    "PREDICTOR_METHODS",
    "OrbitValues",
    "lemma_b2_functions",
    "OrbitBound",
    "orbit_error_bound",
    "lemma_b5_coefficients",
    "quadratic_feature_gram",
]

_PI = math.pi
ORBIT_LABELS = (1.0, 1.0, -1.0, -1.0)
"""Labels of the four sign-orbit points (1,0,z), (−1,0,z), (0,1,z), (0,−1,z), in that order."""

PREDICTOR_METHODS = ("min_norm", "ridge", "svm", "hard_margin_svm", "logistic")


def _rng(seed):
    # reproducibility: only an int or a Generator (None would draw fresh OS entropy)
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameterError(
            f"The 'seed' parameter must be a nonnegative int or a numpy Generator. Got {seed!r} instead.")
    return np.random.default_rng(int(seed))


def _out_namespace(xp, dtype, device=None):
    """(namespace, dtype, device) of arrays created from host draws: ``xp=None`` is ``NTKREF_BACKEND``'s namespace;
    ``device=None`` is ``NTKREF_DEVICE``'s device whenever the namespace is the default one."""
    xp, device = creation_target(xp, device)
    if dtype is None:
        dtype = xp.float64
    elif dtype not in (xp.float64, xp.float32):
        raise InvalidParameterError(f"The 'dtype' parameter must be float32 or float64 of the namespace. Got {dtype!r}.")
    return xp, dtype, device


# --------------------------------------------------------------------------- the distribution


def sample_sparse_xor(n, d, *, seed, xp=None, dtype=None, device=None):
    r"""Draw n i.i.d. samples of seed 002's distribution 𝒟, eq. (2.1).

    For every k ≥ 3, x_k is a uniform bit in {−1, +1}; (x₁, x₂, y) is one of

    ========  =====  =====  =====
    prob.     x₁     x₂     y
    ========  =====  =====  =====
    1/4       +1     0      +1
    1/4       −1     0      +1
    1/4       0      +1     −1
    1/4       0      −1     −1
    ========  =====  =====  =====

    Exact invariants: entries in {−1, 0, 1}; ‖x‖² = d − 1; exactly one of x₁, x₂ is nonzero;
    y = x₁² − x₂²; the noise coordinates are independent of (x₁, x₂, y).  No linear function of x
    predicts y (it depends on the signal only through x₁², x₂²).

    Parameters
    ----------
    n : int
        Number of samples, n ≥ 0.
    d : int
        Dimension, d ≥ 3 (d − 2 ≥ 1 noise coordinates).
    seed : int or numpy.random.Generator
        Host-side randomness: the atom of each sample is drawn first (``integers(0, 4, n)``), then
        the noise bits (``integers(0, 2, (n, d − 2))``).
    xp : namespace, optional
        Where to put the arrays (default: ``NTKREF_BACKEND``).
    device : device of ``xp``, optional
        Default: ``NTKREF_DEVICE`` for the default namespace, else the namespace's default device.
    dtype : float64 (default) or float32 of ``xp``
        Exact in both (the entries are small integers).

    Returns
    -------
    X : array, shape (n, d)
        One sample a row.
    y : array, shape (n,)
        Labels ±1 (floating, like the rest of ntkref).
    """
    caller = "sample_sparse_xor"
    n = check_int(n, "n", caller=caller, low=0)
    d = check_int(d, "d", caller=caller, low=3)
    xp, dtype, device = _out_namespace(xp, dtype, device)
    rng = _rng(seed)
    atom = rng.integers(0, 4, size=n)
    noise = 2.0 * rng.integers(0, 2, size=(n, d - 2)) - 1.0
    signal = np.zeros((n, 2))
    sign = np.where(atom % 2 == 0, 1.0, -1.0)
    signal[:, 0] = np.where(atom < 2, sign, 0.0)
    signal[:, 1] = np.where(atom >= 2, sign, 0.0)
    X = np.concatenate([signal, noise], axis=1)
    y = np.where(atom < 2, 1.0, -1.0)
    return xp.asarray(X, dtype=dtype, device=device), xp.asarray(y, dtype=dtype, device=device)


def sample_hypercube(m, k, *, seed, xp=None, dtype=None, device=None):
    """m i.i.d. uniform points of {−1, +1}^k, shape (m, k) (the z of App. B.1 has k = d − 2).

    Drawn on the host (``integers(0, 2, (m, k))`` of ``seed``) and copied to ``xp`` on ``device`` (defaults as in
    :func:`sample_sparse_xor`)."""
    m = check_int(m, "m", caller="sample_hypercube", low=0)
    k = check_int(k, "k", caller="sample_hypercube", low=1)
    xp, dtype, device = _out_namespace(xp, dtype, device)
    z = 2.0 * _rng(seed).integers(0, 2, size=(m, k)) - 1.0
    return xp.asarray(z, dtype=dtype, device=device)


def hypercube(k, *, xp=None, dtype=None, device=None):
    """All 2^k points of {−1, +1}^k, shape (2^k, k), in binary order (row j has −1 where bit of j is 1).

    With z = ``hypercube(d − 2)`` the orbit statistics of :func:`orbit_error_bound` are *exact*
    population quantities under 𝒟.  1 ≤ k ≤ 24 (2^24 rows; k ≥ 1 as for :func:`sample_hypercube`, since z has
    d − 2 ≥ 1 coordinates).  In ``xp`` on ``device`` (defaults as in :func:`sample_sparse_xor`).
    """
    k = check_int(k, "k", caller="hypercube", low=1, high=24)
    xp, dtype, device = _out_namespace(xp, dtype, device)
    j = np.arange(2**k)[:, None]
    bits = (j >> np.arange(k - 1, -1, -1)[None, :]) & 1
    return xp.asarray(1.0 - 2.0 * bits, dtype=dtype, device=device)


def _check_z(z, caller, xp=None, dtype=None):
    z = check_array(z, "z", caller=caller, ndim=2, xp=xp, dtype=dtype)
    if z.shape[1] < 1:
        raise InvalidParameterError(f"The 'z' parameter of {caller} must have at least one column (d - 2 >= 1).")
    return z


def sign_orbit(z):
    r"""The sign orbit of each noise vector z (App. B.1 / proof of Thm B.1).

    Parameters
    ----------
    z : array, shape (M, d − 2)
        Noise parts (any reals; for 𝒟 they are ±1).

    Returns
    -------
    array, shape (4, M, d)
        ``[(1,0,z), (−1,0,z), (0,1,z), (0,−1,z)]`` — given z, the four points of supp 𝒟 that share z,
        each with probability 1/4; their labels are :data:`ORBIT_LABELS` = (+1, +1, −1, −1).
    """
    xp = namespace(z)
    z = _check_z(z, "sign_orbit", xp=xp)
    M = z.shape[0]
    one = xp.ones((M, 1), dtype=z.dtype, device=device_of(z))
    zero = xp.zeros((M, 1), dtype=z.dtype, device=device_of(z))
    heads = ((one, zero), (-one, zero), (zero, one), (zero, -one))
    return xp.stack([xp.concat([a, b, z], axis=1) for a, b in heads], axis=0)


# --------------------------------------------------------------------------- kernel predictors


@dataclass
class KernelPredictor:
    r"""f(x; β) = Σᵢ βᵢ K(xᵢ, x) with seed 002's NTK K = (r_w²/2)K₁ + (r_u²/2)(K₁ + K₂) (§2, eq. (B.1)).

    Attributes
    ----------
    x_train : array (n, d);  beta : array (n,);  r_w, r_u : float
    method : str — how β was chosen (see :func:`fit_kernel_predictor`); lam : float or None
    machine : ntkref.machines.KernelMachine or None — the solver's record (duality gap, …) for the
        regularized methods.
    """

    x_train: object
    beta: object
    r_w: float = 1.0
    r_u: float = 1.0
    method: str = "given"
    lam: float | None = None
    machine: object = None

    def __post_init__(self):
        caller = "KernelPredictor"
        self.x_train = check_array(self.x_train, "x_train", caller=caller, ndim=2)
        xp = namespace(self.x_train)
        n = self.x_train.shape[0]
        _same_library(self.beta, self.x_train, "beta", caller)
        self.beta = check_array(self.beta, "beta", caller=caller, xp=xp, shape=(n,), dtype=self.x_train.dtype,
                                like=self.x_train)
        self.r_w = check_real(self.r_w, "r_w", caller=caller, low=0.0)
        self.r_u = check_real(self.r_u, "r_u", caller=caller, low=0.0)
        _check_row_scale(self.x_train, "x_train", caller, xp)

    def _x(self, x, caller):
        xp = namespace(self.x_train)
        _same_library(x, self.x_train, "x", caller)
        x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=self.x_train.dtype, like=self.x_train)
        d = self.x_train.shape[1]
        if x.shape[1] != d:
            raise InvalidParameterError(
                f"The 'x' parameter of {caller} must have {d} columns (those of x_train); got shape {tuple(x.shape)}.")
        _check_row_scale(x, "x", caller, xp)
        return x

    def gram(self, x):
        """K(x, x_train), shape (m, n)."""
        x = self._x(x, "KernelPredictor.gram")
        return wei_kernel(x, self.x_train, r_w=self.r_w, r_u=self.r_u)

    def decision_function(self, x):
        """f(x; β) for each row of x (shape (m, d)) → shape (m,)."""
        x = self._x(x, "KernelPredictor.decision_function")
        return wei_kernel(x, self.x_train, r_w=self.r_w, r_u=self.r_u) @ self.beta

    __call__ = decision_function

    def error_rate(self, x, y):
        """Fraction of rows with y·f(x) ≤ 0 — the paper's error event (a zero output counts as an error).

        ``x`` (m, d), ``y`` (m,) of ±1 (one label per row of ``x``).
        """
        xp = namespace(self.x_train)
        _same_library(y, self.x_train, "y", "KernelPredictor.error_rate")
        y = check_labels(y, "y", caller="KernelPredictor.error_rate", xp=xp, like=self.x_train)
        f = self.decision_function(x)
        if y.ndim != 1 or y.shape[0] != f.shape[0]:
            raise InvalidParameterError(
                f"The 'y' parameter of KernelPredictor.error_rate must have one label per row of x ({f.shape[0]}); "
                f"got shape {y.shape}.")
        return float(xp.mean(xp.astype(xp.astype(y, f.dtype) * f <= 0, f.dtype)))


def _same_library(a, like, name, caller):
    """An array of another library than ``like``'s is refused naming ``name`` (lists are converted)."""
    if is_array(a) and is_array(like):
        try:
            namespace(a, like)
        except TypeError as exc:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} is an array of another array library than x_train's: {exc}"
            ) from None


def _check_row_scale(x, name, caller, xp, extra=0.0):
    """Rows whose norm (+ ``extra``, a bound on a row's growth, e.g. the orbit's ±1 coordinate) the kernel
    cannot square are refused naming ``name`` (as :func:`ntkref.kernels.wei_kernel` does for its x1/x2)."""
    if x.shape[0] == 0:
        return
    norms, _ = row_norms(x, xp)
    check_input_scale(norms + extra, name, caller, 1.0, xp, "‖x‖" if not extra else "‖x‖ + 1")


def fit_kernel_predictor(x, y, *, method="min_norm", r_w=1.0, r_u=1.0, lam=None, reduction="sum", rtol=None):
    r"""A kernel predictor f(x; β) = Σᵢ βᵢ K(xᵢ, x) of seed 002 §2 with a chosen β.

    Methods (K the n × n Gram matrix of :func:`ntkref.kernels.wei_kernel`):

    - ``"min_norm"`` — minimum-RKHS-norm interpolation β = K⁺y (what gradient descent on the squared
      loss of a very wide net converges to from f₀ = 0).  K⁺ by a symmetric eigendecomposition with
      eigenvalues ≤ rtol·λ_max(K) dropped (rtol default n·eps, as ``numpy.linalg.lstsq``); duplicated
      training points (likely for small d) make K singular and are handled exactly.  ``lam`` unused.
    - ``"ridge"`` — kernel ridge regression, β = (K + (λ/2)I)⁻¹y (ntkref's sum convention, seed 000
      eq. (7) with the squared loss (y − z)²; ``reduction="mean"`` means λ_sum = n·λ).
    - ``"svm"`` — soft-margin kernel SVM (hinge loss, no bias), exact dual solution.
    - ``"hard_margin_svm"`` — its λ → 0 limit.
    - ``"logistic"`` — ℓ2-regularized kernel logistic regression (Newton).

    Theorem 2.1 holds for *every* β; these are the usual choices.  The regularized methods call
    :func:`ntkref.machines.solve` / :func:`ntkref.machines.hard_margin_svm` (certified by their
    duality gap; ``.machine`` keeps the record).

    Parameters
    ----------
    x : array (n, d);  y : array (n,) — ±1 except for ``min_norm``/``ridge`` (any real targets).
    r_w, r_u : float ≥ 0, not both 0 — the initialization scales of the two layers (τ₁ = r_w²/2,
        τ₂ = r_u²/2).
    lam : float > 0 — required for ``ridge``, ``svm``, ``logistic``.
    reduction : {"sum", "mean"} — passed to :func:`ntkref.machines.solve`.
    rtol : float, optional — the pseudo-inverse cut of ``min_norm``.

    Returns
    -------
    KernelPredictor

    Notes
    -----
    Accuracy: K to ~1e-15 relative in float64 (:func:`ntkref.kernels.wei_kernel`); the min-norm β has
    the conditioning of K (on 𝒟, e.g. λ_min/λ_max ≈ 1e-2 at d = 12, n = 40 distinct points; duplicates
    make K exactly singular and are cut); float32 gives predictions within 1e-6 of Σ|βᵢ|K(x,x) of the
    float64 ones (measured 2.5e-8 at d = 10, n = 50; tested at 1e-6).
    """
    caller = "fit_kernel_predictor"
    method = check_option(method, "method", PREDICTOR_METHODS, caller=caller)
    x = check_array(x, "x", caller=caller, ndim=2)
    xp = namespace(x)
    n = x.shape[0]
    if n == 0:
        raise InvalidParameterError(f"The 'x' parameter of {caller} must have at least one row.")
    r_w = check_real(r_w, "r_w", caller=caller, low=0.0)
    r_u = check_real(r_u, "r_u", caller=caller, low=0.0)
    if r_w == 0.0 and r_u == 0.0:
        raise InvalidParameterError(f"The 'r_w' and 'r_u' parameters of {caller} cannot both be 0 (K would be 0).")
    if method in ("min_norm", "ridge"):
        y = check_array(y, "y", caller=caller, xp=xp, shape=(n,), dtype=x.dtype)
    else:
        y = check_labels(y, "y", caller=caller, xp=xp)
        y = xp.astype(y, x.dtype)
        if y.shape[0] != n:
            raise InvalidParameterError(f"The 'y' parameter of {caller} must have {n} entries; got {y.shape[0]}.")
    K = wei_kernel(x, r_w=r_w, r_u=r_u)
    machine = None
    if method == "min_norm":
        if rtol is None:
            rtol = n * float(xp.finfo(K.dtype).eps)
        rtol = check_real(rtol, "rtol", caller=caller, low=0.0)
        w, V = eigh(K, xp)
        cut = rtol * float(xp.max(xp.abs(w)))
        keep = w > cut
        inv = xp.where(keep, 1.0 / xp.where(keep, w, xp.ones_like(w)), xp.zeros_like(w))
        beta = V @ (inv * (xp.matrix_transpose(V) @ y))
    elif method == "hard_margin_svm":
        machine = _machines.hard_margin_svm(K, y)
        beta = machine.alpha_
    else:
        if lam is None:
            raise InvalidParameterError(f"The 'lam' parameter of {caller} is required for method={method!r}.")
        lam = check_real(lam, "lam", caller=caller, low=0.0, closed="neither")
        loss = {"ridge": "squared", "svm": "hinge", "logistic": "logistic"}[method]
        machine = _machines.solve(K, y, loss, lam, reduction=reduction)
        beta = machine.alpha_
    return KernelPredictor(x_train=x, beta=beta, r_w=r_w, r_u=r_u, method=method, lam=lam, machine=machine)


# --------------------------------------------------------------------------- Lemma B.2 objects


class OrbitValues(NamedTuple):
    """Lemma B.2's functions at M noise vectors z (all shape (M,) except ``f_orbit``)."""

    f_orbit: object  # (4, M): f at (1,0,z), (−1,0,z), (0,1,z), (0,−1,z)
    f_plus: object   # f((1,0,z)) + f((−1,0,z))
    f_minus: object  # f((0,1,z)) + f((0,−1,z))
    f_tilde: object  # Σ βᵢ [(τ₁+τ₂)K̃₁(zᵢ,z) + τ₂K̃₂(zᵢ,z)]  (≈ f^±/2)
    f_hat: object    # Σ βᵢ g(zᵀzᵢ/(d−1)), g of Lemma B.5  (≈ f̃)


def _check_predictor_inputs(x_train, beta, z, r_w, r_u, caller):
    x_train = check_array(x_train, "x_train", caller=caller, ndim=2)
    xp = namespace(x_train)
    n, d = x_train.shape
    if d < 3:
        raise InvalidParameterError(f"The 'x_train' parameter of {caller} must have d >= 3 columns; got {d}.")
    beta = check_array(beta, "beta", caller=caller, xp=xp, shape=(n,), dtype=x_train.dtype)
    z = _check_z(z, caller, xp=xp, dtype=x_train.dtype)
    if z.shape[1] != d - 2:
        raise InvalidParameterError(f"The 'z' parameter of {caller} must have d - 2 = {d - 2} columns; got {z.shape[1]}.")
    r_w = check_real(r_w, "r_w", caller=caller, low=0.0)
    r_u = check_real(r_u, "r_u", caller=caller, low=0.0)
    # the kernel is evaluated at x_train, (±1, 0, z), (0, 1, zᵢ): norms at most ‖x‖ + 1
    _check_row_scale(x_train, "x_train", caller, xp, extra=1.0)
    _check_row_scale(z, "z", caller, xp, extra=1.0)
    return xp, x_train, beta, z, r_w, r_u


def _orbit_f(xp, x_train, beta, z, r_w, r_u):
    orbit = sign_orbit(z)  # (4, M, d)
    M, d = z.shape[0], x_train.shape[1]
    f = wei_kernel(xp.reshape(orbit, (4 * M, d)), x_train, r_w=r_w, r_u=r_u) @ beta
    return xp.reshape(f, (4, M))


def lemma_b2_functions(x_train, beta, z, *, r_w=1.0, r_u=1.0):
    r"""The objects of seed 002's Lemma B.2 for f(x; β) = Σᵢ βᵢ K(x, xᵢ), at the noise vectors z.

    With τ₁ = r_w²/2, τ₂ = r_u²/2 (so K = τ₁K₁ + τ₂(K₁ + K₂), eq. (B.1)) and zᵢ = xᵢ[2:]:

    .. math::

        f^+(z) = f((1,0,z)) + f((-1,0,z)),\qquad f^-(z) = f((0,1,z)) + f((0,-1,z)),

        \tilde f(z) = \sum_i \beta_i\,[(\tau_1+\tau_2)\tilde K_1(z_i,z) + \tau_2\tilde K_2(z_i,z)]
                    = \sum_i \beta_i K((0,1,z_i), (1,0,z)),

        \hat f(z) = \sum_i \beta_i\, g\!\left(\frac{z^\top z_i}{d-1}\right)\quad(g\text{ of Lemma B.5}).

    The proof shows |f^± − 2f̃| ≲ (τ₁+τ₂)Σ|βᵢ|/d (Lemmas B.3/B.4) and |f̂ − f̃| ≲
    (τ₁+τ₂)Σ|βᵢ| log^{2.5}d/d^{1.5} (Lemma B.5; the remainder is in fact O(ν⁶), see the module
    docstring) for typical z, then that |f̂| is large with constant probability when n ≲ d².

    Parameters
    ----------
    x_train : array (n, d), d ≥ 3 (any rows; for the lemma, samples of 𝒟)
    beta : array (n,) — arbitrary coefficients
    z : array (M, d − 2) — noise vectors (for the lemma, uniform on {±1}^{d−2})
    r_w, r_u : float ≥ 0

    Returns
    -------
    OrbitValues
        ``f_orbit`` (4, M) and f⁺, f⁻, f̃, f̂ (each (M,)), in the namespace/dtype of ``x_train``.
        f⁺ and f⁻ are computed from the same floating-point values as ``f_orbit``, so the sign
        argument of :func:`orbit_error_bound` is exact in floating point.
    """
    caller = "lemma_b2_functions"
    xp, x_train, beta, z, r_w, r_u = _check_predictor_inputs(x_train, beta, z, r_w, r_u, caller)
    n, d = x_train.shape
    f_orbit = _orbit_f(xp, x_train, beta, z, r_w, r_u)
    f_plus = f_orbit[0, :] + f_orbit[1, :]
    f_minus = f_orbit[2, :] + f_orbit[3, :]
    z_train = x_train[:, 2:]
    M = z.shape[0]
    dev = device_of(z)
    one_zero = xp.concat([xp.ones((M, 1), dtype=z.dtype, device=dev), xp.zeros((M, 1), dtype=z.dtype, device=dev), z],
                         axis=1)
    zero_one = xp.concat([xp.zeros((n, 1), dtype=z.dtype, device=dev), xp.ones((n, 1), dtype=z.dtype, device=dev),
                          z_train], axis=1)
    f_tilde = wei_kernel(one_zero, zero_one, r_w=r_w, r_u=r_u) @ beta
    coef = lemma_b5_coefficients(d, r_w=r_w, r_u=r_u)
    nu = (z @ xp.matrix_transpose(z_train)) / (d - 1)
    g = coef[4]
    for c in (coef[3], coef[2], coef[1], coef[0]):  # Horner
        g = g * nu + c
    f_hat = g @ beta
    return OrbitValues(f_orbit=f_orbit, f_plus=f_plus, f_minus=f_minus, f_tilde=f_tilde, f_hat=f_hat)


class OrbitBound(NamedTuple):
    """Both sides of the exact inequality error ≥ ¼·agreement (proof of seed 002 Thm B.1)."""

    error: float         # fraction of the 4M orbit points with y f ≤ 0
    agreement: float     # fraction of z with sign f⁺(z) = sign f⁻(z)
    lower_bound: float   # agreement / 4  (≤ error, always)
    error_per_z: object  # (M,) fraction of the 4 orbit points of each z misclassified (0, ¼, ½, ¾, 1)
    agree_per_z: object  # (M,) bool, sign f⁺ = sign f⁻


def orbit_error_bound(x_train, beta, z, *, r_w=1.0, r_u=1.0):
    r"""The exact form of the proof of seed 002 Thm B.1: error ≥ ¼ · P[sign f⁺ = sign f⁻].

    For each z the four sign-orbit points (±1, 0, z) (label +1) and (0, ±1, z) (label −1) are
    equally likely under 𝒟.  If sign f⁺(z) = sign f⁻(z) = s then: s ≤ 0 ⇒ one of f((±1,0,z)) ≤ 0;
    s ≥ 0 ⇒ one of f((0,±1,z)) ≥ 0 — either way an orbit point has y f ≤ 0.  Hence, z by z,

    .. math::  \text{error\_per\_z} \ge \tfrac14\,\mathbb 1[\operatorname{sign} f^+(z) = \operatorname{sign} f^-(z)],

    for every β, n and d, and averaging over any set of z gives error ≥ agreement/4.  With
    z = :func:`hypercube`\ (d − 2) the error is exactly Pr_𝒟[y f(x; β) ≤ 0]; with z uniform
    samples it is an unbiased (orbit-stratified) estimate.  In floating point the inequality is exact
    (f⁺, f⁻ are sums of the same computed orbit values; the sum of two positive floats is positive).

    Parameters and shapes as :func:`lemma_b2_functions`, with M ≥ 1.

    Returns
    -------
    OrbitBound
    """
    caller = "orbit_error_bound"
    xp, x_train, beta, z, r_w, r_u = _check_predictor_inputs(x_train, beta, z, r_w, r_u, caller)
    if z.shape[0] == 0:
        raise InvalidParameterError(
            f"The 'z' parameter of {caller} must have at least one row (the error and agreement are averages "
            f"over z); got shape {tuple(z.shape)}.")
    f = _orbit_f(xp, x_train, beta, z, r_w, r_u)
    labels = xp.reshape(xp.asarray(ORBIT_LABELS, dtype=f.dtype, device=device_of(f)), (4, 1))
    wrong = xp.astype(labels * f <= 0, f.dtype)
    error_per_z = xp.mean(wrong, axis=0)
    agree = xp.sign(f[0, :] + f[1, :]) == xp.sign(f[2, :] + f[3, :])
    error = float(xp.mean(error_per_z))
    agreement = float(xp.mean(xp.astype(agree, f.dtype)))
    return OrbitBound(error=error, agreement=agreement, lower_bound=agreement / 4,
                      error_per_z=error_per_z, agree_per_z=agree)


# --------------------------------------------------------------------------- Lemmas B.5, B.6


def lemma_b5_coefficients(d, *, r_w=1.0, r_u=1.0):
    r"""Coefficients (a₀, …, a₄) of seed 002 Lemma B.5's polynomial g(x) = Σⱼ aⱼ xʲ.

    .. math::  g(x) = \tau_1(d-1)\left(\tfrac12x + \tfrac1\pi x^2 + \tfrac1{6\pi}x^4\right)
               + \tau_2(d-1)\left(\tfrac1\pi + \tfrac12x + \tfrac1{2\pi}x^2 + \tfrac1{24\pi}x^4\right)
               = (d-1)[(\tau_1+\tau_2)g_1(x) + \tau_2 g_2(x)],

    τ₁ = r_w²/2, τ₂ = r_u²/2, with g₁, g₂ the 4th-order Taylor polynomials at 0 of
    h₁(x) = x(1 − arccos(x)/π) and h₂(x) = √(1 − x²)/π (so that (τ₁+τ₂)K̃₁ + τ₂K̃₂ =
    (d−1)[(τ₁+τ₂)h₁(ν) + τ₂h₂(ν)], ν = zᵀz′/(d−1)).  Erratum: the remainders h − g are O(x⁶)
    (3x⁶/(40π) and −x⁶/(16π)), not O(|x|⁵).  The coefficient of x² in g(x/(d−1)) is
    (τ₁ + τ₂/2)/(π(d−1)) (used in the proof of Lemma B.2).

    Returns
    -------
    tuple of 5 floats (a₀, a₁, a₂, a₃, a₄); a₃ = 0.
    """
    d = check_int(d, "d", caller="lemma_b5_coefficients", low=2)
    r_w = check_real(r_w, "r_w", caller="lemma_b5_coefficients", low=0.0)
    r_u = check_real(r_u, "r_u", caller="lemma_b5_coefficients", low=0.0)
    t1, t2 = r_w * r_w / 2, r_u * r_u / 2
    s = d - 1
    return (
        s * t2 / _PI,
        s * (t1 + t2) / 2,
        s * (t1 / _PI + t2 / (2 * _PI)),
        0.0,
        s * (t1 / (6 * _PI) + t2 / (24 * _PI)),
    )


def quadratic_feature_gram(z):
    r"""Lemma B.6's Gram matrix of the off-diagonal quadratic features: (Ñᵀ Ñ)ᵢⱼ = (zᵢᵀzⱼ)² − k.

    Ñ has columns zᵢ^{⊗2} with the k diagonal positions S = {(a−1)k + a} removed (App. B.1
    notation), so Ñᵀ Ñ = (Z Zᵀ)∘(Z Zᵀ) − Σₐ zᵢₐ² zⱼₐ² = (Z Zᵀ)² − k for z ∈ {±1}^k.  The corrected
    Lemma B.6 (module docstring, erratum 3) gives, for g with nonnegative coefficients,

    .. math::  \mathbb E_z\Big[\Big(\sum_i\beta_i (z^\top z_i)^2\Big)^2\Big] = k^2(\textstyle\sum_i\beta_i)^2
               + 2\beta^\top\tilde N^\top\tilde N\beta \ \ge\ 2\lambda_{\min}(\tilde N^\top\tilde N)\|\beta\|^2,

    and the paper needs λ_min ≳ k² for n ≲ k².  Its rank is ≤ k(k−1)/2 (the dimension of the
    symmetric off-diagonal features), so λ_min = 0 exactly once n > k(k−1)/2: the d² threshold.
    Erratum (module docstring, item 5): for n ≥ k(k−1)/2 + 2 some β ≠ 0 with Σβᵢ = 0 lies in the null
    space and the left side is 0, so Lemma B.6's "for n ≤ d²" is false; only n ≤ c·k², c < ½, can hold.

    Parameters
    ----------
    z : array, shape (n, k), entries ±1 (not checked beyond finiteness; for other entries the
        formula is (ZZᵀ)² − Σₐ zᵢₐ²zⱼₐ², which is what is computed).

    Returns
    -------
    array, shape (n, n), symmetric PSD.

    Notes
    -----
    Homogeneous of degree 4: z is divided by a power of two s ≈ max|z| first (exact) and the result multiplied
    by s⁴, so (ZZᵀ)² may exceed the largest float while the difference does not (e.g. rows with one nonzero
    entry give exactly 0); a result that is itself not representable is an error naming ``z``.
    """
    caller = "quadratic_feature_gram"
    z = check_array(z, "z", caller=caller, ndim=2)
    xp = namespace(z)
    # ZZᵀ, its square, Z²(Z²)ᵀ and the result: four (n, n) arrays
    check_memory(4 * z.shape[0] * z.shape[0], f"The ({z.shape[0]}, {z.shape[0]}) Gram of 'z'", caller, z,
                 ways_out="ways out: fewer rows of z per call, or float32 z")
    big = float(xp.max(xp.abs(z))) if z.shape[0] * z.shape[1] else 0.0  # (torch's .size is a method)
    e = math.frexp(big)[1] if big > 0 else 0  # 2^(e-1) <= max|z| < 2^e
    s = math.ldexp(1.0, e)
    zs = z / s if e else z
    G = zs @ xp.matrix_transpose(zs)
    z2 = zs * zs
    R = G * G - z2 @ xp.matrix_transpose(z2)
    if e:  # × s⁴ in four exact steps of 2^e (an overflow shows as inf)
        for _ in range(4):
            R = R * s
    if not bool(xp.all(xp.isfinite(R))):
        raise InvalidParameterError(
            f"The 'z' parameter of {caller} is too large: (zᵢᵀzⱼ)² − Σₐ zᵢₐ²zⱼₐ² overflows "
            f"{'float32' if R.dtype == xp.float32 else 'float64'} (max|z| = {big:.3g}; entries scale like "
            f"max|z|⁴). Rescale z.")
    return R
