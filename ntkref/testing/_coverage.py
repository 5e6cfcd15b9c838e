r"""Coverage of the kernel checkers: the default battery of configurations, the sweep over it, and the record of
what a check exercised (``CheckReport.coverage``).

Why: a check of one configuration misses every bug that does not show there — a missing bias term at
``b_std = 0``, an off-by-one layer at one depth, the NNGP where the NTK is meant, a W_std vs W_std² slip at
``W_std = 1``, erf's arcsin factor with a ReLU check.  So when the user does not pin the configuration, the checkers
sweep a default battery, and every report says what was and was not exercised.

The battery (:data:`FC_BATTERY`, :data:`CNTK_BATTERY`)
------------------------------------------------------
FC (:func:`ntkref.testing.check_kernel`): the full product depth ∈ {0, 1, 2, 3} × b_std ∈ {0, 0.5} × which ∈
{"nngp", "ntk"} (16 configurations, seed 001's recursion at every depth, with and without the bias term), with the
activation (ReLU or erf, the two closed forms) and W_std ∈ {1, 1.5} assigned by parity so that **every pair of
values of any two of the five parameters** occurs (a covering array of strength 2: a bug that needs two parameters at
given values is met; three at once may not be).  CNTK (:func:`ntkref.testing.check_cntk`): depth ∈ {1, 2} × readout
∈ {"gap", "flatten"} × which ∈ {"nngp", "ntk"} with b_std ∈ {0, 0.5} and W_std ∈ {1, 1.5} by parity (8
configurations, strength 2 as well).  A parameter the user pins (``depth=2``) takes that value in every
configuration (duplicates removed).

How the candidate gets the configuration
----------------------------------------
- **keywords**: the candidate's signature names some of ``depth``, ``activation``, ``W_std``, ``b_std``, ``which``
  (CNTK: also ``readout``) explicitly (``**kwargs`` does not count); it is called as ``candidate(x1, x2, **config)``
  with those it names;
- **factory** (``factory=True``): ``candidate(**config)`` returns the kernel callable ``f(x1, x2)``;
- otherwise the candidate has a fixed configuration: the parameters it cannot take and the user did not pin keep
  the historical defaults (depth 1, ReLU, W_std 1, b_std 0, the NTK; CNTK: GAP), the report's coverage lists what
  was therefore *not* exercised and a :class:`CoverageWarning` says how to enable the sweep (or to pin the values).

The hypothesis budget ``max_examples`` is split over the configurations (⌈max_examples / n⌉ each, at least 1); the
fixed battery of inputs runs for every configuration; configuration k uses seed ``seed + k``.  In assert mode the
sweep stops at the first failing configuration (the simplest first: lowest depth, no biases, NNGP before NTK) and
the coverage says which were not reached.

Input kinds (:data:`FC_INPUT_KINDS`, :data:`CNTK_INPUT_KINDS`) are read off the inputs actually evaluated (the
hypothesis search, the battery and shrink steps alike), not assumed from the strategy: "tiny"/"huge" mean a row
(image) norm ≤ 1e-50 / ≥ 1e50 (float32: 1e-5 / 1e5); "parallel"/"antiparallel" unit rows equal (opposite) up to
1e-15, "near-" within 1e-6; "orthogonal" |cos| ≤ 1e-12; the extremes (smallest and largest norm, smallest nonzero
angle) are reported too.
"""
from __future__ import annotations

import inspect
import math
import time
import warnings

import numpy as np  # host-side test tooling: inputs and reports are NumPy arrays by design

from ._report import FAILURE_KINDS, CheckReport, KindSummary, merge_verdicts

__all__ = ["CoverageWarning", "FC_BATTERY", "CNTK_BATTERY", "FC_INPUT_KINDS", "CNTK_INPUT_KINDS", "Plan", "plan",
           "InputObserver", "coverage_record", "default_tolerance", "annotate", "run_sweep"]


