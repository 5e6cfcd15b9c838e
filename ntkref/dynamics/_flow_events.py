r"""The exact gradient flow for a piecewise-constant l′ (hinge, ε-insensitive): events and sliding.

Between events the effective derivative vector p is constant, so α(t₀ + τ) = e^{−λτ}α(t₀) − p φ(λ, τ) and
each gᵢ moves monotonically towards its rest point −(Kp)ᵢ/λ; the time it reaches a kink of its loss
(yᵢgᵢ = 1; |gᵢ − yᵢ| = ε) is closed form.  At each event the derivatives of the points on a kink are the
minimal-norm (Filippov) selection (seed 000's flow of the convex L along its minimal-norm subgradient, see
the package docstring): the box QP min ½pᵀK_MM p + (λg_M + K_MN p_N)ᵀp over the subdifferential,
solved by Murty's least-index principal pivoting — :func:`_solve_box_lcp`.  Points with an interior value
slide along the kink.  :func:`flow_events` is the ``"events"`` method of
:func:`ntkref.dynamics.gradient_flow` (:mod:`ntkref.dynamics._flow`), which calls it on the host.
"""
from __future__ import annotations

import math

from .._lib.backend import device_of
from ._trajectory import assemble, host, lprime, phi


def _kinks(loss, y, c, xp):
    """Kink positions in z and the l′ values (scaled by c) on their left and right.

    Returns (kinks, left, right) each of shape (n, 2); unused slots have kink = +inf.
    """
    inf = xp.full(y.shape, math.inf, dtype=y.dtype, device=device_of(y))
    if loss.name == "hinge":
        # kink at z = y (y z = 1); for y = +1: l′ = −1 left, 0 right; y = −1: 0 left, +1 right
        left = xp.where(y > 0, -xp.ones_like(y), xp.zeros_like(y)) * c
        right = xp.where(y > 0, xp.zeros_like(y), xp.ones_like(y)) * c
        return (xp.stack([y, inf], axis=1), xp.stack([left, left], axis=1), xp.stack([right, right], axis=1))
    eps = loss.epsilon
    one = xp.ones_like(y) * c
    zero = xp.zeros_like(y)
    if eps == 0:
        return (xp.stack([y, inf], axis=1), xp.stack([-one, -one], axis=1), xp.stack([one, one], axis=1))
    return (xp.stack([y - eps, y + eps], axis=1), xp.stack([-one, zero], axis=1), xp.stack([zero, one], axis=1))


def _region_derivative(loss, g, y, c, xp):
    """l′ away from kinks (scaled by c)."""
    return c * lprime(loss, g, y, xp)


def _solve_box_lcp(Kmm, q, lo, hi, state, xp, max_iter):
    """Minimal-norm selection on the kink set: p ∈ [lo, hi] with v = −(q + Kmm p) and
    p = lo ⇒ v ≤ 0, p = hi ⇒ v ≥ 0, lo < p < hi ⇒ v = 0 (KKT of min ½pᵀKp + qᵀp on the box).

    Murty's least-index principal pivoting (finite for positive definite Kmm).  ``state`` is a
    host list of 'L', 'U', 'F' (initial guess).  Returns p (xp array), state, velocities v.
    """
    m = len(state)
    dev = device_of(q)
    lo_h = host(lo)  # host copies for the pivoting decisions (bookkeeping)
    hi_h = host(hi)
    pscale = max(max(abs(a) for a in lo_h), max(abs(a) for a in hi_h))
    kscale = float(xp.max(xp.abs(Kmm)))
    scale = float(xp.max(xp.abs(q))) + kscale * pscale
    tol = 1e3 * float(xp.finfo(q.dtype).eps) * max(scale, 1e-300) * max(m, 1)  # velocities v (units of q)
    # p has the units of l′ (not of q = λg + Kp): its tolerance is tol / max|Kmm|, scale-free under K → sK
    tol_p = tol / kscale if kscale > 0 else 1e3 * float(xp.finfo(q.dtype).eps) * max(pscale, 1e-300) * max(m, 1)
    for _ in range(max_iter):
        fixed_vals = [lo_h[i] if s == "L" else (hi_h[i] if s == "U" else 0.0) for i, s in enumerate(state)]
        p = xp.asarray(fixed_vals, dtype=q.dtype, device=dev)
        free = [i for i, s in enumerate(state) if s == "F"]
        if free:
            fi = xp.asarray(free, device=dev)
            Kff = xp.take(xp.take(Kmm, fi, axis=0), fi, axis=1)
            rhs = -xp.take(q + Kmm @ p, fi)
            try:
                pf = xp.linalg.solve(Kff, rhs[:, None])[:, 0]
                ok = bool(xp.all(xp.isfinite(pf)))
            except Exception:  # exactly singular (duplicated points on the kink)
                ok = False
            if not ok:
                # consistent singular system: the minimum-norm solution splits the weight equally
                pf = xp.linalg.pinv(Kff) @ rhs
            # scatter pf into p without fancy setitem: build via a selection matrix
            sel = xp.take(xp.eye(m, dtype=q.dtype, device=dev), fi, axis=0)  # (|F|, m)
            p = p + pf @ sel
        v = -(q + Kmm @ p)
        ph = host(p)
        vh = host(v)
        bad = None
        for i, s in enumerate(state):
            if s == "F" and ph[i] < lo_h[i] - tol_p:
                bad = (i, "L")
            elif s == "F" and ph[i] > hi_h[i] + tol_p:
                bad = (i, "U")
            elif s == "L" and vh[i] > tol:
                bad = (i, "F")
            elif s == "U" and vh[i] < -tol:
                bad = (i, "F")
            if bad is not None:
                break
        if bad is None:
            # clip rounding-level excursions of free values into the box
            p = xp.minimum(xp.maximum(p, lo), hi)
            return p, state, v, tol
        state = list(state)
        state[bad[0]] = bad[1]
    raise RuntimeError(
        "gradient_flow: the sliding-mode (box LCP) pivoting did not terminate; the kernel submatrix "
        "of the points on a kink is probably singular (duplicated points)."
    )


