"""Helpers shared by the finite networks: where ``init`` puts parameters, inputs given as lists, and the memory
guards of ``init`` (the parameters, width² per hidden layer) and of the forward pass (n × width per layer)."""
from __future__ import annotations

import numpy as np

from .._lib.backend import creation_target, asarray, device_of, is_array
from .._lib.memory import check_bytes, check_memory
from .._lib.validation import InvalidParameterError


def init_target(xp, dtype, device, caller):
    """(namespace, floating dtype, device) in which ``init`` creates parameters.

    ``xp=None`` is the default namespace (``NTKREF_BACKEND``); ``device=None`` is then the default device
    (``NTKREF_DEVICE``), and also when ``xp`` is given and is the default namespace.  ``dtype`` (default
    float64) must be a real floating dtype of ``xp``: an integer dtype would truncate the N(0, 1) draws.
    """
    xp, device = creation_target(xp, device)
    if dtype is None:
        dtype = xp.float64
    elif isinstance(dtype, str) and dtype in ("float32", "float64"):
        dtype = getattr(xp, dtype)
    try:
        ok = bool(xp.isdtype(dtype, "real floating"))
    except (TypeError, ValueError, AttributeError):
        ok = False
    if not ok:
        raise InvalidParameterError(
            f"The 'dtype' parameter of {caller} must be a real floating dtype of the namespace "
            f"(float32 or float64); got {dtype!r}. Weights are N(0, 1) draws and an integer dtype would truncate them."
        )
    return xp, dtype, device


def host_draw(rng, shape, xp, dtype, device, scale=1.0):
    """N(0, scale²) draws on the host in float64 (reproducible across backends), copied explicitly to ``device``."""
    values = rng.standard_normal(shape)
    if scale != 1.0:
        values = scale * values
    return xp.asarray(np.ascontiguousarray(values), dtype=dtype, device=device)


def input_on(x, like):
    """``x`` for a network whose parameters are ``like``: arrays pass through unchanged (a foreign namespace or
    device is then reported by the computation), Python lists and scalars are created on ``like``'s device in
    its dtype instead of on the default device."""
    if x is None or is_array(x):
        return x
    try:
        return asarray(x, dtype=like.dtype, like=like)
    except Exception:  # let check_array report what is wrong with x
        return x


def check_pairs(params, caller, n_layers=None, name="params"):
    """``params`` as a list of ``(W, b)`` pairs (b may be None) of finite real arrays of one namespace;
    every error names ``name`` (and the layer) instead of failing deep inside the forward pass."""
    from .._lib.validation import check_array

    if not isinstance(params, (list, tuple)) or not all(
        isinstance(p, (list, tuple)) and len(p) == 2 for p in params
    ):
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be a list of (W, b) pairs, one per layer "
            f"(as returned by init). Got {type(params).__name__} instead."
        )
    if n_layers is not None and len(params) != n_layers:
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} has {len(params)} layers; this network has {n_layers} "
            f"(depth + readout)."
        )
    if not params:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} holds no layers.")
    if not is_array(params[0][0]):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must hold arrays; got {params[0][0]!r}.")
    for ell, (W, b) in enumerate(params):
        for part, v in (("W", W), ("b", b)):
            if v is None:
                continue
            if not is_array(v):
                raise InvalidParameterError(f"The {name!r} parameter of {caller}: layer {ell} {part} is not an array.")
            check_array(v, f"{name}[{ell}] {part}", caller=caller, xp=None)
    return params


def check_parameter_memory(n_params, largest, xp, dtype, device, caller, names):
    """The memory guard of ``init``: ``n_params`` parameters in ``dtype`` on ``device`` plus the host draw of the
    ``largest`` layer (float64, and its copy), refused before the first draw if they would not fit (an
    InvalidParameterError naming ``names``, the size parameters)."""
    itemsize = 4 if dtype == xp.float32 else 8
    needed = n_params * itemsize + 2 * largest * 8
    if needed < (1 << 24):
        return
    like = xp.zeros((0,), dtype=dtype, device=device)
    check_bytes(needed, f"The {n_params:.4g} parameters set by {names}", caller, xp, like,
                "ways out: smaller widths or channels (the empirical NTK approaches the infinite-width kernel at the rate "
                "O(1/√width), and ntkref.kernels computes that kernel directly), or dtype='float32'")


def check_activation_memory(n_entries, n_rows, caller, like, names, x_name="x"):
    """The memory guard of a forward/backward pass: ``n_entries`` floats of activations, pre-activations and
    backpropagated signals for ``n_rows`` inputs, refused before the pass if they would not fit."""
    check_memory(n_entries, f"The activations of {n_rows} rows of {x_name!r} through the layers set by {names}",
                 caller, like, ways_out=f"ways out: fewer rows of {x_name} per call (split it into blocks), smaller "
                                        "widths, or float32 parameters")


__all__ = ["init_target", "host_draw", "input_on", "device_of", "check_pairs", "check_parameter_memory",
           "check_activation_memory"]
