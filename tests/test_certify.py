"""Tests of ntkref.certify: NTK interval bounds (seed 000 App. H.1), certified radii, IBP (App. H.2).

Independent routes used here (never the implementation's own numbers):
- a private NumPy oracle of Θ (seed 000 eq. (63)) with a stable angle, and its hand-written input gradient,
  checked against finite differences;
- random points in the ball and projected-gradient attacks (soundness: no point may escape the bounds);
- mpmath root finding for the minimum of h; brute-force vertex enumeration and scipy's LP for the ranges;
- the printed App. H.1 written out literally (docs/errata.md, seed 000 App. H.1: it gives NaN / an unsound bound; the fix does not);
- for IBP, a private forward pass with hand-written backprop for the attack.
"""
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from ntkref import certify
from ntkref._lib.validation import InvalidParameterError

TWO_PI = 2.0 * np.pi


# ---------------------------------------------------------------------------
# private NumPy oracles
# ---------------------------------------------------------------------------
def theta_np(x, z):
    """Θ(x, z) of seed 000 eq. (63) for broadcast rows x (..., d), z (..., d); Θ = 0 if either is 0.

    The angle is atan2(‖ẑ − u x̂‖, u): accurate also for (anti)parallel rows, where arccos(u) loses √eps.
    """
    d = x.shape[-1]
    r = np.linalg.norm(x, axis=-1)
    n = np.linalg.norm(z, axis=-1)
    xh = x / np.where(r > 0, r, 1.0)[..., None]
    zh = z / np.where(n > 0, n, 1.0)[..., None]
    u = np.clip(np.sum(xh * zh, axis=-1), -1.0, 1.0)
    s = np.linalg.norm(zh - u[..., None] * xh, axis=-1)
    th = np.arctan2(s, u)
    return np.where((r > 0) & (n > 0), r * n * (2 * u * (np.pi - th) + s) / (TWO_PI * d), 0.0)


def grad_theta_np(x, z):
    """∇ₓΘ(x, z) = [2(π − θ) z + ‖z‖(sin θ·x̂ + cos θ·e⊥)]/(2πd), e⊥ = unit(ẑ − u x̂) (0 if parallel)."""
    d = x.shape[-1]
    r = np.linalg.norm(x, axis=-1)
    n = np.linalg.norm(z, axis=-1)
    xh = x / np.where(r > 0, r, 1.0)[..., None]
    zh = z / np.where(n > 0, n, 1.0)[..., None]
    u = np.clip(np.sum(xh * zh, axis=-1), -1.0, 1.0)
    v = zh - u[..., None] * xh
    s = np.linalg.norm(v, axis=-1)
    e = v / np.where(s > 0, s, 1.0)[..., None]
    th = np.arctan2(s, u)
    g = 2 * (np.pi - th)[..., None] * z + n[..., None] * (s[..., None] * xh + u[..., None] * e)
    return np.where(((r > 0) & (n > 0))[..., None], g / (TWO_PI * d), 0.0)


def g_np(alpha, X, x):
    """g(x) = Σ αᵢ Θ(x, xᵢ) for x of shape (..., d)."""
    return np.sum(alpha * theta_np(x[..., None, :], X), axis=-1)


def grad_g_np(alpha, X, x):
    return np.sum(alpha[:, None] * grad_theta_np(x[..., None, :], X), axis=-2)


def project(x, x0, radius, norm, domain):
    if norm == "linf":
        x = np.clip(x, x0 - radius, x0 + radius)
    else:
        diff = x - x0
        nrm = np.linalg.norm(diff, axis=-1, keepdims=True)
        x = x0 + diff * np.minimum(1.0, radius / np.where(nrm > 0, nrm, 1.0))
    if domain is not None:  # clipping a point of the ball towards a box that contains x0 stays in the ball
        x = np.clip(x, domain[0], domain[1])
    return x


