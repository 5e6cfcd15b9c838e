r"""Pinned regression tests of one's own inputs: :func:`record` the reference values once, :func:`replay` them.

:func:`record` computes ``kernels.fc(x1, x2, ...)`` (NNGP and/or NTK, neural-tangents' convention, depth =
number of hidden layers) in float64 on *your* inputs and writes them, with the inputs, the reference's
diagonals K(x,x) (for the scale), the configuration, ntkref's and NumPy's versions and ntkref's stated accuracy,
to one JSON file (numbers as 17-significant-digit decimals, which parse back to the exact float64), all-or-
nothing (:func:`ntkref._lib.files.replace_atomically`: a complete new file or the old one, never a torn one) and
sealed by a BLAKE2b checksum of its canonical content.  Commit the file next to your tests.

:func:`replay` reads it back — refusing a file whose checksum does not match (corrupted or hand-edited), an
unknown format version, or a file that is not a record — calls your implementation on the recorded inputs and
judges each entry in the golden files' measure,

.. math::  |C_{ij} - K_{ij}| \le \tau\,\sqrt{K(x_i, x_i)}\,\sqrt{K(x'_j, x'_j)} + \mathrm{atol},

τ = max(``tol``, the accuracy ntkref stated when recording) — the product of the square roots, since
K(x,x)·K(x′,x′) underflows to 0 at row norms ~1e-100 (and overflows at ~1e100) — and exact equality where the
scale is 0; a non-finite value always fails.  The replay needs no recomputation by ntkref: it checks your code
against the numbers pinned when the file was made (and the file says which ntkref made them).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field

from .._lib.backend import is_array, to_numpy
from .._lib.files import replace_atomically
from .._lib.validation import InvalidParameterError, check_option, check_real
from ..kernels import fc, fc_diagonal
from ..kernels._accuracy import certified_bound

__all__ = ["record", "replay", "load_record", "ReplayResult", "ReplayMismatch", "RECORD_FORMAT", "RECORD_VERSION"]

RECORD_FORMAT = "ntkref-recorded-kernel"
RECORD_VERSION = 1
_MAX_ENTRIES = 250_000  # a pinned test, not a Gram store (kernels.store_gram is for large Grams)


def _canonical(doc):
    """The bytes the checksum covers: the document without its checksum, keys sorted, no whitespace."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _checksum(doc):
    return "blake2b-256:" + hashlib.blake2b(_canonical(doc), digest_size=32).hexdigest()


def _host_rows(x, name, caller):
    import numpy as np

    if is_array(x):
        x = to_numpy(x)  # explicit host copy: the file holds host numbers
    if np.iscomplexobj(x):  # np.asarray(..., float64) would drop the imaginary part with only a warning
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be real. Got a complex array instead.")
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be a real array of shape (n, d). "
                                    f"Got {type(x).__name__} instead.") from None
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must have shape (n, d) with n, d >= 1. "
                                    f"Got shape {a.shape} instead.")
    if not np.all(np.isfinite(a)):
        raise InvalidParameterError(f"The {name!r} parameter of {caller} must be finite.")
    return a


def _lists(a):
    return [[float(v) for v in row] for row in a.tolist()] if a.ndim == 2 else [float(v) for v in a.tolist()]


