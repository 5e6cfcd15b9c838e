"""Bounds of g(x) = Σᵢ αᵢ Θ(x, xᵢ) over balls (seed 000 eqs. (65)–(66)) and the certified radius (§4.2,
problem (10), Thm 4.2): all test points at once, a safeguarded regula falsi on the margin bound, snapped to the
grid max_radius·(1 + tol)^(−k/2) (``ntkref.certify`` docstring, "Certified radius").

A Dask ``x_test`` goes to its engine through ``dispatch.certified_radius`` (one task per row chunk).

Also used by ``_ibp``: :func:`bisect` (the search), :func:`radius_setup` (the bracket top), :func:`finish`
(the sign of g(x₀), points at the margin and misclassified points) and :func:`info` (the ``return_info`` dict).
"""
from __future__ import annotations

import math

from .._lib import dispatch
from .._lib.backend import device_of
from .._lib.validation import InvalidParameterError, check_labels, check_real
from ._checks import (check_alpha, check_domain, check_points, check_radius, check_tol, finite_out, normalized,
                      on_device_of, pow2_exponent, split_alpha, times_pow2)
from ._ntk_interval import prepare
from ._verify import ProvenNTKMargin, verify_and_shrink


def output_bounds(alpha, x_train, x_test, radius, *, method="tight", norm="linf", domain=None, exact_domain=False):
    r"""Lower and upper bounds of g(x) = Σᵢ αᵢ Θ(x, xᵢ) over balls (seed 000 eqs. (65)–(66)).

    g ≥ Σ_{αᵢ>0} αᵢΘᴸ(x, xᵢ) + Σ_{αᵢ<0} αᵢΘᵁ(x, xᵢ) and
    g ≤ Σ_{αᵢ<0} αᵢΘᴸ(x, xᵢ) + Σ_{αᵢ>0} αᵢΘᵁ(x, xᵢ), with [Θᴸ, Θᵁ] from
    :func:`ntk_interval`.  Any real α (SVM, KRR, SVR, logistic, …).

    Parameters
    ----------
    alpha : array (n_train,), finite
    x_train : array (n_train, d)
    x_test : array (n_test, d)
        Ball centres.
    radius : float or array (n_test,), ≥ 0
    method, norm, domain, exact_domain : as in :func:`ntk_interval`.

    Returns
    -------
    lower, upper : arrays (n_test,)
        Sound bounds of g over each ball (widened by (n + 2)·eps·Σ|αᵢ||Θ| for
        the rounding of the sums), at every common scale of ``alpha``,
        ``x_train`` and (``x_test``, ``radius``): the computation runs on
        power-of-two normalised inputs (module docstring, "Scale").

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify, kernels, machines
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 5))
    >>> alpha = machines.fit(kernels.two_layer_relu_ntk(X), np.sign(X[:, 0]), "hinge", 0.01)   # an NTK SVM
    >>> x0 = rng.standard_normal((1, 5))
    >>> lo, hi = certify.output_bounds(alpha, X, x0, 0.05)          # g over ‖x − x₀‖∞ ≤ 0.05
    >>> g = kernels.two_layer_relu_ntk(x0 + rng.uniform(-0.05, 0.05, (1000, 5)), X) @ alpha
    >>> bool(lo[0] <= g.min() and g.max() <= hi[0])                # sound on 1000 points of the ball
    True
    """
    caller = "output_bounds"
    xp, x_train, x_test = check_points(x_train, x_test, caller)
    alpha = check_alpha(alpha, x_train, xp, caller)
    alpha, x_train = split_alpha(alpha, x_train, xp)
    xp, x_train, x_test, geo = prepare(x_test, x_train, caller, norm, method, domain, exact_domain)
    n = x_test.shape[0]
    delta = check_radius(radius, x_test, xp, caller)
    if alpha.shape[0] == 0:
        zero = xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test))
        return zero, zero
    ones = xp.ones((n,), dtype=x_test.dtype, device=device_of(x_test))
    # g is linear in α: the sums run on α/2^ka (largest |α| in [1, 2)) and the radius δ/s₀, then scale back
    ka = pow2_exponent(alpha, xp)
    alpha, delta = normalized(alpha, ka), normalized(delta, geo.k0)
    k = geo.k0 + geo.kt + ka
    lower = times_pow2(geo.signed_lower(delta, ones, alpha), k, xp, -1)
    upper = times_pow2(-geo.signed_lower(delta, -ones, alpha), k, xp, 1)
    return finite_out((lower, upper), caller, ("alpha", "x_train", "x_test", "radius"))


