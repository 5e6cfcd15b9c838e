"""Finite-width nets: hand-written Jacobian vs finite differences, Θ̂ = J Jᵀ, Θ̂ → analytic NTK."""
import math

import array_api_compat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ntkref import InvalidParameterError
from ntkref import kernels as K
from ntkref import nets
from ._device import assert_on_device as _assert_on_device, device1 as _device1


def _perturbed(params, flat_index, h, xp):
    """Copy of params with parameter number `flat_index` (jacobian order) moved by h."""
    from ntkref import to_numpy

    out, offset = [], 0
    for W, b in params:
        Wn = to_numpy(W).copy()
        bn = None if b is None else to_numpy(b).copy()
        if offset <= flat_index < offset + Wn.size:
            Wn.reshape(-1)[flat_index - offset] += h
        offset += Wn.size
        if bn is not None:
            if offset <= flat_index < offset + bn.size:
                bn[flat_index - offset] += h
            offset += bn.size
        dev = array_api_compat.device(W)
        out.append((xp.asarray(Wn, device=dev), None if bn is None else xp.asarray(bn, device=dev)))
    return out


@pytest.mark.parametrize("depth, b_std", [(1, 0.0), (2, 0.5), (3, 0.2)])
def test_jacobian_matches_central_differences(depth, b_std, xp, asxp, tonp):
    rng = np.random.default_rng(depth)
    net = nets.FullyConnected(4, 6, depth=depth, W_std=[1.0] + [1.4] * depth, b_std=b_std)
    params = net.init(1, xp=xp)
    x = asxp(rng.normal(size=(3, 4)))
    J = tonp(net.jacobian(params, x))
    assert J.shape == (3, net.n_params)
    h = 1e-6
    for k in range(net.n_params):
        fp = tonp(net.apply(_perturbed(params, k, h, xp), x))
        fm = tonp(net.apply(_perturbed(params, k, -h, xp), x))
        fd = (fp - fm) / (2 * h)
        # central differences: O(h²) truncation (exact here away from ReLU kinks) + O(eps/h) rounding
        assert np.allclose(J[:, k], fd, atol=1e-8, rtol=1e-7), k


def test_vjp_is_transposed_jacobian(xp, asxp, tonp):
    rng = np.random.default_rng(2)
    net = nets.FullyConnected(5, [7, 3], depth=2, b_std=0.3)
    params = net.init(3, xp=xp)
    x = asxp(rng.normal(size=(4, 5)))
    c = rng.normal(size=4)
    grads = net.vjp(params, x, asxp(c))
    flat = np.concatenate([np.concatenate([tonp(dW).ravel()] + ([tonp(db)] if db is not None else [])) for dW, db in grads])
    assert np.allclose(flat, tonp(net.jacobian(params, x)).T @ c, rtol=1e-13, atol=1e-14)


@settings(max_examples=15)
@given(seed=st.integers(0, 2**31), depth=st.integers(1, 3), width=st.integers(1, 9), n1=st.integers(1, 4), n2=st.integers(1, 4), bias=st.booleans())
def test_layer_factorised_ntk_equals_explicit_jjt(seed, depth, width, n1, n2, bias, xp, asxp, tonp):
    rng = np.random.default_rng(seed)
    net = nets.FullyConnected(3, width, depth=depth, b_std=0.7 if bias else 0.0)
    params = net.init(rng, xp=xp)
    x1, x2 = asxp(rng.normal(size=(n1, 3))), asxp(rng.normal(size=(n2, 3)))
    J1, J2 = tonp(net.jacobian(params, x1)), tonp(net.jacobian(params, x2))
    theta = tonp(nets.empirical_ntk(net, params, x1, x2))
    assert np.allclose(theta, J1 @ J2.T, rtol=1e-12, atol=1e-12 * np.abs(J1 @ J2.T).max())
    sym = tonp(nets.empirical_ntk(net, params, x1))
    assert np.array_equal(sym, sym.T)


@pytest.mark.parametrize("depth, b_std", [(1, 0.0), (2, 0.3)])
def test_empirical_ntk_converges_to_analytic(depth, b_std, xp, asxp, tonp):
    """‖Θ̂ − Θ‖ shrinks like 1/√m: at m = 4096 below half its value at m = 256 (mean over 4 seeds), and
    √m·error stays below a fixed multiple (3) of the kernel's scale."""
    rng = np.random.default_rng(10 + depth)
    x = rng.normal(size=(5, 4))
    x[1] = -x[0]  # antiparallel pair
    exact = tonp(K.fc(asxp(x), depth=depth, b_std=b_std).ntk)
    scale = np.abs(exact).max()
    errs = {}
    for m in (256, 4096):
        net = nets.FullyConnected(4, m, depth=depth, b_std=b_std)
        e = [np.abs(tonp(nets.empirical_ntk(net, net.init(s, xp=xp), asxp(x))) - exact).max() for s in range(4)]
        errs[m] = float(np.mean(e))
        assert errs[m] * math.sqrt(m) <= 3 * scale, (m, errs[m])
    assert errs[4096] < 0.5 * errs[256], errs