def record(path, x1, x2=None, *, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk"):
    """Write the reference ``kernels.fc(x1, x2, ...)`` of your inputs to ``path`` (a ``.json`` file) for
    :func:`replay`.

    ``which``: ``"ntk"``, ``"nngp"`` or ``"both"``; ``activation``: ``"relu"`` or ``"erf"`` (the closed forms,
    whose stated accuracy is recorded; quadrature activations are refused: they have none).  The values are
    computed in float64 on the host from the float64 inputs.  The write is atomic (a crash leaves the old file
    or none).  At most 250 000 entries (a pinned test; for large Grams see ``kernels.store_gram``).  Returns the
    recorded document (a dict).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from ntkref import golden, kernels
    >>> x = np.array([[1.0, 2.0], [-1.0, 0.5], [1e-100, 0.0]])
    >>> path = os.path.join(tempfile.mkdtemp(), "my_ntk.json")
    >>> doc = golden.record(path, x, depth=2, b_std=0.1)
    >>> doc["config"]["depth"], doc["format_version"]
    (2, 1)
    >>> def my_ntk(x1, x2=None):                    # your implementation (here: ntkref itself)
    ...     return np.asarray(kernels.fc(x1, x2, depth=2, b_std=0.1).ntk)
    >>> golden.replay(path, my_ntk, tol=1e-13).passed
    True
    """
    import numpy as np

    from .. import __version__

    caller = "ntkref.golden.record"
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).endswith(".json"):
        raise InvalidParameterError(f"The 'path' parameter of {caller} must be a path ending in '.json'. "
                                    f"Got {path!r} instead.")
    which = check_option(which, "which", ("ntk", "nngp", "both"), caller=caller)
    activation = check_option(activation, "activation", ("relu", "erf"), caller=caller)
    a1 = _host_rows(x1, "x1", caller)
    a2 = None if x2 is None else _host_rows(x2, "x2", caller)
    if a2 is not None and a2.shape[1] != a1.shape[1]:
        raise InvalidParameterError(f"The 'x2' parameter of {caller} must have {a1.shape[1]} columns (as x1). "
                                    f"Got shape {a2.shape} instead.")
    n2 = a1.shape[0] if a2 is None else a2.shape[0]
    if a1.shape[0] * n2 > _MAX_ENTRIES:
        raise InvalidParameterError(f"The 'x1' parameter of {caller}: a record holds at most {_MAX_ENTRIES} entries; "
                                    f"got {a1.shape[0]} x {n2}. Pin a subset of your inputs.")
    wanted = ("nngp", "ntk") if which == "both" else (which,)
    params = dict(depth=depth, activation=activation, W_std=W_std, b_std=b_std)
    K = fc(a1, a2, get=wanted, dtype="float64", **params)
    d1 = fc_diagonal(a1, dtype="float64", **params)
    d2 = d1 if a2 is None else fc_diagonal(a2, dtype="float64", **params)
    bound, source = certified_bound("fc", depth=depth, activation=activation, dtype="float64")
    listed = (lambda v: list(v) if isinstance(v, (list, tuple)) else v)
    doc = {
        "format": RECORD_FORMAT,
        "format_version": RECORD_VERSION,
        "ntkref_version": __version__,
        "numpy_version": np.__version__,
        "function": "ntkref.kernels.fc",
        "config": {"depth": depth, "activation": activation, "W_std": listed(W_std), "b_std": listed(b_std),
                   "which": list(wanted), "dtype": "float64"},
        "accuracy": {"bound": bound, "source": source,
                     "measure": "|K - K_exact| <= bound * sqrt(K(x,x)) * sqrt(K(x',x'))"},
        "inputs": {"x1": _lists(a1), "x2": None if a2 is None else _lists(a2)},
        "values": {g: _lists(np.asarray(getattr(K, g))) for g in wanted},
        "diagonals": {g: {"x1": _lists(np.asarray(getattr(d1, g))), "x2": _lists(np.asarray(getattr(d2, g)))}
                      for g in wanted},
    }
    doc["checksum"] = _checksum(doc)
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    replace_atomically(os.fspath(path), lambda f: f.write(text), mode="w", encoding="utf-8")
    return doc