def random_ball_points(rng, x0, radius, norm, domain, k):
    """k random points of the ball (∩ domain), including ball vertices, shape (k, d) for one x0 (d,)."""
    d = x0.shape[-1]
    if norm == "linf":
        pts = x0 + radius * rng.uniform(-1, 1, size=(k, d))
        pts[: k // 2] = x0 + radius * rng.choice([-1.0, 1.0], size=(k // 2, d))  # vertices
    else:
        g = rng.normal(size=(k, d))
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        pts = x0 + radius * g * rng.uniform(0, 1, size=(k, 1)) ** (1.0 / d)
        pts[: k // 2] = x0 + radius * g[: k // 2]  # sphere
    return project(pts, x0, radius, norm, domain)


def pgd_maximize(fun_grad, x0, radius, norm, domain, rng, starts=4, steps=60):
    """Projected (sign-)gradient ascent of fun over the ball; x0 (d,); fun_grad(X (k,d)) → (values (k,), grads (k,d)).

    Returns the best point and value found.
    """
    x = np.concatenate([x0[None, :], random_ball_points(rng, x0, radius, norm, domain, starts)], axis=0)
    best_x, best_v = None, -np.inf
    for t in range(steps):
        v, gr = fun_grad(x)
        i = int(np.argmax(v))
        if v[i] > best_v:
            best_v, best_x = v[i], x[i].copy()
        step = radius * (0.5 * (1 - t / steps) + 0.02)
        if norm == "linf":
            x = x + step * np.sign(gr)
        else:
            gn = np.linalg.norm(gr, axis=1, keepdims=True)
            x = x + step * gr / np.where(gn > 0, gn, 1.0)
        x = project(x, x0, radius, norm, domain)
    v, _ = fun_grad(x)
    i = int(np.argmax(v))
    if v[i] > best_v:
        best_v, best_x = v[i], x[i].copy()
    return best_x, best_v


def in_ball(x, x0, radius, norm, domain, slack=1e-12):
    dist = np.max(np.abs(x - x0)) if norm == "linf" else np.linalg.norm(x - x0)
    ok = dist <= radius * (1 + slack) + slack
    if domain is not None:
        ok = ok and np.all(x >= domain[0] - slack) and np.all(x <= domain[1] + slack)
    return ok


# tolerance of soundness checks: the oracle's own rounding error is a few eps of ‖x‖‖xᵢ‖/d (the bounds are widened
# outward by more than that for their own rounding), so 1e-12 of that scale is loose for rounding, tight for a bug.
def theta_scale(x0, X, radius, d):
    r_max = np.linalg.norm(np.abs(x0) + radius, axis=-1)
    return r_max[:, None] * np.linalg.norm(X, axis=1)[None, :] / d + 1e-300


# ---------------------------------------------------------------------------
# hypothesis strategy: small problems with the awkward cases mixed in
# ---------------------------------------------------------------------------
@st.composite
def problems(draw, with_domain=None):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    d = draw(st.integers(1, 6))
    n_train = draw(st.integers(1, 5))
    n_test = draw(st.integers(1, 3))
    norm = draw(st.sampled_from(["linf", "l2"]))
    method = draw(st.sampled_from(["tight", "paper"]))
    domain = draw(st.booleans()) if with_domain is None else with_domain
    if method == "paper":
        domain = False
    scale = 10.0 ** draw(st.integers(-2, 2))
    if domain:
        X = rng.uniform(0, 1, size=(n_train, d)) * rng.integers(0, 2, size=(n_train, d))  # sparse pixels
        x0 = rng.uniform(0, 1, size=(n_test, d)) * rng.integers(0, 2, size=(n_test, d))
        dom = (0.0, 1.0)
    else:
        X = scale * rng.normal(size=(n_train, d))
        x0 = scale * rng.normal(size=(n_test, d))
        dom = None
    if draw(st.booleans()):  # a zero training row
        X[rng.integers(n_train)] = 0.0
    kind = draw(st.sampled_from(["plain", "duplicate", "antiparallel", "at_u_star", "at_minus_sqrt_half"]))
    i = rng.integers(n_train)
    if kind == "duplicate":  # test point equal to a training point: u = 1 exactly
        x0[0] = X[i]
    elif kind == "antiparallel" and not domain:
        x0[0] = -2.0 * X[i]
    elif kind in ("at_u_star", "at_minus_sqrt_half") and not domain and d >= 2 and np.any(X[i]):
        # u₀ at the minimiser of h (interior minimum on an R = const edge) or at −1/√2 (on a p = const edge)
        u0 = certify.H_ARGMIN if kind == "at_u_star" else -math.sqrt(0.5)
        e = X[i] / np.linalg.norm(X[i])
        f = rng.normal(size=d)
        f -= (f @ e) * e
        f /= np.linalg.norm(f)
        x0[0] = scale * (u0 * e + math.sqrt(1 - u0**2) * f)
    rel = draw(st.sampled_from([0.0, 1e-6, 1e-3, 0.05, 0.3, 1.0, 3.0]))
    base = max(float(np.max(np.abs(x0))), 1e-3) if domain else scale
    radius = rel * base
    alpha = rng.normal(size=n_train) * 10.0 ** rng.uniform(-1, 1, size=n_train)
    exact_domain = draw(st.booleans())
    return dict(X=X, x0=x0, radius=radius, norm=norm, method=method, domain=dom, alpha=alpha, rng=rng,
                exact_domain=exact_domain)


# ---------------------------------------------------------------------------
# h and its minimum
# ---------------------------------------------------------------------------
def test_h_minimum_against_mpmath():
    mpmath.mp.dps = 40
    hprime = lambda u: 2 * (mpmath.pi - mpmath.acos(u)) + u / mpmath.sqrt(1 - u**2)  # noqa: E731
    h = lambda u: 2 * u * (mpmath.pi - mpmath.acos(u)) + mpmath.sqrt(1 - u**2)  # noqa: E731
    u_star = mpmath.findroot(hprime, mpmath.mpf("-0.79"))
    assert certify.H_ARGMIN == float(u_star)  # the nearest float64
    assert certify.H_MIN == float(h(u_star))
    # the values quoted in docs/errata.md / the official code's comment
    assert round(certify.H_ARGMIN, 5) == -0.79410
    assert round(certify.H_MIN, 7) == -0.4297378


def test_h_values_and_convexity(asxp, tonp):
    mpmath.mp.dps = 30
    u = np.array([-1.0, -0.999999, -0.9, H := -0.7941, -0.3942, 0.0, 0.5, 0.999999, 1.0])
    got = tonp(certify.ntk_h(asxp(u)))
    ref = [float(2 * mpmath.mpf(v) * (mpmath.pi - mpmath.acos(v)) + mpmath.sqrt(1 - mpmath.mpf(v) ** 2)) for v in u]
    np.testing.assert_allclose(got, ref, rtol=0, atol=4e-15)
    assert H < 0 and got[0] == 0.0 and abs(got[-1] - TWO_PI) < 1e-15
    # convex: h'' = 2/√(1−u²) + (1−u²)^{−3/2} > 0, so second differences on a grid are positive
    grid = np.linspace(-0.999, 0.999, 2001)
    hv = tonp(certify.ntk_h(asxp(grid)))
    assert np.all(hv[:-2] - 2 * hv[1:-1] + hv[2:] > 0)
    assert np.min(hv) >= certify.H_MIN


def test_hand_written_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    for d in (1, 2, 5):
        x = rng.normal(size=(40, d))
        z = rng.normal(size=(40, d))
        z[:5] = -0.5 * x[:5] + 0.1 * rng.normal(size=(5, d))  # near antiparallel (|u| → 1 region)
        g = grad_theta_np(x, z)
        step = 1e-6
        for j in range(d):
            e = np.zeros(d)
            e[j] = step
            fd = (theta_np(x + e, z) - theta_np(x - e, z)) / (2 * step)
            # central differences: error O(step²·Θ‴) + O(eps·Θ/step) ≈ 1e-9 here
            np.testing.assert_allclose(g[:, j], fd, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------------
# soundness of Θ bounds and g bounds
# ---------------------------------------------------------------------------
@given(problems())
def test_theta_interval_is_sound(asxp, tonp, prob):
    X, x0, radius, norm, domain, rng = (prob[k] for k in ("X", "x0", "radius", "norm", "domain", "rng"))
    lo, hi = certify.ntk_interval(
        asxp(x0), asxp(X), radius, method=prob["method"], norm=norm, domain=domain, exact_domain=prob["exact_domain"]
    )
    lo, hi = tonp(lo), tonp(hi)
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    d = X.shape[1]
    tol = 1e-12 * theta_scale(x0, X, radius, d)
    for k in range(x0.shape[0]):
        pts = random_ball_points(rng, x0[k], radius, norm, domain, 200)
        vals = theta_np(pts[:, None, :], X)
        assert np.all(vals >= lo[k] - tol[k]) and np.all(vals <= hi[k] + tol[k])
        for i in range(X.shape[0]):
            for sgn in (1.0, -1.0):  # maximise and minimise Θ(·, xᵢ)
                def fg(p, i=i, sgn=sgn):
                    return sgn * theta_np(p, X[i]), sgn * grad_theta_np(p, np.broadcast_to(X[i], p.shape))

                xa, v = pgd_maximize(fg, x0[k], radius, norm, domain, rng, starts=2, steps=25)
                assert in_ball(xa, x0[k], radius, norm, domain)
                val = sgn * v
                assert lo[k, i] - tol[k, i] <= val <= hi[k, i] + tol[k, i]


@given(problems())
def test_output_bounds_are_sound(asxp, tonp, prob):
    X, x0, radius, norm, domain, rng, alpha = (prob[k] for k in ("X", "x0", "radius", "norm", "domain", "rng", "alpha"))
    lo, hi = certify.output_bounds(
        asxp(alpha), asxp(X), asxp(x0), radius, method=prob["method"], norm=norm, domain=domain,
        exact_domain=prob["exact_domain"],
    )
    lo, hi = tonp(lo), tonp(hi)
    d = X.shape[1]
    tol = 1e-12 * (theta_scale(x0, X, radius, d) @ np.abs(alpha))
    for k in range(x0.shape[0]):
        pts = random_ball_points(rng, x0[k], radius, norm, domain, 200)
        gv = g_np(alpha, X, pts)
        assert np.all(gv >= lo[k] - tol[k]) and np.all(gv <= hi[k] + tol[k])
        for sgn in (1.0, -1.0):
            fg = lambda p: (sgn * g_np(alpha, X, p), sgn * grad_g_np(alpha, X, p))  # noqa: E731
            xa, v = pgd_maximize(fg, x0[k], radius, norm, domain, rng)
            assert in_ball(xa, x0[k], radius, norm, domain)
            assert lo[k] - tol[k] <= sgn * v <= hi[k] + tol[k]


def test_zero_radius_collapses_to_the_kernel(asxp, tonp):
    """At δ = 0 both methods return Θ(x₀, xᵢ) itself, up to the rounding widening: ~1e-13 relative away from
    u = ±1; near u = ±1 the widening γ = (d+4)·eps of ⟨x, xᵢ⟩ costs O(√γ) because h has a square-root
    singularity there (h(1 − t) ≈ 2π − √(2t)), so the width is allowed to be 4√γ of the scale there."""
    rng = np.random.default_rng(5)
    d = 4
    X = rng.normal(size=(7, d))
    x0 = np.concatenate([rng.normal(size=(3, d)), X[:1], -X[1:2]])
    ref = theta_np(x0[:, None, :], X)
    u = (x0 / np.linalg.norm(x0, axis=1, keepdims=True)) @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
    scale = theta_scale(x0, X, 0.0, d)
    gamma = (d + 4) * np.finfo(float).eps
    allowed = np.where(np.abs(u) < 0.99, 1e-11, 4 * np.sqrt(gamma)) * scale
    for method in ("tight", "paper"):
        lo, hi = (tonp(a) for a in certify.ntk_interval(asxp(x0), asxp(X), 0.0, method=method))
        assert np.all(lo <= ref + 1e-14 * scale) and np.all(hi >= ref - 1e-14 * scale)
        assert np.all(ref - lo <= allowed) and np.all(hi - ref <= allowed)


def test_joint_extremes_over_the_polygon_are_exact(xp, asxp, tonp):
    """The core lemma of method="tight": min/max of Φ(p, R) = R·h(p/R) over P = box ∩ {|p| ≤ R} are found
    exactly (module docstring).  Independent route: dense grid over P (interior and the four edges)."""
    rng = np.random.default_rng(7)

    def phi(p, R):
        t = np.clip(p / np.where(R > 0, R, 1.0), -1, 1)
        return np.where(R > 0, R * (2 * t * (np.pi - np.arccos(t)) + np.sqrt(1 - t * t)), 0.0)

    for trial in range(300):
        RL, RU = np.sort(rng.uniform(0, 2, size=2))
        if trial % 5 == 0:
            RL = 0.0
        c = rng.uniform(-1.0, 1.0) * RU  # P is non-empty (it contains the image of a ball)
        w = rng.uniform(0, 1) * RU * rng.choice([0.05, 0.3, 1.0])
        pL, pU = c - w, c + w
        lo, hi = certify._ntk_interval._phi_box_bounds(*(asxp(np.array([v])) for v in (pL, pU, RL, RU)), xp)
        lo, hi = float(lo[0]), float(hi[0])
        Rg = np.linspace(RL, RU, 301)
        pg = np.linspace(pL, pU, 301)
        P, R = np.meshgrid(pg, Rg)
        feas = np.abs(P) <= R
        # edges of P exactly: R = RL, RU with p on a fine grid; p = pL, pU with R on a fine grid; cone edges
        extra_p = [np.linspace(max(pL, -r), min(pU, r), 4001) for r in (RL, RU) if max(pL, -r) <= min(pU, r)]
        extra_R = [np.linspace(max(RL, abs(q)), RU, 4001) for q in (pL, pU) if max(RL, abs(q)) <= RU]
        vals = [phi(P[feas], R[feas])]
        r_edges = [r for r in (RL, RU) if max(pL, -r) <= min(pU, r)]
        vals += [phi(pp, np.full_like(pp, r)) for pp, r in zip(extra_p, r_edges)]
        vals += [phi(np.full_like(rr, q), rr) for rr, q in zip(extra_R, [q for q in (pL, pU) if max(RL, abs(q)) <= RU])]
        vals = np.concatenate(vals)
        scale = RU + 1e-300
        assert lo <= vals.min() + 1e-13 * scale and hi >= vals.max() - 1e-13 * scale  # sound
        # exact: grid spacing (≤ 2·RU/4000 along the edges; Φ is 1/2-Hölder only at the cone edges) bounds the gap
        assert vals.min() - lo <= 2e-3 * scale and hi - vals.max() <= 2e-3 * scale
        # the signed variant used for g (four Φ evaluations instead of ten) gives the same extremes
        args = [asxp(np.array([v, v])) for v in (pL, pU, RL, RU)]
        signed = tonp(certify._ntk_interval._signed_phi_tight(*args, asxp(np.array([True, False])), xp))
        np.testing.assert_allclose([signed[0], -signed[1]], [lo, hi], rtol=1e-14, atol=1e-15 * scale)


@pytest.mark.parametrize("method", ["tight", "paper"])
def test_rounding_widening_keeps_the_diagonal_inside(asxp, tonp, method):
    """Θ(x, x) = ‖x‖²/d exactly (u = 1, h = 2π), but fl(⟨x, x⟩) and fl(‖x‖)² differ by ulps and h has a
    square-root singularity at 1, so an unwidened upper bound at δ = 0 misses Θ(x, x) by ~1e-8 relative on
    about half of random x.  The (d + 4)·eps widening must keep every diagonal inside (1e-15: rounding of
    the reference ‖x‖²/d itself)."""
    rng = np.random.default_rng(17)
    for d in (3, 50, 784):
        x = rng.normal(size=(200, d)) * 10.0 ** rng.uniform(-3, 3, size=(200, 1))
        ref = np.sum(x * x, axis=1) / d
        for k in range(0, 200, 40):
            block = asxp(x[k : k + 40])
            lo, hi = (tonp(a) for a in certify.ntk_interval(block, block, 0.0, method=method))
            diag_lo, diag_hi = np.diag(lo), np.diag(hi)
            assert np.all(diag_hi >= ref[k : k + 40] * (1 - 1e-15)) and np.all(diag_lo <= ref[k : k + 40] * (1 + 1e-15))


# ---------------------------------------------------------------------------
# exactness of the ranges (independent routes: vertices, scipy LP, projection)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("domain", [None, (0.0, 1.0), (-0.3, 0.8)])
def test_dot_and_norm_ranges_are_exact_linf(asxp, tonp, domain):
    rng = np.random.default_rng(11)
    d, n = 4, 5
    x0 = rng.uniform(0, 0.8, size=(3, d)) if domain else rng.normal(size=(3, d))
    if domain is not None:
        x0 = np.clip(x0, domain[0], domain[1])
    X = rng.normal(size=(n, d))
    delta = 0.37
    ranges = certify.dot_norm_ranges(asxp(x0), asxp(X), delta, domain=domain, exact_domain=True)
    pL, pU, rL, rU = (tonp(a) for a in ranges)
    if domain is not None:  # the cheap default contains the exact range
        fL, fU, frL, frU = (tonp(a) for a in certify.dot_norm_ranges(asxp(x0), asxp(X), delta, domain=domain))
        # Where the two ranges coincide mathematically (coordinates of x₀ on the boundary or ≥ δ inside)
        # the routes round differently: the exact one is ⟨c, x′⟩ ∓ ⟨w, |x′|⟩ (two length-d products), the
        # cheap one ⟨x₀, x′⟩ ∓ δ‖x′‖₁ ± δ·(boundary corrections).  NumPy happens to agree bit for bit, torch
        # and jax do not (8.9e-16 apart).  Each length-d product is exact to (d + 4)·eps·Σⱼ|aⱼ||x′ⱼ| with
        # |aⱼ| ≤ |x₀ⱼ| + δ (the standard dot-product bound), hence this tolerance.
        eps = np.finfo(np.float64).eps
        tol_dot = (d + 4) * eps * ((np.abs(x0) + delta) @ np.abs(X).T)
        assert np.all(fL <= pL + tol_dot) and np.all(fU >= pU - tol_dot)
        # the norm range is the same formula in both routes, but a backend may compile the two calls into
        # differently fused kernels; a sum of d squares and a square root is exact to (d + 2)·eps relative
        np.testing.assert_allclose([frL, frU], [rL, rU], rtol=(d + 2) * eps, atol=0)
    for k in range(3):
        a, b = x0[k] - delta, x0[k] + delta
        if domain is not None:
            a, b = np.maximum(a, domain[0]), np.minimum(b, domain[1])
        verts = np.array(np.meshgrid(*[[a[j], b[j]] for j in range(d)])).reshape(d, -1).T
        # ‖x‖ is convex: its max over a box is at a vertex; its min is at the projection of 0
        assert abs(rU[k] - np.linalg.norm(verts, axis=1).max()) < 1e-12
        assert abs(rL[k] - np.linalg.norm(np.clip(0.0, a, b))) < 1e-12
        for i in range(n):
            bounds = list(zip(a, b))
            lpmin = linprog(X[i], bounds=bounds, method="highs").fun
            lpmax = -linprog(-X[i], bounds=bounds, method="highs").fun
            assert pL[k, i] <= lpmin + 1e-12 and abs(pL[k, i] - lpmin) < 1e-9
            assert pU[k, i] >= lpmax - 1e-12 and abs(pU[k, i] - lpmax) < 1e-9


def test_default_domain_range_is_exact_for_boundary_or_interior_coordinates(asxp, tonp):
    """Pixels exactly on the boundary (0 or 1) or at least δ inside: the cheap range equals the exact one."""
    rng = np.random.default_rng(13)
    d, delta = 6, 0.1
    x0 = rng.choice([0.0, 1.0, 0.3, 0.5, 0.7], size=(4, d))
    X = rng.normal(size=(5, d))
    exact = [tonp(a) for a in certify.dot_norm_ranges(asxp(x0), asxp(X), delta, domain=(0.0, 1.0), exact_domain=True)]
    cheap = [tonp(a) for a in certify.dot_norm_ranges(asxp(x0), asxp(X), delta, domain=(0.0, 1.0))]
    for e, c in zip(exact, cheap):
        np.testing.assert_allclose(c, e, rtol=1e-13, atol=1e-13)


def test_dot_and_norm_ranges_l2(asxp, tonp):
    rng = np.random.default_rng(12)
    x0, X, delta = rng.normal(size=(2, 5)), rng.normal(size=(3, 5)), 0.4
    pL, pU, rL, rU = (tonp(a) for a in certify.dot_norm_ranges(asxp(x0), asxp(X), delta, norm="l2"))
    for k in range(2):
        for i in range(3):
            e = X[i] / np.linalg.norm(X[i])
            extremes = [(x0[k] - delta * e) @ X[i], (x0[k] + delta * e) @ X[i]]
            np.testing.assert_allclose([pL[k, i], pU[k, i]], extremes, rtol=1e-12)
        r0 = np.linalg.norm(x0[k])
        np.testing.assert_allclose([rL[k], rU[k]], [max(r0 - delta, 0), r0 + delta], rtol=1e-12)


# ---------------------------------------------------------------------------
# the printed App. H.1 (seed 000; docs/errata.md): literal transcription
# ---------------------------------------------------------------------------
def printed_app_h1(x0, X, delta):
    """Seed 000 App. H.1 exactly as printed (no clipping of uᴸ, the minus sign in uᵁ's else branch,
    division by ‖x‖ᴸ even when it is 0)."""
    d = x0.shape[0]
    sd = math.sqrt(d)
    with np.errstate(all="ignore"):
        xn = np.linalg.norm(x0)
        xU = xn + sd * delta
        xL = max(xn - sd * delta, 0.0)
        nt = np.linalg.norm(X, axis=1)
        dot = X @ x0
        dmin = dot - sd * delta * nt
        dmax = dot + sd * delta * nt
        uL = np.where(dmin >= 0, dmin / (xU * nt), dmin / (xL * nt))
        uU = np.where(dmax >= 0, dmax / (xL * nt), (dot - sd * delta * nt) / (xU * nt))
        uU = np.minimum(uU, 1.0)
        h = lambda u: 2 * u * (np.pi - np.arccos(u)) + np.sqrt(1 - u**2)  # noqa: E731
        hL = np.minimum(h(uL), h(uU))
        hL = np.where((uL <= -0.7941) & (uU >= -0.7941), -0.4297378, hL)  # "bow shaped"
        hU = np.maximum(h(uL), h(uU))
        thL = np.where(hL >= 0, xL * nt * hL, xU * nt * hL) / (TWO_PI * d)
        thU = np.where(hU >= 0, xU * nt * hU, xL * nt * hU) / (TWO_PI * d)
    return thL, thU


def _constructed_inputs():
    d = 4
    e = np.array([1.0, 0.0, 0.0, 0.0])
    f = np.array([0.0, 1.0, 0.0, 0.0])
    xprime = 2.0 * e
    return d, xprime, {
        # antiparallel: uᴸ = −(‖x₀‖ + √dδ)/(‖x₀‖ − √dδ) < −1 → arccos NaN
        "unclipped_uL": (-e, 0.01),
        # u₀ = −0.5, pᵁ < 0: the printed else-branch uses pᴸ and returns Θᵁ < Θ(x₀, x′)
        "sign_typo": (-0.5 * e + (math.sqrt(3) / 2) * f, 1e-3),
        # ‖x₀‖ ≤ √dδ → ‖x‖ᴸ = 0, pᴸ < 0 → −∞ → NaN
        "zero_lower_norm": (-0.05 * e + 0.02 * f, 0.1),
    }


def test_printed_app_h1_fails_and_fixed_form_holds(asxp, tonp):
    d, xprime, cases = _constructed_inputs()
    X = xprime[None, :]
    rng = np.random.default_rng(0)
    # the printed form: NaN in two cases, an unsound upper bound (below Θ at the clean point) in the third
    thL, thU = printed_app_h1(cases["unclipped_uL"][0], X, cases["unclipped_uL"][1])
    assert np.isnan(thL[0]) and np.isnan(thU[0])  # arccos(uᴸ) with uᴸ < −1
    thL, thU = printed_app_h1(cases["zero_lower_norm"][0], X, cases["zero_lower_norm"][1])
    assert np.isnan(thU[0])  # uᴸ = pᴸ/0 = −∞: h(−∞) is NaN (hᴸ survives only through the "bow" rule)
    x0, delta = cases["sign_typo"]
    thL, thU = printed_app_h1(x0, X, delta)
    clean = theta_np(x0, xprime)
    assert np.isfinite(thU[0]) and thU[0] < clean - 1e-9  # unsound: violated by x = x₀ itself
    # the fixed form: finite and sound on all three (clean point, random points and attacks)
    for name, (x0, delta) in cases.items():
        lo, hi = (tonp(a)[0, 0] for a in certify.ntk_interval(asxp(x0[None, :]), asxp(X), delta, method="paper"))
        assert np.isfinite(lo) and np.isfinite(hi), name
        rho = math.sqrt(d) * delta
        pts = random_ball_points(rng, x0, delta, "linf", None, 500)
        vals = theta_np(pts, xprime)
        assert lo <= vals.min() + 1e-15 and vals.max() <= hi + 1e-15, name
        assert lo <= theta_np(x0, xprime) <= hi
        assert rho > 0


# ---------------------------------------------------------------------------
# tight vs paper
# ---------------------------------------------------------------------------
def _two_class_data(rng, n, d):
    """Two Gaussian blobs in the positive orthant (pixel-like), labels ±1."""
    y = rng.choice([-1.0, 1.0], size=n)
    mean = np.where(np.arange(d) < d // 2, 0.7, 0.2)
    X = np.abs(rng.normal(size=(n, d)) * 0.3 + np.where(y[:, None] > 0, mean, mean[::-1]))
    return X, y


def _krr_alpha(X, y, lam):
    K = theta_np(X[:, None, :], X[None, :, :])
    return np.linalg.solve(K + (lam / 2) * np.eye(len(y)), y)


def test_tight_radius_dominates_paper(asxp, tonp):
    rng = np.random.default_rng(21)
    X, y = _two_class_data(rng, 60, 10)
    Xt, yt = _two_class_data(rng, 40, 10)
    alpha = _krr_alpha(X, y, 0.1)
    args = (asxp(alpha), asxp(X), asxp(Xt))
    r_tight = tonp(certify.certified_radius(*args, method="tight"))
    r_paper = tonp(certify.certified_radius(*args, method="paper"))
    assert np.all(r_tight >= r_paper)  # monotone decisions on the same bisection grid ⇒ exact inequality
    certified = r_paper > 0
    assert certified.sum() >= 30
    assert np.all(r_tight[certified] > r_paper[certified])  # strictly larger on typical data
    assert np.median(r_tight[certified] / r_paper[certified]) > 1.2
    # and pointwise: the tight interval is inside the paper's (up to rounding)
    for delta in (0.0, 1e-3, 0.05, 0.5):
        tl, tu = (tonp(a) for a in certify.ntk_interval(asxp(Xt), asxp(X), delta, method="tight"))
        pl, pu = (tonp(a) for a in certify.ntk_interval(asxp(Xt), asxp(X), delta, method="paper"))
        slack = 1e-13 * theta_scale(Xt, X, delta, 10)
        assert np.all(tl >= pl - slack) and np.all(tu <= pu + slack)


def test_domain_only_helps_and_is_sound(asxp, tonp):
    rng = np.random.default_rng(22)
    X, y = _two_class_data(rng, 50, 8)
    X = np.clip(X, 0, 1)
    Xt, yt = _two_class_data(rng, 20, 8)
    Xt = np.clip(Xt, 0, 1)
    Xt[:, :2] = 0.0  # pixels on the boundary of [0, 1]: the domain matters there
    alpha = _krr_alpha(X, y, 1.0)
    r_free = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt)))
    r_dom = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt), domain=(0.0, 1.0)))
    r_exact = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt), domain=(0.0, 1.0), exact_domain=True))
    assert np.all(r_dom >= r_free) and np.all(r_exact >= r_dom)
    assert np.mean(r_dom > r_free) > 0.5
    g0 = g_np(alpha, X, Xt)
    for k in range(20):  # attack inside the box at the certified radius
        if r_exact[k] == 0:
            continue
        s = np.sign(g0[k])
        fg = lambda p: (-s * g_np(alpha, X, p), -s * grad_g_np(alpha, X, p))  # noqa: E731
        xa, v = pgd_maximize(fg, Xt[k], r_exact[k], "linf", (0.0, 1.0), rng)
        assert -v > 0


