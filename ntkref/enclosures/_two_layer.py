r"""Ball-arithmetic enclosures of the closed-form kernels of :mod:`ntkref.kernels._two_layer`, each in its own form.

- Seed 000 eq. (63): Θ(x, x′) = ‖x‖‖x′‖ h(u)/(2πd), h(u) = 2u(π − arccos u) + √(1 − u²), u = cos θ;
- seed 002 §2 / App. B.1: K₁ = xᵀx′(1 − θ/π), K₂ = ‖x‖‖x′‖ sin θ/π, K = (r_w²/2)K₁ + (r_u²/2)(K₁ + K₂);
- seed 004 eq. (8) with c_σ = 2, Σ⁽⁰⁾ = xᵀx′: Θ⁽ᴸ⁾ = Σ_{h=1}^{L+1} Σ⁽ʰ⁻¹⁾ Π_{h′=h}^{L} Σ̇⁽ʰ′⁾, Σ⁽ʰ⁾ = 2E[σσ],
  Σ̇⁽ʰ⁾ = 2E[σ′σ′] (the sum-of-products form, not the recursion of :func:`._fc.fc`).

The angle comes from the exact integers of the rows (:func:`._fc.input_state`: cos θ, 1 − cos θ, 1 + cos θ
without cancellation); π − θ = 2·atan2(√(1 + cos θ), √(1 − cos θ)), sin θ = √((1 − cos θ)(1 + cos θ)).
Θ(x, 0) = 0.  Results: :class:`Enclosure` of shape (n1, n2), NumPy on the host (an explicit host step).
"""
from __future__ import annotations

import numpy as np

from .._lib.validation import check_int, check_real
from ._ball import Enclosure, check_prec, dyadic, exact_rows, flint
from ._fc import _Model, host_rows, input_state

__all__ = ["two_layer_relu_ntk", "wei_k1_k2", "wei_kernel", "arora_ntk"]



def _gram(x1, x2, prec, entry, n_out=1):
    """Enclosures of entry(r1, r2, geometry) over the pairs (i ≤ j mirrored when x2 is None)."""
    fl = flint()
    with fl.ctx.workprec(prec):
        rows1 = exact_rows(x1)
        rows2 = rows1 if x2 is None else exact_rows(x2)
        outs = [np.empty((len(rows1), len(rows2)), dtype=object) for _ in range(n_out)]
        for i, r1 in enumerate(rows1):
            for j in range(i if x2 is None else 0, len(rows2)):
                r2 = rows2[j]
                (rho, omr, opr), dot = input_state(r1, r2)
                norms = (dyadic(r1[2], 2 * r1[1]) * dyadic(r2[2], 2 * r2[1])).sqrt()  # ‖x‖‖x′‖
                geo = {
                    "rho": rho,
                    "sin": (omr * opr).sqrt(),
                    "phi": 2 * fl.arb.atan2(opr.sqrt(), omr.sqrt()),  # π − θ
                    "norms": norms,
                    "dot": dyadic(dot, r1[1] + r2[1]),
                }
                vals = entry(r1, r2, geo)
                vals = vals if isinstance(vals, tuple) else (vals,)
                for out, v in zip(outs, vals):
                    out[i, j] = v
                    if x2 is None:
                        out[j, i] = v
        return tuple(Enclosure(out, prec) for out in outs)


def two_layer_relu_ntk(x1, x2=None, *, prec=128):
    """Enclosure of seed 000 eq. (63), Θ(x, x′) = ‖x‖‖x′‖·h(u)/(2πd), as :func:`ntkref.kernels.two_layer_relu_ntk`.

    Evaluated as ‖x‖‖x′‖(2 cos θ (π − θ) + sin θ)/(2πd) in arb balls (``prec`` bits) from the exact inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.enclosures import two_layer_relu_ntk
    >>> e = two_layer_relu_ntk(np.eye(3))      # h(1) = 2π, h(0) = 1: Θ(e₁, e₁) = 1/d, Θ(e₁, e₂) = 1/(2πd)
    >>> print(f"{e.mid[0, 0]:.15f} {e.mid[0, 1] * 6 * np.pi:.15f}")
    0.333333333333333 1.000000000000000
    """
    x1, x2 = host_rows(x1, x2, "two_layer_relu_ntk")
    prec = check_prec(prec, "two_layer_relu_ntk")
    d = x1.shape[1]

    def entry(r1, r2, g):
        pi = flint().arb.pi()
        h = 2 * g["rho"] * g["phi"] + g["sin"]
        return g["norms"] * h / (2 * pi * d)

    return _gram(x1, x2, prec, entry)[0]


