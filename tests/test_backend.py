"""Backend selection: env variables, errors naming the choices, inputs keep their namespace."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ntkref
from ntkref import kernels
from ntkref._lib import backend as _backend


def test_unknown_backend_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("NTKREF_BACKEND", "tensorflow")
    monkeypatch.delenv("NTKREF_DEVICE", raising=False)
    with pytest.raises(ntkref.BackendError, match="NTKREF_BACKEND.*numpy.*array_api_strict"):
        _backend.default_namespace()
    # functions creating arrays from plain lists use the default namespace, so they fail the same way
    with pytest.raises(ntkref.BackendError, match="NTKREF_BACKEND"):
        kernels.fc([[1.0, 2.0]])


def test_missing_package_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake(name, *args, **kwargs):
        if name.startswith("array_api_compat.cupy") or name == "cupy":
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setenv("NTKREF_BACKEND", "cupy")
    monkeypatch.setattr(builtins, "__import__", fake)
    import importlib

    monkeypatch.setattr(importlib, "import_module", lambda n: fake(n))
    with pytest.raises(ntkref.BackendError, match="cannot be imported"):
        _backend.default_namespace()


def test_default_and_explicit_namespaces(monkeypatch):
    monkeypatch.delenv("NTKREF_BACKEND", raising=False)
    monkeypatch.delenv("NTKREF_DEVICE", raising=False)
    assert _backend.backend_name() == "numpy"
    out = kernels.fc([[1.0, 0.0], [0.0, 1.0]]).ntk
    assert isinstance(out, np.ndarray)
    strict = pytest.importorskip("array_api_strict")
    monkeypatch.setenv("NTKREF_BACKEND", "array_api_strict")
    # NumPy inputs stay NumPy even when the default backend is another one
    assert isinstance(kernels.fc(np.eye(2)).ntk, np.ndarray)
    got = kernels.fc([[1.0, 0.0], [0.0, 1.0]]).ntk
    assert type(got).__module__.startswith("array_api_strict")
    assert isinstance(kernels.fc(strict.asarray(np.eye(2))).ntk, type(got))


def test_mixed_libraries_rejected():
    strict = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="different array libraries"):
        kernels.fc(np.eye(2), strict.asarray(np.eye(2)))


def _import_ntkref(**env):
    """``python -c "import ntkref"`` in a fresh interpreter with the given NTKREF_* settings."""
    full = {k: v for k, v in os.environ.items() if k not in ("NTKREF_BACKEND", "NTKREF_DEVICE")}
    full.update(env)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    full["PYTHONPATH"] = root + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", "import ntkref"], capture_output=True, text=True, env=full,
                          timeout=120)


def test_misspelt_backend_fails_at_import_naming_the_variable():
    r = _import_ntkref(NTKREF_BACKEND="cupyy")
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "NTKREF_BACKEND='cupyy'" in r.stderr and "is not a known backend" in r.stderr
    assert "numpy" in r.stderr and "array_api_strict" in r.stderr  # the choices
    assert _import_ntkref(NTKREF_BACKEND="numpy").returncode == 0


@pytest.mark.parametrize("backend,device", [("numpy", "device1"), ("numpy", "cuda:0"), ("array_api_strict", "device9")])
def test_bad_device_fails_at_import_naming_the_variable(backend, device):
    if backend == "array_api_strict":
        pytest.importorskip("array_api_strict")
    r = _import_ntkref(NTKREF_BACKEND=backend, NTKREF_DEVICE=device)
    assert r.returncode != 0
    assert "BackendError" in r.stderr and f"NTKREF_DEVICE={device!r}" in r.stderr, r.stderr
    if backend == "array_api_strict":
        assert "CPU_DEVICE, device1 or device2" in r.stderr
        assert _import_ntkref(NTKREF_BACKEND=backend, NTKREF_DEVICE="device1").returncode == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compat_host_linear_algebra_agrees_with_numpy(dtype):
    """The NumPy fast paths of _compat (LAPACK called directly) against NumPy's own routines: the LU solve
    has a backward error at rounding level (and raises LinAlgError on an exactly singular A), the Cholesky
    test succeeds exactly when a shifted spectrum is positive, ||K||_F equals the definition, and every
    routine answers None for another namespace (the caller's array-API route)."""
    import array_api_compat.numpy as anp

    from ntkref._lib import compat as _compat

    rng = np.random.default_rng(3)
    eps = np.finfo(dtype).eps
    for m in (1, 7, 60):
        A = rng.standard_normal((m, m)).astype(dtype) + m * np.eye(m, dtype=dtype)
        b = rng.standard_normal(m).astype(dtype)
        x = _compat.lu_solve_small(A, b, anp)
        assert x.dtype == dtype
        A64, x64 = A.astype(np.float64), x.astype(np.float64)
        resid = np.max(np.abs(A64 @ x64 - b)) / (np.max(np.abs(A64)) * np.max(np.abs(x64)) + np.max(np.abs(b)))
        assert resid <= 10 * m * eps
    with pytest.raises(np.linalg.LinAlgError):
        _compat.lu_solve_small(np.zeros((3, 3), dtype=dtype), np.ones(3, dtype=dtype), anp)
    V, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    w = np.linspace(-1.0, 1.0, 40)  # λ_min = -1: K + sI is PD iff s > 1 (far from rounding at s = 0.9, 1.1)
    K = ((V * w) @ V.T).astype(dtype)
    K = (K + K.T) / 2
    assert not _compat.cholesky_succeeds(K, 0.9, anp) and _compat.cholesky_succeeds(K, 1.1, anp)
    assert np.isclose(_compat.frobenius_norm(K, anp), np.sqrt(np.sum(K.astype(np.float64) ** 2)), rtol=10 * eps)
    xs = pytest.importorskip("array_api_strict")

    Ks = xs.asarray(K)
    assert _compat.cholesky_succeeds(Ks, 1.1, xs) is None and _compat.lu_solve_small(Ks, Ks[0, :], xs) is None
