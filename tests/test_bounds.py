"""Gap bounds (Thm 3.5 / App. F, corrected), PL condition, generalisation bound (App. B)."""
import math
import os
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import InvalidParameterError, bounds, losses, nets
from ntkref._lib.backend import asarray, to_numpy

from .test_training import km_descent


def test_printed_gronwall_step_fails_and_the_corrected_bound_holds():
    """Seed 000 App. F (docs/errata.md): u(T) ≤ ∫₀ᵀ e^{−λ(T−t)}(c u + a) dt is satisfied with equality by u' = (c − λ)u + a,
    u(0) = 0, i.e. u(T) = a(e^{(c−λ)T} − 1)/(c − λ) → 2 for λ = 1, c = ½, a ≡ 1.  The printed
    consequence e^{c/λ}·(1 − e^{−λT})/λ → e^{½} ≈ 1.65 is smaller: violated.  The corrected
    ∫₀ᵀ e^{(c−λ)(T−t)} a dt equals u(T)."""
    lam, c, T = 1.0, 0.5, 40.0
    t = np.linspace(0, T, 4001)
    u_T = (math.exp((c - lam) * T) - 1) / (c - lam)
    # the hypothesis holds with equality (checked by quadrature of the explicit solution)
    u = (np.exp((c - lam) * t) - 1) / (c - lam)
    integrand = np.exp(-lam * (T - t)) * (c * u + 1)
    assert abs(np.trapezoid(integrand, t) - u_T) < 1e-4
    # logistic: ρ = 1, β_l = ¼ → c = β_l‖Θ̂₀‖ = ½ with ‖Θ̂₀‖ = 2; n = 1, drift ≡ 1 → a ≡ 1
    printed = bounds.printed_gap_bound(t, np.ones_like(t), lam, "logistic", 2.0, 1)
    corrected = bounds.gronwall_gap_bound(t, np.ones_like(t), lam, "logistic", 2.0, 1)
    assert printed == pytest.approx(math.exp(0.5), rel=1e-6)
    assert u_T > printed + 0.3  # the printed "bound" is violated
    assert corrected == pytest.approx(u_T, rel=1e-9)


def test_discrete_bound_is_exact_for_the_extremal_recursion():
    """The discrete bound is attained by e_{k+1} = (1 − ηλ + ηc)e_k + ηa (all inequalities tight)."""
    lr, lam, K = 0.01, 1.0, 500
    out = bounds.gronwall_gap_bound_discrete(lr, np.ones(K + 1), lam, "logistic", 2.0, 1)
    e = 0.0
    for k in range(K):
        e = (1 - lr * lam + lr * 0.5) * e + lr
    assert out[-1] == pytest.approx(e, rel=1e-12)


# ------------------------------------------------------------------ the exponentially weighted integral
# ∫₀ᵀ e^{r(T−s)} a(s) ds for the piecewise-linear a through (tₖ, aₖ): gronwall_gap_bound (r = c − λ),
# convex_gap_bound (r = −λ) and printed_gap_bound (r = −λ, times e^{(1−e^{−λT})c/λ}) all reduce to it.


def _quad_piecewise(t, a, rate):
    """Independent route: scipy quad of e^{r(T−s)}·(linear interpolation of a) on every step (no closed form)."""
    from scipy.integrate import quad

    T = t[-1]
    total = 0.0
    for k in range(len(t) - 1):
        t0, t1, a0, a1 = t[k], t[k + 1], a[k], a[k + 1]

        def f(s, t0=t0, t1=t1, a0=a0, a1=a1):
            return math.exp(rate * (T - s)) * (a0 + (a1 - a0) * (s - t0) / (t1 - t0))

        total += quad(f, t0, t1, epsabs=0.0, epsrel=1e-13, limit=200)[0]
    return total


def _nonuniform_grid(rng, kind):
    """Strictly increasing grids whose steps are ≪ 1, ≫ 1 or both (spanning 1e-3 .. 1e2)."""
    steps = {"small": 10.0 ** rng.uniform(-3, -1, 12), "large": 10.0 ** rng.uniform(0.3, 2, 6),
             "mixed": 10.0 ** rng.uniform(-3, 2, 12)}[kind]
    t0 = rng.uniform(-1, 1)
    return np.concatenate([[t0], t0 + np.cumsum(steps)])