# ---------------------------------------------------------------------------
# vectorised bisection
# ---------------------------------------------------------------------------
_MAX_SHRINK = 60  # give up below top·2⁻⁶⁰
_MAX_STEPS = 500


def bisect(margin, top, active, tol, xp):
    """Largest certified radius on the grid top·q^(−k), q = √(1 + tol), for every point at once.

    ``margin(delta)`` → lower bound of σ·g over the balls; certified iff > 0; continuous and non-increasing
    in δ.  Points with margin(0) ≤ 0 are never certified (radius 0).  Invariant: lo is certified (lo = 0
    counts, as margin(0) > 0), hi is not.  Each step proposes the secant root of the margin between
    (lo, m(lo)) and (hi, m(hi)) — on MNIST the margin bound is nearly linear in δ, so this is accurate —
    nudged by ±(q − 1)/3 to the side that did not move last (so two accurate proposals close the
    bracket), kept inside the bracket, with a bisection step (geometric midpoint, or hi/8 while lo = 0)
    after two moves of the same end; stop when hi ≤ lo·q.  Finally snap to the grid: the answer is the
    largest certified grid point (one more evaluation for the grid point inside (lo, hi), if any).  So the
    result is a function of the certified set alone — a method whose certified set is larger never
    returns a smaller radius — and r is certified while r·(1 + tol) = r·q² is not.
    Returns (radius, capped, number of margin evaluations).
    """
    q = math.sqrt(1.0 + tol)
    log_q = math.log(q)
    zero = xp.zeros_like(top)
    m_zero = margin(zero)
    m_top = margin(top)
    evaluations = 2
    active = active & (m_zero > 0)
    ok_top = active & (m_top > 0)
    lo = xp.where(ok_top, top, zero)
    m_lo = xp.where(ok_top, m_top, m_zero)
    hi, m_hi = top, m_top
    todo = active & ~ok_top
    same_side = zero
    last_lo = xp.zeros(top.shape, dtype=xp.bool, device=device_of(top))
    floor = top * 2.0**-_MAX_SHRINK
    nudge = (q - 1.0) / 3.0
    for _ in range(_MAX_STEPS):
        if not bool(xp.any(todo)):
            break
        width = hi - lo
        denom = m_lo - m_hi
        est = lo + width * (m_lo / xp.where(denom > 0, denom, 1.0))
        prop = xp.where(last_lo, est * (1.0 + nudge), est * (1.0 - nudge))
        fallback = xp.where(lo > 0, xp.sqrt(lo * hi), hi / 8.0)
        prop = xp.where(same_side >= 2, fallback, prop)
        delta = xp.minimum(xp.maximum(prop, lo + width * 2.0**-20), hi - width * 2.0**-20)
        m = margin(delta)
        evaluations += 1
        ok = m > 0
        move_lo = todo & ok
        move_hi = todo & ~ok
        repeat = (move_lo & last_lo) | (move_hi & ~last_lo)
        same_side = xp.where(todo, xp.where(repeat, same_side + 1.0, 0.0), same_side)
        lo = xp.where(move_lo, delta, lo)
        m_lo = xp.where(move_lo, m, m_lo)
        hi = xp.where(move_hi, delta, hi)
        m_hi = xp.where(move_hi, m, m_hi)
        last_lo = xp.where(todo, ok, last_lo)
        done = ((lo > 0) & (hi <= lo * q)) | ((lo == 0) & (hi <= floor))
        todo = todo & ~done
    # snap to the grid top·q^(−k): g = the largest grid point ≤ lo (certified, by monotonicity) and
    # c = the next one up; c is certified iff it lies below hi and passes.
    inner = (lo > 0) & ~ok_top
    safe_lo = xp.where(inner, lo, top)
    k = xp.ceil(xp.log(top / safe_lo) / log_q)
    g = top * xp.exp(-k * log_q)
    k = xp.where(g > safe_lo, k + 1.0, k)  # guard against rounding in the logarithm
    g = top * xp.exp(-k * log_q)
    c = top * xp.exp(-(k - 1.0) * log_q)
    need = inner & (c > safe_lo) & (c < hi)
    result = xp.where(inner, g, lo)
    if bool(xp.any(need)):
        ok_c = margin(xp.where(need, c, safe_lo)) > 0
        evaluations += 1
        result = xp.where(need & ok_c, c, result)
    return result, ok_top, evaluations