class CoverageWarning(UserWarning):
    """A check ran with configuration values the user neither pinned nor let ntkref sweep (see the report's
    ``coverage``): e.g. a fixed ``f(x1, x2)`` checked at depth 1 without biases only.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from ntkref import kernels
    >>> from ntkref.testing import CoverageWarning, check_kernel
    >>> def fixed(x1, x2=None):
    ...     return np.asarray(kernels.fc(x1, x2, depth=1).ntk)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     report = check_kernel(fixed, max_examples=5)
    >>> caught[0].category is CoverageWarning, report.coverage["not_exercised"]["depth"]
    (True, [0, 2, 3])
    """


FC_PARAMS = ("depth", "activation", "W_std", "b_std", "which")
CNTK_PARAMS = ("depth", "readout", "W_std", "b_std", "which")
LEGACY = {
    "fc": {"depth": 1, "activation": "relu", "W_std": 1.0, "b_std": 0.0, "which": "ntk"},
    "cntk": {"depth": 1, "readout": "gap", "W_std": 1.0, "b_std": 0.0, "which": "ntk"},
}
_B, _W = 0.5, 1.5


def _fc_battery():
    out = []
    for depth in (0, 1, 2, 3):
        for bi in (0, 1):
            for wi, which in enumerate(("nngp", "ntk")):
                out.append({"depth": depth, "activation": ("relu", "erf")[(depth + bi + wi) % 2],
                            "W_std": (1.0, _W)[(depth + bi) % 2], "b_std": (0.0, _B)[bi], "which": which})
    return tuple(out)


def _cntk_battery():
    out = []
    for depth in (1, 2):
        for ri, readout in enumerate(("gap", "flatten")):
            for wi, which in enumerate(("nngp", "ntk")):
                out.append({"depth": depth, "readout": readout, "W_std": (1.0, _W)[(depth + ri) % 2],
                            "b_std": (0.0, _B)[(depth + ri + wi) % 2], "which": which})
    out.sort(key=lambda c: (c["depth"], c["b_std"] > 0, c["readout"] != "gap", c["which"] != "nngp"))
    return tuple(out)


FC_BATTERY = _fc_battery()
"""The 16 FC configurations swept by default (module docstring)."""
CNTK_BATTERY = _cntk_battery()
"""The 8 CNTK configurations swept by default (module docstring)."""

FC_INPUT_KINDS = ("zero row", "tiny norm", "huge norm", "duplicate rows", "parallel (angle 0)",
                  "near-parallel (angle <= 1e-6)", "antiparallel (angle pi)", "near-antiparallel", "orthogonal",
                  "d = 1")
"""Input kinds the FC coverage reports (read off the inputs evaluated)."""
CNTK_INPUT_KINDS = ("zero image", "tiny scale", "huge scale", "duplicate images", "x and -x", "zero pixels",
                    "constant image", "1x1 image", "one channel")
"""Input kinds the CNTK coverage reports."""

def _categories(family):
    """parameter -> (label, the battery's values as labels)."""
    cats = {"depth": [0, 1, 2, 3] if family == "fc" else [1, 2]}
    if family == "fc":
        cats["activation"] = ["relu", "erf"]
    else:
        cats["readout"] = ["gap", "flatten"]
    cats["biases"] = ["without", "with"]
    cats["W_std"] = ["1", "!= 1"]
    cats["which"] = ["nngp", "ntk"]
    return cats


def _label(name, value):
    if name == "biases":
        return "with" if _positive(value) else "without"
    if name == "W_std":
        return "1" if _all_equal(value, 1.0) else "!= 1"
    if name == "activation":
        return value if isinstance(value, str) else str(getattr(value, "name", value))
    return value


def _positive(v):
    try:
        return bool(np.any(np.asarray(v, dtype=np.float64) != 0))
    except (TypeError, ValueError):
        return True


def _all_equal(v, x):
    try:
        return bool(np.all(np.asarray(v, dtype=np.float64) == x))
    except (TypeError, ValueError):
        return False


def _plain(v):
    """A configuration value as JSON-ready data."""
    if isinstance(v, (str, bool, int, float)) or v is None:
        return v
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain(u) for u in np.asarray(v, dtype=np.float64).ravel().tolist()]
    return str(getattr(v, "name", v))


