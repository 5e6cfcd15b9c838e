r"""Adversarial winning tickets: the AWT objective, its gradient and the mask search (seed 003 Ch. 3).

- (3.13) = (3.20): the AWT objective (target distance + kernel distance) at given attacked points and with the
  attacks — :func:`awt_distances`, :func:`awt_objective`; its closed form for linear models with the exact ℓ2
  attack — :func:`linear_awt_objective`; (3.45), the objective for a general loss — :func:`awt_objective_general`;
- Algorithm 2, line 4: the exact ∇_w of (3.13) at the student, through a hand-written R-operator (parameter
  Hessian-vector products) — :func:`awt_gradient`;
- Thm 3.2.2 / 3.5.2, (3.14) = (3.21) and (3.37): the output-gap bound and step size — :func:`awt_gap_bound`,
  :func:`awt_step_size`;
- Algorithm 2 and its relaxed surrogate — :func:`awt_search`; phase two, (3.1)/(3.3) with the mask —
  :func:`masked_adversarial_training`.

Masks, the masked tangent kernel and the shared checks come from :mod:`ntkref.sparsity._masks`.  Conventions,
accuracy and the errata settled here are in the package docstring (:mod:`ntkref.sparsity`).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .. import adversarial as _adv
from .. import losses as _losses
from .._lib.backend import device_of, namespace
from .._lib.validation import (
    InvalidParameterError,
    check_array,
    check_int,
    check_option,
    check_real,
)
from ._masks import (
    NORMS,
    check_mask,
    check_params,
    finite,
    full_mask,
    layer_scale,
    magnitude_mask,
    masked_ntk,
    masked_params,
    n_keep,
    overflow,
    scaled,
    topk_masks,
)


# ==================================================================================================
# scale-free norm and overflow errors of the AWT terms
# ==================================================================================================
def _float_finite(v, caller, what, names):
    if not math.isfinite(v):
        raise overflow(caller, what, names)
    return v


def _norm(v, xp):
    """‖v‖₂ of a 1-D array without overflow or underflow of the squares: max|v|·‖v/max|v|‖₂ (a 0-d array)."""
    if v.shape[0] == 0:
        return xp.linalg.vector_norm(v)
    vh, scale = scaled(v, xp)
    return scale[0] * xp.linalg.vector_norm(vh)


@contextmanager
def _in_range(caller, names):
    """Inputs are validated before this block: an error the network raises inside it (an overflow of its output or
    tangent kernel, refused by the net as non-finite) is reported as an overflow naming the user's inputs."""
    try:
        yield
    except (InvalidParameterError, FloatingPointError) as exc:
        raise overflow(caller, "an intermediate result", names) from exc


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
    c = [layer_scale(net, ell) for ell in range(L + 1)]
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
        c = layer_scale(net, ell)
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
            return finite(g0(x_adv, y_), caller, "the attack's loss gradient ∇ₓℓ(f(x̃), y)", names)

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
    check_params(net, params0, "params0", caller)
    if student is None:
        student = params0
    else:
        check_params(net, student, "student", caller)
    return params0, student, check_mask(student, mask, caller, "params0" if student is params0 else "student")


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
        r = net.apply(masked_params(student, mask), x_adv_sparse) - net.apply(params0, x_adv)
    return finite(r, caller, "the network output", names)


