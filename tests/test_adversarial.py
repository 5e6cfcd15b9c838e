"""Seed 003 §1.4 / Ch. 3: attacks, adversarial training, mixed tangent kernel dynamics.

Independent routes: central finite differences (input gradients), enumeration of the ℓ∞-ball's
vertices and random points of the ℓ2 ball (exact maximisers on linear models), explicit J Jᵀ (MTK),
an actual gradient step vs the MTK prediction (exact for linearised models, O(η²) for MLPs),
inequalities on random instances (Lemma 3.5.3, softmax ½-Lipschitz).
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import InvalidParameterError, losses, nets
from ntkref import adversarial as adv
from ._device import arrays_in as _arrays_in, device1 as _device1

seeds = st.integers(0, 2**32 - 1)


class LinearScore:
    """s(x) = x·w + b, with its input gradient (duck-typed net for the attacks)."""

    def apply(self, params, x):
        w, b = params
        return x @ w + b

    def input_gradient(self, params, x):
        w, _ = params
        return x * 0.0 + w[None, :]


def _linear_problem(seed, n, d, xp, asxp, zero_frac=0.2):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w[rng.uniform(size=d) < zero_frac] = 0.0  # zero weights: sign 0, the coordinate must not move
    b = float(rng.normal())
    x = rng.normal(size=(n, d))
    y = rng.choice([-1.0, 1.0], size=n)
    return w, b, x, y, (asxp(w), b), asxp(x), asxp(y)


# ---------------------------------------------------------------------------------------------
# input gradients
# ---------------------------------------------------------------------------------------------
def _fd_input_gradient(f, x, h=1e-6):
    d = x.shape[1]
    return np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(d)], axis=1)


@pytest.mark.parametrize("depth, b_std, W_std", [(1, 0.0, 1.0), (2, 0.5, [1.0, 1.4, 1.4]), (3, 0.2, 1.3)])
def test_input_gradient_matches_central_differences(depth, b_std, W_std, xp, asxp, tonp):
    rng = np.random.default_rng(depth)
    net = nets.FullyConnected(5, 7, depth=depth, W_std=W_std, b_std=b_std)
    params = net.init(depth + 10, xp=xp)
    x = rng.normal(size=(6, 5))
    g = tonp(adv.input_gradient(net, params, asxp(x)))
    fd = _fd_input_gradient(lambda z: tonp(net.apply(params, asxp(z))), x)
    # f is piecewise linear in x: central differences are exact away from kinks (random points are
    # 1e-6 away from every kink with overwhelming probability); rounding error ~ 1e-16·|f|/h ≈ 1e-10
    assert g.shape == (6, 5)
    assert np.allclose(g, fd, rtol=1e-7, atol=1e-8)


def test_input_gradient_of_wrappers_and_duck_typed_nets(xp, asxp, tonp):
    rng = np.random.default_rng(3)
    base = nets.FullyConnected(4, 9, depth=2, b_std=0.1)
    x = rng.normal(size=(5, 4))
    for net in (nets.Scaled(base, 0.3), nets.Antisymmetric(base)):
        params = net.init(4, xp=xp)
        if isinstance(net, nets.Antisymmetric):  # break the symmetry so that f ≠ 0
            pa, pb = params
            params = (pa, [(W * 1.1, b) for W, b in pb])
        g = tonp(adv.input_gradient(net, params, asxp(x)))
        fd = _fd_input_gradient(lambda z: tonp(net.apply(params, asxp(z))), x)
        assert np.allclose(g, fd, rtol=1e-7, atol=1e-8), type(net).__name__
    w = rng.normal(size=4)
    g = tonp(adv.input_gradient(LinearScore(), (asxp(w), 0.5), asxp(x)))
    assert np.array_equal(g, np.tile(w, (5, 1)))
    with pytest.raises(InvalidParameterError, match="net"):
        adv.input_gradient(object(), None, asxp(x))


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_loss_input_gradient_is_the_chain_rule(loss, xp, asxp, tonp):
    rng = np.random.default_rng(5)
    net = nets.FullyConnected(3, 8, depth=2, b_std=0.2)
    params = net.init(7, xp=xp)
    x = rng.normal(size=(7, 3))
    y = rng.choice([-1.0, 1.0], size=7)
    lf = losses.get(loss)
    g = tonp(adv.loss_input_gradient(net, params, loss)(asxp(x), asxp(y)))

    def per_example_loss(z):
        return tonp(lf.value(net.apply(params, asxp(z)), asxp(y)))

    fd = _fd_input_gradient(per_example_loss, x)
    # the hinge is kinked at yf = 1 and ReLU nets at z = 0; random points are far from both
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# FGSM / PGD invariants
# ---------------------------------------------------------------------------------------------
@settings(max_examples=20)
@given(seed=seeds, n=st.integers(1, 6), d=st.integers(1, 6), norm=st.sampled_from(["linf", "l2"]),
       use_domain=st.booleans(), random_start=st.booleans(), steps=st.integers(1, 8))
def test_attack_invariants_ball_domain_and_step_norms(seed, n, d, norm, use_domain, random_start, steps, xp, asxp,
                                                      tonp):
    rng = np.random.default_rng(seed)
    net = nets.FullyConnected(d, 6, depth=1, b_std=0.5)
    params = net.init(seed % 1000, xp=xp)
    x = rng.uniform(0.0, 1.0, size=(n, d))
    y = rng.choice([-1.0, 1.0], size=n)
    eps = float(rng.uniform(0.01, 0.6))
    alpha = float(rng.uniform(0.05, 2.0)) * eps
    domain = (0.0, 1.0) if use_domain else None
    grad = adv.loss_input_gradient(net, params, "logistic")
    pnorm = np.inf if norm == "linf" else 2

    x_f = tonp(adv.fgsm(grad, asxp(x), asxp(y), eps=eps, norm=norm, domain=domain))
    x_p, path = adv.pgd(grad, asxp(x), asxp(y), eps=eps, step_size=alpha, steps=steps, norm=norm, domain=domain,
                        random_start=random_start, seed=seed, return_path=True)
    x_p = tonp(x_p)
    path = [tonp(p) for p in path]
    assert len(path) == steps + 1 and np.array_equal(path[-1], x_p)
    slack = 1e-12 * (1 + eps)  # one rounding of x + r, relative to |x| ≤ 1 + eps
    for z in (x_f, x_p):
        assert np.all(np.isfinite(z))
        assert np.all(np.linalg.norm(z - x, ord=pnorm, axis=1) <= eps + slack)  # ε-ball (1.34), (3.2)
        if use_domain:
            assert np.all((z >= 0.0) & (z <= 1.0))  # domain clip
    # (3.2): every PGD step has ‖r_t‖_p ≤ α (projection and clip are nonexpansive and fix x_{t-1})
    for a, b in zip(path[:-1], path[1:]):
        assert np.all(np.linalg.norm(b - a, ord=pnorm, axis=1) <= alpha + slack)
    if not random_start:
        assert np.array_equal(path[0], x)


def test_zero_and_extreme_gradients_never_give_nan(xp, asxp, tonp):
    x = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.0], [2.0, 0.0, 0.0]])
    g = np.array([[0.0, 0.0, 0.0], [1e-300, -3e-300, 0.0], [1e300, 1e300, -1e300]])
    grad = lambda x_adv, y: asxp(g)  # noqa: E731
    for norm in ("linf", "l2"):
        for z in (adv.fgsm(grad, asxp(x), None, eps=0.5, norm=norm),
                  adv.pgd(grad, asxp(x), None, eps=0.5, step_size=0.2, steps=4, norm=norm)):
            z = tonp(z)
            assert np.all(np.isfinite(z))
            assert np.array_equal(z[0], x[0])  # zero gradient: no move
            if norm == "l2":  # the tiny and the huge gradient still give steps of length exactly ε
                assert np.allclose(np.linalg.norm(z[1:] - x[1:], axis=1), 0.5, rtol=1e-14)
                u = np.array([1, -3, 0]) / math.sqrt(10)
                assert np.allclose(z[1] - x[1], 0.5 * u, rtol=1e-14, atol=1e-16)
            else:
                assert np.allclose(z[1] - x[1], [0.5, -0.5, 0.0], atol=1e-15)


def test_float32_inputs_give_float32_attacks(xp, asxp, tonp):
    rng = np.random.default_rng(6)
    net = nets.FullyConnected(3, 8, depth=1)
    params = net.init(0, xp=xp, dtype=xp.float32)
    x = asxp(rng.normal(size=(5, 3)).astype(np.float32))
    y = asxp(rng.choice([-1.0, 1.0], size=5).astype(np.float32))
    grad = adv.loss_input_gradient(net, params, "logistic")
    for norm, p in (("linf", np.inf), ("l2", 2)):
        z = adv.pgd(grad, x, y, eps=0.25, step_size=0.1, steps=4, norm=norm, random_start=True, seed=0)
        assert z.dtype == xp.float32
        assert np.all(np.linalg.norm(tonp(z) - tonp(x), ord=p, axis=1) <= 0.25 * (1 + 1e-6))  # float32 rounding


def test_random_start_is_reproducible_and_uniform_in_the_ball(xp, asxp, tonp):
    """20 000 starts (zero gradient, so x₁ = x₀ is the random start).  ℓ2: uniform in the 3-ball ⇔ (‖r‖/ε)³ ~ U(0, 1)
    and r/‖r‖ uniform on the sphere (mean 0, second moments I/3); ℓ∞: the d coordinates are independent U(−ε, ε).
    KS tests at p > 1e-3 and moment checks within 5 standard errors (a fixed seed: deterministic)."""
    from scipy.stats import kstest

    rng = np.random.default_rng(0)
    n, d, eps = 20_000, 3, 0.3
    x = rng.normal(size=(n, d))
    zero_grad = lambda x_adv, y: x_adv * 0.0  # noqa: E731
    for norm, p in (("linf", np.inf), ("l2", 2)):
        runs = [tonp(adv.pgd(zero_grad, asxp(x), None, eps=eps, step_size=0.1, steps=1, norm=norm, random_start=True,
                             seed=s)) for s in (11, 11, 12)]
        a = runs[0]
        assert np.array_equal(a, runs[1]) and not np.array_equal(a, runs[2])
        r = a - x
        assert np.all(np.linalg.norm(r, ord=p, axis=1) <= eps * (1 + 1e-15))
        se = 5 / math.sqrt(n)
        if norm == "l2":
            rad = np.linalg.norm(r, axis=1) / eps
            assert kstest(rad ** 3, "uniform").pvalue > 1e-3
            u = r / (rad[:, None] * eps)
            assert np.all(np.abs(u.mean(0)) < se * math.sqrt(1 / 3))  # E u = 0, Var uⱼ = 1/3
            assert np.all(np.abs(u.T @ u / n - np.eye(d) / 3) < se * math.sqrt(4 / 45))  # Var uⱼ² = 4/45 ≥ Var uᵢuⱼ = 1/15
        else:
            for j in range(d):
                assert kstest(r[:, j], "uniform", args=(-eps, 2 * eps)).pvalue > 1e-3
            corr = np.corrcoef(r.T)
            assert np.all(np.abs(corr - np.eye(d)) < se)


# ---------------------------------------------------------------------------------------------
# exact maximisers on linear models
# ---------------------------------------------------------------------------------------------
@given(seed=seeds, n=st.integers(1, 16), d=st.integers(1, 8))
def test_fgsm_linf_is_the_exact_maximiser_on_linear_models(seed, n, d, xp, asxp, tonp):
    w, b, x, y, params, xa, ya = _linear_problem(seed, n, d, xp, asxp)
    eps = float(np.random.default_rng(seed + 1).uniform(0.01, 2.0))
    grad = adv.loss_input_gradient(LinearScore(), params, "logistic")
    x_adv = tonp(adv.fgsm(grad, xa, ya, eps=eps, norm="linf"))
    # (1.34) for a margin-decreasing loss: x' = x − εy·sign(w), margin drops by ε‖w‖₁
    assert np.allclose(x_adv, x - eps * y[:, None] * np.sign(w)[None, :], rtol=0, atol=4e-16 * (np.abs(x) + eps))
    margin = y * (x @ w + b)
    margin_adv = y * (x_adv @ w + b)
    assert np.allclose(margin - margin_adv, eps * np.abs(w).sum(), rtol=1e-12, atol=1e-12 * (1 + np.abs(margin)))
    # independent route: a linear function on the box attains its minimum at a vertex; enumerate all 2^d
    vertices = np.array(np.meshgrid(*[[-1.0, 1.0]] * d, indexing="ij")).reshape(d, -1).T
    best = np.min(y[:, None] * ((x[:, None, :] + eps * vertices[None]) @ w + b), axis=1)
    assert np.allclose(margin_adv, best, rtol=1e-12, atol=1e-12 * (1 + np.abs(best)))


@given(seed=seeds, n=st.integers(1, 16), d=st.integers(1, 20))
def test_fgsm_l2_is_the_exact_maximiser_on_linear_models(seed, n, d, xp, asxp, tonp):
    w, b, x, y, params, xa, ya = _linear_problem(seed, n, d, xp, asxp, zero_frac=0.0)
    rng = np.random.default_rng(seed + 1)
    eps = float(rng.uniform(0.01, 2.0))
    grad = adv.loss_input_gradient(LinearScore(), params, "logistic")
    x_adv = tonp(adv.fgsm(grad, xa, ya, eps=eps, norm="l2"))
    nw = np.linalg.norm(w)
    assert np.allclose(x_adv, x - eps * y[:, None] * (w / nw)[None, :], rtol=0, atol=4e-16 * (np.abs(x) + eps))
    margin = y * (x @ w + b)
    margin_adv = y * (x_adv @ w + b)
    assert np.allclose(margin - margin_adv, eps * nw, rtol=1e-12, atol=1e-12 * (1 + np.abs(margin)))
    # no point of the ℓ2 sphere does better (Cauchy–Schwarz; checked on 500 random directions)
    u = rng.normal(size=(500, d))
    u *= eps / np.linalg.norm(u, axis=1, keepdims=True)
    others = np.min(y[:, None] * ((x[:, None, :] + u[None]) @ w + b), axis=1)
    assert np.all(others >= margin_adv - 1e-12 * (1 + np.abs(margin_adv)))


@given(seed=seeds, n=st.integers(1, 10), d=st.integers(1, 12), k=st.integers(1, 10),
       over=st.floats(1.0, 3.0), norm=st.sampled_from(["linf", "l2"]))
def test_pgd_with_k_alpha_at_least_eps_equals_fgsm_on_linear_models(seed, n, d, k, over, norm, xp, asxp, tonp):
    w, b, x, y, params, xa, ya = _linear_problem(seed, n, d, xp, asxp)
    eps = float(np.random.default_rng(seed + 2).uniform(0.01, 2.0))
    grad = adv.loss_input_gradient(LinearScore(), params, "logistic")  # l′ < 0·y never vanishes: constant sign
    x_f = tonp(adv.fgsm(grad, xa, ya, eps=eps, norm=norm))
    x_p, path = adv.pgd(grad, xa, ya, eps=eps, step_size=over * eps / k, steps=k, norm=norm, return_path=True)
    x_p = tonp(x_p)
    # both reach the same boundary point; the PGD iterate is x + clip(Σ steps) (k roundings)
    assert np.allclose(x_p, x_f, rtol=0, atol=1e-14 * (np.abs(x) + eps))
    # the gradient's direction is constant, so the margin never increases along the iterates
    margins = np.array([y * (tonp(p) @ w + b) for p in path])
    assert np.all(np.diff(margins, axis=0) <= 1e-12 * (1 + np.abs(margins[:-1])))


def test_pgd_one_step_of_size_eps_is_fgsm_on_an_mlp(xp, asxp, tonp):
    rng = np.random.default_rng(8)
    net = nets.FullyConnected(4, 10, depth=2, b_std=0.3)
    params = net.init(2, xp=xp)
    x, y = asxp(rng.normal(size=(9, 4))), asxp(rng.choice([-1.0, 1.0], size=9))
    grad = adv.loss_input_gradient(net, params, "logistic")
    for norm in ("linf", "l2"):
        a = tonp(adv.fgsm(grad, x, y, eps=0.2, norm=norm, domain=(-5, 5)))
        b = tonp(adv.pgd(grad, x, y, eps=0.2, step_size=0.2, steps=1, norm=norm, domain=(-5, 5)))
        assert np.allclose(a, b, rtol=0, atol=1e-15)


def test_printed_pgd_without_projection_leaves_the_ball_erratum(xp, asxp, tonp):
    """Seed 003 (1.35) has no projection: with kα > ε its iterates leave the ε-ball (erratum)."""
    w, b, x, y, params, xa, ya = _linear_problem(4, 8, 5, xp, asxp, zero_frac=0.0)
    eps, k = 0.3, 10
    alpha = 2.5 * eps / k  # the dissertation's own evaluation step 2.5ε/k
    grad = adv.loss_input_gradient(LinearScore(), params, "logistic")
    printed = tonp(adv.pgd(grad, xa, ya, eps=eps, step_size=alpha, steps=k, project=False))
    # the printed recursion walks k·α = 2.5ε along the constant sign of the gradient
    assert np.allclose(np.abs(printed - x).max(axis=1), k * alpha, rtol=1e-12)
    assert np.all(np.abs(printed - x).max(axis=1) > eps * 2)
    fixed = tonp(adv.pgd(grad, xa, ya, eps=eps, step_size=alpha, steps=k))
    assert np.all(np.abs(fixed - x).max(axis=1) <= eps * (1 + 1e-12))


def test_attack_arguments_are_validated(xp, asxp):
    x = asxp(np.zeros((3, 2)))
    grad = lambda x_adv, y: x_adv * 0.0 + 1.0  # noqa: E731
    with pytest.raises(InvalidParameterError, match="eps"):
        adv.fgsm(grad, x, None, eps=-0.1)
    with pytest.raises(InvalidParameterError, match="eps"):
        adv.pgd(grad, x, None, eps=float("nan"), step_size=0.1, steps=3)
    with pytest.raises(InvalidParameterError, match="steps"):
        adv.pgd(grad, x, None, eps=0.1, step_size=0.1, steps=0)
    with pytest.raises(InvalidParameterError, match="step_size"):
        adv.pgd(grad, x, None, eps=0.1, step_size=0.0, steps=3)
    with pytest.raises(InvalidParameterError, match="norm"):
        adv.fgsm(grad, x, None, eps=0.1, norm="l1")
    with pytest.raises(InvalidParameterError, match="'x'"):
        adv.fgsm(grad, asxp(np.array([[0.0, np.nan]])), None, eps=0.1)
    with pytest.raises(InvalidParameterError, match="'x'"):
        adv.pgd(grad, asxp(np.zeros(3)), None, eps=0.1, step_size=0.1, steps=2)
    with pytest.raises(InvalidParameterError, match="domain"):
        adv.fgsm(grad, x, None, eps=0.1, domain=(1.0, 0.0))
    with pytest.raises(InvalidParameterError, match="domain"):
        adv.fgsm(grad, x + 2.0, None, eps=0.1, domain=(0.0, 1.0))
    with pytest.raises(InvalidParameterError, match="loss_input_grad"):
        adv.fgsm(lambda x_adv, y: x_adv[:, :1], x, None, eps=0.1)
    with pytest.raises(InvalidParameterError, match="loss_input_grad"):
        adv.fgsm(lambda x_adv, y: x_adv * float("nan"), x, None, eps=0.1)


# ---------------------------------------------------------------------------------------------
# mixed tangent kernel (Thm 3.2.1) and the one-step dynamics
# ---------------------------------------------------------------------------------------------
def _mlp_setup(xp, asxp, depth=2, n=6, d=3, width=24, seed=0):
    rng = np.random.default_rng(seed)
    net = nets.FullyConnected(d, width, depth=depth, W_std=[1.0] + [1.4] * depth, b_std=0.2)
    params = net.init(seed + 1, xp=xp)
    x = asxp(rng.normal(size=(n, d)))
    y = asxp(rng.choice([-1.0, 1.0], size=n))
    grad = adv.loss_input_gradient(net, params, "logistic")
    x_adv = adv.pgd(grad, x, y, eps=0.3, step_size=0.1, steps=5)
    return net, params, x, y, x_adv


def test_mtk_is_j_jt_transposes_and_reduces_to_the_ntk(xp, asxp, tonp):
    net, params, x, y, x_adv = _mlp_setup(xp, asxp)
    J, Ja = tonp(net.jacobian(params, x)), tonp(net.jacobian(params, x_adv))
    M = tonp(adv.mixed_tangent_kernel(net, params, x, x_adv))
    scale = np.abs(J).sum(1)[:, None] * np.abs(Ja).sum(1)[None, :]  # Σ|J||J̃|: the rounding scale of J J̃ᵀ
    assert np.all(np.abs(M - J @ Ja.T) <= 1e-14 * scale)
    Mt = tonp(adv.mixed_tangent_kernel(net, params, x_adv, x))
    assert np.all(np.abs(Mt - M.T) <= 1e-14 * scale.T)  # Θ(x̃, x) = Θ(x, x̃)ᵀ
    assert np.linalg.norm(M - M.T) > 1e-3 * np.linalg.norm(M)  # non-symmetric (the dissertation's remark)
    K = tonp(nets.empirical_ntk(net, params, x))
    MX = tonp(adv.mixed_tangent_kernel(net, params, x, x))
    assert np.allclose(MX, K, rtol=1e-13, atol=1e-13 * np.abs(K).max())  # MTK(X, X) = NTK
    assert np.linalg.eigvalsh(K).min() > -1e-12 * np.abs(K).max()
    with pytest.raises(InvalidParameterError, match="x2"):
        adv.mixed_tangent_kernel(net, params, x, None)


def test_mtk_diagonal_is_the_diagonal_for_every_net_kind(xp, asxp, tonp):
    net, params, x, y, x_adv = _mlp_setup(xp, asxp, depth=2)
    cases = [(net, params), (nets.Scaled(net, 0.7), params), (nets.Linearized(net, params), params)]
    anti = nets.Antisymmetric(net)
    pa, pb = anti.init(3, xp=xp)
    cases.append((anti, (pa, [(W * 0.9, b) for W, b in pb])))

    class JacobianOnly:  # a net known only through its Jacobian
        def jacobian(self, p, z):
            return net.jacobian(p, z)

    cases.append((JacobianOnly(), params))
    for model, p in cases:
        full = tonp(adv.mixed_tangent_kernel(model, p, x, x_adv))
        diag = tonp(adv.mixed_tangent_kernel_diagonal(model, p, x, x_adv))
        assert np.allclose(diag, np.diag(full), rtol=1e-13, atol=1e-13 * np.abs(full).max()), type(model).__name__


def test_one_step_change_equals_the_mtk_prediction_exactly_for_a_linearised_model(xp, asxp, tonp):
    base, params0, x, y, x_adv = _mlp_setup(xp, asxp, n=7)
    lin = nets.Linearized(base, params0)
    rng = np.random.default_rng(4)
    params = [(W + asxp(0.05 * rng.normal(size=tuple(W.shape))), b) for W, b in params0]  # away from w₀
    lr = 0.7
    for loss in ("logistic", "squared"):
        new = adv.adversarial_gradient_step(lin, params, x_adv, y, loss, lr=lr)
        actual = tonp(lin.apply(new, x)) - tonp(lin.apply(params, x))
        predicted = tonp(adv.mtk_output_change(lin, params, x, x_adv, y, loss, lr=lr))
        # f_lin is affine in θ: the prediction is exact, up to rounding of f (|f| ~ 1)
        assert np.allclose(actual, predicted, rtol=1e-10, atol=1e-12), loss
        # erratum: the printed (3.4)/(3.8) rate has no 1/N, i.e. predicts N times this change
        printed = x.shape[0] * predicted
        assert np.linalg.norm(actual - printed) > 0.5 * np.linalg.norm(actual)


@pytest.mark.parametrize("depth", [1, 2])
def test_one_step_change_matches_the_mtk_prediction_to_second_order_for_an_mlp(depth, xp, asxp, tonp):
    net, params, x, y, x_adv = _mlp_setup(xp, asxp, depth=depth, n=8, width=32)
    residual = []
    for lr in (2e-3, 4e-3):
        new = adv.adversarial_gradient_step(net, params, x_adv, y, "logistic", lr=lr)
        actual = tonp(net.apply(new, x)) - tonp(net.apply(params, x))
        predicted = tonp(adv.mtk_output_change(net, params, x, x_adv, y, "logistic", lr=lr))
        assert np.linalg.norm(actual - predicted) < 1e-2 * np.linalg.norm(actual)
        residual.append(np.linalg.norm(actual - predicted))
    # remainder O(η²): doubling η multiplies it by 4 (exactly 4 for depth 1, where f is bilinear in the
    # layers while no ReLU switches; 4 + O(η) for depth 2: measured 3.99999997 and 3.9999955)
    assert abs(residual[1] / residual[0] - 4.0) < (1e-6 if depth == 1 else 1e-3)


def test_gradient_step_is_gradient_descent_on_the_mean_adversarial_loss(xp, asxp, tonp):
    """(3.3) on (3.1): θ' − θ = −η ∇_θ (1/N)Σ l(f_θ(x̃ᵢ)); checked by central differences in θ."""
    net, params, x, y, x_adv = _mlp_setup(xp, asxp, depth=2, n=5, width=8)
    lf = losses.get("logistic")
    lr = 0.3
    flat = tonp(nets.flatten_params(params))
    step = tonp(nets.flatten_params(adv.adversarial_gradient_step(net, params, x_adv, y, lf, lr=lr))) - flat

    def mean_loss(theta):
        p = nets.unflatten_params(asxp(theta), params)
        return float(np.mean(tonp(lf.value(net.apply(p, x_adv), y))))

    rng = np.random.default_rng(0)
    h = 1e-6
    for _ in range(4):
        v = rng.normal(size=flat.size)
        directional = (mean_loss(flat + h * v) - mean_loss(flat - h * v)) / (2 * h)
        assert np.isclose(step @ v, -lr * directional, rtol=1e-6, atol=1e-9)
        # the printed (3.4) (no 1/N) is N = 5 times too large
        assert not np.isclose(x.shape[0] * (step @ v), -lr * directional, rtol=0.5)