def accepted_names(fn, params):
    """The configuration keywords ``fn`` names explicitly in its signature (``**kwargs`` does not count)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = {p.name for p in sig.parameters.values() if p.kind in kinds}
    return tuple(p for p in params if p in names)


class Plan:
    """What a kernel check runs: the configurations, how the candidate receives them, what was pinned/assumed."""

    def __init__(self, family, candidate, *, factory, reference, pinned):
        self.family = family
        self.params = FC_PARAMS if family == "fc" else CNTK_PARAMS
        self.candidate = candidate
        self.factory = bool(factory)
        self.pinned = {k: v for k, v in pinned.items() if v is not None}
        self.name = getattr(candidate, "__qualname__", repr(candidate))
        if reference is not None:
            self.how, self.accepted = "reference", ()
        else:
            self.accepted = accepted_names(candidate, self.params)
            self.how = "factory" if self.factory else ("keywords" if self.accepted else "fixed")
        sweepable = set(self.accepted) if self.how in ("keywords", "factory") else set()
        if self.how == "factory" and not self.accepted:
            sweepable = set()
        self.assumed = tuple(p for p in self.params if p not in self.pinned and p not in sweepable)
        self.swept = tuple(p for p in self.params if p not in self.pinned and p in sweepable)
        legacy = LEGACY[family]
        base = FC_BATTERY if family == "fc" else CNTK_BATTERY
        configs = []
        for c in base:
            full = {p: (self.pinned[p] if p in self.pinned else (c[p] if p in self.swept else legacy[p]))
                    for p in self.params}
            if full not in configs:
                configs.append(full)
        self.configs = configs

    @property
    def sweep(self):
        return len(self.configs) > 1

    def bind(self, config):
        """The kernel callable f(x1, x2) of ``config``."""
        kw = {p: config[p] for p in self.accepted}
        if self.how == "factory":
            fn = self.candidate(**kw)
            if not callable(fn):
                from .._lib.validation import InvalidParameterError
                raise InvalidParameterError(f"The 'candidate' parameter (a factory, factory=True) must return a "
                                            f"callable f(x1, x2); {self.name}(**{kw!r}) returned {fn!r}.")
            return fn
        if not kw:
            return self.candidate
        cand = self.candidate

        def bound(x1, x2=None):
            return cand(x1, x2, **kw)

        bound.__qualname__ = self.name
        return bound

    def warn(self, caller, stacklevel=3):
        """A :class:`CoverageWarning` if values were assumed rather than pinned or swept."""
        if self.how == "reference" or not self.assumed:
            return
        legacy = LEGACY[self.family]
        assumed = ", ".join(f"{p}={legacy[p]!r}" for p in self.assumed)
        missed = self.not_exercised_text()
        names = ", ".join(f"{p}=" for p in self.params)
        warnings.warn(
            f"{caller}: {self.name} takes none of the configuration keywords {', '.join(self.assumed)} and they were "
            f"not pinned, so only {assumed} was checked for them ({missed or 'see report.coverage'} NOT exercised). "
            f"To sweep the default battery give {self.name} keyword parameters named {names} (or pass a factory "
            f"with factory=True); to check one configuration on purpose, pin it ({assumed}).",
            CoverageWarning, stacklevel=stacklevel)

    def not_exercised_text(self):
        rec = _config_coverage(self.family, self.configs)
        parts = [f"{k} {', '.join(str(v) for v in vals)}" for k, vals in rec[1].items() if vals]
        return "; ".join(parts)


def plan(family, candidate, *, factory, reference, **pinned):
    return Plan(family, candidate, factory=factory, reference=reference, pinned=pinned)


def _config_coverage(family, configs):
    """(exercised, not exercised) per parameter category, relative to the default battery."""
    cats = _categories(family)
    seen = {k: [] for k in cats}
    for c in configs:
        for k in cats:
            v = _label(k, c["b_std"] if k == "biases" else c[k])
            if v not in seen[k]:
                seen[k].append(v)
    missing = {k: [v for v in vals if v not in seen[k]] for k, vals in cats.items()}
    seen = {k: sorted(vals, key=lambda v, k=k: cats[k].index(v) if v in cats[k] else len(cats[k]))
            for k, vals in seen.items()}
    return seen, missing


# ---------------------------------------------------------------------------------------------
# input kinds
# ---------------------------------------------------------------------------------------------
def _unit_rows(x):
    """Rows as unit vectors (float64, overflow-free), their norms; zero rows give zero vectors, norm 0."""
    x = np.asarray(x, dtype=np.float64).reshape(x.shape[0], -1)
    m = np.max(np.abs(x), axis=1, keepdims=True)
    safe = np.where(m > 0, m, 1.0)
    y = x / safe
    n = np.linalg.norm(y, axis=1, keepdims=True)
    u = np.where(n > 0, y / np.where(n > 0, n, 1.0), 0.0)
    return u, (m * n)[:, 0]


_ROUNDING = 1e-15


class InputObserver:
    """Records the input kinds and extremes of the inputs a check evaluated (module docstring)."""

    def __init__(self, family, dtype):
        self.family = family
        self.kinds = set()
        self.min_norm = math.inf
        self.max_norm = 0.0
        self.min_angle = math.inf
        f32 = str(dtype) == "float32"
        self.tiny, self.huge = (1e-5, 1e5) if f32 else (1e-50, 1e50)

    def observe(self, x1, x2, layout="NCHW"):
        try:
            self._observe(np.asarray(x1), None if x2 is None else np.asarray(x2), layout)
        except Exception:  # noqa: BLE001 - coverage bookkeeping must never break a check
            pass

    def _observe(self, x1, x2, layout):
        k = self.kinds
        if self.family == "cntk":
            imgs = x1 if x2 is None else np.concatenate([x1, x2])
            c_axis = 1 if layout == "NCHW" else 3
            hw = (imgs.shape[2], imgs.shape[3]) if layout == "NCHW" else (imgs.shape[1], imgs.shape[2])
            if hw == (1, 1):
                k.add("1x1 image")
            if imgs.shape[c_axis] == 1:
                k.add("one channel")
            for img in imgs:
                pix = np.moveaxis(img, c_axis - 1, -1).reshape(-1, img.shape[c_axis - 1])
                if np.all(img == 0):
                    k.add("zero image")
                    continue
                if np.any(np.all(pix == 0, axis=1)):
                    k.add("zero pixels")
                if np.all(img == img.ravel()[0]):
                    k.add("constant image")
        u1, n1 = _unit_rows(x1)
        u2, n2 = (u1, n1) if x2 is None else _unit_rows(x2)
        allnorms = np.concatenate([n1, n2])
        nz = allnorms[allnorms > 0]
        if self.family == "fc":
            if x1.shape[1] == 1:
                k.add("d = 1")
            if np.any(allnorms == 0):
                k.add("zero row")
        if nz.size:
            self.min_norm = min(self.min_norm, float(np.min(nz)))
            self.max_norm = max(self.max_norm, float(np.max(nz)))
            if np.any(nz <= self.tiny):
                k.add("tiny norm" if self.family == "fc" else "tiny scale")
            if np.any(nz >= self.huge):
                k.add("huge norm" if self.family == "fc" else "huge scale")
        a = np.asarray(x1, dtype=np.float64).reshape(x1.shape[0], -1)
        b = a if x2 is None else np.asarray(x2, dtype=np.float64).reshape(x2.shape[0], -1)
        ok = (n1[:, None] > 0) & (n2[None, :] > 0)
        if x2 is None:
            ok &= ~np.eye(len(n1), dtype=bool)
        same = np.all(a[:, None, :] == b[None, :, :], axis=2) & ok
        if same.any():
            k.add("duplicate rows" if self.family == "fc" else "duplicate images")
        minus = np.linalg.norm(u1[:, None, :] + u2[None, :, :], axis=2)
        chord = np.linalg.norm(u1[:, None, :] - u2[None, :, :], axis=2)
        if self.family == "cntk":
            if np.any(ok & (minus <= 1e-6)):
                k.add("x and -x")
            return
        dots = np.abs(np.einsum("ik,jk->ij", u1, u2))
        eps = _ROUNDING  # unit vectors of exactly (anti)parallel rows differ by rounding only
        if np.any(ok & (chord <= eps)):
            k.add("parallel (angle 0)")
        if np.any(ok & (chord > eps) & (chord <= 1e-6)):
            k.add("near-parallel (angle <= 1e-6)")
        if np.any(ok & (minus <= eps)):
            k.add("antiparallel (angle pi)")
        if np.any(ok & (minus > eps) & (minus <= 1e-6)):
            k.add("near-antiparallel")
        if np.any(ok & (dots <= 1e-12)):
            k.add("orthogonal")
        small = np.concatenate([chord[ok & (chord > eps)], minus[ok & (minus > eps)]])
        if small.size:
            self.min_angle = min(self.min_angle, float(2.0 * np.arcsin(min(float(np.min(small)) / 2.0, 1.0))))

    def absorb(self, coverage):
        """Add what another check's ``coverage`` record says its inputs were."""
        self.kinds |= set(coverage.get("exercised", {}).get("inputs", []))
        ext = coverage.get("input_extremes", {})
        if ext.get("min_norm") is not None:
            self.min_norm = min(self.min_norm, ext["min_norm"])
        if ext.get("max_norm") is not None:
            self.max_norm = max(self.max_norm, ext["max_norm"])
        if ext.get("min_angle") is not None:
            self.min_angle = min(self.min_angle, ext["min_angle"])