def radius_setup(x_test, xp, norm, max_radius, caller):
    n = x_test.shape[0]
    if max_radius is None:
        if norm == "linf":
            top = (xp.max(xp.abs(x_test), axis=1) if x_test.shape[1]
                   else xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test)))
        else:
            top = xp.sqrt(xp.sum(x_test * x_test, axis=1))
        top = xp.where(top > 0, top, 1.0)
    else:
        r = check_real(max_radius, "max_radius", caller=caller, low=0.0, closed="right")
        top = xp.full((n,), r, dtype=x_test.dtype, device=device_of(x_test))
    return top


def info(g0, sign, at_margin, misclassified, capped, steps, shrunk, unproven):
    return {"g": g0, "sign": sign, "at_margin": at_margin, "misclassified": misclassified, "capped": capped,
            "steps": steps, "verified": True, "shrunk": shrunk, "unproven": unproven}


def finish(g0, y, xp, caller, n):
    sign = xp.sign(g0)
    at_margin = sign == 0
    if y is not None:
        y = on_device_of(check_labels(y, "y", caller=caller, xp=xp), y, g0, xp)
        if y.shape[0] != n:
            raise InvalidParameterError(f"The 'y' parameter of {caller} must have shape ({n},); got {tuple(y.shape)}.")
        misclassified = (~at_margin) & (xp.astype(y, g0.dtype) != sign)
    else:
        misclassified = xp.zeros((n,), dtype=xp.bool, device=device_of(g0))
    return sign, at_margin, misclassified