class LinearModel(LinearScore):
    """s = x·w + b with the backward pass, for Danskin's theorem on the exact inner maximum."""

    def vjp(self, params, x, c):
        return (x.T @ c, c.sum())

    def jacobian(self, params, x):
        return np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)


def test_fgsm_training_step_is_the_gradient_of_the_robust_loss_on_linear_models():
    """Danskin: FGSM-ℓ∞ is the exact inner maximiser for a linear score, so adversarial training's step is
    the gradient of the closed-form robust loss (1/N)Σ log(1 + exp(−(yᵢ(w·xᵢ + b) − ε‖w‖₁)))."""
    rng = np.random.default_rng(2)
    n, d, eps, lr = 12, 4, 0.2, 0.5
    x, y = rng.normal(size=(n, d)), rng.choice([-1.0, 1.0], size=n)
    w, b = rng.normal(size=d), 0.3
    tr = adv.adversarial_training(LinearModel(), (w, b), x, y, "logistic", eps=eps, lr=lr, steps=1, attack="fgsm")
    w1, b1 = tr.params

    def robust_loss(theta):
        return np.mean(np.logaddexp(0.0, -(y * (x @ theta[:d] + theta[d]) - eps * np.abs(theta[:d]).sum())))

    theta = np.append(w, b)
    h = 1e-6
    grad = np.array([(robust_loss(theta + h * e) - robust_loss(theta - h * e)) / (2 * h) for e in np.eye(d + 1)])
    assert np.allclose(np.append(w1, b1), theta - lr * grad, rtol=1e-8, atol=1e-9)
    assert np.isclose(tr.adv_loss[0], robust_loss(theta), rtol=1e-13)