# ---------------------------------------------------------------------------------------------
# the coverage record and the sweep
# ---------------------------------------------------------------------------------------------
def _fmt(v):
    return "none" if v is None else f"{v:.0e}"


def coverage_record(plan_, config_runs, observer, *, stopped_early=False):
    """The report's ``coverage`` dict (JSON-ready) and its one-line summary ``coverage["line"]``.

    ``config_runs``: list of (config, report or None) in battery order (None: not run).
    """
    family = plan_.family
    ran = [c for c, r in config_runs if r is not None]
    if plan_.how == "reference":
        seen, missing = {}, {}
    else:
        seen, missing = _config_coverage(family, ran)
    all_kinds = FC_INPUT_KINDS if family == "fc" else CNTK_INPUT_KINDS
    kinds_seen = [k for k in all_kinds if k in observer.kinds]
    kinds_missing = [k for k in all_kinds if k not in observer.kinds]
    configs = []
    first = 0
    for c, r in config_runs:
        entry = {p: _plain(c[p]) for p in plan_.params}
        entry["n_examples"] = 0 if r is None else int(r.n_examples)
        entry["first_example"] = first
        entry["passed"] = None if r is None else bool(r.passed)
        first += entry["n_examples"]
        configs.append(entry)
    notes = []
    if plan_.how == "reference":
        notes.append("a user reference= fixes the configuration: none swept")
    if plan_.assumed and plan_.how != "reference":
        legacy = LEGACY[family]
        notes.append(f"{plan_.name} cannot take {', '.join(plan_.assumed)} (not pinned either): assumed "
                     + ", ".join(f"{p}={legacy[p]!r}" for p in plan_.assumed)
                     + "; name them as keyword parameters of the candidate (or pass factory=True) to sweep them")
    pinned = [p for p in plan_.params if p in plan_.pinned]
    if pinned and plan_.how != "reference":
        notes.append(f"pinned by the call: {', '.join(pinned)}")
    if stopped_early:
        notes.append(f"assert mode stopped at the first failing configuration: {len(config_runs) - len(ran)} of "
                     f"{len(config_runs)} not run")
    extremes = {"min_norm": None if not math.isfinite(observer.min_norm) else observer.min_norm,
                "max_norm": observer.max_norm if observer.max_norm > 0 else None,
                "min_angle": None if not math.isfinite(observer.min_angle) else observer.min_angle}
    cfg_txt = "; ".join(f"{k} {', '.join(str(v) for v in vals)}" for k, vals in seen.items())
    miss_txt = "; ".join(f"{k} {', '.join(str(v) for v in vals)}" for k, vals in missing.items() if vals)
    ext = []
    if extremes["min_norm"] is not None:
        ext.append(f"norms {_fmt(extremes['min_norm'])}..{_fmt(extremes['max_norm'])}")
    if extremes["min_angle"] is not None and family == "fc":
        ext.append(f"angles down to {_fmt(extremes['min_angle'])}")
    line = (f"coverage: {len(ran)} configuration(s) [{cfg_txt or 'user reference'}]; inputs: "
            f"{', '.join(kinds_seen) or 'none of the hard kinds'}" + (f" ({', '.join(ext)})" if ext else "")
            + f". NOT exercised: {miss_txt or 'no configuration of the battery'}"
            + (f"; inputs {', '.join(kinds_missing)}" if kinds_missing else "")
            + ("." if not notes else ". " + "; ".join(notes) + "."))
    return {
        "how": plan_.how,
        "swept": list(plan_.swept),
        "pinned": {p: _plain(plan_.pinned[p]) for p in pinned},
        "assumed": {p: _plain(LEGACY[family][p]) for p in plan_.assumed} if plan_.how != "reference" else {},
        "configs": configs,
        "exercised": {**{k: [_plain(v) for v in vals] for k, vals in seen.items()}, "inputs": kinds_seen},
        "not_exercised": {**{k: [_plain(v) for v in vals] for k, vals in missing.items()}, "inputs": kinds_missing},
        "input_extremes": extremes,
        "notes": notes,
        "line": line,
    }