@pytest.mark.parametrize("kind", ["small", "large", "mixed"])
@pytest.mark.parametrize("lam", [0.0, 1e-12, 1e-6, 0.05, 0.7, 3.0])
def test_weighted_integral_matches_quadrature_on_nonuniform_grids(asxp, kind, lam):
    """The three continuous bounds against scipy quad of the same integrand on random non-uniform grids with a
    non-constant drift (rates r = −λ and r = c − λ of both signs; λ·h from 0 through tiny, where the series
    branch of the step weights is used, to ≫ 1).  The code before the fix multiplied the linear part
    ∫₀ʰ e^{r(h−s)} (s/h) ds = (eˣ − 1 − x)/(r x) (x = r·h) by an extra h: for t = [0, 0.1], a = [0, 1], λ = 1 it
    returned 0.004837 instead of ∫₀^0.1 e^{−(0.1−s)} (s/0.1) ds = 0.048374 — an unsound bound ten times too
    small (and h times too large for h > 1); unit steps and constant drifts, the earlier tests, hide it."""
    rng = np.random.default_rng(zlib.crc32(f"{kind} {lam}".encode()))
    t = _nonuniform_grid(rng, kind)
    T = t[-1] - t[0]
    if lam * T > 600:  # keep e^{λT}-sized weights inside quad's comfortable range
        t = t[0] + (t - t[0]) * (600 / (lam * T))
    b = rng.uniform(0.0, 2.0, t.size)  # non-constant, non-negative
    lmin, lmax = 0.3, 2.5
    got = bounds.convex_gap_bound(asxp(t), asxp(b), lam, (lmin, lmax))
    ref = math.sqrt(lmax) * _quad_piecewise(t, b, -lam)
    assert got == pytest.approx(ref, rel=1e-9, abs=0.0)
    if lam > 0:  # logistic: ρ = 1, β_l = ¼, so a = √n·drift and c = ‖Θ̂₀‖/4; r = c − λ = ±λ/2
        n = 3
        for k0 in (2.0 * lam, 6.0 * lam):
            rate = k0 / 4 - lam
            got = bounds.gronwall_gap_bound(asxp(t), asxp(b), lam, "logistic", k0, n)
            assert got == pytest.approx(math.sqrt(n) * _quad_piecewise(t, b, rate), rel=1e-9, abs=0.0)
        k0 = 2.0 * lam
        printed = bounds.printed_gap_bound(asxp(t), asxp(b), lam, "logistic", k0, n)
        factor = math.exp((1 - math.exp(-lam * (t[-1]))) * (k0 / 4) / lam)
        assert printed == pytest.approx(factor * math.sqrt(n) * _quad_piecewise(t, b, -lam), rel=1e-9, abs=0.0)


@pytest.mark.parametrize("x", [0.0, 1e-14, -1e-14, 5e-9, -5e-9, 2e-8, 1e-6, -1e-3, 0.3, -0.7, 1 - 2**-52, 1.0,
                               1 + 2**-52, -(1 - 2**-52), -1.0, -(1 + 2**-52), 7.0, -40.0])
