r"""Peer audit: neural-tangents and scikit-learn checked with ntkref's tooling, every flag settled by mpmath.

``python -m validation --only peers`` (and the full main job, when the ``peers`` extra is installed:
``pip install -e ".[peers]"`` from ntkref's checkout — neural-tangents 0.6.5, jax 0.5.3, and through
neural-tangents TensorFlow — and JAX's float64 is enabled here; otherwise the
section is skipped with a note).  Each check runs a peer on inputs that break naive implementations, measures the
error in ntkref's normalised measure e = |K − K_true| / √(K_true(x,x)·K_true(x′,x′)) against an independent
high-precision evaluation (``validation.make_golden``: mpmath at 650 digits for FC kernels, the golden CNTK values for
images), and reports each discrepancy above :data:`PEER_TOL` with a *minimal example* (the fewest rows, the roundest
scale) that reproduces it, the peer's value, the mpmath value and ntkref's value.  ntkref's own value is checked
against mpmath on every audited input too (its certified bound, 1e-13 for FC kernels): a claim of the section.

Checks (:data:`FC_CHECKS` and the rest):

``ntk_diagonal_generic``   the NTK diagonal on Gaussian rows (d = 5) — neural-tangents' angle
                           arctan2(√(q₁q₂ − k²), k) is √eps ≈ 1.5e-8 instead of 0 there;
``near_parallel_1e-9``     an off-diagonal pair at an angle of 1e-9 rad;
``overflow``               the smallest row [[s]] (s = m·10^k, m = 1…9) whose NTK is not finite;
``underflow``              the largest scale s at which a pair of rows s·(u, v) gets an entry with a scaled error
                           ≥ 1e-2 (values flushed to 0 or lost to subnormal arithmetic) while the true value is a
                           normal float64;
``erf``                    the erf NNGP/NTK over a grid of depths, biases, scales and row kinds (the worst entry);
``cntk_flatten`` / ``cntk_gap``  the CNTK (3×3 SAME convolutions, ReLU, depth 2) on the golden images;
``svc_kkt``                scikit-learn's ``SVC(kernel="precomputed")`` at its default ``tol = 1e-3`` on MNIST 0/1
                           digits with the two-layer ReLU NTK: the largest KKT violation in units of f (libsvm's own
                           stopping measure) and the duality gap with an intercept (``ntkref.kkt``), next to the exact
                           solution (``ntkref.kkt.fit_with_intercept``).

The audit logic takes a *peer* object (:class:`NeuralTangentsPeer` for the real library): anything with
``fc(x1, x2, get, depth=, activation=, W_std=, b_std=)`` and ``cntk(x1, x2, get, depth=, readout=)`` returning
NumPy arrays, so tests feed it a fake peer with known errors.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

PEER_TOL = 1e-11
"""A peer's scaled error above this is a discrepancy (ntkref's own FC bound is 1e-13)."""
NTKREF_FC_BOUND = 1e-13


@dataclass
class Discrepancy:
    """One error of a peer, with a minimal example that reproduces it."""

    peer: str
    check: str
    kind: str  # "non_finite" | "precision" | "convention" | "inexact"
    what: str  # which value (e.g. "NTK (0, 0), relu, depth 1")
    example: dict  # the inputs, as lists
    peer_value: float
    true_value: float  # mpmath (kernels) or the exact solution (solvers)
    ntkref_value: float
    scaled_error: float
    ntkref_error: float | None  # ntkref's own error at the example in the same measure (None: not applicable)
    note: str = ""
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# the reference: mpmath (validation.make_golden) and the golden CNTK values
# ---------------------------------------------------------------------------------------------
def mp_fc(x1, x2, which, *, depth, activation="relu", W_std=1.0, b_std=0.0):
    """(K, scale) at 650 digits: K(x1ᵢ, x2ⱼ) and √(K(x1ᵢ,x1ᵢ)K(x2ⱼ,x2ⱼ)) as float64 arrays."""
    from .make_golden import fc_pair

    idx = 0 if which == "nngp" else 1
    x2 = x1 if x2 is None else x2
    self1 = [fc_pair(a, a, depth, activation, W_std, b_std)[idx] for a in x1]
    self2 = [fc_pair(c, c, depth, activation, W_std, b_std)[idx] for c in x2]
    K = np.array([[float(fc_pair(a, c, depth, activation, W_std, b_std)[idx]) for c in x2] for a in x1])
    import mpmath as mp

    scale = np.array([[float(mp.sqrt(max(s1, 0) * max(s2, 0))) for s2 in self2] for s1 in self1])
    return K, scale


def scaled_error(K, true, scale):
    """ntkref's normalised error of K (non-finite K → inf; scale 0 → 0 if equal else inf)."""
    K = np.asarray(K, dtype=np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(K - true)
        e = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))
    return np.where(np.isfinite(K), e, np.inf)


