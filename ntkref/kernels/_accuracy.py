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


def certified_bound(family, *, depth, activation="relu", dtype="float64", d=None, W_std=1.0, b_std=0.0):
    """ntkref's certified error bound for one of its reference kernels, as ``(bound, source)``.

    ``bound`` is in the scaled measure |K − K_exact| / √(K(x,x)K(x′,x′)), for every entry; ``source`` names the
    tests that prove it (or says it is extrapolated, or that there is none: bound 0, the user's tolerance
    applies).  ``family``: ``"fc"`` (``activation`` "relu" or "erf"; quadrature activations have no bound) or
    ``"cntk"``; ``dtype``: the dtype the reference is computed in.  Used by ``ntkref.testing``'s verdicts and
    ``ntkref compare``: each entry's tolerance is max(the user's, this bound).

    Relation to the proof: without ``d`` these values are *observed* constants (worst errors against 50-digit
    mpmath), not theorems.  ``kernels.fc(..., error_bound=True)`` returns a *proven* per-entry bound instead,
    and the proven mode below returns that analysis' a-priori constant (≈ 1.6e-13 at depth 3, d = 100,
    float64, no biases; ≈ 3.7e-13 with biases).  It is larger than 1e-13 because it covers every input (the
    worst-case dot-product rounding γ_d grows like d), while the observed errors stay near 1e-16.  The tested
    values are not changed by the proof (the oracle's default thresholds depend on them).

    **Proven mode** (``d`` given: the number of input features): for the FC ReLU kernels the bound returned is
    the proven a-priori constant of that analysis for this configuration (``depth``, ``d``, ``W_std``, ``b_std``
    — numbers or one value per layer, readout included — and ``dtype``), max over NNGP and NTK: every entry of
    ``fc`` is within bound·√(K(x,x)K(x′,x′)) of the exact kernel of the float inputs, a theorem with the
    assumptions listed in ``kernels/_rounding.py`` (library atan/atan2/sin/cos/hypot within 4 ulp, no TF32), for
    rows with √Σ_L(x,x) ≥ 2^-400 (float32: 2^-40) that, with biases, are also *regular*: zero, or of computed
    norm ≥ 2^-1000 (float32: 2^-120) with the scales before the first non-zero bias above that too (every such
    row when the first layer has b_std > 0).  Smaller rows have a per-entry bound only
    (``fc(..., error_bound=True)``).  The source starts with "proven".  "``fc``" means its array-API path, the
    one the analysis is of: NumPy, PyTorch, and CuPy with ``error_bound=True`` or ``engine="array_api"`` — not
    the fused CUDA kernel that CuPy's default engine uses for the bias-free ReLU (it may contract a·b + c into
    one fused multiply-add, outside the analysis).  A configuration the analysis does not cover (float32 with
    large d or depth, b_std with a square below the smallest normal number, a rounding term or the constant
    itself above 1e-3) raises NotImplementedError naming the configuration; erf (whose proven bound depends on
    the rows: use ``fc(..., error_bound=True)`` per entry), quadrature activations and the CNTK have no proven
    constant and raise NotImplementedError naming ``d``.

    Examples
    --------
    >>> from ntkref.testing import certified_bound
    >>> certified_bound("fc", depth=3)[0]                      # tested: worst observed against mpmath
    1e-13
    >>> b, src = certified_bound("fc", depth=3, d=100)         # proven for every input, W_std = 1, no biases
    >>> src.split(":")[0], bool(1e-13 < b < 2e-13)
    ('proven', True)
    >>> bool(certified_bound("fc", depth=3, d=784, b_std=0.1)[0] < 1.2e-12)
    True
    """
    if d is not None:
        return _proven_constant(family, depth, activation, dtype, d, W_std, b_std)
    family = check_option(family, "family", ("fc", "cntk"), caller="certified_bound")
    depth = check_int(depth, "depth", caller="certified_bound", low=0 if family == "fc" else 1)
    dtype = _dtype_name(dtype)
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