def flow_events(K, y, loss, lam, c, g0, a0, K_test, g0_test, xp, times, max_events):
    n = K.shape[0]
    dtype = K.dtype
    dev = device_of(K)
    kinks, left, right = _kinks(loss, y, c, xp)
    eps = float(xp.finfo(dtype).eps)
    # host bookkeeping: which points sit on which kink (index 0/1), or None
    on_kink = [None] * n
    # host copy of the kink positions (n × 2 floats) for the per-event decisions
    kh = host(kinks)
    alpha = a0
    g = g0 + K @ a0
    t = 0.0
    out_alpha, out_g = [], []
    seg_t, seg_p, event_times = [], [], []
    ti = 0
    n_events = 0
    gscale = max(1.0, float(xp.max(xp.abs(g))), float(xp.max(xp.abs(y))))
    # points that start on a kink (e.g. g0 = y for the hinge) are treated like event points
    gh = host(g)
    for i in range(n):
        for k in (0, 1):
            if on_kink[i] is None and abs(gh[i] - kh[i][k]) <= 8 * eps * gscale:
                on_kink[i] = k
    g = xp.where(xp.asarray([ok is not None for ok in on_kink], device=dev),
                 xp.asarray([kh[i][ok] if ok is not None else 0.0 for i, ok in enumerate(on_kink)], dtype=dtype, device=dev), g)
    # time scale of the dynamics: |dgᵢ/dt| ≤ λ|gᵢ| + c‖K‖_∞ (|l′| ≤ 1), so points whose kink times differ by
    # less than 64·eps·tscale are within 64·eps·max(|gᵢ|, 1) of their kinks together (scale-covariant:
    # flow(sK, λ, t) = flow(K, λ/s, s·t) snaps the same points)
    rate = lam + c * float(xp.max(xp.sum(xp.abs(K), axis=1)))
    tscale = 1.0 / rate if rate > 0 else 0.0
    state_cache = {}
    leaving = {}
    while True:
        # ---- resolve the configuration at time t: derivatives p of all points ------------------
        p_region = _region_derivative(loss, g, y, c, xp)
        if leaving:
            # a point that just left a kink still sits on it (to the last bit) at an immediate
            # next event; l′ there is the one-sided value it left with, not the kink convention
            gh = host(g)
            for i in list(leaving):
                if gh[i] != kh[i][leaving[i][0]]:
                    del leaving[i]
            if leaving:
                lm = xp.asarray([i in leaving for i in range(n)], device=dev)
                lv = xp.asarray([leaving[i][1] if i in leaving else 0.0 for i in range(n)], dtype=dtype, device=dev)
                p_region = xp.where(lm, lv, p_region)
        M = [i for i in range(n) if on_kink[i] is not None]
        if M:
            mi = xp.asarray(M, device=dev)
            ks = xp.asarray([on_kink[i] for i in M], device=dev)
            # left/right values at each point's kink (gather along axis 1 via a one-hot mask)
            onehot = xp.astype(xp.stack([ks == 0, ks == 1], axis=1), dtype)
            lo = xp.sum(xp.take(left, mi, axis=0) * onehot, axis=1)
            hi = xp.sum(xp.take(right, mi, axis=0) * onehot, axis=1)
            selM = xp.take(xp.eye(n, dtype=dtype, device=dev), mi, axis=0)  # (|M|, n) selection
            notM = 1 - xp.sum(selM, axis=0)
            p_N = p_region * notM
            Kmm = xp.take(xp.take(K, mi, axis=0), mi, axis=1)
            gM = xp.take(g, mi)
            q = lam * gM + xp.take(K @ p_N, mi)
            init = [state_cache.get(i, "F") for i in M]
            pM, st, vM, tolv = _solve_box_lcp(Kmm, q, lo, hi, init, xp, max_iter=50 * (len(M) + 1) ** 2)
            p = p_N + pM @ selM
            # points on a kink at a bound with a strictly signed velocity leave it; the rest slide
            vh = host(vM)
            for j, i in enumerate(M):
                if (st[j] == "L" and vh[j] < -tolv) or (st[j] == "U" and vh[j] > tolv):
                    leaving[i] = (on_kink[i], float(pM[j]))
                    on_kink[i] = None
                    state_cache.pop(i, None)
                else:
                    state_cache[i] = st[j]
        else:
            p = p_region
        sliding = [i for i in range(n) if on_kink[i] is not None]
        Kp = K @ p
        seg_t.append(t)
        seg_p.append(p)
        # ---- next event: first time a moving point reaches a kink ------------------------------
        if lam > 0:
            rest = -Kp / lam  # each g_i moves monotonically from g_i towards rest_i
            up = rest > g
            # nearest kink strictly beyond g in the direction of motion
            k_up = xp.where(kinks > g[:, None], kinks, xp.full_like(kinks, math.inf))
            k_up = xp.min(k_up, axis=1)
            k_dn = xp.where(kinks < g[:, None], kinks, xp.full_like(kinks, -math.inf))
            k_dn = xp.max(k_dn, axis=1)
            target = xp.where(up, k_up, k_dn)
            reach = xp.where(up, target < rest, target > rest) & xp.isfinite(target)
            denom = target - rest
            safe = xp.where(reach, denom, xp.ones_like(denom))
            ratio = xp.where(reach, (g - target) / safe, xp.zeros_like(g))  # > 0 where reach
            tau = xp.where(reach, xp.log1p(ratio) / lam, xp.full_like(g, math.inf))
        else:
            vel = -Kp
            up = vel > 0
            k_up = xp.min(xp.where(kinks > g[:, None], kinks, xp.full_like(kinks, math.inf)), axis=1)
            k_dn = xp.max(xp.where(kinks < g[:, None], kinks, xp.full_like(kinks, -math.inf)), axis=1)
            target = xp.where(up, k_up, k_dn)
            reach = (vel != 0) & xp.isfinite(target)
            safe = xp.where(reach, vel, xp.ones_like(vel))
            tau = xp.where(reach, (target - g) / safe, xp.full_like(g, math.inf))
        if sliding:
            sl = xp.asarray(sliding, device=dev)
            mask = xp.sum(xp.take(xp.eye(n, dtype=dtype, device=dev), sl, axis=0), axis=0) > 0
            tau = xp.where(mask, xp.full_like(tau, math.inf), tau)
        tau_min = float(xp.min(tau))
        t_next = t + tau_min
        # ---- record requested times inside [t, t_next] -----------------------------------------
        while ti < len(times) and times[ti] <= t_next:
            dt = times[ti] - t
            e = math.exp(-lam * dt)
            ph = phi(xp.asarray([lam], dtype=dtype, device=dev), dt, xp)[0]
            out_alpha.append(e * alpha - ph * p)
            out_g.append(e * g - ph * Kp)
            ti += 1
        if ti >= len(times):
            break
        # ---- advance to the event ---------------------------------------------------------------
        n_events += 1
        if n_events > max_events:
            raise RuntimeError(f"gradient_flow: more than max_events={max_events} events before t={times[-1]}.")
        e = math.exp(-lam * tau_min)
        ph = float(phi(xp.asarray([lam], dtype=dtype, device=dev), tau_min, xp)[0])
        alpha = e * alpha - ph * p
        g = e * g - ph * Kp
        t = t_next
        event_times.append(t)
        # snap the point(s) that reached a kink (ties within rounding of the time) onto it
        hit = tau <= tau_min * (1 + 64 * eps) + 64 * eps * tscale
        hit = hit & xp.isfinite(tau)
        g = xp.where(hit, target, g)
        hh = host(hit)
        tgt = host(target)
        for i in range(n):
            if hh[i]:
                on_kink[i] = 0 if tgt[i] == kh[i][0] else 1
                state_cache.pop(i, None)
                leaving.pop(i, None)
        # points on a kink (sliding or just arrived) sit exactly on it: their velocity is zero to
        # rounding, snapping removes the drift
        on = xp.asarray([ok is not None for ok in on_kink], device=dev)
        kval = xp.asarray([kh[i][ok] if ok is not None else 0.0 for i, ok in enumerate(on_kink)], dtype=dtype, device=dev)
        g = xp.where(on, kval, g)
    traj = assemble(xp, times, out_alpha, lam, K, g0, K_test, g0_test, "events", g_train=out_g,
                     n_events=n_events, event_times=tuple(event_times),
                     segment_times=xp.asarray(seg_t, dtype=dtype, device=dev), segment_derivatives=xp.stack(seg_p))
    return traj
