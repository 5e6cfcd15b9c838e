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
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import adversarial as _adv
from . import losses as _losses
from ._backend import device_of, namespace, to_numpy
from ._compat import erf
from ._validation import InvalidParameterError, check_array, check_int, check_labels, check_memory, check_option, check_real
from .nets._common import check_pairs, init_target

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

NORMS = ("linf", "l2")


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
        _check_params(self, params, "params", "LinearModel")  # [(W, None)], W of shape (d, 1), finite and real
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
# masks
# ==================================================================================================
def _layer_scale(net, ell):
    """c_ℓ with ∂f/∂W_ℓ = c_ℓ h_ℓᵀ δ_ℓ: W_std,ℓ/√fan_in_ℓ for FullyConnected, 1 for LinearModel."""
    scales = getattr(net, "layer_scales", None)
    if scales is not None:
        return scales[ell]
    return net.W_std[ell] / math.sqrt(net.fan_in[ell])


def _weights(params):
    return [W for W, _ in params]


def _check_params(net, params, name, caller):
    """``params`` (the user's parameter ``name``) as a list of ``(W, b)`` pairs of finite real arrays; with a
    ``net``, one pair per layer with the net's weight shapes and bias layout.  Every error names ``name``."""
    n_layers = None if net is None or getattr(net, "fan_in", None) is None else len(net.fan_in)
    check_pairs(params, caller, n_layers, name=name)
    if n_layers is None:
        return params
    b_std = getattr(net, "b_std", (None,) * n_layers)
    for ell, ((W, b), fi, fo, bs) in enumerate(zip(params, net.fan_in, net.fan_out, b_std)):
        if tuple(W.shape) != (fi, fo):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} weight has shape {tuple(W.shape)}; the network "
                f"expects {(fi, fo)}.")
        if bs is not None and (b is None) != (bs == 0):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} bias must be {'None' if bs == 0 else 'present'}.")
        if b is not None and tuple(b.shape) != (fo,):
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller}: layer {ell} bias has shape {tuple(b.shape)}; expected {(fo,)}.")
    return params


def _check_mask(params, mask, caller, params_name="params"):
    if mask is None:
        raise InvalidParameterError(f"The 'mask' parameter of {caller} must be a list of 0/1 arrays. Got None.")
    if not isinstance(mask, (list, tuple)):
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must be a list of 0/1 arrays, one per layer (as returned by "
            f"full_mask). Got {type(mask).__name__} instead.")
    if len(mask) != len(params):
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must have one array per layer of {params_name!r} ({len(params)}). "
            f"Got {len(mask)}.")
    out = []
    for ell, (M, (W, _)) in enumerate(zip(mask, params)):
        xp = namespace(W)
        M = check_array(M, f"mask[{ell}]", caller=caller, xp=xp, dtype=W.dtype)
        if tuple(M.shape) != tuple(W.shape):
            raise InvalidParameterError(
                f"The 'mask[{ell}]' parameter of {caller} must have the weight's shape {tuple(W.shape)}; "
                f"got {tuple(M.shape)}.")
        if not bool(xp.all((M == 0) | (M == 1))):
            raise InvalidParameterError(f"The 'mask[{ell}]' parameter of {caller} must contain only 0 and 1.")
        out.append(M)
    return out


def _quoted(names):
    return ", ".join(repr(n) for n in names)


def _overflow(caller, what, names, dtype="float64"):
    """The error for a result beyond the dtype's range (finite, valid inputs): names the inputs it grows with."""
    return FloatingPointError(
        f"{caller}: {what} overflows {dtype} for these inputs ({_quoted(names)}); rescale them (the result is not "
        f"representable in this dtype).")


def _finite(value, caller, what, names):
    """``value`` (an array, or a list/tuple of arrays and None) if every entry is finite, else :func:`_overflow`."""
    for a in (value if isinstance(value, (list, tuple)) else (value,)):
        if isinstance(a, (list, tuple)):
            _finite(a, caller, what, names)
        elif a is not None:
            xp = namespace(a)
            if a.size and not bool(xp.all(xp.isfinite(a))):
                raise _overflow(caller, what, names, "float32" if a.dtype == xp.float32 else "float64")
    return value


def _float_finite(v, caller, what, names):
    if not math.isfinite(v):
        raise _overflow(caller, what, names)
    return v


def _norm(v, xp):
    """‖v‖₂ of a 1-D array without overflow or underflow of the squares: max|v|·‖v/max|v|‖₂ (a 0-d array)."""
    if v.shape[0] == 0:
        return xp.linalg.vector_norm(v)
    vh, scale = _scaled(v, xp)
    return scale[0] * xp.linalg.vector_norm(vh)


@contextmanager
def _in_range(caller, names):
    """Inputs are validated before this block: an error the network raises inside it (an overflow of its output or
    tangent kernel, refused by the net as non-finite) is reported as an overflow naming the user's inputs."""
    try:
        yield
    except (InvalidParameterError, FloatingPointError) as exc:
        raise _overflow(caller, "an intermediate result", names) from exc


def full_mask(params):
    """The all-ones mask (the dense network)."""
    _check_params(None, params, "params", "full_mask")
    return [namespace(W).ones_like(W) for W, _ in params]


def apply_mask(params, mask):
    """Masked parameters m ⊙ w: every weight times its 0/1 mask, biases unchanged."""
    _check_params(None, params, "params", "apply_mask")
    mask = _check_mask(params, mask, "apply_mask")
    return [(W * M, b) for (W, b), M in zip(params, mask)]


def _apply(params, mask):
    """apply_mask without checks (masks already checked)."""
    return [(W * M, b) for (W, b), M in zip(params, mask)]


def mask_density(mask):
    """Fraction of kept weights Σ m / #weights (a Python float)."""
    caller = "mask_density"
    if not isinstance(mask, (list, tuple)) or not mask:
        raise InvalidParameterError(
            f"The 'mask' parameter of {caller} must be a non-empty list of 0/1 arrays, one per layer. "
            f"Got {type(mask).__name__} instead.")
    kept = total = 0
    for ell, M in enumerate(mask):
        M = check_array(M, f"mask[{ell}]", caller=caller)
        xp = namespace(M)
        if not bool(xp.all((M == 0) | (M == 1))):
            raise InvalidParameterError(f"The 'mask[{ell}]' parameter of {caller} must contain only 0 and 1.")
        kept += float(xp.sum(M))
        total += math.prod(M.shape)
    if total == 0:
        raise InvalidParameterError(f"The 'mask' parameter of {caller} holds no weights.")
    return kept / total


def _n_keep(n, density, caller):
    density = check_real(density, "density", caller=caller, low=0.0, high=1.0, closed="right")
    return max(1, int(math.floor(density * n + 1e-9)))


