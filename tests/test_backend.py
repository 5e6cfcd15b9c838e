"""Backend selection (SPEC §5): env variable, errors naming the choices, inputs keep their namespace."""
import numpy as np
import pytest

import ntkref
from ntkref import _backend, kernels


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