def load_record(path):
    """The document :func:`record` wrote, after checking it: JSON, the format and its version, and the checksum
    (a corrupted or edited file is refused with an error naming ``path``)."""
    caller = "ntkref.golden.load_record"
    try:
        with open(os.fspath(path), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:  # TypeError: not a path
        raise InvalidParameterError(f"The 'path' parameter of {caller} must name a readable record file. "
                                    f"Got {path!r} ({type(exc).__name__}: {exc}).") from None
    if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
        raise InvalidParameterError(f"The 'path' parameter of {caller}: {path!r} is not an ntkref record "
                                    f"(format {RECORD_FORMAT!r}).")
    if doc.get("format_version") != RECORD_VERSION:
        raise InvalidParameterError(f"The 'path' parameter of {caller}: {path!r} has format version "
                                    f"{doc.get('format_version')!r}; this ntkref reads version {RECORD_VERSION}.")
    if doc.get("checksum") != _checksum(doc):
        raise InvalidParameterError(f"The 'path' parameter of {caller}: the checksum of {path!r} does not match its "
                                    "content (the file is corrupted or was edited); record it again.")
    return doc


@dataclass
class ReplayResult:
    """The verdict of :func:`replay`: ``passed``, per kernel the largest scaled error ``max_error`` and the number
    of entries outside the tolerance ``n_outside``, the ``worst`` entries (dicts), the tolerance applied and what
    the file says about its making (``ntkref_version``, ``config``)."""

    path: str
    passed: bool
    tolerance: float
    max_error: dict
    n_outside: dict
    worst: list = field(default_factory=list)
    ntkref_version: str = ""
    config: dict = field(default_factory=dict)

    def __str__(self):
        head = (f"replay of {self.path} (recorded by ntkref {self.ntkref_version}, fc {self.config}): "
                + ("PASSED" if self.passed else "FAILED") + f" at tolerance {self.tolerance:g}")
        lines = [head] + [f"  {g}: {self.n_outside[g]} entries outside, max scaled error {self.max_error[g]:.3e}"
                          for g in self.max_error]
        lines += [f"  worst: {w['kernel']} ({w['row']}, {w['col']}) candidate {w['candidate']!r} recorded "
                  f"{w['recorded']!r} scaled error {w['scaled_error']:.3e}" for w in self.worst[:5]]
        return "\n".join(lines)


class ReplayMismatch(AssertionError):
    """A replayed candidate disagrees with the recorded values (``.result`` is the :class:`ReplayResult`)."""

    def __init__(self, result):
        super().__init__(str(result))
        self.result = result


def replay(path, candidate, *, tol=1e-10, atol=0.0, raise_on_failure=True):
    """Check ``candidate`` against the values :func:`record` pinned in ``path``.

    ``candidate`` is your implementation, called as ``candidate(x1)`` for a symmetric record (no x2) or
    ``candidate(x1, x2)``, with the recorded float64 NumPy inputs; it returns the Gram (n1, n2) — or, for a record
    of both kernels, a mapping or an object with ``nngp`` and ``ntk`` (like ``kernels.fc``'s result).  Each entry
    must satisfy |C − K| ≤ max(tol, recorded accuracy)·√K(x,x)·√K(x′,x′) + atol (exactly equal where that scale
    is 0; a non-finite value fails).  Returns a :class:`ReplayResult`; a failure raises :class:`ReplayMismatch`
    (an ``AssertionError``, so a plain ``golden.replay(...)`` line is a test) unless ``raise_on_failure=False``.

    Examples
    --------
    See :func:`record`.
    """
    import numpy as np

    caller = "ntkref.golden.replay"
    tol = check_real(tol, "tol", caller=caller, low=0.0)
    atol = check_real(atol, "atol", caller=caller, low=0.0)
    if not callable(candidate):
        raise InvalidParameterError(f"The 'candidate' parameter of {caller} must be a callable (your kernel "
                                    f"function). Got {type(candidate).__name__} instead.")
    doc = load_record(path)
    x1 = np.array(doc["inputs"]["x1"], dtype=np.float64)
    x2 = None if doc["inputs"]["x2"] is None else np.array(doc["inputs"]["x2"], dtype=np.float64)
    out = candidate(x1) if x2 is None else candidate(x1, x2)
    wanted = doc["config"]["which"]
    tau = max(tol, float(doc["accuracy"]["bound"]))
    max_error, n_outside, worst = {}, {}, []
    for g in wanted:
        if len(wanted) == 1 and not (isinstance(out, dict) or hasattr(out, g)):
            C = out
        else:
            C = out[g] if isinstance(out, dict) else getattr(out, g)
        C = to_numpy(C) if is_array(C) else C  # an explicit host copy of the candidate's values
        C = np.asarray(C, dtype=np.float64)
        R = np.array(doc["values"][g], dtype=np.float64)
        if C.shape != R.shape:
            raise InvalidParameterError(f"The 'candidate' parameter of {caller} returned {g} of shape {C.shape}; the "
                                        f"record holds {R.shape}.")
        s1 = np.sqrt(np.array(doc["diagonals"][g]["x1"], dtype=np.float64))
        s2 = np.sqrt(np.array(doc["diagonals"][g]["x2"], dtype=np.float64))
        scale = s1[:, None] * s2[None, :]  # √K(x,x)·√K(x',x'): no underflow at norm 1e-100, no overflow at 1e100
        with np.errstate(all="ignore"):
            diff = np.abs(C - R)
            err = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.inf))
            err = np.where(np.isfinite(C), err, np.inf)
            bad = ~(diff <= tau * scale + atol) | ~np.isfinite(C)
        finite = err[np.isfinite(err)]
        max_error[g] = float(finite.max()) if finite.size else (math.inf if err.size else 0.0)
        n_outside[g] = int(bad.sum())
        for i, j in zip(*np.nonzero(bad)):
            worst.append({"kernel": g, "row": int(i), "col": int(j), "candidate": float(C[i, j]),
                          "recorded": float(R[i, j]), "scaled_error": float(err[i, j])})
    worst.sort(key=lambda w: -w["scaled_error"] if not math.isnan(w["scaled_error"]) else -math.inf)
    result = ReplayResult(path=os.fspath(path), passed=not any(n_outside.values()), tolerance=tau,
                          max_error=max_error, n_outside=n_outside, worst=worst[:20],
                          ntkref_version=doc["ntkref_version"], config=doc["config"])
    if raise_on_failure and not result.passed:
        raise ReplayMismatch(result)
    return result