# ---------------------------------------------------------------------------
# certified radius: attacks, bracket, independent per-point bisection
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("method", ["tight", "paper"])
def test_certified_points_survive_attack(asxp, tonp, norm, method):
    rng = np.random.default_rng(31)
    X, y = _two_class_data(rng, 40, 6)
    Xt, yt = _two_class_data(rng, 15, 6)
    alpha = _krr_alpha(X, y, 0.5)
    tol = 1e-3
    r, info = certify.certified_radius(
        asxp(alpha), asxp(X), asxp(Xt), method=method, norm=norm, tol=tol, return_info=True
    )
    r = tonp(r)
    g0 = g_np(alpha, X, Xt)
    np.testing.assert_allclose(tonp(info["g"]), g0, rtol=1e-10, atol=1e-14)
    for k in range(len(Xt)):
        s = np.sign(g0[k])
        def bounds_at(delta, k=k):
            out = certify.output_bounds(asxp(alpha), asxp(X), asxp(Xt[k : k + 1]), delta, method=method, norm=norm)
            return (tonp(a)[0] for a in out)

        lo, hi = bounds_at(r[k])
        if r[k] > 0:
            assert s * (lo if s > 0 else hi) > 0  # certified at r
            fg = lambda p: (-s * g_np(alpha, X, p), -s * grad_g_np(alpha, X, p))  # noqa: E731
            xa, v = pgd_maximize(fg, Xt[k], r[k], norm, None, rng)
            assert in_ball(xa, Xt[k], r[k], norm, None) and -v > 0  # no label flipped
        # not certified at r(1 + 2 tol): the bisection bracket is as documented
        lo2, hi2 = bounds_at(r[k] * (1 + 2 * tol) + 1e-300)
        assert not s * (lo2 if s > 0 else hi2) > 0


