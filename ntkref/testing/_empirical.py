r"""The checker of empirical NTKs of finite fully connected ReLU nets: :func:`check_empirical_ntk`.

The reference is :func:`ntkref.nets.empirical_ntk` of :class:`ntkref.nets.FullyConnected` (seed 000 Def. 2.1),
Θ̂(w; x, x′) = ⟨∇_w f(w, x), ∇_w f(w, x′)⟩ = Σ_ℓ (W_std,ℓ²/n_ℓ ⟨h_ℓ(x), h_ℓ(x′)⟩ + b_std,ℓ²)⟨δ_ℓ(x), δ_ℓ(x′)⟩
(NTK parameterisation, docs/conventions.md 'NTK parameterisation (finite nets)').  Θ̂ is a Gram matrix of
gradients, hence PSD, and entries are compared in the Cauchy–Schwarz measure of the kernel checkers,

.. math::  e_{ij} = |\hat\Theta^{\rm cand}_{ij} - \hat\Theta^{\rm ref}_{ij}| \,/\,
           \sqrt{\hat\Theta^{\rm ref}(x_i, x_i)\,\hat\Theta^{\rm ref}(x'_j, x'_j)} ,

failing above max(``tol``, :data:`EMPIRICAL_NTK_BOUND`) (a zero scale — x = 0 without biases — needs equality).

Kinds by cause (:mod:`ntkref._diagnosis`' taxonomy): ``"non_finite"`` (inf/NaN), ``"convention"`` when a named
slip, recomputed from ntkref's per-layer terms, explains every entry of the example to the same tolerance and
differs from the reference there (:data:`SLIPS`: the bias gradients left out, only the readout layer's
gradients — the conjugate kernel —, the readout layer left out, the first layer left out (frozen), or the sum
over layers halved/doubled), ``"precision"`` (within 10·eps·(d + Σ widths + L + 2) of the candidate's dtype),
``"formula"`` otherwise (no hint rather than a wrong one).
"""
from __future__ import annotations

import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design
from hypothesis import strategies as st

from .. import nets
from .._lib.validation import InvalidParameterError, check_int, check_real
from .. import _diagnosis as dg
from ._engine import check_candidate, check_mode, drive, finish
from ._kernel import host, mover
from ._report import Mismatch
from ._strategies import rows

__all__ = ["check_empirical_ntk", "EMPIRICAL_NTK_BOUND"]

EMPIRICAL_NTK_BOUND = 1e-13
"""The stated accuracy of :func:`ntkref.nets.empirical_ntk` in the normalised measure (float64), away from ties
(a pre-activation within rounding of 0, where ReLU′ jumps and any two correct implementations may differ by O(1)):
measured ≤ 2e-15 against a 50-digit mpmath finite-difference Jacobian (J Jᵀ; tests/test_oracle_fits.py), and
against ``torch.func.jacrev`` (J Jᵀ) ≤ 1e-15; the stated bound keeps a ×50 margin.  Tested, not proven."""

SLIPS = (
    ("no bias gradients", "the bias gradients are left out (Σ_ℓ W_std²/n_ℓ⟨h, h′⟩⟨δ, δ′⟩: b_std² terms missing)"),
    ("readout only", "only the readout layer's gradients (the conjugate kernel / last-layer features), not every "
                     "layer's"),
    ("no readout", "the readout layer's gradients are left out"),
    ("no first layer", "the first layer's gradients are left out (a frozen input layer)"),
    ("2x", "twice the reference: a factor 2 (a ½ convention?)"),
    ("x/2", "half the reference: a factor ½ (a ½ convention?)"),
)
"""Named slips of an empirical NTK (label, message)."""


def _terms(net, params, x1, x2):
    """Per-layer (weight term, bias term) of Θ̂ (host float64), from ntkref's factors h_ℓ, δ_ℓ."""
    h1, d1, _ = net.features(params, x1, name="x1")
    h2, d2, _ = net.features(params, x2, name="x2")
    out = []
    for ell in range(net.depth + 1):
        dd = host(d1[ell]) @ host(d2[ell]).T
        w = net.W_std[ell] ** 2 / net.fan_in[ell] * (host(h1[ell]) @ host(h2[ell]).T) * dd
        b = (net.b_std[ell] ** 2) * dd if params[ell][1] is not None else np.zeros_like(dd)
        out.append((w, b))
    return out


