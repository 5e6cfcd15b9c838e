r"""Entry-by-entry kernel comparison and :func:`ntkref.testing.check_kernel` (the FC kernel checker).

Verdict per entry (i, j), with the scale s_ij = √(R(xᵢ,xᵢ)R(x′ⱼ,x′ⱼ)) and the scaled error e_ij = |K_ij − R_ij|/s_ij:

    fail  ⇔  K_ij not finite  or  |K_ij − R_ij| > τ_ij·s_ij + atol,   τ_ij = max(user tolerance, b_ij)

where b_ij is ntkref's certified bound for that entry (in the same scaled measure): the verdict never blames a
candidate for the reference's own error.  Each entry records which of the two applied.

Where the bounds come from:

- FC kernels, ReLU and erf closed forms: b = 1e-13 — tests/test_kernels.py checks every entry of ``kernels.fc``
  against a 50-digit mpmath evaluation within 1e-13·√(K(x,x)K(x′,x′)) (``test_relu_against_mpmath_on_adversarial_rows``
  at depths 0–3 with biases and per-layer W_std, ``test_relu_rectangular_against_mpmath``,
  ``test_erf_against_mpmath``, ``test_ends_of_the_range_against_mpmath`` at row norms 1e-300 … 3e153).  Beyond
  depth 3 the bound used is (depth/3)·1e-13 (the per-layer rounding adds up; untested there, stated as such in the
  report's ``bound_source``).  Other activations (quadrature): no certified bound (b = 0, the user's tolerance).
- CNTK: b = 1e-13 in float64 at depths 1–4 — tests/test_cntk.py checks ``kernels.cntk`` against a 50-digit mpmath
  evaluation on adversarial images (``ntkref.kernels._accuracy.cntk_bound``; (depth/4)·1e-13 beyond depth 4, stated
  as extrapolated; none in float32).
- A user ``reference=``: the ``reference_bound`` given (default 0).

Also used by :func:`ntkref.testing.check_cntk` (:class:`KernelComparison`, ``host``) and the machine checkers
(``mover``: host arrays to the namespace and device of the reference computation).
"""
from __future__ import annotations

import importlib
import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

from .. import kernels
from .._lib import backend as _backend
from .._lib.backend import _MODULES, ENV_VAR, BackendError, backend_name, default_namespace, to_numpy
from .._lib.backend import host_float64 as host  # explicit host copies (reports and references are NumPy)
from .._lib.validation import InvalidParameterError, check_option, check_real
from ..kernels._accuracy import certified_bound
from ..kernels._accuracy import kernel_error_unchecked as kernel_error  # unchecked: inputs come from the checker
from ._engine import (
    Recorder,
    battery_flag,
    check_convention_threshold,
    check_dtype,
    check_mode,
    drive,
    finish,
    ratio,
)
from ._report import Mismatch
from ._strategies import hard_inputs, kernel_inputs


def namespace_named(backend):
    """The array namespace ``backend`` names (``None``: the default one, ``NTKREF_BACKEND``)."""
    if backend is None:
        return default_namespace()
    if backend not in _MODULES:
        raise BackendError(f"backend={backend!r} is not a known backend; choose one of {', '.join(_MODULES)} "
                           f"(or set {ENV_VAR}).")
    try:
        return importlib.import_module(_MODULES[backend])
    except ImportError as exc:
        raise BackendError(f"backend={backend!r} cannot be imported: {exc}") from exc


def mover(backend):
    """Host (NumPy) → the namespace of the reference computation, explicitly.

    ``backend=None`` (or the one ``NTKREF_BACKEND`` names): the default namespace on the device ``NTKREF_DEVICE``
    names (:func:`ntkref._lib.backend.asarray`); another backend: that library's default device.  The oracle's inputs and
    reports stay NumPy; only the reference computation runs there, and its results come back with ``to_numpy``.
    """
    xp = namespace_named(backend)
    if backend is None or backend == backend_name():
        return lambda a: _backend.asarray(to_numpy(a))  # explicit host copy, then to the default device
    return lambda a: xp.asarray(to_numpy(a))