def _ntkref_fc(x1, x2, which, **params):
    from ntkref import kernels

    from .common import host, on_backend

    return host(getattr(kernels.fc(on_backend(x1), None if x2 is None else on_backend(x2), **params), which))


def _kind(value):
    return "non_finite" if not math.isfinite(value) else "precision"


# ---------------------------------------------------------------------------------------------
# FC checks: each returns (measured numbers, [Discrepancy])
# ---------------------------------------------------------------------------------------------
def _rotate(base, angle, rng):
    v = rng.normal(size=base.shape)
    b = base / np.linalg.norm(base)
    v -= (v @ b) * b
    v /= np.linalg.norm(v)
    return np.linalg.norm(base) * (math.cos(angle) * b + math.sin(angle) * v)


def _entry_finding(peer, name, check, x1, x2, which, i, j, params, note=""):
    """A Discrepancy for entry (i, j) of the peer on (x1, x2), or None if within PEER_TOL."""
    K = np.asarray(peer.fc(x1, x2, which, **params), dtype=np.float64)
    true, scale = mp_fc(x1, x2, which, **params)
    e = scaled_error(K, true, scale)
    if not e[i, j] > PEER_TOL:
        return None, e, true, scale
    mine = _ntkref_fc(x1, x2, which, **params)
    example = {"x1": x1.tolist()} if x2 is None else {"x1": x1.tolist(), "x2": x2.tolist()}
    what = ", ".join(f"{k}={v!r}" for k, v in params.items())
    d = Discrepancy(name, check, _kind(K[i, j]), f"{which.upper()} ({i}, {j}), {what}", example, float(K[i, j]),
                    float(true[i, j]), float(mine[i, j]), float(e[i, j]),
                    float(scaled_error(mine, true, scale)[i, j]), note, {"params": params, "entry": [i, j]})
    return d, e, true, scale


def check_ntk_diagonal(peer, name, *, depth=2, seed=0, dims=(5, 20, 100, 784), draws=3):
    """NTK diagonal on Gaussian rows: the smallest input (rows n = 1…4, then dimension d of ``dims``, ``draws``
    draws each) on which a diagonal entry's error exceeds PEER_TOL (screened against ntkref, settled by mpmath).
    A peer whose diagonal depends on how its matrix product sums (blocked summation for some shapes) may be exact
    on one row and wrong on three."""
    rng = np.random.default_rng(seed)
    params = dict(depth=depth, activation="relu", W_std=1.0, b_std=0.0)
    measured = {"max_diagonal_error_screen": 0.0, "inputs_tried": 0}
    for n in (1, 2, 3, 4):
        for d in dims:
            for _ in range(draws):
                x = rng.normal(size=(n, d))
                measured["inputs_tried"] += 1
                K = np.asarray(peer.fc(x, None, "ntk", **params), dtype=np.float64)
                mine = _ntkref_fc(x, None, "ntk", **params)
                with np.errstate(all="ignore"):
                    e = np.where(np.isfinite(np.diag(K)), np.abs(np.diag(K) - np.diag(mine)), np.inf) / np.diag(mine)
                measured["max_diagonal_error_screen"] = max(measured["max_diagonal_error_screen"], float(e.max()))
                if e.max() <= PEER_TOL:
                    continue
                i = int(np.argmax(e))
                found, *_ = _entry_finding(peer, name, "ntk_diagonal_generic", x, None, "ntk", i, i, params,
                                           f"Gaussian rows, n = {n}, d = {d}: the smallest (n, d) found")
                if found:
                    measured["minimal_shape"] = [n, d]
                    return measured, [found]
    return measured, []