def _topk_masks(scores, shapes, density, scope, caller, like, tiebreak=None):
    """0/1 masks keeping the top-k scores (ties: larger ``tiebreak`` score, then the lower flat index).

    Pure array-API: two stable descending argsorts give the order (primary descending, then secondary descending,
    then index ascending — ``numpy.lexsort((-secondary, -primary))``), and the inverse permutation (a third
    argsort) marks the first k positions without any setitem.  ``scores``/``tiebreak`` are lists of arrays shaped
    like the weights, in ``like``'s namespace.
    """
    scope = check_option(scope, "scope", ("global", "layer"), caller=caller)
    xp = namespace(like)

    def keep_top(primary, secondary):
        k = _n_keep(primary.shape[0], density, caller)
        if secondary is None:
            order = xp.argsort(primary, descending=True, stable=True)
        else:
            o1 = xp.argsort(secondary, descending=True, stable=True)
            order = xp.take(o1, xp.argsort(xp.take(primary, o1), descending=True, stable=True))
        rank = xp.argsort(order, stable=True)  # rank[i] = position of entry i in the order
        return xp.astype(rank < k, like.dtype)

    def flat(arrs):
        return xp.concat([xp.reshape(xp.asarray(a, dtype=like.dtype, device=device_of(like)), (-1,)) for a in arrs])

    if scope == "global":
        keep = keep_top(flat(scores), None if tiebreak is None else flat(tiebreak))
        out, start = [], 0
        for shp in shapes:
            size = math.prod(shp)
            out.append(xp.reshape(keep[start:start + size], shp))
            start += size
        return out
    return [xp.reshape(keep_top(flat([sc]), None if tiebreak is None else flat([tb])), shp)
            for sc, tb, shp in zip(scores, tiebreak if tiebreak is not None else [None] * len(scores), shapes)]


def magnitude_mask(params, density, *, scope="global"):
    r"""Keep the ⌊density·P⌋ weights of largest |w| (at least one): Algorithm 2's "mask based on magnitudes".

    ``scope="global"`` ranks all weights together; ``"layer"`` keeps ⌊density·P_ℓ⌋ in every layer.  Ties are
    broken by the lower flat index (row-major, layer order).  Computed in the weights' namespace (stable sorts).
    """
    Ws = _weights(_check_params(None, params, "params", "magnitude_mask"))
    return _topk_masks([namespace(W).abs(W) for W in Ws], [tuple(W.shape) for W in Ws], density, scope,
                       "magnitude_mask", Ws[0])


def random_mask(params, density, seed, *, scope="global"):
    """A uniformly random mask with exactly ⌊density·P⌋ kept weights (per layer with ``scope="layer"``).

    Drawn from ``numpy.random.default_rng(seed)`` (uniform scores for a random permutation, drawn on the host and
    moved to the weights' namespace), reproducible.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    Ws = _weights(_check_params(None, params, "params", "random_mask"))
    xp = namespace(Ws[0])
    scores = [xp.asarray(rng.random(tuple(W.shape)), dtype=W.dtype, device=device_of(W)) for W in Ws]
    return _topk_masks(scores, [tuple(W.shape) for W in Ws], density, scope, "random_mask", Ws[0])


def masked_apply(net, params, mask, x):
    """Outputs of the sparse network f_{m⊙w}(x), shape (n,) (seed 003 §3.2.2)."""
    _check_params(net, params, "params", "masked_apply")
    return net.apply(_apply(params, _check_mask(params, mask, "masked_apply")), x)


def masked_vjp(net, params, mask, x, cotangent):
    r"""Σᵢ cᵢ ∇_w f_{m⊙w}(xᵢ) = m ⊙ Σᵢ cᵢ ∇f(m⊙w; xᵢ), params-shaped (biases unmasked)."""
    _check_params(net, params, "params", "masked_vjp")
    mask = _check_mask(params, mask, "masked_vjp")
    grads = net.vjp(_apply(params, mask), x, cotangent)
    return [(dW * M, db) for (dW, db), M in zip(grads, mask)]


def _flat_mask(net, params, mask):
    """The mask over the Jacobian's columns (W₀ row-major, b₀, W₁, …), biases 1."""
    xp = namespace(params[0][0])
    parts = []
    for (W, b), M in zip(params, mask):
        parts.append(xp.reshape(M, (-1,)))
        if b is not None:
            parts.append(xp.ones_like(b))
    return xp.concat(parts)


