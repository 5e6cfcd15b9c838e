r"""Entry-by-entry kernel comparison for :func:`ntkref.testing.check_kernel` and :func:`ntkref.testing.check_cntk`.

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
  evaluation on adversarial images (``ntkref._testing_report.cntk_bound``; (depth/4)·1e-13 beyond depth 4, stated
  as extrapolated; none in float32).
- A user ``reference=``: the ``reference_bound`` given (default 0).
"""
from __future__ import annotations

import importlib
import math

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

from . import _backend
from ._backend import BackendError, backend_name, default_namespace, to_numpy
from ._backend import host_float64 as host  # explicit host copies (reports and references are NumPy)
from ._testing_report import Mismatch, certified_bound
from ._testing_report import _kernel_error as kernel_error  # unchecked: inputs come from the checker



def namespace_named(backend):
    if backend is None:
        return default_namespace()
    from ._backend import _MODULES, ENV_VAR

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
    names (:func:`ntkref._backend.asarray`); another backend: that library's default device.  The oracle's inputs and
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
    from .kernels import fc, fc_diagonal

    bound, _ = fc_bound(params["activation"], params["depth"])

    def reference(x1, x2, which=which):
        put = mover(backend)
        a1 = put(host(x1))
        a2 = None if x2 is None else put(host(x2))
        K = getattr(fc(a1, a2, get=which, **params), which)
        d1 = getattr(fc_diagonal(a1, **params), which)
        d2 = d1 if a2 is None else getattr(fc_diagonal(a2, **params), which)
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
        from ._testing_engine import Recorder, ratio

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
