r"""Adversarial attacks, adversarial training and its tangent-kernel dynamics (seed 003, §1.4 and Ch. 3).

Conventions
-----------
- Inputs ``x`` have shape (n, d), one sample a row; a network's output is a scalar per sample
  (:class:`ntkref.nets.FullyConnected`), so f(X) has shape (n,).
- An *attack* works on a callable ``loss_input_grad(x_adv, y) -> (n, d)`` returning ∇ₓ of the
  **per-example** loss l(f(x̃ᵢ), yᵢ) at every row (no 1/N: attacks only use its direction).
  :func:`loss_input_gradient` builds it from a net and a loss by the chain rule l′(f(x), y)·∇ₓf(x).
- Norms: ``"linf"`` (ℓ∞ ball, steps α·sign(g), seed 003 (1.33)/(1.35)) and ``"l2"`` (ℓ2 ball, steps
  α·g/‖g‖₂, "the q-normalised gradient" after (1.34)).  A zero gradient (or a zero coordinate of it,
  for ℓ∞) does not move the point; nothing ever divides by zero.
- ``domain = (lo, hi)``: the input box; every iterate is clipped into it (the "clip operation" after
  (1.35)).  Clipping coordinatewise towards a box that contains x never increases |x̃ᵢ − xᵢ|, so the
  clipped point stays in the ε-ball.
- Training loss (seed 003 (1.36) = (3.1)): L(θ) = (1/N) Σᵢ l(f_θ(x̃ᵢ), yᵢ), a **mean**, minimised by
  θ_{t+1} = θ_t − η ∇_θ L(θ_t; X̃_t) (3.3), i.e. θ_{t+1} = θ_t − (η/N) J(X̃_t)ᵀ l′(f_t(X̃_t), Y).
- Losses are ``ntkref.losses`` losses (l′ = ∂l/∂z).  Seed 003 Ch. 3 uses ½‖f − y‖² (gradient f − y,
  (3.9)); ``ntkref.losses.get("squared")`` is (y − z)² with l′ = 2(z − y), so the seed's (3.10) with
  rate η is this module's dynamics with ``lr = η/2``.

Seed 003 equations implemented here
-----------------------------------
- (1.33)–(1.34): FGSM, the one-step maximiser of the linearised loss over the ε-ball — :func:`fgsm`;
- (1.35): PGD (Madry et al.), **with** the projection Π onto the ε-ball that (1.35) omits (erratum,
  below), domain clipping and an optional random start — :func:`pgd`;
- (3.2): a k-step ℓp attack with per-step size ‖r_t‖_p ≤ δ and total ‖Σ r_t‖_p ≤ ε — :func:`pgd`
  satisfies both (its steps are nonexpansive projections of α-steps), ``return_path=True`` exposes them;
- (1.36)–(1.37), (3.1), (3.3): adversarial training by gradient descent at attacked points —
  :func:`adversarial_training`, :func:`adversarial_gradient_step`;
- Thm 3.2.1 / 3.5.1, (3.6), (3.10), (3.17)–(3.18), (3.32): the mixed tangent kernel (MTK)
  Θ_t(x, x̃) = ∇_θ f_t(x) ∇_θ f_t(x̃)ᵀ and the function dynamics
  f_{t+1}(X) − f_t(X) ≈ −(η/N) Θ_t(X, X̃_t) l′(f_t(X̃_t), Y) — :func:`mixed_tangent_kernel`,
  :func:`mixed_tangent_kernel_diagonal` (§3.4.4, S-AWT), :func:`mtk_output_change`;
- Lemma 3.5.3, (3.22) and (3.27): the bound on |f(x̃) − f(x)| after a k-step attack —
  :func:`attack_displacement_bound`;
- (3.39)–(3.43): softmax cross-entropy and its gradient — :func:`softmax`, :func:`log_softmax`,
  :func:`softmax_cross_entropy`, :func:`softmax_cross_entropy_gradient`;
- (3.46): the Lipschitz constant C of a loss's gradient — :func:`loss_gradient_lipschitz`.

Errata in seed 003 (tested in tests/test_adversarial.py)
--------------------------------------------------------
- (1.35) takes steps x_t = x_{t−1} + α·sign(∇ₓl) with no projection onto the ε-ball, so after k steps
  with kα > ε the iterate is at ℓ∞ distance kα from x, outside the threat model (1.34)/(3.2).  Madry's
  PGD projects after every step: x_t = Π_{B_ε(x)}(x_{t−1} + α·sign(∇ₓl)).  (``project=False``
  reproduces the printed recursion for the test.)
- (3.4), (3.7), (3.8) and (3.44) lack the 1/N that (3.1) (a mean), (3.6), (3.10), (3.17) and (3.18)
  carry: with the mean loss (3.1) the update (3.3) is θ_{t+1} = θ_t − (η/N) J(X̃)ᵀ l′, and the output
  change is −(η/N) Θ(X, X̃) l′; the printed (3.4) is N times too large.
- (3.42), "∀j: (softmax(f)_j − softmax(fˢ)_j)² ≤ (f_j − fˢ_j)²", is false (f = (0, 0), fˢ = (0, 10):
  left 0.24995, right 0).  The conclusion (3.43) holds, and sharper: softmax is ½-Lipschitz in ℓ2
  (its Jacobian diag(p) − ppᵀ has spectral norm ≤ ½), so ‖∇_f l_ce(f) − ∇_f l_ce(fˢ)‖ ≤ ½‖f − fˢ‖.
- Lemma 3.5.3 (not an error): the proof's (3.27), kδC₁ + ½k²δ²C₂, is sharper than the stated (3.22) and
  is attained by linear f; (3.22) follows from kδ ≤ 2ε.

Accuracy: attacks are exact arithmetic up to rounding (a few ulp of |x| + ε); the ℓ2 direction is
computed from the gradient rescaled by its largest entry, so gradients of size 1e-300 or 1e300 still
give a unit direction.  float32 inputs give float32 results (relative error ~1e-7).

Finite or error: network parameters are checked up front under the argument's name (``params``, ``params0``);
shapes are checked before any broadcast; a network output or MTK diagonal that overflows the dtype (finite but
huge inputs or weights, or diverged training) is a ``FloatingPointError`` saying which argument to rescale (or
to lower ``lr``), never a silent inf/NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import losses as _losses
from ._lib.backend import device_of, is_array, namespace
from ._lib.memory import check_memory
from ._lib.validation import InvalidParameterError, check_array, check_int, check_option, check_real

__all__ = [
    "AdversarialTrajectory",
    "adversarial_gradient_step",
    "adversarial_training",
    "attack_displacement_bound",
    "fgsm",
    "input_gradient",
    "log_softmax",
    "loss_gradient_lipschitz",
    "loss_input_gradient",
    "mixed_tangent_kernel",
    "mixed_tangent_kernel_diagonal",
    "mtk_output_change",
    "pgd",
    "project_ball",
    "robust_accuracy",
    "softmax",
    "softmax_cross_entropy",
    "softmax_cross_entropy_gradient",
]

NORMS = ("linf", "l2")


# --------------------------------------------------------------------------------------------------
# input gradients
# --------------------------------------------------------------------------------------------------
def input_gradient(net, params, x):
    r"""∇ₓ f(θ, x) for every row of ``x``, shape (n, d).

    For :class:`ntkref.nets.FullyConnected` (z_ℓ = W_std,ℓ·h_ℓW_ℓ/√n_ℓ + b_std,ℓ·b_ℓ, ReLU between
    layers, relu′(0) = 0) the backward pass is written by hand:

    .. math::  ∇ₓ f(x) = \frac{W_{std,0}}{\sqrt{d}}\, δ_0(x)\, W_0^\top,\qquad δ_ℓ = ∂f/∂z_ℓ,

    with δ_ℓ from the net's own backward recursion.  :class:`ntkref.nets.Scaled` (κ·f) and
    :class:`ntkref.nets.Antisymmetric` ((f_A − f_B)/√2) are handled through their base net.  An object
    with a method ``input_gradient(params, x)`` is used through it (duck typing, checked first), so other
    nets plug in.

    This is the gradient of the attacks of seed 003 (1.33)/(1.35) (by the chain rule, see
    :func:`loss_input_gradient`).  Exact up to rounding away from ReLU kinks; at a kink it is the
    one-sided derivative with relu′(0) = 0.
    """
    from .nets import Antisymmetric, FullyConnected, Scaled

    method = getattr(net, "input_gradient", None)
    if callable(method):
        return method(params, x)
    if isinstance(net, FullyConnected):
        _, deltas, xp = net.features(params, x)
        W0 = params[0][0]
        c0 = net.W_std[0] / math.sqrt(net.fan_in[0])
        return c0 * (deltas[0] @ xp.matrix_transpose(W0))
    if isinstance(net, Scaled):
        return net.kappa * input_gradient(net.net, params, x)
    if isinstance(net, Antisymmetric):
        pa, pb = params
        return (input_gradient(net.net, pa, x) - input_gradient(net.net, pb, x)) / math.sqrt(2.0)
    raise InvalidParameterError(
        f"input_gradient: the 'net' parameter must be a FullyConnected, Scaled or Antisymmetric net or have a "
        f"method input_gradient(params, x); got {type(net).__name__}."
    )


def _check_params(net, params, name, caller):
    """A net's parameters checked up front, every error naming the user's parameter (``params`` or ``params0``):
    one (W, b) pair per layer for FullyConnected/ConvNet (through their wrappers), a list of weight matrices
    for HomogeneousNet, finite real arrays everywhere else."""
    from .nets import Antisymmetric, ConvNet, FullyConnected, HomogeneousNet, Linearized, Scaled
    from .nets._common import check_pairs

    if isinstance(net, Scaled):
        return _check_params(net.net, params, name, caller)
    if isinstance(net, Antisymmetric):
        if not isinstance(params, tuple) or len(params) != 2:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a tuple (params_A, params_B) for an Antisymmetric "
                f"net. Got {type(params).__name__} instead.")
        for i, p in enumerate(params):
            _check_params(net.net, p, f"{name}[{i}]", caller)
        return params
    if isinstance(net, Linearized):
        if isinstance(net.params0, tuple):
            if not isinstance(params, tuple) or len(params) != len(net.params0):
                raise InvalidParameterError(
                    f"The {name!r} parameter of {caller} must be a tuple of {len(net.params0)} parameter lists "
                    f"like the net's params0.")
            for i, (p, p0) in enumerate(zip(params, net.params0)):
                check_pairs(p, caller, len(p0), name=f"{name}[{i}]")
        else:
            check_pairs(params, caller, len(net.params0), name=name)
        return params
    if isinstance(net, (FullyConnected, ConvNet)):
        return check_pairs(params, caller, net.depth + 1, name=name)
    if isinstance(net, HomogeneousNet):
        if not isinstance(params, (list, tuple)) or len(params) != net.depth:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a list of {net.depth} weight matrices.")
        for ell, W in enumerate(params):
            check_array(W, f"{name}[{ell}]", caller=caller)
        return params
    _check_leaves(params, name, caller)  # another (duck-typed) net: finite real leaves
    return params


def _check_leaves(tree, name, caller):
    if isinstance(tree, (list, tuple)):
        for i, t in enumerate(tree):
            _check_leaves(t, f"{name}[{i}]", caller)
    elif tree is not None and is_array(tree):
        check_array(tree, name, caller=caller)


def _check_output(z, caller, culprits):
    """Refuse a network output that overflowed (finite inputs, ±inf output): finite or an error naming the cause."""
    xp = namespace(z)
    if z.size and not bool(xp.all(xp.isfinite(z))):
        raise FloatingPointError(
            f"{caller}: the network's output overflows {z.dtype} ({culprits}); rescale them (the result is not "
            f"representable in this dtype).")
    return z


def loss_input_gradient(net, params, loss):
    r"""The callable (x̃, y) ↦ ∇ₓ l(f(x̃ᵢ), yᵢ) = l′(f(x̃ᵢ), yᵢ)·∇ₓf(x̃ᵢ), row by row, shape (n, d).

    For a scalar-output ``net`` and an ``ntkref.losses`` loss (a name, a :class:`~ntkref.losses.Loss`,
    or any object with ``derivative(z, y)``).  This is the gradient FGSM (1.33) and PGD (1.35) ascend;
    it is the per-example gradient (no 1/N).  Exact up to rounding (the loss derivative's convention at
    kinks, e.g. the strict hinge 𝟙(yz < 1), applies).
    """
    caller = "loss_input_gradient"
    _check_params(net, params, "params", caller)
    loss_obj = _as_loss(loss)

    def grad(x, y):
        # the callable's own arguments are checked on every call (named as in its signature (x, y)):
        # y has one entry per row of x, never broadcast.
        xp = namespace(_first_leaf(params), x, y)
        x = check_array(x, "x", caller=f"{caller}(...)", ndim=2, xp=xp, like=_first_leaf(params))
        y = _check_targets(y, x.shape[0], xp, f"{caller}(...)")
        z = net.apply(params, x)
        lprime = loss_obj.derivative(z, y)
        return xp.reshape(lprime, (-1, 1)) * input_gradient(net, params, x)

    return grad


def _first_leaf(tree):
    while isinstance(tree, (list, tuple)) and tree:
        tree = tree[0]
    return tree if is_array(tree) else None


def _as_loss(loss):
    if callable(getattr(loss, "derivative", None)):
        return loss
    return _losses.get(loss)


# --------------------------------------------------------------------------------------------------
# attacks
# --------------------------------------------------------------------------------------------------
def _check_domain(domain, x, xp, caller):
    if domain is None:
        return None
    try:
        lo, hi = domain
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"The 'domain' parameter of {caller} must be None or a pair (lo, hi). Got {domain!r}."
        ) from None
    lo = check_real(lo, "domain[0]", caller=caller)
    hi = check_real(hi, "domain[1]", caller=caller)
    if not lo < hi:
        raise InvalidParameterError(f"The 'domain' parameter of {caller} must have lo < hi. Got {domain!r}.")
    if x.size and not bool(xp.all((x >= lo) & (x <= hi))):
        raise InvalidParameterError(
            f"The 'x' parameter of {caller} has entries outside domain = ({lo}, {hi}); clean inputs must lie in "
            f"the domain (otherwise clipping could move them farther than eps)."
        )
    return lo, hi


def _clip(z, dom, xp):
    if dom is None:
        return z
    return xp.clip(z, dom[0], dom[1])


def _row_norm_scaled(g, xp):
    """(‖g_i‖₂, g_i/max|g_i|) per row, computed after rescaling so that neither underflows nor overflows."""
    scale = xp.max(xp.abs(g), axis=1, keepdims=True)
    safe = xp.where(scale > 0, scale, xp.ones_like(scale))
    gs = g / safe
    return xp.linalg.vector_norm(gs, axis=1, keepdims=True), gs, scale


def _unit_direction(g, norm, xp):
    """The steepest-ascent direction of the linearised loss on the unit ball: sign(g) or g/‖g‖₂ (0 for g = 0)."""
    if norm == "linf":
        return xp.sign(g)
    nrm, gs, scale = _row_norm_scaled(g, xp)
    nonzero = scale > 0
    return xp.where(nonzero, gs / xp.where(nonzero, nrm, xp.ones_like(nrm)), xp.zeros_like(g))


def project_ball(z, x, eps, norm="linf"):
    r"""Euclidean-style projection Π_{B_ε(x)}(z) onto the ε-ball around each row of ``x``.

    ℓ∞: x + clip(z − x, −ε, ε) (the exact Euclidean projection onto the box).  ℓ2: z if ‖z − x‖₂ ≤ ε, else
    x + ε·(z − x)/‖z − x‖₂ (the exact Euclidean projection onto the ℓ2 ball).  Both are nonexpansive and fix the
    points of the ball, which is why PGD's steps satisfy seed 003 (3.2)'s ‖r_t‖_p ≤ α.

    ℓ2 is computed scale-safely: the unit direction from (z − x)/max|z − x| (no overflow or underflow of the
    norm, nor of ε/‖z − x‖), and from z/2 − x/2 in the rows with an entry ≥ max float/2 (where z − x may
    overflow).
    """
    caller = "project_ball"
    xp = namespace(z, x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, like=z)
    z = check_array(z, "z", caller=caller, ndim=2, xp=xp, like=x)
    if tuple(z.shape) != tuple(x.shape):  # one point per row of x: never broadcast
        raise InvalidParameterError(
            f"The 'z' parameter of {caller} must have the shape of 'x' {tuple(x.shape)}; got {tuple(z.shape)}.")
    norm = check_option(norm, "norm", NORMS, caller=caller)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    if norm == "linf":
        with np.errstate(over="ignore"):  # z − x = ±inf (finite entries of opposite signs) clips to ±ε: exact
            return x + xp.clip(z - x, -eps, eps)
    # rows with an entry of magnitude ≥ max/2 may overflow z − x: there r = z/2 − x/2 (halving is exact for such
    # rows' normal numbers; a subnormal entry loses at most its last bit, far below the row's scale), ‖z − x‖ = 2‖r‖
    half_max = float(xp.finfo(x.dtype).max) / 2
    big = xp.any((xp.abs(z) >= half_max) | (xp.abs(x) >= half_max), axis=1, keepdims=True)
    r = xp.where(big, z / 2, z) - xp.where(big, x / 2, x)
    nrm, gs, scale = _row_norm_scaled(r, xp)
    # ‖z − x‖ > ε ⇔ nrm > (ε or ε/2)/scale, with nrm ∈ [1, √d]: the quotient can only under- or overflow far from
    # that interval (nrm·scale itself may overflow)
    thr = xp.where(big, xp.full_like(nrm, eps / 2), xp.full_like(nrm, eps))
    with np.errstate(over="ignore"):  # ε/scale = inf only where ‖z − x‖ ≪ ε: compares correctly
        outside = (scale > 0) & (nrm > thr / xp.where(scale > 0, scale, xp.ones_like(scale)))
    # the projected point is x + ε·u with u = gs/nrm a unit vector (never r·ε/‖r‖: ε/‖r‖ may underflow)
    u = gs / xp.where(scale > 0, nrm, xp.ones_like(nrm))
    return xp.where(outside, x + eps * u, z)


def _attack_args(x, eps, norm, domain, caller):
    xp = namespace(x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    dom = _check_domain(domain, x, xp, caller)
    return xp, x, eps, norm, dom


def _check_targets(y, n, xp, caller):
    """Labels/targets: finite, 1-D with one entry per row of x (never broadcast)."""
    return check_array(y, "y", caller=caller, ndim=1, xp=xp, shape=(n,))


def _check_attack_targets(y, n, xp, caller):
    """y of an attack is passed to the caller's gradient unchanged: None, or an array with one row per point."""
    if y is None:
        return None
    y = check_array(y, "y", caller=caller, xp=xp)
    if y.ndim == 0 or y.shape[0] != n:
        raise InvalidParameterError(
            f"The 'y' parameter of {caller} must be None or have one entry (row) per row of x ({n}); "
            f"got shape {tuple(y.shape)}.")
    return y