def _proven_constant(family, depth, activation, dtype, d, W_std, b_std):
    """certified_bound's proven mode (its docstring): the a-priori constants of kernels/_rounding.py and
    kernels/_rounding_bias.py."""
    from . import _rounding, _rounding_bias
    from ._activations import per_layer
    from ._layers import scale_limit

    family = check_option(family, "family", ("fc", "cntk"), caller="certified_bound")
    d = check_int(d, "d", caller="certified_bound", low=1)
    if family == "cntk":
        raise NotImplementedError("The 'd' parameter of certified_bound asks for a proven constant; the CNTK has "
                                  "none (its bound is tested: call certified_bound('cntk', depth=...) without d).")
    depth = check_int(depth, "depth", caller="certified_bound", low=0)
    dtype_name = _dtype_name(dtype)
    name = activation if isinstance(activation, str) else getattr(activation, "name", None)
    if name != "relu":
        raise NotImplementedError(
            f"The 'd' parameter of certified_bound asks for a proven a-priori constant, which exists for the ReLU "
            f"kernels only, not for activation {name!r} (erf's proven bound depends on the rows: use "
            "kernels.fc(..., error_bound=True), which returns it per entry; quadrature activations have none).")
    limit = scale_limit(np.float64 if dtype_name == "float64" else np.float32, npx)  # as fc (it refuses more)
    Ws = per_layer(W_std, "W_std", depth + 1, low=0.0, closed="left", high=limit, caller="certified_bound")
    bs = per_layer(b_std, "b_std", depth + 1, low=0.0, closed="left", high=limit, caller="certified_bound")
    config = f"depth={depth}, d={d}, W_std={W_std!r}, b_std={b_std!r}, dtype={dtype_name}"
    try:
        if any(b != 0.0 for b in bs):
            coefs = _rounding_bias.bias_coefficients(d, Ws, bs, depth, dtype_name)
            where = "kernels/_rounding_bias.py (and regular rows: zero or of computed norm >= 2^-1000, float32 2^-120)"
        else:
            coefs = _rounding.relu_coefficients(d, Ws, depth, dtype_name)
            where = "kernels/_rounding.py"
    except (NotImplementedError, InvalidParameterError) as e:
        reason = str(e).replace("The 'error_bound' parameter of fc: ", "")
        raise type(e)(f"certified_bound: no proven constant for {config}: {reason}") from None
    bound = max(c.scaled for c in coefs.values())
    if not bound <= 1e-3:  # finite, and small enough to mean something (the analysis' first-order regime)
        raise NotImplementedError(
            f"certified_bound: the proven constant for {config} is {bound:.3g} (absolute rounding terms of the "
            "W_std/b_std scales dominate over the row floor): no useful a-priori constant; use "
            "kernels.fc(..., error_bound=True), whose per-entry bound applies to the actual rows.")
    floor = "2^-400" if dtype_name == "float64" else "2^-40"
    return bound, (f"proven: the a-priori constant of the rounding analysis of kernels.fc, relu, {dtype_name}, "
                   f"depth {depth}, d = {d}, for rows with sqrt(NNGP(x,x)) >= {floor}, theorem and assumptions in "
                   f"{where}")


def _dtype_name(dtype):
    try:
        dtype_name = np.dtype(dtype).name  # "float32", np.float32, np.dtype("float32")
    except TypeError:
        dtype_name = str(dtype).split(".")[-1]  # another library's dtype, e.g. torch.float32
    return check_option(dtype_name, "dtype", ("float64", "float32"), caller="certified_bound")


def cntk_bound(depth, dtype="float64"):
    """(bound, source): ntkref's scaled error bound for ``kernels.cntk`` (module docstring)."""
    if np.dtype(dtype) != np.float64:
        return 0.0, "kernels.cntk in float32: no certified bound (the user's tolerance applies)"
    src = "kernels.cntk, float64: 1e-13 (tests/test_cntk.py against 50-digit mpmath on adversarial images, depths 1-4)"
    if depth > 4:
        return CNTK_BOUND * depth / 4, src + f"; depth {depth} > 4: (depth/4)·1e-13 (extrapolated, untested)"
    return CNTK_BOUND, src
