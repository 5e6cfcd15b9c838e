"""ntkref.testing: the strategies reach the hard regions, and the checkers catch wrong candidates.

The candidates here are written independently of ntkref (NumPy textbook recursions, an mpmath
evaluation, closed forms with SciPy); "wrong" candidates carry one deliberate, realistic bug each,
and the checker must report a *minimal* example (one or two rows) whose reported values are
reproducible by calling the candidate again.  The reference inside the checkers is computed in the
namespace selected by NTKREF_BACKEND on the device NTKREF_DEVICE names (candidates and reports stay NumPy), so this
file also runs under array_api_strict and on its device1.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ntkref import InvalidParameterError
from ntkref import testing as T
from ntkref.kernels import fc

from ._mp_reference import fc_pair

# ---------------------------------------------------------------------------------------------
# independent candidates
# ---------------------------------------------------------------------------------------------
def mp_candidate(depth, W=1.0, b=0.0, activation="relu"):
    """Correct, independent: 50-digit mpmath evaluation of each entry (tests/_mp_reference.py)."""

    def kernel(x1, x2=None):
        x2 = x1 if x2 is None else x2
        out = np.empty((len(x1), len(x2)))
        for i, a in enumerate(x1):
            for j, c in enumerate(x2):
                out[i, j] = float(fc_pair(a, c, depth, W, b, activation)[1])
        return out

    return kernel


def naive_candidate(depth, *, missing_one_over_d=False, zero_rows_nan=False):
    """Textbook NumPy recursion: θ = arccos(clip(ρ)), which loses √eps near parallel rows.

    Zero rows give Θ = 0 (ρ := 0 where q = 0) unless ``zero_rows_nan`` (0/0, a common bug).
    """

    def kernel(x1, x2=None):
        x2 = x1 if x2 is None else x2
        d = x1.shape[1] if not missing_one_over_d else 1
        k = x1 @ x2.T / d
        q1 = np.sum(x1 * x1, axis=1) / d
        q2 = np.sum(x2 * x2, axis=1) / d
        ntk = k.copy()
        for _ in range(depth):
            s = np.sqrt(np.outer(q1, q2))
            with np.errstate(all="ignore"):
                rho = np.clip(k / s if zero_rows_nan else np.where(s > 0, k / np.where(s > 0, s, 1.0), 0.0),
                              -1.0, 1.0)
            theta = np.arccos(rho)
            k = s * (np.sin(theta) + (np.pi - theta) * rho) / (2 * np.pi)
            ntk = k + ntk * (np.pi - theta) / (2 * np.pi)
            q1, q2 = q1 / 2, q2 / 2
        return ntk

    return kernel


def wrong_diagonal_candidate(depth, rel=1e-9):
    """Right off the diagonal (mpmath), diagonal off by a relative `rel`."""
    good = mp_candidate(depth)

    def kernel(x1, x2=None):
        K = good(x1, x2)
        if x2 is None:
            K[np.diag_indices_from(K)] *= 1 + rel
        return K

    return kernel


MODERATE = T.kernel_inputs(scale_range=(1e-3, 1e3))


def _assert_reproducible(mismatch, candidate, depth):
    """The reported values are what the candidate and the (independent) mpmath reference give there."""
    x1, x2 = mismatch.inputs["x1"], mismatch.inputs["x2"]
    i, j = mismatch.location
    value = candidate(x1, x2)[i, j]
    assert value == mismatch.candidate_value or (np.isnan(value) and np.isnan(mismatch.candidate_value))
    a = x1[i]
    c = (x1 if x2 is None else x2)[j]
    ref = float(fc_pair(a, c, depth, 1.0, 0.0)[1])
    # ntkref's reference value agrees with mpmath to its documented 1e-13 of the scale
    scale = math.sqrt(float(fc_pair(a, a, depth, 1.0, 0.0)[1]) * float(fc_pair(c, c, depth, 1.0, 0.0)[1]))
    assert abs(mismatch.reference_value - ref) <= 1e-13 * scale + 1e-300


# ---------------------------------------------------------------------------------------------
# check_kernel
# ---------------------------------------------------------------------------------------------
def test_correct_independent_candidate_passes():
    # mpmath at 50 digits is exact to float64 rounding; ntkref is within 1e-13 of the scale, so the
    # two must agree at 1e-12 on every adversarial input (angles 1e-9, zero rows, norms 1e±150).
    report = T.check_kernel(mp_candidate(2), depth=2, diag_tol=1e-12, offdiag_tol=1e-12, max_examples=40)
    assert report.passed and report.failure is None
    assert report.n_examples >= 40  # hypothesis examples + the fixed battery
    assert max(report.max_error.values()) <= 1e-13


def test_missing_one_over_d_is_caught_with_a_minimal_example():
    cand = naive_candidate(1, missing_one_over_d=True)
    with pytest.raises(T.OracleMismatch) as info:
        T.check_kernel(cand, depth=1, inputs=MODERATE, max_examples=50)
    m = info.value.report.failure
    # a 1/d bug is invisible for d = 1 and needs only one row to show: the shrunk example is one row with
    # a few features (hypothesis' shrinker reaches d = 2 alone; within a long session its shrink passes
    # can stop at d = 3, so the exact d is not asserted)
    assert m.inputs["x1"].shape[0] == 1 and 2 <= m.inputs["x1"].shape[1] <= 3
    assert m.error > 0.5  # off by the factor d = 2: error = |2Θ − Θ|/Θ = 1 on the diagonal
    _assert_reproducible(m, cand, 1)
    text = str(info.value)
    assert "minimal failing example" in text and "location (0, 0)" in text and "candidate" in text


def test_sqrt_eps_angle_error_is_caught():
    # arccos(clip(ρ)): ρ = 1 − δ with δ ~ eps after rounding gives θ ~ √eps ≈ 1e-8, an NTK error
    # ~1e-9 of the scale at depth 2, on the diagonal and for near-parallel rows.
    cand = naive_candidate(2)
    with pytest.raises(T.OracleMismatch) as info:
        T.check_kernel(cand, depth=2, inputs=MODERATE, diag_tol=1e-11, offdiag_tol=1e-11, max_examples=80)
    m = info.value.report.failure
    assert m.inputs["x1"].shape[0] <= 2
    assert 1e-11 < m.error < 1e-6  # the √eps signature, not a gross bug
    _assert_reproducible(m, cand, 2)


def test_sqrt_eps_angle_error_found_off_diagonal_by_near_parallel_rows():
    cand = naive_candidate(2)
    with pytest.raises(T.OracleMismatch) as info:
        T.check_kernel(cand, depth=2, inputs=T.kernel_inputs(symmetric=False, scale_range=(1e-3, 1e3)),
                       diag_tol=math.inf, offdiag_tol=1e-11, max_examples=100)
    m = info.value.report.failure
    assert m.entry == "off-diagonal"
    x1, x2 = m.inputs["x1"], m.inputs["x2"]
    a, c = x1[m.location[0]], x2[m.location[1]]
    cos = abs(a @ c) / (np.linalg.norm(a) * np.linalg.norm(c))
    assert cos > 1 - 1e-6  # the failure is a (near-)parallel or antiparallel pair, as theory says
    _assert_reproducible(m, cand, 2)


def test_wrong_diagonal_is_caught_and_located_on_the_diagonal():
    cand = wrong_diagonal_candidate(1, rel=1e-9)
    with pytest.raises(T.OracleMismatch) as info:
        T.check_kernel(cand, depth=1, inputs=MODERATE, diag_tol=1e-11, offdiag_tol=1e-11, max_examples=30)
    m = info.value.report.failure
    assert m.entry == "diagonal" and m.inputs["x1"].shape[0] == 1 and m.location == (0, 0)
    assert m.error == pytest.approx(1e-9, rel=1e-3)
    # with the diagonal tolerance relaxed, the same candidate passes: the off-diagonal is right
    report = T.check_kernel(cand, depth=1, inputs=MODERATE, diag_tol=1e-8, offdiag_tol=1e-12, max_examples=20)
    assert report.passed and report.max_error["diagonal"] == pytest.approx(1e-9, rel=1e-3)


def test_overflow_and_nan_of_naive_code_at_extreme_scales_are_reported():
    cand = naive_candidate(1, zero_rows_nan=True)
    report = T.check_kernel(cand, depth=1, diag_tol=1e-6, offdiag_tol=1e-6, max_examples=200,
                            raise_on_failure=False)
    assert not report.passed
    m = report.failure
    # either a zero row (0/0) or a norm beyond 1e150 overflowing x·x: a non-finite value or a huge error
    norms = np.linalg.norm(np.concatenate([m.inputs["x1"]] + ([m.inputs["x2"]] if m.inputs["x2"] is not None
                                                               else [])), axis=1)
    assert (not np.isfinite(m.candidate_value)) or m.error > 1e-6
    assert np.any(norms == 0) or np.any(norms > 1e100) or np.any(norms < 1e-100)


def test_battery_catches_what_a_narrow_search_misses():
    # a hypothesis search restricted to Gaussian rows never sees near-parallel pairs; the fixed
    # battery (angles down to 1e-12) still finds the √eps bug.
    cand = naive_candidate(2)
    rng = np.random.default_rng(1)
    generic_pair = st.just((rng.normal(size=(3, 4)), rng.normal(size=(2, 4))))
    report = T.check_kernel(cand, depth=2, inputs=generic_pair, diag_tol=math.inf, offdiag_tol=1e-11,
                            max_examples=5, battery=True, raise_on_failure=False)
    assert not report.passed and report.source == "battery"
    assert report.n_examples_by_source["hypothesis"] >= 1 and report.n_examples_by_source["battery"] >= 1
    # inputs= alone (battery=None, the default) searches the user's strategy only: the generic pair passes
    alone = T.check_kernel(cand, depth=2, inputs=generic_pair, diag_tol=math.inf, offdiag_tol=1e-11,
                           max_examples=5, raise_on_failure=False)
    assert alone.passed and "battery" not in alone.n_examples_by_source


def test_candidate_exceptions_and_shapes_are_reported():
    def raises(x1, x2=None):
        raise ZeroDivisionError("boom")

    def transposed(x1, x2=None):
        return fc(x1, x2).ntk.T if x2 is not None else np.zeros((len(x1), len(x1) + 1))

    r = T.check_kernel(raises, depth=1, max_examples=5, raise_on_failure=False)
    assert not r.passed and "ZeroDivisionError: boom" in r.failure.detail
    r = T.check_kernel(transposed, depth=1, max_examples=20, raise_on_failure=False)
    assert not r.passed and "shape" in r.failure.detail


def test_float32_candidate_and_custom_reference():
    # float32: the inputs are cast first, the reference is computed (in float64) on the cast values;
    # ntkref's float32 accuracy is ~1e-5 of the scale, so 1e-4 passes and 1e-9 cannot.
    def f32(x1, x2=None):
        assert x1.dtype == np.float32
        return fc(x1, x2, depth=1).ntk

    inputs = T.kernel_inputs(dtype="float32")
    assert T.check_kernel(f32, depth=1, dtype="float32", inputs=inputs, diag_tol=1e-4, offdiag_tol=1e-4,
                          max_examples=20, battery=False).passed
    assert not T.check_kernel(f32, depth=1, dtype="float32", inputs=inputs, diag_tol=1e-9, offdiag_tol=1e-9,
                              max_examples=40, raise_on_failure=False).passed

    # seed 004: Θ_Arora = d·Θ_NT(W_std = 1 first layer, √2 after) (docs/conventions.md, 'FC kernels'),
    # checked through the checker with arora_ntk as the reference.
    from ntkref.kernels import arora_ntk

    def scaled_nt(x1, x2=None):
        return x1.shape[1] * np.asarray(fc(x1, x2, depth=2, W_std=[1.0, math.sqrt(2), math.sqrt(2)]).ntk)

    def arora_np(x1, x2=None):
        return arora_ntk(x1, x2, depth=2)

    assert T.check_kernel(scaled_nt, reference=arora_np, diag_tol=1e-12, offdiag_tol=1e-12,
                          inputs=MODERATE, max_examples=20).passed


def test_nngp_check_and_bias():
    cand = mp_candidate(1, W=1.0, b=0.5)

    def nngp_mp(x1, x2=None):
        x2 = x1 if x2 is None else x2
        return np.array([[float(fc_pair(a, c, 1, 1.0, 0.5)[0]) for c in x2] for a in x1])

    assert T.check_kernel(nngp_mp, which="nngp", depth=1, b_std=0.5, diag_tol=1e-12, offdiag_tol=1e-12,
                          max_examples=20).passed
    assert not T.check_kernel(cand, which="nngp", depth=1, b_std=0.5, max_examples=20,
                              raise_on_failure=False).passed  # an NTK is not an NNGP


@pytest.mark.parametrize("kw", [dict(which="both"), dict(diag_tol=-1.0), dict(dtype="float16"), dict(depth=-1)])
def test_check_kernel_bad_parameters(kw):
    with pytest.raises(ValueError):
        T.check_kernel(mp_candidate(1), max_examples=1, **kw)


def test_check_kernel_rejects_non_callable():
    with pytest.raises(TypeError):
        T.check_kernel(np.eye(2))


@pytest.mark.slow
def test_neural_tangents_diagonal_inaccuracy():
    nt = pytest.importorskip("neural_tangents")
    import jax

    jax.config.update("jax_enable_x64", True)
    _, _, kernel_fn = nt.stax.serial(nt.stax.Dense(1), nt.stax.Relu(), nt.stax.Dense(1))

    def nt_ntk(x1, x2=None):
        return np.asarray(kernel_fn(x1, x2, "ntk"))

    # validation/nt_oracle_check.py (NT in its own venv): diagonal errors up to ~3e-9 of the scale at
    # depth 1, off-diagonal ≤ 1e-15 on generic rows.
    generic = T.generic_kernel_inputs()
    off = T.check_kernel(nt_ntk, depth=1, inputs=generic, diag_tol=math.inf, offdiag_tol=1e-11, max_examples=30,
                         battery=False)
    assert off.passed and off.max_error["off-diagonal"] < 1e-13
    with pytest.raises(T.OracleMismatch) as info:
        T.check_kernel(nt_ntk, depth=1, inputs=generic, diag_tol=1e-11, offdiag_tol=1e-11, max_examples=30)
    assert info.value.report.failure.entry == "diagonal" and info.value.report.failure.error > 1e-10


# ---------------------------------------------------------------------------------------------
# strategies reach the hard regions
# ---------------------------------------------------------------------------------------------
def _min_angle(x, y=None):
    """Smallest angle between two rows of x (or between a row of x and a row of y), stably."""
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    v = u if y is None else y / np.linalg.norm(y, axis=1, keepdims=True)
    best = math.inf
    for i in range(len(u)):
        for j in range(len(v)):
            if y is None and j <= i:
                continue
            best = min(best, 2 * math.atan2(np.linalg.norm(u[i] - v[j]), np.linalg.norm(u[i] + v[j])))
    return best


def _sample(strategy, n):
    """n examples of a strategy, generated deterministically without shrinking (cheap)."""
    out = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        out.append(value)

    collect()
    return out


def _regions(x):
    """Which hard regions an (n, d) array touches."""
    norms = np.linalg.norm(x, axis=1)
    nz = x[norms > 0]
    found = set()
    if np.any(norms == 0):
        found.add("zero-row")
    if np.any(norms > 1e140):
        found.add("huge")
    if np.any((norms > 0) & (norms < 1e-140)):
        found.add("tiny")
    if len(nz) >= 2 and _min_angle(nz) < 1e-8:
        found.add("near-parallel-1e-8")
    if len(nz) >= 2 and any(_min_angle(-nz[i:i + 1], np.delete(nz, i, axis=0)) < 1e-8 for i in range(len(nz))):
        found.add("antiparallel-1e-8")
    if len({r.tobytes() for r in nz}) < len(nz):
        found.add("duplicates")
    return found


def test_rows_shapes_bounds_and_hard_regions():
    xs = _sample(T.rows(), 300)
    seen = set()
    for x in xs:
        assert x.dtype == np.float64 and np.all(np.isfinite(x)) and 1 <= x.shape[0] <= 6 and 1 <= x.shape[1] <= 6
        n = np.linalg.norm(x, axis=1)
        assert np.all((n == 0) | ((n >= 1e-150 * (1 - 1e-12)) & (n <= 1e150 * (1 + 1e-12))))  # scale_range
        seen |= _regions(x)
    # every hard region is reached within 300 examples (deterministic: derandomized generation)
    assert seen == {"zero-row", "huge", "tiny", "near-parallel-1e-8", "antiparallel-1e-8", "duplicates"}
    small = _sample(T.rows((2, 3), (2, 4), dtype="float32"), 30)
    assert all(2 <= x.shape[0] <= 3 and 2 <= x.shape[1] <= 4 and x.dtype == np.float32 for x in small)


def test_generic_kernel_inputs_are_in_general_position():
    for x1, x2 in _sample(T.generic_kernel_inputs(), 50):
        x = x1 if x2 is None else np.concatenate([x1, x2])
        assert x.shape[1] >= 2 and np.all(np.linalg.norm(x, axis=1) > 0)
        if len(x) > 1:
            assert _min_angle(x) > 1e-6 and _min_angle(-x[:1], x[1:]) > 1e-6


def test_naive_code_passes_on_generic_inputs_only():
    # the arccos bug is invisible away from parallel rows: a generic search passes at 1e-11 off the
    # diagonal, which is why the adversarial strategies matter
    report = T.check_kernel(naive_candidate(2), depth=2, inputs=T.generic_kernel_inputs(symmetric=False),
                            diag_tol=math.inf, offdiag_tol=1e-11, max_examples=20, battery=False)
    assert report.passed


def test_kernel_inputs_pairs():
    pairs = _sample(T.kernel_inputs(), 60)
    assert any(x2 is None for _, x2 in pairs) and any(x2 is not None for _, x2 in pairs)
    for x1, x2 in pairs:
        assert x2 is None or x2.shape[1] == x1.shape[1]
    # rows of x2 relate to rows of x1: some cross pair is near-parallel
    assert any(x2 is not None and np.all(np.linalg.norm(x1, axis=1) > 0) and np.all(np.linalg.norm(x2, axis=1) > 0)
               and _min_angle(x1, x2) < 1e-8 for x1, x2 in pairs)
    assert all(x2 is None for _, x2 in _sample(T.kernel_inputs(symmetric=True), 10))


def test_ill_conditioned_kernels():
    Ks = _sample(T.ill_conditioned_kernels(), 60)
    for K in Ks:
        ev = np.linalg.eigvalsh(K)
        assert np.array_equal(K, K.T)
        # PSD up to the rounding of Q diag(λ) Qᵀ: n·eps·λ_max (times a small safety factor)
        assert ev.min() >= -10 * K.shape[0] * np.finfo(float).eps * ev.max()
    conds = [np.linalg.cond(K) for K in _sample(T.ill_conditioned_kernels(allow_singular=False), 60)]
    assert max(conds) > 1e10 and min(conds) < 1e3


def test_labels_learning_rates_widths():
    ys = _sample(T.labels(5), 20)
    assert all(set(np.unique(y)) == {-1.0, 1.0} for y in ys)
    assert all(y.shape == (4,) and np.all(np.abs(y) <= 3) for y in _sample(T.labels(4, kind="regression"), 20))
    lrs = _sample(T.learning_rates(lam=10.0), 50)
    assert all(1e-4 <= v < 0.1 for v in lrs) and max(lrs) > 0.01
    ws = _sample(T.widths(10, 10_000), 50)
    assert all(10 <= w <= 10_000 for w in ws) and {10, 100, 1000, 10_000} & set(ws)
    with pytest.raises(ValueError):
        T.learning_rates(min_lr=1.0, lam=10.0)


def test_hard_inputs_battery():
    cases = T.hard_inputs(5)
    names = [c[0] for c in cases]
    assert "zero row" in names and "tiny and huge" in names and "angle 1e-9" in names
    for _, x1, x2 in cases:
        assert x1.ndim == 2 and np.all(np.isfinite(x1))
        assert x2 is None or x2.shape[1] == x1.shape[1]


def test_kernel_error_measure():
    R = np.array([[4.0, 1.0], [1.0, 9.0]])
    K = R + np.array([[0.0, 6e-3], [0.0, np.nan]])
    err, scale = T.kernel_error(K, R, np.diag(R))
    assert scale[0, 1] == 6.0 and err[0, 1] == pytest.approx(1e-3)
    assert err[1, 1] == np.inf and err[0, 0] == 0.0
    err, _ = T.kernel_error(np.array([[0.0, 1e-300]]), np.zeros((1, 2)), np.zeros(1), np.array([0.0, 1.0]))
    assert err[0, 0] == 0.0 and err[0, 1] == np.inf  # zero scale: exact equality required


# ---------------------------------------------------------------------------------------------
# machines, dynamics, certificates
# ---------------------------------------------------------------------------------------------
def test_check_fit_krr():
    pytest.importorskip("ntkref.machines")

    def krr(K, y, lam):  # (y − z)² without ½ (docs/conventions.md, 'Losses and regularisation'): α = (K + (λ/2) I)⁻¹ y
        return np.linalg.solve(K + lam / 2 * np.eye(len(y)), y)

    def krr_wrong(K, y, lam):  # the ½-convention formula: the other loss scaling
        return np.linalg.solve(K + lam * np.eye(len(y)), y)

    assert T.check_fit(krr, loss="squared", lam=0.3, max_examples=8).passed
    with pytest.raises(T.OracleMismatch) as info:
        T.check_fit(krr_wrong, loss="squared", lam=0.3, max_examples=8, shrink=False)  # shrinking: slow here
    assert info.value.report.failure.entry == "objective"


def test_check_fit_svm_subgradient_is_not_exact():
    pytest.importorskip("ntkref.machines")

    def few_steps(K, y, lam):  # 3 subgradient steps: far from the SVM optimum
        a = np.zeros(len(y))
        for _ in range(3):
            a = (1 - 0.1 * lam) * a + 0.1 * y * (y * (K @ a) < 1)
        return a

    r = T.check_fit(few_steps, loss="hinge", lam=0.5, max_examples=5, shrink=False, raise_on_failure=False)
    assert not r.passed and r.failure.error > 1e-8


def test_check_dynamics_squared_flow_and_descent():
    pytest.importorskip("ntkref.dynamics")
    from scipy.linalg import expm

    def flow(K, y, lam, times, factor=2.0):
        # dα/dt = −λα − factor·(Kα − y): linear, solved by the matrix exponential of the augmented system
        n = len(y)
        A = np.zeros((n + 1, n + 1))
        A[:n, :n] = -lam * np.eye(n) - factor * K
        A[:n, n] = factor * y
        return np.array([K @ expm(A * t)[:n, n] for t in times])

    def descent(K, y, lam, lr, steps, decay=None):
        a = np.zeros(len(y))
        out = [K @ a]
        for _ in range(steps):
            a = (1 - lr * (lam if decay is None else decay)) * a - lr * 2 * (K @ a - y)
            out.append(K @ a)
        return np.array(out)

    assert T.check_dynamics(flow, loss="squared", lam=0.2, tol=1e-9, max_examples=5).passed
    r = T.check_dynamics(lambda *a: flow(*a, factor=1.0), loss="squared", lam=0.2, max_examples=5,
                         shrink=False, raise_on_failure=False)
    assert not r.passed and r.failure.entry == "trajectory"
    assert T.check_dynamics(descent, kind="descent", loss="squared", lam=0.2, lr=0.05, steps=10, tol=1e-10,
                            max_examples=5).passed
    assert not T.check_dynamics(lambda *a: descent(*a, decay=1.0), kind="descent", loss="squared", lam=0.2,
                                lr=0.05, steps=10, max_examples=5, shrink=False, raise_on_failure=False).passed


def test_check_certificate(asxp, tonp):
    certify = pytest.importorskip("ntkref.certify")

    def reference(alpha, x_train, x_test):  # ntkref's certificate on the device under test, read back explicitly
        return tonp(certify.certified_radius(asxp(alpha), asxp(x_train), asxp(x_test)))

    def overclaims(alpha, x_train, x_test):
        # 3‖x₀‖∞: the ball contains 0 (g(0) = 0) and typically training points of the other class
        return 3 * np.max(np.abs(x_test), axis=1)

    assert T.check_certificate(reference, max_examples=8).passed
    with pytest.raises(T.OracleMismatch) as info:
        T.check_certificate(overclaims, max_examples=8, compare_reference=False, shrink=False)
    assert info.value.report.failure.entry in ("soundness", "radius")


# ---------------------------------------------------------------------------------------------
# where the oracle computes: the default namespace on NTKREF_DEVICE's device (issue 16)
# ---------------------------------------------------------------------------------------------
def _closed_form_krr(K, y, lam):
    return np.linalg.solve(K + lam / 2 * np.eye(len(y)), y)


def _closed_form_flow(K, y, lam, times):
    from scipy.linalg import expm

    n = len(y)
    A = np.zeros((n + 1, n + 1))
    A[:n, :n] = -lam * np.eye(n) - 2 * K
    A[:n, n] = 2 * y
    return np.array([K @ expm(A * t)[:n, n] for t in times])


def _one_example(strategy):
    drawn = []

    @settings(max_examples=1, phases=[Phase.generate], database=None)
    @given(strategy)
    def draw(example):
        drawn.append(example)

    draw()
    return drawn[0]


_ORACLE_CALLS = {
    # public entry point → (the library functions it computes its reference with, a call of it)
    "check_kernel": ((("ntkref.kernels", "fc"), ("ntkref.kernels", "fc_diagonal")),
                     lambda: T.check_kernel(mp_candidate(1), depth=1, max_examples=2, battery=False)),
    "check_fit": ((("ntkref.machines", "fit"), ("ntkref.machines", "objective")),
                  lambda: T.check_fit(_closed_form_krr, loss="squared", lam=0.3, max_examples=2)),
    "check_dynamics": ((("ntkref.dynamics", "gradient_flow"),),
                       lambda: T.check_dynamics(_closed_form_flow, loss="squared", lam=0.2, tol=1e-9, max_examples=2)),
    "check_certificate": ((("ntkref.certify", "certified_radius"), ("ntkref.kernels", "two_layer_relu_ntk")),
                          lambda: T.check_certificate(lambda a, xtr, xte: np.zeros(len(xte)), max_examples=2)),
    "machine_problems": ((("ntkref.kernels", "fc"),),
                         lambda: _one_example(T.machine_problems(n=(2, 3)))),
}


@pytest.mark.parametrize("name", sorted(_ORACLE_CALLS))
def test_oracle_computes_on_the_env_device(name, monkeypatch):
    """Under NTKREF_BACKEND=array_api_strict NTKREF_DEVICE=device1 (set here, so this runs in every CI mode) each
    public entry point that computes with ntkref hands it arrays on device1 — the stand-in for a GPU, where any
    implicit conversion to NumPy fails — and still returns NumPy to the user (reports, examples)."""
    import importlib

    import array_api_compat

    strict = pytest.importorskip("array_api_strict")
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    monkeypatch.setenv("NTKREF_DEVICE", "device1")
    targets, call = _ORACLE_CALLS[name]
    seen = []
    for mod_name, fn in targets:
        module = importlib.import_module(mod_name)
        real = getattr(module, fn)

        def wrapper(*args, _real=real, _fn=fn, **kwargs):
            arrays = [a for a in list(args) + list(kwargs.values()) if array_api_compat.is_array_api_obj(a)]
            seen.append((_fn, [(type(a).__module__.split(".")[0], array_api_compat.device(a)) for a in arrays]))
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, fn, wrapper)
        if mod_name == "ntkref.kernels":  # imported by name inside ntkref.kernels' users
            monkeypatch.setattr(importlib.import_module("ntkref.kernels"), fn, wrapper, raising=False)
    out = call()
    assert seen, "the reference computation was not reached"
    dev = strict.Device("device1")
    for fn, arrays in seen:
        assert arrays and all(a == ("array_api_strict", dev) for a in arrays), (fn, arrays)
    if name == "machine_problems":
        K, y = out
        assert isinstance(K, np.ndarray) and isinstance(y, np.ndarray) and K.shape == (len(y), len(y))
    else:
        assert out.passed, str(out)


# ---------------------------------------------------------------------------------------------
# measure mode, structured reports, verdict tolerance (issue 15)
# ---------------------------------------------------------------------------------------------
def _validate(instance, schema, path="$"):
    """A small independent validator for the JSON Schema keywords REPORT_SCHEMA uses (type, enum, required,
    properties, items, additionalProperties); returns a list of error strings."""
    errors = []
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if "type" in schema:
        wanted = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]

        def is_type(t):
            if t == "number":
                return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)
            if t == "integer":
                return isinstance(instance, int) and not isinstance(instance, bool)
            return isinstance(instance, types[t])

        if not any(is_type(t) for t in wanted):
            return [f"{path}: {instance!r} is not of type {wanted}"]
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{path}: {instance!r} not in {schema['enum']}")
    if isinstance(instance, dict):
        for key in schema.get("required", []):
            if key not in instance:
                errors.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        for key, value in instance.items():
            if key in props:
                errors += _validate(value, props[key], f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += _validate(value, schema["additionalProperties"], f"{path}.{key}")
    if isinstance(instance, list) and "items" in schema:
        for i, value in enumerate(instance):
            errors += _validate(value, schema["items"], f"{path}[{i}]")
    return errors


def _replayed(line):
    """The (x1, x2) tuple an '@example(...)' replay line stands for."""
    assert line.startswith("@example((")
    return eval(line[1:].split("  #")[0], {"np": np, "example": lambda *args: args[0]})  # noqa: S307


def _all_floats_finite(obj):
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_all_floats_finite(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_all_floats_finite(v) for v in obj)
    return True


def test_measure_mode_collects_every_kind_with_minimal_examples_and_replay_lines(tmp_path):
    # the naive recursion has two independent bugs: 0/0 = NaN at zero rows (and inf at norms ~1e150, where x·x
    # overflows) and the arccos(clip) √eps loss near parallel rows; assert mode reports one, measure mode both
    import json

    cand = naive_candidate(2, zero_rows_nan=True)
    kw = dict(depth=2, diag_tol=1e-11, offdiag_tol=1e-11, max_examples=30)
    first = T.check_kernel(cand, raise_on_failure=False, **kw)
    report = T.check_kernel(cand, mode="measure", raise_on_failure=False, **kw)
    assert not report.passed and report.mode == "measure"
    assert {"non_finite", "precision"} <= set(report.failures)
    assert report.n_examples_by_source["hypothesis"] == 30 and report.n_examples_by_source["battery"] > 0
    for kind in ("non_finite", "precision"):
        s = report.failures[kind]
        assert s.count >= 1 and s.n_entries >= s.count and s.minimal.kind == kind and s.worst.kind == kind
        x1, x2 = _replayed(s.minimal.replay)
        # reduced to the rows involved (at most 2 rows a side: a pair's value can depend on the batch — the
        # naive candidate's x1 @ x2.T rounds differently for one column — and the reduction keeps only sub-problems
        # that fail the same way within 10× of the error; issue 24)
        assert x1.shape[0] <= 2 and (x2 is None or x2.shape[0] <= 2)
        np.testing.assert_array_equal(x1, s.minimal.inputs["x1"])
        K = cand(x1, x2)
        i, j = s.minimal.location
        if kind == "non_finite":
            assert not np.isfinite(K[i, j])
        else:  # an independent mpmath value: the error is the √eps signature, above the tolerance, below 1e-4
            a, c = x1[i], (x1 if x2 is None else x2)[j]
            scale = math.sqrt(float(fc_pair(a, a, 2, 1.0, 0.0)[1]) * float(fc_pair(c, c, 2, 1.0, 0.0)[1]))
            err = abs(K[i, j] - float(fc_pair(a, c, 2, 1.0, 0.0)[1])) / scale
            assert 1e-11 < err <= 1e-4
    # max_error is the worst finite error over the whole budget: the table's maximum, at least assert mode's
    table = report.entry_table()
    assert len(table) == report.n_entries
    finite = [r["scaled_err"] for r in table if math.isfinite(r["candidate"]) and math.isfinite(r["scaled_err"])]
    assert max(report.max_error.values()) == max(finite)
    assert max(report.max_error.values()) >= max(first.max_error.values(), default=0.0)
    assert report.n_non_finite == sum(not math.isfinite(r["candidate"]) for r in table) > 0
    assert all(math.isfinite(v) for v in report.max_error.values())
    # JSON: strict (no NaN), schema-valid, non-finite values listed apart (every failing entry, on request)
    d = report.to_dict(entries="failing")
    text = json.dumps(d, allow_nan=False)
    assert _validate(json.loads(text), T.REPORT_SCHEMA) == []
    assert _all_floats_finite(d)
    assert d["n_non_finite"] == report.n_non_finite and d["non_finite"][0]["value"] in ("nan", "inf", "-inf")
    assert d["failures"]["non_finite"]["minimal"]["candidate_value"] is None
    assert d["failures"]["non_finite"]["minimal"]["non_finite"]["candidate_value"] in ("nan", "inf", "-inf")
    assert all(e["kind"] != "ok" for e in d["entries"]) and len(d["entries"]) == sum(
        s.n_entries for s in report.failures.values())
    full = report.to_dict(entries="all")
    assert _validate(full, T.REPORT_SCHEMA) == [] and len(full["entries"]) == report.n_entries
    # the validator is not vacuous
    bad = json.loads(text)
    bad["n_examples"] = "30"
    bad["failures"]["precision"]["worst"]["error"] = "1e-9"
    assert len(_validate(bad, T.REPORT_SCHEMA)) == 2
    # CSV: one line per entry, numbers round-trip exactly
    import csv

    path = tmp_path / "entries.csv"
    report.to_csv(path)
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == T.ENTRY_COLUMNS and len(rows) == report.n_entries + 1
    k = T.ENTRY_COLUMNS.index("scaled_err")
    assert [float(r[k]) for r in rows[1:]] == [r["scaled_err"] for r in table]
    report.to_json(tmp_path / "r.json")
    assert _validate(json.loads((tmp_path / "r.json").read_text()), T.REPORT_SCHEMA) == []


def test_report_files_are_written_atomically(tmp_path, monkeypatch):
    # json.dump(allow_nan=False) raises after writing part of a file: the report goes through the one atomic
    # writer, so an existing report survives a failing to_json / to_csv and no temporary file is left behind
    import csv
    import json

    report = T.CheckReport(True, 1, entries=[(0, "hypothesis", 0, 0, "diagonal", 1.0, 1.0, 0.0, 1.0, 0.0, 1e-10,
                                              "user", "ok")])
    path, table = tmp_path / "report.json", tmp_path / "entries.csv"
    report.to_json(path)
    report.to_csv(table)
    before = path.read_text(), table.read_text()

    def dump_part_then_raise(obj, fh, **kwargs):
        fh.write('{"schema": "ntkref.testing.report/1", "check": ')
        raise ValueError("Out of range float values are not JSON compliant")

    class HalfWriter:
        def __init__(self, fh):
            self.fh = fh

        def writerow(self, row):
            self.fh.write("example,source,row\n")
            raise OSError("disk full")

    monkeypatch.setattr(json, "dump", dump_part_then_raise)
    monkeypatch.setattr(csv, "writer", HalfWriter)
    with pytest.raises(ValueError, match="not JSON compliant"):
        report.to_json(path)
    with pytest.raises(OSError, match="disk full"):
        report.to_csv(table)
    with pytest.raises(ValueError):
        report.to_json(tmp_path / "new.json")
    assert (path.read_text(), table.read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entries.csv", "report.json"]


def test_verdict_tolerance_is_at_least_ntkrefs_certified_bound():
    # where ntkref's bound is proven (ReLU) the verdict is against the exact kernel at the user's tolerance, even
    # below the tested 1e-13: an exact (50-digit mpmath) candidate passes 1e-14, every entry proven
    # (ntkref._verdicts; tests/test_proven_verdicts.py), and the report says so entry by entry
    report = T.check_kernel(mp_candidate(1), depth=1, diag_tol=1e-14, offdiag_tol=1e-14, max_examples=12,
                            mode="measure", battery=True)
    assert report.passed and report.tolerance["ntkref_bound"] == 1e-13
    assert report.tolerance_counts == {"user": report.n_entries, "ntkref": 0} and report.n_entries > 50
    assert report.n_proven == report.n_entries and report.n_tested == 0
    assert all(r["tolerance_source"] == "user" and r["tolerance"] == 1e-14 and r["proven"]
               for r in report.entry_table())
    # where it is tested (a user reference), the tolerance is at least the stated bound: see below
    # a user tolerance above the bound is the one used
    loose = T.check_kernel(mp_candidate(1), depth=1, diag_tol=1e-12, offdiag_tol=1e-12, max_examples=3,
                           mode="measure", battery=False)
    assert loose.tolerance_counts["ntkref"] == 0 and loose.tolerance_counts["user"] == loose.n_entries
    # a candidate off by 1e-14 of the scale fails a zero user tolerance only without the bound (custom reference)
    def off(x1, x2=None):
        return fc(x1, x2, depth=1).ntk * (1 + 1e-14)

    def ref(x1, x2=None):
        return fc(x1, x2, depth=1).ntk

    gen = T.generic_kernel_inputs(symmetric=True)
    assert not T.check_kernel(off, reference=ref, inputs=gen, diag_tol=0.0, offdiag_tol=0.0, max_examples=3,
                              raise_on_failure=False).passed
    tested = T.check_kernel(off, reference=ref, reference_bound=1e-13, inputs=gen, diag_tol=0.0, offdiag_tol=0.0,
                            max_examples=3)
    assert tested.passed and tested.n_proven == 0 and tested.n_tested == tested.n_entries
    assert tested.tolerance_counts == {"user": 0, "ntkref": tested.n_entries}


def test_convention_failures_get_a_hint():
    def doubled(x1, x2=None):  # W_std = √2 instead of 1 at depth 0: Θ doubled
        return 2 * fc(x1, x2, depth=0).ntk

    r = T.check_kernel(doubled, depth=0, inputs=MODERATE, max_examples=10, raise_on_failure=False)
    assert r.failure.kind == "convention" and "2 × reference" in r.failure.hint

    def nngp_instead(x1, x2=None):
        return fc(x1, x2, depth=2).nngp

    r = T.check_kernel(nngp_instead, depth=2, inputs=MODERATE, max_examples=10, raise_on_failure=False)
    assert r.failure.kind == "convention" and "NNGP" in r.failure.hint


def test_fixed_size_reference_is_called_on_the_actual_inputs_only():
    x = np.random.default_rng(0).standard_normal((3, 4))

    def fixed(x1, x2=None):  # a reference that only accepts 3×4 inputs (e.g. a precomputed table)
        assert x1.shape == (3, 4) and (x2 is None or x2.shape == (3, 4))
        return fc(x1, x2, depth=1).ntk

    report = T.check_kernel(fixed, reference=fixed, inputs=st.just((x, None)), max_examples=1)
    assert report.passed and report.n_examples_by_source == {"hypothesis": 1}


def test_measure_mode_for_fit_dynamics_and_certificates():
    pytest.importorskip("ntkref.machines")

    def krr_wrong(K, y, lam):  # the ½-convention formula: solves the problem with λ′ = 2λ
        return np.linalg.solve(K + lam * np.eye(len(y)), y)

    r = T.check_fit(krr_wrong, loss="squared", lam=0.3, max_examples=6, mode="measure", raise_on_failure=False)
    # the problems fail (all but degenerate ones, e.g. y = 0); large objective gaps are 'convention', small ones
    # (small K) 'precision'; each minimal example is explained by the λ′ = 2λ slip
    assert set(r.failures) <= {"convention", "precision"} and sum(s.count for s in r.failures.values()) >= 4
    assert all("2*lam" in s.minimal.hint for s in r.failures.values())
    assert r.tolerance_counts["user"] + r.tolerance_counts["ntkref"] == 6
    assert _validate(r.to_dict(), T.REPORT_SCHEMA) == []

    def flow_half(K, y, lam, times):  # the ½ squared loss: factor 1 instead of 2 in the flow
        from scipy.linalg import expm

        n = len(y)
        A = np.zeros((n + 1, n + 1))
        A[:n, :n] = -lam * np.eye(n) - K
        A[:n, n] = y
        return np.array([K @ expm(A * t)[:n, n] for t in times])

    r = T.check_dynamics(flow_half, loss="squared", lam=0.2, max_examples=4, mode="measure", shrink=False,
                         raise_on_failure=False)
    assert not r.passed and "convention" in r.failures and r.max_error["outputs"] > 1e-3
    assert set(r.failures) <= {"convention", "precision"} and r.failures["convention"].minimal.kind == "convention"

    def overclaims(alpha, x_train, x_test):
        return 3 * np.max(np.abs(x_test), axis=1)

    r = T.check_certificate(overclaims, max_examples=4, compare_reference=False, mode="measure", shrink=False,
                            raise_on_failure=False)
    assert set(r.failures) == {"soundness"} and r.failures["soundness"].minimal.kind == "soundness"
    assert _validate(r.to_dict(), T.REPORT_SCHEMA) == []
    with pytest.raises(ValueError):
        T.check_fit(krr_wrong, loss="squared", mode="fast")


# ---------------------------------------------------------------------------------------------
# images and check_cntk
# ---------------------------------------------------------------------------------------------
def _pixel_fc_mean(depth, readout="gap", which=1):
    """Independent CNTK for filter_size = 1: every pixel is an FC net over the channels (Σ⁽⁰⁾ = x·x′/C), so
    the CNTK is the mean of 50-digit mpmath FC kernels over all pixel pairs (gap) or over p = p′ (flatten)."""
    cache = {}

    def pair(a, c):
        key = (a.tobytes(), c.tobytes())
        if key not in cache:
            cache[key] = float(fc_pair(a, c, depth, 1.0, 0.0)[which])
        return cache[key]

    def kernel(x1, x2=None):
        x2 = x1 if x2 is None else x2
        out = np.empty((len(x1), len(x2)))
        for i, a in enumerate(x1):
            pa = a.reshape(a.shape[0], -1).T
            for j, b in enumerate(x2):
                pb = b.reshape(b.shape[0], -1).T
                if readout == "gap":
                    out[i, j] = np.mean([pair(u, v) for u in pa for v in pb])
                else:
                    out[i, j] = np.mean([pair(u, v) for u, v in zip(pa, pb)])
        return out

    return kernel


def test_images_reach_the_adversarial_cases():
    xs = _sample(T.images(n=(2, 4), channels=(1, 3), height=(2, 3), width=(2, 3)), 200)
    seen = set()
    for x in xs:
        assert x.ndim == 4 and np.all(np.isfinite(x)) and np.max(np.abs(x)) <= 4e100
        flat = x.reshape(len(x), -1)
        for i in range(len(x)):
            for j in range(len(x)):
                if i != j and np.any(flat[i]) and np.array_equal(flat[i], -flat[j]):
                    seen.add("x and -x")
        if any(np.all(v == v.flat[0]) and v.flat[0] != 0 for v in x):
            seen.add("constant")
        if any(np.any(np.all(v == 0, axis=0)) and np.any(v) for v in x):
            seen.add("zero pixel")
        m = np.max(np.abs(flat), axis=1)
        if np.any((m > 0) & (m < 1e-50)) or np.any(m > 1e50):
            seen.add("extreme scale")
        for v in x:  # pixels parallel across channels with unequal norms (C ≥ 2)
            p = v.reshape(v.shape[0], -1).T
            nz = p[np.linalg.norm(p, axis=1) > 0]
            if v.shape[0] >= 2 and len(nz) >= 2 and np.linalg.matrix_rank(nz) == 1 and len(
                    set(np.round(np.linalg.norm(nz, axis=1) / np.linalg.norm(nz[0]), 12))) > 1:
                seen.add("parallel pixels, unequal norms")
    assert seen == {"x and -x", "constant", "zero pixel", "extreme scale", "parallel pixels, unequal norms"}
    nhwc = _sample(T.images(channels=3, height=2, width=4, layout="NHWC"), 5)
    assert all(x.shape[1:] == (2, 4, 3) for x in nhwc)
    names = [c[0] for c in T.hard_images()]
    assert "x and -x" in names and "parallel pixels of unequal norm" in names and "scales 1e+-k" in names


@pytest.mark.parametrize("readout", ["gap", "flatten"])
def test_check_cntk_passes_an_independent_candidate_within_ntkrefs_bound(readout):
    # filter_size = 1: an independent route (mpmath FC kernels per pixel pair); the user tolerance 1e-15 is
    # below ntkref's certified CNTK bound (1e-13 scaled in float64), so the bound must apply, and hold
    cand = _pixel_fc_mean(1, readout)
    report = T.check_cntk(cand, depth=1, readout=readout, filter_size=1, diag_tol=1e-15, offdiag_tol=1e-15,
                          inputs=T.image_inputs(n1=(1, 2), n2=(1, 2), height=(1, 2), width=(1, 2)),
                          battery=True, max_examples=8, mode="measure")
    assert report.passed, str(report)
    assert max(report.max_error.values()) <= report.tolerance["ntkref_bound"]
    assert report.tolerance_counts == {"user": 0, "ntkref": report.n_entries}  # judged with ntkref's bound


def test_check_cntk_catches_a_missing_one_over_C_and_reads_NHWC():
    from ntkref.kernels import cntk

    def times_c(x1, x2=None):  # Σ⁽⁰⁾ = x·x′ without 1/C (Arora's normalisation): Θ scaled by C
        return x1.shape[1] * cntk(x1, x2, depth=1).ntk

    small = T.image_inputs(n1=(1, 2), n2=(1, 2), height=(1, 3), width=(1, 3))
    r = T.check_cntk(times_c, depth=1, inputs=small, max_examples=20, raise_on_failure=False)
    assert r.failure.kind == "convention" and r.failure.inputs["x1"].shape[1] >= 2
    c = r.failure.inputs["x1"].shape[1]
    assert f"{c:g} × reference" in r.failure.hint

    def nhwc(x1, x2=None):  # neural-tangents' layout: channels last
        assert x1.shape[-1] <= 3
        t = (0, 3, 1, 2)
        return cntk(np.transpose(x1, t), None if x2 is None else np.transpose(x2, t), depth=1).ntk

    assert T.check_cntk(nhwc, depth=1, layout="NHWC", inputs=T.image_inputs(height=(1, 2), width=(1, 2),
                                                                           layout="NHWC"),
                        diag_tol=0.0, offdiag_tol=0.0, max_examples=5).passed


# ---------------------------------------------------------------------------------------------
# argument checks (issue 14's bad-input catalogue)
# ---------------------------------------------------------------------------------------------
def test_kernel_error_checks_its_inputs_and_reads_any_device():
    """The reference must be finite and the shapes must match (named errors, not NumPy's broadcast message);
    arrays of another namespace/device are copied to the host explicitly and measured the same."""
    R = np.array([[4.0, 1.0], [1.0, 9.0]])
    K = R + np.array([[0.0, 6e-3], [0.0, 0.0]])
    with pytest.raises(InvalidParameterError, match="'reference_K'"):
        T.kernel_error(K, np.where(np.eye(2) > 0, np.nan, R), np.diag(R))
    with pytest.raises(InvalidParameterError, match="'candidate_K'"):
        T.kernel_error(K[:1], R, np.diag(R))
    with pytest.raises(InvalidParameterError, match="'reference_diag1'"):
        T.kernel_error(K, R, np.diag(R)[:1])
    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    err, scale = T.kernel_error(strict.asarray(K, device=dev), strict.asarray(R, device=dev),
                                strict.asarray(np.diag(R), device=dev))
    assert scale[0, 1] == 6.0 and err[0, 1] == pytest.approx(1e-3) and err[1, 1] == 0.0


def test_checkers_refuse_arguments_that_check_nothing():
    """A non-callable candidate, max_examples=0 without a battery (a vacuous pass), both kernel tolerances inf,
    a bogus dtype, a NaN step size or attack count: errors naming the parameter before any work."""
    def kc(x1, x2):
        return x1 @ (x1 if x2 is None else x2).T

    cases = [
        (lambda: T.check_kernel(kc, max_examples=0, battery=False), "max_examples"),
        (lambda: T.check_kernel(kc, diag_tol=math.inf, offdiag_tol=math.inf, max_examples=1), "offdiag_tol"),
        (lambda: T.check_kernel(kc, dtype="bogus", max_examples=1), "dtype"),
        (lambda: T.check_fit("bogus", max_examples=1), "candidate"),
        (lambda: T.check_fit(lambda K, y, lam: y, max_examples=0), "max_examples"),
        (lambda: T.check_dynamics(lambda *a: None, lr=math.nan, max_examples=1), "lr"),
        (lambda: T.check_dynamics(lambda *a: None, steps=-1, max_examples=1), "steps"),
        (lambda: T.check_certificate(lambda *a: None, n_attack=0, max_examples=1), "n_attack"),
        (lambda: T.hard_inputs(dtype="bogus"), "dtype"),
        (lambda: T.labels(3, bound=math.nan), "bound"),
    ]
    for call, name in cases:
        with pytest.raises(InvalidParameterError, match=f"'{name}'"):
            call()


def test_certified_bound_is_what_the_mpmath_tests_prove_and_what_the_verdicts_use():
    # the public statement of ntkref's own accuracy: fc (relu/erf) 1e-13 in float64 and 1e-5 in float32 at depths
    # 0-3, cntk 1e-13 in float64 at depths 1-4, extrapolated linearly beyond (and said so), none for quadrature
    b, src = T.certified_bound("fc", depth=2, activation="relu")
    assert b == 1e-13 and "test_kernels.py" in src
    assert T.certified_bound("fc", depth=2, activation="erf", dtype="float32")[0] == 1e-5
    b6, src6 = T.certified_bound("fc", depth=6)
    assert b6 == pytest.approx(2e-13, rel=1e-12) and "extrapolated" in src6
    assert T.certified_bound("fc", depth=1, activation="tanh")[0] == 0.0
    assert T.certified_bound("cntk", depth=4)[0] == 1e-13
    assert T.certified_bound("cntk", depth=8)[0] == pytest.approx(2e-13, rel=1e-12)
    assert T.certified_bound("cntk", depth=2, dtype="float32")[0] == 0.0
    # the kernel checker's report states the same bound
    report = T.check_kernel(lambda a, b=None: __import__("ntkref").kernels.fc(a, b, depth=2).ntk, depth=2,
                            max_examples=3, battery=False)
    assert report.tolerance["ntkref_bound"] == b
    with pytest.raises(ValueError, match="family"):
        T.certified_bound("gru", depth=1)
    assert T.certified_bound("fc", depth=1, dtype=np.float32)[0] == 1e-5


def test_fit_convention_hint_names_the_slip_and_refuses_bad_input(asxp):
    from ntkref import machines

    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 6))
    K = A @ A.T / 6 + 0.5 * np.eye(6)  # positive definite: alpha is unique, so each lam' has its own alpha
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    lam = 0.1
    alpha_2lam = np.asarray(machines.fit(K, y, "squared", 2 * lam))  # the 1/2 convention of the squared loss
    alpha_lam = np.asarray(machines.fit(K, y, "squared", lam))
    assert "2*lam" in T.fit_convention_hint(asxp(K), asxp(y), asxp(alpha_2lam), "squared", lam)
    assert T.fit_convention_hint(K, y, alpha_lam, "squared", lam) == ""  # the right alpha is no other lam's
    bad_K = K.copy()
    bad_K[2, 3] = np.nan
    for kwargs, name in ((dict(K=bad_K), "K"), (dict(K=K[:, :5]), "K"), (dict(K=K[:0, :0]), "K"),
                         (dict(y=y[:5]), "y"), (dict(alpha=np.full(6, np.inf)), "alpha"),
                         (dict(alpha=alpha_lam + 1j), "alpha"), (dict(lam=0.0), "lam"), (dict(lam=np.nan), "lam"),
                         (dict(tol=-1.0), "tol"), (dict(reduction="avg"), "reduction")):
        args = dict(K=K, y=y, alpha=alpha_lam, loss="squared", lam=lam) | kwargs
        with pytest.raises(InvalidParameterError, match=f"'{name}'"):
            T.fit_convention_hint(**args)


def test_json_safe_reads_any_array_library_exactly_and_refuses_complex(asxp):
    import json

    a = np.array([[0.1, -2.5e-300], [1e300, 3.0]])
    got = T.json_safe({"K": asxp(a), "n": np.int64(3)})
    assert got == {"K": a.tolist(), "n": 3}  # the same floats, not the array's repr
    assert json.loads(json.dumps(got))["K"] == a.tolist()  # and they round-trip through JSON exactly
    rec = {}
    assert T.json_safe(asxp(np.array([1.0, np.nan, -np.inf])), "x", rec) == [1.0, None, None]
    assert rec == {"x[1]": "nan", "x[2]": "-inf"}
    with pytest.raises(InvalidParameterError, match=r"'value'.*r\[1\]"):
        T.json_safe({"r": [1.0, 2 + 1j]})


def test_image_strategies_refuse_scale_ranges_their_dtype_cannot_hold():
    # float32 pixels near float32's largest number: every drawn pixel finite and at most the range's top
    top = float(np.finfo(np.float32).max)
    for x in _sample(T.images(dtype="float32", scale_range=(1e30, top)), 10):
        assert x.dtype == np.float32 and np.all(np.isfinite(x)) and np.max(np.abs(x)) <= top
    for bad in ((1e-10, 1e300), (1e-300, 1.0), (0.0, 1.0), (1.0, 0.5), (1.0,), float("nan"), "ab"):
        with pytest.raises(InvalidParameterError, match="scale_range"):
            T.images(dtype="float32", scale_range=bad)
        with pytest.raises(InvalidParameterError, match="scale_range"):
            T.image_inputs(dtype="float32", scale_range=bad)
    for seed in (-1, 1.5, "0"):
        with pytest.raises(InvalidParameterError, match="seed"):
            T.hard_images(seed=seed)