def test_training_trajectory_follows_the_mtk_dynamics(xp, asxp, tonp):
    base, params0, x, y, x_adv0 = _mlp_setup(xp, asxp, depth=2, n=6)
    lin = nets.Linearized(base, params0)
    # the linearised model's input gradient is not available: attack the base net at w₀ (a fixed attack)
    fixed = adv.pgd(adv.loss_input_gradient(base, params0, "squared"), x, y, eps=0.2, step_size=0.1, steps=3)
    tr = adv.adversarial_training(lin, lin.init(), x, y, "squared", eps=0.2, lr=0.5, steps=6,
                                  attack=lambda p, xx, yy: fixed, record_mtk=True)
    out, pred = tonp(tr.outputs), tonp(tr.predicted_change)
    assert out.shape == (7, 6) and pred.shape == (6, 6)
    assert np.allclose(np.diff(out, axis=0), pred, rtol=1e-10, atol=1e-12)  # exact: f_lin affine in θ
    # with the MLP itself the per-step remainder is second order (small against the step itself)
    tr = adv.adversarial_training(base, params0, x, y, "squared", eps=0.2, lr=0.05, steps=6, attack_steps=3,
                                  record_mtk=True)
    change, pred = np.diff(tonp(tr.outputs), axis=0), tonp(tr.predicted_change)
    assert np.linalg.norm(change - pred) < 0.05 * np.linalg.norm(change)
    assert tonp(tr.adv_loss)[-1] < tonp(tr.adv_loss)[0]


