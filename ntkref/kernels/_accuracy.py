r"""ntkref's stated accuracy of its kernels, and the scaled error measure it is stated in.

The measure (:func:`kernel_error`): for an entry with reference value R = K_ref(x, x′),

.. math::  e = \frac{|K - R|}{\sqrt{K_{\rm ref}(x, x)\,K_{\rm ref}(x', x')}} ,

the error relative to the Cauchy–Schwarz bound |R| ≤ √(K(x,x)K(x′,x′)) of a PSD kernel: scale free and
meaningful where R = 0.

The accuracy (:func:`certified_bound`, :data:`FC_BOUND`, :data:`CNTK_BOUND`): the worst scaled errors observed
against a 50-digit mpmath evaluation on adversarial batteries (input norms 1e-300 to ~1e150, near-parallel,
antiparallel and orthogonal rows), stated as bounds:

- ``kernels.fc`` (ReLU, erf closed forms), depths 0–3: 1e-13 in float64, 1e-5 in float32 —
  tests/test_kernels.py (test_relu_against_mpmath_on_adversarial_rows, test_relu_rectangular_against_mpmath,
  test_erf_against_mpmath, test_ends_of_the_range_against_mpmath; test_float32_accuracy);
- ``kernels.cntk``, depths 1–4: 1e-13 in float64 — tests/test_cntk.py
  (test_cntk_within_1e13_of_mpmath_on_adversarial_images, test_cntk_within_1e13_of_mpmath_sweep);
- beyond those depths the bound grows linearly with depth, extrapolated and untested (the source text says so);
  quadrature activations and the CNTK in float32 have none (bound 0: the user's tolerance applies).

Used by the oracle (:mod:`ntkref.testing`: its verdicts judge each entry with max(user tolerance, this bound),
and :func:`kernel_error_unchecked` is its measure) and by the CLI (``ntkref compare``).  Public as
``ntkref.testing.kernel_error``, ``ntkref.testing.certified_bound`` and ``ntkref.cli.kernel_error``; kept
apart from ``ntkref.testing`` because that needs hypothesis and the CLI must not.  Host-side tooling: the
results are NumPy/Python values by design.
"""
from __future__ import annotations

import array_api_compat.numpy as npx
import numpy as np  # host-side measure: a candidate's error is reported as NumPy values by design

from .._lib.backend import is_array, to_numpy
from .._lib.validation import InvalidParameterError, check_array, check_int, check_option

__all__ = ["kernel_error", "kernel_error_unchecked", "certified_bound", "cntk_bound", "FC_BOUND", "CNTK_BOUND"]


# ---------------------------------------------------------------------------------------------
# the scaled error measure
# ---------------------------------------------------------------------------------------------
def kernel_error(candidate_K, reference_K, reference_diag1, reference_diag2=None):
    r"""Normalised kernel error e = |K − R| / √(R(x,x)·R(x′,x′)), entrywise.

    The scale √(R(x,x)R(x′,x′)) bounds |R| for a PSD kernel (Cauchy–Schwarz), so e is scale free and
    meaningful where R = 0.  Where the scale is 0 (a zero row without bias): e = 0 if K equals R, else inf.
    Non-finite candidate values give inf (the candidate is what is measured); the reference must be finite.
    Arrays of any namespace are copied to the host explicitly (this is report tooling: the result is NumPy).

    Parameters
    ----------
    candidate_K, reference_K : arrays of shape (n1, n2)
    reference_diag1 : array of shape (n1,)
        R(x, x) for the rows; ``reference_diag2`` (shape (n2,), default ``reference_diag1``) for the columns.

    Returns
    -------
    (err, scale) : NumPy arrays of shape (n1, n2)
    """
    K = _host_checked(candidate_K, "candidate_K", 2, finite=False)
    R = _host_checked(reference_K, "reference_K", 2)
    d1 = _host_checked(reference_diag1, "reference_diag1", 1)
    d2 = d1 if reference_diag2 is None else _host_checked(reference_diag2, "reference_diag2", 1)
    if K.shape != R.shape:
        raise InvalidParameterError(f"The 'candidate_K' parameter of kernel_error must have the shape of "
                                    f"'reference_K', {R.shape}; got {K.shape}.")
    if d1.shape[0] != R.shape[0]:
        raise InvalidParameterError(f"The 'reference_diag1' parameter of kernel_error must have {R.shape[0]} "
                                    f"entries (the rows of 'reference_K'); got {d1.shape[0]}.")
    if d2.shape[0] != R.shape[1]:
        name = "reference_diag1" if reference_diag2 is None else "reference_diag2"
        raise InvalidParameterError(f"The {name!r} parameter of kernel_error must have {R.shape[1]} entries "
                                    f"(the columns of 'reference_K'); got {d2.shape[0]}.")
    return kernel_error_unchecked(K, R, d1, d2)


def _host_checked(x, name, ndim, finite=True):
    if is_array(x):
        x = to_numpy(x)  # an explicit host copy (report tooling works on NumPy)
    return np.asarray(check_array(x, name, caller="kernel_error", ndim=ndim, xp=npx, dtype=npx.float64,
                                  finite=finite, device="cpu"))


