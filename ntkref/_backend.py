"""Array namespaces: where arrays live and how ntkref chooses it.

Functions given arrays work in the arrays' own namespace
(:func:`array_api_compat.array_namespace`) and return arrays of it.  Where a
function creates arrays from nothing (Python lists, scalars, seeds), it uses
the *default* namespace, chosen by the environment variable
``NTKREF_BACKEND``:

=====================  ==========================================
``NTKREF_BACKEND``     namespace
=====================  ==========================================
unset or ``numpy``     NumPy (through ``array_api_compat.numpy``)
``cupy``               CuPy (GPU)
``torch``              PyTorch
``jax``                JAX (``jax.numpy``; enable x64 yourself)
``dask``               Dask arrays
``array_api_strict``   the strict reference namespace (compliance)
=====================  ==========================================

An unknown value, or a backend whose package is not installed, is an error
naming the variable and the choices: never a silent fallback to NumPy.
"""
from __future__ import annotations

import importlib
import os

import array_api_compat

ENV_VAR = "NTKREF_BACKEND"

_MODULES = {
    "numpy": "array_api_compat.numpy",
    "cupy": "array_api_compat.cupy",
    "torch": "array_api_compat.torch",
    "jax": "jax.numpy",
    "dask": "array_api_compat.dask.array",
    "array_api_strict": "array_api_strict",
}
BACKENDS = tuple(_MODULES)


class BackendError(ValueError):
    """The requested array backend is unknown or cannot be imported."""


def backend_name() -> str:
    """Name of the default backend, from ``NTKREF_BACKEND`` (``"numpy"`` if unset)."""
    name = os.environ.get(ENV_VAR, "").strip().lower() or "numpy"
    if name not in _MODULES:
        raise BackendError(
            f"{ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a known backend; "
            f"choose one of {', '.join(BACKENDS)}."
        )
    return name


def default_namespace():
    """The array namespace selected by ``NTKREF_BACKEND`` (NumPy by default)."""
    name = backend_name()
    try:
        return importlib.import_module(_MODULES[name])
    except ImportError as exc:
        raise BackendError(
            f"{ENV_VAR}={name!r} selects a backend whose package cannot be imported "
            f"({exc}); install it (e.g. `pip install ntkref[{name}]`) or choose one of "
            f"{', '.join(BACKENDS)}."
        ) from exc


def is_array(x) -> bool:
    return array_api_compat.is_array_api_obj(x)


def namespace(*arrays):
    """Namespace of the given arrays; the default namespace if none is an array.

    ``None`` entries and Python scalars/lists are ignored.  Arrays from two
    different libraries are an error (raised by array_api_compat).
    """
    actual = [a for a in arrays if a is not None and is_array(a)]
    if not actual:
        return default_namespace()
    try:
        return array_api_compat.array_namespace(*actual)
    except TypeError as exc:
        raise TypeError(f"inputs come from different array libraries: {exc}") from exc


def is_numpy_namespace(xp) -> bool:
    return array_api_compat.is_numpy_namespace(xp)


def device_of(x):
    return array_api_compat.device(x)


def to_numpy(x):
    """Copy an array of any supported namespace to a NumPy array (host memory)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    if is_array(x):
        try:
            return np.from_dlpack(x)
        except Exception:  # dask, jax on some devices: fall back to the buffer protocol
            return np.asarray(x)
    return np.asarray(x)