def _call_grad(loss_input_grad, x_adv, y, xp, caller):
    if not callable(loss_input_grad):
        raise InvalidParameterError(
            f"The 'loss_input_grad' parameter of {caller} must be callable (x_adv, y) -> (n, d)."
        )
    g = loss_input_grad(x_adv, y)
    try:
        g = check_array(g, "loss_input_grad(x_adv, y)", caller=caller, xp=xp, shape=tuple(x_adv.shape),
                        dtype=x_adv.dtype)
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"{exc} (the gradient returned by loss_input_grad must be finite and have the shape of x)"
        ) from exc
    return g


def fgsm(loss_input_grad, x, y, *, eps, norm="linf", domain=None):
    r"""Fast gradient (sign) method, seed 003 (1.33): one step of length ε along the ascent direction.

    .. math::  x' = \mathrm{clip}_{domain}\big(x + ε\,u(∇ₓ l(f(x), y))\big),\qquad
               u(g) = \mathrm{sign}(g)\ (ℓ_∞),\quad u(g) = g/‖g‖_2\ (ℓ_2),\ u(0) = 0.

    For a linear score s = w·x + b and a loss decreasing in the margin ys (logistic, hinge), x′ is the
    exact maximiser of (1.34): x − εy·sign(w) (ℓ∞) with margin decrease ε‖w‖₁, and x − εy·w/‖w‖₂ (ℓ2)
    with margin decrease ε‖w‖₂.

    Parameters
    ----------
    loss_input_grad : callable (x_adv (n, d), y) -> (n, d)
        ∇ₓ of the per-example loss (e.g. :func:`loss_input_gradient`).
    x : array (n, d)
        Clean inputs (finite; inside ``domain`` if given).
    y : labels or targets, passed to ``loss_input_grad`` unchanged.
    eps : float ≥ 0
    norm : {"linf", "l2"}
    domain : (lo, hi) or None

    Returns
    -------
    x_adv : array (n, d) with ‖x_adv − x‖ ≤ ε (exactly, up to one rounding of x + ε).
    """
    xp, x, eps, norm, dom = _attack_args(x, eps, norm, domain, "fgsm")
    y = _check_attack_targets(y, x.shape[0], xp, "fgsm")
    g = _call_grad(loss_input_grad, x, y, xp, "fgsm")
    return _clip(x + eps * _unit_direction(g, norm, xp), dom, xp)