def kernel_error_unchecked(K, R, reference_diag1, reference_diag2):
    """kernel_error on checked float64 NumPy arrays (the checkers' measure: no validation)."""
    K = np.asarray(K, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    s1 = np.sqrt(np.maximum(np.asarray(reference_diag1, dtype=np.float64), 0.0))
    s2 = s1 if reference_diag2 is None else np.sqrt(np.maximum(np.asarray(reference_diag2, dtype=np.float64), 0.0))
    scale = s1[:, None] * s2[None, :]  # product of square roots: no overflow for norms up to 1e150
    with np.errstate(all="ignore"):
        diff = np.abs(K - R)
        err = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))
    err = np.where(np.isfinite(K), err, np.inf)
    return np.where(np.isnan(err), np.inf, err), scale


# ---------------------------------------------------------------------------------------------
# ntkref's own error bounds
# ---------------------------------------------------------------------------------------------
FC_BOUND = {"float64": 1e-13, "float32": 1e-5}
"""Certified scaled error of ``kernels.fc`` (ReLU, erf closed forms) at depths 0–3: every entry within
bound·√(K(x,x)K(x′,x′)) of a 50-digit mpmath evaluation on adversarial rows (tests/test_kernels.py:
test_relu_against_mpmath_on_adversarial_rows, test_relu_rectangular_against_mpmath, test_erf_against_mpmath,
test_ends_of_the_range_against_mpmath; test_float32_accuracy for float32)."""

CNTK_BOUND = 1e-13
"""Certified scaled error of ``kernels.cntk`` in float64, depths 1–4: within 1e-13·√(K(x,x)K(x′,x′)) of a
50-digit mpmath evaluation on adversarial images (tests/test_cntk.py)."""


def certified_bound(family, *, depth, activation="relu", dtype="float64"):
    """ntkref's certified error bound for one of its reference kernels, as ``(bound, source)``.

    ``bound`` is in the scaled measure |K − K_exact| / √(K(x,x)K(x′,x′)), for every entry; ``source`` names the
    tests that prove it (or says it is extrapolated, or that there is none: bound 0, the user's tolerance
    applies).  ``family``: ``"fc"`` (``activation`` "relu" or "erf"; quadrature activations have no bound) or
    ``"cntk"``; ``dtype``: the dtype the reference is computed in.  Used by ``ntkref.testing``'s verdicts and
    ``ntkref compare``: each entry's tolerance is max(the user's, this bound).

    Relation to the proof: these values are *observed* constants (worst errors against 50-digit mpmath), not
    theorems.  ``kernels.fc(..., error_bound=True)`` returns a *proven* per-entry bound instead (ReLU with or
    without biases): its a-priori scaled constants are ``kernels._rounding.scaled_bound(depth, d, dtype)``
    (no biases; ≈ 1.6e-13 at depth 3, d = 100, float64) and ``kernels._rounding_bias.bias_scaled_bound`` (with
    biases; ≈ 3.8e-13 at depth 3, d = 100).  They are larger than 1e-13 because they cover every input (the
    worst-case dot-product rounding γ_d grows like d), while the observed errors stay near 1e-16.  The default
    values here are not changed by the proof (thresholds elsewhere depend on them).
    """
    family = check_option(family, "family", ("fc", "cntk"), caller="certified_bound")
    depth = check_int(depth, "depth", caller="certified_bound", low=0 if family == "fc" else 1)
    try:
        dtype_name = np.dtype(dtype).name  # "float32", np.float32, np.dtype("float32")
    except TypeError:
        dtype_name = str(dtype).split(".")[-1]  # another library's dtype, e.g. torch.float32
    dtype = check_option(dtype_name, "dtype", ("float64", "float32"), caller="certified_bound")
    if family == "fc":
        name = activation if isinstance(activation, str) else getattr(activation, "name", None)
        if name is None:
            raise InvalidParameterError("The 'activation' parameter of certified_bound must be an activation name "
                                        f"or a kernels.Activation. Got {activation!r} instead.")
        if name not in ("relu", "erf"):
            return 0.0, (f"no certified bound for activation {name!r} (Gauss-Hermite quadrature): the user's "
                         "tolerance applies")
        b = FC_BOUND.get(dtype, 0.0)
        src = (f"kernels.fc, {name}, {dtype}: {b:g} (tests/test_kernels.py against 50-digit mpmath on adversarial "
               "rows, depths 0-3)")
        if depth > 3:
            return b * depth / 3, src + f"; depth {depth} > 3: (depth/3)·{b:g} (extrapolated, untested)"
        return b, src
    return cntk_bound(depth, dtype)


def cntk_bound(depth, dtype="float64"):
    """(bound, source): ntkref's scaled error bound for ``kernels.cntk`` (module docstring)."""
    if np.dtype(dtype) != np.float64:
        return 0.0, "kernels.cntk in float32: no certified bound (the user's tolerance applies)"
    src = "kernels.cntk, float64: 1e-13 (tests/test_cntk.py against 50-digit mpmath on adversarial images, depths 1-4)"
    if depth > 4:
        return CNTK_BOUND * depth / 4, src + f"; depth {depth} > 4: (depth/4)·1e-13 (extrapolated, untested)"
    return CNTK_BOUND, src