def _robust_task(rng, n, d):
    """One robust feature (y ± 0.15, margin 1) and d − 1 weak, non-robust ones (mean 0.25y, unit noise)."""
    y = rng.choice([-1.0, 1.0], size=n)
    x = np.empty((n, d))
    x[:, 0] = y + 0.15 * rng.normal(size=n)
    x[:, 1:] = 0.25 * y[:, None] + rng.normal(size=(n, d - 1))
    return x, y


def test_adversarial_training_increases_robust_accuracy(xp, asxp):
    """ℓ∞ ε = 0.4 erases every weak feature (0.25 < ε) but not the robust one (margin 1 − ε): natural
    training uses the weak features and is not robust, adversarial training learns the robust feature."""
    rng = np.random.default_rng(0)
    d = 20
    x, y = _robust_task(rng, 80, d)
    xt, yt = _robust_task(rng, 400, d)
    net = nets.FullyConnected(d, 32, depth=1)
    params0 = net.init(0, xp=xp)
    eps = 0.4
    acc = {}
    for e in (0.0, eps):
        tr = adv.adversarial_training(net, params0, asxp(x), asxp(y), "logistic", eps=e, lr=4.0, steps=150,
                                      attack="pgd", attack_steps=5)
        acc[e] = (adv.robust_accuracy(net, tr.params, asxp(xt), asxp(yt), eps=0.0),
                  adv.robust_accuracy(net, tr.params, asxp(xt), asxp(yt), eps=eps, steps=20))
    # measured (seed 0): natural (0.978 clean, 0.518 robust), adversarial (1.000, 0.943); over seeds 0-3 the
    # robust accuracies were 0.52-0.61 and 0.91-0.97.  400 test points: SE ≤ 0.025, thresholds ≥ 4 SE away
    assert acc[0.0][0] > 0.9 and acc[eps][0] > 0.9
    assert acc[0.0][1] < 0.75
    assert acc[eps][1] > 0.85
    assert acc[eps][1] - acc[0.0][1] > 0.25