def pgd(loss_input_grad, x, y, *, eps, step_size, steps, norm="linf", domain=None, random_start=False, seed=None,
        project=True, return_path=False):
    r"""Projected gradient ascent (Madry et al.), seed 003 (1.35) **with** the projection (erratum).

    .. math::  x_0 = x\ (\text{or a uniform point of } B_ε(x)),\qquad
               x_t = \mathrm{clip}_{domain}\Big(Π_{B_ε(x)}\big(x_{t-1} + α\,u(∇ₓ l(f(x_{t-1}), y))\big)\Big),

    u as in :func:`fgsm`, t = 1..k, result x_k.  Every step r_t = x_t − x_{t−1} has ‖r_t‖_p ≤ α and the
    total ‖x_k − x‖_p ≤ ε: these are the hypotheses of seed 003 (3.2) and Lemma 3.5.3 with δ = α (the
    projection and the clip are nonexpansive and fix x_{t−1}).  The seed's experiments use k = 100,
    α = 2.5ε/k for evaluation; Lemma 3.5.3 needs kα ≤ 2ε.

    Parameters
    ----------
    loss_input_grad, x, y, eps, norm, domain : as in :func:`fgsm`.
    step_size : float > 0
        α.
    steps : int ≥ 1
        k.
    random_start : bool
        Start from a uniform point of the ε-ball (ℓ∞: uniform in the box; ℓ2: uniform in the ball),
        clipped to the domain, drawn with ``numpy.random.default_rng(seed)``.
    project : bool
        ``False`` drops the projection: the printed recursion (1.35), whose iterates leave the ε-ball
        when kα > ε.  Only for demonstrating the erratum.
    return_path : bool
        Also return the list [x_0, x_1, …, x_k] of iterates.

    Returns
    -------
    x_adv : array (n, d), or (x_adv, path) if ``return_path``.
    """
    xp, x, eps, norm, dom = _attack_args(x, eps, norm, domain, "pgd")
    y = _check_attack_targets(y, x.shape[0], xp, "pgd")
    step_size = check_real(step_size, "step_size", caller="pgd", low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller="pgd", low=1)
    x_t = x
    if random_start:
        x_t = _clip(x + _uniform_ball(x, eps, norm, seed, xp), dom, xp)
    path = [x_t] if return_path else None
    for _ in range(steps):
        g = _call_grad(loss_input_grad, x_t, y, xp, "pgd")
        z = x_t + step_size * _unit_direction(g, norm, xp)
        if project:
            z = project_ball(z, x, eps, norm)
        x_t = _clip(z, dom, xp)
        if return_path:
            path.append(x_t)
    return (x_t, path) if return_path else x_t