def test_vectorised_bisection_matches_plain_per_point_bisection(asxp, tonp):
    """Independent route: a plain arithmetic bisection per point on output_bounds, to absolute width 1e-9."""
    rng = np.random.default_rng(32)
    X, y = _two_class_data(rng, 30, 5)
    Xt, _ = _two_class_data(rng, 6, 5)
    alpha = _krr_alpha(X, y, 1.0)
    tol = 1e-6
    r = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt), tol=tol))
    for k in range(len(Xt)):
        s = np.sign(g_np(alpha, X, Xt[k]))

        def ok(delta):
            lo, hi = (tonp(a)[0] for a in certify.output_bounds(asxp(alpha), asxp(X), asxp(Xt[k : k + 1]), delta))
            return s * (lo if s > 0 else hi) > 0

        a, b = 0.0, float(np.max(np.abs(Xt[k])))
        while b - a > 1e-9:
            m = (a + b) / 2
            a, b = (m, b) if ok(m) else (a, m)
        assert abs(r[k] - a) <= tol * a + 2e-9


def test_edge_cases(asxp, tonp):
    rng = np.random.default_rng(41)
    X, y = _two_class_data(rng, 20, 4)
    alpha = _krr_alpha(X, y, 1.0)
    Xt, yt = _two_class_data(rng, 8, 4)
    # zero-norm training rows: Θ ≡ 0, so they change nothing whatever their α
    Xz = np.concatenate([X, np.zeros((3, 4))])
    az = np.concatenate([alpha, [5.0, -7.0, 1e3]])
    lo, hi = (tonp(a) for a in certify.ntk_interval(asxp(Xt), asxp(Xz), 0.2))
    assert np.all(lo[:, -3:] == 0) and np.all(hi[:, -3:] == 0)
    r0 = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt)))
    rz = tonp(certify.certified_radius(asxp(az), asxp(Xz), asxp(Xt)))
    # zero rows add nothing to g, but the outward rounding margin grows with n ((n+2)·eps), which may move the
    # result by a grid step of the bisection (ratio √(1+tol), tol = 1e-4): equal to well within 1e-3
    np.testing.assert_allclose(rz, r0, rtol=1e-3)
    # points at the margin: x₀ = 0 (g(0) = 0), and g ≡ 0 (α = (1, −1) on a duplicated point)
    Xm = np.concatenate([Xt[:2], np.zeros((1, 4))])
    r, info = certify.certified_radius(asxp(alpha), asxp(X), asxp(Xm), return_info=True)
    assert tonp(r)[2] == 0 and tonp(info["at_margin"])[2]
    r = tonp(certify.certified_radius(asxp(np.array([1.0, -1.0])), asxp(X[[0, 0]]), asxp(Xt)))
    assert np.all(r == 0)
    # misclassified points (relative to the given labels): radius 0 and reported
    g0 = g_np(alpha, X, Xt)
    ybad = np.sign(g0)
    ybad[[1, 4]] *= -1
    r, info = certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt), y=asxp(ybad), return_info=True)
    r, mis = tonp(r), tonp(info["misclassified"])
    assert list(np.nonzero(mis)[0]) == [1, 4] and np.all(r[[1, 4]] == 0) and np.all(r[mis == 0] > 0)
    # α of one sign: g = Σ αΘ can still change sign (h < 0 for u < −0.394); the certificate must stay sound
    apos = np.abs(alpha)
    Xmix = np.concatenate([Xt, -Xt[:3]])
    r = tonp(certify.certified_radius(asxp(apos), asxp(X), asxp(Xmix)))
    assert np.all(r < np.max(np.abs(Xmix), axis=1))  # x = 0 lies in the ball at ‖x₀‖∞ and g(0) = 0
    for k in range(len(Xmix)):
        if r[k] > 0:
            s = np.sign(g_np(apos, X, Xmix[k]))
            fg = lambda p: (-s * g_np(apos, X, p), -s * grad_g_np(apos, X, p))  # noqa: E731
            assert -pgd_maximize(fg, Xmix[k], r[k], "linf", None, rng)[1] > 0
    assert np.any(r[-3:] > 0)
    # all α removed (all zero): every point at the margin
    r = tonp(certify.certified_radius(asxp(np.zeros(20)), asxp(X), asxp(Xt)))
    assert np.all(r == 0)


