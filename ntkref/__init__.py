"""ntkref: a reference implementation of wide-network kernel mathematics.

Neural tangent kernels, the equivalence of wide networks with ℓ2-regularized
kernel machines, their training dynamics, gap bounds and certificates — on any
array-API namespace (NumPy by default; ``NTKREF_BACKEND`` selects another).
"""
from ._lib.api import set_public_module
from ._lib.backend import BACKENDS, BackendError, backend_name, check_environment, default_namespace, to_numpy
from ._lib.validation import InvalidParameterError

# NTKREF_BACKEND / NTKREF_DEVICE are checked now: a typo or a missing package is an error at import,
# not a silent NumPy run in programs that happen to pass NumPy arrays.
check_environment()

__version__ = "0.1.0"

_SUBMODULES = (
    "adversarial", "bounds", "certify", "cli", "data", "datasets", "distributions", "dynamics", "equivalence",
    "golden", "kernels", "kkt", "krr", "losses", "machines", "margins", "mean_field", "nets", "regularizers",
    "sparsity", "testing",
)

__all__ = ["BACKENDS", "BackendError", "InvalidParameterError", "backend_name", "default_namespace", "to_numpy",
           *_SUBMODULES]

# the submodules in __all__ are loaded lazily (__getattr__ below): only the names already here are faced
set_public_module(__name__, globals(), [name for name in __all__ if name in globals()])


def __getattr__(name):
    # `import ntkref; ntkref.kernels.fc(...)` without importing every submodule (and hypothesis) up front
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