def _uniform_ball(x, eps, norm, seed, xp):
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n, d = x.shape
    if norm == "linf":
        r = rng.uniform(-eps, eps, size=(n, d))
    else:
        g = rng.standard_normal((n, d))
        nrm = np.linalg.norm(g, axis=1, keepdims=True)
        nrm[nrm == 0] = 1.0
        r = g / nrm * (eps * rng.uniform(size=(n, 1)) ** (1.0 / d))
    return xp.asarray(r, dtype=x.dtype, device=device_of(x))


# --------------------------------------------------------------------------------------------------
# mixed tangent kernel and adversarial-training dynamics
# --------------------------------------------------------------------------------------------------
def mixed_tangent_kernel(net, params, x1, x2):
    r"""The mixed tangent kernel Θ_t(x1, x2) = ∇_θ f_t(x1) ∇_θ f_t(x2)ᵀ, shape (n1, n2).

    Seed 003 Thm 3.2.1 / 3.5.1 and (3.6): with x1 = X (clean) and x2 = X̃_t (attacked) it governs
    adversarial training, df/dt(X) = −(η/N) Θ_t(X, X̃_t) l′(f_t(X̃_t)).  It is *not* symmetric in
    general, Θ(x1, x2) = Θ(x2, x1)ᵀ, and Θ(X, X) is the empirical NTK.  Computed layer by layer
    (``net.empirical_ntk(params, x1, x2)``, which never symmetrises when x2 is given) or, for nets
    without it, from the explicit Jacobians.  Exact up to rounding.
    """
    if x2 is None:
        raise InvalidParameterError(
            "mixed_tangent_kernel: the 'x2' parameter is required (use empirical_ntk for Θ(x, x))."
        )
    method = getattr(net, "empirical_ntk", None)
    if callable(method):
        return method(params, x1, x2)
    J1 = net.jacobian(params, x1)
    J2 = net.jacobian(params, x2)
    xp = namespace(J1, J2)
    check_memory(J1.shape[0] * J2.shape[0], f"The ({J1.shape[0]}, {J2.shape[0]}) mixed tangent kernel of 'x1'/'x2'",
                 "mixed_tangent_kernel", J1, ways_out="ways out: fewer rows of x1/x2 per call, or float32 parameters")
    return J1 @ xp.matrix_transpose(J2)