def test_training_arguments_are_validated(xp, asxp):
    net, params, x, y, _ = _mlp_setup(xp, asxp, depth=1, n=3)
    kw = dict(eps=0.1, lr=0.1, steps=2)
    with pytest.raises(InvalidParameterError, match="steps"):
        adv.adversarial_training(net, params, x, y, "logistic", **{**kw, "steps": 0})
    with pytest.raises(InvalidParameterError, match="lr"):
        adv.adversarial_training(net, params, x, y, "logistic", **{**kw, "lr": 0.0})
    with pytest.raises(InvalidParameterError, match="eps"):
        adv.adversarial_training(net, params, x, y, "logistic", **{**kw, "eps": -1.0})
    with pytest.raises(InvalidParameterError, match="attack"):
        adv.adversarial_training(net, params, x, y, "logistic", attack="cw", **kw)
    with pytest.raises(InvalidParameterError, match="norm"):
        adv.adversarial_training(net, params, x, y, "logistic", norm="l0", **kw)
    with pytest.raises(InvalidParameterError, match="y"):
        adv.robust_accuracy(net, params, x, x[:, 0], eps=0.1)


# ---------------------------------------------------------------------------------------------
# Lemma 3.5.3
# ---------------------------------------------------------------------------------------------
TANH2_MAX = 4 / (3 * math.sqrt(3))  # max |tanh''| = 4/(3√3), at tanh² = 1/3


@given(seed=seeds, d=st.integers(2, 5), m=st.integers(2, 9), k=st.integers(1, 19),
       norm=st.sampled_from(["linf", "l2"]), fill=st.floats(0.2, 1.0))
def test_lemma_3_5_3_bounds_the_output_displacement_of_pgd(seed, d, m, k, norm, fill, xp, asxp, tonp):
    """f(x) = aᵀtanh(Wx) with global constants: p = ∞ (q = 1): C₁ = Σ|aᵢ|‖wᵢ‖₁, C₂ = max|tanh''|·Σ|aᵢ|‖wᵢ‖₁²;
    p = 2: C₁ = Σ|aᵢ|‖wᵢ‖₂, C₂ = max|tanh''|·Σ|aᵢ|‖wᵢ‖₂² (the Hessian is Σ aᵢ tanh''(wᵢ·x) wᵢwᵢᵀ)."""
    rng = np.random.default_rng(seed)
    W, a = rng.normal(size=(m, d)), rng.normal(size=m)
    Wx, ax = asxp(W), asxp(a)
    q = 1 if norm == "linf" else 2
    row = np.linalg.norm(W, ord=q, axis=1)
    c1, c2 = np.sum(np.abs(a) * row), TANH2_MAX * np.sum(np.abs(a) * row**2)

    def f(z):
        return tonp(xp.tanh(z @ Wx.T) @ ax)

    sign = float(rng.choice([-1.0, 1.0]))  # push f up or down

    def grad(z, _):
        t = xp.tanh(z @ Wx.T)
        return sign * (((1 - t * t) * ax[None, :]) @ Wx)

    eps = float(rng.uniform(0.01, 1.0))
    delta = fill * 2 * eps / k  # kδ ≤ 2ε
    x = rng.normal(size=(4, d))
    x_adv, path = adv.pgd(grad, asxp(x), None, eps=eps, step_size=delta, steps=k, norm=norm, return_path=True)
    lhs = np.abs(f(x_adv) - f(asxp(x)))
    sharp = adv.attack_displacement_bound(eps, c1, c2, steps=k, step_size=delta)  # (3.27)
    printed = adv.attack_displacement_bound(eps, c1, c2)  # (3.22)
    assert sharp <= printed * (1 + 1e-12)
    assert np.all(lhs <= sharp * (1 + 1e-12))


@pytest.mark.parametrize("norm, p", [("linf", np.inf), ("l2", 2)])
def test_lemma_3_5_3_sharp_form_is_attained_by_linear_functions(norm, p, xp, asxp, tonp):
    """f = c·x (C₂ = 0): k aligned steps of size δ with kδ ≤ ε move f by exactly kδ‖c‖_q = (3.27)."""
    rng = np.random.default_rng(1)
    c = rng.normal(size=6)
    q = 1 if p == np.inf else 2
    eps, k = 0.5, 7
    delta = eps / k
    x = rng.normal(size=(3, 6))
    grad = lambda z, _: z * 0.0 + asxp(c)[None, :]  # noqa: E731
    x_adv = tonp(adv.pgd(grad, asxp(x), None, eps=eps, step_size=delta, steps=k, norm=norm))
    moved = (x_adv - x) @ c
    bound = adv.attack_displacement_bound(eps, np.linalg.norm(c, ord=q), 0.0, steps=k, step_size=delta)
    assert np.allclose(moved, bound, rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="2·eps"):
        adv.attack_displacement_bound(eps, 1.0, 1.0, steps=k, step_size=3 * eps / k)
    with pytest.raises(InvalidParameterError, match="c1"):
        adv.attack_displacement_bound(eps, -1.0, 1.0)


@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_lemma_3_5_3_sharp_form_is_attained_with_curvature(norm, xp, asxp, tonp):
    """(3.27) with C₂ > 0 is attained: f(x) = c₁ v·x + ½c₂(v·x)², x₀ with v·x₀ = 0, kδ ≤ ε (no projection).

    ℓ2: v a unit vector, ∇f = (c₁ + c₂v·x)v ∥ v, so every step is δv; ‖∇f(x₀)‖₂ = c₁ =: C₁ and the Hessian
    c₂vvᵀ has norm c₂ =: C₂.  ℓ∞: v ∈ {±1}^d, sign(∇f) = v, every step is δv, v·(x_k − x₀) = kδd;
    C₁ = ‖∇f(x₀)‖₁ = c₁d, C₂ = ‖c₂vvᵀ‖_{∞→1} = c₂d².  In both cases f(x_k) − f(x₀) = kδC₁ + ½k²δ²C₂
    exactly, which pins the ½ of (3.27).
    """
    rng = np.random.default_rng(3)
    d, c1, c2, eps, k = 5, 0.7, 1.3, 0.6, 6
    delta = 0.9 * eps / k
    if norm == "l2":
        v = rng.normal(size=d)
        v /= np.linalg.norm(v)
        C1, C2, shift = c1, c2, k * delta
    else:
        v = rng.choice([-1.0, 1.0], size=d)
        C1, C2, shift = c1 * d, c2 * d * d, k * delta * d
    x0 = rng.normal(size=(2, d))
    x0 -= np.outer(x0 @ v, v) / (v @ v)  # v·x₀ = 0
    vx = asxp(v)

    def f(z):
        s = z @ vx
        return tonp(c1 * s + 0.5 * c2 * s * s)

    grad = lambda z, _: (c1 + c2 * (z @ vx))[:, None] * vx[None, :]  # noqa: E731
    x_adv = adv.pgd(grad, asxp(x0), None, eps=eps, step_size=delta, steps=k, norm=norm)
    moved = f(x_adv) - f(asxp(x0))
    assert np.allclose(tonp(x_adv) @ v, shift, rtol=1e-13)
    expected = k * delta * C1 + 0.5 * (k * delta) ** 2 * C2  # (3.27), by hand
    assert np.allclose(moved, expected, rtol=1e-12)
    assert np.allclose(moved, adv.attack_displacement_bound(eps, C1, C2, steps=k, step_size=delta), rtol=1e-12)