def test_bad_input(asxp):
    rng = np.random.default_rng(0)
    X, x0, a = asxp(rng.normal(size=(4, 3))), asxp(rng.normal(size=(2, 3))), asxp(rng.normal(size=4))
    with pytest.raises(InvalidParameterError, match="radius"):
        certify.ntk_interval(x0, X, -0.1)
    with pytest.raises(InvalidParameterError, match="radius"):
        certify.output_bounds(a, X, x0, float("nan"))
    with pytest.raises(InvalidParameterError, match="alpha"):
        certify.certified_radius(asxp(np.array([1.0, np.nan, 0.0, 1.0])), X, x0)
    with pytest.raises(InvalidParameterError, match="alpha"):
        certify.certified_radius(asxp(np.array([1.0, np.inf, 0.0, 1.0])), X, x0)
    with pytest.raises(InvalidParameterError, match="alpha"):
        certify.certified_radius(asxp(np.ones(3)), X, x0)
    with pytest.raises(InvalidParameterError, match="x_test"):
        certify.certified_radius(a, X, asxp(rng.normal(size=(2, 4))))
    with pytest.raises(InvalidParameterError, match="x_train"):
        certify.ntk_interval(x0, asxp(rng.normal(size=3)), 0.1)
    with pytest.raises(InvalidParameterError, match="y"):
        certify.certified_radius(a, X, x0, y=asxp(np.ones(3)))
    with pytest.raises(InvalidParameterError, match="method"):
        certify.certified_radius(a, X, x0, method="exact")
    with pytest.raises(InvalidParameterError, match="norm"):
        certify.ntk_interval(x0, X, 0.1, norm="l1")
    with pytest.raises(InvalidParameterError, match="domain"):
        certify.ntk_interval(x0, X, 0.1, domain=(1.0, 0.0))
    with pytest.raises(InvalidParameterError, match="domain"):
        certify.ntk_interval(x0, X, 0.1, domain=(10.0, 11.0))  # x0 outside
    with pytest.raises(InvalidParameterError, match="domain"):
        certify.ntk_interval(x0, X, 0.1, method="paper", domain=(-10.0, 10.0))
    with pytest.raises(InvalidParameterError, match="tol"):
        certify.certified_radius(a, X, x0, tol=0.0)
    with pytest.raises(InvalidParameterError, match="radius"):
        certify.ntk_interval(x0, X, asxp(np.array([0.1, 0.2, 0.3])))
    params = [(asxp(rng.normal(size=(3, 5))), None), (asxp(rng.normal(size=(5, 1))), None)]
    with pytest.raises(InvalidParameterError, match="params"):
        certify.ibp_radius(None, [(asxp(rng.normal(size=(3, 5))), None), (asxp(rng.normal(size=(4, 1))), None)], x0)
    with pytest.raises(InvalidParameterError, match="params0"):
        other = [(asxp(rng.normal(size=(3, 6))), None), (asxp(rng.normal(size=(6, 1))), None)]
        certify.ibp_radius(None, params, x0, params0=other)
    with pytest.raises(InvalidParameterError, match="x_test"):
        certify.ibp_radius(None, params, asxp(rng.normal(size=(2, 4))))
    with pytest.raises(InvalidParameterError, match="x_lower"):
        certify.ibp_bounds(None, params, x0 + 1.0, x0)


# ---------------------------------------------------------------------------
# IBP (App. H.2)
# ---------------------------------------------------------------------------
def init_params(rng, sizes, bias=False):
    """NTK-parameterised net parameters (private oracle): W (fan_in, fan_out) ~ N(0, 1), b ~ N(0, 1)."""
    return [(rng.normal(size=(a, b)), rng.normal(size=b) if bias else None) for a, b in zip(sizes[:-1], sizes[1:])]


def forward_and_grad(params, x, W_std=1.0, b_std=0.0):
    """f(x) (k,) and ∇ₓf (k, d) by hand-written backprop; z = W_std·(h@W)/√fan_in + b_std·b."""
    masks = []
    h = x
    for i, (W, b) in enumerate(params):
        z = W_std * (h @ W) / np.sqrt(W.shape[0]) + (b_std * b if b is not None else 0.0)
        if i + 1 < len(params):
            masks.append(z > 0)
            h = np.maximum(z, 0)
        else:
            h = z
    out = h[:, 0]
    grad = np.ones((x.shape[0], 1))
    for i in reversed(range(len(params))):
        W = params[i][0]
        grad = W_std * grad @ W.T / np.sqrt(W.shape[0])
        if i > 0:
            grad = grad * masks[i - 1]
    return out, grad


def _to_xp(params, asxp):
    return [(asxp(W), None if b is None else asxp(b)) for W, b in params]


@given(
    seed=st.integers(0, 2**32 - 1),
    depth=st.integers(1, 3),
    width=st.integers(1, 8),
    d=st.integers(1, 5),
    bias=st.booleans(),
    radius=st.sampled_from([0.0, 1e-4, 0.05, 0.5, 2.0]),
    W_std=st.sampled_from([1.0, math.sqrt(2.0), 0.5]),
)
def test_ibp_bounds_are_sound(asxp, tonp, seed, depth, width, d, bias, radius, W_std):
    rng = np.random.default_rng(seed)
    params = init_params(rng, [d] + [width] * depth + [1], bias)
    b_std = 0.3 if bias else 0.0
    x0 = rng.normal(size=(3, d))
    lo, hi = certify.ibp_bounds(
        None, _to_xp(params, asxp), asxp(x0 - radius), asxp(x0 + radius), W_std=W_std, b_std=b_std
    )
    lo, hi = tonp(lo), tonp(hi)
    for k in range(3):
        pts = random_ball_points(rng, x0[k], radius, "linf", None, 200)
        f, _ = forward_and_grad(params, pts, W_std, b_std)
        tol = 1e-12 * (1 + np.abs(f).max())
        assert np.all(f >= lo[k] - tol) and np.all(f <= hi[k] + tol)
        for sgn in (1.0, -1.0):
            fg = lambda p: tuple(sgn * v for v in forward_and_grad(params, p, W_std, b_std))  # noqa: E731
            _, v = pgd_maximize(fg, x0[k], radius, "linf", None, rng, steps=30)
            assert lo[k] - tol <= sgn * v <= hi[k] + tol


@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("domain", [None, (0.0, 1.0)])
def test_ibp_certified_points_survive_attack(asxp, tonp, norm, domain):
    rng = np.random.default_rng(51)
    d = 6
    params0 = init_params(rng, [d, 30, 30, 1])
    params = [(W + 0.3 * rng.normal(size=W.shape), b) for W, b in params0]  # "trained"
    if domain is None:
        x = rng.normal(size=(20, d))
    else:  # pixel-like: many coordinates exactly on the boundary 0
        x = rng.uniform(0, 1, size=(20, d)) * (rng.uniform(size=(20, d)) < 0.6)
    for p0 in (None, params0):
        p0_xp = None if p0 is None else _to_xp(p0, asxp)
        r = tonp(certify.ibp_radius(
            None, _to_xp(params, asxp), asxp(x), params0=p0_xp, norm=norm, domain=domain, tol=1e-3
        ))
        assert np.sum(r > 0) >= 12
        if domain is not None:  # the box only removes perturbations: radii can only grow
            r_free = tonp(
                certify.ibp_radius(None, _to_xp(params, asxp), asxp(x), params0=p0_xp, norm=norm, tol=1e-3)
            )
            assert np.all(r >= r_free)
        for k in range(len(x)):
            if r[k] == 0:
                continue

            def gfun(p):
                f, gr = forward_and_grad(params, p)
                if p0 is not None:
                    f0, gr0 = forward_and_grad(p0, p)
                    f, gr = f - f0, gr - gr0
                return f, gr

            s = np.sign(gfun(x[k : k + 1])[0][0])
            fg = lambda p: tuple(-s * v for v in gfun(p))  # noqa: E731
            xa, v = pgd_maximize(fg, x[k], r[k], norm, domain, rng, steps=40)
            assert in_ball(xa, x[k], r[k], norm, domain) and -v > 0