def wei_k1_k2(x1, x2=None, *, prec=128):
    """Enclosures of seed 002's K₁ = xᵀx′(1 − θ/π) and K₂ = ‖x‖‖x′‖ sin θ/π (App. B.1), as
    :func:`ntkref.kernels.wei_k1_k2`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.enclosures import wei_k1_k2
    >>> K1, K2 = wei_k1_k2(np.array([[1.0, 0.0], [0.0, 2.0]]))      # θ = 0 on the diagonal, π/2 off it
    >>> K1.mid.tolist(), (K2.mid * np.pi).round(12).tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [[0.0, 2.0], [2.0, 0.0]])
    """
    x1, x2 = host_rows(x1, x2, "wei_k1_k2")
    prec = check_prec(prec, "wei_k1_k2")
    return _gram(x1, x2, prec, _wei_entry, n_out=2)


def _wei_entry(r1, r2, g):
    pi = flint().arb.pi()
    return g["dot"] * g["phi"] / pi, g["norms"] * g["sin"] / pi


def wei_kernel(x1, x2=None, *, r_w=1.0, r_u=1.0, prec=128):
    """Enclosure of seed 002's two-layer ReLU NTK K = (r_w²/2)K₁ + (r_u²/2)(K₁ + K₂), as
    :func:`ntkref.kernels.wei_kernel` (``r_w``, ``r_u`` floats taken exactly).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.enclosures import wei_kernel
    >>> x = np.random.default_rng(0).standard_normal((3, 2))
    >>> e = wei_kernel(x, r_w=2.0, r_u=0.5)
    >>> bool((np.abs(kernels.wei_kernel(x, r_w=2.0, r_u=0.5) - e.mid) <= 1e-13 * np.abs(e.mid).max()).all())
    True
    """
    x1, x2 = host_rows(x1, x2, "wei_kernel")
    r_w = check_real(r_w, "r_w", caller="wei_kernel", low=0.0)
    r_u = check_real(r_u, "r_u", caller="wei_kernel", low=0.0)
    prec = check_prec(prec, "wei_kernel")

    def entry(r1, r2, g):
        arb = flint().arb
        k1, k2 = _wei_entry(r1, r2, g)
        return arb(r_w) ** 2 / 2 * k1 + arb(r_u) ** 2 / 2 * (k1 + k2)

    return _gram(x1, x2, prec, entry)[0]


def arora_ntk(x1, x2=None, *, depth=1, prec=128):
    """Enclosure of seed 004 eq. (8) (c_σ = 2, Σ⁽⁰⁾ = xᵀx′, no 1/d), as :func:`ntkref.kernels.arora_ntk`,
    in its sum-of-products form Θ⁽ᴸ⁾ = Σ_{h=1}^{L+1} Σ⁽ʰ⁻¹⁾ Π_{h′=h}^{L} Σ̇⁽ʰ′⁾.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.enclosures import arora_ntk
    >>> x = np.array([[1.0, 2.0], [3.0, -1.0]])
    >>> arora_ntk(x, depth=0).mid.tolist()                  # Σ⁽⁰⁾ = xᵀx′, exactly
    [[5.0, 1.0], [1.0, 10.0]]
    >>> arora_ntk(x, depth=2).mid[0, 0]                     # θ = 0: Σ⁽ʰ⁾ = ‖x‖², Σ̇⁽ʰ⁾ = 1, Θ = (L + 1)‖x‖²
    np.float64(15.0)
    """
    x1, x2 = host_rows(x1, x2, "arora_ntk")
    depth = check_int(depth, "depth", caller="arora_ntk", low=0)
    prec = check_prec(prec, "arora_ntk")
    model = None

    def entry(r1, r2, g):
        nonlocal model
        arb = flint().arb
        if model is None:
            model = _Model(1, [1.0] * (depth + 1), [0.0] * (depth + 1), "relu", prec)
        (rho, omr, opr), _ = input_state(r1, r2)
        state = (rho, omr, opr)
        s1, s2 = dyadic(r1[2], 2 * r1[1]).sqrt(), dyadic(r2[2], 2 * r2[1]).sqrt()  # √Σ⁽⁰⁾(x, x) = ‖x‖
        sigmas, dots = [g["dot"]], []
        for _ in range(depth):
            e_ff, e_dd, state = model.relu(state, s1, s2)
            sigmas.append(2 * e_ff)
            dots.append(2 * e_dd)
            # c_σ E[σ(u)²] = q: the scale is preserved (a zero row stays zero, with the state (0, 1, 1))
        total = arb(0)
        for h in range(1, depth + 2):
            term = sigmas[h - 1]
            for hp in range(h, depth + 1):
                term = term * dots[hp - 1]
            total = total + term
        return total

    return _gram(x1, x2, prec, entry)[0]
