"""Parameter and array validation with messages that name the argument.

Errors are :class:`InvalidParameterError`, which subclasses both ``ValueError``
and ``TypeError`` (the scikit-learn convention), so callers may catch either.
"""
from __future__ import annotations

import math
import numbers

from .backend import default_device, default_namespace, device_of, is_array, namespace


class InvalidParameterError(ValueError, TypeError):
    """A parameter or an input array is invalid; the message names it."""


def _fail(name, caller, must, got):
    where = f" of {caller}" if caller else ""
    raise InvalidParameterError(f"The {name!r} parameter{where} must be {must}. Got {got!r} instead.")


def check_real(value, name, *, caller=None, low=None, high=None, closed="both", allow_inf=False):
    """A finite real scalar in the interval given by ``low``/``high`` and ``closed``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:  # 0-d arrays of any namespace
            if getattr(value, "shape", None) == ():
                value = float(value)
            else:
                raise TypeError
        except TypeError:
            _fail(name, caller, "a real number", value)
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        _fail(name, caller, "a finite real number", value)
    lo_ok = low is None or (value >= low if closed in ("both", "left") else value > low)
    hi_ok = high is None or (value <= high if closed in ("both", "right") else value < high)
    if not (lo_ok and hi_ok):
        lb = "[" if closed in ("both", "left") else "("
        rb = "]" if closed in ("both", "right") else ")"
        lo = "-inf" if low is None else repr(low)
        hi = "inf" if high is None else repr(high)
        _fail(name, caller, f"a real number in the range {lb}{lo}, {hi}{rb}", value)
    return value


def check_int(value, name, *, caller=None, low=None, high=None):
    """An integer (not bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(name, caller, "an int", value)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        _fail(name, caller, f"an int in the range [{lo}, {hi}]", value)
    return value


def check_option(value, name, options, *, caller=None):
    if value not in options:
        _fail(name, caller, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def float_dtype(x, xp, dtype=None):
    """The floating dtype to compute in: ``dtype`` if given, else x's if floating, else float64."""
    if dtype is not None:
        if isinstance(dtype, str) and dtype in ("float64", "float32"):
            return getattr(xp, dtype)
        if dtype not in (xp.float64, xp.float32):
            raise InvalidParameterError(f"The 'dtype' parameter must be float32 or float64. Got {dtype!r} instead.")
        return dtype
    if xp.isdtype(x.dtype, "real floating"):
        return x.dtype
    return xp.float64


def check_array(x, name, *, caller=None, ndim=None, xp=None, dtype=None, finite=True, shape=None, like=None,
                device=None):
    """Convert ``x`` to a floating array of namespace ``xp`` and check it.

    Checks ``ndim`` (an int or a tuple of allowed values), an exact ``shape``
    (``None`` entries free), and finiteness.  Integer and boolean inputs become
    float64; complex inputs are refused.  A Python list or scalar becomes an
    array on ``device``, or on the device of ``like`` (the function's other
    input), else on ``NTKREF_DEVICE``'s device if ``xp`` is the default namespace.
    """
    if getattr(x, "_ntkref_checked_gram", False):  # machines.CheckedGram where only an array is taken
        raise InvalidParameterError(
            f"The {name!r} parameter{' of ' + caller if caller else ''} is a machines.CheckedGram, which only the "
            "machines and kkt functions take; pass its array, G.K."
        )
    if xp is None:
        xp = namespace(x)
    if x is None:
        raise InvalidParameterError(f"The {name!r} parameter{' of ' + caller if caller else ''} must be an array. Got None instead.")
    try:
        if is_array(x):
            arr = xp.asarray(x)
        else:
            # Python lists/scalars: created on the inputs' (else the default) device, floats straight in the target dtype
            # (PyTorch would otherwise round Python floats to float32 first).
            arr = _asarray_host(x, xp, dtype, device if device is not None else _device_for(xp, like))
    except Exception as exc:
        mixed = ""
        if is_array(x):  # an array that the others' namespace refuses: another array library or device
            mixed = (f" (it is a {type(x).__module__}.{type(x).__name__}, while the function computes in "
                     f"{getattr(xp, '__name__', xp)}: inputs from different array libraries or devices are not "
                     f"converted implicitly; move them to one first)")
        raise InvalidParameterError(f"The {name!r} parameter could not be converted to an array{mixed}: {exc}") from exc
    if like is not None and is_array(x) and is_array(like) and device_of(arr) != device_of(like):
        # e.g. a NumPy array next to arrays on another device: converted, it would sit on the default device
        raise InvalidParameterError(
            f"The {name!r} parameter{' of ' + caller if caller else ''} is on device {device_of(arr)!r} "
            f"({type(x).__module__}.{type(x).__name__}) while the function's other inputs are on "
            f"{device_of(like)!r}: inputs on different devices are not moved implicitly; move them to one first."
        )
    if xp.isdtype(arr.dtype, "complex floating"):
        raise InvalidParameterError(f"The {name!r} parameter must be real; got dtype {arr.dtype}.")
    if not xp.isdtype(arr.dtype, ("real floating", "integral", "bool")):
        arr = _numeric_host(arr, name, caller, xp)
    target = float_dtype(arr, xp, dtype)
    if arr.dtype != target:
        arr = xp.astype(arr, target)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise InvalidParameterError(
                f"The {name!r} parameter{' of ' + caller if caller else ''} must have "
                f"{' or '.join(map(str, allowed))} dimension(s); got shape {tuple(arr.shape)}."
            )
    if shape is not None:
        if len(shape) != arr.ndim or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise InvalidParameterError(
                f"The {name!r} parameter{' of ' + caller if caller else ''} must have shape {want}; "
                f"got {tuple(arr.shape)}."
            )
    if finite and arr.size != 0 and not bool(xp.all(xp.isfinite(arr))):
        raise InvalidParameterError(
            f"The {name!r} parameter{' of ' + caller if caller else ''} contains NaN or infinite values."
        )
    return arr


def _numeric_host(arr, name, caller, xp):
    """A NumPy object/string array: its values as float64 if they are all real numbers, else an error naming
    the parameter (NumPy's own message, "could not convert string to float", names nothing)."""
    import numpy as np

    where = f" of {caller}" if caller else ""
    if isinstance(arr, np.ndarray) and arr.dtype.kind == "O":
        try:
            host = arr.astype(np.float64)
        except (TypeError, ValueError):
            host = None
        if host is not None and not any(isinstance(v, (complex, np.complexfloating)) for v in arr.flat):
            return xp.asarray(host)
    raise InvalidParameterError(
        f"The {name!r} parameter{where} must be an array of real numbers; got dtype {arr.dtype}."
    )


def _device_for(xp, like):
    if like is not None and is_array(like):
        return device_of(like)
    try:
        same = xp is default_namespace()
    except Exception:  # noqa: BLE001 - an unusable NTKREF_BACKEND is reported at import, not here
        same = False
    return default_device() if same else None


def _asarray_host(x, xp, dtype, device):
    import numpy as np

    host = np.asarray(x)  # x is host data (a Python list or scalar, never a device array: see check_array)
    if host.dtype.kind in "fiub":
        want = np.float32 if (dtype in ("float32",) or dtype is getattr(xp, "float32", None)) else None
        if want is None and host.dtype.kind == "f":
            want = host.dtype
        host = host.astype(want if want is not None else np.float64)
        target = xp.float32 if host.dtype == np.float32 else xp.float64
        return xp.asarray(host, dtype=target, device=device)
    return xp.asarray(host, device=device)


def check_square(K, name, caller):
    """Refuse a 2-D array that is not square (n, n) with n ≥ 1; returns n."""
    n, m = K.shape
    if n != m:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a square (n, n) matrix; got shape {(n, m)}.")
    if n == 0:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have at least one row.")
    return n


def check_labels(y, name="y", *, caller=None, xp=None, like=None):
    """Binary labels: every entry exactly -1 or +1."""
    y = check_array(y, name, caller=caller, ndim=1, xp=xp, like=like)
    xp = namespace(y)
    if not bool(xp.all((y == 1) | (y == -1))):
        raise InvalidParameterError(
            f"The {name!r} parameter{' of ' + caller if caller else ''} must contain only -1 and +1 labels."
        )
    return y