def masked_jacobian(net, params, mask, x):
    r"""J_M(x) = ∇_w f_{m⊙w}(x) = J(m⊙w; x) with pruned columns set to 0, shape (n, P) (P = 0 rows: (0, P))."""
    caller = "masked_jacobian"
    _check_params(net, params, "params", caller)
    mask = _check_mask(params, mask, caller)
    W0 = params[0][0]
    xp = namespace(W0, x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    flat = _flat_mask(net, params, mask)
    if x.shape[0] == 0:
        return xp.zeros((0, flat.shape[0]), dtype=W0.dtype, device=device_of(W0))
    J = net.jacobian(_apply(params, mask), x)
    return J * flat[None, :]


def masked_empirical_ntk(net, params, mask, x1, x2=None, *, method="auto"):
    r"""Tangent kernel of the sparse net Θ^s(x, x′) = J_M(x) J_M(x′)ᵀ, shape (n1, n2).

    Computed layer by layer: with h_ℓ, δ_ℓ the activations and backprop signals of the masked net and
    c_ℓ = W_std,ℓ/√fan_in_ℓ (1 for :class:`LinearModel`),

    .. math::  Θ^s(x_a, x'_b) = \sum_ℓ c_ℓ^2 \sum_{ij} M_{ℓ,ij}\, h_{ℓ,i}(x_a) h_{ℓ,i}(x'_b)\,
               δ_{ℓ,j}(x_a) δ_{ℓ,j}(x'_b) \;+\; \sum_{ℓ:\,\text{bias}} b_{std,ℓ}^2 ⟨δ_ℓ(x_a), δ_ℓ(x'_b)⟩.

    ``method="factored"`` contracts j first (memory n1·fan_in·max(fan_out, n2), no Jacobian);
    ``"jacobian"`` forms the masked per-layer Jacobian blocks c_ℓ (h_ℓ ⊗ δ_ℓ) ⊙ M_ℓ (memory
    (n1 + n2)·fan_in·fan_out) and multiplies them; ``"auto"`` picks the smaller memory per layer.
    ``x2`` given: the mixed tangent kernel Θ^s(X, X̃) of (3.11)/(3.13) (not symmetric).  Exact up to
    rounding (tested against the explicit J_M J_Mᵀ of :func:`masked_jacobian` to 1e-12 relative).
    """
    caller = "masked_empirical_ntk"
    method = check_option(method, "method", ("auto", "factored", "jacobian"), caller=caller)
    _check_params(net, params, "params", caller)
    mask = _check_mask(params, mask, caller)
    W0 = params[0][0]
    xp = namespace(W0, x1, x2)
    x1 = check_array(x1, "x1", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    if x2 is not None:
        x2 = check_array(x2, "x2", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    out = _masked_ntk(net, params, mask, x1, x2, method)
    return _finite(out, caller, "the masked tangent kernel", ("x1", "x2", "params"))


def _masked_ntk(net, params, mask, x1, x2=None, method="auto"):
    """masked_empirical_ntk without checks; also for a continuous mask m ∈ [0, 1] (Σ m_k J_k J'_k at m⊙w)."""
    p_eff = [(W * M, b) for (W, b), M in zip(params, mask)]
    h1, d1, xp = net.features(p_eff, x1, name="x1")
    if x2 is None:
        h2, d2 = h1, d1
    else:
        h2, d2, _ = net.features(p_eff, x2, name="x2")
    n1, n2 = h1[0].shape[0], h2[0].shape[0]
    # the factored route holds an (n1, fan_in, n2) array per layer, the Jacobian route (n, fan_in·fan_out) ones
    biggest = max(min(n1 * M.shape[0] * max(M.shape[1], n2), (n1 + n2) * M.shape[0] * M.shape[1]) for M in mask)
    check_memory(3 * n1 * n2 + 2 * biggest, f"The ({n1}, {n2}) masked empirical NTK of 'x1'/'x2'",
                 "masked_empirical_ntk", h1[0])
    out = None
    for ell, M in enumerate(mask):
        c2 = _layer_scale(net, ell) ** 2
        fi, fo = M.shape
        how = method
        if how == "auto":
            how = "factored" if n1 * fi * max(fo, n2) <= (n1 + n2) * fi * fo else "jacobian"
        if how == "factored":
            # G[a, i, b] = Σ_j M_ij δ1[a, j] δ2[b, j]
            G = (d1[ell][:, None, :] * M[None, :, :]) @ xp.matrix_transpose(d2[ell])
            term = c2 * xp.sum(h1[ell][:, :, None] * G * xp.matrix_transpose(h2[ell])[None, :, :], axis=1)
        else:
            J1 = xp.reshape(h1[ell][:, :, None] * d1[ell][:, None, :] * M[None, :, :], (n1, fi * fo))
            J2 = xp.reshape(h2[ell][:, :, None] * d2[ell][:, None, :], (n2, fi * fo))
            term = c2 * (J1 @ xp.matrix_transpose(J2))
        if params[ell][1] is not None:
            term = term + net.b_std[ell] ** 2 * (d1[ell] @ xp.matrix_transpose(d2[ell]))
        out = term if out is None else out + term
    if x2 is None:
        out = (out + xp.matrix_transpose(out)) / 2
    return out


# ==================================================================================================
# second derivatives (for ∇_w of the kernel distance): a hand-written R-operator
# ==================================================================================================
def _hvp_per_sample(net, params, x, V):
    r"""Σ_a H(x_a) V_a with H(x) = ∇²_w f(w; x) and one direction V_a per sample (params-shaped, leading axis n).

    Forward-over-reverse (Pearlmutter's R-operator) written by hand for z_ℓ = c_ℓ h_ℓ W_ℓ + s_ℓ b_ℓ,
    h_{ℓ+1} = relu(z_ℓ): tangents ż_ℓ = c_ℓ(ḣ_ℓ W_ℓ + h_ℓ V_ℓ) + s_ℓ v_ℓ, ḣ_{ℓ+1} = 𝟙(z_ℓ > 0) ż_ℓ, and
    δ̇_ℓ = c_{ℓ+1}(δ̇_{ℓ+1} W_{ℓ+1}ᵀ + δ_{ℓ+1} V_{ℓ+1}ᵀ) ⊙ 𝟙(z_ℓ > 0), δ̇_L = 0; the derivative of the gradient
    is c_ℓ(ḣ_ℓᵀ δ_ℓ + h_ℓᵀ δ̇_ℓ) for W_ℓ and s_ℓ δ̇_ℓ for b_ℓ (summed over samples).  ReLU's second derivative
    is 0 away from kinks, so this is the exact Hessian wherever no pre-activation is 0.
    """
    hs, deltas, xp = net.features(params, x)
    L = net.depth
    c = [_layer_scale(net, ell) for ell in range(L + 1)]
    act = [xp.astype(hs[ell + 1] > 0, hs[0].dtype) for ell in range(L)]

    def bmm(a, B):  # row a[i] times matrix B[i]
        return (a[:, None, :] @ B)[:, 0, :]

    hdot = [xp.zeros_like(hs[0])]
    for ell in range(L):
        W, b = params[ell]
        VW, Vb = V[ell]
        zdot = c[ell] * (hdot[ell] @ W + bmm(hs[ell], VW))
        if b is not None:
            zdot = zdot + net.b_std[ell] * Vb
        hdot.append(zdot * act[ell])
    ddot = [None] * (L + 1)
    ddot[L] = xp.zeros_like(deltas[L])
    for ell in range(L, 0, -1):
        W = params[ell][0]
        VW = V[ell][0]
        back = c[ell] * (ddot[ell] @ xp.matrix_transpose(W) + bmm(deltas[ell], xp.matrix_transpose(VW)))
        ddot[ell - 1] = back * act[ell - 1]
    out = []
    for ell in range(L + 1):
        dW = c[ell] * (xp.matrix_transpose(hdot[ell]) @ deltas[ell] + xp.matrix_transpose(hs[ell]) @ ddot[ell])
        db = net.b_std[ell] * xp.sum(ddot[ell], axis=0) if params[ell][1] is not None else None
        out.append((dW, db))
    return out


def _weighted_grads(net, params, mask, x, E):
    r"""U_a = m ⊙ Σ_b E_ab ∇f(p; x_b) for every row a of E (params-shaped, leading axis n_a)."""
    hs, deltas, xp = net.features(params, x)
    out = []
    for ell, M in enumerate(mask):
        c = _layer_scale(net, ell)
        fi, fo = M.shape
        per_sample = xp.reshape(hs[ell][:, :, None] * deltas[ell][:, None, :], (hs[ell].shape[0], fi * fo))
        UW = c * xp.reshape(E @ per_sample, (E.shape[0], fi, fo)) * M[None, :, :]
        Ub = net.b_std[ell] * (E @ deltas[ell]) if params[ell][1] is not None else None
        out.append((UW, Ub))
    return out


# ==================================================================================================
# the AWT objective (3.13) / (3.20)
# ==================================================================================================
@dataclass
class AWTValue:
    """Value of the AWT objective (3.13): ``total = target + kernel`` and the attacked points used."""

    total: float
    target: float
    kernel: float
    x_adv: object = None
    x_adv_sparse: object = None


def _squared_loss_input_grad(net, params):
    """(x̃, y) ↦ ∇ₓ ½(f(x̃) − y)² = (f(x̃) − y)∇ₓf(x̃), per row (the attack loss of Ch. 3, (3.9))."""

    def grad(x_adv, y):
        z = net.apply(params, x_adv)
        xp = namespace(z)
        return xp.reshape(z - y, (-1, 1)) * _adv.input_gradient(net, params, x_adv)

    return grad


def _attack_fn(attack, eps, norm, steps, step_size, domain, caller, loss=None, names=("x", "y", "params0")):
    """A callable (net, params, x, y) -> x̃ for the AWT objective; ε = 0 gives x (NTT).

    The attacks ascend ½(f − y)² (Ch. 3) unless ``loss`` (an object with ``derivative``) is given.  A loss
    gradient beyond the dtype's range (an output that overflows) is an error naming ``names``."""
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    if callable(attack):
        return lambda net, params, x, y: (x if eps == 0 else attack(net, params, x, y))
    attack = check_option(attack, "attack", ("pgd", "fgsm"), caller=caller)
    steps = check_int(steps, "attack_steps", caller=caller, low=1)
    if step_size is None:
        step_size = 2.5 * eps / steps if eps > 0 else 1.0  # the seed's 2.5ε/k (§3.4)
    step_size = check_real(step_size, "step_size", caller=caller, low=0.0, closed="neither")

    def run(net, params, x, y):
        if eps == 0:
            return x
        g0 = _squared_loss_input_grad(net, params) if loss is None else _adv.loss_input_gradient(net, params, loss)

        def g(x_adv, y_):
            return _finite(g0(x_adv, y_), caller, "the attack's loss gradient ∇ₓℓ(f(x̃), y)", names)

        if attack == "fgsm":
            return _adv.fgsm(g, x, y, eps=eps, norm=norm, domain=domain)
        return _adv.pgd(g, x, y, eps=eps, step_size=step_size, steps=steps, norm=norm, domain=domain)

    return run


def _data(net, params, x, y, caller):
    xp = namespace(params[0][0], x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=params[0][0].dtype)
    y = check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(x.shape[0],), dtype=x.dtype)
    if x.shape[0] == 0:
        raise InvalidParameterError(f"The 'x' parameter of {caller} must have at least one row.")
    return xp, x, y


def awt_distances(net, params0, mask, x, x_adv, x_adv_sparse, *, gamma=1.0, student=None):
    r"""The two terms of (3.13) at given attacked points: (total, target distance, kernel distance).

    .. math::  \text{target} = \frac1N\|f_{θ_0}(\tilde X_0) - f_{m⊙w}(\tilde X^s)\|^2,\qquad
               \text{kernel} = \frac{γ^2}{N^2}\|Θ_0(X, \tilde X_0) - Θ^s(X, \tilde X^s)\|_F^2,

    N = number of rows of ``x``; w = ``student`` (default θ₀ = ``params0``, i.e. (3.13) itself).
    Returns an :class:`AWTValue` (floats).  Exact up to rounding.
    """
    caller = "awt_distances"
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0)
    params0, student, mask = _check_awt_params(net, params0, student, mask, caller)
    x, x_adv, x_adv_sparse = _check_points(params0, x, x_adv, x_adv_sparse, caller)
    names = ("x", "x_adv", "x_adv_sparse", "params0") + (() if student is params0 else ("student",))
    return _distances(net, params0, student, mask, x, x_adv, x_adv_sparse, gamma, caller, names)


def _check_awt_params(net, params0, student, mask, caller):
    """Checked (params0, student, mask): ``student`` defaults to ``params0``; the mask is checked against it."""
    _check_params(net, params0, "params0", caller)
    if student is None:
        student = params0
    else:
        _check_params(net, student, "student", caller)
    return params0, student, _check_mask(student, mask, caller, "params0" if student is params0 else "student")


def _check_points(params0, x, x_adv, x_adv_sparse, caller):
    """x (N, d) with N ≥ 1 and the attacked points x̃₀, x̃ˢ of the same shape, in the parameters' namespace."""
    W0 = params0[0][0]
    xp = namespace(W0, x, x_adv, x_adv_sparse)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, dtype=W0.dtype, like=W0)
    if x.shape[0] == 0:
        raise InvalidParameterError(f"The 'x' parameter of {caller} must have at least one row.")
    x_adv = check_array(x_adv, "x_adv", caller=caller, xp=xp, shape=tuple(x.shape), dtype=x.dtype, like=x)
    x_adv_sparse = check_array(x_adv_sparse, "x_adv_sparse", caller=caller, xp=xp, shape=tuple(x.shape), dtype=x.dtype,
                               like=x)
    return x, x_adv, x_adv_sparse