def fc_bound(activation, depth):
    """(bound, source) for ``kernels.fc`` computed in float64 (the oracle's reference), or (None, why not)."""
    bound, src = certified_bound("fc", depth=depth, activation=activation, dtype="float64")
    return (bound if bound > 0 else None), src


def fc_reference(which, params, backend):
    """reference(x1, x2) -> (K, diag1, diag2, bound) from ``kernels.fc`` (host float64 arrays)."""
    bound, _ = fc_bound(params["activation"], params["depth"])

    def reference(x1, x2, which=which):
        put = mover(backend)
        a1 = put(host(x1))
        a2 = None if x2 is None else put(host(x2))
        K = getattr(kernels.fc(a1, a2, get=which, **params), which)
        d1 = getattr(kernels.fc_diagonal(a1, **params), which)
        d2 = d1 if a2 is None else getattr(kernels.fc_diagonal(a2, **params), which)
        return host(K), host(d1), host(d2), bound

    return reference


def custom_reference(fn, bound=0.0):
    """reference(x1, x2) from a user callable: its diagonal from ``fn(x, None)`` (called with the actual inputs)."""

    def reference(x1, x2):
        K = host(fn(x1, x2))
        d1 = np.diagonal(host(fn(x1, None))).copy()
        d2 = d1 if x2 is None else np.diagonal(host(fn(x2, None))).copy()
        return K, d1, d2, bound

    return reference