def check_near_parallel(peer, name, *, angle=1e-9, seed=0):
    """An off-diagonal pair at ``angle`` rad (norm ratios 1 and 3, depths 1–3): the worst, settled by mpmath."""
    rng = np.random.default_rng(seed)
    base = np.round(rng.normal(size=3), 3)
    worst = (-1.0, None)
    for depth in (1, 2, 3):
        for ratio in (1.0, 3.0):
            x = np.array([base, ratio * _rotate(base, angle, rng)])
            params = dict(depth=depth, activation="relu", W_std=1.0, b_std=0.0)
            K = np.asarray(peer.fc(x, None, "ntk", **params), dtype=np.float64)
            mine = _ntkref_fc(x, None, "ntk", **params)
            err = abs(K[0, 1] - mine[0, 1]) / math.sqrt(mine[0, 0] * mine[1, 1]) if math.isfinite(K[0, 1]) else math.inf
            if err > worst[0]:
                worst = (err, (x, params, ratio))
    x, params, ratio = worst[1]
    d, e, *_ = _entry_finding(peer, name, f"near_parallel_{angle:g}", x, None, "ntk", 0, 1, params,
                              f"rows at an angle of {angle:g} rad, norms 1:{ratio:g} (worst of depths 1-3, ratios 1, 3)")
    return {"offdiagonal_error": float(e[0, 1])}, [d] if d else []


def check_overflow(peer, name, *, depth=1, decades=range(60, 154)):
    """The smallest [[m·10^k]] whose NTK the peer returns non-finite (ntkref's is finite to 3.3e153)."""
    params = dict(depth=depth, activation="relu", W_std=1.0, b_std=0.0)
    first = None
    for k in decades:
        if not np.all(np.isfinite(peer.fc(np.array([[10.0 ** k]]), None, "ntk", **params))):
            first = k
            break
    if first is None:
        return {"first_non_finite": None}, []
    s = 10.0 ** first
    for k, m in ((first - 1, m) for m in range(2, 10)):  # the roundest value below the first bad decade
        t = float(f"{m}e{k}")
        if not np.all(np.isfinite(peer.fc(np.array([[t]]), None, "ntk", **params))):
            s = t
            break
    x = np.array([[s]])
    d, *_ = _entry_finding(peer, name, "overflow", x, None, "ntk", 0, 0, params,
                           "smallest row m·10^k (m = 1…9) with a non-finite NTK")
    return {"first_non_finite": s}, [d] if d else []


def check_underflow(peer, name, *, depth=1, seed=0, decades=range(1, 160)):
    """Pairs of rows s·(u, v), s = 10^-k: the largest s at which an entry's scaled error is ≥ 1e-2 while the true
    values are normal float64 numbers, and the largest s at which the peer returns 0 for an entry whose true value
    is a nonzero float64 (normal or subnormal)."""
    rng = np.random.default_rng(seed)
    u = np.round(rng.normal(size=(2, 2)), 2)
    params = dict(depth=depth, activation="relu", W_std=1.0, b_std=0.0)
    measured, found, seen = {"first_scale_error_1e-2": None, "first_scale_zero": None}, [], set()
    for k in decades:
        x = u * 10.0 ** -k
        K = np.asarray(peer.fc(x, None, "ntk", **params), dtype=np.float64)
        mine = _ntkref_fc(x, None, "ntk", **params)
        if np.min(np.abs(mine)) == 0:  # the truth is no longer representable (ntkref rounds it to 0)
            break
        normal = np.min(np.abs(mine)) >= np.finfo(np.float64).tiny
        with np.errstate(all="ignore"):
            screen = np.where(np.isfinite(K), np.abs(K - mine), np.inf) / np.sqrt(np.outer(np.diag(mine), np.diag(mine)))
        zero = (K == 0) & (mine != 0)
        for label, hit in (("first_scale_error_1e-2", normal and bool(np.max(screen) >= 1e-2)),
                           ("first_scale_zero", bool(zero.any()))):
            if not hit or label in seen:
                continue
            true, scale = mp_fc(x, None, "ntk", **params)
            e = scaled_error(K, true, scale)
            i, j = (np.argwhere(zero)[0] if label == "first_scale_zero" else
                    np.unravel_index(int(np.argmax(e)), e.shape))
            d, *_ = _entry_finding(peer, name, "underflow_zero" if label == "first_scale_zero" else "underflow",
                                   x, None, "ntk", int(i), int(j), params,
                                   f"rows of norm ~1e-{k}: " + ("the peer returns 0" if label == "first_scale_zero"
                                                               else "the largest such scale (10^-k)"))
            if d is not None:
                seen.add(label)
                measured[label] = float(10.0 ** -k)
                found.append(d)
        if len(seen) == 2:
            break
    return measured, found