# ---------------------------------------------------------------------------------------------
# softmax cross-entropy (3.39)–(3.43)
# ---------------------------------------------------------------------------------------------
@given(seed=seeds, n=st.integers(1, 5), k=st.integers(2, 10), scale=st.floats(0.01, 50.0),
       near=st.booleans())
def test_softmax_is_half_lipschitz(seed, n, k, scale, near, xp, asxp, tonp):
    """The correct form of (3.42)/(3.43): ‖softmax(a) − softmax(b)‖₂ ≤ ½‖a − b‖₂ (Jacobian norm ≤ ½)."""
    rng = np.random.default_rng(seed)
    a = scale * rng.normal(size=(n, k))
    b = a + (1e-3 if near else scale) * rng.normal(size=(n, k))
    left = np.linalg.norm(tonp(adv.softmax(asxp(a))) - tonp(adv.softmax(asxp(b))), axis=1)
    assert np.all(left <= 0.5 * np.linalg.norm(a - b, axis=1) + 1e-15)
    # so is the cross-entropy gradient (3.40)/(3.46): its difference is the softmax difference
    labels = asxp(rng.integers(0, k, size=n).astype(float))
    ga = tonp(adv.softmax_cross_entropy_gradient(asxp(a), labels))
    gb = tonp(adv.softmax_cross_entropy_gradient(asxp(b), labels))
    assert np.all(np.linalg.norm(ga - gb, axis=1) <= 0.5 * np.linalg.norm(a - b, axis=1) + 1e-15)


def test_softmax_half_is_the_best_constant(xp, asxp, tonp):
    h = 1e-4  # at equal logits of two classes the Jacobian [[¼, −¼], [−¼, ¼]] has norm exactly ½
    a, b = np.zeros((1, 2)), np.array([[h, -h]])
    ratio = np.linalg.norm(tonp(adv.softmax(asxp(b))) - tonp(adv.softmax(asxp(a)))) / np.linalg.norm(b - a)
    assert 0.5 * (1 - 1e-7) < ratio <= 0.5


def test_pointwise_softmax_claim_3_42_is_false(xp, asxp, tonp):
    """Seed 003 (3.42) claims (softmax(f)_j − softmax(fˢ)_j)² ≤ (f_j − fˢ_j)² for every j: false."""
    f, fs = np.array([[0.0, 0.0]]), np.array([[0.0, 10.0]])
    gap = (tonp(adv.softmax(asxp(f))) - tonp(adv.softmax(asxp(fs))))[0]
    left, right = gap[0] ** 2, (f - fs)[0, 0] ** 2
    assert np.isclose(left, (0.5 - 1 / (1 + math.exp(10))) ** 2, rtol=1e-12)  # 0.24995…
    assert left > 0.2499 and right == 0.0  # the claim (3.42) fails at j = 0
    assert np.linalg.norm(gap) <= np.linalg.norm(f - fs)  # (3.43) still holds (with room: ½)


def test_softmax_cross_entropy_value_and_gradient(xp, asxp, tonp):
    rng = np.random.default_rng(3)
    z = rng.normal(size=(4, 5)) * 3
    labels = np.array([0.0, 4.0, 2.0, 2.0])
    val = tonp(adv.softmax_cross_entropy(asxp(z), asxp(labels)))
    ref = np.log(np.exp(z).sum(1)) - z[np.arange(4), labels.astype(int)]
    assert np.allclose(val, ref, rtol=1e-14)
    g = tonp(adv.softmax_cross_entropy_gradient(asxp(z), asxp(labels)))
    assert np.allclose(g.sum(1), 0.0, atol=1e-15)  # (3.40): the gradient sums to 0 over classes
    h = 1e-6
    for j in range(5):
        e = np.zeros(5)
        e[j] = h
        fd = (tonp(adv.softmax_cross_entropy(asxp(z + e), asxp(labels)))
              - tonp(adv.softmax_cross_entropy(asxp(z - e), asxp(labels)))) / (2 * h)
        assert np.allclose(g[:, j], fd, rtol=1e-7, atol=1e-9)
    # stable at huge logits: l = 1000 + log(1 + e^{-1000}) = 1000 for the wrong label, 0 for the right one
    big = tonp(adv.softmax_cross_entropy(asxp(np.array([[1000.0, 0.0], [1000.0, 0.0]])), asxp(np.array([1.0, 0.0]))))
    assert np.array_equal(big, [1000.0, 0.0])
    with pytest.raises(InvalidParameterError, match="labels"):
        adv.softmax_cross_entropy(asxp(z), asxp(np.array([0.0, 5.0, 1.0, 1.0])))
    with pytest.raises(InvalidParameterError, match="labels"):
        adv.softmax_cross_entropy_gradient(asxp(z), asxp(np.array([0.5, 1.0, 1.0, 1.0])))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # −1.7e308 − 1.7e308 = −inf, intended
def test_softmax_cross_entropy_extreme_logits_are_never_nan(xp, asxp, tonp):
    """[−1.7e308, 1.7e308]: label 1 has loss exactly 0 (its logit is the max); label 0 overflows to +inf.
    The product form onehot·log_softmax gave 0·(−inf) = NaN for label 1."""
    z = asxp(np.array([[-1.7e308, 1.7e308], [-1.7e308, 1.7e308], [1.7e308, -1.7e308]]))
    val = tonp(adv.softmax_cross_entropy(z, asxp(np.array([1.0, 0.0, 0.0]))))
    assert not np.any(np.isnan(val))
    assert val[0] == 0.0 and val[2] == 0.0 and val[1] == np.inf


def test_targets_are_validated_before_any_broadcast(xp, asxp):
    """y of the wrong length (1 broadcasts silently, 2 raised raw broadcast errors) or NaN: InvalidParameterError."""
    net, params, x, y, x_adv = _mlp_setup(xp, asxp, depth=1, n=3)
    grad = adv.loss_input_gradient(net, params, "logistic")
    for bad in (y[:1], y[:2], y * float("nan"), asxp(np.ones((3, 3)))):
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.adversarial_training(net, params, x, bad, "logistic", eps=0.1, lr=0.1, steps=1)
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.adversarial_gradient_step(net, params, x_adv, bad, "logistic", lr=0.1)
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.mtk_output_change(net, params, x, x_adv, bad, "logistic", lr=0.1)
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.robust_accuracy(net, params, x, bad, eps=0.1)
    for bad in (y[:1], y[:2], y * float("nan")):
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.pgd(grad, x, bad, eps=0.1, step_size=0.05, steps=2)
        with pytest.raises(InvalidParameterError, match="'y'"):
            adv.fgsm(grad, x, bad, eps=0.1)