def _distances(net, params0, student, mask, x, x_adv, x_adv_sparse, gamma, caller, names):
    """awt_distances on checked inputs; a term beyond the dtype's range is an error naming ``names``."""
    xp = namespace(x)
    n = x.shape[0]
    target = _target_distance(net, params0, student, mask, x_adv, x_adv_sparse, xp, caller, names)
    E = _kernel_residual(net, params0, student, mask, x, x_adv, x_adv_sparse, xp, caller, names)
    tgt = _float_finite(float(xp.sum(target ** 2)) / n, caller, "the target distance", names)
    ker = _float_finite(gamma ** 2 * float(xp.sum(E ** 2)) / n ** 2, caller, "the kernel distance", names)
    return AWTValue(total=_float_finite(tgt + ker, caller, "the AWT objective", names), target=tgt, kernel=ker,
                    x_adv=x_adv, x_adv_sparse=x_adv_sparse)


def _target_distance(net, params0, student, mask, x_adv, x_adv_sparse, xp, caller, names):
    """f^s(X̃ˢ) − f₀(X̃₀) (the residual of the target distance), inputs checked."""
    with _in_range(caller, names):
        r = net.apply(_apply(student, mask), x_adv_sparse) - net.apply(params0, x_adv)
    return _finite(r, caller, "the network output", names)


def _kernel_residual(net, params0, student, mask, x, x_adv, x_adv_sparse, xp, caller, names):
    """E = Θ₀(X, X̃₀) − Θ^s(X, X̃ˢ), inputs checked."""
    with _in_range(caller, names):
        E = net.empirical_ntk(params0, x, x_adv) - _masked_ntk(net, student, mask, x, x_adv_sparse)
    return _finite(E, caller, "the tangent kernel residual Θ₀ − Θˢ", names)


def awt_objective(net, params0, mask, x, y, *, eps=0.0, gamma=1.0, norm="l2", attack="pgd", attack_steps=10,
                  step_size=None, domain=None, student=None):
    r"""The AWT objective (seed 003 (3.13) = (3.20)) of ``mask``, attacks included.

    .. math::  \mathcal L_{awt} = \frac1N\|f_{θ_0}(\tilde X_0) - f_{m⊙w}(\tilde X^s)\|^2
               + \frac{γ^2}{N^2}\|Θ_0(X, \tilde X_0) - Θ^s(X, \tilde X^s)\|_F^2

    X̃₀ = attack on the dense net at θ₀; X̃ˢ = the same attack on the sparse net f_{m⊙w}; both ascend the
    squared loss ½(f(x̃) − y)² of Ch. 3.  w = ``student`` (default θ₀: (3.13) as printed; Algorithm 2
    evaluates it at its student).  ε = 0 gives X̃ = X and the Neural Tangent Transfer loss
    (1/N)‖f₀(X) − f^s(X)‖² + (γ²/N²)‖Θ₀(X, X) − Θ^s(X, X)‖²_F.

    Parameters
    ----------
    net : FullyConnected or LinearModel
    params0 : the dense initialisation θ₀.
    mask : list of 0/1 arrays shaped like the weights.
    x : (N, d); y : (N,) real targets (labels ±1 for classification).
    eps : float ≥ 0, attack radius.  gamma : float ≥ 0, the kernel-distance weight γ (enters as γ²).
    norm : "l2" | "linf".  attack : "pgd" (from x, ``attack_steps`` steps of ``step_size``, default 2.5ε/k,
        projected) | "fgsm" | callable (net, params, x, y) -> x̃ (params are the effective, masked ones).
    domain : (lo, hi) input box or None.  student : params like θ₀ (default θ₀).

    Returns
    -------
    AWTValue
        ``total``, ``target``, ``kernel`` (floats) and the attacked points ``x_adv``, ``x_adv_sparse``.
        With ``mask`` all ones, ``student`` = θ₀ and a deterministic attack the value is exactly 0.
    """
    caller = "awt_objective"
    params0, student, mask = _check_awt_params(net, params0, student, mask, caller)
    xp, x, y = _data(net, params0, x, y, caller)
    names = ("x", "y", "params0") + (() if student is params0 else ("student",))
    run = _attack_fn(attack, eps, norm, attack_steps, step_size, domain, caller, names=names)
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0)
    x_adv = run(net, params0, x, y)
    x_adv_s = run(net, _apply(student, mask), x, y)
    return _distances(net, params0, student, mask, x, x_adv, x_adv_s, gamma, caller, names)