def _alternatives(terms):
    ref = sum(w + b for w, b in terms)
    return {"no bias gradients": sum(w for w, _ in terms), "readout only": terms[-1][0] + terms[-1][1],
            "no readout": sum(w + b for w, b in terms[:-1]) if len(terms) > 1 else np.zeros_like(ref),
            "no first layer": sum(w + b for w, b in terms[1:]), "2x": 2.0 * ref, "x/2": 0.5 * ref}


def _problems(depth, d, width, n):
    @st.composite
    def strategy(draw):
        dd = draw(st.integers(d[0], d[1]))
        widths = [draw(st.integers(width[0], width[1])) for _ in range(depth)]
        x1 = draw(rows(n, dd, kinds=("gaussian", "near_parallel", "duplicate", "zero"), scale_range=(0.1, 10.0),
                       min_angle=1e-3))
        x2 = draw(st.one_of(st.none(), rows(n, dd, kinds=("gaussian", "duplicate"), scale_range=(0.1, 10.0))))
        seed = draw(st.integers(0, 2**32 - 1))
        return x1, x2, widths, seed

    return strategy()


def check_empirical_ntk(candidate, *, depth=1, W_std=1.0, b_std=0.0, tol=1e-12, d=(1, 4), width=(1, 8), n=(1, 4),
                        max_examples=30, problems=None, backend=None, seed=0, shrink=True, raise_on_failure=True,
                        mode="assert"):
    r"""Check an empirical NTK ``candidate(params, x1, x2) -> (n1, n2)`` of a finite FC ReLU net against
    :func:`ntkref.nets.empirical_ntk` (module docstring: measure, tolerance, kinds).

    The net is :class:`ntkref.nets.FullyConnected` (``depth`` hidden layers, NTK parameterisation, ReLU with
    relu′(0) = 0, scalar readout).  ``params`` is its list of ``(W, b)`` per layer (readout last) as NumPy float64
    arrays: ``W`` of shape (fan_in, fan_out), ``b`` of shape (fan_out,) or ``None`` when ``b_std == 0``, and the
    layer computes z = W_std·(h @ W)/√fan_in + b_std·b.  ``x2`` may be ``None`` (x1 against itself).

    Mapping to the peers: neural-tangents' ``stax.serial(Dense(m, W_std, b_std), Relu(), …, Dense(1, W_std,
    b_std))`` (``parameterization="ntk"``) has the parameters ``[(W₀, b₀), (), (W₁, b₁), (), …, (W_L, b_L)]`` (a
    ``()`` per ``Relu``; ``b`` of shape (fan_out,)), and its ``empirical_ntk_fn(apply_fn, trace_axes=())`` — or
    J Jᵀ with J = ``jax.jacrev`` of the outputs flattened over the parameters — is this Θ̂; issue 24's user measured
    both against ``nets.empirical_ntk`` at 1e-15 under this mapping (JAX is not a dependency: not re-measured
    here; ``torch.func.jacrev`` is, tests/test_oracle_fits.py).

    Parameters
    ----------
    candidate : callable (params, x1, x2) -> array (n1, n2)
    depth : int ≥ 1
    W_std, b_std : float or sequence of depth + 1 floats
        As :class:`ntkref.nets.FullyConnected` (``b_std = 0``: no biases).
    tol : float
        Normalised tolerance (default 1e-12; ntkref's own bound :data:`EMPIRICAL_NTK_BOUND` applies where larger).
    d, width, n : int or (min, max)
        Input dimension, hidden widths (drawn per layer) and rows of x1/x2 of the default strategy.
    problems : hypothesis strategy of (x1, x2, widths, net_seed), optional
    max_examples, backend, seed, shrink, raise_on_failure, mode : as in :func:`ntkref.testing.check_kernel`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref.testing import check_empirical_ntk
    >>> def entk(params, x1, x2):            # J Jᵀ from an explicit Jacobian of a depth-1 net without biases
    ...     x2 = x1 if x2 is None else x2
    ...     (W0, _), (W1, _) = params
    ...     def jac(x):
    ...         z = x @ W0 / np.sqrt(x.shape[1]); h = np.maximum(z, 0); m = W0.shape[1]
    ...         dW0 = (x[:, :, None] * ((z > 0) * W1[:, 0] / np.sqrt(m))[:, None, :]) / np.sqrt(x.shape[1])
    ...         return np.concatenate([dW0.reshape(len(x), -1), h / np.sqrt(m)], axis=1)
    ...     return jac(x1) @ jac(x2).T
    >>> check_empirical_ntk(entk, depth=1, max_examples=10).passed
    True
    """
    caller = "check_empirical_ntk"
    check_candidate(candidate, caller)
    depth = check_int(depth, "depth", caller=caller, low=1)
    tol = check_real(tol, "tol", caller=caller, low=0.0)
    mode = check_mode(mode, caller)
    bound = EMPIRICAL_NTK_BOUND
    tol_used = max(tol, bound)
    src = "ntkref" if bound > tol else "user"
    nets.FullyConnected(1, 1, depth, W_std=W_std, b_std=b_std)  # validates W_std / b_std now, naming them

    def pair(v, name, low):
        if isinstance(v, (tuple, list)):
            lo, hi = (check_int(u, name, caller=caller, low=low) for u in v)
            if hi < lo:
                raise InvalidParameterError(f"The {name!r} parameter of {caller} must have min <= max. Got {v!r}.")
            return lo, hi
        v = check_int(v, name, caller=caller, low=low)
        return v, v

    if problems is None:
        problems = _problems(depth, pair(d, "d", 1), pair(width, "width", 1), pair(n, "n", 1))
    pinned = {"cause": None}

    def evaluate(problem, rec):
        x1, x2, widths, net_seed = problem
        x1 = np.asarray(x1, dtype=np.float64)
        x2 = None if x2 is None else np.asarray(x2, dtype=np.float64)
        net = nets.FullyConnected(x1.shape[1], list(widths), depth, W_std=W_std, b_std=b_std)
        params = net.init(net_seed, xp=np)  # host float64: what the candidate gets
        put = mover(backend)
        params_x = [(put(W), None if b is None else put(b)) for W, b in params]
        x2r = x1 if x2 is None else x2
        ref = host(nets.empirical_ntk(net, params_x, put(x1), None if x2 is None else put(x2)))
        diag1 = np.diagonal(host(nets.empirical_ntk(net, params_x, put(x1)))).copy()
        diag2 = diag1 if x2 is None else np.diagonal(host(nets.empirical_ntk(net, params_x, put(x2)))).copy()
        scale = np.sqrt(np.maximum(diag1, 0.0))[:, None] * np.sqrt(np.maximum(diag2, 0.0))[None, :]
        inputs = {"x1": x1, "x2": x2, "widths": list(widths), "net_seed": int(net_seed)}
        try:
            cand = host(candidate([(W.copy(), None if b is None else b.copy()) for W, b in params], x1.copy(),
                                  None if x2 is None else x2.copy()))
        except Exception as exc:
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, tol_used, "call",
                         f"candidate raised {type(exc).__name__}: {exc}", kind="exception")
            rec.failure(m)
            return [m], math.inf
        if cand.shape != ref.shape:
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, tol_used, "shape",
                         f"candidate returned shape {cand.shape}, expected {ref.shape}", kind="shape")
            rec.failure(m)
            return [m], math.inf
        rec.values(cand.size, cand.size if src == "ntkref" else 0)
        eps = float(np.finfo(cand.dtype).eps) if cand.dtype in (np.float32, np.float16) else float(np.finfo(np.float64).eps)
        cand = cand.astype(np.float64)
        finite = np.isfinite(cand)
        with np.errstate(all="ignore"):
            diff = np.abs(cand - ref)
            err = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))
        err = np.where(finite, err, np.inf)
        rec.error("entries", float(np.max(np.where(finite, err, 0.0))) if err.size else 0.0)
        bad = ~(err <= tol_used)
        if not bad.any():
            return [], float(np.max(err)) / tol_used if err.size and tol_used > 0 else 0.0
        if not finite.all():
            loc = tuple(int(i) for i in np.argwhere(~finite)[0])
            for ij in np.argwhere(~finite):
                rec.bad_value(tuple(ij), float(cand[tuple(ij)]))
            kind, hint, cause = "non_finite", "", ("non_finite",)
        else:
            loc = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
            def call(a):  # the candidate on a generic net of width 4 and other rows (the diagnosis' evidence)
                net_a = nets.FullyConnected(a.shape[1], [4] * len(widths), depth, W_std=W_std, b_std=b_std)
                p_a = net_a.init(20261127, xp=np)
                c_a = host(candidate([(W.copy(), None if b is None else b.copy()) for W, b in p_a], a.copy(),
                                     None)).astype(np.float64)
                return net_a, p_a, c_a

            kind, hint, cause = _diagnose(net, params, x1, x2r, cand, ref, scale, tol_used, eps, widths, call)
        if pinned["cause"] is not None and rec.source == "shrink" and cause != pinned["cause"]:
            return [], 0.0  # a shrink step must keep the cause first found
        m = Mismatch(inputs, loc, float(cand[loc]), float(ref[loc]), float(err[loc]), tol_used,
                     "diagonal" if x2 is None and loc[0] == loc[1] else "off-diagonal",
                     f"{int(bad.sum())} of {bad.size} entries outside the tolerance", kind=kind,
                     tolerance_source=src, hint=hint)
        m.diagnosis = cause
        rec.failure(m, int(bad.sum()))
        return [m], float(err[loc]) / tol_used if tol_used > 0 else math.inf

    def pin(diagnosis):
        pinned["cause"] = diagnosis

    desc = (f"check_empirical_ntk({getattr(candidate, '__qualname__', candidate)}, depth={depth}, W_std={W_std!r}, "
            f"b_std={b_std!r}, tol={tol:g})")
    report = drive(caller, strategy=problems, evaluate=evaluate, battery_cases=[],
                   order=("x1", "x2", "widths", "net_seed"), mode=mode, max_examples=max_examples, seed=seed,
                   shrink=shrink, description=desc,
                   tolerance={"user": {"entries": tol}, "ntkref_bound": bound,
                              "bound_source": "EMPIRICAL_NTK_BOUND (measured against mpmath and torch.func.jacrev)"},
                   hint=lambda m: m.hint, pin=pin)
    return finish(report, raise_on_failure)


