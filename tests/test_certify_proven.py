"""Every certified radius survives a ball-arithmetic re-check (issue 25: "Certificates").

An independent route: python-flint's ``arb`` (Arb ball arithmetic: every operation returns a ball that contains
the exact result), taking the float inputs exactly (``arb(float)``), re-evaluates the inequality each radius
rests on at the radius returned — without ntkref.intervals, without the float search:

- NTK (seed 000 Thm 4.2, eqs. (63)–(66)): the *exact* ranges of ⟨x, xᵢ⟩ and ‖x‖ over the ball (∩ box domain),
  the polygon P = [pᴸ, pᵁ] × [Rᴸ, Rᵁ] ∩ {|p| ≤ R}, min/max of the convex Φ = 2πd·Θ over P on its four edges
  (u* = argmin h enclosed by a sign change of h′ checked in arb; the p = const minimiser at R = √2|p|), and
  Σ |αᵢ| · (min Φ or −max Φ) > 0 decided in arb.  ``method="paper"`` radii are re-checked with this exact
  bound, which dominates the paper's (the certificate's claim, σ·g > 0 on the ball, is the same).
- IBP (App. H.2, eq. (67)): exact interval propagation through the layers in arb, f − f₀ with ``params0``.

Problems: the hypothesis strategy of tests/test_certify.py (zero rows, duplicates, antiparallel points, u at
u* and −1/√2, scales 1e±2), the held-out style two-blob KRR problem, adversarial ones (test points moved
onto the decision boundary so that margins are at rounding level, inputs scaled by 2^±400 and 1e±150), and
small nets.  Plus the constructed case where the round-to-nearest search radius is not provable and the
verification shrinks it.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import certify
from ntkref.certify import _ntk_interval, _radius

from .test_certify import _krr_alpha, _two_class_data, init_params, problems, theta_np

flint = pytest.importorskip("flint")
arb = flint.arb

PREC = 200  # arb is rigorous at any precision; 200 bits keeps the balls tight


@pytest.fixture(autouse=True)
def _arb_precision():
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    yield
    flint.ctx.prec = old


def A(v):
    return arb(float(v))  # exact: every float is an arb point


def down(x):
    """An exact arb point ≤ every element of the ball x."""
    return (x - 3 * x.rad()).mid()


def up(x):
    return (x + 3 * x.rad()).mid()


def pmax(a, b):  # maximum of exact points
    return a if not (b > a) else b


def pmin(a, b):
    return a if not (b < a) else b


# ---------------------------------------------------------------------------
# Φ and its extremes over the polygon, in arb
# ---------------------------------------------------------------------------
def h_prime(u):
    return 2 * (arb.pi() - u.acos()) + u / (1 - u * u).sqrt()


def _ustar():
    """A ball around u* = argmin h, proven by a sign change of h′ (increasing: h is convex)."""
    lo, hi = A(certify.H_ARGMIN) - arb(2.0) ** -45, A(certify.H_ARGMIN) + arb(2.0) ** -45
    assert h_prime(lo) < 0 and h_prime(hi) > 0
    return lo, hi


def phi(p, R):
    """Φ(p, R) = 2p·atan2(√((R−p)(R+p)), −p) + √((R−p)(R+p)) for arb p, R with |p| ≤ R (a ball)."""
    q2 = (R - p) * (R + p)
    q2 = q2 if not (q2 < 0) else arb(0)
    q = arb(0) if q2 == 0 else q2.sqrt() if q2 > 0 else arb(0).union(q2.upper().sqrt())
    if p == 0 and q == 0:
        return arb(0)
    return 2 * p * arb.atan2(q, -p) + q


def phi_extremes(pL, pU, RL, RU, ustar):
    """(lower bound of min_P Φ, upper bound of max_P Φ) for exact points pL ≤ pU, 0 ≤ RL ≤ RU."""
    u_lo, u_hi = ustar
    lows, highs = [], []
    for Rc in (RL, RU):  # R = Rc, p ∈ [a, b]
        a, b = pmax(pL, -Rc), pmin(pU, Rc)
        if b < a:
            continue
        if b < down(u_lo * Rc) or b == down(u_lo * Rc):
            lows.append(down(phi(b, Rc)))
        elif a > up(u_hi * Rc):
            lows.append(down(phi(a, Rc)))
        else:
            u = u_lo.union(u_hi)  # h at the minimiser, enclosed
            lows.append(down(Rc * (2 * u * (arb.pi() - u.acos()) + (1 - u * u).sqrt())))
        highs += [up(phi(a, Rc)), up(phi(b, Rc))]
    for Pc in (pL, pU):  # p = Pc, R ∈ [max(RL, |Pc|), RU]
        lo = pmax(RL, abs(Pc))
        if RU < lo:
            continue
        t = arb(2).sqrt() * abs(Pc)
        if RU < down(t) or RU == down(t):
            lows.append(down(phi(Pc, RU)))
        elif lo > up(t):
            lows.append(down(phi(Pc, lo)))
        else:
            lows.append(down(phi(Pc, t)))
        highs += [up(phi(Pc, lo)), up(phi(Pc, RU))]
    assert lows, "empty polygon"
    low = lows[0]
    for v in lows[1:]:
        low = pmin(low, v)
    high = highs[0]
    for v in highs[1:]:
        high = pmax(high, v)
    return low, high


def ntk_ranges(x0, xi, r, norm, domain):
    """Exact ranges (balls) of ⟨x, xᵢ⟩ and ‖x‖ over {‖x − x₀‖ ≤ r} ∩ domain, from the float inputs."""
    d = len(x0)
    X0, XI, R = [A(v) for v in x0], [A(v) for v in xi], A(r)
    p0 = sum((X0[j] * XI[j] for j in range(d)), arb(0))
    n1 = sum((abs(v) for v in XI), arb(0))
    n2 = sum((v * v for v in XI), arb(0)).sqrt()
    nx = sum((v * v for v in X0), arb(0)).sqrt()
    if domain is None and norm == "linf":
        pL, pU = p0 - R * n1, p0 + R * n1
        rL = sum((pmax(abs(v) - R, arb(0)) ** 2 for v in X0), arb(0)).sqrt()
        rU = sum(((abs(v) + R) ** 2 for v in X0), arb(0)).sqrt()
        return pL, pU, rL, rU
    if norm == "l2":
        pL, pU = p0 - R * n2, p0 + R * n2
        rL, rU = pmax(down(nx - R), arb(0)), nx + R
    if domain is not None:
        lo, hi = A(domain[0]), A(domain[1])
        a = [pmax(v - R, lo) for v in X0]  # exact points (differences of floats at 200 bits)
        b = [pmin(v + R, hi) for v in X0]
        c = [(a[j] + b[j]) / 2 for j in range(d)]
        w = [(b[j] - a[j]) / 2 for j in range(d)]
        cp = sum((c[j] * XI[j] for j in range(d)), arb(0))
        wp = sum((w[j] * abs(XI[j]) for j in range(d)), arb(0))
        dist2 = sum((pmax(pmax(a[j], -b[j]), arb(0)) ** 2 for j in range(d)), arb(0))
        far2 = sum((pmax(a[j] * a[j], b[j] * b[j]) for j in range(d)), arb(0))
        bpL, bpU, brL, brU = cp - wp, cp + wp, dist2.sqrt() if dist2 > 0 else arb(0), far2.sqrt()
        if norm == "l2":
            return pmax(down(pL), down(bpL)), pmin(up(pU), up(bpU)), pmax(down(rL), down(brL)), pmin(up(rU), up(brU))
        return bpL, bpU, brL, brU
    return pL, pU, rL, rU


def arb_ntk_certified(alpha, X, x0, r, sign, norm, domain, ustar):
    """True iff Σᵢ |αᵢ|·(min or −max of cᵢΦ over the ball's polygon) > 0 is proven in arb at radius r."""
    total = arb(0)
    for ai, xi in zip(alpha, X):
        if ai == 0:
            continue
        pL, pU, rL, rU = ntk_ranges(x0, xi, r, norm, domain)
        n2 = sum((A(v) * A(v) for v in xi), arb(0)).sqrt()
        PL, PU = down(pL), up(pU)
        RL, RU = pmax(down(rL * n2), arb(0)), up(rU * n2)
        PL, PU = pmin(PL, RU), pmax(pmax(PU, -RU), pmin(PL, RU))
        low, high = phi_extremes(PL, PU, RL, RU, ustar)
        want_min = sign * np.sign(ai) > 0
        total += abs(A(ai)) * (low if want_min else -high)
    return bool(total > 0)


def check_all_radii(alpha, X, Xt, radii, info, norm, domain, ustar):
    """Every radius > 0 survives the arb re-check; returns how many were checked."""
    sign = np.asarray(info["sign"])
    checked = 0
    for k in range(len(Xt)):
        if radii[k] > 0:
            assert arb_ntk_certified(alpha, X, Xt[k], radii[k], sign[k], norm, domain, ustar), (k, radii[k])
            checked += 1
    return checked


# ---------------------------------------------------------------------------
# NTK certificates
# ---------------------------------------------------------------------------
@given(prob=problems())
@settings(max_examples=40)
def test_ntk_radii_survive_arb_recheck_on_drawn_problems(asxp, tonp, prob):
    ustar = _ustar()
    radii, info = certify.certified_radius(asxp(prob["alpha"]), asxp(prob["X"]), asxp(prob["x0"]),
                                           method=prob["method"], norm=prob["norm"], domain=prob["domain"],
                                           exact_domain=prob["exact_domain"], return_info=True)
    assert info["verified"] is True
    radii, info = tonp(radii), {"sign": tonp(info["sign"])}
    check_all_radii(prob["alpha"], prob["X"], prob["x0"], radii, info, prob["norm"], prob["domain"], ustar)


def _heldout(n_test):
    rng = np.random.default_rng(21)
    X, y = _two_class_data(rng, 60, 10)
    Xt, _ = _two_class_data(rng, n_test, 10)
    return _krr_alpha(X, y, 0.1), X, Xt


@pytest.mark.parametrize("kw", [dict(), dict(method="paper"), dict(norm="l2"), dict(domain=(0.0, 2.0)),
                                dict(domain=(0.0, 2.0), exact_domain=True)], ids=str)
def test_ntk_radii_survive_arb_recheck_on_the_heldout_problem(kw):
    alpha, X, Xt = _heldout(6)
    Xt = np.minimum(Xt, 2.0)
    radii, info = certify.certified_radius(alpha, X, Xt, return_info=True, **kw)
    assert not np.any(info["shrunk"])
    assert check_all_radii(alpha, X, Xt, radii, info, kw.get("norm", "linf"), kw.get("domain"), _ustar()) >= 5


def _onto_the_boundary(alpha, X, a, b, steps=80):
    """A point on the segment a→b where g changes sign, to the last bit (margins at rounding level)."""
    g = lambda x: float(theta_np(x[None, :], X) @ alpha)  # noqa: E731
    ga = g(a)
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if np.sign(g(a + mid * (b - a))) == np.sign(ga):
            lo = mid
        else:
            hi = mid
    return np.stack([a + lo * (b - a), a + hi * (b - a), a + (lo - 1e-9) * (b - a)])


@pytest.mark.parametrize("scale", [1.0, 2.0**400, 2.0**-400, 1e150, 1e-150])
def test_ntk_radii_at_rounding_level_margins_survive_arb_recheck(scale):
    """Test points on the decision boundary to the last bit: g(x₀) is at rounding level, so the radii are 0
    or tiny — where an unverified float bound could claim too much; scaled inputs exercise the normalisation."""
    alpha, X, Xt = _heldout(4)
    cls = np.sign(theta_np(Xt[:, None, :], X[None, :, :]) @ alpha)
    i, j = int(np.argmax(cls)), int(np.argmin(cls))
    pts = _onto_the_boundary(alpha, X, Xt[i], Xt[j])
    ustar = _ustar()
    for kw in (dict(), dict(norm="l2"), dict(method="paper")):
        radii, info = certify.certified_radius(alpha, X * scale, pts * scale, return_info=True, **kw)
        check_all_radii(alpha, X * scale, pts * scale, radii, info, kw.get("norm", "linf"), None, ustar)
        assert radii[2] > 0  # 1e-9 of the segment inside: certified, and proven


def test_round_to_nearest_radius_is_not_provable_and_is_shrunk(monkeypatch):
    """The search with its rounding slack removed (pure round-to-nearest bounds: eps := 0) on points on the
    decision boundary to the last bit returns radii the outward-rounded check cannot prove; the verification
    shrinks them (to 0 where g's sign itself is not provable) and flags them; every radius returned is proven
    by arb."""
    alpha, X, Xt = _heldout(4)
    cls = np.sign(theta_np(Xt[:, None, :], X[None, :, :]) @ alpha)
    pts = _onto_the_boundary(alpha, X, Xt[int(np.argmax(cls))], Xt[int(np.argmin(cls))])[:2]
    # two training points a few ulps apart with opposite α: g(x₀) = Θ(x₀, x₁) − Θ(x₀, x₂) at rounding level
    X2 = np.vstack([X, X[0] * (1 + 4 * np.finfo(float).eps), X[0]])
    a2 = np.concatenate([alpha, [1e3, -1e3]])
    pts = np.vstack([pts, X[0] * 0.5 + X[1] * 0.5])
    init = _ntk_interval._NTKGeometry.__init__

    def rn_init(self, *args, **kwargs):  # the unverified round-to-nearest search: no rounding slack
        init(self, *args, **kwargs)
        self.eps, self.gamma = 1e-300, 0.0

    monkeypatch.setattr(_ntk_interval._NTKGeometry, "__init__", rn_init)
    ustar = _ustar()
    unprovable = 0
    for alpha_, X_ in ((alpha, X), (a2, X2)):
        with monkeypatch.context() as m:  # the RN radii as the search alone would report them
            none = np.zeros(len(pts), dtype=bool)
            m.setattr(_radius, "verify_and_shrink", lambda radii, *args: (radii, none, none))
            rn, rn_info = certify.certified_radius(alpha_, X_, pts, return_info=True)
        radii, info = certify.certified_radius(alpha_, X_, pts, return_info=True)
        for k in range(len(pts)):
            if rn[k] > 0 and not arb_ntk_certified(alpha_, X_, pts[k], rn[k], rn_info["sign"][k], "linf", None,
                                                   ustar):
                unprovable += 1
                assert info["shrunk"][k] and radii[k] < rn[k]  # the new code shrinks it
        assert np.all(info["unproven"] <= info["shrunk"])
        check_all_radii(alpha_, X_, pts, radii, info, "linf", None, ustar)
    assert unprovable >= 1, "no round-to-nearest radius was unprovable: the construction lost its point"


# ---------------------------------------------------------------------------
# IBP certificates
# ---------------------------------------------------------------------------
def arb_ibp_bounds(params, x0, r, norm, domain, W_std=1.0, b_std=0.0):
    """Exact interval propagation in arb: (lower, upper) exact points enclosing f over the ball."""
    d = len(x0)
    lows, highs = [], []
    W, b = params[0]
    m = W.shape[1]
    s = A(W_std) / arb(d).sqrt()
    X0, R = [A(v) for v in x0], A(r)
    box_lo = [X0[j] - R for j in range(d)]
    box_hi = [X0[j] + R for j in range(d)]
    if domain is not None:
        box_lo = [pmax(v, A(domain[0])) for v in box_lo]
        box_hi = [pmin(v, A(domain[1])) for v in box_hi]
    for k in range(m):
        bias = A(b_std) * A(b[k]) if b is not None else arb(0)
        lo_k, hi_k = None, None
        if norm == "linf" or domain is not None:
            lo_s = sum((pmin(A(W[j, k]) * box_lo[j], A(W[j, k]) * box_hi[j]) for j in range(d)), arb(0))
            hi_s = sum((pmax(A(W[j, k]) * box_lo[j], A(W[j, k]) * box_hi[j]) for j in range(d)), arb(0))
            lo_k, hi_k = down(s * lo_s + bias), up(s * hi_s + bias)
        if norm == "l2":
            c = sum((X0[j] * A(W[j, k]) for j in range(d)), arb(0))
            e = R * sum((A(W[j, k]) ** 2 for j in range(d)), arb(0)).sqrt()
            l2_lo, l2_hi = down(s * (c - e) + bias), up(s * (c + e) + bias)
            lo_k = l2_lo if lo_k is None else pmax(lo_k, l2_lo)
            hi_k = l2_hi if hi_k is None else pmin(hi_k, l2_hi)
        lows.append(lo_k)
        highs.append(hi_k)
    for W, b in params[1:]:
        fan_in, m = W.shape
        s = A(W_std) / arb(fan_in).sqrt()
        hl = [pmax(v, arb(0)) for v in lows]
        hh = [pmax(v, arb(0)) for v in highs]
        lows, highs = [], []
        for k in range(m):
            bias = A(b_std) * A(b[k]) if b is not None else arb(0)
            lo_s = sum((pmin(A(W[j, k]) * hl[j], A(W[j, k]) * hh[j]) for j in range(fan_in)), arb(0))
            hi_s = sum((pmax(A(W[j, k]) * hl[j], A(W[j, k]) * hh[j]) for j in range(fan_in)), arb(0))
            lows.append(down(s * lo_s + bias))
            highs.append(up(s * hi_s + bias))
    return lows[0], highs[0]


@given(seed=st.integers(0, 2**31), depth=st.integers(1, 3), width=st.sampled_from([3, 8]),
       d=st.integers(1, 4), bias=st.booleans(), norm=st.sampled_from(["linf", "l2"]),
       domain=st.booleans(), with_f0=st.booleans(), scale=st.sampled_from([1.0, 1e-3, 1e3]))
@settings(max_examples=20)
def test_ibp_radii_survive_arb_recheck(asxp, tonp, seed, depth, width, d, bias, norm, domain, with_f0, scale):
    rng = np.random.default_rng(seed)
    sizes = [d] + [width] * depth + [1]
    params = init_params(rng, sizes, bias)
    params0 = init_params(rng, sizes, bias) if with_f0 else None
    dom = (0.0, 1.0) if domain else None
    x = rng.uniform(0, 1, size=(3, d)) if domain else scale * rng.normal(size=(3, d))
    b_std = 0.1 if bias else 0.0
    on = lambda ps: None if ps is None else [(asxp(W), None if b is None else asxp(b)) for W, b in ps]  # noqa: E731
    radii, info = certify.ibp_radius(None, on(params), asxp(x), params0=on(params0), norm=norm, domain=dom,
                                     b_std=b_std, return_info=True)
    assert info["verified"] is True
    radii, info = tonp(radii), {"sign": tonp(info["sign"])}
    for k in range(3):
        if radii[k] == 0:
            continue
        lo, hi = arb_ibp_bounds(params, x[k], radii[k], norm, dom, b_std=b_std)
        if params0 is not None:
            lo0, hi0 = arb_ibp_bounds(params0, x[k], radii[k], norm, dom, b_std=b_std)
            lo, hi = lo - hi0, hi - lo0
        margin = lo if info["sign"][k] > 0 else -hi
        assert margin > 0, (k, radii[k])


def test_ibp_round_to_nearest_radius_is_shrunk(monkeypatch):
    """IBP with its rounding widening removed (eps := 0) at a point where f(x₀) is at rounding level: the
    RN radius is not provable; the returned radius is shrunk (or 0) and flagged."""
    from ntkref.certify import _ibp

    rng = np.random.default_rng(3)
    params = [(rng.normal(size=(2, 1)), None)]  # f(x) = (w₁x₁ + w₂x₂)/√2: linear
    w = params[0][0][:, 0]
    # x₀ on the line w·x = 0 up to rounding: f(x₀) is a rounding error; the RN search certifies a radius ∝ it
    xs = np.array([[w[1] * t, -w[0] * t] for t in np.linspace(0.3, 3.0, 40)])
    monkeypatch.setattr(_ibp, "dtype_eps", lambda dtype, xp: 0.0)
    with monkeypatch.context() as m:  # the RN radii as the search alone would report them
        none = np.zeros(len(xs), dtype=bool)
        m.setattr(_ibp, "verify_and_shrink", lambda radii, *args: (radii, none, none))
        rn, rn_info = certify.ibp_radius(None, params, xs, return_info=True)
    radii, info = certify.ibp_radius(None, params, xs, return_info=True)
    unprovable = 0
    for k in range(len(xs)):
        if rn[k] > 0:
            lo, hi = arb_ibp_bounds(params, xs[k], rn[k], "linf", None)
            if not (lo if rn_info["sign"][k] > 0 else -hi) > 0:
                unprovable += 1
                assert info["shrunk"][k] and radii[k] < rn[k]
        if radii[k] > 0:
            lo, hi = arb_ibp_bounds(params, xs[k], radii[k], "linf", None)
            assert (lo if info["sign"][k] > 0 else -hi) > 0
    assert unprovable >= 10
    assert math.isfinite(float(np.sum(radii)))
