"""ntkref: a reference implementation of wide-network kernel mathematics.

Neural tangent kernels, the equivalence of wide networks with ℓ2-regularized
kernel machines, their training dynamics, gap bounds and certificates — on any
array-API namespace (NumPy by default; ``NTKREF_BACKEND`` selects another).
"""
from ._lib.api import set_public_module
from ._lib.backend import BACKENDS, BackendError, backend_name, check_environment, default_namespace, to_numpy
from ._lib.backend import launched_as_the_command
from ._lib.validation import InvalidParameterError


# NTKREF_BACKEND / NTKREF_DEVICE are checked now: a typo or a missing package is an error at import,
# not a silent NumPy run in programs that happen to pass NumPy arrays.  The one exception is the `ntkref`
# command itself: it imports ntkref to build its parser, so that `--help` and `--version` still work and
# every other use is one line `ntkref: error: ...` with exit status 2 (ntkref.cli.main checks the
# environment again after parsing).
try:
    check_environment()
except BackendError:
    if not launched_as_the_command():
        raise

# The one place the version is written: pyproject.toml's dynamic version reads this literal from the source
# without importing ntkref, and CHANGELOG.md has an entry for it (tests/test_packaging.py checks all three).
__version__ = "0.1.0"

_SUBMODULES = (
    "adversarial", "bounds", "certify", "cli", "data", "datasets", "distributions", "dynamics", "enclosures",
    "equivalence", "golden", "intervals", "kernels", "kkt", "krr", "losses", "machines", "margins", "mean_field", "nets", "regularizers",
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