def check_erf(peer, name, *, seed=0, quick=False):
    """The worst finite erf NNGP/NTK entry and the first non-finite one over a grid."""
    rng = np.random.default_rng(seed)
    worst = {"nngp": (0.0, None), "ntk": (0.0, None)}
    nonfinite = None
    depths = (1, 3) if quick else (1, 2, 3)
    for depth in depths:
        for b in (0.0, 0.5):
            for s in (1e-3, 1.0, 1e3, 1e8, 1e30):
                for kind in ("gaussian", "antiparallel", "parallel"):
                    x = rng.normal(size=(2, 3))
                    if kind == "antiparallel":
                        x[1] = -x[0]
                    elif kind == "parallel":
                        x[1] = 2 * x[0]
                    x = x * s
                    params = dict(depth=depth, activation="erf", W_std=1.0, b_std=b)
                    for which in ("nngp", "ntk"):
                        K = np.asarray(peer.fc(x, None, which, **params), dtype=np.float64)
                        mine = _ntkref_fc(x, None, which, **params)
                        sc = np.sqrt(np.outer(np.diag(mine), np.diag(mine)))
                        e = scaled_error(K, mine, sc)  # screening against ntkref; the finding uses mpmath
                        fin = np.isfinite(K)
                        if not fin.all() and nonfinite is None:
                            i, j = np.argwhere(~fin)[0]
                            nonfinite = (x, params, which, int(i), int(j))
                        ef = np.where(fin, e, 0.0)
                        if ef.max() > worst[which][0]:
                            i, j = np.unravel_index(int(np.argmax(ef)), ef.shape)
                            worst[which] = (float(ef.max()), (x, params, which, int(i), int(j)))
    found, measured = [], {}
    for which, (err, case) in worst.items():
        measured[f"worst_{which}_screen"] = err
        if case is not None and err > PEER_TOL:
            x, params, which, i, j = case
            d, *_ = _entry_finding(peer, name, f"erf_{which}", x, None, which, i, j, params, "worst finite entry")
            if d:
                found.append(d)
    if nonfinite is not None:
        x, params, which, i, j = nonfinite
        d, *_ = _entry_finding(peer, name, "erf_non_finite", x, None, which, i, j, params, "first non-finite entry")
        if d:
            found.append(d)
    return measured, found


