"""ntkref.adapters: the stax models have ntkref's kernels (checked in a separate interpreter with
neural-tangents 0.6.5 / jax 0.5.3 when /work/ntvenv exists), and the scikit-learn conversions give the
estimators' solutions in ntkref's conventions (independent routes: closed forms, decision functions)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ntkref import adapters
from ntkref.kernels import fc

NT_PYTHON = os.environ.get("NTKREF_NT_PYTHON", "/work/ntvenv/bin/python")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STAX_SCRIPT = r'''
import json
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from ntkref import adapters, kernels

def scaled(a, b, d1, d2):  # |K − R| / √(R(x,x)R(x',x')), the oracle's measure
    return float(np.max(np.abs(np.asarray(a) - b) / np.sqrt(np.outer(d1, d2))))

rng = np.random.default_rng(0)
out = {}
x, y = rng.standard_normal((5, 4)), rng.standard_normal((3, 4)) * 2.5   # generic rows, cross pairs only
for name, cfg in {"relu1": dict(depth=1),
                  "relu3": dict(depth=3, W_std=[1.0, 1.3, 0.7, 2.0], b_std=[0.1, 0.5, 0.0, 0.2]),
                  "erf2": dict(depth=2, activation="erf", W_std=[1.0, 1.5, 0.8], b_std=[0.0, 0.3, 0.1])}.items():
    k = adapters.stax_fc(**cfg)[2](x, y, ("nngp", "ntk"))
    ref, dx, dy = kernels.fc(x, y, **cfg), kernels.fc_diagonal(x, **cfg), kernels.fc_diagonal(y, **cfg)
    out[name] = {w: scaled(getattr(k, w), getattr(ref, w), getattr(dx, w), getattr(dy, w)) for w in ("nngp", "ntk")}
xi, yi = rng.standard_normal((2, 2, 4, 4)), rng.standard_normal((2, 2, 4, 4))
for ro in ("gap", "flatten"):
    cfg = dict(depth=2, readout=ro, W_std=[1.0, 1.2, 0.9], b_std=[0.0, 0.2, 0.1])
    ref, d1, d2 = kernels.cntk(xi, yi, **cfg), kernels.cntk(xi, **cfg), kernels.cntk(yi, **cfg)
    for layout, t in (("NCHW", lambda a: a), ("NHWC", lambda a: np.transpose(a, (0, 2, 3, 1)))):
        k = adapters.stax_cntk(**cfg, layout=layout)[2](t(xi), t(yi), ("nngp", "ntk"))
        out[f"cntk_{ro}_{layout}"] = {w: scaled(getattr(k, w), getattr(ref, w), np.diag(getattr(d1, w)),
                                                np.diag(getattr(d2, w))) for w in ("nngp", "ntk")}
print("RESULT " + json.dumps(out))
'''


def _nt_interpreter():
    if not os.path.exists(NT_PYTHON):
        pytest.skip(f"no neural-tangents interpreter at {NT_PYTHON} (set NTKREF_NT_PYTHON)")
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    probe = subprocess.run([NT_PYTHON, "-c", "import array_api_compat, neural_tangents"], env=env,
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"{NT_PYTHON} lacks array_api_compat or neural_tangents: {probe.stderr[-300:]}")
    return env


@pytest.mark.slow  # ~20 s: a second interpreter importing jax and neural-tangents
def test_stax_models_have_ntkrefs_kernels():
    env = _nt_interpreter()
    run = subprocess.run([NT_PYTHON, "-c", STAX_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    errors = json.loads(line[len("RESULT "):])
    assert set(errors) == {"relu1", "relu3", "erf2", "cntk_gap_NCHW", "cntk_gap_NHWC", "cntk_flatten_NCHW",
                           "cntk_flatten_NHWC"}
    for name, by_kernel in errors.items():
        for which, err in by_kernel.items():
            assert err <= 1e-12, (name, which, err)  # measured ≤ 5e-16 (x64)


def test_stax_without_neural_tangents_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "neural_tangents", None)  # as if not installed
    with pytest.raises(ImportError, match=r"peers"):
        adapters.stax_fc(1)
    with pytest.raises(ImportError, match=r"peers"):
        adapters.stax_cntk(1)


@pytest.mark.parametrize("kw", [dict(depth=-1), dict(depth=1, W_std=[1.0]), dict(depth=1, activation="tanh"),
                                dict(depth=1, b_std=-0.1)])
def test_stax_fc_bad_parameters(kw, monkeypatch):
    monkeypatch.setitem(sys.modules, "neural_tangents", None)
    with pytest.raises(ValueError):
        adapters.stax_fc(**kw)


def _gram(n=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    y = np.where(x[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return np.asarray(fc(x, depth=1).ntk), y


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_kernel_ridge_conversion(reduction):
    from sklearn.kernel_ridge import KernelRidge

    from ntkref import machines

    K, y = _gram()
    n, lam = len(y), 0.3
    a = adapters.kernel_ridge_alpha(lam, reduction=reduction, n=n)
    assert a == pytest.approx(lam / 2 if reduction == "sum" else n * lam / 2, rel=1e-15)
    est = KernelRidge(alpha=a, kernel="precomputed").fit(K, y)
    alpha, lam_back = adapters.from_kernel_ridge(est, reduction=reduction)
    assert lam_back == pytest.approx(lam, rel=1e-15)
    # (y − Kα)² without ½, sum: stationarity 2K(Kα − y) + λKα = 0 ⇐ α = (K + (λ_sum/2) I)⁻¹ y
    lam_sum = lam * (n if reduction == "mean" else 1)
    closed = np.linalg.solve(K + lam_sum / 2 * np.eye(n), y)
    np.testing.assert_allclose(alpha, closed, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(alpha, np.asarray(machines.fit(K, y, "squared", lam, reduction=reduction)),
                               rtol=1e-9, atol=1e-12)


def test_svc_conversion():
    from sklearn.svm import SVC

    from ntkref import kkt

    K, y = _gram(16, seed=2)
    lam = 0.5
    C = adapters.svc_C(lam)
    assert C == 2.0 and adapters.svc_C(lam, reduction="mean", n=16) == pytest.approx(1 / 8)
    est = SVC(C=C, kernel="precomputed", tol=1e-12).fit(K, y)
    alpha, b, lam_back = adapters.from_svc(est, len(y))
    assert lam_back == pytest.approx(lam, rel=1e-15)
    # g = Kα + b is SVC's decision function (an identity of the conversion), y = +1 for classes_[1]
    np.testing.assert_allclose(K @ alpha + b, est.decision_function(K), rtol=1e-12, atol=1e-12)
    assert list(est.classes_) == [-1.0, 1.0]
    # and (α, b) solves ntkref's hinge machine with an intercept at λ = 1/C: relative duality gap of libsvm's
    # answer at tol 1e-12, computed by ntkref.kkt (independent of scikit-learn)
    gap = float(kkt.duality_gap(alpha, K, y, "hinge", lam_back, intercept=b))
    primal = float(0.5 * lam * alpha @ K @ alpha + np.maximum(0.0, 1 - y * (K @ alpha + b)).sum())
    assert 0 <= gap <= 1e-6 * max(1.0, primal)
    _, _, lam_mean = adapters.from_svc(est, len(y), reduction="mean")
    assert lam_mean == pytest.approx(lam / len(y), rel=1e-15)


def test_sklearn_adapters_refuse_what_they_cannot_convert():
    with pytest.raises(ValueError, match="'n'"):
        adapters.kernel_ridge_alpha(0.1, reduction="mean")
    with pytest.raises(ValueError, match="lam"):
        adapters.svc_C(0.0)
    with pytest.raises(ValueError, match="fitted"):
        adapters.from_kernel_ridge(object())