def test_official_f0_subtraction_is_unsound_and_ours_is_sound(asxp, tonp):
    """Official code (docs/errata.md): bounding f(W_t, ·) over the ball and subtracting f₀ at the clean point only is not a certificate
    for g = f − f₀.  Counterexample: f_t ≡ 0 (zero readout) and f₀(x₀) = −ε < 0, so g(x₀) = ε > 0; the official
    bound 0 − f₀(x₀) = ε > 0 "certifies" every radius, yet g(x) = −f₀(x) < 0 wherever f₀(x) > 0."""
    rng = np.random.default_rng(61)
    d, m = 5, 40
    params0 = init_params(rng, [d, m, 1])
    params_t = [(params0[0][0], None), (np.zeros((m, 1)), None)]  # f_t ≡ 0
    # choose x₀ with a small negative f₀
    xs = rng.normal(size=(2000, d))
    f0s, _ = forward_and_grad(params0, xs)
    k = int(np.argmin(np.where(f0s < 0, -f0s, np.inf)))
    x0 = xs[k : k + 1]
    f0_clean = f0s[k]
    assert -0.05 < f0_clean < 0
    delta = 0.5
    lo_t, _ = certify.ibp_bounds(None, _to_xp(params_t, asxp), asxp(x0 - delta), asxp(x0 + delta))
    official_lower = tonp(lo_t)[0] - f0_clean
    assert official_lower > 0  # the official code would certify radius 0.5 (in fact every radius)
    f0_grad = lambda p: forward_and_grad(params0, p)  # noqa: E731
    xa, _ = pgd_maximize(f0_grad, x0[0], delta, "linf", None, rng)  # maximise f₀ ⇔ minimise g = −f₀
    assert in_ball(xa, x0[0], delta, "linf", None)
    g_attack = 0.0 - forward_and_grad(params0, xa[None, :])[0][0]
    assert g_attack < 0  # the label flips inside the "certified" ball
    # ours: the radius for f − f₀ is smaller than the attack distance, and the attack fails at it
    r = tonp(certify.ibp_radius(None, _to_xp(params_t, asxp), asxp(x0), params0=_to_xp(params0, asxp)))[0]
    assert 0 < r < np.max(np.abs(xa - x0[0]))
    _, v = pgd_maximize(f0_grad, x0[0], r, "linf", None, rng)
    assert -v > 0  # max f₀ over the certified ball stays < 0, i.e. g = −f₀ > 0


def test_ibp_radius_at_init_scales_like_inverse_sqrt_width(asxp, tonp):
    """App. H.2: at initialisation the IBP interval radius grows like √m while f stays O(1), so the certified
    radius falls like m^{−1/2}.  Fixed seeds; the fitted log-log slope must lie in [−0.65, −0.35] (the
    asymptotic value −0.5 up to finite-width corrections and sampling noise of 3×16 points per width)."""
    widths = [64, 256, 1024, 4096]
    d = 20
    means = []
    for m in widths:
        radii = []
        for seed in range(3):
            rng = np.random.default_rng(1000 + seed)
            x = rng.normal(size=(16, d))
            params = init_params(np.random.default_rng(seed), [d, m, 1])
            radii.append(tonp(certify.ibp_radius(None, _to_xp(params, asxp), asxp(x), tol=1e-3)))
        means.append(np.mean(radii))
    slope = np.polyfit(np.log(widths), np.log(means), 1)[0]
    assert -0.65 <= slope <= -0.35, (slope, means)


def test_ibp_radius_uses_net_attributes_and_l2_first_layer(asxp, tonp):
    rng = np.random.default_rng(71)
    params = init_params(rng, [4, 10, 10, 1], bias=True)

    class Net:
        W_std = math.sqrt(2.0)
        b_std = 0.1

    x = rng.normal(size=(5, 4))
    r1 = tonp(certify.ibp_radius(Net(), _to_xp(params, asxp), asxp(x)))
    r2 = tonp(certify.ibp_radius(None, _to_xp(params, asxp), asxp(x), W_std=math.sqrt(2.0), b_std=0.1))
    np.testing.assert_array_equal(r1, r2)
    # ℓ2 ball of radius δ ⊂ ℓ∞ ball of radius δ, so the ℓ2 radius is at least the ℓ∞ one
    r_l2 = tonp(certify.ibp_radius(Net(), _to_xp(params, asxp), asxp(x), norm="l2"))
    assert np.all(r_l2 >= r1)


def test_float32_bounds_are_sound(asxp, tonp):
    """float32 inputs are computed in float32; the (d+4)·eps widening keeps the bounds sound."""
    rng = np.random.default_rng(81)
    X = rng.normal(size=(6, 30)).astype(np.float32)
    x0 = np.concatenate([rng.normal(size=(2, 30)), X[:1].astype(np.float64)]).astype(np.float32)
    alpha = rng.normal(size=6).astype(np.float32)
    for delta in (0.0, 1e-3, 0.1):
        lo, hi = certify.output_bounds(asxp(alpha), asxp(X), asxp(x0), delta)
        lo, hi = tonp(lo), tonp(hi)
        assert lo.dtype == np.float32
        for k in range(3):
            pts = random_ball_points(rng, x0[k].astype(np.float64), delta, "linf", None, 300)
            gv = g_np(alpha.astype(np.float64), X.astype(np.float64), pts)
            assert np.all(gv >= lo[k]) and np.all(gv <= hi[k])


# ---------------------------------------------------------------------------
# integration with ntkref.kernels and ntkref.nets (independent implementations of Θ and of the forward pass)
# ---------------------------------------------------------------------------
def test_clean_output_matches_ntkref_kernels(asxp, tonp):
    from ntkref import kernels
    rng = np.random.default_rng(91)
    X, y = _two_class_data(rng, 30, 7)
    Xt, _ = _two_class_data(rng, 10, 7)
    alpha = rng.normal(size=30)
    K = tonp(kernels.two_layer_relu_ntk(asxp(Xt), asxp(X)))
    _, info = certify.certified_radius(asxp(alpha), asxp(X), asxp(Xt), return_info=True)
    np.testing.assert_allclose(tonp(info["g"]), K @ alpha, rtol=1e-12, atol=1e-14)
    lo, hi = (tonp(a) for a in certify.ntk_interval(asxp(Xt), asxp(X), 0.0))
    assert np.all(lo <= K + 1e-14) and np.all(K <= hi + 1e-14)


def test_ibp_radius_accepts_ntkref_nets_fully_connected(asxp, tonp, xp):
    from ntkref import nets
    net = nets.FullyConnected(5, 16, depth=2, W_std=[1.0, math.sqrt(2.0), 1.0], b_std=0.2)
    params = net.init(3, xp=xp)
    params0 = net.init(4, xp=xp)
    x = np.random.default_rng(5).normal(size=(6, 5))
    r, info = certify.ibp_radius(net, params, asxp(x), params0=params0, return_info=True)
    f = tonp(net.apply(params, asxp(x))) - tonp(net.apply(params0, asxp(x)))
    np.testing.assert_allclose(tonp(info["g"]), f, rtol=1e-12, atol=1e-13)
    # and the bounds contain the net's own outputs on random points of each certified ball
    rng = np.random.default_rng(6)
    r = tonp(r)
    for k in range(6):
        pts = random_ball_points(rng, x[k], r[k], "linf", None, 100)
        g = tonp(net.apply(params, asxp(pts))) - tonp(net.apply(params0, asxp(pts)))
        assert np.all(np.sign(g) == np.sign(f[k])) or r[k] == 0


# ---------------------------------------------------------------------------
# device placement
# ---------------------------------------------------------------------------
def _certify_cases():
    rng = np.random.default_rng(21)
    X = rng.uniform(0, 1, size=(6, 3))
    Xt = rng.uniform(0, 1, size=(4, 3))
    alpha = np.array([1.0, -0.5, 0.0, 0.7, -0.2, 0.4])
    y = np.array([1.0, -1.0, 1.0, 1.0])
    params = init_params(rng, [3, 5, 1], bias=True)
    params0 = init_params(rng, [3, 5, 1], bias=True)

    def net(on):
        return [(on(W), on(b)) for W, b in params]

    return {
        "ntk_h": lambda on: certify.ntk_h(on(np.array([-1.0, 0.2, 1.0]))),
        "ntk_interval": lambda on: certify.ntk_interval(on(Xt), on(X), 0.05, domain=(0.0, 1.0)),
        "ntk_interval-paper-l2": lambda on: certify.ntk_interval(on(Xt), on(X), on(np.full(4, 0.05)), method="paper",
                                                                 norm="l2"),
        "dot_norm_ranges": lambda on: certify.dot_norm_ranges(on(Xt), on(X), 0.05, domain=(on(np.zeros(3)), 1.0),
                                                              exact_domain=True),
        "output_bounds": lambda on: certify.output_bounds(on(alpha), on(X), on(Xt), 0.05),
        "certified_radius": lambda on: certify.certified_radius(on(alpha), on(X), on(Xt), y=on(y), return_info=True),
        "certified_radius-domain": lambda on: certify.certified_radius(on(alpha), on(X), on(Xt), domain=(0.0, 1.0),
                                                                       norm="l2"),
        "certified_radius-no-support": lambda on: certify.certified_radius(on(np.zeros(6)), on(X), on(Xt)),
        "ibp_bounds": lambda on: certify.ibp_bounds(None, net(on), on(Xt - 0.1), on(Xt + 0.1), b_std=0.3),
        "ibp_radius": lambda on: certify.ibp_radius(None, net(on), on(Xt), b_std=0.3, domain=(0.0, 1.0),
                                                    params0=[(on(W), on(b)) for W, b in params0], y=on(y),
                                                    return_info=True),
    }