def test_init_is_reproducible_and_standard_normal(xp, tonp):
    net = nets.FullyConnected(10, 200, depth=2, b_std=1.0)
    a, b = net.init(7, xp=xp), net.init(7, xp=xp)
    for (Wa, ba), (Wb, bb) in zip(a, b):
        assert np.array_equal(tonp(Wa), tonp(Wb)) and np.array_equal(tonp(ba), tonp(bb))
    allw = np.concatenate([tonp(W).ravel() for W, _ in a])
    # mean and variance of ~42 000 N(0,1) draws: 5 standard errors
    assert abs(allw.mean()) < 5 / math.sqrt(allw.size)
    assert abs(allw.var() - 1) < 5 * math.sqrt(2 / allw.size)


def test_bad_inputs(xp, asxp):
    with pytest.raises(InvalidParameterError, match="width"):
        nets.FullyConnected(3, -2)
    with pytest.raises(InvalidParameterError, match="depth"):
        nets.FullyConnected(3, 4, depth=0)
    with pytest.raises(InvalidParameterError, match="W_std"):
        nets.FullyConnected(3, 4, W_std=-1.0)
    net = nets.FullyConnected(3, 4)
    params = net.init(0, xp=xp)
    with pytest.raises(InvalidParameterError, match="features"):
        net.apply(params, asxp(np.ones((2, 5))))
    with pytest.raises(InvalidParameterError, match="layers"):
        net.apply(params[:1], asxp(np.ones((2, 3))))
    other = nets.FullyConnected(3, 5).init(0, xp=xp)
    with pytest.raises(InvalidParameterError, match="shape"):
        net.apply(other, asxp(np.ones((2, 3))))
    bad = np.ones((2, 3))
    bad[1, 1] = np.nan
    with pytest.raises(InvalidParameterError, match="NaN"):
        net.jacobian(params, asxp(bad))


def test_init_refuses_non_floating_dtypes(xp, tonp):
    """An integer dtype would truncate the N(0, 1) draws (most weights 0): an error, not a silent cast."""
    net = nets.FullyConnected(3, 4, b_std=0.5)
    for bad in (np.int32, xp.int32, xp.int64, xp.bool, "int32"):
        with pytest.raises(InvalidParameterError, match="dtype"):
            net.init(0, xp=xp, dtype=bad)
    with pytest.raises(InvalidParameterError, match="dtype"):
        net.init(0, dtype=np.int32)
    # float32 is a floating dtype: the float64 host draw rounded
    W32, W64 = net.init(0, xp=xp, dtype=xp.float32)[0][0], net.init(0, xp=xp)[0][0]
    assert W32.dtype == xp.float32
    np.testing.assert_array_equal(tonp(W32), tonp(W64).astype(np.float32))


def test_list_inputs_go_to_the_parameters_device(xp, asxp, tonp, on_device):
    net = nets.FullyConnected(3, 4, depth=2, b_std=0.5)
    params = net.init(2, xp=xp)
    x = [[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]]
    f = net.apply(params, x)
    on_device(f)
    np.testing.assert_array_equal(tonp(f), tonp(net.apply(params, asxp(np.array(x)))))
    on_device(*[g for layer in net.vjp(params, x, [1.0, -1.0]) for g in layer])


# ------------------------------------------------------------------ device placement


_NET = nets.FullyConnected(3, 4, depth=2, b_std=0.4)
_DEVICE_CALLS = {
    "FullyConnected.init": lambda p, x, y, c, s, d: _NET.init(0, xp=s, device=d),
    "FullyConnected.init-float32": lambda p, x, y, c, s, d: _NET.init(0, xp=s, device=d, dtype=s.float32),
    "FullyConnected.apply": lambda p, x, y, c, s, d: _NET.apply(p, x),
    "FullyConnected.features": lambda p, x, y, c, s, d: _NET.features(p, x),
    "FullyConnected.jacobian": lambda p, x, y, c, s, d: _NET.jacobian(p, x),
    "FullyConnected.vjp": lambda p, x, y, c, s, d: _NET.vjp(p, x, c),
    "FullyConnected.empirical_ntk": lambda p, x, y, c, s, d: _NET.empirical_ntk(p, x, y),
    "empirical_ntk": lambda p, x, y, c, s, d: nets.empirical_ntk(_NET, p, x),
}