def _augmented(net, params, x1, x2, call):
    """Evidence beyond a shrunk example (ntkref._diagnosis' augmentation: an example of one or two entries, or of a
    width-1 net whose features are constant, cannot tell a slip from an error): the candidate on a generic net of
    width 4 (same depth, W_std, b_std; fixed seed) at the example's rows and 3 generic rows, as one symmetric
    problem: (cand, ref, scale, alternatives), or None where the candidate fails there."""
    rng = np.random.default_rng(20261127)
    xa = np.concatenate([x1, x2, rng.standard_normal((3, x1.shape[1]))], axis=0)
    try:
        net, params, cand = call(xa)
    except Exception:  # noqa: BLE001 - the candidate's own failure on extra rows: no augmented evidence
        return None
    ref = host(nets.empirical_ntk(net, params, xa))
    if cand.shape != ref.shape or not np.all(np.isfinite(cand)):
        return None
    dg_ = np.sqrt(np.maximum(np.diagonal(ref), 0.0))
    return cand, ref, dg_[:, None] * dg_[None, :], _alternatives(_terms(net, params, xa, xa))


def _diagnose(net, params, x1, x2, cand, ref, scale, tol, eps, widths, call=None):
    """(kind, hint, cause) of a finite failing example (module docstring): a slip is named when it explains every
    entry and differs from the reference on at least two entries of different scale — of the example, or of the
    example's rows with 3 generic rows added (the candidate called on them)."""
    band = dg.PRECISION_MULTIPLE * eps * (x1.shape[1] + sum(widths) + net.depth + 2)
    with np.errstate(all="ignore"):
        err = np.where(scale > 0, np.abs(cand - ref) / np.where(scale > 0, scale, 1.0), np.inf)
    aug = None
    for label, message in SLIPS:
        alt = _alternatives(_terms(net, params, x1, x2))[label]
        with np.errstate(all="ignore"):
            e_alt = np.where(scale > 0, np.abs(cand - alt) / np.where(scale > 0, scale, 1.0), np.inf)
            d_alt = np.where(scale > 0, np.abs(alt - ref) / np.where(scale > 0, scale, 1.0), np.inf)
        # the slip explains every entry, and differs from the reference on at least two entries of different scale
        # (one entry alone, or its mirror image: any error is "a factor"; ntkref._diagnosis's rule)
        if not np.all(e_alt <= max(tol, band)):
            continue
        if dg._distinct(d_alt > max(tol, band), scale, ref):
            return "convention", f"{message} ({label})", ("convention", label)
        if call is not None:
            if aug is None:
                aug = _augmented(net, params, x1, x2, call) or False
            if aug:
                c_a, r_a, s_a, alts_a = aug
                with np.errstate(all="ignore"):
                    e_a = np.where(s_a > 0, np.abs(c_a - alts_a[label]) / np.where(s_a > 0, s_a, 1.0), np.inf)
                    d_a = np.where(s_a > 0, np.abs(alts_a[label] - r_a) / np.where(s_a > 0, s_a, 1.0), np.inf)
                if np.all(e_a <= max(tol, band)) and dg._distinct(d_a > max(tol, band), s_a, r_a):
                    return "convention", f"{message} ({label})", ("convention", label)
    if float(np.max(err)) <= band:
        return "precision", "", ("precision",)
    return "formula", "", ("formula",)