def _ratio(m):
    from ._engine import ratio
    return ratio(m)


def merge_reports(check, runs, *, mode, seed, description):
    """One :class:`CheckReport` from the per-configuration reports ``runs`` (list of (config, report))."""
    failures = {}
    max_error = {}
    by_source = {}
    non_finite = []
    entries = []
    tol_counts = {"user": 0, "ntkref": 0}
    offset = 0
    n_entries = n_non_finite = 0
    failure, source = None, ""
    for _, r in runs:
        for k, v in r.max_error.items():
            max_error[k] = max(max_error.get(k, 0.0), v)
        for k, v in r.n_examples_by_source.items():
            by_source[k] = by_source.get(k, 0) + v
        for k, v in r.tolerance_counts.items():
            tol_counts[k] = tol_counts.get(k, 0) + v
        non_finite += [(e + offset, s, loc, val) for e, s, loc, val in r.non_finite]
        entries += [(row[0] + offset,) + tuple(row[1:]) for row in r.entries]
        n_entries += r.n_entries
        n_non_finite += r.n_non_finite
        for kind, s in r.failures.items():
            t = failures.setdefault(kind, KindSummary(kind))
            t.count += s.count
            t.n_entries += s.n_entries
            if s.worst is not None and (t.worst is None or _ratio(s.worst) > _ratio(t.worst)):
                t.worst = s.worst
            if t.minimal is None and s.minimal is not None:
                t.minimal = s.minimal
        offset += r.n_examples
    if mode == "assert":
        for _, r in runs:
            if r.failure is not None:
                failure, source = r.failure, r.source
                break
    else:
        for kind in FAILURE_KINDS:
            if kind in failures and failures[kind].minimal is not None:
                failure = failures[kind].minimal
                source = failure.source
                break
    first = runs[0][1]
    tolerance = dict(first.tolerance)
    bounds = [r.tolerance.get("ntkref_bound") for _, r in runs if r.tolerance.get("ntkref_bound") is not None]
    tolerance["ntkref_bound"] = max(bounds) if bounds else None
    srcs = []
    for _, r in runs:
        s = r.tolerance.get("bound_source", "")
        if s and s not in srcs:
            srcs.append(s)
    tolerance["bound_source"] = " | ".join(srcs)
    return CheckReport(
        all(r.passed for _, r in runs), offset, max_error, failure, source, description, check=check, mode=mode,
        seed=seed, failures=failures, n_entries=n_entries, n_non_finite=n_non_finite, non_finite=non_finite[:100],
        n_examples_by_source=by_source, tolerance=tolerance, tolerance_counts=tol_counts, entries=entries,
        verdicts=merge_verdicts([r.verdicts for _, r in runs]))


