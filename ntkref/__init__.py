"""ntkref: a reference implementation of wide-network kernel mathematics.

Neural tangent kernels, the equivalence of wide networks with ℓ2-regularized
kernel machines, their training dynamics, gap bounds and certificates — on any
array-API namespace (NumPy by default; ``NTKREF_BACKEND`` selects another).
"""
from ._backend import BACKENDS, BackendError, backend_name, default_namespace, to_numpy
from ._validation import InvalidParameterError

__version__ = "0.1.0"

__all__ = ["BACKENDS", "BackendError", "InvalidParameterError", "backend_name", "default_namespace", "to_numpy"]
