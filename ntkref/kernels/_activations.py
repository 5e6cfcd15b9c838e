r"""The activations of :func:`.fc`: :class:`Activation` (σ with σ′), the named ones in :data:`ACTIVATIONS`, and
the parsing of ``activation``, ``W_std`` and ``b_std``.

ReLU and erf have the closed-form dual activations of :mod:`._layers` (the module docstring of :mod:`._fc`,
'Dual activations'); any other σ (tanh, a user's :class:`Activation`) is integrated there by Gauss–Hermite
quadrature, which needs σ′ as well as σ.  The per-layer standard deviations are W₀, …, W_L and b₀, …, b_L
(the readout last), seed 004 eqs. (6)–(8) in neural-tangents' convention.

``PI`` is also used by :mod:`._layers`; ``per_layer`` and ``resolve_activation`` by :func:`._fc.prepare`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .._lib.backend import namespace
from .._lib.compat import erf as _erf
from .._lib.validation import InvalidParameterError, check_real

__all__ = ["Activation", "ACTIVATIONS"]

PI = math.pi


@dataclass(frozen=True)
class Activation:
    """An elementwise activation σ with its derivative σ', for quadrature.

    Both callables take and return arrays of the namespace in use.

    Examples
    --------
    σ = sin, integrated by quadrature; E[sin(u)²] = (1 − e^{−2q})/2 for u ~ N(0, q), here q = x·x/d = 1:

    >>> import numpy as np
    >>> from ntkref.kernels import Activation, fc_diagonal
    >>> sin = Activation(np.sin, np.cos, name="sin")
    >>> k = fc_diagonal(np.array([[1.0, 1.0]]), activation=sin)
    >>> print(f"{float(k.nngp[0]):.6f} {(1 - np.exp(-2.0)) / 2:.6f}")
    0.432332 0.432332
    """

    fn: object
    derivative: object
    name: str = "custom"

    def __post_init__(self):
        for field_name in ("fn", "derivative"):
            value = getattr(self, field_name)
            if not callable(value):
                raise InvalidParameterError(
                    f"The {field_name!r} parameter of Activation must be a callable taking and returning arrays. "
                    f"Got {value!r} instead."
                )
        if not isinstance(self.name, str):
            raise InvalidParameterError(f"The 'name' parameter of Activation must be a str. Got {self.name!r} instead.")


def _tanh(x):
    return namespace(x).tanh(x)


def _dtanh(x):
    xp = namespace(x)
    return 1 - xp.tanh(x) ** 2


def _relu(x):
    xp = namespace(x)
    return xp.maximum(x, xp.zeros_like(x))


def _drelu(x):
    xp = namespace(x)
    return xp.astype(x > 0, x.dtype)


def _erf_fn(x):
    return _erf(x, namespace(x))


def _derf(x):
    xp = namespace(x)
    return (2 / math.sqrt(PI)) * xp.exp(-(x * x))


ACTIVATIONS = {
    "relu": Activation(_relu, _drelu, "relu"),
    "erf": Activation(_erf_fn, _derf, "erf"),
    "tanh": Activation(_tanh, _dtanh, "tanh"),
}
_CLOSED_FORM = ("relu", "erf")


def per_layer(value, name, n_layers, *, low, closed, high=None, caller="fc"):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        values = [value] * n_layers
    else:
        try:
            values = list(value)
        except TypeError:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must be a real number or a sequence of {n_layers} "
                f"(one per layer including the readout). Got {value!r} instead."
            ) from None
        if len(values) != n_layers:
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller} must have one value per layer including the readout "
                f"({n_layers} for this depth). Got {len(values)} values."
            )
    # ``high``: √(largest float)/4, so that W², b² and their products with a variance stay finite
    closed = "both" if high is not None and closed == "left" else closed
    return [check_real(v, name, caller=caller, low=low, high=high, closed=closed) for v in values]


def resolve_activation(activation):
    if isinstance(activation, Activation):
        return activation, None
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise InvalidParameterError(
                f"The 'activation' parameter of fc must be one of {', '.join(map(repr, ACTIVATIONS))} "
                f"or an Activation(fn, derivative). Got {activation!r} instead."
            )
        return ACTIVATIONS[activation], activation if activation in _CLOSED_FORM else None
    raise InvalidParameterError(
        f"The 'activation' parameter of fc must be a name or an Activation(fn, derivative). Got {activation!r} instead."
    )
