"""Seed 000 Table 1 losses: derivatives, kink conventions, constants ρ and β_l, stability, errors.

Oracles: central finite differences (derivatives), one-sided differences at the
kinks (the convention must be a subgradient), explicit pairs of points where the
Lipschitz / smoothness ratios reach their constants (tightness), mpmath at 50
digits (logistic), and hypothesis for the inequalities on adversarial inputs.
"""
import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ntkref import losses
from ntkref._lib.validation import InvalidParameterError

CLASSIFICATION = ("hinge", "squared_hinge", "logistic")
REGRESSION = ("epsilon_insensitive", "squared")
EPS = 0.25  # ε of the ε-insensitive loss in these tests (not the default, to see it is used)


def _loss(name):
    return losses.get(name, epsilon=EPS) if name == "epsilon_insensitive" else losses.get(name)


def _kink_distance(name, z, y):
    """Distance of z from the loss's kinks (points where l′ or l″ is discontinuous)."""
    if name in ("hinge", "squared_hinge"):
        return np.abs(y * z - 1)
    if name == "epsilon_insensitive":
        return np.minimum(np.abs(z - y - EPS), np.abs(z - y + EPS))
    return np.full_like(z, np.inf)


def _labels(name, rng, n):
    if name in CLASSIFICATION:
        return rng.choice([-1.0, 1.0], size=n)
    return rng.uniform(-2, 2, size=n)


def _np(loss, method, z, y, xp, asxp, tonp):
    return tonp(getattr(loss, method)(asxp(np.asarray(z, dtype=np.float64)), asxp(np.asarray(y, dtype=np.float64))))


# ----------------------------------------------------------------------------- derivatives