def _kernel_residual(net, params0, student, mask, x, x_adv, x_adv_sparse, xp, caller, names):
    """E = Θ₀(X, X̃₀) − Θ^s(X, X̃ˢ), inputs checked."""
    with _in_range(caller, names):
        E = net.empirical_ntk(params0, x, x_adv) - masked_ntk(net, student, mask, x, x_adv_sparse)
    return finite(E, caller, "the tangent kernel residual Θ₀ − Θˢ", names)


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
    x_adv_s = run(net, masked_params(student, mask), x, y)
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
    sparse = masked_params(params0, mask)
    x_adv_s = run(net, sparse, x, y)
    with _in_range(caller, names):
        force = loss_obj.derivative(net.apply(params0, x_adv), y) - loss_obj.derivative(net.apply(sparse, x_adv_s), y)
    force = finite(force, caller, "the loss derivative", names)
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
    p_eff = masked_params(student, mask)
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
    return finite([(dW * M, db) for (dW, db), M in zip(grads, mask)], caller, "the gradient", names)


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
    finite([f0, fs], caller, "the attacked outputs θ·x̃", names)
    finite([K0, Ks], caller, "the tangent kernels Θ(X, X̃)", names)
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
    E = net.empirical_ntk(params0, x, x_adv) - masked_ntk(net, params0, m, x, x_adv_s)
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
            c = layer_scale(net, ell)
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
    check_params(net, params0, "params0", caller)
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
        x_adv_s = run(net, masked_params(params0, mask), x, y)
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
        k = n_keep(sum(sizes), density, caller)
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
            xas = run(net, masked_params(w, mask), xs, ys)
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
            g_flat = finite(xp.concat([xp.reshape(gi, (-1,)) for gi in g]), caller, "the mask gradient", names)
            gmax = xp.max(xp.abs(g_flat))
            if float(gmax) > 0:
                m_flat = _project_capped_simplex(m_flat - lr * g_flat / gmax, k, xp)
        if t % mask_every == 0:
            if method == "algorithm2":
                mask = magnitude_mask(w, density, scope=scope)
            else:
                mask = topk_masks(split(m_flat), shapes, density, "global", caller, params0[0][0], tiebreak=abs0)
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
    check_params(net, params0, "params0", caller)
    xp, x, y = _data(net, params0, x, y, caller)
    loss_obj = loss if hasattr(loss, "derivative") else _losses.get(loss)
    eps = check_real(eps, "eps", caller=caller, low=0.0)
    lr = check_real(lr, "lr", caller=caller, low=0.0, closed="neither")
    steps = check_int(steps, "steps", caller=caller, low=0)
    norm = check_option(norm, "norm", NORMS, caller=caller)
    attack_steps = check_int(attack_steps, "attack_steps", caller=caller, low=1)
    record_every = check_int(record_every, "record_every", caller=caller, low=0)
    mask = full_mask(params0) if mask is None else check_mask(params0, mask, caller, "params0")
    n = x.shape[0]
    if step_size is None:
        step_size = 2.5 * eps / attack_steps if eps > 0 else 1.0
    step_size = check_real(step_size, "step_size", caller=caller, low=0.0, closed="neither")
    params = [(W, b) for W, b in params0]
    record = []
    names = ("x", "y", "params0")
    for t in range(steps):
        p_eff = masked_params(params, mask)
        if eps > 0:
            g_ad = _adv.loss_input_gradient(net, p_eff, loss_obj)

            def g_in(x_adv, y_, g_ad=g_ad, t=t):
                return finite(g_ad(x_adv, y_), caller, f"the attack's loss gradient at step {t}",
                               names if t == 0 else names + ("lr",))

            xa = _adv.pgd(g_in, x, y, eps=eps, step_size=step_size, steps=attack_steps, norm=norm, domain=domain)
        else:
            xa = x
        z = finite(net.apply(p_eff, xa), caller, f"the network output at step {t}", names if t == 0 else names + ("lr",))
        if record_every and t % record_every == 0:
            record.append((t, _float_finite(float(xp.mean(loss_obj.value(z, y))), caller,
                                            f"the training loss at step {t}", names if t == 0 else names + ("lr",))))
        grads = [(dW * M, db) for (dW, db), M in zip(net.vjp(p_eff, xa, loss_obj.derivative(z, y) / n), mask)]
        params = [(W - lr * dW, (b - lr * db) if b is not None else None) for (W, b), (dW, db) in zip(params, grads)]
        if not all(bool(xp.all(xp.isfinite(v))) for pair in params for v in pair if v is not None):
            if t == 0:
                raise overflow(caller, "the first gradient step", names + ("lr",))
            raise FloatingPointError(
                f"{caller}: training diverged after {t + 1} steps (the parameters overflowed to inf/NaN); lower 'lr' "
                f"(or rescale 'x' and 'params0').")
    return (params, record) if record_every else params