@pytest.mark.parametrize("name", list(_DEVICE_CALLS))
def test_public_functions_return_arrays_on_the_input_device(name):
    """Inputs and parameters on array_api_strict's device1 (the CPU stand-in for a GPU) give results on device1."""
    strict, dev = _device1()
    rng = np.random.default_rng(0)
    x = strict.asarray(rng.normal(size=(3, 3)), device=dev)
    y = strict.asarray(rng.normal(size=(2, 3)), device=dev)
    c = strict.asarray(rng.normal(size=3), device=dev)
    params = _NET.init(1, xp=strict, device=dev)
    _assert_on_device(_DEVICE_CALLS[name](params, x, y, c, strict, dev), strict, dev)


def test_init_uses_the_default_device(monkeypatch):
    """Without xp/device, init creates parameters in NTKREF_BACKEND's namespace on NTKREF_DEVICE."""
    strict, dev = _device1()
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    _assert_on_device(_NET.init(0), strict, dev)
    _assert_on_device(_NET.init(0, xp=strict), strict, dev)
    # an explicit device wins
    cpu = strict.Device("CPU_DEVICE")
    assert all(array_api_compat.device(W) == cpu for W, _ in _NET.init(0, device=cpu))


# ------------------------------------------------- finite or an error at the ends of the range


def _wrapped(kind, net, params):
    if kind == "plain":
        return net, params
    if kind == "scaled":
        return nets.Scaled(net, 2.0), params
    if kind == "linearized":
        return nets.Linearized(net, params), params
    return nets.Antisymmetric(net), (params, params)


@pytest.mark.parametrize("kind", ["plain", "scaled", "linearized", "antisymmetric"])
@pytest.mark.parametrize("value", [1e200, -1e300])
def test_empirical_ntk_overflow_is_an_error(kind, value, xp, asxp):
    net = nets.FullyConnected(2, 8, depth=2, b_std=0.5)
    model, params = _wrapped(kind, net, net.init(0, xp=xp))
    x = asxp(np.array([[value, 0.0], [1.0, 1.0]]))
    with pytest.raises(InvalidParameterError, match="empirical_ntk: .*'x1'/'x2' and 'params' is outside the representable"):
        nets.empirical_ntk(model, params, x)
    with pytest.raises(InvalidParameterError, match="representable"):
        nets.empirical_ntk(model, params, x, x)


def test_empirical_ntk_is_homogeneous_up_to_large_scales(xp, asxp, tonp):
    # no biases: Θ̂(cx, cx') = c²Θ̂(x, x') for c > 0, finite as long as the values are
    net = nets.FullyConnected(2, 8, depth=2)
    params = net.init(0, xp=xp)
    x = np.random.default_rng(3).normal(size=(3, 2))
    ref = tonp(nets.empirical_ntk(net, params, asxp(x)))
    got = tonp(nets.empirical_ntk(net, params, asxp(1e100 * x)))
    assert np.allclose(got / 1e200, ref, rtol=1e-13, atol=0)


def test_empirical_ntk_on_dask_inputs_equals_numpy():
    """A Dask x1 (or x2) gives the lazy blockwise Gram of the Dask engine: equal to the NumPy empirical NTK (the
    symmetric x2=None Gram too, whose lower blocks are transposes of upper ones)."""
    da = pytest.importorskip("dask.array")
    import dask

    from ntkref import nets as N

    net = N.FullyConnected(3, 16, depth=2, b_std=0.3)
    params = net.init(0, xp=np)
    rng = np.random.default_rng(7)
    x1, x2 = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    with dask.config.set(scheduler="synchronous"):
        for a, b in ((da.from_array(x1, chunks=(3, 3)), da.from_array(x2, chunks=(2, 3))),
                     (da.from_array(x1, chunks=(3, 3)), x2)):
            lazy = N.empirical_ntk(net, params, a, b)
            assert isinstance(lazy, da.Array)
            np.testing.assert_allclose(lazy.compute(), net.empirical_ntk(params, x1, x2), rtol=1e-13, atol=1e-13)
        sym = N.empirical_ntk(net, params, da.from_array(x1, chunks=(3, 3))).compute()
    ref = net.empirical_ntk(params, x1)
    np.testing.assert_allclose(sym, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(sym, sym.T)