def awt_objective_general(net, params0, mask, x, y, loss, *, eps=0.0, norm="l2", attack="pgd", attack_steps=10,
                          step_size=None, domain=None):
    r"""The AWT objective for a general loss, seed 003 (3.45) (unsquared norms, no γ).

    .. math::  \mathcal L'_{awt} = \frac1N\big\|∇_f\mathcal L(\tilde X_0) - ∇_{f^s}\mathcal L(\tilde X^s)\big\|_2
               + \frac1{N^2}\big\|Θ_0(X, \tilde X_0) - Θ^s(X, \tilde X^s)\big\|_F,

    with ∇_f𝓛(X̃) = (l′(f(x̃ᵢ), yᵢ))ᵢ the vector of per-example loss derivatives (the force in the dynamics
    (3.44)), X̃₀ the attack on the dense net at θ₀ and X̃ˢ = X̃′₀ the same attack on f_{m⊙θ₀}, both ascending
    ``loss`` (an ``ntkref.losses`` name or any object with ``derivative(z, y)``).  For the seed's ½(f − y)²
    (l′ = f − y) the first term is (1/N)‖f₀(X̃₀) − f^s(X̃ˢ)‖ = √(target/N) of (3.13); for a loss whose l′ is
    C-Lipschitz ((3.46); :func:`ntkref.adversarial.loss_gradient_lipschitz`) it is at most C times that, which is
    the seed's argument that (3.20) also serves other losses.  Returns an :class:`AWTValue` (``target`` = the
    first term, ``kernel`` = the second).  Exact up to rounding.
    """
    caller = "awt_objective_general"
    params0, _, mask = _check_awt_params(net, params0, None, mask, caller)
    xp, x, y = _data(net, params0, x, y, caller)
    loss_obj = loss if callable(getattr(loss, "derivative", None)) else _losses.get(loss)
    names = ("x", "y", "params0")
    run = _attack_fn(attack, eps, norm, attack_steps, step_size, domain, caller, loss=loss_obj, names=names)
    n = x.shape[0]
    x_adv = run(net, params0, x, y)
    sparse = _apply(params0, mask)
    x_adv_s = run(net, sparse, x, y)
    with _in_range(caller, names):
        force = loss_obj.derivative(net.apply(params0, x_adv), y) - loss_obj.derivative(net.apply(sparse, x_adv_s), y)
    force = _finite(force, caller, "the loss derivative", names)
    E = _kernel_residual(net, params0, params0, mask, x, x_adv, x_adv_s, xp, caller, names)
    tgt = _float_finite(float(_norm(force, xp)) / n, caller, "the target term", names)
    ker = _float_finite(float(_norm(xp.reshape(E, (-1,)), xp)) / n ** 2, caller, "the kernel term", names)
    return AWTValue(total=tgt + ker, target=tgt, kernel=ker, x_adv=x_adv, x_adv_sparse=x_adv_s)


def awt_gap_bound(alpha, eps, c1, c2):
    r"""The dense-vs-sparse output gap bound of seed 003 Thm 3.2.2 (3.14) = Thm 3.5.2 (3.21).

    .. math::  \mathbb E_x\|f_t(x) - f^s_t(x)\|^2 \le 4(α + 4C_qε)^2,\qquad C_q = C_{1,q} + εC_{2,q},

    α² = the optimal value of (3.13), C_{1,q} ≥ ‖∂ₓf‖_q and C_{2,q} ≥ ‖∂²ₓₓf‖_{p,q} for the dense and the sparse net
    at all times (q dual to the attack's p).  Exact arithmetic.  The rigorous part is the base case (3.30),
    (1/N)‖f₀(X) − f₀ˢ(X)‖² ≤ (α + 4C_qε)² (Lemma 3.5.3 and the triangle inequality, for any mask whose (3.13)
    value is ≤ α²); the induction step (3.31)–(3.38) is heuristic (it needs n → ∞, uses C₂ for the unstated
    mixed derivative ∇²_{θ,x}f, and (3.36) has the typo α + 4C_qε√N for α + 4C_qε).
    """
    caller = "awt_gap_bound"
    alpha = check_real(alpha, "alpha", caller=caller, low=0.0)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    c1 = check_real(c1, "c1", caller=caller, low=0.0)
    c2 = check_real(c2, "c2", caller=caller, low=0.0)
    return 4.0 * (alpha + 4.0 * (c1 + eps * c2) * eps) ** 2


def awt_step_size(steps, eps, gamma, c, c1, c2):
    r"""The learning rate (3.37) of the proof of seed 003 Thm 3.5.2, verbatim.

    .. math::  η = \min\Big\{\frac{1}{T(2 + ε/γ)},\ \frac{4C_qε}{T(2cC_{1,q}C_{2,q} + 8C_q)}\Big\},\qquad
               C_q = C_{1,q} + εC_{2,q},

    T = ``steps``, c = max_{x∈X}|f(x) − y|.  The inventory suspects "ε/γ" stands for "α/γ" (the derivation is
    not shown), so it is copied as printed.  Note that the second term is 0 at ε = 0, so (3.37) gives η = 0 for
    natural training — the formula is degenerate there (returned as printed).  For C₂ = 0 (e.g. linear f) the
    second term is ε/(2T).  Exact arithmetic.
    """
    caller = "awt_step_size"
    T = check_int(steps, "steps", caller=caller, low=1)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0, closed="neither")
    c = check_real(c, "c", caller=caller, low=0.0)
    c1 = check_real(c1, "c1", caller=caller, low=0.0)
    c2 = check_real(c2, "c2", caller=caller, low=0.0)
    cq = c1 + eps * c2
    denominator = 2.0 * c * c1 * c2 + 8.0 * cq
    if not denominator > 0:
        raise InvalidParameterError(f"{caller}: (3.37) needs C_q = c1 + eps·c2 > 0 (its second term is 0/0).")
    return min(1.0 / (T * (2.0 + eps / gamma)), 4.0 * cq * eps / (T * denominator))