def check_cntk(peer, name, *, readout="flatten", depth=2, seed=0):
    """The CNTK (3×3 SAME, ReLU, ``depth``) diagonal: the golden images (whole Gram against the golden mpmath
    values), then batches of 2×5×5 images — an x/−x pair, two and three Gaussian images — screened against ntkref;
    the first batch with a diagonal error above PEER_TOL is the minimal example, its worst diagonal entry settled by
    mpmath (``validation.make_golden.cntk_pair``, 60 digits)."""
    from ntkref import golden, kernels

    from .common import host, on_backend
    from .make_golden import cntk_pair

    x = golden.inputs("images")
    true = golden.values(f"cntk-{readout}-depth{depth}", "ntk")
    K = np.asarray(peer.cntk(x, None, "ntk", depth=depth, readout=readout), dtype=np.float64)
    s = np.sqrt(np.diag(true))
    e = scaled_error(K, true, np.outer(s, s))
    off = e[~np.eye(len(x), dtype=bool)]
    measured = {"golden_max_diagonal_error": float(np.diag(e).max()),
                "golden_max_offdiagonal_error": float(off.max() if off.size else 0.0)}
    rng = np.random.default_rng(seed)
    pm = rng.normal(size=(2, 5, 5))
    batches = [("x and -x", np.stack([pm, -pm]))] + [(f"{n} Gaussian images", rng.normal(size=(n, 2, 5, 5)))
                                                     for n in (2, 3)]
    batches.append(("the golden images", x))
    for label, batch in batches:
        Kb = np.asarray(peer.cntk(batch, None, "ntk", depth=depth, readout=readout), dtype=np.float64)
        mine = host(kernels.cntk(on_backend(batch), depth=depth, readout=readout).ntk)
        with np.errstate(all="ignore"):
            eb = np.where(np.isfinite(np.diag(Kb)), np.abs(np.diag(Kb) - np.diag(mine)), np.inf) / np.diag(mine)
        if eb.max() <= PEER_TOL:
            continue
        i = int(np.argmax(eb))
        t = float(cntk_pair(batch[i], batch[i], depth, readout, 1.0, 0.0)[1])
        e1 = abs(Kb[i, i] - t) / t if math.isfinite(Kb[i, i]) else math.inf
        if e1 > PEER_TOL:
            measured["minimal_batch"] = label
            return measured, [Discrepancy(
                name, f"cntk_{readout}_diagonal", _kind(Kb[i, i]),
                f"CNTK-{readout} NTK ({i}, {i}), depth {depth}, 3×3 SAME, W_std=1, b_std=0",
                {"x1 (NCHW)": batch.tolist()}, float(Kb[i, i]), t, float(mine[i, i]), float(e1),
                abs(float(mine[i, i]) - t) / t,
                f"{label} {batch.shape[1:]} (the same image alone is exact); golden images: diagonal max "
                f"{measured['golden_max_diagonal_error']:.2g}")]
    return measured, []


FC_CHECKS = (check_ntk_diagonal, check_near_parallel, check_overflow, check_underflow)


# ---------------------------------------------------------------------------------------------
# scikit-learn: SVC's KKT violation at its default tol
# ---------------------------------------------------------------------------------------------
def kkt_violation_f(alpha, b, K, y, C):
    """Largest KKT violation in units of f = Kα + b (libsvm's stopping measure, per point): yᵢfᵢ ≥ 1 where
    αᵢ = 0, yᵢfᵢ ≤ 1 at the bound |αᵢ| = C, yᵢfᵢ = 1 in between."""
    m = y * (K @ alpha + b)
    a = y * alpha  # libsvm's a ∈ [0, C]
    atol = 1e-12 * C
    lower, upper = a <= atol, a >= C - atol
    v = np.where(lower, np.maximum(0, 1 - m), np.where(upper, np.maximum(0, m - 1), np.abs(m - 1)))
    return float(v.max())


def check_svc(*, n=400, lam=None, tol=1e-3):
    """SVC(kernel="precomputed", C = 1/λ, tol) on the first n MNIST 0/1 training digits, two-layer ReLU NTK."""
    from sklearn.svm import SVC

    from ntkref import kernels, kkt
    from ntkref.data import load_digits01

    from .common import host, on_backend

    X, labels = load_digits01()
    X, labels = np.asarray(X[:n], dtype=np.float64) / 255.0, np.asarray(labels[:n])  # pixels in [0, 1]
    y = np.where(labels == 1, 1.0, -1.0)
    K = host(kernels.fc(on_backend(X), depth=1).ntk)
    C = 1.0 / lam if lam is not None else 1.0
    lam = 1.0 / C
    svc = SVC(kernel="precomputed", C=C, tol=tol).fit(K, y)
    alpha, b = kkt.from_sklearn_svc(svc, n)
    alpha, b = host(alpha), float(b)
    exact = kkt.fit_with_intercept(on_backend(K), on_backend(y), "hinge", lam)
    a_ex = host(exact.alpha_)
    b_ex = float(exact.intercept_)
    Kb, yb = on_backend(K), on_backend(y)
    gap = float(kkt.duality_gap(on_backend(alpha), Kb, yb, "hinge", lam, intercept=b))
    res = float(kkt.kkt_residual(on_backend(alpha), Kb, yb, "hinge", lam, intercept=b))
    viol = kkt_violation_f(alpha, b, K, y, C)
    viol_exact = kkt_violation_f(a_ex, b_ex, K, y, C)
    f_svc, f_ex = K @ alpha + b, K @ a_ex + b_ex
    measured = {"n": n, "C": C, "tol": tol, "kkt_violation_f": viol, "kkt_violation_f_exact": viol_exact,
                "kkt_residual": res, "duality_gap": gap, "max_output_difference": float(np.max(np.abs(f_svc - f_ex))),
                "intercept": b, "intercept_exact": b_ex}
    found = []
    if viol > 1e-6:
        i = int(np.argmax(np.abs(f_svc - f_ex)))
        found.append(Discrepancy("scikit-learn", f"svc_kkt_tol{tol:g}", "inexact",
                                 f"SVC decision value f(x_{i}) (largest difference), C = {C:g}",
                                 {"data": f"first {n} MNIST 0/1 training digits (ntkref.data.load_digits01), "
                                          "K = kernels.fc(X, depth=1).ntk", "C": C, "tol": tol},
                                 float(f_svc[i]), float(f_ex[i]), float(f_ex[i]),
                                 float(abs(f_svc[i] - f_ex[i]) / max(1.0, np.max(np.abs(f_ex)))), None,
                                 f"KKT violation {viol:.2g} in units of f (exact solution: {viol_exact:.1g}); duality "
                                 f"gap {gap:.2g}; KKT residual {res:.2g} (ntkref.kkt, with intercept)",
                                 {"kkt_violation_f": viol, "duality_gap": gap}))
    return measured, found