def certified_radius(
    alpha,
    x_train,
    x_test,
    *,
    method="tight",
    norm="linf",
    domain=None,
    exact_domain=False,
    y=None,
    tol=1e-4,
    max_radius=None,
    return_info=False,
):
    r"""Certified radius of the NTK machine g(x) = Σᵢ αᵢ Θ(x, xᵢ) (seed 000 §4.2, problem (10)).

    For each test point x₀ with σ = sign g(x₀): the largest δ (to relative
    tolerance ``tol``) such that the bound of :func:`output_bounds` proves
    σ·g(x) > 0 on the whole ball, i.e. the label of the infinitely wide
    two-layer ReLU net (equivalent to the kernel machine) cannot change.

    Parameters
    ----------
    alpha : array (n_train,), finite
        Coefficients of any kernel machine (SVM, KRR, …).
    x_train : array (n_train, d)
    x_test : array (n_test, d)
    method : {"tight", "paper"}
        See :func:`ntk_interval`.  The tight radius is ≥ the paper's on every
        point.
    norm : {"linf", "l2"}
    domain : (lo, hi) or None
        Box constraint, e.g. (0, 1) for pixels (``"tight"`` only).
    exact_domain : bool
        See :func:`ntk_interval`; True costs two matrix products per bisection
        step instead of O(n_test·n_train).
    y : array (n_test,) of ±1, optional
        Labels; points with sign g(x₀) ≠ y are *misclassified*: radius 0, not
        certified, and reported in ``info["misclassified"]``.
    tol : float in [4·eps, 1]
        Relative tolerance: the result r is the largest certified point of the
        grid max_radius·(1 + tol)^(−k/2); r is certified and r·(1 + tol) is not
        (unless r is the bracket top).  eps is that of the computing dtype
        (x_test's after promotion); a smaller tol cannot be resolved and raises
        :class:`InvalidParameterError` naming ``tol``.
    max_radius : float or None
        Bracket top.  Default: the distance from x₀ to the origin in the ball's
        norm (‖x₀‖∞ or ‖x₀‖₂), which is never certified since g(0) = 0 (unless
        a ``domain`` excludes 0).  Points certified at the top get radius = top
        and ``info["capped"]``.
    return_info : bool
        Also return a dict with ``"g"`` (g(x₀)), ``"sign"``, ``"at_margin"``
        (g(x₀) = 0: radius 0), ``"misclassified"``, ``"capped"`` and
        ``"steps"`` (number of bound evaluations for all points together),
        ``"verified"`` (True: every radius returned is proven, see Notes),
        ``"shrunk"`` (the search's radius failed the proof and was reduced) and
        ``"unproven"`` (shrunk to 0: no radius ≥ top·2⁻⁶⁰ could be proven).

    Returns
    -------
    radii : array (n_test,)
        0 where g(x₀) = 0, where the point is misclassified, or where not even
        the smallest radius tried (top·2⁻⁶⁰) is certified or proven.
    info : dict, only if ``return_info``.

    Notes
    -----
    One matrix product of test and training points, then every bisection step
    costs O(n_test·n_train) elementwise work for all points at once (divide
    the top by 8 until certified, then a safeguarded regula falsi on the
    margin bound: typically 6–8 steps; the module docstring has the details).

    Proven in floating point: each radius r is re-checked at the end by
    evaluating the lower bound of sign·g over the ball of radius r again in
    outward-rounded interval arithmetic (:mod:`ntkref.intervals`: IEEE-754
    round-to-nearest for + − × ÷ √ and gradual underflow, atan2 within
    ``LIBRARY_ULPS`` = 4 representable numbers, no TF32/Strassen matrix
    products), from the float inputs exactly; a radius that is not proven
    is shrunk by (1 + tol)^(−1), (1 + tol)^(−2), (1 + tol)^(−4), … until it
    is (or set to 0), never reported unproven.  So σ·g(x) > 0 on the whole
    ball is a theorem about the given floats under those assumptions.  The
    ``"paper"`` radii are proven with the tight bound (never below the
    paper's).  Cost: about one more bound evaluation (8 Φ evaluations per
    pair in interval arithmetic) on top of the search's 6–8.

    Scale-free: the search runs on x₀, xᵢ, α normalised by powers of two
    (module docstring, "Scale"), so radius(2ᵏx₀) = 2ᵏ·radius(x₀) bit for bit,
    scaling ``x_train`` or ``alpha`` leaves the radii unchanged, and tiny or
    huge inputs are certified as soundly as ordinary ones.

    Where it runs: everything is batched array work in the inputs' namespace
    and on their device.  The host reads (synchronisations on a GPU) are a
    few for validation, one per bisection step (whether any point is still
    open) and one for the final grid snap — a number independent of the
    number of test points; no data is copied to the host.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import certify, kernels, machines
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 5))
    >>> alpha = machines.fit(kernels.two_layer_relu_ntk(X), np.sign(X[:, 0]), "hinge", 0.01)   # an NTK SVM
    >>> x0 = rng.standard_normal((3, 5))
    >>> r = certify.certified_radius(alpha, X, x0)                  # tol = 1e-4
    >>> sign = np.sign(kernels.two_layer_relu_ntk(x0, X) @ alpha)
    >>> def margin(delta):                                          # the bound of sign·g on the balls
    ...     lo, hi = certify.output_bounds(alpha, X, x0, delta)
    ...     return np.where(sign > 0, lo, -hi)
    >>> bool(np.all(margin(r) > 0)), bool(np.all(margin(r * (1 + 1e-4)) <= 0))   # r certified, r·(1 + tol) not
    (True, True)
    """
    engine = dispatch.certified_radius.lookup(x_test)
    if engine is not None:  # a Dask x_test: lazy radii, one task per row chunk (ntkref/_engines/dask)
        return engine(alpha, x_train, x_test, y=y, method=method, norm=norm, domain=domain,
                      exact_domain=exact_domain, tol=tol, max_radius=max_radius, return_info=return_info)
    caller = "certified_radius"
    xp, x_train, x_test = check_points(x_train, x_test, caller)
    alpha = check_alpha(alpha, x_train, xp, caller)
    alpha, x_train = split_alpha(alpha, x_train, xp)
    xp, x_train, x_test, geo = prepare(x_test, x_train, caller, norm, method, domain, exact_domain)
    n = x_test.shape[0]
    tol = check_tol(tol, x_test.dtype, xp, caller)
    alpha_in = alpha
    # scale-free: the whole search runs in the geometry's units (x₀/s₀, xᵢ/s_t, α/2^ka, radii δ/s₀); only the
    # sign of the margin matters, and it is that of the bound in the original units (a positive factor), so
    # radius(2ᵏx₀, 2ʲxᵢ, 2ᵐα) = 2ᵏ·radius(x₀, xᵢ, α) exactly, and nothing underflows or overflows on the way
    ka = pow2_exponent(alpha, xp)
    alpha = normalized(alpha, ka)
    if max_radius is None:
        top = radius_setup(geo.x_test, xp, norm, None, caller)
    else:  # in the geometry's units (beyond the dtype's range: its largest finite value)
        r = check_real(max_radius, "max_radius", caller=caller, low=0.0, closed="right") / geo.s0
        top = radius_setup(geo.x_test, xp, norm, min(r, float(xp.finfo(x_test.dtype).max)), caller)
    if alpha.shape[0]:
        g0_n = xp.sum(alpha[None, :] * geo.theta_center(), axis=1)
    else:
        g0_n = xp.zeros((n,), dtype=x_test.dtype, device=device_of(x_test))
    sign, at_margin, misclassified = finish(g0_n, y, xp, caller, n)
    active = (~at_margin) & (~misclassified)

    def margin(delta):  # lower bound of σ·g over the balls (geometry units); certified iff > 0
        return geo.signed_lower(delta, sign, alpha)

    dev = device_of(x_test)
    shrunk = unproven = xp.zeros((n,), dtype=xp.bool, device=dev)
    if alpha.shape[0] == 0 or n == 0:
        radii, capped = xp.zeros((n,), dtype=x_test.dtype, device=dev), xp.zeros((n,), dtype=xp.bool, device=dev)
        steps = 0
    else:
        radii, capped, steps = bisect(margin, top, active, tol, xp)
    radii = xp.maximum(times_pow2(radii, geo.k0, xp, -1), 0.0)  # certified: rounded down if it underflows
    if alpha.shape[0] and n:
        # the proof: σ·g's bound re-evaluated in outward-rounded interval arithmetic at the returned radii
        # (_verify docstring); a radius it does not prove is shrunk, never reported
        dom = check_domain(domain, x_test, xp, caller)
        proven = ProvenNTKMargin(geo, x_test, x_train, alpha_in, ka, dom, exact_domain)
        floor = times_pow2(top * 2.0**-60, geo.k0, xp, 1)
        radii, shrunk, unproven = verify_and_shrink(radii, proven.lower, sign, floor, tol, xp)
        capped = capped & ~shrunk
    if return_info:
        g0 = times_pow2(g0_n, geo.k0 + geo.kt + ka, xp)
        return radii, info(g0, sign, at_margin, misclassified, capped, steps, shrunk, unproven)
    return radii