class KernelComparison:
    """Compares a candidate with a reference on one input; see the module docstring for the verdict."""

    def __init__(self, candidate, reference, *, diag_tol, offdiag_tol, atol, pass_none, threshold,
                 to_candidate=None):
        self.candidate = candidate
        self.reference = reference
        self.diag_tol = diag_tol
        self.offdiag_tol = offdiag_tol
        self.atol = atol
        self.pass_none = pass_none
        self.threshold = threshold
        self.to_candidate = to_candidate or (lambda x: x)

    def call_candidate(self, x1, x2):
        a1 = self.to_candidate(x1)
        a2 = None if x2 is None else self.to_candidate(x2)
        out = self.candidate(a1, a2 if (a2 is not None or self.pass_none) else a1)
        return host(out)

    def evaluate(self, x1, x2, rec):
        """(failures, score) for the input (x1, x2): one Mismatch per failure kind (its worst entry)."""
        K_ref, d1, d2, bound = self.reference(x1, x2)
        inputs = {"x1": x1, "x2": x2}
        try:
            K = self.call_candidate(x1, x2)
        except Exception as exc:  # the candidate's own failure is a disagreement too
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "call",
                         f"candidate raised {type(exc).__name__}: {exc}", kind="exception")
            rec.failure(m)
            return [m], math.inf
        if K.shape != K_ref.shape:
            m = Mismatch(inputs, (), math.nan, math.nan, math.inf, 0.0, "shape",
                         f"candidate returned shape {K.shape}, expected {K_ref.shape}", kind="shape")
            rec.failure(m)
            return [m], math.inf
        err, scale = kernel_error(K, K_ref, d1, d2)
        diag_mask = np.zeros(K.shape, dtype=bool)
        if x2 is None:
            np.fill_diagonal(diag_mask, True)
        user = np.where(diag_mask, self.diag_tol, self.offdiag_tol)
        b = np.zeros(K.shape) if bound is None else np.broadcast_to(np.asarray(bound, dtype=np.float64), K.shape)
        from_ntkref = b > user
        tol = np.maximum(user, b)
        finite = np.isfinite(K)
        with np.errstate(all="ignore"):
            diff = np.abs(K - K_ref)
            allowed = np.where(scale > 0, tol * scale, 0.0) + self.atol  # |K − R| ≤ τ·√(R(x,x)R(x',x')) + atol
            bad = ~finite | (diff > allowed)
            ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.where(err > 0, np.inf, 0.0))
        kind = np.where(~bad, "ok", np.where(~finite, "non_finite",
                                             np.where(err > self.threshold, "convention", "precision")))
        rec.values(K.size, int(np.count_nonzero(from_ntkref)))
        for name, mask in (("diagonal", diag_mask), ("off-diagonal", ~diag_mask)):
            sel = mask & finite & np.isfinite(err)
            if sel.any():
                rec.error(name, float(np.max(err[sel])))
        for i, j in zip(*np.nonzero(~finite)):
            rec.bad_value((i, j), float(K[i, j]))
        if rec.record_entries:
            for i in range(K.shape[0]):
                for j in range(K.shape[1]):
                    rec.row((i, j, "diagonal" if diag_mask[i, j] else "off-diagonal", float(K[i, j]),
                             float(K_ref[i, j]), float(diff[i, j]), float(scale[i, j]), float(err[i, j]),
                             float(tol[i, j]), "ntkref" if from_ntkref[i, j] else "user", str(kind[i, j])))
        fails = []
        for k in ("non_finite", "convention", "precision"):
            mask = kind == k
            if not mask.any():
                continue
            r = np.where(mask, np.where(np.isfinite(ratio), ratio, 1e308), -1.0)
            i, j = np.unravel_index(int(np.argmax(r)), r.shape)
            m = Mismatch(inputs, (int(i), int(j)), float(K[i, j]), float(K_ref[i, j]), float(err[i, j]),
                         float(tol[i, j]), "diagonal" if diag_mask[i, j] else "off-diagonal",
                         f"scale √(K(x,x)K(x',x')) = {scale[i, j]:.6e}", kind=k,
                         tolerance_source="ntkref" if from_ntkref[i, j] else "user")
            rec.failure(m, int(np.count_nonzero(mask)))
            fails.append(m)
        finite_ratio = ratio[finite & np.isfinite(ratio)]
        score = math.inf if not finite.all() else (float(np.max(finite_ratio)) if finite_ratio.size else 0.0)
        return fails, score

    def reduce(self, m):
        """The sub-problem made of the rows involved, if it still fails with the same kind; else ``m``."""
        if not m.location:
            return m
        i, j = m.location
        x1, x2 = m.inputs["x1"], m.inputs["x2"]
        if x2 is None:
            sub = (x1[[i]], None) if i == j else (x1[[i, j]], None)
        else:
            sub = (x1[[i]], x2[[j]])
        if sub[0].shape[0] == x1.shape[0] and (x2 is None or x2.shape[0] == 1):
            return m
        fails, _ = self.evaluate(sub[0], sub[1], Recorder())
        same = [f for f in fails if f.kind == m.kind and f.location]
        if not same:
            return m
        smaller = max(same, key=ratio)
        smaller.detail = m.detail if "battery" in m.detail and "battery" not in smaller.detail else smaller.detail
        return smaller

    def hint(self, m, alternatives=()):
        """A likely explanation of a convention/precision failure on ``m.inputs`` (or ``""``).

        Tries: a constant factor between candidate and reference on every entry; exact zeros where the reference
        is not 0 (underflow); equality with an alternative reference (``alternatives``: (label, reference) pairs,
        e.g. the NNGP when the NTK was asked for).
        """
        x1, x2 = m.inputs["x1"], m.inputs["x2"]
        K = self.call_candidate(x1, x2)
        K_ref, d1, d2, _ = self.reference(x1, x2)
        for label, alt in alternatives:
            K_alt, a1, a2, _ = alt(x1, x2)
            e, _ = kernel_error(K, K_alt, a1, a2)
            if np.all(np.isfinite(e)) and float(np.max(e)) <= max(self.threshold * 1e-3, 1e-9):
                return f"the candidate matches {label} (max scaled error {float(np.max(e)):.1e})"
        _, scale = kernel_error(K, K_ref, d1, d2)
        big = np.isfinite(K) & (np.abs(K_ref) > 1e-3 * scale) & (scale > 0)
        if big.any():
            r = K[big] / K_ref[big]
            c = float(np.median(r))
            if c != 0 and np.all(np.abs(r - c) <= 1e-6 * abs(c)) and abs(c - 1) > 1e-6:
                return (f"candidate = {c:.9g} × reference on every entry: a constant-factor convention "
                        "(W_std/b_std, a 1/d or 1/C normalisation, Arora's c_σ = 2 or NT's parameterisation)")
            zeros = (K[big] == 0)
            if zeros.any():
                return (f"the candidate is exactly 0 on {int(zeros.sum())} entr(y/ies) where the reference is not: "
                        "values lost to underflow (tiny inputs?)")
        return ""