def test_inputs_and_parameters_are_checked_naming_the_users_argument(xp, asxp, tonp):
    """Bad network parameters are refused up front naming the argument the user passed ('params' of the
    gradient factory and of the MTK diagonal, 'params0' of training); the gradient callable checks its own
    (x, y) before broadcasting; project_ball and softmax cross-entropy never broadcast mismatched shapes."""
    net, params, x, y, x_adv = _mlp_setup(xp, asxp, depth=1, n=3)
    host = [(tonp(W), tonp(b)) for W, b in params]
    bad_params = {
        "nan": [(asxp(np.where(np.arange(W.size).reshape(W.shape) == 0, np.nan, W)), asxp(b)) for W, b in host],
        "short": params[:-1],
        "array": params[0][0],
    }
    for kind, bad in bad_params.items():
        with pytest.raises(InvalidParameterError, match=r"'params(\[0\] W)?'"):
            adv.loss_input_gradient(net, bad, "logistic")
        with pytest.raises(InvalidParameterError, match=r"'params0(\[0\] W)?'"):
            adv.adversarial_training(net, bad, x, y, "logistic", eps=0.1, lr=0.1, steps=1)
        with pytest.raises(InvalidParameterError, match=r"'params(\[0\] W)?'"):
            adv.mixed_tangent_kernel_diagonal(net, bad, x, x_adv)
    grad = adv.loss_input_gradient(net, params, "logistic")
    with pytest.raises(InvalidParameterError, match="'y'"):
        grad(x, y[None, :])  # (1, n): would have broadcast against the (n,) outputs
    with pytest.raises(InvalidParameterError, match=r"'y'.*shape \(0\)"):
        grad(x[:0, :], y)  # no rows of x, 3 targets
    with pytest.raises(InvalidParameterError, match="'z'"):
        adv.project_ball(x_adv[None, ...], x, 0.1)
    with pytest.raises(InvalidParameterError, match="'z'"):
        adv.project_ball(x_adv[:1, :], x, 0.1)
    with pytest.raises(InvalidParameterError, match="'labels'"):
        adv.softmax_cross_entropy(asxp(np.zeros((0, 3))), asxp(np.array([0.0, 1.0])))
    # lists and integers are data, converted on the inputs' device: the same values as float arrays
    xi = np.rint(4 * tonp(x))
    got = tonp(adv.project_ball(xi.tolist(), asxp(xi + 0.5), 0.2))
    np.testing.assert_array_equal(got, xi + 0.3)  # ℓ∞: x + clip(z − x, −ε, ε) = x − 0.2 exactly on this grid
    diag_list = tonp(adv.mixed_tangent_kernel_diagonal(net, params, tonp(x).tolist(), tonp(x_adv).tolist()))
    np.testing.assert_array_equal(diag_list, tonp(adv.mixed_tangent_kernel_diagonal(net, params, x, x_adv)))


def test_softmax_of_a_batch_of_logits_is_the_softmax_of_each_row(xp, asxp, tonp):
    """The leading axes of the logits are a batch: softmax(z[None, None]) = softmax(z)[None, None] exactly."""
    z = np.random.default_rng(3).normal(size=(4, 3)) * np.array([[1.0], [10.0], [1e3], [1e300]])
    for fn in (adv.softmax, adv.log_softmax):
        np.testing.assert_array_equal(tonp(fn(asxp(z[None, None]))), tonp(fn(asxp(z)))[None, None])
    np.testing.assert_allclose(tonp(adv.softmax(asxp(z[None]))).sum(-1), 1.0, rtol=1e-15)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the refused case overflows (inf, inf − inf) on purpose
def test_mtk_diagonal_is_quadratically_homogeneous_up_to_the_overflow_and_refused_beyond(xp, asxp, tonp):
    """A bias-free ReLU net is positively 1-homogeneous in x and its backward signals δ_ℓ are 0-homogeneous,
    so Θ(cx, cx̃) = c²·Θ(x, x̃) (c > 0): exact up to rounding at c = 1e150 (values ~1e300, finite); at
    c = 1e160 the true values (~1e320) exceed float64, and the function refuses instead of returning inf.
    Training from inputs whose outputs overflow is refused the same way (naming 'x')."""
    rng = np.random.default_rng(5)
    net = nets.FullyConnected(3, 16, depth=2, b_std=0.0)
    params = net.init(2, xp=xp)
    x, xa = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    base = tonp(adv.mixed_tangent_kernel_diagonal(net, params, asxp(x), asxp(xa)))
    c = 1e150
    big = tonp(adv.mixed_tangent_kernel_diagonal(net, params, asxp(c * x), asxp(c * xa)))
    assert np.all(np.isfinite(big))
    np.testing.assert_allclose(big / c / c, base, rtol=1e-12, atol=1e-12 * np.abs(base).max())
    with pytest.raises(FloatingPointError, match="overflows"):
        adv.mixed_tangent_kernel_diagonal(net, params, asxp(1e160 * x), asxp(1e160 * xa))
    y = asxp(np.array([1.0, -1.0, 1.0, -1.0, 1.0]))
    with pytest.raises(FloatingPointError, match="'x'"):
        adv.adversarial_training(net, params, asxp(1e300 * x), y, "logistic", eps=0.1, lr=0.1, steps=1)


def test_eps_zero_is_natural_training_and_norm_is_always_checked(xp, asxp, tonp):
    net, params, x, y, _ = _mlp_setup(xp, asxp, depth=1, n=4)
    calls = []

    def attack(p, xx, yy):
        calls.append(1)
        return xx + 0.5

    tr = adv.adversarial_training(net, params, x, y, "logistic", eps=0.0, lr=0.2, steps=3, attack=attack)
    nat = adv.adversarial_training(net, params, x, y, "logistic", eps=0.0, lr=0.2, steps=3)
    assert calls == []  # ε = 0: the ε-ball is {x}, the attack is never run
    np.testing.assert_array_equal(tonp(tr.outputs), tonp(nat.outputs))
    np.testing.assert_array_equal(tonp(tr.adv_outputs), tonp(nat.outputs)[:-1])
    with pytest.raises(InvalidParameterError, match="norm"):
        adv.robust_accuracy(net, params, x, y, eps=0.0, norm="l7")


def test_loss_gradient_lipschitz_constants_of_3_46(xp, asxp, tonp):
    """(3.46): |l′(z) − l′(z′)| ≤ C|z − z′| on random pairs (SciPy's expit for the logistic l′ = −yσ(−yz), an
    independent route) and C is the best constant: the ratio at (−h, h) → l″(0) = ¼ (logistic); squared (y − z)²:
    equality 2; hinge: l′ jumps at yz = 1, no finite C."""
    from scipy.special import expit

    rng = np.random.default_rng(0)
    C = adv.loss_gradient_lipschitz("logistic")
    assert C == 0.25
    z1, z2 = rng.normal(scale=3, size=(2, 2000))
    y = rng.choice([-1.0, 1.0], size=2000)
    lp = lambda z: -y * expit(-y * z)  # noqa: E731
    assert np.all(np.abs(lp(z1) - lp(z2)) <= C * np.abs(z1 - z2) * (1 + 1e-12))
    h = 1e-4
    assert (expit(h) - expit(-h)) / (2 * h) > C * (1 - 1e-8)  # l″(0) = ¼: no smaller constant works
    sq = losses.get("squared")
    d1, d2 = tonp(sq.derivative(asxp(z1), asxp(y))), tonp(sq.derivative(asxp(z2), asxp(y)))
    assert adv.loss_gradient_lipschitz("squared") == 2.0
    np.testing.assert_allclose(np.abs(d1 - d2), 2.0 * np.abs(z1 - z2), rtol=1e-12, atol=1e-12)
    assert adv.loss_gradient_lipschitz("softmax_cross_entropy") == 0.5  # see test_softmax_half_is_the_best_constant
    assert adv.loss_gradient_lipschitz("hinge") == math.inf
    hinge = losses.get("hinge")
    one = asxp(np.array([1.0]))
    jump = tonp(hinge.derivative(asxp(np.array([1 - 1e-9])), one) - hinge.derivative(asxp(np.array([1 + 1e-9])), one))
    assert abs(jump[0]) == 1.0  # |Δl′| = 1 over |Δz| = 2e-9


