"""Fits with an intercept, the KKT verdict, the empirical-NTK checker and the fit / eNTK rows of the bug zoo (issue 24).

Independent routes: scikit-learn's libsvm (SVC) and LogisticRegression as candidates, closed forms for KRR with an
intercept, a 50-digit mpmath finite-difference Jacobian and torch.func.jacrev for the empirical NTK.
"""
from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest

from ntkref import cli, kernels, kkt, machines, nets
from ntkref import testing as T

LAM = 0.1


def _svc(C_of_lam, **kw):
    from sklearn.svm import SVC

    def candidate(K, y, lam):
        clf = SVC(kernel="precomputed", C=C_of_lam(lam), tol=1e-12, **kw).fit(K, y)
        return kkt.from_sklearn_svc(clf, len(y))

    return candidate


# ------------------------------------------------------------------------------------------ check_fit, intercept
def test_correct_svc_passes_check_fit_with_intercept_and_slipped_C_is_named():
    pytest.importorskip("sklearn")
    r = T.check_fit(_svc(lambda lam: 1 / lam), loss="hinge", lam=LAM, fit_intercept=True, dtype="float32",
                    max_examples=30)
    assert r.passed and r.max_error["objective"] < 1e-10  # measured 2.4e-13
    with pytest.raises(T.OracleMismatch) as info:
        T.check_fit(_svc(lambda lam: 1 / (2 * lam)), loss="hinge", lam=LAM, fit_intercept=True, dtype="float32",
                    max_examples=30)
    f = info.value.report.failure
    assert f.kind == "convention" and "C = 1/(2*lam)" in f.hint and "C = lam" not in f.hint
    r = T.check_fit(_svc(lambda lam: lam), loss="hinge", lam=LAM, fit_intercept=True, dtype="float32",
                    max_examples=30, raise_on_failure=False)
    assert r.failure.kind == "convention" and "C = lam" in r.failure.hint


def test_svc_on_float64_grams_is_a_precision_limit_not_a_convention():
    """libsvm caches K in float32: on float64 Grams the correct SVC fails the 1e-8 objective tolerance, and the
    report says why (precision, the float32 K) — never a C or λ slip; the slipped C is still named there."""
    pytest.importorskip("sklearn")
    r = T.check_fit(_svc(lambda lam: 1 / lam), loss="hinge", lam=LAM, fit_intercept=True, max_examples=15,
                    raise_on_failure=False, mode="measure")
    if not r.passed:
        assert set(r.failures) == {"precision"}
        assert "float32" in r.failures["precision"].minimal.hint
    r = T.check_fit(_svc(lambda lam: 1 / (2 * lam)), loss="hinge", lam=LAM, fit_intercept=True, max_examples=30,
                    raise_on_failure=False)
    assert r.failure.kind == "convention" and "C = 1/(2*lam)" in r.failure.hint