@pytest.mark.parametrize("case", sorted(_certify_cases()))
def test_public_functions_return_arrays_on_the_inputs_device(case):
    """Inputs on array_api_strict's device1 (a stand-in for a GPU, which refuses implicit NumPy
    conversion): every array returned is a strict array on device1 (scalar options such as a domain
    (0, 1) or a radius are created there too)."""
    import array_api_compat

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    result = _certify_cases()[case](lambda v: strict.asarray(v, device=dev))
    if isinstance(result, tuple) and isinstance(result[-1], dict):
        result = result[:-1] + tuple(v for v in result[-1].values() if not isinstance(v, int))
    arrays = result if isinstance(result, tuple) else (result,)
    for arr in arrays:
        assert array_api_compat.array_namespace(arr) is strict, type(arr)
        assert array_api_compat.device(arr) == dev, array_api_compat.device(arr)


# ---------------------------------------------------------------------------
# finite or error (issue 14): tolerances the dtype cannot resolve, negative W_std
# ---------------------------------------------------------------------------
def _problem14(asxp, dtype=np.float64):
    rng = np.random.default_rng(14)
    x_train = rng.normal(size=(5, 3)).astype(dtype)
    x_test = rng.normal(size=(4, 3)).astype(dtype)
    alpha = rng.normal(size=5).astype(dtype)
    params = [(asxp(rng.normal(size=(3, 8)).astype(dtype)), None), (asxp(rng.normal(size=(8, 1)).astype(dtype)), None)]
    return asxp(alpha), asxp(x_train), asxp(x_test), params


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tol_in_eps", [0.0, 1e-3, 0.45, 1.0, 3.9])
@pytest.mark.parametrize("fn", ["certified_radius", "ibp_radius"])
def test_tolerance_below_what_the_dtype_resolves_is_refused(asxp, dtype, tol_in_eps, fn):
    """certified_radius(..., tol=1e-16) returned all-NaN radii although tol ∈ (0, 1] was accepted: √(1 + tol)
    rounds to 1 and the grid collapses.  tol < 4·eps (of the computing dtype) raises, naming 'tol'."""
    alpha, x_train, x_test, params = _problem14(asxp, dtype)
    tol = tol_in_eps * float(np.finfo(dtype).eps)
    with pytest.raises(InvalidParameterError, match="'tol'"):
        if fn == "certified_radius":
            certify.certified_radius(alpha, x_train, x_test, tol=tol)
        else:
            certify.ibp_radius(None, params, x_test, tol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", ["certified_radius", "ibp_radius"])
def test_smallest_allowed_tolerance_gives_finite_certified_radii(asxp, tonp, dtype, fn):
    """At tol = 4·eps the radii are finite, positive where g(x₀) ≠ 0, and agree with a coarse tol's to its
    resolution (the finer grid can only refine: |r_fine − r_coarse| ≤ tol_coarse·r)."""
    alpha, x_train, x_test, params = _problem14(asxp, dtype)
    tol = 4.0 * float(np.finfo(dtype).eps)

    def run(t):
        if fn == "certified_radius":
            return tonp(certify.certified_radius(alpha, x_train, x_test, tol=t))
        return tonp(certify.ibp_radius(None, params, x_test, tol=t))

    fine, coarse = run(tol), run(1e-3)
    assert np.all(np.isfinite(fine)) and np.all(fine > 0)
    np.testing.assert_allclose(fine, coarse, rtol=2e-3)


@pytest.mark.parametrize("W_std", [-1.0, -1e-300, [1.0, -0.5], float("nan"), float("inf")])
def test_ibp_refuses_a_negative_or_non_finite_W_std(asxp, W_std):
    alpha, x_train, x_test, params = _problem14(asxp)
    with pytest.raises(InvalidParameterError, match="W_std"):
        certify.ibp_radius(None, params, x_test, W_std=W_std)
    with pytest.raises(InvalidParameterError, match="W_std"):
        certify.ibp_bounds(None, params, x_test, x_test, W_std=W_std)


# ---------------------------------------------------------------------------
# extreme scales (issue 14): Θ(a·x, b·x′) = ab·Θ(x, x′), the ball scales with its centre
# ---------------------------------------------------------------------------
def test_bounds_at_overflowing_scales_are_the_scaled_bounds(asxp, tonp):
    """x_train·1e300 or (x_test, δ)·1e300 used to give NaN (⟨x₀, x′⟩, ‖x₀‖² overflowed); the bounds are the
    unscaled ones times the scale (homogeneity), and still contain Θ at the centres (the NumPy oracle on the
    unscaled points, times the scale)."""
    rng = np.random.default_rng(31)
    X, Xt = rng.uniform(0, 1, size=(6, 3)), rng.uniform(0, 1, size=(4, 3))
    alpha = np.array([1.0, -0.5, 0.3, 0.7, -0.2, 0.4])
    lo, hi = (tonp(v) for v in certify.ntk_interval(asxp(Xt), asxp(X), 0.05))
    centre = theta_np(Xt[:, None, :], X[None, :, :])
    for s in (1e300, 2.0**996):
        lo_s, hi_s = (tonp(v) for v in certify.ntk_interval(asxp(Xt), asxp(s * X), 0.05))
        np.testing.assert_allclose(lo_s, s * lo, rtol=1e-13)
        np.testing.assert_allclose(hi_s, s * hi, rtol=1e-13)
        assert np.all(lo_s <= s * centre) and np.all(s * centre <= hi_s)
        gl, gu = (tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(X), asxp(Xt), 0.05))
        gl_s, gu_s = (tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(X), asxp(s * Xt), s * 0.05))
        np.testing.assert_allclose(gl_s, s * gl, rtol=1e-13)
        np.testing.assert_allclose(gu_s, s * gu, rtol=1e-13)
    # a power-of-two scale is exact: the same numbers bit for bit
    s = 2.0**996
    np.testing.assert_array_equal(tonp(certify.ntk_interval(asxp(s * Xt), asxp(X), s * 0.05)[0]), s * lo)
    # both arguments at 1e300: |Θ| ~ 1e600 is not a float64; an error naming them
    with pytest.raises(InvalidParameterError, match="x_train"):
        certify.ntk_interval(asxp(1e300 * Xt), asxp(1e300 * X), 0.05)


def test_certified_radius_on_a_dask_x_test_equals_numpy():
    """A Dask ``x_test`` (row chunks) gives the lazy radii of the Dask engine: equal to the NumPy radii."""
    da = pytest.importorskip("dask.array")
    import dask

    rng = np.random.default_rng(32)
    X, Xt = rng.uniform(0, 1, size=(8, 3)), rng.uniform(0, 1, size=(7, 3))
    alpha = rng.normal(size=8)
    y = np.where(rng.normal(size=7) > 0, 1.0, -1.0)
    ref = certify.certified_radius(alpha, X, Xt, y=y, norm="l2", tol=1e-6)
    lazy = certify.certified_radius(alpha, X, da.from_array(Xt, chunks=(3, 3)), y=y, norm="l2", tol=1e-6)
    assert isinstance(lazy, da.Array)
    with dask.config.set(scheduler="synchronous"):
        got = lazy.compute()
    np.testing.assert_array_equal(got, ref)
    assert np.any(ref > 0)  # the comparison is not between two all-zero results


# ---------------------------------------------------------------------------
# every finite scale (review defect 2): tiny inputs too, in float64 and float32
# ---------------------------------------------------------------------------
def _theta_mp(a, b):
    """Θ(a, b) of seed 000 eq. (63) in 50-digit arithmetic on the exact values of the float rows a, b."""
    with mpmath.workdps(50):
        a = [mpmath.mpf(float(v)) for v in a]
        b = [mpmath.mpf(float(v)) for v in b]
        na = mpmath.sqrt(mpmath.fsum(v * v for v in a))
        nb = mpmath.sqrt(mpmath.fsum(v * v for v in b))
        if na == 0 or nb == 0:
            return mpmath.mpf(0)
        u = mpmath.fsum(p * q for p, q in zip(a, b)) / (na * nb)
        u = min(max(u, mpmath.mpf(-1)), mpmath.mpf(1))
        return na * nb * (2 * u * (mpmath.pi - mpmath.acos(u)) + mpmath.sqrt(1 - u * u)) / (2 * mpmath.pi * len(a))


def _scaled_problem(scale, dtype, seed=41):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(6, 4)) * scale).astype(dtype)
    X0 = (rng.normal(size=(5, 4)) * scale).astype(dtype)
    X0[1] = -X[2]  # an antiparallel pair (u = −1, Θ = 0) and a parallel one (u = 1), where h is steepest
    X0[3] = X[4]
    alpha = rng.normal(size=6).astype(dtype)
    return X, X0, alpha


# (scale, dtype): Θ ~ scale² is a normal float at 1e-150 (float64) and 1e-15 (float32), where the products
# ‖x‖²‖x′‖², (R − p)(R + p) of the unscaled formula underflow; at 1e-160 / 1e-21 Θ itself is below the
# normal range and the interval must still contain it
_SCALES = [(1e-150, np.float64), (1e-160, np.float64), (1.0, np.float64), (1e100, np.float64),
           (1e-15, np.float32), (1e-21, np.float32), (1.0, np.float32), (1e12, np.float32)]