def check_kernel(
    candidate,
    *,
    depth=1,
    activation="relu",
    W_std=1.0,
    b_std=0.0,
    which="ntk",
    diag_tol=1e-10,
    offdiag_tol=1e-10,
    atol=0.0,
    max_examples=200,
    battery=None,
    inputs=None,
    dtype="float64",
    reference=None,
    reference_bound=0.0,
    backend=None,
    pass_none=True,
    seed=0,
    shrink=True,
    raise_on_failure=True,
    mode="assert",
    convention_threshold=None,
    record_entries=None,
):
    r"""Search for inputs on which ``candidate(x1, x2)`` differs from ntkref's FC kernel.

    Compares ``candidate(x1, x2)`` (shape (n1, n2); ``x2=None`` means x1) with
    ``ntkref.kernels.fc(x1, x2, depth=depth, activation=activation,
    W_std=W_std, b_std=b_std).<which>`` (neural-tangents' convention, docs/conventions.md, 'FC kernels'),
    entry by entry, with the error

    .. math::  e_{ij} = |K_{ij} - R_{ij}| / \sqrt{R(x_i,x_i)\,R(x'_j,x'_j)}

    (module docstring), failing where e > max(``diag_tol``, b) on the diagonal of a
    symmetric call, e > max(``offdiag_tol``, b) elsewhere (plus ``atol`` in absolute
    terms; b = ntkref's certified bound, 1e-13 for ReLU/erf), or the candidate's value is not finite,
    raises, or has the wrong shape.

    The search runs hypothesis over ``inputs`` (default :func:`kernel_inputs`
    with every row kind: angles down to 1e-9, zero rows, norms 1e-150 … 1e150,
    duplicates), then the battery :func:`hard_inputs` (module docstring, 'Inputs').  In assert mode the
    first failure is shrunk and the battery runs only if the search found nothing; in measure mode
    everything runs and each failure kind gets its own shrunk example.  Reported examples are reduced to
    the one or two rows involved when that still fails the same way.

    Parameters
    ----------
    candidate : callable (x1, x2) -> array-like
        Gets NumPy arrays of ``dtype``; may return any array convertible by
        :func:`ntkref.to_numpy`.
    depth, activation, W_std, b_std : as in :func:`ntkref.kernels.fc`
    which : {"ntk", "nngp"}
    diag_tol, offdiag_tol : float ≥ 0 or inf
        User tolerances on e (defaults 1e-10); inf leaves that part unchecked (e.g. ``diag_tol=math.inf`` to
        measure the off-diagonal entries only), not both.
    atol : float ≥ 0
        Extra absolute slack (needed only where the reference scale is 0).
    max_examples : int
        Hypothesis examples (0: battery only; refused when no battery runs, as nothing would be checked).
    battery : bool or None
        ``None`` (default): the battery runs only when ``inputs`` is not given; ``True``: always (with
        ``inputs``: both, the user's first); ``False``: never.
    inputs : hypothesis strategy of (x1, x2), optional
    dtype : {"float64", "float32"}
        Inputs are cast to this before the candidate and the reference see them.
    reference : callable (x1, x2) -> array, optional
        Compare with this instead of ``fc`` (e.g. ``ntkref.kernels.arora_ntk``); its diagonal (from
        ``reference(x, None)`` on the same inputs) sets the scale.  Called only on the inputs checked.
    reference_bound : float ≥ 0
        The scaled error ``reference`` is known to (its certified bound; default 0).
    backend : str, optional
        Namespace the reference is computed in (default ``NTKREF_BACKEND``).
    pass_none : bool
        Call ``candidate(x1, None)`` for symmetric inputs (else ``candidate(x1, x1)``).
    seed : int
        Hypothesis seed (the search is reproducible).
    shrink : bool
        Shrink failing inputs to minimal ones (default; each shrink step calls the candidate again).
    raise_on_failure : bool
        Raise :class:`OracleMismatch` (default) or return the report.
    mode : {"assert", "measure"}
        Module docstring, 'Two modes'.
    convention_threshold : float, optional
        Failing finite errors above it are of kind ``"convention"``, below it ``"precision"`` (default 1e-4
        in float64, 1e-2 in float32).
    record_entries : bool, optional
        Keep the per-entry table (``report.entries``, ``to_csv``); default: in measure mode only.

    Returns
    -------
    CheckReport

    Raises
    ------
    OracleMismatch
        On disagreement (with ``raise_on_failure``), with the minimal example(s) in the message and ``.report``.
    """
    which = check_option(which, "which", ("ntk", "nngp"), caller="check_kernel")
    diag_tol = check_real(diag_tol, "diag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    offdiag_tol = check_real(offdiag_tol, "offdiag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    if math.isinf(diag_tol) and math.isinf(offdiag_tol):
        raise InvalidParameterError("The 'diag_tol' and 'offdiag_tol' parameters of check_kernel cannot both be "
                                    "inf: no value would be compared (inf leaves one of the two parts unchecked).")
    atol = check_real(atol, "atol", caller="check_kernel", low=0.0)
    dtype = check_dtype(dtype, "check_kernel")
    mode = check_mode(mode, "check_kernel")
    threshold = check_convention_threshold(convention_threshold, dtype, "check_kernel")
    use_battery = battery_flag(battery, inputs, "check_kernel")
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of check_kernel must be callable. Got {candidate!r}.")
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    alternatives = ()
    if reference is not None:
        if not callable(reference):
            raise InvalidParameterError(f"The 'reference' parameter of check_kernel must be callable. "
                                        f"Got {reference!r}.")
        rb = check_real(reference_bound, "reference_bound", caller="check_kernel", low=0.0)
        ref = custom_reference(reference, rb)
        bound, bound_source = rb, "reference_bound (user-supplied reference)"
    else:
        kernels.fc(_backend.asarray(np.ones((1, 2))), **params)  # ntkref's own parameter checks, with its messages
        ref = fc_reference(which, params, backend)
        other = "nngp" if which == "ntk" else "ntk"
        alternatives = ((f"ntkref's {other.upper()} (asked for the {which.upper()})",
                         fc_reference(other, params, backend)),)
        bound, bound_source = fc_bound(activation, depth)
    if inputs is None:
        inputs = kernel_inputs(dtype=dtype)
    name = getattr(candidate, "__qualname__", repr(candidate))
    desc = (f"check_kernel({name}, which={which!r}, "
            + (f"reference={getattr(reference, '__qualname__', reference)!r}" if reference is not None else
               f"depth={depth}, activation={activation!r}, W_std={W_std!r}, b_std={b_std!r}")
            + f", diag_tol={diag_tol:g}, offdiag_tol={offdiag_tol:g}, atol={atol:g}, dtype={dtype})")
    comparison = KernelComparison(candidate, ref, diag_tol=diag_tol, offdiag_tol=offdiag_tol, atol=atol,
                                  pass_none=pass_none, threshold=threshold)

    def cast(x):
        return None if x is None else np.asarray(x).astype(dtype)

    def evaluate(pair, rec):
        return comparison.evaluate(cast(pair[0]), cast(pair[1]), rec)

    cases = [(n, (x1, x2)) for n, x1, x2 in hard_inputs(4, seed=seed, dtype=dtype)] if use_battery else []
    report = drive(
        "check_kernel", strategy=inputs, evaluate=evaluate, battery_cases=cases, order=("x1", "x2"), mode=mode,
        max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
        tolerance={"user": {"diagonal": diag_tol, "off-diagonal": offdiag_tol, "atol": atol},
                   "ntkref_bound": bound, "bound_source": bound_source},
        reduce=comparison.reduce, hint=lambda m: comparison.hint(m, alternatives),
        record_entries=(mode == "measure") if record_entries is None else bool(record_entries),
    )
    return finish(report, raise_on_failure)