def _krr_intercept(lam_factor=0.5):
    def candidate(K, y, lam):  # stationarity: [[K + (λ/2)I, 1], [1ᵀ, 0]]·[α; b] = [y; 0] (squared loss without ½)
        n = len(y)
        A = np.block([[K + lam_factor * lam * np.eye(n), np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
        s = np.linalg.solve(A, np.append(y, 0.0))
        return s[:n], s[n]

    return candidate


def test_krr_with_intercept_closed_form_passes_and_slips_are_named():
    assert T.check_fit(_krr_intercept(), loss="squared", lam=0.3, fit_intercept=True, max_examples=15).passed
    r = T.check_fit(_krr_intercept(1.0), loss="squared", lam=0.3, fit_intercept=True, max_examples=15,
                    raise_on_failure=False)  # KernelRidge's alpha = λ read as λ/2: the solution for λ' = 2λ
    assert r.failure.kind == "convention" and "lam' = 2*lam" in r.failure.hint

    def no_intercept(K, y, lam):
        return np.linalg.solve(K + lam / 2 * np.eye(len(y)), y), 0.0

    r = T.check_fit(no_intercept, loss="squared", lam=0.3, fit_intercept=True, max_examples=15,
                    raise_on_failure=False)
    assert r.failure.kind == "convention" and "intercept is missing" in r.failure.hint


def test_logistic_with_intercept_against_scikit_learn():
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    def candidate_for(C_of_lam):
        def candidate(K, y, lam):  # K = F Fᵀ (eigen-features), w = Fᵀα (representer theorem)
            w_, V = np.linalg.eigh(K)
            F = V * np.sqrt(np.maximum(w_, 0.0))
            clf = LogisticRegression(C=C_of_lam(lam), tol=1e-14, max_iter=10_000, solver="newton-cholesky")
            clf.fit(F, y)
            alpha = np.linalg.lstsq(F.T, clf.coef_[0], rcond=None)[0]
            return alpha, float(clf.intercept_[0])
        return candidate

    r = T.check_fit(candidate_for(lambda lam: 1 / lam), loss="logistic", lam=0.5, fit_intercept=True,
                    max_examples=10, objective_tol=1e-9)
    assert r.passed
    r = T.check_fit(candidate_for(lambda lam: 1 / (2 * lam)), loss="logistic", lam=0.5, fit_intercept=True,
                    max_examples=10, objective_tol=1e-9, raise_on_failure=False)
    assert r.failure.kind == "convention" and "C = 1/(2*lam)" in r.failure.hint


def test_a_wrong_solver_gets_no_hint():
    """No hint rather than a wrong one: α perturbed at random solves no named problem."""
    def perturbed(K, y, lam):
        a, b = machines.fit(K, y, "hinge", lam, fit_intercept=True)
        rng = np.random.default_rng(int(abs(K).sum() * 1e6) % 2**32)
        return np.asarray(a) + 0.05 * rng.standard_normal(len(y)), b

    for fi in (True, False):
        cand = perturbed if fi else (lambda K, y, lam: perturbed(K, y, lam)[0])
        r = T.check_fit(cand, loss="hinge", lam=LAM, fit_intercept=fi, max_examples=20, raise_on_failure=False,
                        mode="measure")
        assert not r.passed and "convention" not in r.failures
        assert all(s.minimal.hint == "" for s in r.failures.values())


def test_check_fit_without_intercept_names_an_intercept_fitting_candidate():
    pytest.importorskip("sklearn")

    def alpha_only(K, y, lam):
        return _svc(lambda lam: 1 / lam)(K, y, lam)[0]

    r = T.check_fit(alpha_only, loss="hinge", lam=LAM, dtype="float32", max_examples=30, raise_on_failure=False)
    assert r.failure.kind == "convention" and "unregularised intercept" in r.failure.hint


def test_check_fit_intercept_refuses_bad_candidates_and_parameters():
    r = T.check_fit(lambda K, y, lam: np.zeros(len(y)), loss="squared", lam=0.3, fit_intercept=True,
                    max_examples=3, raise_on_failure=False)
    assert r.failure.kind == "exception" and "pair" in r.failure.detail
    with pytest.raises(T.InvalidParameterError if hasattr(T, "InvalidParameterError") else Exception,
                       match="fit_intercept"):
        T.check_fit(_krr_intercept(), loss="squared", fit_intercept="yes")
    with pytest.raises(Exception, match="'dtype'"):
        T.check_fit(_krr_intercept(), loss="squared", dtype="float16")


# ------------------------------------------------------------------------------------------ kkt.diagnose
def _svc_data(n=60, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = np.where(X[:, 0] + 0.7 > 0, 1.0, -1.0)
    return kernels.fc(X, depth=1).ntk, y


@pytest.mark.parametrize("C_of_lam, label", [(lambda l: 1 / (2 * l), "C = 1/(2*lam)"), (lambda l: l, "C = lam"),
                                             (lambda l: 2 / l, "C = 2/lam")])
def test_kkt_diagnose_names_the_C_slip_of_svc(asxp, C_of_lam, label):
    pytest.importorskip("sklearn")
    from sklearn.svm import SVC

    K, y = _svc_data()
    clf = SVC(kernel="precomputed", C=C_of_lam(LAM), tol=1e-12).fit(K, y)
    a, b = kkt.from_sklearn_svc(clf, len(y))
    d = kkt.diagnose(asxp(a), asxp(K), asxp(y), "hinge", LAM, intercept=b)
    assert not d.optimal and d.kind == "convention" and d.slips[0].startswith(label) and len(d.slips) == 1
    # the certificate: the gap bounds the suboptimality (independent P from the definition)
    P = lambda al, bb: LAM / 2 * al @ K @ al + np.maximum(0, 1 - y * (K @ al + bb)).sum()  # noqa: E731
    m = kkt.fit_with_intercept(K, y, "hinge", LAM)
    assert d.duality_gap >= P(a, b) - P(np.asarray(m.alpha_), m.intercept_) - 1e-9
    assert d.relative_gap > 1e-3 and str(d).startswith("NOT optimal")


def test_kkt_diagnose_verdicts(asxp):
    pytest.importorskip("sklearn")
    from sklearn.svm import SVC

    K, y = _svc_data()
    m = kkt.fit_with_intercept(K, y, "hinge", LAM)
    d = kkt.diagnose(m.alpha_, K, y, "hinge", LAM, intercept=m.intercept_)
    assert d.optimal and d.kind == "ok" and d.relative_gap <= 1e-8 and d.hint == ""
    exact = SVC(kernel="precomputed", C=1 / LAM, tol=1e-12).fit(K, y)  # libsvm's float32 kernel cache
    d = kkt.diagnose(*kkt.from_sklearn_svc(exact, len(y))[:1], K, y, "hinge", LAM,
                     intercept=kkt.from_sklearn_svc(exact, len(y))[1])
    assert d.kind == "precision" and "float32" in d.hint and d.slips == ("float32 K",)
    loose = SVC(kernel="precomputed", C=1 / LAM).fit(K, y)  # tol = 1e-3: inexact, no slip
    a, b = kkt.from_sklearn_svc(loose, len(y))
    d = kkt.diagnose(a, K, y, "hinge", LAM, intercept=b)
    assert d.kind == "formula" and d.hint == ""
    d = kkt.diagnose(a + 0.01, K, y, "hinge", LAM, intercept=b)
    assert d.kind == "formula" and d.hint == ""


# ------------------------------------------------------------------------------------------ the CLI
def _run(args, capsys):
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr()


def test_cli_compare_fit_intercept_svc(tmp_path, capsys):
    pytest.importorskip("sklearn")
    from sklearn.svm import SVC

    K, y = _svc_data(40)
    K = K.astype(np.float32).astype(np.float64)  # exact in float32: libsvm solves exactly this problem
    np.save(tmp_path / "K.npy", K)
    np.save(tmp_path / "y.npy", y)
    base = ["compare", "--kind", "fit", "--K", tmp_path / "K.npy", "--y", tmp_path / "y.npy", "--loss", "hinge",
            "--lam", LAM]
    for name, C in (("ok", 1 / LAM), ("half", 1 / (2 * LAM))):
        a, b = kkt.from_sklearn_svc(SVC(kernel="precomputed", C=C, tol=1e-12).fit(K, y), len(y))
        np.save(tmp_path / f"{name}.npy", a)
        code, out = _run(base + ["--candidate", tmp_path / f"{name}.npy", "--fit-intercept", "--intercept", repr(b),
                                 "--report", tmp_path / f"{name}.json"], capsys)
        rep = json.loads((tmp_path / f"{name}.json").read_text())
        if name == "ok":
            assert code == 0 and rep["agree"] and rep["hints"] == [] and rep["candidate"]["verdict"]["optimal"]
            assert rep["arrays"]["f_train"]["errors"]["scaled"]["max"] < 1e-10
        else:
            assert code == 1 and [h["hypothesis"] for h in rep["hints"]] == ["C = 1/(2*lam)"]
            assert "hint: the candidate solves the problem with C = 1/(2*lam)" in out.out
            assert rep["candidate"]["verdict"]["kind"] == "convention"
            assert rep["arrays"]["objective"]["groups"]["convention"]["count"] == 1
    # the correct SVC checked as a machine without intercept: named, not a "precision" mystery
    code, out = _run(base + ["--candidate", tmp_path / "ok.npy"], capsys)
    assert code == 1 and "unregularised intercept" in out.out
    code, out = _run(base + ["--candidate", tmp_path / "ok.npy", "--fit-intercept"], capsys)
    assert code == 2 and "--intercept" in out.err
    code, out = _run(base + ["--candidate", tmp_path / "ok.npy", "--intercept", "0.5"], capsys)
    assert code == 2 and "--fit-intercept" in out.err


# ------------------------------------------------------------------------------------------ empirical NTK
def _mp_outputs(net, flat, x):
    """Forward pass at 50 digits from a flat parameter list (W₀ row-major, b₀, W₁, …)."""
    k, params = 0, []
    for fi, fo, bs in zip(net.fan_in, net.fan_out, net.b_std):
        W = [[flat[k + i * fo + j] for j in range(fo)] for i in range(fi)]
        k += fi * fo
        b = None
        if bs > 0:
            b, k = flat[k:k + fo], k + fo
        params.append((W, b))
    outs = []
    for row in x:
        h = [mpmath.mpf(float(v)) for v in row]
        for ell, (W, b) in enumerate(params):
            c = mpmath.mpf(net.W_std[ell]) / mpmath.sqrt(net.fan_in[ell])
            z = [c * mpmath.fsum(h[i] * W[i][j] for i in range(len(h)))
                 + (mpmath.mpf(net.b_std[ell]) * b[j] if b is not None else 0) for j in range(len(W[0]))]
            h = [max(v, 0) for v in z] if ell < net.depth else z
        outs.append(h[0])
    return outs


def _mp_entk(net, params, x1, x2):
    """J Jᵀ with J by central differences of the 50-digit outputs (step 1e-20: error O(1e-40) off the kinks)."""
    with mpmath.workdps(50):
        flat = []
        for W, b in params:
            flat += [mpmath.mpf(float(v)) for v in np.asarray(W).ravel()]
            if b is not None:
                flat += [mpmath.mpf(float(v)) for v in np.asarray(b)]
        h = mpmath.mpf("1e-20")
        xs = np.vstack([x1, x2])
        J = []
        for p in range(len(flat)):
            fp, fm = list(flat), list(flat)
            fp[p] += h
            fm[p] -= h
            J.append([(u - v) / (2 * h) for u, v in zip(_mp_outputs(net, fp, xs), _mp_outputs(net, fm, xs))])
        n1 = len(x1)
        K = [[mpmath.fsum(J[p][i] * J[p][n1 + j] for p in range(len(flat))) for j in range(len(x2))]
             for i in range(n1)]
        diag = [mpmath.fsum(J[p][i] ** 2 for p in range(len(flat))) for i in range(len(xs))]
        return K, diag


def _entk_error_vs_mpmath(trials, seed):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(trials):
        depth, d = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        width = [int(w) for w in rng.integers(1, 6, size=depth)]
        net = nets.FullyConnected(d, width, depth, W_std=float(rng.choice([1.0, 1.4, 2.0])),
                                  b_std=float(rng.choice([0.0, 0.5, 1.3])))
        params = net.init(int(rng.integers(1 << 30)), xp=np)
        x1 = rng.standard_normal((2, d)) * 10.0 ** rng.uniform(-1, 1)
        x2 = rng.standard_normal((2, d))
        K = nets.empirical_ntk(net, params, x1, x2)
        R, diag = _mp_entk(net, params, x1, x2)
        for i in range(2):
            for j in range(2):
                s = mpmath.sqrt(diag[i] * diag[2 + j])
                if s > 0:
                    worst = max(worst, float(abs(mpmath.mpf(float(K[i, j])) - R[i][j]) / s))
    return worst


def test_empirical_ntk_accuracy_against_mpmath_finite_differences():
    """The stated accuracy EMPIRICAL_NTK_BOUND against an independent route (measured: 6e-16 over 40 nets)."""
    assert _entk_error_vs_mpmath(8, 0) <= T.EMPIRICAL_NTK_BOUND


@pytest.mark.slow
def test_empirical_ntk_accuracy_against_mpmath_many_nets():
    assert _entk_error_vs_mpmath(120, 1) <= T.EMPIRICAL_NTK_BOUND


def _torch_entk(drop=None):
    torch = pytest.importorskip("torch")
    from torch.func import functional_call, jacrev  # noqa: F401

    def candidate(params, x1, x2):
        x2 = x1 if x2 is None else x2
        depth = len(params) - 1
        ts = [(torch.tensor(W), None if b is None else torch.tensor(b)) for W, b in params]
        shapes = [(W.shape, None if b is None else b.shape) for W, b in ts]
        flat = torch.cat([t.reshape(-1) for W, b in ts for t in (W, b) if t is not None])

        def f(theta, x):
            k, h = 0, x
            for ell, (sw, sb) in enumerate(shapes):
                W = theta[k:k + sw[0] * sw[1]].reshape(sw)
                k += sw[0] * sw[1]
                z = candidate.W_std * (h @ W) / sw[0] ** 0.5
                if sb is not None:
                    b = theta[k:k + sb[0]]
                    k += sb[0]
                    z = z + candidate.b_std * b
                h = torch.relu(z) if ell < depth else z
            return h[:, 0]

        J1 = torch.func.jacrev(f)(flat, torch.tensor(x1))
        J2 = torch.func.jacrev(f)(flat, torch.tensor(x2))
        if drop == "bias":  # planted bug: the bias gradients left out
            keep, k = [], 0
            for sw, sb in shapes:
                keep += [True] * (sw[0] * sw[1])
                keep += [False] * (sb[0] if sb is not None else 0)
            J1, J2 = J1[:, keep], J2[:, keep]
        if drop == "first":  # planted bug: the first layer frozen
            k = shapes[0][0][0] * shapes[0][0][1] + (shapes[0][1][0] if shapes[0][1] is not None else 0)
            J1, J2 = J1[:, k:], J2[:, k:]
        K = (J1 @ J2.T).numpy()
        return 2.0 * K if drop == "double" else K

    candidate.W_std, candidate.b_std = 1.0, 0.0
    return candidate


@pytest.mark.parametrize("b_std", [0.0, 0.7])
def test_check_empirical_ntk_passes_torch_jacrev(b_std):
    cand = _torch_entk()
    cand.b_std = b_std
    r = T.check_empirical_ntk(cand, depth=2, b_std=b_std, max_examples=15)
    assert r.passed and r.max_error["entries"] <= 1e-14  # J Jᵀ by autodiff agrees with ntkref to rounding


# ------------------------------------------------------------------------------------------ the bug zoo (fits, eNTK)
def _zoo():
    """(name, run(seed) -> report, expected kind, hint fragment or None for no hint)."""
    sk = pytest.importorskip("sklearn")  # noqa: F841

    def fit(cand, **kw):
        return lambda seed: T.check_fit(cand, max_examples=20, seed=seed, raise_on_failure=False, **kw)

    def entk(drop, b_std=0.7):
        c = _torch_entk(drop)
        c.b_std = b_std
        return lambda seed: T.check_empirical_ntk(c, depth=2, b_std=b_std, max_examples=15, seed=seed,
                                                  raise_on_failure=False)

    def krr_no_half(K, y, lam):  # KRR without intercept, alpha = λ where λ/2 belongs
        return np.linalg.solve(K + lam * np.eye(len(y)), y)

    def krr_mean(K, y, lam):  # the loss averaged where the sum was asked
        return np.linalg.solve(K + len(y) * lam / 2 * np.eye(len(y)), y)

    def krr_bad(K, y, lam):  # a wrong formula: the ridge on the wrong side
        return np.linalg.solve(K @ K + lam / 2 * np.eye(len(y)), y)

    return [
        ("KRR λ vs λ/2", fit(krr_no_half, loss="squared", lam=0.3), "convention", "lam' = 2*lam"),
        ("KRR mean vs sum", fit(krr_mean, loss="squared", lam=0.3), "convention", "mean vs sum"),
        ("KRR wrong formula", fit(krr_bad, loss="squared", lam=0.3), "formula", None),
        ("KRR intercept missing", fit(lambda K, y, lam: (krr_bad(K, y, lam) * 0 + np.linalg.solve(
            K + lam / 2 * np.eye(len(y)), y), 0.0), loss="squared", lam=0.3, fit_intercept=True), "convention",
         "intercept is missing"),
        ("SVC C = 1/(2λ)", fit(_svc(lambda l: 1 / (2 * l)), loss="hinge", lam=LAM, fit_intercept=True,
                               dtype="float32"), "convention", "C = 1/(2*lam)"),
        ("SVC C = λ", fit(_svc(lambda l: l), loss="hinge", lam=LAM, fit_intercept=True, dtype="float32"),
         "convention", "C = lam"),
        ("SVC loose tol", fit(lambda K, y, lam: kkt.from_sklearn_svc(__import__("sklearn.svm").svm.SVC(
            kernel="precomputed", C=1 / lam, tol=1e-1).fit(K, y), len(y)), loss="hinge", lam=LAM,
            fit_intercept=True, dtype="float32"), "formula", None),
        ("SVC without --fit-intercept", fit(lambda K, y, lam: _svc(lambda l: 1 / l)(K, y, lam)[0], loss="hinge",
                                            lam=LAM, dtype="float32"), "convention", "unregularised intercept"),
        ("eNTK bias gradients missing", entk("bias"), "convention", "no bias gradients"),
        ("eNTK first layer frozen", entk("first"), "convention", "no first layer"),
        ("eNTK factor 2", entk("double"), "convention", "factor 2"),
    ]


def _zoo_rows(seeds, svc_seeds=None):
    rows = []
    for name, run, kind, fragment in _zoo():
        for seed in (seeds if svc_seeds is None or not name.startswith("SVC") else svc_seeds):
            r = run(seed)
            f = r.failure
            caught = not r.passed
            right_kind = caught and f.kind == kind
            right_hint = caught and ((fragment is None and f.hint == "") or (fragment is not None and fragment in f.hint))
            rows.append((name, seed, caught, f.kind if caught else None, (f.hint if caught else "")[:60],
                         right_kind and right_hint))
    return rows


def test_bug_zoo_fits_and_empirical_ntk():
    rows = _zoo_rows([0])
    bad = [r for r in rows if not (r[2] and r[5])]
    assert not bad, bad


@pytest.mark.slow
def test_bug_zoo_fits_and_empirical_ntk_six_seeds():
    # the SVC rows on three seeds: libsvm at tol=1e-12 takes minutes per seed on the near-singular Grams that
    # hypothesis' shrinking visits (seeds 0-2 of "SVC C = 1/(2λ)" took ~5 min each on 2 cores)
    rows = _zoo_rows(range(6), svc_seeds=range(3))
    bad = [r for r in rows if not (r[2] and r[5])]
    assert not bad, bad