# ---------------------------------------------------------------------------------------------
# the neural-tangents adapter
# ---------------------------------------------------------------------------------------------
class NeuralTangentsPeer:
    """neural-tangents' stax kernels with ntkref's parameters (float64: ``jax_enable_x64``).

    FC: ``Dense(W_std, b_std)`` + activation per hidden layer, then a ``Dense`` readout; CNTK: ``Conv(3×3, SAME)`` +
    ``Relu`` per layer, then ``Flatten`` (readout "flatten") or ``GlobalAvgPool`` ("gap") and ``Dense``; NT's images
    are NHWC, ntkref's NCHW (transposed here).
    """

    def __init__(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        from neural_tangents import stax

        self.stax, self._fns = stax, {}
        import neural_tangents

        self.version = neural_tangents.__version__

    def _fn(self, key, build):
        if key not in self._fns:
            self._fns[key] = self.stax.serial(*build())[2]
        return self._fns[key]

    def fc(self, x1, x2, get, *, depth, activation="relu", W_std=1.0, b_std=0.0):
        stax = self.stax

        def build():
            layers = []
            for _ in range(depth):
                layers += [stax.Dense(1, W_std=W_std, b_std=b_std), stax.Relu() if activation == "relu" else stax.Erf()]
            return layers + [stax.Dense(1, W_std=W_std, b_std=b_std)]

        fn = self._fn(("fc", depth, activation, W_std, b_std), build)
        return np.asarray(fn(np.asarray(x1), None if x2 is None else np.asarray(x2), get), dtype=np.float64)

    def cntk(self, x1, x2, get, *, depth, readout="flatten"):
        stax = self.stax

        def build():
            layers = []
            for _ in range(depth):
                layers += [stax.Conv(1, (3, 3), padding="SAME"), stax.Relu()]
            return layers + [stax.Flatten() if readout == "flatten" else stax.GlobalAvgPool(), stax.Dense(1)]

        fn = self._fn(("cntk", depth, readout), build)
        nhwc = lambda a: None if a is None else np.transpose(np.asarray(a), (0, 2, 3, 1))  # noqa: E731
        return np.asarray(fn(nhwc(x1), nhwc(x2), get), dtype=np.float64)


def peers_available():
    """(True, "") if neural-tangents and JAX (with float64) are importable, else (False, why)."""
    import importlib

    try:
        jax = importlib.import_module("jax")
        importlib.import_module("neural_tangents")
    except Exception as exc:  # ImportError, or a broken jaxlib
        return False, f"{type(exc).__name__}: {exc}"
    jax.config.update("jax_enable_x64", True)
    if not jax.numpy.zeros(1).dtype == np.float64:
        return False, "JAX float64 could not be enabled"
    return True, ""


# ---------------------------------------------------------------------------------------------
# the audit and its report section
# ---------------------------------------------------------------------------------------------
def audit(peer, name="neural-tangents", *, quick=False, sklearn=True, log=print):
    """Run every check on ``peer`` (and scikit-learn's SVC); returns (measured numbers, [Discrepancy])."""
    measured, found = {}, []
    checks = [(f.__name__.replace("check_", ""), lambda f=f: f(peer, name)) for f in FC_CHECKS]
    checks.append(("erf", lambda: check_erf(peer, name, quick=quick)))
    for readout in ("flatten", "gap"):
        checks.append((f"cntk_{readout}", lambda r=readout: check_cntk(peer, name, readout=r)))
    if sklearn:
        checks.append(("svc", lambda: check_svc(n=200 if quick else 400)))
    for key, run_check in checks:
        t = time.perf_counter()
        m, f = run_check()
        measured[key] = m
        found += f
        log(f"peers: {key}: {len(f)} discrepanc{'y' if len(f) == 1 else 'ies'} ({time.perf_counter() - t:.1f} s)")
    return measured, found


def _fmt_example(ex):
    parts = []
    for k, v in ex.items():
        text = repr(v) if not isinstance(v, str) else v
        parts.append(f"{k} = {text if len(text) <= 160 else text[:157] + '...'}")
    return "; ".join(parts).replace("|", "\\|")


def markdown(found, measured, header):
    lines = [header, "", "| peer | check | kind | value | minimal example | peer | mpmath / exact | ntkref | scaled error "
             "| ntkref's error | note |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in found:
        lines.append(f"| {d.peer} | {d.check} | {d.kind} | {d.what} | `{_fmt_example(d.example)}` | {d.peer_value!r} | "
                     f"{d.true_value!r} | {d.ntkref_value!r} | {d.scaled_error:.2g} | "
                     f"{'–' if d.ntkref_error is None else format(d.ntkref_error, '.1g')} | {d.note} |")
    if not found:
        lines.append("| – | – | – | – | no discrepancy above the tolerance | – | – | – | – | – | – |")
    return "\n".join(lines)


def run(log, plt, outdir, *, quick=False):
    """The ``peers`` section of ``python -m validation`` (skipped with a note without the ``peers`` extra)."""
    from .common import Claim, Section

    t0 = time.perf_counter()
    ok, why = peers_available()
    if not ok:
        note = ("**Skipped**: the `peers` extra is not installed (`pip install -e \".[peers]\"` from ntkref's "
                f"checkout: neural-tangents 0.6.5, jax 0.5.3, TensorFlow); import failed with `{why}`.")
        log("peers: skipped (neural-tangents/JAX not importable)")
        return Section("peers", "Peer audit: neural-tangents and scikit-learn", {"skipped": True, "reason": why},
                       note, seconds=time.perf_counter() - t0)
    peer = NeuralTangentsPeer()
    import importlib.util

    has_sklearn = importlib.util.find_spec("sklearn") is not None
    measured, found = audit(peer, quick=quick, sklearn=has_sklearn, log=log)
    worst_ntkref = max((d.ntkref_error for d in found if d.ntkref_error is not None), default=0.0)
    header = (f"neural-tangents {peer.version} (float64) and scikit-learn checked with ntkref's tooling; every value "
              "settled by an independent evaluation (mpmath at 650 digits via `validation.make_golden`, the golden "
              f"CNTK values, or the exact SVM with intercept of `ntkref.kkt`). Discrepancy: scaled error > {PEER_TOL:g}. "
              "The minimal example reproduces the value in the 'peer' column.")
    md = markdown(found, measured, header)
    claims = [Claim("peers", "ntkref is within its bound of the independent reference on every audited input",
                    worst_ntkref <= 10 * NTKREF_FC_BOUND,
                    f"worst ntkref error on the peers' minimal examples: {worst_ntkref:.2g}")]
    results = {"measured": measured, "discrepancies": [asdict(d) for d in found], "peer_tol": PEER_TOL,
               "neural_tangents": peer.version}
    return Section("peers", "Peer audit: neural-tangents and scikit-learn", results, md, claims=claims,
                   seconds=time.perf_counter() - t0)