@pytest.mark.parametrize("h", [1e-3, 1.0, 250.0])
def test_one_step_weights_against_mpmath(x, h):
    """One step [0, h] with x = r·h around the branch switch |x| = 1 and in the small-|x| range, against the
    50-digit values ∫₀ʰ e^{r(h−s)} ds = h(eˣ − 1)/x and ∫₀ʰ e^{r(h−s)} (s/h) ds = h(eˣ − 1 − x)/x² (drifts
    [1, 1] and [0, 1] on convex_gap_bound, r = −λ).  Before the fix |x| < 1e-8 used (h, h/2), off by a relative
    x/2 and x/3 (5e-9 → 2.5e-9, below the integral: unsound), and just above 1e-8 the closed form lost
    2eps/|x| to the cancellation of eˣ − 1 − x (2e-8 → 1e-8)."""
    import mpmath as mp

    mp.mp.dps = 50

    def weights(X):  # h·E₁(X), h·E₂(X) in 50 digits
        if X == 0:
            return mp.mpf(h), mp.mpf(h) / 2
        return mp.mpf(h) * mp.expm1(X) / X, mp.mpf(h) * (mp.expm1(X) - X) / X**2

    if x <= 0:  # r = −λ ≤ 0 through convex_gap_bound
        lam = -x / h
        w0, w1 = weights(-mp.mpf(lam) * mp.mpf(h))  # the rounded r·h the code sees, exactly
        eig = (1.0, 1.0)
        assert bounds.convex_gap_bound([0.0, h], [1.0, 1.0], lam, eig) == pytest.approx(float(w0), rel=1e-14, abs=0)
        assert bounds.convex_gap_bound([0.0, h], [0.0, 1.0], lam, eig) == pytest.approx(float(w1), rel=1e-14, abs=0)
    # r = c − λ = x/h (either sign) through gronwall_gap_bound (logistic: c = ‖Θ̂₀‖/4, a = drift for n = 1)
    r = x / h
    lam_g = 1.0 + abs(r)
    k0 = 4 * (r + lam_g)
    v0, v1 = weights((mp.mpf(k0) / 4 - mp.mpf(lam_g)) * mp.mpf(h))
    got0 = bounds.gronwall_gap_bound([0.0, h], [1.0, 1.0], lam_g, "logistic", k0, 1)
    got1 = bounds.gronwall_gap_bound([0.0, h], [0.0, 1.0], lam_g, "logistic", k0, 1)
    # the code rounds c − λ (up to eps·(c + λ) absolutely), then times h: allow that conditioning
    rel = 1e-14 + 4 * 2.0**-52 * (k0 / 4 + lam_g) * h * (1 + abs(x))
    assert got0 == pytest.approx(float(v0), rel=rel, abs=0)
    assert got1 == pytest.approx(float(v1), rel=rel, abs=0)


def test_bound_is_above_the_exact_gap_of_the_extremal_system_on_a_nonuniform_grid():
    """The extremal system u′ = (c − λ)u + a(t), u(0) = 0 satisfies App. F's integral inequality with equality,
    so u(T) = ∫₀ᵀ e^{(c−λ)(T−s)} a(s) ds is a gap the bound must cover.  With a convex drift a(t) = 0.1 + t² the
    piecewise-linear interpolation on any grid lies above a, so the bound must be ≥ u(T) (solved here by an ODE
    integrator, an independent route) and exceed it by at most the interpolation error
    max_k hₖ²/8·max|a″| · ∫₀ᵀ e^{(c−λ)(T−s)} ds.  The old formula gave 0.50 of u(T) on this grid (steps 0.05..0.4)."""
    from scipy.integrate import solve_ivp

    lam, k0 = 1.0, 2.0  # logistic: c = ½, r = −½
    rate = k0 / 4 - lam
    steps = np.array([0.05, 0.4, 0.1, 0.3, 0.05, 0.2, 0.35, 0.15, 0.4, 0.05, 0.25])
    t = np.concatenate([[0.0], np.cumsum(steps)])
    T = t[-1]
    sol = solve_ivp(lambda s, u: rate * u + 0.1 + s**2, (0.0, T), [0.0], rtol=1e-12, atol=1e-14)
    u_T = sol.y[0, -1]
    bound = bounds.gronwall_gap_bound(t, 0.1 + t**2, lam, "logistic", k0, 1)
    excess = steps.max() ** 2 / 8 * 2.0 * math.expm1(rate * T) / rate
    assert u_T <= bound <= u_T + excess, (u_T, bound, excess)