# ---------------------------------------------------------------------------------------------
# device placement: every public function, inputs on array_api_strict's second device
# ---------------------------------------------------------------------------------------------
def _adv_calls(strict, dev):
    rng = np.random.default_rng(0)
    on = lambda a: strict.asarray(np.asarray(a, dtype=np.float64), device=dev)  # noqa: E731
    net = nets.FullyConnected(3, 5, depth=2, b_std=0.3)
    params = net.init(0, xp=strict, device=dev)
    x, y = on(rng.normal(size=(4, 3))), on([1.0, -1.0, 1.0, -1.0])
    xa = x + on(0.1 * rng.normal(size=(4, 3)))
    grad = adv.loss_input_gradient(net, params, "logistic")
    logits, labels = on(rng.normal(size=(4, 3))), on([0.0, 2.0, 1.0, 1.0])
    return {
        "input_gradient": lambda: adv.input_gradient(net, params, x),
        "loss_input_gradient": lambda: grad(x, y),
        "fgsm": lambda: adv.fgsm(grad, x, y, eps=0.1, norm="l2"),
        "pgd": lambda: adv.pgd(grad, x, y, eps=0.1, step_size=0.05, steps=2, norm="linf", random_start=True, seed=0,
                               return_path=True),
        "project_ball": lambda: adv.project_ball(xa, x, 0.05, "l2"),
        "mixed_tangent_kernel": lambda: adv.mixed_tangent_kernel(net, params, x, xa),
        "mixed_tangent_kernel_diagonal": lambda: adv.mixed_tangent_kernel_diagonal(net, params, x, xa),
        "mtk_output_change": lambda: adv.mtk_output_change(net, params, x, xa, y, "logistic", lr=0.1),
        "adversarial_gradient_step": lambda: adv.adversarial_gradient_step(net, params, xa, y, "logistic", lr=0.1),
        "adversarial_training": lambda: adv.adversarial_training(net, params, x, y, "logistic", eps=0.1, lr=0.1,
                                                                 steps=2, attack_steps=2, random_start=True, seed=0,
                                                                 x_test=xa, record_mtk=True),
        "robust_accuracy": lambda: adv.robust_accuracy(net, params, x, y, eps=0.1, steps=2),
        "log_softmax": lambda: adv.log_softmax(logits),
        "softmax": lambda: adv.softmax(logits),
        "softmax_cross_entropy": lambda: adv.softmax_cross_entropy(logits, labels),
        "softmax_cross_entropy_gradient": lambda: adv.softmax_cross_entropy_gradient(logits, labels),
    }


# public names that take no arrays (scalars in, Python floats out) or are only returned (dataclasses)
_ADV_NO_ARRAYS = {"attack_displacement_bound", "loss_gradient_lipschitz", "AdversarialTrajectory"}
_ADV_CALLS = sorted(set(adv.__all__) - _ADV_NO_ARRAYS)


def test_device_table_covers_the_public_api():
    strict, dev = _device1()
    assert set(_adv_calls(strict, dev)) == set(_ADV_CALLS)


@pytest.mark.parametrize("name", _ADV_CALLS)
def test_public_functions_keep_the_inputs_device(name):
    """Inputs on array_api_strict's device1 (which refuses implicit NumPy conversion, like a GPU): every array
    returned is an array_api_strict array on device1 (runs in every backend mode, NumPy included)."""
    import array_api_compat

    strict, dev = _device1()
    out = _adv_calls(strict, dev)[name]()
    arrays = list(_arrays_in(out))
    if name == "robust_accuracy":
        assert isinstance(out, float) and not arrays
    else:
        assert arrays
    for a in arrays:
        assert array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(a)), type(a)
        assert array_api_compat.device(a) == dev


# ------------------------------------------------------------ ℓ2 projection at extreme scales (review defect 10)
def _exact_projection(z, x, eps):
    """Π(z) = z if ‖z − x‖₂ ≤ ε else x + ε(z − x)/‖z − x‖₂, per row, in 200-bit arithmetic (mpmath); also u."""
    import mpmath

    with mpmath.workprec(200):
        out, units = [], []
        for zi, xi in zip(z, x):
            r = [mpmath.mpf(float(a)) - mpmath.mpf(float(b)) for a, b in zip(zi, xi)]
            nr = mpmath.sqrt(mpmath.fsum(c * c for c in r))
            u = [c / nr for c in r] if nr > 0 else [mpmath.mpf(0)] * len(r)
            units.append([float(c) for c in u])
            out.append([mpmath.mpf(float(a)) for a in zi] if nr <= eps else
                       [mpmath.mpf(float(b)) + mpmath.mpf(eps) * c for b, c in zip(xi, u)])
        return out, np.array(units)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_l2_projection_is_exact_at_every_scale(dtype, xp, asxp, tonp):
    """Against the 200-bit projection: rows whose difference z − x overflows (|z|, |x| ~ max float, opposite signs:
    was inf), whose ‖z − x‖ overflows though z − x does not, huge neighbours with a small difference, ε/‖z − x‖
    below the smallest float (‖z − x‖ ~ 1e300, ε = 1e-10), tiny rows, ordinary rows, rows inside the ball.
    Error allowed: the unit vector's rounding, (d + 6)·eps·ε·|u_j|, plus one ulp of the result."""
    big = float(np.finfo(dtype).max) * 0.999
    top = np.nextafter(dtype(big), dtype(0))
    ulp_top = float(dtype(big)) - float(top)
    tiny = float(np.finfo(dtype).tiny)
    rows = [  # (z, x, ε)
        ([big, 0.0], [-big, 0.0], 1.0),
        ([big, big * 1e-8], [-big, 0.0], 1.0),
        ([big, big], [-big, -big], big / 4),
        ([big * 0.8, big * 0.8], [0.0, 0.0], 1.0),  # z − x finite, ‖z − x‖ overflows
        ([big, 5.0], [float(top), 0.0], 10.0 * ulp_top),  # huge neighbours, inside the ball: z itself
        ([big, 5.0], [float(top), 0.0], 0.1 * ulp_top),  # ... and outside
        ([3.0, -1.0], [1.0, 0.5], 0.5),
        ([3.0, -1.0], [1.0, 0.5], 5.0),  # inside
        ([1e30, -3e30], [0.0, 0.0], 1e-10) if dtype == np.float32 else ([1e300, -3e300], [0.0, 0.0], 1e-10),
        ([tiny * 2**20, -tiny * 2**19], [0.0, tiny * 2**18], tiny * 2**10),
    ]
    z = np.array([r[0] for r in rows], dtype=dtype)
    x = np.array([r[1] for r in rows], dtype=dtype)
    assert np.all(np.isfinite(z)) and np.all(np.isfinite(x))
    fe = float(np.finfo(dtype).eps)
    for i, (_, _, eps) in enumerate(rows):
        got = tonp(adv.project_ball(asxp(z[i:i + 1]), asxp(x[i:i + 1]), eps, "l2"))[0]
        assert got.dtype == dtype and np.all(np.isfinite(got)), (i, got)
        exact, u = _exact_projection(z[i:i + 1], x[i:i + 1], eps)
        ref = np.array([float(c) for c in exact[0]])
        err = np.array([abs(float(exact[0][j] - float(got[j]))) for j in range(2)])
        allowed = (2 + 6) * fe * eps * np.abs(u[0]) + np.spacing(np.abs(ref).astype(dtype)).astype(float)
        assert np.all(err <= allowed), (i, got, ref, err, allowed)
        if i in (4, 7):  # inside the ball: z unchanged, bit for bit
            assert np.array_equal(got, z[i])
    # the defect's own example: x + ε·e₁ = x exactly (1 is far below the spacing at 1.7e308)
    if dtype == np.float64:
        got = tonp(adv.project_ball(asxp(np.array([[1.7e308, 0.0]])), asxp(np.array([[-1.7e308, 0.0]])), 1.0, "l2"))
        np.testing.assert_array_equal(got, [[-1.7e308, 0.0]])