def awt_gradient(net, params0, student, mask, x, x_adv, x_adv_sparse, *, gamma=1.0):
    r"""∇_w of (3.13) at the student w with the attacked points held fixed (Algorithm 2, line 4).

    With p = m⊙w, r = f(p; X̃ˢ) − f₀(X̃₀), E = Θ₀(X, X̃₀) − Θ^s(X, X̃ˢ):

    .. math::  ∇_w\,\text{target} = \frac2N\, m ⊙ J(p; \tilde X^s)^\top r,\qquad
               ∇_w\,\text{kernel} = -\frac{2γ^2}{N^2}\, m ⊙ \Big(\sum_a H(p; x_a) U_a + \sum_b H(p; \tilde x^s_b) \tilde U_b\Big),

    U_a = m ⊙ Σ_b E_ab ∇f(p; x̃ˢ_b), Ũ_b = m ⊙ Σ_a E_ab ∇f(p; x_a), H the parameter Hessian of f (a hand-written
    R-operator; zero for :class:`LinearModel`).  Exact (tested against central finite differences) wherever
    no ReLU pre-activation is 0.  Returns a params-shaped list; pruned weights get 0.
    """
    caller = "awt_gradient"
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0)
    if student is None:
        raise InvalidParameterError(f"The 'student' parameter of {caller} must be a parameter list like 'params0'.")
    params0, student, mask = _check_awt_params(net, params0, student, mask, caller)
    x, x_adv, x_adv_sparse = _check_points(params0, x, x_adv, x_adv_sparse, caller)
    names = ("x", "x_adv", "x_adv_sparse", "params0", "student")
    xp = namespace(x)
    n = x.shape[0]
    p_eff = _apply(student, mask)
    r = _target_distance(net, params0, student, mask, x_adv, x_adv_sparse, xp, caller, names)
    with _in_range(caller, names):
        g_target = net.vjp(p_eff, x_adv_sparse, (2.0 / n) * r)
    grads = [[dW, db] for dW, db in g_target]
    if gamma > 0 and net.depth > 0:  # a linear model's Jacobian does not depend on w: no kernel-term gradient
        E = _kernel_residual(net, params0, student, mask, x, x_adv, x_adv_sparse, xp, caller, names)
        coef = -2.0 * gamma ** 2 / n ** 2
        U = _weighted_grads(net, p_eff, mask, x_adv_sparse, E)                       # directions for H(x_a)
        Ut = _weighted_grads(net, p_eff, mask, x, xp.matrix_transpose(E))           # directions for H(x̃_b)
        h1 = _hvp_per_sample(net, p_eff, x, U)
        h2 = _hvp_per_sample(net, p_eff, x_adv_sparse, Ut)
        for ell in range(len(grads)):
            grads[ell][0] = grads[ell][0] + coef * (h1[ell][0] + h2[ell][0])
            if grads[ell][1] is not None:
                grads[ell][1] = grads[ell][1] + coef * (h1[ell][1] + h2[ell][1])
    return _finite([(dW * M, db) for (dW, db), M in zip(grads, mask)], caller, "the gradient", names)


def linear_awt_objective(theta0, mask, x, y, *, eps, gamma=1.0, student=None):
    r"""Closed form of (3.13) for f_θ(x) = θ·x with the exact ℓ2 attack on ½(θ·x − y)².

    The attack maximises |θ·x̃ − y| over ‖x̃ − x‖₂ ≤ ε: x̃ = x + ε s θ/‖θ‖, s = sign(θ·x − y) (s = 0 if
    θ·x = y, θ = 0 gives x̃ = x), so f(x̃) = θ·x + ε s‖θ‖.  With θ_s = m⊙w (w = ``student``, default θ₀),
    D = diag(m):

    .. math::  \text{target} = \frac1N \sum_i \big(θ_0·x_i + ε s_i‖θ_0‖ - θ_s·x_i - ε s^s_i‖θ_s‖\big)^2,

    .. math::  Θ_0(X, \tilde X_0) = XX^\top + \frac{ε}{‖θ_0‖}(Xθ_0)s^\top,\quad
               Θ^s(X, \tilde X^s) = XDX^\top + \frac{ε}{‖θ_s‖}(Xθ_s)(s^s)^\top,

    kernel = γ²/N² ‖Θ₀ − Θ^s‖²_F.  ``theta0`` (d,), ``mask`` (d,) 0/1 or a one-layer list; returns an
    :class:`AWTValue` without attacked points.
    """
    caller = "linear_awt_objective"
    xp = namespace(theta0, x)
    theta0 = check_array(theta0, "theta0", caller=caller, ndim=1, xp=xp)
    d = theta0.shape[0]
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, shape=(None, d), dtype=theta0.dtype)
    y = check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(x.shape[0],), dtype=theta0.dtype)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0)
    if isinstance(mask, (list, tuple)):
        mask = mask[0]
    m = check_array(xp.reshape(xp.asarray(mask, device=device_of(theta0)), (-1,)), "mask", caller=caller, xp=xp,
                    shape=(d,), dtype=theta0.dtype)
    if not bool(xp.all((m == 0) | (m == 1))):
        raise InvalidParameterError(f"The 'mask' parameter of {caller} must contain only 0 and 1.")
    w = theta0 if student is None else check_array(student, "student", caller=caller, ndim=1, xp=xp, shape=(d,))
    theta_s = m * w
    n = x.shape[0]

    names = ("theta0", "x", "y") + (() if student is None else ("student",))

    def attacked(theta):
        z = x @ theta
        nrm = float(_norm(theta, xp))  # scaled: ‖θ‖ of a θ with |θᵢ| ~ 1e200 is finite
        s = xp.sign(z - y)
        return z + eps * s * nrm, s, (eps / nrm if nrm > 0 else 0.0)

    f0, s0, c0 = attacked(theta0)
    fs, ss, cs = attacked(theta_s)
    K0 = x @ xp.matrix_transpose(x) + c0 * (x @ theta0)[:, None] * s0[None, :]
    Ks = (x * m[None, :]) @ xp.matrix_transpose(x) + cs * (x @ theta_s)[:, None] * ss[None, :]
    _finite([f0, fs], caller, "the attacked outputs θ·x̃", names)
    _finite([K0, Ks], caller, "the tangent kernels Θ(X, X̃)", names)
    tgt = _float_finite(float(xp.sum((f0 - fs) ** 2)) / n, caller, "the target distance", names)
    ker = _float_finite(gamma ** 2 * float(xp.sum((K0 - Ks) ** 2)) / n ** 2, caller, "the kernel distance", names)
    return AWTValue(total=_float_finite(tgt + ker, caller, "the AWT objective", names), target=tgt, kernel=ker)


# ==================================================================================================
# Algorithm 2 and phase two
# ==================================================================================================
@dataclass
class AWTSearchResult:
    """Output of :func:`awt_search`.

    ``mask`` (the selected mask), ``last_mask`` (Algorithm 2's return value), ``student`` (final w),
    ``objective`` (the (3.13) value of ``mask`` at θ₀), ``history`` (per step: total, target, kernel of the
    student on its minibatch) and ``mask_history`` ((step, (3.13) value at θ₀) for every visited mask).
    """

    mask: list
    last_mask: list
    student: list
    objective: AWTValue
    history: list = field(default_factory=list)
    mask_history: list = field(default_factory=list)


def _relaxed_value(net, params0, m, x, x_adv, x_adv_s, gamma, xp):
    """(3.13) at a continuous mask m: student m⊙θ₀, Θ^s = J diag(m) J̃ᵀ; returns ((total, target, kernel), r, E)."""
    n = x.shape[0]
    p_eff = [(W * M, b) for (W, b), M in zip(params0, m)]
    r = net.apply(p_eff, x_adv_s) - net.apply(params0, x_adv)
    E = net.empirical_ntk(params0, x, x_adv) - _masked_ntk(net, params0, m, x, x_adv_s)
    target, kernel = float(xp.sum(r ** 2)) / n, gamma ** 2 * float(xp.sum(E ** 2)) / n ** 2
    return (target + kernel, target, kernel), r, E