def mixed_tangent_kernel_diagonal(net, params, x1, x2):
    r"""The diagonal Θ_t(x1ᵢ, x2ᵢ) of the mixed tangent kernel, shape (n,) (seed 003 §3.4.4, S-AWT).

    O(n·P) instead of O(n²·P).  For :class:`ntkref.nets.FullyConnected`
    Θ(x, x̃) = Σ_ℓ (W²_std,ℓ/n_ℓ·⟨h_ℓ(x), h_ℓ(x̃)⟩ + b²_std,ℓ)·⟨δ_ℓ(x), δ_ℓ(x̃)⟩ row by row; the wrappers
    ``Scaled``, ``Antisymmetric`` and ``Linearized`` go through their base net; other nets use rows of
    their Jacobians.  Equals the diagonal of :func:`mixed_tangent_kernel` up to rounding.
    """
    from .nets import Antisymmetric, FullyConnected, Linearized, Scaled

    caller = "mixed_tangent_kernel_diagonal"
    _check_params(net, params, "params", caller)
    xp = namespace(_first_leaf(params), x1, x2)
    x1 = check_array(x1, "x1", caller=caller, xp=xp, like=_first_leaf(params))
    x2 = check_array(x2, "x2", caller=caller, xp=xp, like=x1)
    out = _mtk_diagonal(net, params, x1, x2, xp, (Antisymmetric, FullyConnected, Linearized, Scaled))
    if out.size and not bool(xp.all(xp.isfinite(out))):
        raise FloatingPointError(
            f"{caller}: Θ(x1ᵢ, x2ᵢ) overflows {out.dtype} (max |x1| = {float(xp.max(xp.abs(x1))):.3g}, "
            f"max |x2| = {float(xp.max(xp.abs(x2))):.3g}); the 'params' or the inputs are too large for this dtype.")
    return out


def _mtk_diagonal(net, params, x1, x2, xp, kinds):
    Antisymmetric, FullyConnected, Linearized, Scaled = kinds
    if tuple(x1.shape) != tuple(x2.shape):
        raise InvalidParameterError(
            f"mixed_tangent_kernel_diagonal: 'x1' and 'x2' must have the same shape; got {tuple(x1.shape)} and "
            f"{tuple(x2.shape)}."
        )
    if isinstance(net, FullyConnected):
        h1, d1, xp = net.features(params, x1)
        h2, d2, _ = net.features(params, x2)
        out = None
        for ell in range(net.depth + 1):
            hh = (net.W_std[ell] ** 2 / net.fan_in[ell]) * xp.sum(h1[ell] * h2[ell], axis=1)
            if params[ell][1] is not None:
                hh = hh + net.b_std[ell] ** 2
            term = hh * xp.sum(d1[ell] * d2[ell], axis=1)
            out = term if out is None else out + term
        return out
    if isinstance(net, Scaled):
        return net.kappa**2 * _mtk_diagonal(net.net, params, x1, x2, xp, kinds)
    if isinstance(net, Antisymmetric):
        pa, pb = params
        diag_a = _mtk_diagonal(net.net, pa, x1, x2, xp, kinds)
        return (diag_a + _mtk_diagonal(net.net, pb, x1, x2, xp, kinds)) / 2
    if isinstance(net, Linearized):
        return _mtk_diagonal(net.net, net.params0, x1, x2, xp, kinds)
    return xp.sum(net.jacobian(params, x1) * net.jacobian(params, x2), axis=1)