def _nn_vs_km(width, depth, loss, lam, lr, steps, seed, n=10, regularize="from_init"):
    """Train on the namespace and device under test; results come back with ``to_numpy`` (explicit copies)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = np.where(x[:, 0] + 0.5 * x[:, 1] > 0, 1.0, -1.0)
    xt = rng.normal(size=(4, 3))
    net = nets.Antisymmetric(nets.FullyConnected(3, width, depth=depth))
    p = net.init(seed)  # the default namespace on the default device (NTKREF_BACKEND/NTKREF_DEVICE)
    tr = nets.train(net, p, asarray(x), asarray(y), loss, lam, lr, steps, x_test=asarray(xt), track_kernel=True,
                    regularize=regularize)
    K0, K0t = to_numpy(tr.kernel0), to_numpy(tr.kernel0_test)
    g, gt = km_descent(K0, K0t, y, loss, lam, lr, steps)
    return tr, g, gt, K0, K0t


@settings(max_examples=6, report_multiple_bugs=False)
@given(
    seed=st.integers(0, 10_000),
    width=st.sampled_from([16, 64, 256]),
    depth=st.integers(1, 2),
    loss=st.sampled_from(["squared", "logistic", "squared_hinge"]),
    lam=st.floats(0.05, 2.0),
    lr=st.sampled_from([0.002, 0.01]),
)
def test_measured_gap_is_below_the_corrected_and_the_convex_bounds(seed, width, depth, loss, lam, lr):
    tr, g, gt, K0, K0t = _nn_vs_km(width, depth, loss, lam, lr, 60, seed)
    f = to_numpy(tr.f_train)
    gap = np.linalg.norm(f - g, axis=1)
    n = K0.shape[0]
    w = np.linalg.eigvalsh(K0)
    lpn = np.linalg.norm(to_numpy(tr.lprime), axis=1)
    U = to_numpy(bounds.gronwall_gap_bound_discrete(lr, tr.drift, lam, loss, w[-1], n, remainder=tr.remainder,
                                                    lprime_norm=lpn))
    slack = 1e-12 * (1 + np.abs(f).max())
    assert np.all(gap <= U + slack), (gap.max(), U.max())
    if losses.get(loss).lipschitz is not None:  # the theorem's form with ρ√n is weaker, hence also valid
        U_rho = to_numpy(bounds.gronwall_gap_bound_discrete(lr, tr.drift, lam, loss, w[-1], n, remainder=tr.remainder))
        assert np.all(U <= U_rho + slack)
    L = losses.get(loss)
    if lr * L.smoothness * w[-1] <= 2 * (1 - lr * lam) and w[0] > 0:
        V = to_numpy(bounds.convex_gap_bound(lr, tr.convex_integrand, lam, (w[0], w[-1]), discrete=True, loss=loss,
                                             remainder=tr.remainder))
        assert np.all(gap <= V + slack), (gap.max(), V.max())
    # test points (App. F.2 with the training bound plugged in, no Grönwall step)
    Ut = to_numpy(bounds.gap_bound_test_points(
        lr, U, tr.drift_test, lam, loss, np.linalg.norm(K0t, axis=1), n, remainder_test=tr.remainder_test, lprime_norm=lpn
    ))
    assert np.all(np.abs(to_numpy(tr.f_test) - gt) <= Ut + slack)


def _final_gaps(widths, loss, regularize, seeds=4, lr=0.05, steps=60):
    gaps = []
    for m in widths:
        vals = []
        for seed in range(seeds):
            tr, g, _, _, _ = _nn_vs_km(m, 1, loss, 0.5, lr, steps, seed, regularize=regularize)
            vals.append(np.linalg.norm(to_numpy(tr.f_train)[-1] - g[-1]))
        gaps.append(np.mean(vals))
    return np.array(gaps)


def test_gap_shrinks_like_inverse_sqrt_width_for_the_svm():
    """Hinge loss (the SVM case): ‖f_T − g_T‖ with g the KM with Θ̂(w₀) shrinks like m^{-1/2}: fitted
    log-log slope in [−0.75, −0.3] over widths spanning 32× (mean of 4 seeds; measured ≈ −0.57)."""
    widths = [64, 256, 2048]
    gaps = _final_gaps(widths, "hinge", "from_init")
    slope = np.polyfit(np.log(widths), np.log(gaps), 1)[0]
    assert -0.75 <= slope <= -0.3, (gaps, slope)


def test_gap_shrinks_at_least_as_fast_for_smooth_losses():
    """Smooth losses: the gap shrinks at least like the m^{-1/2} of Thm 3.5 (measured ≈ −0.8: the O(m^{-1/2})
    fluctuations of Θ̂_t − Θ̂₀ largely cancel in (Θ̂_t − Θ̂₀)l', leaving an O(1/m) mean)."""
    widths = [64, 256, 2048]
    gaps = _final_gaps(widths, "logistic", "from_init")
    slope = np.polyfit(np.log(widths), np.log(gaps), 1)[0]
    assert -1.1 <= slope <= -0.45, (gaps, slope)


def test_readout_regularisation_breaks_the_equivalence():
    """Seed error: with (7)'s regulariser on the readout only, in NTK parameterisation, the readout weights
    decay like e^{−λt} (an O(1) relative change at any width), so Θ̂_t ≈ Θ̂_readout + e^{−2λt}Θ̂_hidden keeps
    drifting by O(λt) as m → ∞ and the NN does *not* approach the KM with Θ̂(w₀) (Thm 3.4, Table 1).
    Regularising ‖w − w₀‖² instead recovers −λf up to O(m^{-1/2}) and the gap vanishes."""
    widths = [64, 2048]
    readout = _final_gaps(widths, "logistic", "readout", seeds=2)
    from_init = _final_gaps(widths, "logistic", "from_init", seeds=2)
    assert readout[1] > 0.5 * readout[0] and readout[1] > 0.3  # no convergence with width
    assert from_init[1] < 0.15 * from_init[0]
    # and the kernel drift itself does not vanish at large width under the readout regulariser
    tr, *_ = _nn_vs_km(2048, 1, "logistic", 0.5, 0.05, 60, 0, regularize="readout")
    K0 = to_numpy(tr.kernel0)
    assert float(tr.drift[-1]) > 0.2 * np.linalg.norm(K0, 2)


def test_convex_bound_is_sharper_than_gronwall_on_long_runs():
    tr, g, _, K0, _ = _nn_vs_km(128, 1, "logistic", 0.2, 0.01, 400, 3)
    w = np.linalg.eigvalsh(K0)
    U = to_numpy(bounds.gronwall_gap_bound_discrete(0.01, tr.drift, 0.2, "logistic", w[-1], 10, remainder=tr.remainder))
    V = to_numpy(bounds.convex_gap_bound(0.01, tr.convex_integrand, 0.2, (w[0], w[-1]), discrete=True, loss="logistic",
                                         remainder=tr.remainder))
    gap = np.linalg.norm(to_numpy(tr.f_train) - g, axis=1)
    assert np.all(gap <= V + 1e-12) and V[-1] < U[-1]


def test_pl_condition(asxp):
    K = asxp(np.diag([3.0, 1.0, 0.5]))
    ok, lmin, need = bounds.pl_condition(K, 0.2)
    assert ok and lmin == pytest.approx(0.5) and need == pytest.approx(0.4)
    assert not bounds.pl_condition(K, 0.3)[0]
    with pytest.raises(InvalidParameterError):
        bounds.pl_condition(K, 0.0)


def test_hinge_needs_the_convex_bound():
    with pytest.raises(InvalidParameterError, match="not smooth"):
        bounds.gronwall_gap_bound([0, 1], [0, 0], 1.0, "hinge", 1.0, 3)
    with pytest.raises(InvalidParameterError, match="not Lipschitz"):
        bounds.gronwall_gap_bound([0, 1], [0, 0], 1.0, "squared", 1.0, 3)


def test_rademacher_bound_formula_and_validation(asxp):
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    a = np.array([1.0, -1.0])
    B = math.sqrt(a @ K @ a)
    expect = 0.1 + 2 * 1 * B / 2 * math.sqrt(3.0) + 3 * 1 * math.sqrt(math.log(2 / 0.01) / 4)
    assert bounds.rademacher_bound(asxp(K), asxp(a), 0.1, delta=0.01, c=1.0, rho=1.0) == pytest.approx(expect, rel=1e-14)
    with pytest.raises(InvalidParameterError, match="delta"):
        bounds.rademacher_bound(asxp(K), asxp(a), 0.1, delta=1.5, c=1.0, rho=1.0)


MNIST = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "mnist-subset")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(MNIST), reason="shared MNIST subset not present")
def test_generalisation_bound_holds_on_mnist():
    """App. B on real data: a width-100 net trained on 300 MNIST 0/1 digits, its Thm-4.1 KM, and the
    Rademacher bound with the ramp loss (c = ρ = 1, δ = 0.01) ≥ the held-out ramp loss of the network."""
    from ntkref.datasets import binary_digits, load_mnist

    X, y = binary_digits(*load_mnist(MNIST))
    Xtr, ytr, Xte, yte = X[:300], y[:300], X[300:1300], y[300:1300]
    net = nets.FullyConnected(784, 100)
    p = net.init(0)
    lam, lr, steps = 0.001 * 300, 0.0005, 60
    tr = nets.train(net, p, asarray(Xtr), asarray(ytr), "hinge", lam, lr, steps, subtract_f0=True, track_kernel=True)
    K = to_numpy(tr.km_kernel)
    a = -np.sign(to_numpy(tr.lprime)[0])
    f_km = K @ a
    f_nn = to_numpy(tr.f_train)[-1]
    assert np.max(np.abs(f_km - f_nn)) < 0.05 * np.max(np.abs(f_nn)) + 1e-3  # the KM is the network
    emp = float(np.mean(to_numpy(bounds.ramp_loss(f_km, ytr))))
    bound = bounds.rademacher_bound(K, a, emp, delta=0.01, c=1.0, rho=1.0)
    Xte_x = asarray(Xte)
    f_test = to_numpy(net.apply(tr.params, Xte_x)) - to_numpy(net.apply(p, Xte_x))
    held_out = float(np.mean(to_numpy(bounds.ramp_loss(f_test, yte))))
    assert held_out <= bound < 1.5, (held_out, bound)


