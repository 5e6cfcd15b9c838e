"""Finite nets trained on seed 000's losses vs their kernel machines (issue 4 items 1–2, 4)."""

import numpy as np
import pytest

from ntkref import InvalidParameterError, losses, nets
from ._device import assert_on_device as _assert_on_device, device1 as _device1


def km_descent(K0, K0_test, y, loss, lam, lr, steps, g0=None, g0_test=None):
    """Independent KM recursion α ← (1 − ηλ)α − η l'(g), g = g₀ + K₀α (seed 000 eqs. (5), (12))."""
    L = losses.get(loss)
    n = K0.shape[0]
    alpha = np.zeros(n)
    g0 = np.zeros(n) if g0 is None else g0
    out, out_t = [], []
    for k in range(steps + 1):
        g = g0 * (1 - lr * lam) ** k + K0 @ alpha
        out.append(g)
        if K0_test is not None:
            out_t.append((0 if g0_test is None else g0_test * (1 - lr * lam) ** k) + K0_test @ alpha)
        alpha = (1 - lr * lam) * alpha - lr * np.asarray(L.derivative(g, y))
    return np.array(out), (np.array(out_t) if K0_test is not None else None)


def _data(seed, n=12, d=3, m=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.where(x[:, 0] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return x, y, rng.normal(size=(m, d))


@pytest.mark.parametrize("loss", ["hinge", "squared", "logistic", "squared_hinge"])
def test_linearised_network_is_exactly_the_kernel_machine(loss, xp, asxp, tonp):
    """Gradient descent on f_lin = J₀(w − w₀) with (λ/2)‖w − w₀‖² is the KM recursion with K = Θ̂(w₀):
    the exact finite-width statement behind Thm 3.4. Agreement to rounding (1e-10 relative)."""
    x, y, xt = _data(1)
    base = nets.Antisymmetric(nets.FullyConnected(3, 32, depth=2, b_std=0.2))
    p0 = base.init(3, xp=xp)
    lin = nets.Linearized(base.net, p0[0])  # a linearised single copy: f₀ ≠ 0, handled by g0 below
    params = lin.init()
    lam, lr, steps = 0.5, 0.01, 150
    tr = nets.train(lin, params, asxp(x), asxp(y), loss, lam, lr, steps, regularize="from_init", x_test=asxp(xt))
    K0 = tonp(base.net.empirical_ntk(p0[0], asxp(x)))
    K0t = tonp(base.net.empirical_ntk(p0[0], asxp(xt), asxp(x)))
    f0, f0t = tonp(tr.f0_train), tonp(tr.f0_test)
    # with R = ‖w − w₀‖² the offset f₀ is not decayed: g = f₀ + K₀α, α ← (1 − ηλ)α − η l'(g)
    L = losses.get(loss)
    alpha = np.zeros(len(y))
    gs, gts = [], []
    for k in range(steps + 1):
        gk = f0 + K0 @ alpha
        gs.append(gk)
        gts.append(f0t + K0t @ alpha)
        alpha = (1 - lr * lam) * alpha - lr * np.asarray(L.derivative(gk, y))
    gs, gts = np.array(gs), np.array(gts)
    scale = np.abs(gs).max()
    assert np.max(np.abs(tonp(tr.f_train) - gs)) <= 1e-10 * scale
    assert np.max(np.abs(tonp(tr.f_test) - gts)) <= 1e-10 * scale


def test_readout_regulariser_gives_minus_lambda_f(xp, asxp, tonp):
    """With R = ‖readout‖², one step changes f by −ηλf − ηΣl'Θ̂ + O(η²) (eq. (9)): the O(η²) remainder
    shrinks by ~4 when η halves."""
    x, y, _ = _data(2)
    net = nets.FullyConnected(3, 64, depth=2, b_std=0.3)
    p = net.init(5, xp=xp)
    lam = 0.7
    f = tonp(net.apply(p, asxp(x)))
    K = tonp(net.empirical_ntk(p, asxp(x)))
    lp = np.asarray(losses.get("logistic").derivative(f, y))
    rem = []
    for lr in (1e-3, 5e-4):
        tr = nets.train(net, p, asxp(x), asxp(y), "logistic", lam, lr, 1)
        f1 = tonp(tr.f_train)[1]
        rem.append(np.max(np.abs(f1 - (f - lr * lam * f - lr * K @ lp))))
    assert 3.0 < rem[0] / rem[1] < 5.0, rem


def test_theorem_41_kernel_machine_reproduces_the_network(xp, asxp, tonp):
    """Thm 4.1 / G.1: f_T(x) = Σ aᵢK(x, xᵢ) + e^{−λT}f₀(x); the discrete sums converge to f_T at rate O(η)
    (the Taylor remainder of each step), and the sign assumption holds for the hinge loss."""
    x, y, xt = _data(4, n=10)
    net = nets.FullyConnected(3, 128)
    p = net.init(1, xp=xp)
    lam, T = 0.5, 1.0
    errs = []
    for lr in (0.02, 0.01, 0.005):
        steps = int(round(T / lr))
        tr = nets.train(net, p, asxp(x), asxp(y), "logistic", lam, lr, steps, x_test=asxp(xt), track_kernel=True)
        lp0 = tonp(tr.lprime)[0]
        a = -np.sign(lp0)
        lps = tonp(tr.lprime)
        assert np.all(lps * np.sign(lp0) >= 0)  # logistic: l' keeps the sign of −y
        decay = (1 - lr * lam) ** steps
        km_train = tonp(tr.km_kernel) @ a + decay * tonp(tr.f0_train)
        km_test = tonp(tr.km_kernel_test) @ a + decay * tonp(tr.f0_test)
        errs.append(max(np.abs(km_train - tonp(tr.f_train)[-1]).max(), np.abs(km_test - tonp(tr.f_test)[-1]).max()))
    slopes = np.diff(np.log(errs)) / np.diff(np.log([0.02, 0.01, 0.005]))
    assert np.all((slopes > 0.8) & (slopes < 1.2)), (errs, slopes)
    assert errs[-1] < 1e-2 * np.abs(tonp(tr.f_train)).max()


def test_sgd_is_seeded_and_batch_mean_matches_full_batch(xp, asxp, tonp):
    x, y, _ = _data(5, n=8)
    net = nets.FullyConnected(3, 16)
    p = net.init(0, xp=xp)
    a = nets.train(net, p, asxp(x), asxp(y), "hinge", 0.1, 0.1, 7, batch_size=3, seed=11)
    b = nets.train(net, p, asxp(x), asxp(y), "hinge", 0.1, 0.1, 7, batch_size=3, seed=11)
    assert np.array_equal(tonp(a.f_train), tonp(b.f_train))
    full = nets.train(net, p, asxp(x), asxp(y), "squared", 0.1, 0.05, 3, reduction="mean")
    one_batch = nets.train(net, p, asxp(x), asxp(y), "squared", 0.1, 0.05, 3, reduction="mean", batch_size=8, seed=0)
    assert np.allclose(tonp(full.f_train), tonp(one_batch.f_train), rtol=1e-12, atol=1e-12)


def test_antisymmetric_init_has_zero_output_and_the_same_kernel(xp, asxp, tonp):
    x, _, _ = _data(6)
    base = nets.FullyConnected(3, 50, depth=2)
    anti = nets.Antisymmetric(base)
    p = anti.init(2, xp=xp)
    assert np.all(tonp(anti.apply(p, asxp(x))) == 0)
    assert np.allclose(tonp(anti.empirical_ntk(p, asxp(x))), tonp(base.empirical_ntk(p[0], asxp(x))), rtol=1e-14, atol=0)
    J = tonp(anti.jacobian(p, asxp(x)))
    assert np.allclose(J @ J.T, tonp(anti.empirical_ntk(p, asxp(x))), rtol=1e-12, atol=1e-12)


def test_bad_inputs(xp, asxp):
    x, y, _ = _data(7)
    net = nets.FullyConnected(3, 8)
    p = net.init(0, xp=xp)
    with pytest.raises(InvalidParameterError, match="rows"):
        nets.train(net, p, asxp(x), asxp(y[:-1]), "hinge", 0.1, 0.1, 3)
    with pytest.raises(InvalidParameterError, match="features"):
        nets.train(net, p, asxp(x[:, :2]), asxp(y), "hinge", 0.1, 0.1, 3)
    with pytest.raises(InvalidParameterError, match="-1 and \\+1"):
        nets.train(net, p, asxp(x), asxp(y * 2), "hinge", 0.1, 0.1, 3)
    with pytest.raises(InvalidParameterError, match="lr"):
        nets.train(net, p, asxp(x), asxp(y), "hinge", 0.1, -0.1, 3)
    with pytest.raises(InvalidParameterError, match="1 − ηλ|lr·lam"):
        nets.train(net, p, asxp(x), asxp(y), "hinge", 20.0, 0.1, 3)
    with pytest.raises(InvalidParameterError, match="track_kernel"):
        nets.train(net, p, asxp(x), asxp(y), "hinge", 0.1, 0.1, 3, record_every=2, track_kernel=True)


def test_compare_side_by_side(xp, asxp, tonp):
    """equivalence.compare: a linearised net matches its KM to rounding; a real net's gap to the KM with
    Θ̂(w₀) and to the KM with the analytic NTK both shrink as the width grows 16×."""
    from ntkref import equivalence

    x, y, xt = _data(8, n=10)
    base = nets.Antisymmetric(nets.FullyConnected(3, 64))  # f₀ ≡ 0, as the KM's g₀ decays under (8)
    p0 = base.init(0, xp=xp)
    lin = nets.Linearized(base, p0)
    c = equivalence.compare(lin, lin.init(), asxp(x), asxp(y), "hinge", 0.5, 0.05, 40, x_test=asxp(xt))
    assert float(tonp(c.gap_train).max()) <= 1e-10 * float(np.abs(tonp(c.nn.f_train)).max())
    gaps = []
    for m in (64, 1024):
        net = nets.Antisymmetric(nets.FullyConnected(3, m))
        c = equivalence.compare(net, net.init(1, xp=xp), asxp(x), asxp(y), "hinge", 0.5, 0.05, 40, x_test=asxp(xt), analytic=True)
        gaps.append((float(tonp(c.gap_train)[-1]), float(tonp(c.gap_train_analytic)[-1]), float(tonp(c.gap_test)[-1])))
    assert gaps[1][0] < 0.5 * gaps[0][0] and gaps[1][1] < 0.5 * gaps[0][1] and gaps[1][2] < gaps[0][2], gaps


def test_compare_bad_input_and_extreme_test_scales(xp, asxp, tonp):
    """equivalence.compare, finite or error (issue 14).  The test points enter only the records and, for a ReLU
    net without biases, f(c·x) = c·f(x) and Θ̂(c·x, x') = c·Θ̂(x, x') exactly for powers of two c: at c = 2^400 the
    test records are exactly c times those at c = 1; at c = 2^1000 the squared drift overflows in nets.train,
    which is an error naming x_test (or, once that norm is scaled, the same identity).  Targets whose loss at
    f₀ overflows, an empty x_test and parameters that are not the network's are refused naming them."""
    from ntkref import equivalence

    x, y, xt = _data(3, n=6, m=3)
    net = nets.FullyConnected(3, 16, depth=1)
    p0 = net.init(0, xp=xp)
    run = lambda **kw: equivalence.compare(**{**dict(net=net, params=p0, x=asxp(x), y=asxp(y), loss="squared",  # noqa: E731
                                                     lam=0.1, lr=0.01, steps=3, x_test=asxp(xt)), **kw})
    ref = run()
    c = 2.0 ** 400
    big = run(x_test=asxp(c * xt))
    np.testing.assert_array_equal(tonp(big.nn.f_test), c * tonp(ref.nn.f_test))
    np.testing.assert_array_equal(tonp(big.km.g_test), c * tonp(ref.km.g_test))
    np.testing.assert_array_equal(tonp(big.gap_test), c * tonp(ref.gap_test))
    np.testing.assert_array_equal(tonp(big.gap_train), tonp(ref.gap_train))
    c = 2.0 ** 1000
    try:
        huge = run(x_test=asxp(c * xt))
    except (FloatingPointError, InvalidParameterError) as exc:
        assert "'x_test'" in str(exc)
    else:
        np.testing.assert_array_equal(tonp(huge.nn.f_test), c * tonp(ref.nn.f_test))
        np.testing.assert_array_equal(tonp(huge.nn.drift_test), c * tonp(ref.nn.drift_test))
    with pytest.raises(InvalidParameterError, match="'y'.*too large|scale of 'y'"):
        run(y=asxp(1e300 * y))
    with pytest.raises(InvalidParameterError, match="'x_test'.*at least one row"):
        run(x_test=asxp(xt[:0]))
    with pytest.raises(InvalidParameterError, match="'params'"):
        run(params=p0[0][0])
    with pytest.raises(InvalidParameterError, match="'y'"):
        run(loss="hinge", y=asxp(2 * y))


def test_kappa_scaled_wide_nets_approach_kernel_regression(xp, asxp, tonp):
    """Seed 004 Theorem 2: f_nn = κf trained by gradient descent on the squared loss (λ = 0) until
    convergence predicts like kernel regression k(x, X)Θ⁻¹y with the analytic NTK; the test-point gap
    shrinks as the width grows (fixed seeds, mean of 2)."""
    from ntkref import kernels, machines

    rng = np.random.default_rng(12)
    x = rng.normal(size=(6, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.normal(size=6)
    xt = rng.normal(size=(4, 3))
    xt /= np.linalg.norm(xt, axis=1, keepdims=True)
    Theta = tonp(kernels.fc(asxp(x), depth=1).ntk)
    Theta_t = tonp(kernels.fc(asxp(xt), asxp(x), depth=1).ntk)
    alpha = tonp(machines.fit(asxp(Theta), asxp(y), "squared", 0.0))
    f_ntk = Theta_t @ alpha
    kappa = 0.1
    gaps = []
    for m in (128, 4096):
        g = []
        for seed in range(2):
            net = nets.Scaled(nets.FullyConnected(3, m), kappa)
            p = net.init(seed, xp=xp)
            lr = 0.25 / (kappa**2 * np.linalg.eigvalsh(Theta)[-1])
            tr = nets.train(net, p, asxp(x), asxp(y), "squared", 0.0, lr, 1500, x_test=asxp(xt), record_every=1500)
            assert np.max(np.abs(tonp(tr.f_train)[-1] - y)) < 1e-3  # trained to (near) interpolation
            g.append(np.max(np.abs(tonp(tr.f_test)[-1] - f_ntk)))
        gaps.append(np.mean(g))
    assert gaps[1] < 0.5 * gaps[0], gaps


# ------------------------------------------------------------------ device placement


def _device_setup(strict, dev):
    x, y, xt = _data(3, n=6, m=3)
    on = lambda a: strict.asarray(a, device=dev)  # noqa: E731
    base = nets.FullyConnected(3, 8, b_std=0.3)
    anti = nets.Antisymmetric(base)
    pa = anti.init(0, xp=strict, device=dev)
    return dict(x=on(x), y=on(y), xt=on(xt), c=on(y / 2), base=base, anti=anti, pa=pa,
                lin=nets.Linearized(anti, pa), scaled=nets.Scaled(base, 0.5), ps=base.init(1, xp=strict, device=dev))


def _compare(s):
    from ntkref import equivalence

    return equivalence.compare(s["anti"], s["pa"], s["x"], s["y"], "hinge", 0.5, 0.05, 3, x_test=s["xt"], analytic=True)


_DEVICE_CALLS = {
    "train-track_kernel": lambda s: nets.train(s["anti"], s["pa"], s["x"], s["y"], "logistic", 0.5, 0.05, 3,
                                               x_test=s["xt"], track_kernel=True, keep_kernels=True),
    "train-sgd": lambda s: nets.train(s["base"], s["ps"], s["x"], s["y"], "hinge", 0.1, 0.1, 4, batch_size=4, seed=1,
                                      regularize="readout_over_width", reduction="mean"),
    "Antisymmetric.init": lambda s: s["anti"].init(0, xp=s["x"].__array_namespace__(), device=s["x"].device),
    "Antisymmetric.apply": lambda s: s["anti"].apply(s["pa"], s["x"]),
    "Antisymmetric.jacobian": lambda s: s["anti"].jacobian(s["pa"], s["x"]),
    "Antisymmetric.vjp": lambda s: s["anti"].vjp(s["pa"], s["x"], s["c"]),
    "Antisymmetric.empirical_ntk": lambda s: s["anti"].empirical_ntk(s["pa"], s["x"], s["xt"]),
    "Antisymmetric.readout_layers": lambda s: s["anti"].readout_layers(s["pa"]),
    "Linearized.init": lambda s: s["lin"].init(),
    "Linearized.apply": lambda s: s["lin"].apply(s["pa"], s["x"]),
    "Linearized.jacobian": lambda s: s["lin"].jacobian(s["pa"], s["x"]),
    "Linearized.vjp": lambda s: s["lin"].vjp(s["pa"], s["x"], s["c"]),
    "Linearized.empirical_ntk": lambda s: s["lin"].empirical_ntk(s["pa"], s["x"]),
    "Linearized.readout_layers": lambda s: s["lin"].readout_layers(s["pa"]),
    "Scaled.init": lambda s: s["scaled"].init(0, xp=s["x"].__array_namespace__(), device=s["x"].device),
    "Scaled.apply": lambda s: s["scaled"].apply(s["ps"], s["x"]),
    "Scaled.jacobian": lambda s: s["scaled"].jacobian(s["ps"], s["x"]),
    "Scaled.vjp": lambda s: s["scaled"].vjp(s["ps"], s["x"], s["c"]),
    "Scaled.empirical_ntk": lambda s: s["scaled"].empirical_ntk(s["ps"], s["x"]),
    "Scaled.readout_layers": lambda s: s["scaled"].readout_layers(s["ps"]),
    "flatten_params": lambda s: nets.flatten_params(s["pa"]),
    "unflatten_params": lambda s: nets.unflatten_params(nets.flatten_params(s["ps"]), s["ps"]),
    "equivalence.compare": _compare,
}


@pytest.mark.parametrize("name", list(_DEVICE_CALLS))
def test_public_functions_return_arrays_on_the_input_device(name):
    """Inputs and parameters on array_api_strict's device1 (the CPU stand-in for a GPU) give results on device1."""
    strict, dev = _device1()
    _assert_on_device(_DEVICE_CALLS[name](_device_setup(strict, dev)), strict, dev)