def mtk_output_change(net, params, x, x_adv, y, loss, *, lr):
    r"""The MTK prediction of one adversarial-training step's output change, shape (n_x,).

    .. math::  f_{t+1}(x) − f_t(x) ≈ −\frac{η}{N}\, Θ_t(x, \tilde X_t)\, l′(f_t(\tilde X_t), Y),

    seed 003 (3.6)/(3.10)/(3.32) with N = ``len(x_adv)`` (the mean loss (3.1); the printed (3.4), (3.8)
    and (3.44) drop the 1/N — erratum).  ``x`` may be the clean training inputs X or any other points.
    The step it predicts is :func:`adversarial_gradient_step`: exact for models linear in θ
    (:class:`ntkref.nets.Linearized`), with an O(η²) remainder for nets.
    """
    caller = "mtk_output_change"
    lr = check_real(lr, "lr", caller=caller, low=0.0)
    xp = namespace(x_adv, x)
    x_adv = check_array(x_adv, "x_adv", caller=caller, ndim=2, xp=xp)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp, like=x_adv)
    if x.shape[1] != x_adv.shape[1]:
        raise InvalidParameterError(
            f"The 'x' parameter of {caller} must have {x_adv.shape[1]} columns like 'x_adv'; got {tuple(x.shape)}.")
    y = _check_targets(y, x_adv.shape[0], xp, caller)
    loss_obj = _as_loss(loss)
    z_adv = net.apply(params, x_adv)
    lprime = loss_obj.derivative(z_adv, y)
    n = x_adv.shape[0]
    theta = mixed_tangent_kernel(net, params, x, x_adv)
    return -(lr / n) * (theta @ lprime)


def _tree_axpy(params, grads, a):
    """params + a·grads over nested lists/tuples of arrays (None leaves stay None)."""
    if params is None:
        return None
    if isinstance(params, (list, tuple)):
        return type(params)(_tree_axpy(p, g, a) for p, g in zip(params, grads))
    return params + a * grads


def adversarial_gradient_step(net, params, x_adv, y, loss, *, lr):
    r"""One step of (3.3) on the mean loss (3.1) at the attacked points: θ − (η/N) J(X̃)ᵀ l′(f(X̃), Y).

    Seed 003 (1.37)/(3.3)/(3.19) with L = (1/N) Σᵢ l(f_θ(x̃ᵢ), yᵢ); uses the net's backward pass
    ``net.vjp``.  (The printed (3.4) would be N times larger: erratum.)  Returns new params.
    """
    lr = check_real(lr, "lr", caller="adversarial_gradient_step", low=0.0)
    xp = namespace(x_adv)
    x_adv = check_array(x_adv, "x_adv", caller="adversarial_gradient_step", ndim=2, xp=xp)
    y = _check_targets(y, x_adv.shape[0], xp, "adversarial_gradient_step")
    loss_obj = _as_loss(loss)
    lprime = loss_obj.derivative(net.apply(params, x_adv), y)
    grads = net.vjp(params, x_adv, lprime)
    return _tree_axpy(params, grads, -lr / x_adv.shape[0])


@dataclass
class AdversarialTrajectory:
    """Record of :func:`adversarial_training`.

    Attributes
    ----------
    params : the final parameters θ_T.
    outputs : array (T + 1, n) — f_t(X) on the clean training inputs, t = 0..T.
    adv_outputs : array (T, n) — f_t(X̃_t) at the points the step t was taken on.
    clean_loss, adv_loss : arrays (T + 1,) and (T,) — (1/N)Σ l(f_t(xᵢ)) and (1/N)Σ l(f_t(x̃ᵢ,t)).
    predicted_change : array (T, n) or None — −(η/N)Θ_t(X, X̃_t)l′ (``record_mtk=True``), so that
        outputs[t+1] − outputs[t] − predicted_change[t] is the second-order remainder.
    test_outputs : array (T + 1, m) or None — f_t(x_test).
    x_adv : the last attacked inputs X̃_{T−1}.
    """

    params: object
    outputs: object
    adv_outputs: object
    clean_loss: object
    adv_loss: object
    predicted_change: object = None
    test_outputs: object = None
    x_adv: object = None
    settings: dict = field(default_factory=dict)