# ------------------------------------------------------------------ device placement


def _bounds_cases():
    t = np.linspace(0.0, 1.0, 5)
    drift = np.linspace(0.0, 0.2, 5)
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    return {
        "printed_gap_bound": lambda on: bounds.printed_gap_bound(on(t), on(drift), 1.0, "logistic", 2.0, 3),
        "gronwall_gap_bound": lambda on: bounds.gronwall_gap_bound(on(t), on(drift), 1.0, "logistic", 2.0, 3),
        "gronwall_gap_bound_discrete": lambda on: bounds.gronwall_gap_bound_discrete(
            0.01, on(drift), 1.0, "logistic", 2.0, 3, remainder=on(drift[:-1]), lprime_norm=on(drift + 1)),
        "convex_gap_bound": lambda on: bounds.convex_gap_bound(on(t), on(drift), 1.0, (0.5, 2.0)),
        "convex_gap_bound-discrete": lambda on: bounds.convex_gap_bound(
            0.01, on(drift), 1.0, (0.5, 2.0), discrete=True, loss="logistic", remainder=on(drift[:-1])),
        "gap_bound_test_points": lambda on: bounds.gap_bound_test_points(
            0.01, on(drift), on(np.stack([drift, drift], axis=1)), 1.0, "logistic", on(np.array([1.0, 2.0])), 3),
        "pl_condition": lambda on: bounds.pl_condition(on(K), 0.2),
        "rademacher_bound": lambda on: bounds.rademacher_bound(on(K), on(np.array([1.0, -1.0])), 0.1, delta=0.01,
                                                               c=1.0, rho=1.0),
        "ramp_loss": lambda on: bounds.ramp_loss(on(np.array([0.5, -2.0])), on(np.array([1.0, 1.0]))),
    }


