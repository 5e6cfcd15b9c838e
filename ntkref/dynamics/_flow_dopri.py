r"""Adaptive Dormand–Prince 5(4) for the gradient flow of any loss (logistic, squared hinge, …).

The ``"dopri5"`` method of :func:`ntkref.dynamics.gradient_flow` (:mod:`ntkref.dynamics._flow`): integrates
seed 000 eq. (8) in kernel form, dα/dt = −λα − c·l′(e^{−λt}g₀ + Kα, y), with the Butcher tableau
``_DP_*`` (first same as last), error control ‖err/(atol + rtol·|α|)‖_∞ ≤ 1 and steps that land exactly
on the requested times.  Step floors are relative to the time scale 1/(λ + c‖K‖_∞), so
flow(sK, λ, t) = flow(K, λ/s, s·t) takes the same steps for any s.  The sum of the accepted steps'
max-norm local error estimates is reported as ``error_estimate``.
"""
from __future__ import annotations

import math

from ._trajectory import assemble, host, lprime


_DP_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_DP_E = tuple(b5 - b4 for b5, b4 in zip(_DP_B5, _DP_B4))


def flow_dopri(K, y, loss, lam, c, g0, a0, K_test, g0_test, xp, times, rtol, atol, max_steps):
    def rhs(t, a):
        g = math.exp(-lam * t) * g0 + K @ a
        return -lam * a - c * lprime(loss, g, y, xp)

    a = a0
    t = 0.0
    k1 = rhs(t, a)
    # initial step (Hairer–Nørsett–Wanner II.4 heuristic, simplified)
    d0 = float(xp.max(xp.abs(a))) + atol
    d1 = float(xp.max(xp.abs(k1))) + atol
    # time scale 1/(λ + c‖K‖_∞) (1 for K = 0, λ = 0): the floors of h are relative to it, so that
    # flow(sK, λ, t) = flow(K, λ/s, s·t) takes the same steps for any s
    rate = lam + c * float(xp.max(xp.sum(xp.abs(K), axis=1)))
    tscale = max(1.0 / rate, 1e-300) if rate > 0 else 1.0
    h = 0.01 * d0 / d1 if d1 > 1e-300 else 1e-3 * tscale
    h = max(h, 1e-8 * tscale)
    out = []
    err_sum = 0.0
    n_steps = 0
    ti = 0
    while ti < len(times) and times[ti] <= t:
        out.append(a)
        ti += 1
    while ti < len(times):
        t_goal = times[ti]
        h = min(h, t_goal - t)
        ks = [k1]
        for s in range(1, 7):
            inc = ks[0] * _DP_A[s][0]
            for j in range(1, s):
                if _DP_A[s][j] != 0.0:
                    inc = inc + ks[j] * _DP_A[s][j]
            ks.append(rhs(t + _DP_C[s] * h, a + h * inc))
        a_new = a + h * sum((ks[j] * _DP_B5[j] for j in range(7) if _DP_B5[j] != 0.0), xp.zeros_like(a))
        err = h * sum((ks[j] * _DP_E[j] for j in range(7)), xp.zeros_like(a))
        sc = atol + rtol * xp.maximum(xp.abs(a), xp.abs(a_new))
        # one host read per step: the scaled error (step control) and the max error together
        # (atol = 0: a coordinate at 0 with no error contributes 0, not 0/0; with an error, inf: the step shrinks)
        pos = sc > 0
        scaled = xp.where(err == 0, xp.zeros_like(err),
                          xp.where(pos, xp.abs(err) / xp.where(pos, sc, xp.ones_like(sc)), xp.full_like(sc, math.inf)))
        en, err_max = host(xp.stack([xp.max(scaled), xp.max(xp.abs(err))]))
        if en <= 1.0:
            err_sum += err_max
            t = t + h if t + h < t_goal else t_goal
            a = a_new
            k1 = ks[6]  # FSAL
            n_steps += 1
            while ti < len(times) and times[ti] <= t:
                out.append(a)
                ti += 1
            fac = 5.0 if en == 0 else min(5.0, 0.9 * en ** (-0.2))
            h = h * fac
        else:
            h = h * max(0.2, 0.9 * en ** (-0.2))
        if n_steps > max_steps or h < 1e-14 * max(tscale, t):
            raise RuntimeError(f"gradient_flow (dopri5): step size underflow or max_steps exceeded at t={t}.")
    return assemble(xp, times, out, lam, K, g0, K_test, g0_test, "dopri5", n_events=n_steps, error_estimate=err_sum)
