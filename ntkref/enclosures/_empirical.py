r"""Ball-arithmetic enclosure of the empirical NTK of :class:`ntkref.nets.FullyConnected` (seed 000 Def. 2.1).

Θ̂(w; x, x′) = ⟨∇_w f(w, x), ∇_w f(w, x′)⟩ = (J Jᵀ)[x, x′], with the network of :mod:`ntkref.nets._fc`
(NTK parameterisation: z_ℓ = (W_std,ℓ/√n_ℓ) h_ℓ W_ℓ + b_std,ℓ b_ℓ, h_{ℓ+1} = relu(z_ℓ), f = z_L, relu′(0) = 0).
Here the Jacobian J itself is evaluated in arb balls — every entry (W_std,ℓ/√n_ℓ)·h_ℓ,i·δ_ℓ,j of a weight and
b_std,ℓ·δ_ℓ,j of a bias, δ_ℓ = ∂f/∂z_ℓ by the chain rule — from the exact float parameters and inputs, and
J₁J₂ᵀ is an arb matrix product: an independent route to the nets' layer-by-layer formula.

ReLU′ is discontinuous at 0, so each pre-activation's sign must be decided: a ball that is exactly 0 takes
relu′(0) = 0 (the nets' convention); a ball that straddles 0 is recomputed at twice the precision (up to
16× ``prec``), and one still undecided raises ValueError (the enclosure would otherwise not be rigorous).
Cost: O(n·P) ball operations for the Jacobian (P parameters) and an arb matrix product of O(n1·n2·P):
small nets (P up to ~10⁴, tens of rows).  Results are NumPy on the host (an explicit host step).
"""
from __future__ import annotations

import numpy as np

from .._lib.validation import InvalidParameterError
from ..nets import FullyConnected
from ._ball import Enclosure, check_prec, flint, host_array

__all__ = ["empirical_ntk"]


class _Undecided(Exception):
    pass


def _jacobian(net, params, x, prec):
    """The arb Jacobian of f at the rows of x (an arb_mat of shape (n, P), the nets' parameter order)."""
    fl = flint()
    arb, arb_mat = fl.arb, fl.arb_mat
    n = x.shape[0]
    hs, masks = [arb_mat([[arb(float(v)) for v in row] for row in x.tolist()]) if n else None], []
    cs = [arb(net.W_std[ell]) / arb(net.fan_in[ell]).sqrt() for ell in range(net.depth + 1)]
    Wm = [arb_mat([[arb(float(v)) for v in row] for row in W.tolist()]) for W, _ in params]
    h = hs[0]
    for ell in range(net.depth + 1):
        z = (h * Wm[ell]) * cs[ell]
        b = params[ell][1]
        if b is not None:
            bb = [arb(net.b_std[ell]) * arb(float(v)) for v in b.tolist()]
            z = arb_mat([[z[i, j] + bb[j] for j in range(z.ncols())] for i in range(n)])
        if ell < net.depth:
            rows, mask = [], []
            for i in range(n):
                r, m = [], []
                for j in range(z.ncols()):
                    v = z[i, j]
                    if v > 0:
                        r.append(v)
                        m.append(1)
                    elif v < 0 or v.is_zero():
                        r.append(arb(0))
                        m.append(0)
                    else:
                        raise _Undecided
                rows.append(r)
                mask.append(m)
            h = arb_mat(rows)
            hs.append(h)
            masks.append(mask)
    # backward: δ_L = 1, δ_{ℓ−1} = c_ℓ (δ_ℓ W_ℓᵀ) ⊙ relu′(z_{ℓ−1})
    deltas = [None] * (net.depth + 1)
    delta = arb_mat([[arb(1)] for _ in range(n)])
    deltas[net.depth] = delta
    for ell in range(net.depth, 0, -1):
        back = (delta * Wm[ell].transpose()) * cs[ell]
        mask = masks[ell - 1]
        delta = arb_mat([[back[i, j] if mask[i][j] else arb(0) for j in range(back.ncols())] for i in range(n)])
        deltas[ell - 1] = delta
    rows = []
    for i in range(n):
        row = []
        for ell in range(net.depth + 1):
            hrow = [cs[ell] * hs[ell][i, a] for a in range(hs[ell].ncols())]
            drow = [deltas[ell][i, j] for j in range(deltas[ell].ncols())]
            row.extend(hv * dv for hv in hrow for dv in drow)  # W_ℓ row-major
            if params[ell][1] is not None:
                bstd = arb(net.b_std[ell])
                row.extend(bstd * dv for dv in drow)
        rows.append(row)
    return arb_mat(rows)