@pytest.mark.parametrize("case", sorted(_bounds_cases()))
def test_public_functions_return_arrays_on_the_inputs_device(case):
    """Inputs on array_api_strict's device1 (a stand-in for a GPU, which refuses implicit NumPy
    conversion): every array returned is a strict array on device1 (the host recursions copy their
    series back); scalar results are Python numbers."""
    import array_api_compat

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    result = _bounds_cases()[case](lambda v: strict.asarray(v, device=dev))
    for arr in result if isinstance(result, tuple) else (result,):
        if isinstance(arr, (bool, int, float)):
            continue
        assert array_api_compat.array_namespace(arr) is strict, type(arr)
        assert array_api_compat.device(arr) == dev, array_api_compat.device(arr)


# ------------------------------------------------------------------ finite or error (issue 14)

NAN, INF = float("nan"), float("inf")
_T = np.linspace(0.0, 1.0, 5)
_DRIFT = np.linspace(0.0, 0.2, 5)


def _good(fn):
    """Valid arguments of every public function (keyword form), bad ones are substituted one at a time."""
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    return {
        "printed_gap_bound": dict(times=_T, drift=_DRIFT, lam=1.0, loss="logistic", kernel0_norm=2.0, n=3),
        "gronwall_gap_bound": dict(times=_T, drift=_DRIFT, lam=1.0, loss="logistic", kernel0_norm=2.0, n=3),
        "gronwall_gap_bound_discrete": dict(lr=0.01, drift=_DRIFT, lam=1.0, loss="logistic", kernel0_norm=2.0, n=3,
                                            remainder=_DRIFT[:-1], lprime_norm=_DRIFT + 1),
        "convex_gap_bound": dict(times_or_lr=0.01, integrand=_DRIFT, lam=1.0, kernel0_eigs=(0.5, 2.0),
                                 discrete=True, loss="logistic", remainder=_DRIFT[:-1]),
        "convex_gap_bound-continuous": dict(times_or_lr=_T, integrand=_DRIFT, lam=1.0, kernel0_eigs=(0.5, 2.0)),
        "gap_bound_test_points": dict(lr=0.01, train_bound=_DRIFT, drift_test=np.stack([_DRIFT, _DRIFT], axis=1),
                                      lam=1.0, loss="logistic", kernel0_test_norm=np.array([1.0, 2.0]), n=3,
                                      remainder_test=np.stack([_DRIFT, _DRIFT], axis=1)[:-1],
                                      lprime_norm=_DRIFT + 1),
        "pl_condition": dict(kernel=K, lam=0.2),
        "rademacher_bound": dict(kernel=K, a=np.array([1.0, -1.0]), empirical_loss=0.1, delta=0.01, c=1.0, rho=1.0),
        "ramp_loss": dict(z=np.array([0.5, -2.0]), y=np.array([1.0, 1.0])),
    }[fn]