def default_tolerance(family, dtype, depth, activation="relu", *, given=(None, None)):
    """(default user tolerance, extra ``tolerance`` fields, ``user_source`` text) of a kernel check.

    float64: 1e-10.  float32: ntkref's certified float32 bound ``certified_bound(family, dtype="float32")`` (FC
    ReLU/erf: 1e-5 at depths 0–3), the accuracy ntkref's own kernels reach in float32; where there is none (the
    CNTK, quadrature activations) the FC float32 bound 1e-5 is the default and the text says it is not certified.
    """
    from ..kernels._accuracy import FC_BOUND, certified_bound

    explicit = [g is not None for g in given]
    if dtype == "float64":
        default, extra, src = 1e-10, {}, "default 1e-10 (float64)"
    else:
        try:
            b, bsrc = certified_bound(family, depth=depth, activation=activation, dtype="float32")
        except Exception:  # noqa: BLE001 - an invalid depth/activation is reported by the kernel's own check
            b, bsrc = 0.0, "no certified float32 bound"
        extra = {"dtype_bound": b if b > 0 else None, "dtype_bound_source": bsrc}
        if b > 0:
            default = b
            src = (f"float32 default {b:g} = certified_bound({family!r}, depth={depth}, dtype='float32'), the "
                   "accuracy of ntkref's own float32 kernels (the reference itself is computed in float64 on the "
                   "float32-cast inputs)")
        else:
            default = FC_BOUND["float32"]
            src = (f"float32 default {default:g}: {bsrc}; the FC kernels' float32 bound is used as the default "
                   "(not a certified bound here)")
    if all(explicit):
        src = "given by the call"
    elif any(explicit):
        src = ("diag_tol" if explicit[0] else "offdiag_tol") + " given by the call; the other: " + src
    return default, extra, src