@pytest.mark.parametrize("scale, dtype", _SCALES)
def test_interval_contains_the_mpmath_ntk_at_every_scale(asxp, tonp, scale, dtype):
    """[Θᴸ, Θᵁ] at δ = 0 must contain Θ(x₀, xᵢ) computed with 50 digits from the same float inputs, at every
    finite scale.  Before the fix inputs with max|x| < 2 were not rescaled: at 1e-150 the interval was
    [−1.25e-315, 1.25e-315] for Θ = −6.57e-302 (‖x‖²‖x′‖² underflowed), and float32 at 1e-15 missed Θ by
    0.13·max|Θ|.  Where Θ is a normal float the interval is also tight: relative width ≤ 1e-6 (float64;
    at δ = 0 it is O(√((d + 4)eps)) only at u = ±1) or 1e-2 (float32) of ‖x₀‖‖xᵢ‖/d."""
    X, X0, _ = _scaled_problem(scale, dtype)
    for method in ("tight", "paper"):
        lo, hi = (tonp(v) for v in certify.ntk_interval(asxp(X0), asxp(X), 0.0, method=method))
        assert lo.dtype == dtype and hi.dtype == dtype
        for k in range(X0.shape[0]):
            for i in range(X.shape[0]):
                ref = _theta_mp(X0[k], X[i])
                assert mpmath.mpf(float(lo[k, i])) <= ref <= mpmath.mpf(float(hi[k, i])), (method, k, i, lo[k, i],
                                                                                           ref, hi[k, i])
        norms = np.outer(np.linalg.norm(X0.astype(float), axis=1), np.linalg.norm(X.astype(float), axis=1)) / 4
        if norms.min() > 1e6 * float(np.finfo(dtype).smallest_normal):  # Θ well inside the normal range
            width = (hi.astype(float) - lo.astype(float)) / norms
            assert width.max() <= (1e-6 if dtype == np.float64 else 1e-2), width.max()


@pytest.mark.parametrize("scale, dtype", _SCALES)
def test_output_bounds_contain_the_mpmath_output_at_every_scale(asxp, tonp, scale, dtype):
    """g(x₀) = Σᵢ αᵢΘ(x₀, xᵢ) (50 digits) lies in output_bounds at δ = 0, at every scale (before the fix:
    not at 1e-150, where the bounds were ~1e-315 for g ~ 1e-301)."""
    X, X0, alpha = _scaled_problem(scale, dtype)
    lo, hi = (tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(X), asxp(X0), 0.0))
    for k in range(X0.shape[0]):
        with mpmath.workdps(50):
            g = mpmath.fsum(mpmath.mpf(float(alpha[i])) * _theta_mp(X0[k], X[i]) for i in range(X.shape[0]))
        assert mpmath.mpf(float(lo[k])) <= g <= mpmath.mpf(float(hi[k])), (k, lo[k], g, hi[k])


@pytest.mark.parametrize("dtype, exps", [(np.float64, (-540, -60, 60, 400)), (np.float32, (-70, -20, 20, 40))])
def test_bounds_and_radii_are_exactly_homogeneous_for_powers_of_two(asxp, tonp, dtype, exps):
    """The module's conventions: Θ(a·x, b·x′) = ab·Θ(x, x′) for a, b > 0 and the ball {‖x − x₀‖ ≤ δ} scales
    with x₀, so with s = 2ᵏ, t = 2ʲ (exact scalings of the inputs):
    ntk_interval(s·x₀, t·xᵢ, s·δ) = st·ntk_interval(x₀, xᵢ, δ), output_bounds(c·α, t·xᵢ, s·x₀, s·δ) =
    cst·output_bounds(α, xᵢ, x₀, δ), and certified_radius(c·α, t·xᵢ, s·x₀) = s·certified_radius(α, xᵢ, x₀)
    (g is scaled by cst > 0, so its sign and the certified set scale with the ball; tol is relative), also
    with max_radius scaled by s — all bit for bit, because the computation normalises every input by a
    power of two.  Before the fix only scales ≥ 2 were normalised: at s = 2⁻⁵⁴⁰ (float64) or 2⁻⁷⁰ (float32)
    ‖x₀‖²‖xᵢ‖² underflowed and neither identity held."""
    X, X0, alpha = _scaled_problem(1.0, dtype, seed=42)
    y = np.sign(tonp(certify.output_bounds(asxp(alpha), asxp(X), asxp(X0), 0.0)[0]))
    ref_int = [tonp(v) for v in certify.ntk_interval(asxp(X0), asxp(X), 0.01, norm="l2")]
    ref_out = [tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(X), asxp(X0), 0.01)]
    ref_rad = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(X0)))
    ref_cap = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(X0), norm="l2", max_radius=0.05, y=asxp(y)))
    assert np.any(ref_rad > 0) and np.any((ref_cap > 0) & (ref_cap < 0.05))
    for k in exps:
        s, t, c = 2.0**k, 2.0**-k, 2.0 ** (k // 2)
        sX0, tX, cal = (X0 * dtype(s)).astype(dtype), (X * dtype(t)).astype(dtype), (alpha * dtype(c)).astype(dtype)
        got = [tonp(v) for v in certify.ntk_interval(asxp(sX0), asxp(tX), 0.01 * s, norm="l2")]
        for a, b in zip(got, ref_int):
            np.testing.assert_array_equal(a, b)  # s·t = 1
        got = [tonp(v) for v in certify.output_bounds(asxp(cal), asxp(tX), asxp(sX0), 0.01 * s)]
        for a, b in zip(got, ref_out):
            np.testing.assert_array_equal(a, b * dtype(c))
        got = [tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(X), asxp(sX0), 0.01 * s)]
        for a, b in zip(got, ref_out):
            np.testing.assert_array_equal(a, b * dtype(s))
        np.testing.assert_array_equal(tonp(certify.certified_radius(asxp(cal), asxp(tX), asxp(sX0))),
                                      ref_rad * dtype(s))
        capped = certify.certified_radius(asxp(cal), asxp(tX), asxp(sX0), norm="l2", max_radius=0.05 * s, y=asxp(y))
        np.testing.assert_array_equal(tonp(capped), ref_cap * dtype(s))


@pytest.mark.parametrize("scale, dtype", [(1e-150, np.float64), (1e100, np.float64), (1e-15, np.float32)])
def test_certified_radius_scales_with_the_inputs(asxp, tonp, scale, dtype):
    """radius(s·x₀) = s·radius(x₀) for any s > 0 (the ball scales with x₀); s·x₀ is rounded for s ≠ 2ᵏ, which
    moves the certified set by a relative eps and the grid top·(1 + tol)^(−k/2) with it, so the radii agree to
    within one grid step (1 + tol).  Before the fix the radius at 1e-150 was up to 1.8 times s·radius(x₀)
    (certified where the sound bound fails).  The radius is also certified: output_bounds on the ball has the
    sign of g(x₀)."""
    X, X0, alpha = _scaled_problem(1.0, dtype, seed=43)
    tol = 1e-4 if dtype == np.float64 else 1e-3
    ref = tonp(certify.certified_radius(asxp(alpha), asxp(X), asxp(X0), tol=tol))
    sX0, sX = (X0 * scale).astype(dtype), (X * scale).astype(dtype)
    got, info = certify.certified_radius(asxp(alpha), asxp(sX), asxp(sX0), tol=tol, return_info=True)
    got = tonp(got)
    assert np.any(ref > 0)
    ratio = got.astype(float) / (scale * ref.astype(float))
    assert np.all(np.abs(np.log(ratio[ref > 0])) <= 1.01 * math.log1p(tol)), ratio
    assert np.all(got[ref == 0] == 0)
    lo, hi = (tonp(v) for v in certify.output_bounds(asxp(alpha), asxp(sX), asxp(sX0), asxp(got)))
    sign = tonp(info["sign"])
    assert np.all(np.where(sign > 0, lo, -hi)[got > 0] > 0)


@pytest.mark.parametrize("dtype, allowed, refused", [(np.float64, -200, -260), (np.float32, -20, -30)])
def test_rows_of_very_different_magnitude_are_sound_or_refused(asxp, tonp, dtype, allowed, refused):
    """The normalisation is per array: a test row and a training row both 2^k below their arrays' largest give
    R = ‖x₀‖‖x′‖ ~ 2^2k after it.  Where (R − p)(R + p) stays normal (k = −200 in float64, −20 in float32) the
    interval of that pair contains the 50-digit Θ (a parallel pair, the worst case for the cancellation); below
    (k = −260: such pairs' intervals missed Θ before, in 18 of 20 random float64 cases) the call is refused,
    naming the inputs."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3, 4)).astype(dtype)
    X0 = rng.normal(size=(2, 4)).astype(dtype)
    for k, ok in ((allowed, True), (refused, False)):
        Xk, X0k = X.copy(), X0.copy()
        Xk[0] = np.ldexp(X[1], k)  # tiny rows, parallel to each other, beside ordinary ones
        X0k[0] = np.ldexp(X[1], k)
        if not ok:
            with pytest.raises(InvalidParameterError, match="x_train"):
                certify.ntk_interval(asxp(X0k), asxp(Xk), 0.0)
            continue
        lo, hi = (tonp(v) for v in certify.ntk_interval(asxp(X0k), asxp(Xk), 0.0))
        for i in range(2):
            for j in range(3):
                ref = _theta_mp(X0k[i], Xk[j])
                assert mpmath.mpf(float(lo[i, j])) <= ref <= mpmath.mpf(float(hi[i, j])), (i, j)