def _relaxed_gradient(net, params0, m, x, x_adv, x_adv_s, gamma, xp):
    r"""∂/∂m of (3.13) relaxed to m ∈ [0, 1]^P (weights only), attacked points held fixed.

    Student p = m⊙θ₀, Θ^s(m) = Σ_k m_k J_k(p; X) J_k(p; X̃ˢ)ᵀ (linear in the explicit m; equal to J_M J_Mᵀ at
    0/1 masks).  With r, E as in :func:`awt_gradient`:
    ∂L/∂m = θ₀ ⊙ (2/N) J(p; X̃ˢ)ᵀr − (2γ²/N²)[Σ_ab E_ab J(p; x_a) ⊙ J(p; x̃ˢ_b)
    + θ₀ ⊙ (Σ_a H(p; x_a)U_a + Σ_b H(p; x̃ˢ_b)Ũ_b)].
    """
    n = x.shape[0]
    terms, r, E = _relaxed_value(net, params0, m, x, x_adv, x_adv_s, gamma, xp)
    p_eff = [(W * M, b) for (W, b), M in zip(params0, m)]
    g_t = net.vjp(p_eff, x_adv_s, (2.0 / n) * r)
    grads = [dW * W0 for (dW, _), (W0, _) in zip(g_t, params0)]
    if gamma > 0:
        coef = -2.0 * gamma ** 2 / n ** 2
        ones = [xp.ones_like(M) for M in m]
        U1 = _weighted_grads(net, p_eff, ones, x_adv_s, E)  # Σ_b E_ab ∇f(p; x̃_b), unmasked
        hs, deltas, _ = net.features(p_eff, x)
        explicit = []
        for ell in range(len(m)):
            c = _layer_scale(net, ell)
            explicit.append(c * xp.sum(hs[ell][:, :, None] * deltas[ell][:, None, :] * U1[ell][0], axis=0))
        grads = [g + coef * e for g, e in zip(grads, explicit)]
        if net.depth > 0:
            U = [(UW * M[None, :, :], Ub) for (UW, Ub), M in zip(U1, m)]
            Ut = _weighted_grads(net, p_eff, m, x, xp.matrix_transpose(E))
            h1 = _hvp_per_sample(net, p_eff, x, U)
            h2 = _hvp_per_sample(net, p_eff, x_adv_s, Ut)
            grads = [g + coef * W0 * (a[0] + b[0]) for g, (W0, _), a, b in zip(grads, params0, h1, h2)]
    return terms, grads


def _project_capped_simplex(v, k, xp):
    """Euclidean projection of v onto {m ∈ [0, 1]^P : Σ m = k}: clip(v − τ, 0, 1) with Σ = k, τ by bisection.

    Σ clip(v − τ, 0, 1) is continuous and nonincreasing in τ, from P ≥ k at τ = min v − 1 to 0 at τ = max v; 100
    halvings pin τ to ~2⁻¹⁰⁰ of that range.  The bracket is updated with xp.where on 0-d arrays (no host sync).
    """
    lo, hi = xp.min(v) - 1.0, xp.max(v)
    for _ in range(100):
        tau = 0.5 * (lo + hi)
        above = xp.sum(xp.clip(v - tau, 0.0, 1.0)) > k
        lo, hi = xp.where(above, tau, lo), xp.where(above, hi, tau)
    return xp.clip(v - 0.5 * (lo + hi), 0.0, 1.0)


def awt_search(net, params0, x, y, density, *, method="relaxed", eps=0.0, gamma=1.0, norm="l2", attack="pgd",
               attack_steps=10, step_size=None, domain=None, lr=None, steps=100, mask_every=10, weight_decay=0.0,
               batch_size=None, scope="global", select="best", seed=0):
    r"""Search a mask of the given density minimising the AWT objective (3.13) (seed 003 Algorithm 2).

    Two searches (``method``):

    - ``"algorithm2"`` — the seed's Algorithm 2: w₀ = θ₀, m = magnitude mask of θ₀; for t = 1..``steps``:
      minibatch S (all points if ``batch_size`` is None), attack the student f_{m⊙w} on S, exact gradient of
      (3.13) at the student (:func:`awt_gradient`, attacked points fixed; dense side from θ₀),
      w ← w − lr·∇_w L_awt − β m⊙w (β = ``weight_decay``), and every ``mask_every`` steps m ← top-k |w|.
      (Plain gradient descent, default lr 1e-2; the seed used Adam, lr 5e-4, batch 64, γ = 1e-3.)  The
      mask moves only through |w|: for a linear model ∇_w of the kernel distance is 0, so the kernel
      distance never steers the mask (the Table 3.1 validation shows the consequence).
    - ``"relaxed"`` (default) — a documented surrogate that optimises the mask itself: relax m to
      [0, 1]^P with Σ m = k = ⌊density·P⌋ (global scope), student m⊙θ₀ and Θ^s = J diag(m) J̃ᵀ (equal to (3.13)
      at 0/1 masks), start from the magnitude mask of θ₀, take projected normalised gradient steps
      m ← Π(m − lr·g/max|g|) (default lr 0.1, exact hand-written gradient, :func:`_relaxed_gradient`,
      projection onto the capped simplex) and every ``mask_every`` steps round to the top-k of m (ties by
      |θ₀|).

    Every rounded mask (and the magnitude mask of θ₀) is scored by (3.13) at θ₀ on all points;
    ``select="best"`` returns the lowest-scoring one, ``"last"`` the last rounded mask (Algorithm 2's
    return value).  Deterministic given ``seed`` (minibatches).  Returns an :class:`AWTSearchResult`.
    """
    caller = "awt_search"
    method = check_option(method, "method", ("relaxed", "algorithm2"), caller=caller)
    _check_params(net, params0, "params0", caller)
    xp, x, y = _data(net, params0, x, y, caller)
    names = ("x", "y", "params0")
    run = _attack_fn(attack, eps, norm, attack_steps, step_size, domain, caller, names=names)
    gamma = check_real(gamma, "gamma", caller=caller, low=0.0)
    lr = (0.1 if method == "relaxed" else 1e-2) if lr is None else lr
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    mask_every = check_int(mask_every, "mask_every", caller=caller, low=1)
    beta = check_real(weight_decay, "weight_decay", caller=caller, low=0.0)
    select = check_option(select, "select", ("best", "last"), caller=caller)
    scope = check_option(scope, "scope", ("global", "layer"), caller=caller)
    if method == "relaxed" and scope != "global":
        raise InvalidParameterError("awt_search: method='relaxed' supports scope='global' only.")
    n = x.shape[0]
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", caller=caller, low=1, high=n)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    x_adv0 = run(net, params0, x, y)

    def score(mask):
        x_adv_s = run(net, _apply(params0, mask), x, y)
        return _distances(net, params0, params0, mask, x, x_adv0, x_adv_s, gamma, caller, names)

    def batch():
        if batch_size is None:
            return x, y, x_adv0
        idx = xp.asarray(np.sort(rng.choice(n, size=batch_size, replace=False)), device=device_of(x))
        return xp.take(x, idx, axis=0), xp.take(y, idx, axis=0), xp.take(x_adv0, idx, axis=0)

    mask = magnitude_mask(params0, density, scope=scope)
    best_mask, best_val = mask, score(mask)
    mask_history = [(0, best_val.total)]
    history = []
    w = [(W, b) for W, b in params0]
    shapes = [tuple(W.shape) for W, _ in params0]
    abs0 = [xp.abs(W) for W, _ in params0]
    if method == "relaxed":
        sizes = [math.prod(sh) for sh in shapes]
        k = _n_keep(sum(sizes), density, caller)
        m_flat = xp.concat([xp.reshape(M, (-1,)) for M in mask])  # start at the magnitude mask

        def split(v):
            out, start = [], 0
            for sh, sz in zip(shapes, sizes):
                out.append(xp.reshape(v[start:start + sz], sh))
                start += sz
            return out

    for t in range(1, steps + 1):
        xs, ys, xa0 = batch()
        if method == "algorithm2":
            xas = run(net, _apply(w, mask), xs, ys)
            val = _distances(net, params0, w, mask, xs, xa0, xas, gamma, caller, names + ("lr",))
            history.append((val.total, val.target, val.kernel))
            g = awt_gradient(net, params0, w, mask, xs, xa0, xas, gamma=gamma)
            w = [(W - lr * dW - beta * M * W, (b - lr * db) if b is not None else None)
                 for (W, b), (dW, db), M in zip(w, g, mask)]
        else:
            m = split(m_flat)
            xas = run(net, [(W * M, b) for (W, b), M in zip(params0, m)], xs, ys)
            with _in_range(caller, names):
                terms, g = _relaxed_gradient(net, params0, m, xs, xa0, xas, gamma, xp)
            history.append(tuple(_float_finite(v, caller, "the relaxed objective", names) for v in terms))
            g_flat = _finite(xp.concat([xp.reshape(gi, (-1,)) for gi in g]), caller, "the mask gradient", names)
            gmax = xp.max(xp.abs(g_flat))
            if float(gmax) > 0:
                m_flat = _project_capped_simplex(m_flat - lr * g_flat / gmax, k, xp)
        if t % mask_every == 0:
            if method == "algorithm2":
                mask = magnitude_mask(w, density, scope=scope)
            else:
                mask = _topk_masks(split(m_flat), shapes, density, "global", caller, params0[0][0], tiebreak=abs0)
            val0 = score(mask)
            mask_history.append((t, val0.total))
            if val0.total < best_val.total:
                best_mask, best_val = mask, val0
    chosen = best_mask if select == "best" else mask
    chosen_val = best_val if select == "best" else score(mask)
    return AWTSearchResult(mask=chosen, last_mask=mask, student=w, objective=chosen_val, history=history,
                           mask_history=mask_history)