def annotate(report, plan_, observer, *, family, dtype, diag_tol, offdiag_tol, atol, reference, extra=None):
    """Set a single-configuration kernel report's ``config`` and ``coverage`` (and its failures' ``config``)."""
    config = plan_.configs[0]
    fields = {"family": family, **{p: _plain(config[p]) for p in plan_.params}, **(extra or {}), "dtype": dtype,
              "tolerances": {"diag_tol": diag_tol, "offdiag_tol": offdiag_tol, "atol": atol}}
    if reference is not None:
        fields["reference"] = str(getattr(reference, "__qualname__", reference))
    report.config = fields
    report.coverage = coverage_record(plan_, [(config, report)], observer)
    for s in report.failures.values():
        for m in (s.worst, s.minimal):
            if m is not None and m.config is None:
                m.config = {p: _plain(config[p]) for p in plan_.params}
    if report.failure is not None and report.failure.config is None:
        report.failure.config = {p: _plain(config[p]) for p in plan_.params}


def run_sweep(check, plan_, *, call, max_examples, mode, seed):
    """Run ``call(f, config, max_examples=, seed=)`` (a single-configuration check returning its report) over the
    plan's configurations; merge.  Returns the merged report."""
    started = time.perf_counter()
    n = len(plan_.configs)
    per = max(1, math.ceil(max_examples / n)) if max_examples > 0 else 0
    runs = []
    observer = InputObserver(plan_.family, "float64")
    for k, config in enumerate(plan_.configs):
        report = call(plan_.bind(config), config, max_examples=per, seed=seed + k)
        observer.absorb(report.coverage)
        for s in report.failures.values():
            for m in (s.worst, s.minimal):
                if m is not None:
                    m.config = {p: _plain(config[p]) for p in plan_.params}
        runs.append((config, report))
        if mode == "assert" and not report.passed:
            break
    stopped = len(runs) < n
    desc = (f"{check}({plan_.name}, sweep of {n} configurations ({plan_.how}: {', '.join(plan_.swept)} swept"
            + (f"; pinned {', '.join(f'{p}={plan_.pinned[p]!r}' for p in plan_.pinned)}" if plan_.pinned else "")
            + f"), {per} hypothesis examples each, seeds {seed}..{seed + n - 1}); first run: {runs[0][1].description}")
    merged = merge_reports(check, runs, mode=mode, seed=seed, description=desc)
    all_runs = runs + [(c, None) for c in plan_.configs[len(runs):]]
    merged.coverage = coverage_record(plan_, all_runs, observer, stopped_early=stopped)
    first_cfg = runs[0][1].config
    merged.config = {**first_cfg, **{p: [_plain(c[p]) for c, _ in runs] for p in plan_.params}}
    merged.duration_s = time.perf_counter() - started
    return merged