def adversarial_training(net, params0, x, y, loss, *, eps, lr, steps, attack="pgd", norm="linf", attack_steps=10,
                         attack_step_size=None, domain=None, random_start=False, seed=None, x_test=None,
                         record_mtk=False):
    r"""Full-batch adversarial training, seed 003 (1.36)–(1.37), (3.1), (3.3).

    For t = 0..T−1: X̃_t = Attack(θ_t, X, Y) (the inner maximisation of (3.1) on the same loss), then
    θ_{t+1} = θ_t − (η/N) J_t(X̃_t)ᵀ l′(f_t(X̃_t), Y) (:func:`adversarial_gradient_step`).  ``eps = 0``
    is natural training (no attack is run, not even a callable one).

    Parameters
    ----------
    net : a net with ``apply``, ``vjp`` (and ``input_gradient`` support for the built-in attacks).
    params0 : initial parameters (not modified).
    x : array (N, d); y : array (N,), labels/targets for ``loss`` (finite, one per row of x).
    loss : an ``ntkref.losses`` name or Loss.
    eps : float ≥ 0; lr : float > 0 (η); steps : int ≥ 1 (T).
    attack : "pgd", "fgsm" or a callable ``attack(params, x, y) -> x_adv``.
    norm, attack_steps, attack_step_size, domain, random_start, seed : PGD/FGSM options
        (``attack_step_size`` defaults to 2.5·ε/k, the seed's choice after Madry et al.; a random start
        uses the generator ``numpy.random.default_rng(seed)`` across steps).
    x_test : optional array (m, d), outputs recorded every step.
    record_mtk : also record the MTK prediction of each step (costs one N × N kernel per step).

    Returns
    -------
    AdversarialTrajectory
    """
    caller = "adversarial_training"
    _check_params(net, params0, "params0", caller)
    xp = namespace(x)
    x = check_array(x, "x", caller=caller, ndim=2, xp=xp)
    y = _check_targets(y, x.shape[0], xp, caller)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=1)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    attack_steps = check_int(attack_steps, "attack_steps", caller=caller, low=1)
    if attack_step_size is None:
        attack_step_size = 2.5 * eps / attack_steps if eps > 0 else 1.0
    attack_step_size = check_real(attack_step_size, "attack_step_size", caller=caller, low=0.0, closed="neither")
    if not callable(attack):
        check_option(attack, "attack", ("pgd", "fgsm"), caller=caller)
    _check_domain(domain, x, xp, caller)
    if x_test is not None:
        x_test = check_array(x_test, "x_test", caller=caller, ndim=2, xp=xp)
    loss_obj = _as_loss(loss)
    if not callable(getattr(loss_obj, "value", None)):
        raise InvalidParameterError(f"The 'loss' parameter of {caller} must have value(z, y) and derivative(z, y).")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def run_attack(params):
        if eps == 0.0:  # natural training: the ε-ball is {x}, whatever the attack
            return x
        if callable(attack):
            return attack(params, x, y)
        grad = loss_input_gradient(net, params, loss_obj)
        if attack == "fgsm":
            return fgsm(grad, x, y, eps=eps, norm=norm, domain=domain)
        return pgd(grad, x, y, eps=eps, step_size=attack_step_size, steps=attack_steps, norm=norm, domain=domain,
                   random_start=random_start, seed=rng)

    params = params0
    outputs, adv_outputs, clean_loss, adv_loss, predicted, test_outputs = [], [], [], [], [], []
    x_adv = None
    for t in range(steps + 1):
        z = _check_output(net.apply(params, x), caller, _culprits(t, x, xp))
        outputs.append(z)
        clean_loss.append(xp.mean(loss_obj.value(z, y)))
        if x_test is not None:
            test_outputs.append(net.apply(params, x_test))
        if t == steps:
            break
        x_adv = run_attack(params)
        z_adv = _check_output(net.apply(params, x_adv), caller, _culprits(t, x, xp))
        adv_outputs.append(z_adv)
        adv_loss.append(xp.mean(loss_obj.value(z_adv, y)))
        if record_mtk:
            predicted.append(mtk_output_change(net, params, x, x_adv, y, loss_obj, lr=lr))
        params = adversarial_gradient_step(net, params, x_adv, y, loss_obj, lr=lr)
    return AdversarialTrajectory(
        params=params,
        outputs=xp.stack(outputs),
        adv_outputs=xp.stack(adv_outputs),
        clean_loss=xp.stack(clean_loss),
        adv_loss=xp.stack(adv_loss),
        predicted_change=xp.stack(predicted) if record_mtk else None,
        test_outputs=xp.stack(test_outputs) if x_test is not None else None,
        x_adv=x_adv,
        settings=dict(eps=eps, lr=lr, steps=steps, attack=attack if isinstance(attack, str) else "callable",
                      norm=norm, attack_steps=attack_steps, attack_step_size=attack_step_size, domain=domain,
                      loss=getattr(loss_obj, "name", str(loss_obj))),
    )


def _culprits(t, x, xp):
    if t == 0:
        return f"at the start: the inputs 'x' (max |x| = {float(xp.max(xp.abs(x))):.3g}) or the weights 'params0' are too large"
    return f"after {t} steps: training diverged; lower 'lr' (or rescale 'x' and 'params0')"


def robust_accuracy(net, params, x, y, *, eps, norm="linf", steps=20, step_size=None, loss="logistic", domain=None,
                    random_start=False, seed=None):
    r"""Fraction of points still classified correctly (y·f(x̃) > 0) after a PGD attack on ``loss``.

    Labels y ∈ {−1, +1}.  The attack is :func:`pgd` with ``steps`` steps of size ``step_size``
    (default 2.5ε/k, seed 003 §3.4) on the per-example ``loss`` (default logistic, whose gradient never
    vanishes; the hinge's does beyond the margin and makes a weak attack).  ``eps = 0`` gives the clean
    accuracy.  PGD is a heuristic inner maximiser, so this is an upper bound on the true robust accuracy.
    """
    from ._lib.validation import check_labels

    xp = namespace(x)
    x = check_array(x, "x", caller="robust_accuracy", ndim=2, xp=xp)
    y = check_labels(y, "y", caller="robust_accuracy", xp=xp)
    if y.shape[0] != x.shape[0]:
        raise InvalidParameterError(
            f"The 'y' parameter of robust_accuracy must have {x.shape[0]} entries; got {y.shape[0]}.")
    eps = check_real(eps, "eps", caller="robust_accuracy", low=0.0)
    steps = check_int(steps, "steps", caller="robust_accuracy", low=1)
    norm = check_option(norm, "norm", NORMS, caller="robust_accuracy")
    if eps > 0:
        step_size = 2.5 * eps / steps if step_size is None else step_size
        grad = loss_input_gradient(net, params, loss)
        x = pgd(grad, x, y, eps=eps, step_size=step_size, steps=steps, norm=norm, domain=domain,
                random_start=random_start, seed=seed)
    z = net.apply(params, x)
    return float(xp.mean(xp.astype(y * z > 0, z.dtype)))