def empirical_ntk(net, params, x1, x2=None, *, prec=128):
    """Rigorous enclosure of :func:`ntkref.nets.empirical_ntk` for a :class:`ntkref.nets.FullyConnected`.

    Θ̂ = J(x1) J(x2)ᵀ with the Jacobian evaluated in arb balls from the exact float parameters and inputs
    (module docstring; relu′(0) = 0).  ``params``: the ``(W, b)`` list of ``net.init`` (arrays of any
    namespace, copied to the host explicitly); ``x2=None`` means ``x1`` (exactly symmetric).

    Returns
    -------
    Enclosure
        Shape (n1, n2), NumPy on the host.

    Raises
    ------
    ValueError
        A pre-activation whose sign cannot be decided even at 16·``prec`` bits (relu′ is discontinuous there).

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import nets
    >>> from ntkref.enclosures import empirical_ntk
    >>> net = nets.FullyConnected(3, 16, depth=2, b_std=0.1)
    >>> params = net.init(0)
    >>> x = np.random.default_rng(1).standard_normal((4, 3))
    >>> e = empirical_ntk(net, params, x)
    >>> k = nets.empirical_ntk(net, params, x)
    >>> bool((np.abs(k - e.mid) <= 1e-13 * np.abs(e.mid).max()).all()), bool((e.ball_rad < 1e-30).all())
    (True, True)
    """
    if not isinstance(net, FullyConnected):
        raise InvalidParameterError(
            f"The 'net' parameter of enclosures.empirical_ntk must be a nets.FullyConnected; got "
            f"{type(net).__name__} (other networks have no enclosure yet)."
        )
    prec = check_prec(prec, "empirical_ntk")
    fl = flint()
    if not isinstance(params, (list, tuple)) or len(params) != net.depth + 1:
        raise InvalidParameterError(
            f"The 'params' parameter of enclosures.empirical_ntk must be a list of {net.depth + 1} (W, b) pairs."
        )
    host = []
    for ell, ((W, b), fi, fo, bs) in enumerate(zip(params, net.fan_in, net.fan_out, net.b_std)):
        W = host_array(W, f"params[{ell}][0]", "empirical_ntk", 2)
        if W.shape != (fi, fo):
            raise InvalidParameterError(f"params[{ell}] weight has shape {W.shape}; expected {(fi, fo)}.")
        if (b is None) != (bs == 0):
            raise InvalidParameterError(f"params[{ell}] bias must be {'None' if bs == 0 else 'present'}.")
        if b is not None:
            b = host_array(b, f"params[{ell}][1]", "empirical_ntk", 1)
            if b.shape != (fo,):
                raise InvalidParameterError(f"params[{ell}] bias has shape {b.shape}; expected {(fo,)}.")
        host.append((W, b))
    xs = []
    for name, x in (("x1", x1), ("x2", x2)):
        if x is None:
            xs.append(None)
            continue
        x = host_array(x, name, "empirical_ntk", 2)
        if x.shape[1] != net.d_in:
            raise InvalidParameterError(f"{name} has {x.shape[1]} features; the network expects d_in = {net.d_in}.")
        xs.append(x)
    x1, x2 = xs
    n1 = x1.shape[0]
    n2 = n1 if x2 is None else x2.shape[0]
    for work in (prec, 2 * prec, 4 * prec, 8 * prec, 16 * prec):
        try:
            with fl.ctx.workprec(work):
                if n1 == 0 or n2 == 0:
                    return Enclosure(np.empty((n1, n2), dtype=object), prec)
                J1 = _jacobian(net, host, x1, work)
                J2 = J1 if x2 is None else _jacobian(net, host, x2, work)
                K = J1 * J2.transpose()
                out = np.empty((n1, n2), dtype=object)
                for i in range(n1):
                    for j in range(n2):
                        out[i, j] = K[min(i, j), max(i, j)] if x2 is None else K[i, j]
                return Enclosure(out, work)
        except _Undecided:
            continue
    raise ValueError(
        "enclosures.empirical_ntk: a pre-activation of the network at these 'params' and 'x1'/'x2' is within "
        f"2^-{16 * prec} of 0 but not provably 0, so relu′ there (0 or 1) cannot be decided and no rigorous "
        "enclosure exists at this precision; perturb the input or raise 'prec'."
    )