def masked_adversarial_training(net, params0, mask, x, y, loss="squared", *, eps, lr, steps, norm="l2",
                                attack_steps=10, step_size=None, domain=None, record_every=0):
    r"""Phase two: adversarial training of f_{m⊙θ} from θ₀ (seed 003 (3.1), (3.3) with the mask).

    θ_{t+1} = θ_t − (lr/N)·m ⊙ J(m⊙θ_t; X̃_t)ᵀ l′(f(X̃_t), Y), X̃_t = PGD (from x, ``attack_steps`` steps of
    ``step_size``, default 2.5ε/k) on the training loss ``loss`` (an ``ntkref.losses`` name or object) at the
    current sparse net; ``mask=None`` trains the dense net.  ε = 0 is natural training.  Returns the final
    params (pruned weights keep their θ₀ values but never act, since only m⊙θ enters f) and, if
    ``record_every`` > 0, a list of (step, mean training loss at X̃_t).
    """
    caller = "masked_adversarial_training"
    _check_params(net, params0, "params0", caller)
    xp, x, y = _data(net, params0, x, y, caller)
    loss_obj = loss if hasattr(loss, "derivative") else _losses.get(loss)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    attack_steps = check_int(attack_steps, "attack_steps", caller=caller, low=1)
    record_every = check_int(record_every, "record_every", caller=caller, low=0)
    mask = full_mask(params0) if mask is None else _check_mask(params0, mask, caller, "params0")
    n = x.shape[0]
    if step_size is None:
        step_size = 2.5 * eps / attack_steps if eps > 0 else 1.0
    step_size = check_real(step_size, "step_size", caller=caller, low=0.0, closed="neither")
    params = [(W, b) for W, b in params0]
    record = []
    names = ("x", "y", "params0")
    for t in range(steps):
        p_eff = _apply(params, mask)
        if eps > 0:
            g_ad = _adv.loss_input_gradient(net, p_eff, loss_obj)

            def g_in(x_adv, y_, g_ad=g_ad, t=t):
                return _finite(g_ad(x_adv, y_), caller, f"the attack's loss gradient at step {t}",
                               names if t == 0 else names + ("lr",))

            xa = _adv.pgd(g_in, x, y, eps=eps, step_size=step_size, steps=attack_steps, norm=norm, domain=domain)
        else:
            xa = x
        z = _finite(net.apply(p_eff, xa), caller, f"the network output at step {t}", names if t == 0 else names + ("lr",))
        if record_every and t % record_every == 0:
            record.append((t, _float_finite(float(xp.mean(loss_obj.value(z, y))), caller,
                                            f"the training loss at step {t}", names if t == 0 else names + ("lr",))))
        grads = [(dW * M, db) for (dW, db), M in zip(net.vjp(p_eff, xa, loss_obj.derivative(z, y) / n), mask)]
        params = [(W - lr * dW, (b - lr * db) if b is not None else None) for (W, b), (dW, db) in zip(params, grads)]
        if not all(bool(xp.all(xp.isfinite(v))) for pair in params for v in pair if v is not None):
            if t == 0:
                raise _overflow(caller, "the first gradient step", names + ("lr",))
            raise FloatingPointError(
                f"{caller}: training diverged after {t + 1} steps (the parameters overflowed to inf/NaN); lower 'lr' "
                f"(or rescale 'x' and 'params0').")
    return (params, record) if record_every else params


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


def _scaled(v, xp):
    """(v / max|v|, max|v|) along the last axis: the rescaled vector has entries in [−1, 1] and a norm in [1, √d],
    so norms and inner products of directions neither overflow (|v| ~ 1e300) nor underflow (|v| ~ 1e-300)."""
    scale = xp.max(xp.abs(v), axis=-1, keepdims=True)
    return v / xp.where(scale > 0, scale, xp.ones_like(scale)), scale


def _theta_mu(theta, mu, caller):
    """Validated θ and μ, rescaled: returns (xp, θ̂ = θ/max|θ| per row, μ̂ = μ/max|μ|, ‖θ̂‖₂, max|μ|).

    Everything in (3.15) depends on θ only through its direction, so working with θ̂ loses nothing and makes the
    formulas exact up to rounding for any finite nonzero θ (no overflow of ‖θ‖², no underflow to 0)."""
    xp = namespace(theta, mu)
    theta = check_array(theta, "theta", caller=caller, ndim=(1, 2), xp=xp)
    mu = check_array(mu, "mu", caller=caller, ndim=1, xp=xp, shape=(theta.shape[-1],), dtype=theta.dtype)
    th, tscale = _scaled(theta, xp)
    if not bool(xp.all(tscale > 0)):
        raise InvalidParameterError(f"The 'theta' parameter of {caller} must be nonzero (it defines sgn(θ·x)).")
    mh, mscale = _scaled(mu, xp)
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
    from . import machines

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
    import warnings

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