# --------------------------------------------------------------------------------------------------
# Lemma 3.5.3
# --------------------------------------------------------------------------------------------------
def attack_displacement_bound(eps, c1, c2, *, steps=None, step_size=None):
    r"""Seed 003 Lemma 3.5.3: |f(x̃) − f(x)| after a k-step ℓp attack (3.2), 1 < p ≤ ∞.

    With ‖∂ₓf‖_q ≤ C₁ and ‖∂²ₓₓf‖_{p,q} ≤ C₂ everywhere (1/p + 1/q = 1), steps ‖r_t‖_p ≤ δ,
    total ‖Σ r_t‖_p ≤ ε and kδ ≤ 2ε:

    .. math::  |f(\tilde x) − f(x)| ≤ kδC_1 + \tfrac12 k^2δ^2 C_2 \quad (3.27)
               ≤ 2εC_1 + 2ε^2C_2 = 2εC_q \quad (3.22).

    Returns (3.22) when ``steps``/``step_size`` are not given, else the sharper (3.27) (after checking
    kδ ≤ 2ε).  Note that the proof of (3.27) never uses ‖Σ r_t‖ ≤ ε: the bound holds for any k steps of
    size ≤ δ; for a linear f (C₂ = 0) and kδ ≤ ε it is attained by k aligned steps.
    """
    caller = "attack_displacement_bound"
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    c1 = check_real(c1, "c1", caller=caller, low=0.0)
    c2 = check_real(c2, "c2", caller=caller, low=0.0)
    if (steps is None) != (step_size is None):
        raise InvalidParameterError(f"{caller}: give both 'steps' and 'step_size' (for (3.27)) or neither (3.22).")
    if steps is None:
        return 2 * eps * c1 + 2 * eps**2 * c2
    k = check_int(steps, "steps", caller=caller, low=1)
    delta = check_real(step_size, "step_size", caller=caller, low=0.0)
    if k * delta > 2 * eps * (1 + 1e-12):
        raise InvalidParameterError(
            f"{caller}: Lemma 3.5.3 assumes steps·step_size ≤ 2·eps; got {k}·{delta} > 2·{eps}."
        )
    return k * delta * c1 + 0.5 * (k * delta) ** 2 * c2


# --------------------------------------------------------------------------------------------------
# softmax cross-entropy (3.39)–(3.43)
# --------------------------------------------------------------------------------------------------
def log_softmax(logits):
    r"""log softmax along the last axis, stable for any logit scale: z − max z − log Σ e^{z − max z}.

    ``logits`` of any shape (…, k): the leading axes are a batch, each row is normalised on its own.
    """
    xp = namespace(logits)
    z = check_array(logits, "logits", caller="log_softmax", xp=xp)
    shifted = z - xp.max(z, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))


def softmax(logits):
    r"""softmax(z)_j = e^{z_j}/Σᵢ e^{zᵢ} along the last axis (max-shifted, never overflows).

    ``logits`` of any shape (…, k): the leading axes are a batch, each row is normalised on its own.

    Its Jacobian diag(p) − ppᵀ has spectral norm ≤ ½, so ‖softmax(a) − softmax(b)‖₂ ≤ ½‖a − b‖₂: the
    correct form of seed 003's (3.42)/(3.43).  Relative accuracy a few ulp.
    """
    xp = namespace(logits)
    z = check_array(logits, "logits", caller="softmax", xp=xp)
    e = xp.exp(z - xp.max(z, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


def _onehot(labels, z, xp, caller):
    n, k = z.shape
    lab = check_array(labels, "labels", caller=caller, ndim=1, xp=xp, like=z)
    if lab.shape[0] != n:  # one label per row of logits: never broadcast
        raise InvalidParameterError(
            f"The 'labels' parameter of {caller} must have one entry per row of 'logits' ({n}); got {lab.shape[0]}.")
    if not bool(xp.all((lab == xp.round(lab)) & (lab >= 0) & (lab < k))):
        raise InvalidParameterError(f"The 'labels' parameter of {caller} must contain integers in [0, {k}).")
    classes = xp.arange(k, dtype=lab.dtype, device=device_of(lab))
    return xp.astype(lab[:, None] == classes[None, :], z.dtype)


def softmax_cross_entropy(logits, labels):
    r"""l_ce(f, y) = −log softmax(f)_y per row, seed 003 (3.39); logits (n, k), integer labels (n,) in [0, k).

    Computed as −(z_y − max z − log Σ e^{z − max z}), selecting the label's entry (never 0·(−inf)), so finite logits
    of any size give a finite or +inf loss, never NaN (e.g. [−1.7e308, 1.7e308] with label 1 gives 0).
    """
    xp = namespace(logits)
    z = check_array(logits, "logits", caller="softmax_cross_entropy", ndim=2, xp=xp)
    onehot = _onehot(labels, z, xp, "softmax_cross_entropy")
    # select, do not multiply: 0·(−inf) would be NaN where another logit is −inf relative to the max
    return -xp.sum(xp.where(onehot > 0, log_softmax(z), xp.zeros_like(z)), axis=1)


def softmax_cross_entropy_gradient(logits, labels):
    r"""∇_f l_ce = softmax(f) − e_y, seed 003 (3.40); shape (n, k); rows sum to 0."""
    xp = namespace(logits)
    z = check_array(logits, "logits", caller="softmax_cross_entropy_gradient", ndim=2, xp=xp)
    onehot = _onehot(labels, z, xp, "softmax_cross_entropy_gradient")
    return softmax(z) - onehot


def loss_gradient_lipschitz(loss):
    r"""The best constant C of seed 003 (3.46): ‖∇_f l(f, y) − ∇_f l(f^s, y)‖ ≤ C‖f − f^s‖ for all f, f^s, y.

    C = sup |l″| (sup ‖∇²_f l‖ for vector outputs):

    - ``"logistic"`` log(1 + e^{−yz}): l″ = σ(yz)σ(−yz) ≤ ¼, attained at z = 0 → C = ¼;
    - ``"squared"`` (y − z)² (ntkref's convention, l′ = 2(z − y)) → C = 2, with equality for every pair (the
      seed's ½(f − y)² has C = 1); ``"squared_hinge"`` → 2;
    - ``"softmax_cross_entropy"`` (3.39), vector logits → C = ½ (the Hessian diag(p) − ppᵀ has norm ≤ ½, the
      correct form of (3.42)/(3.43)); the seed's (3.43) states C = 1;
    - ``"hinge"``, ``"epsilon_insensitive"``: l′ jumps, no finite C → ``math.inf``.

    (3.46) needs a bounded second derivative, not convexity (the seed says "convex").  ``loss`` is a name or an
    ``ntkref.losses.Loss`` (its ``smoothness``).  Exact.
    """
    if isinstance(loss, str) and loss == "softmax_cross_entropy":
        return 0.5
    loss_obj = _losses.get(loss)
    return math.inf if loss_obj.smoothness is None else float(loss_obj.smoothness)
