"""equivalence.compare(analytic=True) through the wrappers (κ² per Scaled level), the wrappers on ConvNets,
and flatten_params / unflatten_params as exact inverses."""
import numpy as np
import pytest

from ntkref import InvalidParameterError, dynamics, equivalence, kernels, nets


def _xy(seed=0, n=6, d=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    return x, np.sign(x[:, 0])


def _squared_km_closed_form(K, y, g0, lr, steps):
    """Full-batch GD on Σ(yᵢ − gᵢ)² (no ½, l′ = 2(g − y)) with λ = 0 and K fixed:
    g_k − y = (I − 2ηK)^k (g₀ − y) — a matrix power, independent of dynamics' recursion."""
    A = np.eye(K.shape[0]) - 2.0 * lr * K
    return y + np.linalg.matrix_power(A, steps) @ (g0 - y)


def test_scaled_net_analytic_kernel_is_kappa_squared_fc(xp, asxp, tonp):
    """Review case: f = κ·f_FC (κ = 3, m = 2000), squared loss, λ = 0, η = 1e-3, 50 steps.  Its tangent kernel is
    κ²Θ̂ → κ²Θ (seed 004 Thm 2).  The analytic machine equals the closed form (I − 2ηκ²Θ)^k (g₀ − y) + y and
    dynamics.subgradient_descent with κ²·kernels.fc, and the network follows it to a small fraction of its own
    movement (the O(1/√m) kernel fluctuation).  Without the κ², the KM moves 9× too little and the gap is
    ≈ 8/9 of the movement (1.88 vs 0.046 before the fix)."""
    x, y = _xy()
    kappa, lr, steps = 3.0, 1e-3, 50
    net = nets.Scaled(nets.FullyConnected(3, width=2000, depth=1), kappa)
    c = equivalence.compare(net, net.init(0, xp=xp), asxp(x), asxp(y), "squared", 0.0, lr, steps, analytic=True,
                            track_kernel=False)
    Theta = tonp(kernels.fc(asxp(x), depth=1).ntk)
    g0 = tonp(c.nn.f0_train)
    expected = _squared_km_closed_form(kappa**2 * Theta, y, g0, lr, steps)
    np.testing.assert_allclose(tonp(c.km_analytic.g_train)[-1], expected, rtol=1e-10, atol=1e-12)
    other = dynamics.subgradient_descent(asxp(kappa**2 * Theta), asxp(y), "squared", 0.0, lr, steps, g0=c.nn.f0_train)
    np.testing.assert_allclose(tonp(c.km_analytic.g_train), tonp(other.g_train), rtol=1e-12, atol=1e-14)
    f = tonp(c.nn.f_train)
    movement = np.linalg.norm(f[-1] - f[0])
    gap = float(tonp(c.gap_train_analytic)[-1])
    assert gap < 0.1 * movement, (gap, movement)
    np.testing.assert_allclose(gap, np.linalg.norm(f[-1] - expected), rtol=1e-10)


@pytest.mark.parametrize("build, factor", [
    (lambda fc, p: nets.Scaled(nets.Scaled(fc, 2.0), 1.5), 9.0),
    (lambda fc, p: nets.Scaled(nets.Antisymmetric(fc), 2.0), 4.0),
    (lambda fc, p: nets.Linearized(nets.Antisymmetric(fc), nets.Antisymmetric(fc).init(0, xp=p)), 1.0),
    (lambda fc, p: nets.Linearized(nets.Scaled(nets.Antisymmetric(fc), 0.5),
                                   nets.Antisymmetric(fc).init(0, xp=p)), 0.25),
], ids=["Scaled(Scaled)", "Scaled(Antisymmetric)", "Linearized(Antisymmetric)", "Linearized(Scaled(Antisymmetric))"])
def test_nested_wrappers_analytic_factor(build, factor, xp, asxp, tonp):
    """Nested wrappers: the analytic KM is the closed-form squared-loss machine with K = (Π κ²)·Θ (b_std > 0,
    depth 2, so W_std / b_std are carried through); the wrappers' empirical Θ̂(w₀) is the same multiple of the
    base net's Θ̂(w₀), so the factor is that of the tangent kernel the network is trained with."""
    x, y = _xy(1, n=5)
    fc = nets.FullyConnected(3, width=64, depth=2, W_std=1.3, b_std=0.4)
    net = build(fc, xp)
    p0 = net.init(0, xp=xp)
    lr, steps = 2e-3, 20
    c = equivalence.compare(net, p0, asxp(x), asxp(y), "squared", 0.0, lr, steps, analytic=True,
                            track_kernel=False)
    Theta = tonp(kernels.fc(asxp(x), depth=2, W_std=1.3, b_std=0.4).ntk)
    expected = _squared_km_closed_form(factor * Theta, y, tonp(c.nn.f0_train), lr, steps)
    np.testing.assert_allclose(tonp(c.km_analytic.g_train)[-1], expected, rtol=1e-10, atol=1e-12)
    base_ntk = tonp(fc.empirical_ntk(fc.init(0, xp=xp), asxp(x)))
    np.testing.assert_allclose(tonp(net.empirical_ntk(p0, asxp(x))), factor * base_ntk, rtol=1e-12, atol=1e-12)


def test_linearized_antisymmetric_analytic_gap_is_small(xp, asxp, tonp):
    """The recommended construction (Linearized(Antisymmetric), f₀ ≡ 0) at m = 2000: the network is the KM with
    Θ̂(w₀) to rounding, and the analytic KM follows it to a small fraction of the movement."""
    x, y = _xy(2)
    anti = nets.Antisymmetric(nets.FullyConnected(3, width=2000, depth=1))
    net = nets.Linearized(anti, anti.init(0, xp=xp))
    c = equivalence.compare(net, net.init(), asxp(x), asxp(y), "hinge", 0.0, 0.01, 30, analytic=True, track_kernel=False)
    f = tonp(c.nn.f_train)
    assert np.all(f[0] == 0.0)
    movement = np.linalg.norm(f[-1] - f[0])
    assert float(tonp(c.gap_train)[-1]) <= 1e-10 * movement
    assert float(tonp(c.gap_train_analytic)[-1]) < 0.1 * movement, (tonp(c.gap_train_analytic)[-1], movement)


def test_analytic_refuses_bases_without_fc_limit(xp, asxp):
    """A ConvNet (bare or wrapped) or a HomogeneousNet has no kernels.fc limit: an error naming 'net'."""
    rng = np.random.default_rng(3)
    imgs = asxp(rng.standard_normal((4, 1, 3, 3)))
    y = asxp(np.array([1.0, -1.0, 1.0, -1.0]))
    conv = nets.ConvNet(1, 3, 1)
    pc = conv.init(0, xp=xp)
    for net in (conv, nets.Scaled(conv, 2.0), nets.Linearized(nets.Antisymmetric(conv), nets.Antisymmetric(conv).init(0, xp=xp))):
        p = pc if not isinstance(net, nets.Linearized) else net.init()
        with pytest.raises(InvalidParameterError, match="'net'.*FullyConnected.*ConvNet"):
            equivalence.compare(net, p, imgs, y, "squared", 0.0, 1e-3, 2, analytic=True)
    hom = nets.HomogeneousNet(3, 4, depth=2)
    x, yy = _xy(3, n=4)
    with pytest.raises(InvalidParameterError, match="'net'.*HomogeneousNet"):
        equivalence.compare(hom, hom.init(0, xp=xp), asxp(x), asxp(yy), "squared", 0.0, 1e-3, 2, analytic=True)


# ------------------------------------------------------------------ wrappers on ConvNets


def _conv_setup(xp, asxp):
    rng = np.random.default_rng(4)
    conv = nets.ConvNet(2, 3, 2, b_std=0.3)
    return conv, conv.init(0, xp=xp), asxp(rng.standard_normal((3, 2, 4, 4)))


def test_scaled_and_antisymmetric_convnet(xp, asxp, tonp):
    """Scaled(ConvNet): Θ̂ = κ²Θ̂_base and J Jᵀ = Θ̂; Antisymmetric(ConvNet): f₀ ≡ 0 exactly, Θ̂(w₀) = Θ̂_base(w₀)
    = J Jᵀ; both flat Jacobians are the vjp's transpose (Jᵀc = flatten(vjp(c)))."""
    conv, p, imgs = _conv_setup(xp, asxp)
    base = tonp(conv.empirical_ntk(p, imgs))
    c = asxp(np.array([0.5, -1.0, 2.0]))
    s = nets.Scaled(conv, 1.7)
    J = tonp(s.jacobian(p, imgs))
    assert J.shape == (3, conv.n_params)
    np.testing.assert_allclose(tonp(s.empirical_ntk(p, imgs)), 1.7**2 * base, rtol=1e-12)
    np.testing.assert_allclose(J @ J.T, 1.7**2 * base, rtol=1e-10)
    np.testing.assert_allclose(tonp(nets.flatten_params(s.vjp(p, imgs, c))), J.T @ tonp(c), rtol=1e-10, atol=1e-12)
    a = nets.Antisymmetric(conv)
    pa = a.init(0, xp=xp)
    assert np.all(tonp(a.apply(pa, imgs)) == 0.0)
    Ja = tonp(a.jacobian(pa, imgs))
    assert Ja.shape == (3, 2 * conv.n_params)
    np.testing.assert_allclose(tonp(a.empirical_ntk(pa, imgs)), base, rtol=1e-12)
    np.testing.assert_allclose(Ja @ Ja.T, base, rtol=1e-10)
    np.testing.assert_allclose(tonp(nets.flatten_params(a.vjp(pa, imgs, c))), Ja.T @ tonp(c), rtol=1e-10, atol=1e-12)


def test_linearized_convnet_is_the_first_order_taylor_model(xp, asxp, tonp):
    """Linearized(ConvNet, w₀): f_lin(w₀) = f(w₀) and f(w₀ + tv) − f_lin(w₀ + tv) = O(t²) — halving t divides it
    by ≈ 4 (it would be O(t) if the flat Jacobian's order differed from flatten_params')."""
    conv, p, imgs = _conv_setup(xp, asxp)
    lin = nets.Linearized(conv, p)
    np.testing.assert_array_equal(tonp(lin.apply(lin.init(), imgs)), tonp(conv.apply(p, imgs)))
    w0 = tonp(nets.flatten_params(p))
    v = np.random.default_rng(5).standard_normal(w0.shape[0])
    errs = []
    for t in (1e-2, 5e-3):
        pt = nets.unflatten_params(asxp(w0 + t * v), p)
        errs.append(np.max(np.abs(tonp(conv.apply(pt, imgs)) - tonp(lin.apply(pt, imgs)))))
    first_order = np.max(np.abs(tonp(lin.apply(nets.unflatten_params(asxp(w0 + 1e-2 * v), p), imgs))
                                - tonp(conv.apply(p, imgs))))
    assert errs[0] < 0.05 * first_order, (errs, first_order)
    assert 3.0 < errs[0] / errs[1] < 5.0, errs


# ------------------------------------------------------------------ flatten / unflatten


@pytest.mark.parametrize("kind", ["fc", "fc-bias", "conv", "conv-flatten", "anti-fc", "anti-conv"])
def test_unflatten_inverts_flatten_bit_for_bit(kind, xp, asxp, tonp):
    """unflatten_params(flatten_params(p), p) == p exactly (values, shapes, None biases, list vs tuple), and
    flatten_params of the result is the same vector; a vector of the wrong length is refused naming 'vector'."""
    fc = lambda: nets.FullyConnected(3, 5, depth=2, b_std=0.3 if kind == "fc-bias" else 0.0)  # noqa: E731
    conv = lambda: nets.ConvNet(2, [3, 4], 2, b_std=0.2, readout="flatten" if kind == "conv-flatten" else "gap",  # noqa: E731
                                spatial_shape=(3, 3))
    net = {"fc": fc, "fc-bias": fc, "conv": conv, "conv-flatten": conv,
           "anti-fc": lambda: nets.Antisymmetric(fc()), "anti-conv": lambda: nets.Antisymmetric(conv())}[kind]()
    p = net.init(7, xp=xp)
    if isinstance(p, tuple):  # make the copies differ, so a swap would show
        p = (p[0], [(W + 1.0, None if b is None else b - 1.0) for W, b in p[1]])
    vec = nets.flatten_params(p)
    n_entries = sum(int(np.prod(tonp(a).shape)) for pp in (p if isinstance(p, tuple) else (p,))
                    for pair in pp for a in pair if a is not None)
    assert vec.shape == (n_entries,)
    back = nets.unflatten_params(vec, p)
    assert type(back) is type(p) and len(back) == len(p)
    for copy, copy_back in zip(p if isinstance(p, tuple) else (p,), back if isinstance(back, tuple) else (back,)):
        assert len(copy) == len(copy_back)
        for (W, b), (W2, b2) in zip(copy, copy_back):
            assert W2.shape == W.shape
            np.testing.assert_array_equal(tonp(W2), tonp(W))
            assert (b is None) == (b2 is None)
            if b is not None:
                assert b2.shape == b.shape
                np.testing.assert_array_equal(tonp(b2), tonp(b))
    np.testing.assert_array_equal(tonp(nets.flatten_params(back)), tonp(vec))
    with pytest.raises(InvalidParameterError, match="'vector'"):
        nets.unflatten_params(vec[1:], p)


def test_train_refuses_a_convnet_naming_net():
    """nets.train takes rows of features; a ConvNet (no d_in) raised AttributeError, now a clear error."""
    import numpy as np
    import pytest
    from ntkref import nets
    from ntkref._lib.validation import InvalidParameterError

    net = nets.ConvNet(1, 4, 1)
    with pytest.raises(InvalidParameterError, match="'net' parameter of train"):
        nets.train(net, net.init(seed=0), np.ones((3, 4)), np.ones(3), "squared", 0.0, lr=0.1, steps=1)
