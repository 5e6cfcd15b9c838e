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

``NTKREF_DEVICE`` chooses the device of the default namespace on which such
arrays are created (for CuPy it also becomes the current device when ntkref is
imported): a CUDA ordinal (``0``, ``cuda:1``) for CuPy and PyTorch,
a ``torch.device`` string (``cpu``, ``cuda:0``) for PyTorch, an index into
``jax.devices()`` for JAX, and ``CPU_DEVICE``, ``device1`` or ``device2`` for
``array_api_strict``.  ``array_api_strict`` on ``device1`` refuses implicit
conversion to NumPy exactly as a CuPy array does, so
``NTKREF_BACKEND=array_api_strict NTKREF_DEVICE=device1`` is the CPU stand-in
for a GPU run: a function that leaves the input's device, or converts to
NumPy behind the caller's back, fails there.

An unknown value, a backend whose package is not installed, or a device the
backend does not have is an error naming the variable and the choices — when
``ntkref`` is imported, not at the first call — and never a silent fallback
to NumPy.
"""
from __future__ import annotations

import importlib
import os

import array_api_compat

ENV_VAR = "NTKREF_BACKEND"
DEVICE_VAR = "NTKREF_DEVICE"

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


# how to install each backend's package: an extra of ntkref's checkout where there is one (ntkref is not on a
# package index), else the package itself
_INSTALL = {"cupy": 'pip install -e ".[cupy]" from ntkref\'s checkout, or pip install cupy-cuda13x',
            "dask": 'pip install -e ".[dask]" from ntkref\'s checkout', "array_api_strict": "pip install array-api-strict",
            "torch": "pip install torch", "jax": "pip install jax"}


def default_namespace():
    """The array namespace selected by ``NTKREF_BACKEND`` (NumPy by default)."""
    name = backend_name()
    try:
        return importlib.import_module(_MODULES[name])
    except ImportError as exc:
        raise BackendError(
            f"{ENV_VAR}={name!r} selects a backend whose package cannot be imported "
            f"({exc}); install it ({_INSTALL.get(name, f'pip install {name}')}) or choose one of "
            f"{', '.join(BACKENDS)}."
        ) from exc


def _cuda_ordinal(value):
    text = value[5:] if value.startswith("cuda:") else value
    if not text.isdigit():
        raise BackendError(
            f"{DEVICE_VAR}={value!r} is not a CUDA device; use an ordinal such as '0' or 'cuda:0'."
        )
    return int(text)


def default_device():
    """The device named by ``NTKREF_DEVICE`` for the default namespace (``None``: the library's default).

    Raises :class:`BackendError` naming the variable if the value is not a device of that backend.
    """
    value = os.environ.get(DEVICE_VAR, "").strip()
    if not value:
        return None
    name = backend_name()
    xp = default_namespace()
    if name == "array_api_strict":
        try:
            return xp.Device(value)
        except ValueError as exc:
            raise BackendError(
                f"{DEVICE_VAR}={value!r} is not a device of array_api_strict; choose CPU_DEVICE, device1 or device2."
            ) from exc
    if name == "numpy":
        if value.lower() != "cpu":
            raise BackendError(f"{DEVICE_VAR}={value!r}: the NumPy backend has only the device 'cpu'.")
        return "cpu"
    if name == "cupy":
        import cupy

        ordinal = _cuda_ordinal(value)
        count = cupy.cuda.runtime.getDeviceCount()
        if ordinal >= count:
            raise BackendError(f"{DEVICE_VAR}={value!r}: CuPy sees {count} CUDA device(s).")
        return cupy.cuda.Device(ordinal)
    if name == "torch":
        import torch

        try:
            dev = torch.device(value if not value.isdigit() else f"cuda:{value}")
            torch.empty(0, device=dev)
        except (RuntimeError, AssertionError) as exc:
            raise BackendError(f"{DEVICE_VAR}={value!r} is not a usable PyTorch device: {exc}") from exc
        return dev
    if name == "jax":
        import jax

        devices = jax.devices()
        if not value.isdigit() or int(value) >= len(devices):
            raise BackendError(f"{DEVICE_VAR}={value!r}: use an index into jax.devices() ({len(devices)} device(s)).")
        return devices[int(value)]
    raise BackendError(f"{DEVICE_VAR}={value!r}: the {name} backend takes no device setting; unset {DEVICE_VAR}.")


def launched_as_the_command():
    """Whether this process is the ``ntkref`` command (the console script, or ``python -m ntkref.cli``)."""
    import os
    import re
    import sys

    if sys.argv and re.sub(r"(-script\.pyw?|\.exe)?$", "", os.path.basename(sys.argv[0] or "")) == "ntkref":
        return True
    args = list(getattr(sys, "orig_argv", ()))[1:]  # the interpreter's own options, then -m MODULE
    k = 0
    while k < len(args):
        a = args[k]
        if a == "-m":
            return k + 1 < len(args) and args[k + 1] == "ntkref.cli"
        if a.startswith("-m"):
            return a[2:] == "ntkref.cli"
        if a in ("-W", "-X", "--check-hash-based-pycs"):
            k += 2
            continue
        if a == "-c" or not a.startswith("-"):  # a command or a script: not -m
            return False
        k += 1
    return False


def check_environment():
    """Resolve ``NTKREF_BACKEND`` and ``NTKREF_DEVICE`` now; raise :class:`BackendError` if either is unusable.

    Called when ``ntkref`` is imported, so a typo fails at once even in programs that pass arrays.  For
    CuPy, the device ``NTKREF_DEVICE`` names is also made the current one (CuPy allocates the results of
    its operations on the current device).
    """
    default_namespace()
    dev = default_device()
    if dev is not None and backend_name() == "cupy":
        dev.use()


def creation_target(xp=None, device=None):
    """(namespace, device) for arrays a function creates from nothing (seeds, host draws, lists).

    ``xp=None`` is the default namespace (``NTKREF_BACKEND``); ``device=None`` is ``NTKREF_DEVICE``'s device
    whenever the namespace is the default one (``None``, the library's own default, otherwise).
    """
    default_xp = default_namespace()
    xp = default_xp if xp is None else xp
    if device is None and xp is default_xp:
        device = default_device()
    return xp, device


def asarray(x, dtype=None, *, like=None):
    """``x`` as an array of the namespace of ``like`` (on its device), or of the default namespace and device.

    The one way ntkref creates arrays from Python lists, scalars or host data, so that
    ``NTKREF_BACKEND``/``NTKREF_DEVICE`` decide where they live.  NumPy input is copied to the device
    explicitly; nothing is converted back.
    """
    if like is not None and is_array(like):
        xp = array_api_compat.array_namespace(like)
        return xp.asarray(x, dtype=dtype, device=device_of(like))
    xp = default_namespace()
    return xp.asarray(x, dtype=dtype, device=default_device())


def description():
    """A short text naming the default backend and device, for reports and ``--json`` output."""
    dev = default_device()
    name = backend_name()
    if dev is None:
        xp = default_namespace()
        try:
            dev = device_of(xp.zeros(0))
        except Exception:  # pragma: no cover - namespaces without a device notion
            dev = "default"
    text = f"{name} on {dev}"
    if name == "cupy":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(getattr(dev, "id", cupy.cuda.Device().id))
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        text += f" ({gpu})"
    return text


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


def host_float64(x):
    """An explicit host copy of an array (any supported namespace, or a list/scalar) as NumPy float64."""
    import numpy as np

    return np.asarray(to_numpy(x), dtype=np.float64)


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