@pytest.mark.parametrize("name", losses.NAMES)
def test_derivative_matches_central_differences(name, xp, asxp, tonp):
    rng = np.random.default_rng(0)
    z = rng.uniform(-3, 3, size=400)
    y = _labels(name, rng, 400)
    h = 1e-6
    # Central differences are exact for quadratics; the error is h²/6·|l‴| + 2·eps·|l|/h ≈ 1e-9 here.
    # Points within 10h of a kink are excluded (there the difference quotient straddles it).
    keep = _kink_distance(name, z, y) > 10 * h
    z, y = z[keep], y[keep]
    loss = _loss(name)
    fd = (_np(loss, "value", z + h, y, xp, asxp, tonp) - _np(loss, "value", z - h, y, xp, asxp, tonp)) / (2 * h)
    np.testing.assert_allclose(_np(loss, "derivative", z, y, xp, asxp, tonp), fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize(
    "name, z, y, expected",
    [
        ("hinge", 1.0, 1.0, 0.0),  # yz = 1: strict 𝟙(yz < 1) gives 0 (the paper's convention)
        ("hinge", -1.0, -1.0, 0.0),
        ("hinge", 1.0 - 2**-52, 1.0, -1.0),  # just inside the margin
        ("hinge", -0.5, -1.0, 1.0),  # −y
        ("squared_hinge", 1.0, 1.0, 0.0),  # C¹: both sides agree
        ("epsilon_insensitive", 1.0 + EPS, 1.0, 0.0),  # |y − z| = ε: strict, 0
        ("epsilon_insensitive", 1.0 - EPS, 1.0, 0.0),
        ("epsilon_insensitive", 1.0 + 2 * EPS, 1.0, 1.0),  # sign(z − y)
        ("epsilon_insensitive", 1.0 - 2 * EPS, 1.0, -1.0),
    ],
)
def test_kink_conventions(name, z, y, expected, xp, asxp, tonp):
    loss = _loss(name)
    assert _np(loss, "derivative", [z], [y], xp, asxp, tonp)[0] == expected


@pytest.mark.parametrize("name, z, y", [("hinge", 1.0, 1.0), ("hinge", -1.0, -1.0), ("epsilon_insensitive", 1.25, 1.0),
                                        ("epsilon_insensitive", 0.75, 1.0), ("squared_hinge", 1.0, 1.0)])
def test_kink_value_is_a_subgradient(name, z, y, xp, asxp, tonp):
    """At a kink, the chosen l′ lies between the one-sided derivatives (it is a subgradient)."""
    loss = _loss(name)
    h = 1e-7
    left = (_np(loss, "value", [z], [y], xp, asxp, tonp) - _np(loss, "value", [z - h], [y], xp, asxp, tonp))[0] / h
    right = (_np(loss, "value", [z + h], [y], xp, asxp, tonp) - _np(loss, "value", [z], [y], xp, asxp, tonp))[0] / h
    d = _np(loss, "derivative", [z], [y], xp, asxp, tonp)[0]
    assert min(left, right) - 1e-6 <= d <= max(left, right) + 1e-6


# ----------------------------------------------------------------------------- constants ρ, β_l


finite_z = st.floats(-50, 50, allow_nan=False)


@pytest.mark.parametrize("name", losses.NAMES)
@given(z1=finite_z, z2=finite_z, label=st.sampled_from([-1.0, 1.0]), target=st.floats(-3, 3))
def test_lipschitz_and_smoothness_constants_hold(name, z1, z2, label, target, xp, asxp, tonp):
    loss = _loss(name)
    y = label if loss.classification else target
    v = _np(loss, "value", [z1, z2], [y, y], xp, asxp, tonp)
    d = _np(loss, "derivative", [z1, z2], [y, y], xp, asxp, tonp)
    # rounding: values up to ~50² carry absolute error ~1e-12
    if loss.lipschitz is not None:
        assert abs(v[0] - v[1]) <= loss.lipschitz * abs(z1 - z2) + 1e-12
    if loss.smoothness is not None:
        assert abs(d[0] - d[1]) <= loss.smoothness * abs(z1 - z2) + 1e-12


@pytest.mark.parametrize(
    "name, constant, z1, z2, y, ratio_at_least",
    [
        # Lipschitz constants attained (or approached) by explicit pairs
        ("hinge", "lipschitz", -3.0, 0.0, 1.0, 1.0),
        ("epsilon_insensitive", "lipschitz", 3.0, 5.0, 0.0, 1.0),
        ("logistic", "lipschitz", -41.0, -40.0, 1.0, 1.0 - 1e-15),  # slope → 1 as yz → −∞
        # smoothness constants attained
        ("squared_hinge", "smoothness", -3.0, 0.0, 1.0, 2.0),
        ("squared", "smoothness", -3.0, 5.0, 0.5, 2.0),
        ("logistic", "smoothness", -1e-4, 1e-4, 1.0, 0.25 - 1e-8),  # l″(0) = 1/4 is the max of σ(1−σ)
    ],
)
def test_constants_are_tight(name, constant, z1, z2, y, ratio_at_least, xp, asxp, tonp):
    loss = _loss(name)
    method = "value" if constant == "lipschitz" else "derivative"
    v = _np(loss, method, [z1, z2], [y, y], xp, asxp, tonp)
    ratio = abs(v[0] - v[1]) / abs(z1 - z2)
    bound = getattr(loss, constant)
    assert ratio <= bound * (1 + 1e-12)
    assert ratio >= ratio_at_least


@pytest.mark.parametrize("name, constant", [("squared_hinge", "lipschitz"), ("squared", "lipschitz"),
                                            ("hinge", "smoothness"), ("epsilon_insensitive", "smoothness")])
def test_missing_constants_really_do_not_exist(name, constant, xp, asxp, tonp):
    """ρ = None: difference quotients of l are unbounded; β_l = None: l′ jumps."""
    loss = _loss(name)
    y = 1.0
    if constant == "lipschitz":
        z1, z2 = -1e6, -1e6 + 1
        v = _np(loss, "value", [z1, z2], [y, y], xp, asxp, tonp)
        assert abs(v[0] - v[1]) > 1e5  # slope ~2e6: no finite ρ
    else:
        kink = 1.0 if name == "hinge" else 1.0 + EPS
        h = 1e-9
        d = _np(loss, "derivative", [kink - h, kink + h], [y, y], xp, asxp, tonp)
        assert abs(d[0] - d[1]) / (2 * h) > 1e8  # jump of size 1 over 2e-9
    assert getattr(loss, constant) is None


# ----------------------------------------------------------------------------- logistic stability


def _mp_logistic(m):
    with mpmath.workdps(50):
        m = mpmath.mpf(m)
        return float(mpmath.log1p(mpmath.exp(-m))), float(-1 / (1 + mpmath.exp(m)))


@pytest.mark.parametrize("z", [-1e300, -1e20, -745.0, -40.0, -1.0, -1e-300, 0.0, 1e-300, 1.0, 40.0, 745.0, 1e20, 1e300])
@pytest.mark.parametrize("y", [-1.0, 1.0])
def test_logistic_is_stable_for_huge_margins(z, y, xp, asxp, tonp):
    loss = losses.get("logistic")
    # overflow or NaN would raise; underflow to 0 of e^{-|m|} is the intended behaviour
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        warnings.simplefilter("error")
        v = _np(loss, "value", [z], [y], xp, asxp, tonp)[0]
        d = _np(loss, "derivative", [z], [y], xp, asxp, tonp)[0]
    ref_v, ref_d = _mp_logistic(y * z)
    assert math.isfinite(v) and math.isfinite(d)
    # log1p(e^{-m}) to a few ulps; the derivative y·(−σ(−m)) likewise (absolute for tiny values)
    assert v == pytest.approx(ref_v, rel=4e-16, abs=1e-300)
    assert d * y == pytest.approx(ref_d, rel=4e-16, abs=1e-300)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", CLASSIFICATION)
@pytest.mark.parametrize("bad", [0.0, 0.5, 2.0, -1.0000001])
def test_classification_losses_reject_non_pm1_labels(name, bad, xp, asxp):
    loss = losses.get(name)
    with pytest.raises(InvalidParameterError, match="'y'.*-1 and \\+1"):
        loss.value(asxp(np.array([0.3, 0.2])), asxp(np.array([1.0, bad])))
    with pytest.raises(InvalidParameterError, match="'y'"):
        loss.derivative(asxp(np.array([0.3, 0.2])), asxp(np.array([bad, 1.0])))


def test_unknown_name_option_and_negative_epsilon():
    with pytest.raises(InvalidParameterError, match="'name'.*'hinge'"):
        losses.get("hinge_loss")
    with pytest.raises(InvalidParameterError, match="no options"):
        losses.get("hinge", epsilon=0.1)
    with pytest.raises(InvalidParameterError, match="only epsilon"):
        losses.get("epsilon_insensitive", eps=0.1)
    with pytest.raises(InvalidParameterError, match="'epsilon'.*range"):
        losses.get("epsilon_insensitive", epsilon=-0.1)
    with pytest.raises(InvalidParameterError, match="'epsilon'"):
        losses.get("epsilon_insensitive", epsilon=float("nan"))
    with pytest.raises(InvalidParameterError, match="options"):
        losses.get(losses.get("hinge"), epsilon=0.1)


def test_nan_inputs_are_rejected(xp, asxp):
    loss = losses.get("squared")
    with pytest.raises(InvalidParameterError, match="NaN"):
        loss.value(asxp(np.array([np.nan])), asxp(np.array([1.0])))


# ------------------------------------------------------------------ device placement


@pytest.mark.parametrize("method", ["value", "derivative", "check_targets"])
@pytest.mark.parametrize("name", CLASSIFICATION + REGRESSION)
def test_loss_methods_return_arrays_on_the_inputs_device(name, method):
    """Inputs on array_api_strict's device1 (a stand-in for a GPU, which refuses implicit NumPy
    conversion): every array returned is a strict array on device1, also when y (or z) is a Python
    scalar (created on the array's device, not the default one)."""
    import array_api_compat

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    loss = _loss(name)  # losses.get: the module's other public function
    z = strict.asarray(np.array([0.5, -1.5, 2.0]), device=dev)
    y = strict.asarray(np.array([1.0, -1.0, 1.0]), device=dev)
    if method == "check_targets":
        results = [loss.check_targets(y)]
    else:
        f = getattr(loss, method)
        results = [f(z, y), f(z, 1.0), f(z[0], y)]
    for arr in results:
        assert array_api_compat.array_namespace(arr) is strict, type(arr)
        assert array_api_compat.device(arr) == dev, array_api_compat.device(arr)


# ------------------------------------------------------------------ shapes and the representable range


@pytest.mark.parametrize("name", losses.NAMES)
@pytest.mark.parametrize("method", ["value", "derivative"])
def test_broadcasting_extra_axes_and_scalars(name, method, xp, asxp, tonp):
    """Elementwise: extra leading axes on z or on y give the same numbers with those axes (also for the ±1
    labels of the classification losses, whose shape is kept), and a scalar label is the constant vector."""
    loss = _loss(name)
    z = np.array([[0.3, -1.2, 2.0], [0.0, 0.7, -0.4]])
    y = np.array([1.0, -1.0, 1.0])
    f = getattr(loss, method)
    ref = np.stack([tonp(f(asxp(z[i]), asxp(y))) for i in range(2)])
    np.testing.assert_array_equal(tonp(f(asxp(z), asxp(y))), ref)
    got = tonp(f(asxp(z[0]), asxp(y[None, None, :])))
    assert got.shape == (1, 1, 3)
    np.testing.assert_array_equal(got[0, 0], ref[0])
    np.testing.assert_array_equal(tonp(f(asxp(z[0]), asxp(np.array(1.0)))),
                                  tonp(f(asxp(z[0]), asxp(np.ones(3)))))


@pytest.mark.parametrize("name", losses.NAMES)
@pytest.mark.parametrize("zshape, yshape", [((4, 1), (4,)), ((0,), (4,)), ((4,), (3,)), ((3,), (2, 1))])
def test_outer_products_and_mismatched_shapes_are_refused(name, zshape, yshape, asxp):
    """z (n, 1) against y (n,) would silently give an n × n table: refused, like shapes that do not broadcast."""
    loss = _loss(name)
    z, y = np.zeros(zshape), np.ones(yshape)
    for method in ("value", "derivative"):
        with pytest.raises(InvalidParameterError, match=r"'z' and 'y'.*shape"):
            getattr(loss, method)(asxp(z), asxp(y))


def test_extreme_scales_are_exact_or_refused(asxp, tonp):
    """At the edge of float64 the closed forms hold exactly (powers of two); one step further the true value is
    not representable and the loss refuses (never inf or NaN)."""
    sq, sqh, eps = losses.get("squared"), losses.get("squared_hinge"), losses.get("epsilon_insensitive", epsilon=0.5)
    a = 2.0 ** 510
    # (y − z)² = (2^511)² = 2^1022 and 2(z − y) = −2^512, exactly (the squared loss's value one step further is
    # still inf: machines reports it, see tests/bad_input_pending/losses.py)
    assert tonp(sq.value(asxp(np.array([-a])), asxp(np.array([a]))))[0] == 2.0 ** 1022
    assert tonp(sq.derivative(asxp(np.array([-a])), asxp(np.array([a]))))[0] == -(2.0 ** 512)
    # max(0, 1 − yz)² at yz = −2^510: (1 + 2^510)² rounds to 2^1020; l′ = −2y(1 + 2^510) rounds to −2^511
    assert tonp(sqh.value(asxp(np.array([-a])), asxp(np.array([1.0]))))[0] == 2.0 ** 1020
    assert tonp(sqh.derivative(asxp(np.array([-a])), asxp(np.array([1.0]))))[0] == -(2.0 ** 511)
    # |y − z| − ε at z = 1e308, y = −5e307: 1.5e308 − 0.5 (the ε is below one ulp)
    assert tonp(eps.value(asxp(np.array([1e308])), asxp(np.array([-5e307]))))[0] == 1e308 + 5e307
    with np.errstate(over="ignore"):
        for loss, method, z, y in [(sq, "derivative", 1e308, -1e308), (sqh, "value", -4 * a, 1.0),
                                   (sqh, "derivative", -1e308, 1.0), (eps, "value", 1e308, -1e308)]:
            with pytest.raises(InvalidParameterError, match=r"overflows for these 'z' and 'y'"):
                getattr(loss, method)(asxp(np.array([z, 0.5])), asxp(np.array([y, 1.0])))
    # the bounded losses stay finite at the largest inputs
    for name in ("hinge", "logistic"):
        loss = losses.get(name)
        for method in ("value", "derivative"):
            assert np.all(np.isfinite(tonp(getattr(loss, method)(asxp(np.array([-1.7e308, 1.7e308])),
                                                                 asxp(np.array([1.0, -1.0]))))))
