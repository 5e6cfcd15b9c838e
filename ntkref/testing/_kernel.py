r"""Entry-by-entry kernel comparison and :func:`ntkref.testing.check_kernel` (the FC kernel checker).

Verdict per entry (i, j), against the *exact* kernel K* of the exact float inputs (:mod:`ntkref._verdicts`), with
the exact scale s* = √(K*(xᵢ,xᵢ)K*(x′ⱼ,x′ⱼ)) and τ the user's tolerance:

    fail  ⇔  K_ij not finite  or  |K_ij − K*_ij| > τ·s*_ij + atol.

Where ntkref has a proven error bound B (``kernels.fc(..., error_bound=True)``: ReLU or erf, with or without biases —
whatever the analysis covers; elsewhere it raises NotImplementedError naming ``error_bound``), the verdict is a
theorem: decided by B (|K − R| ± B against τ·[s_lo, s_hi] + atol, directed rounding), and an entry within B of
the threshold by a ball-arithmetic enclosure (``ntkref.enclosures``, python-flint).  Otherwise — no proven
bound (quadrature activations, a user ``reference=``, the CNTK), or python-flint missing for the entries near
the threshold — the *tested* rule applies, with the scale s_ij = √(R(xᵢ,xᵢ)R(x′ⱼ,x′ⱼ)) of the reference R:

    fail  ⇔  K_ij not finite  or  |K_ij − R_ij| > τ_ij·s_ij + atol,   τ_ij = max(user tolerance, b_ij)

where b_ij is ntkref's certified (observed) bound for that entry: the verdict never blames a candidate for the
reference's own error.  Each entry records which tolerance applied, whether its verdict is ``proven`` and its
``verdict_basis`` ("proven bound", "enclosure", "tested bound"); the report counts them (``report.verdicts``).

Where the tested bounds come from:

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

from .. import _verdicts, kernels
from .._lib import backend as _backend
from .._lib.backend import _MODULES, ENV_VAR, BackendError, backend_name, default_namespace, to_numpy
from .._lib.backend import host_float64 as host  # explicit host copies (reports and references are NumPy)
from .._lib.validation import InvalidParameterError, check_int, check_option, check_real
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
from . import _coverage
from .._diagnosis import KINDS, hint_for
from ._diagnosis import KernelDiagnoser
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


def fc_reference(which, params, backend, proven=False):
    """reference(x1, x2) -> (K, diag1, diag2, bound) from ``kernels.fc`` (host float64 arrays).

    ``proven``: the callable also has ``with_proof(x1, x2) -> (K, diag1, diag2, bound, proof, why)``, the same
    reference computed with ``error_bound=True`` (bit-for-bit the same K) and its :class:`ntkref._verdicts.FCProof`
    (``None`` where no proven bound exists, ``why`` saying so): the verdicts' proven route.
    """
    bound, _ = fc_bound(params["activation"], params["depth"])

    def inputs(x1, x2):
        put = mover(backend)
        a1 = put(host(x1))
        return a1, (None if x2 is None else put(host(x2)))

    def diagonals(a1, a2):
        d1 = getattr(kernels.fc_diagonal(a1, **params), which)
        d2 = d1 if a2 is None else getattr(kernels.fc_diagonal(a2, **params), which)
        return host(d1), host(d2)

    def reference(x1, x2, which=which):
        a1, a2 = inputs(x1, x2)
        K = getattr(kernels.fc(a1, a2, get=which, **params), which)
        return (host(K),) + diagonals(a1, a2) + (bound,)

    def with_proof(x1, x2):
        a1, a2 = inputs(x1, x2)
        K, proof, why = _verdicts.prove_fc(a1, a2, which=which, params=params)
        return (K,) + diagonals(a1, a2) + (bound, proof, why)

    if proven:
        reference.with_proof = with_proof
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
    """Compares a candidate with a reference on one input; see the module docstring for the verdict.

    The kinds of the failing entries come from :attr:`diagnoser` (:class:`ntkref.testing._diagnosis.KernelDiagnoser`,
    set by the checker): by cause, not by size (:mod:`ntkref._diagnosis`).
    """

    def __init__(self, candidate, reference, *, diag_tol, offdiag_tol, atol, pass_none, threshold=None,
                 to_candidate=None):
        self.candidate = candidate
        self.reference = reference
        self.diag_tol = diag_tol
        self.offdiag_tol = offdiag_tol
        self.atol = atol
        self.pass_none = pass_none
        self.to_candidate = to_candidate or (lambda x: x)
        self.diagnoser = None
        self.bound = None
        self.why_tested = "no proven bound for this reference (the tested bound applies)"

    def call_candidate(self, x1, x2):
        a1 = self.to_candidate(x1)
        a2 = None if x2 is None else self.to_candidate(x2)
        out = self.candidate(a1, a2 if (a2 is not None or self.pass_none) else a1)
        return host(out)

    def verdict(self, K, K_ref, d1, d2, symmetric, bound=None, proof=None, why=None):
        """Per-entry error, scale, tolerance and verdict (module docstring) as a dict of host arrays.

        With ``proof`` (:class:`ntkref._verdicts.FCProof`) each entry is judged against the exact kernel
        (:func:`ntkref._verdicts.judge`: proven bound, then enclosure); without, by the tested rule.  Either way
        the dict has ``proven``, ``basis`` (per entry), ``counts`` (per basis) and ``notes``.
        """
        bound = self.bound if bound is None else bound
        err, scale = kernel_error(K, K_ref, d1, d2)
        diag_mask = np.zeros(K.shape, dtype=bool)
        if symmetric:
            np.fill_diagonal(diag_mask, True)
        user = np.where(diag_mask, self.diag_tol, self.offdiag_tol)
        b = 0.0 if bound is None else float(bound)
        j = _verdicts.judge(K, K_ref, proof, user_tol=user, atol=self.atol, tested_bound=b, scale=scale,
                            why=self.why_tested if why is None else why)
        tol = j["tol"]
        finite = np.isfinite(K)
        with np.errstate(all="ignore"):
            diff = np.abs(K - K_ref)
            ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.where(err > 0, np.inf, 0.0))
        return {"err": err, "scale": scale, "diag": diag_mask, "tol": tol, "from_ntkref": j["from_ntkref"],
                "finite": finite, "diff": diff, "outside": j["outside"], "ratio": ratio, "proven": j["proven"],
                "basis": j["basis"], "counts": j["counts"], "notes": j["notes"]}

    def evaluate(self, x1, x2, rec):
        """(failures, score) for the input (x1, x2): one Mismatch per failure kind (its worst entry)."""
        prove = getattr(self.reference, "with_proof", None)
        if prove is not None:
            K_ref, d1, d2, bound, proof, why = prove(x1, x2)
        else:
            (K_ref, d1, d2, bound), proof, why = self.reference(x1, x2), None, None
        self.bound = bound
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
        v = self.verdict(K, K_ref, d1, d2, x2 is None, bound, proof, why)
        err, scale, diag_mask, tol, finite, ratio = v["err"], v["scale"], v["diag"], v["tol"], v["finite"], v["ratio"]
        from_ntkref = v["from_ntkref"]
        diagnosis, substitute = None, None
        kind = np.full(K.shape, "ok", dtype=object)
        if v["outside"].any():
            dgn = self.diagnoser
            if dgn is not None and dgn.pinned is not None:
                diagnosis = dgn.pinned
                kind = dgn.pinned_kinds(x1, x2, K, K_ref, d1, d2, v)
            elif dgn is not None:
                diagnosis, kind, substitute = dgn.full(
                    x1, x2, K, K_ref, d1, d2, lambda Ka, Ra, e1, e2, sym: self.verdict(Ka, Ra, e1, e2, sym, bound))
            kind = _settle(kind, v)
        rec.values(K.size, int(np.count_nonzero(from_ntkref)))
        rec.verdicts(v["counts"], v["notes"])
        for name, mask in (("diagonal", diag_mask), ("off-diagonal", ~diag_mask)):
            sel = mask & finite & np.isfinite(err)
            if sel.any():
                rec.error(name, float(np.max(err[sel])))
        for i, j in zip(*np.nonzero(~finite)):
            rec.bad_value((i, j), float(K[i, j]))
        if rec.record_entries:
            diff = v["diff"]
            for i in range(K.shape[0]):
                for j in range(K.shape[1]):
                    rec.row((i, j, "diagonal" if diag_mask[i, j] else "off-diagonal", float(K[i, j]),
                             float(K_ref[i, j]), float(diff[i, j]), float(scale[i, j]), float(err[i, j]),
                             float(tol[i, j]), "ntkref" if from_ntkref[i, j] else "user", bool(v["proven"][i, j]),
                             _verdicts.BASES[v["basis"][i, j]], str(kind[i, j])))
        fails = _mismatches(inputs, K, K_ref, v, kind, diagnosis, rec)
        if substitute is not None:  # the augmented rows show the more telling kind: report them (a real input)
            a1, a2, Ka, Ra, va, ka = substitute
            more = _mismatches({"x1": a1, "x2": a2}, Ka, Ra, va, _settle(ka, va), diagnosis, rec)
            for m in more:
                m.detail += ("; the example's rows, rescaled to unit norm and with generic rows added, by the "
                             "diagnosis")
            fails += [m for m in more if m.kind == diagnosis.kind]
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
        if smaller.error < m.error / 10:  # the rows alone show a much smaller error: keep the example that shows it
            return m
        smaller.detail = m.detail if "battery" in m.detail and "battery" not in smaller.detail else smaller.detail
        smaller.hint = m.hint or smaller.hint
        smaller.diagnosis = getattr(m, "diagnosis", None)
        return smaller

    def hint(self, m):
        """The hint the diagnosis attached to ``m`` (``""`` for ``formula``: no hint is better than a wrong one).

        A named constant factor (d, C, H·W, …) is a function of the shape: the reported example's value is given,
        with the one matched on the unshrunk failure.
        """
        d = getattr(m, "diagnosis", None)
        if (m.kind != "convention" or d is None or d.factor is None or not d.factor_names or self.diagnoser is None
                or not m.reference_value or not math.isfinite(m.candidate_value)):
            return m.hint
        c = m.candidate_value / m.reference_value
        here = [(n, v, why) for n, v, why in self.diagnoser._factors(m.inputs["x1"])
                if n in d.factor_names and abs(c / v - 1) <= 1e-6]
        if not here:
            return m.hint
        names = "; or = ".join(f"{n}: {why}" for n, _, why in here)
        return (f"candidate = {here[0][1]:.9g} × reference (= {names}); the same slip explains all "
                f"{d.detail.get('entries', 0)} entries of the unshrunk failing example (factor {d.factor:.9g} there)")


def _settle(kind, v):
    """Kinds of the outside entries only; one outside here but inside on the diagnosis' own evaluation (rounding
    at the edge) is labelled by size."""
    kind = np.where(v["outside"] & (kind == "ok"), np.where(v["finite"], "precision", "non_finite"), kind)
    return np.where(v["outside"], kind, "ok")


def _mismatches(inputs, K, K_ref, v, kind, diagnosis, rec):
    """One Mismatch per kind present (its worst entry), recorded in ``rec`` (if given)."""
    err, scale, diag_mask, tol, ratio = v["err"], v["scale"], v["diag"], v["tol"], v["ratio"]
    fails = []
    for k in KINDS:
        mask = kind == k
        if not mask.any():
            continue
        r = np.where(mask, np.where(np.isfinite(ratio), ratio, 1e308), -1.0)
        i, j = np.unravel_index(int(np.argmax(r)), r.shape)
        m = Mismatch(inputs, (int(i), int(j)), float(K[i, j]), float(K_ref[i, j]), float(err[i, j]),
                     float(tol[i, j]), "diagonal" if diag_mask[i, j] else "off-diagonal",
                     f"scale √(K(x,x)K(x',x')) = {scale[i, j]:.6e}", kind=k,
                     tolerance_source="ntkref" if v["from_ntkref"][i, j] else "user",
                     verdict_basis=_verdicts.BASES[v["basis"][i, j]] if "basis" in v else "")
        m.hint = _hint(k, diagnosis, kind, err, mask)
        m.diagnosis = diagnosis
        if rec is not None:
            rec.failure(m, int(np.count_nonzero(mask)))
        fails.append(m)
    return fails


def _hint(kind, diagnosis, kinds, err, mask):
    if diagnosis is None or kind == "formula":
        return ""
    if kind == "convention":
        return diagnosis.hint if diagnosis.kind == "convention" else ""
    band_free = np.where(mask, err, 0.0)
    return hint_for(kind, kinds, band_free, None) if kind == "precision" else hint_for(kind, kinds, err, None)


def check_kernel(
    candidate,
    *,
    depth=None,
    activation=None,
    W_std=None,
    b_std=None,
    which=None,
    diag_tol=None,
    offdiag_tol=None,
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
    factory=False,
):
    r"""Search for inputs on which ``candidate(x1, x2)`` differs from ntkref's FC kernel.

    Compares ``candidate(x1, x2)`` (shape (n1, n2); ``x2=None`` means x1) with
    ``ntkref.kernels.fc(x1, x2, depth=depth, activation=activation,
    W_std=W_std, b_std=b_std).<which>`` (neural-tangents' convention, docs/conventions.md, 'FC kernels'),
    entry by entry, with the error

    .. math::  e_{ij} = |K_{ij} - R_{ij}| / \sqrt{R(x_i,x_i)\,R(x'_j,x'_j)}

    (module docstring), failing where the candidate is further than ``diag_tol`` (diagonal of a symmetric
    call) or ``offdiag_tol`` (elsewhere) times the scale, plus ``atol``, from the *exact* kernel — a proven
    verdict where ntkref has a proven error bound (ReLU, erf; an entry near the threshold settled by a
    ball-arithmetic enclosure, python-flint), else judged by the tested rule e > max(tolerance, b) with b
    ntkref's certified (observed) bound, 1e-13 — or the candidate's value is not finite, raises, or has the
    wrong shape.  Each entry says whether its verdict is proven (``report.verdicts``, the entry table's
    ``proven`` and ``verdict_basis``).

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
        :func:`ntkref.to_numpy`.  If its signature names some of ``depth``, ``activation``, ``W_std``, ``b_std``,
        ``which`` as parameters (``**kwargs`` does not count), it is called ``candidate(x1, x2, **config)`` with
        those, and the configurations not pinned below are swept (see 'Coverage').
    depth, activation, W_std, b_std : as in :func:`ntkref.kernels.fc`, or None (default)
        ``None`` = not pinned: swept over the default battery when the candidate can take it (depth 0–3,
        ReLU and erf, W_std 1 and 1.5, b_std 0 and 0.5), else the historical default (depth 1, ``"relu"``, 1.0,
        0.0) with a :class:`~ntkref.testing.CoverageWarning`.
    which : {"ntk", "nngp"} or None
        As above (swept over both; historical default ``"ntk"``).
    diag_tol, offdiag_tol : float ≥ 0 or inf, optional
        User tolerances on e; inf leaves that part unchecked (e.g. ``diag_tol=math.inf`` to measure the
        off-diagonal entries only), not both.  Default: 1e-10 in float64; in float32 ntkref's certified float32
        bound, ``certified_bound("fc", depth=depth, activation=activation, dtype="float32")`` (1e-5 at depths
        0–3), so a correct float32 implementation passes (the report's ``tolerance.user_source`` says which).
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
        No longer used: kinds are by cause, not by size (:mod:`ntkref._diagnosis`: ``"convention"`` only when a
        named slip explains the failure, ``"precision"`` within the precision band, ``"formula"`` otherwise).
        Accepted (and validated) for compatibility; giving it warns.
    record_entries : bool, optional
        Keep the per-entry table (``report.entries``, ``to_csv``); default: in measure mode only.
    factory : bool
        ``True``: ``candidate(**config)`` (with the configuration keywords its signature names) returns the
        kernel callable ``f(x1, x2)`` of that configuration — the way to sweep a library built per configuration
        (e.g. neural-tangents' ``stax``).

    Coverage
    --------
    Unless every configuration parameter is pinned (or a ``reference`` fixes it), the check sweeps the default
    battery :data:`ntkref.testing.FC_BATTERY` (16 configurations: depth 0–3 × without/with biases × NNGP/NTK,
    ReLU/erf and W_std 1/1.5 so that every pair of values of any two parameters occurs), ⌈max_examples/16⌉
    hypothesis examples and the whole input battery each, configuration k with seed ``seed + k``; assert mode
    stops at the first failing configuration (simplest first).  Every report has ``coverage`` (configurations
    run, input kinds met — zero rows, norms ≤ 1e-100 and ≥ 1e100, parallel/antiparallel/orthogonal rows, d = 1 —
    and what was *not* exercised) and prints its one-line summary; ``config`` holds the configuration as fields.

    Returns
    -------
    CheckReport

    Raises
    ------
    OracleMismatch
        On disagreement (with ``raise_on_failure``), with the minimal example(s) in the message and ``.report``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.testing import check_kernel
    >>> def my_ntk(x1, x2=None, *, depth, activation, W_std, b_std, which):   # takes the configuration
    ...     k = kernels.fc(x1, x2, depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    ...     return np.asarray(getattr(k, which))
    >>> report = check_kernel(my_ntk, max_examples=16)                       # sweeps the 16 configurations
    >>> report.passed, len(report.coverage["configs"]), report.coverage["not_exercised"]["depth"]
    (True, 16, [])
    """
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of check_kernel must be callable. Got {candidate!r}.")
    plan = _coverage.plan("fc", candidate, factory=factory, reference=reference, depth=depth,
                          activation=activation, W_std=W_std, b_std=b_std, which=which)
    plan.warn("check_kernel")
    if plan.sweep:
        mode = check_mode(mode, "check_kernel")
        max_examples = check_int(max_examples, "max_examples", caller="check_kernel", low=0)
        common = dict(diag_tol=diag_tol, offdiag_tol=offdiag_tol, atol=atol, battery=battery, inputs=inputs,
                      dtype=dtype, backend=backend, pass_none=pass_none, shrink=shrink, raise_on_failure=False,
                      mode=mode, convention_threshold=convention_threshold, record_entries=record_entries)

        def one(f, config, *, max_examples, seed):
            return check_kernel(f, **config, max_examples=max_examples, seed=seed, **common)

        report = _coverage.run_sweep("check_kernel", plan, call=one, max_examples=max_examples, mode=mode, seed=seed)
        return finish(report, raise_on_failure)
    depth, activation, W_std, b_std, which = (plan.configs[0][p] for p in _coverage.FC_PARAMS)
    candidate = plan.bind(plan.configs[0])
    which = check_option(which, "which", ("ntk", "nngp"), caller="check_kernel")
    dtype = check_dtype(dtype, "check_kernel")
    tol_default, dtype_bound, user_source = _coverage.default_tolerance("fc", dtype, depth, activation,
                                                                        given=(diag_tol, offdiag_tol))
    diag_tol = tol_default if diag_tol is None else diag_tol
    offdiag_tol = tol_default if offdiag_tol is None else offdiag_tol
    diag_tol = check_real(diag_tol, "diag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    offdiag_tol = check_real(offdiag_tol, "offdiag_tol", caller="check_kernel", low=0.0, allow_inf=True)
    if math.isinf(diag_tol) and math.isinf(offdiag_tol):
        raise InvalidParameterError("The 'diag_tol' and 'offdiag_tol' parameters of check_kernel cannot both be "
                                    "inf: no value would be compared (inf leaves one of the two parts unchecked).")
    atol = check_real(atol, "atol", caller="check_kernel", low=0.0)
    mode = check_mode(mode, "check_kernel")
    check_convention_threshold(convention_threshold, dtype, "check_kernel", kinds_by_cause=True)
    use_battery = battery_flag(battery, inputs, "check_kernel")
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of check_kernel must be callable. Got {candidate!r}.")
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    if reference is not None:
        if not callable(reference):
            raise InvalidParameterError(f"The 'reference' parameter of check_kernel must be callable. "
                                        f"Got {reference!r}.")
        rb = check_real(reference_bound, "reference_bound", caller="check_kernel", low=0.0)
        ref = custom_reference(reference, rb)
        bound, bound_source = rb, "reference_bound (user-supplied reference)"
    else:
        kernels.fc(_backend.asarray(np.ones((1, 2))), **params)  # ntkref's own parameter checks, with its messages
        ref = fc_reference(which, params, backend, proven=True)
        bound, bound_source = fc_bound(activation, depth)
    if inputs is None:
        inputs = kernel_inputs(dtype=dtype)
    name = getattr(candidate, "__qualname__", repr(candidate))
    desc = (f"check_kernel({name}, which={which!r}, "
            + (f"reference={getattr(reference, '__qualname__', reference)!r}" if reference is not None else
               f"depth={depth}, activation={activation!r}, W_std={W_std!r}, b_std={b_std!r}")
            + f", diag_tol={diag_tol:g}, offdiag_tol={offdiag_tol:g}, atol={atol:g}, dtype={dtype})")
    comparison = KernelComparison(candidate, ref, diag_tol=diag_tol, offdiag_tol=offdiag_tol, atol=atol,
                                  pass_none=pass_none)
    if reference is not None:
        comparison.why_tested = ("a user reference= has no proven bound: its entries are judged with "
                                 "max(tolerance, reference_bound), not proven")
    build = None if reference is not None else (lambda p, w: fc_reference(w, p, backend))
    comparison.diagnoser = KernelDiagnoser(comparison, family="fc", params=params, which=which, build=build,
                                           dtype=dtype)

    def cast(x):
        return None if x is None else np.asarray(x).astype(dtype)

    observer = _coverage.InputObserver("fc", dtype)

    def evaluate(pair, rec):
        x1, x2 = cast(pair[0]), cast(pair[1])
        observer.observe(x1, x2)
        return comparison.evaluate(x1, x2, rec)

    cases = [(n, (x1, x2)) for n, x1, x2 in hard_inputs(4, seed=seed, dtype=dtype)] if use_battery else []
    report = drive(
        "check_kernel", strategy=inputs, evaluate=evaluate, battery_cases=cases, order=("x1", "x2"), mode=mode,
        max_examples=max_examples, seed=seed, shrink=shrink, description=desc,
        tolerance={"user": {"diagonal": diag_tol, "off-diagonal": offdiag_tol, "atol": atol},
                   "ntkref_bound": bound, "bound_source": bound_source, "user_source": user_source,
                   **dtype_bound},
        reduce=comparison.reduce, hint=comparison.hint, pin=comparison.diagnoser.pin,
        record_entries=(mode == "measure") if record_entries is None else bool(record_entries),
    )
    _coverage.annotate(report, plan, observer, family="fc", dtype=dtype, diag_tol=diag_tol, offdiag_tol=offdiag_tol,
                       atol=atol, reference=reference)
    return finish(report, raise_on_failure)