def _call(fn, args, asxp):
    args = {k: (asxp(v) if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    name = fn.split("-")[0]
    return getattr(bounds, name)(**args)


_SCALARS = [NAN, INF, -INF, -1.0]
_BAD = {
    "printed_gap_bound": [("times", np.array([0.0, 1.0, 0.5, 2.0, 3.0])), ("times", np.array([0.0])),
                          ("times", np.array([0.0, NAN, 1, 2, 3])), ("drift", -_DRIFT - 1),
                          ("drift", _DRIFT[:3]), ("drift", np.full(5, NAN)), ("drift", _DRIFT[:, None]),
                          ("kernel0_norm", 1e300), ("n", 0), ("n", 2.5), ("lam", 0.0)]
                         + [("kernel0_norm", v) for v in _SCALARS] + [("lam", v) for v in _SCALARS],
    "gronwall_gap_bound": [("times", np.array([0.0, 1.0, 1.0, 2.0, 3.0])), ("times", np.zeros((0,))),
                           ("drift", -_DRIFT - 1), ("drift", _DRIFT[:4]), ("n", 0), ("n", -3),
                           ("kernel0_norm", 1e300), ("lam", 0.0)]
                          + [("kernel0_norm", v) for v in _SCALARS] + [("lam", v) for v in _SCALARS],
    "gronwall_gap_bound_discrete": [("lr", 0.0), ("lr", 2.0), ("n", 0), ("drift", -_DRIFT - 1),
                                    ("drift", np.array([1.0])), ("remainder", _DRIFT[:2]),
                                    ("remainder", -_DRIFT), ("remainder", np.full(4, NAN)),
                                    ("lprime_norm", _DRIFT[:3]), ("lprime_norm", -_DRIFT),
                                    ("kernel0_norm", 1e300)]
                                   + [(k, v) for k in ("lr", "kernel0_norm", "lam") for v in _SCALARS],
    "convex_gap_bound": [("times_or_lr", 0.0), ("kernel0_eigs", (0.0, 2.0)), ("kernel0_eigs", (3.0, 2.0)),
                         ("kernel0_eigs", (0.5,)), ("kernel0_eigs", (0.5, 1.0, 2.0)), ("kernel0_eigs", 1.0),
                         ("kernel0_eigs", (NAN, 1.0)), ("kernel0_eigs", (0.5, INF)), ("integrand", -_DRIFT - 1),
                         ("integrand", np.array([1.0])), ("remainder", _DRIFT[:2]), ("remainder", -_DRIFT),
                         ("loss", "hinge"), ("loss", None), ("discrete", "yes"), ("times_or_lr", 1.0)]
                        + [(k, v) for k in ("times_or_lr", "lam") for v in _SCALARS],
    "convex_gap_bound-continuous": [("times_or_lr", np.array([0.0, 2.0, 1.0, 3.0, 4.0])),
                                    ("times_or_lr", _T[:4]), ("integrand", -_DRIFT), ("kernel0_eigs", (2.0, 1.0)),
                                    ("kernel0_eigs", (-1.0, 1.0))] + [("lam", v) for v in _SCALARS],
    "gap_bound_test_points": [("lr", 0.0), ("lr", 2.0), ("n", 0), ("train_bound", _DRIFT[:4]),
                              ("train_bound", -_DRIFT - 1), ("drift_test", _DRIFT), ("drift_test", -np.ones((5, 2))),
                              ("drift_test", np.full((5, 2), NAN)), ("drift_test", np.ones((1, 2))),
                              ("kernel0_test_norm", np.array([1.0, 2.0, 3.0])), ("kernel0_test_norm", -np.ones(2)),
                              ("kernel0_test_norm", np.array([1.0, NAN])), ("remainder_test", np.ones((2, 2))),
                              ("remainder_test", np.ones((4, 3))), ("remainder_test", -np.ones((4, 2))),
                              ("lprime_norm", _DRIFT[:3]), ("lprime_norm", -_DRIFT)]
                             + [(k, v) for k in ("lr", "lam") for v in _SCALARS],
    "pl_condition": [("kernel", np.ones((2, 3))), ("kernel", np.zeros((0, 0))), ("kernel", np.array([1.0, 2.0])),
                     ("kernel", np.array([[1.0, NAN], [NAN, 1.0]])), ("kernel", np.array([[1.0, 0.0], [1.0, 1.0]])),
                     ("lam", 0.0)] + [("lam", v) for v in _SCALARS],
    "rademacher_bound": [("kernel", -np.eye(2)), ("kernel", np.array([[1.0, 2.0], [2.0, 1.0]])),
                         ("kernel", np.ones((2, 3))), ("kernel", np.zeros((0, 0))),
                         ("kernel", np.array([[1.0, 0.0], [1.0, 1.0]])), ("kernel", np.array([[1.0, INF], [INF, 1.0]])),
                         ("a", np.ones(3)), ("a", np.array([1.0, NAN])), ("a", np.full(2, 1e300)),
                         ("empirical_loss", 1.5), ("delta", 0.0), ("delta", 1.0)]
                        + [(k, v) for k in ("empirical_loss", "delta", "c", "rho") for v in _SCALARS],
    "ramp_loss": [("z", np.array([NAN, 1.0])), ("z", np.array([INF, 1.0])), ("y", np.array([1.0, -INF])),
                  ("y", np.ones(3)), ("z", np.ones((2, 1)))],
}
_BAD_CASES = [(fn, name, value) for fn, cases in _BAD.items() for name, value in cases]


@pytest.mark.parametrize("fn, name, value", _BAD_CASES,
                         ids=[f"{fn}-{name}-{i}" for i, (fn, name, _) in enumerate(_BAD_CASES)])
def test_bad_inputs_raise_naming_the_parameter(asxp, fn, name, value):
    """Every argument of every public function is validated (finite, range, shape/length, PSD for the
    Rademacher bound, monotone times): NaN, ±inf, negative, zero, wrong shape, empty and 1e300 inputs raise
    InvalidParameterError naming the parameter; a bound that overflows is refused, never returned as inf/NaN.
    (Before: NaN/negative kernel0_norm, negative drift, n = 0, NaN empirical_loss, -I as a kernel, λ_min > λ_max
    and length mismatches gave NaN, negative or zero "bounds".)"""
    args = dict(_good(fn))
    args[name] = value
    with np.errstate(all="ignore"), pytest.raises(InvalidParameterError) as info:
        _call(fn, args, asxp)
    assert f"'{name}'" in str(info.value), str(info.value)  # the user's parameter name (times_or_lr, not lr)


@pytest.mark.parametrize("fn", sorted(_BAD))
def test_the_valid_reference_arguments_give_finite_bounds(asxp, tonp, fn):
    """The base arguments of the bad-input test are valid: the bad-input failures are due to the one bad value."""
    out = _call(fn, _good(fn), asxp)
    for v in out if isinstance(out, tuple) else (out,):
        v = v if isinstance(v, (bool, float, int)) else tonp(v)
        assert np.all(np.isfinite(np.asarray(v, dtype=float)))


def test_rademacher_reproduction_is_refused():
    with pytest.raises(InvalidParameterError, match="'kernel'.*positive semidefinite"):
        bounds.rademacher_bound(-np.eye(3), np.ones(3), 0.1, delta=0.01, c=1, rho=1)
