r"""Oracle tooling: hypothesis strategies for hard inputs and ``check_*`` helpers.

Users compare their own NTK / CNTK / kernel-machine / dynamics / certificate code with
ntkref.  This module makes that a one-line test in *their* pytest
suite::

    # test_my_ntk.py (your project)
    import numpy as np
    from ntkref.testing import check_kernel

    def my_ntk(x1, x2=None):          # any callable: NumPy arrays in, array-like out
        ...

    def test_my_ntk_matches_ntkref():
        # depth = number of hidden layers, neural-tangents' convention (docs/conventions.md, 'FC kernels')
        check_kernel(my_ntk, depth=2, activation="relu", W_std=1.0, b_std=0.0,
                     which="ntk", diag_tol=1e-12, offdiag_tol=1e-12)

(or, with the pytest plugin :mod:`ntkref.pytest_plugin`, ``def test_my_ntk(ntkref_oracle):
ntkref_oracle.check_kernel(my_ntk, depth=2)``).  Call the ``check_*`` helpers from a plain test function (not
from inside another ``@given`` test: hypothesis does not nest).

Coverage: what a check exercises
--------------------------------
A check of one configuration misses every bug that does not show there (a missing bias term at b_std = 0, an
off-by-one layer at depth 1, the NTK where the NNGP is meant, W_std for W_std² at W_std = 1).  So the kernel
checkers sweep a default battery of configurations, :data:`FC_BATTERY` (depth 0–3 × without/with biases ×
NNGP/NTK, ReLU/erf and W_std 1/1.5 so that every pair of values occurs; 16) and :data:`CNTK_BATTERY` (depth 1–2 ×
GAP/Flatten × NNGP/NTK, biases and W_std likewise; 8), over every configuration parameter the call leaves ``None``
(the default) — provided the candidate can receive it: name the parameters in its signature
(``def my_ntk(x1, x2=None, *, depth, activation, W_std, b_std, which)``), or pass a factory with
``factory=True`` (``make(depth=…, …) -> f(x1, x2)``).  A plain ``f(x1, x2)`` is checked at the historical defaults
(depth 1, ReLU, W_std 1, b_std 0, the NTK; CNTK: GAP) with a :class:`CoverageWarning`; pin the values to state
its configuration.  Every kernel report has ``coverage`` — the configurations run, the input kinds met (zero rows,
norms ≤ 1e-50 / ≥ 1e50, parallel, antiparallel and orthogonal rows, d = 1, …, read off the inputs evaluated) and
what was **not** exercised — and prints its one-line summary.

float32
-------
``dtype="float32"`` casts the inputs to float32 and, unless ``diag_tol``/``offdiag_tol`` are given, judges at
ntkref's certified float32 bound ``certified_bound("fc", depth=…, dtype="float32")`` (1e-5 at depths 0–3): the
accuracy ntkref's own kernels reach in float32, so a correct float32 implementation passes (the reference is
computed in float64 on the cast inputs; ``report.tolerance["user_source"]`` says where the tolerance came from).

Hypothesis' files
-----------------
The checks are seeded and use no example database; hypothesis' other files go to ``$NTKREF_HYPOTHESIS_DIR``, else
``$XDG_CACHE_HOME/ntkref/hypothesis`` (``~/.cache/ntkref/hypothesis``), never to the working directory (no
``.hypothesis/`` folder is left there).

Two modes
---------
``mode="assert"`` (default): stop at the first failing input, shrink it (hypothesis), reduce it to the one
or two rows involved and raise :class:`OracleMismatch` (an ``AssertionError``) whose message shows that
minimal example, both values, the location ``(i, j)`` and the measured error; the report is ``exc.report``.
Its ``max_error`` covers the inputs tried until then (shrink steps and the reported example included).
Shrinking keeps the failure: a shrink step counts only if it fails with the same kind (kernels: the same cause —
the same slip) and an error at least 1/10 of the worst one seen, so the minimal example shows the severe failure,
and the report gives that worst error (``failures[kind].worst``) next to it.

``mode="measure"``: run the whole example budget (every hypothesis example, then the battery), record
every value, and report per failure kind (``"non_finite"`` overflow/NaN or values lost to underflow,
``"convention"`` a named slip, ``"formula"`` a wrong formula, ``"precision"`` lost digits, ``"exception"``,
``"shape"``; ``"soundness"`` for certificates; kinds are by cause, the same as ``ntkref compare``'s — see
:mod:`ntkref.testing._report`) the number of examples
and values, the worst example and a shrunk minimal example with an ``@example(...)`` replay line (and the
seed, which repeats the whole run).  ``max_error`` is then the largest finite error over the budget;
non-finite candidate values are counted (``n_non_finite``) and listed (``non_finite``) separately.  With
``raise_on_failure`` (default) a failing measure run also raises, after the budget.

Reports are structured: :class:`CheckReport` has ``to_dict()`` (JSON-ready, numbers as numbers, schema
:data:`REPORT_SCHEMA`, documented in :mod:`ntkref.testing._report`; with the checked configuration as fields
``config``, the ``coverage``, the ``versions`` of ntkref/numpy/hypothesis/python, ``duration_s`` and the pytest
``test_id``; the 20 worst failing entries and the counts, a few kilobytes, ``entries="all"`` for everything),
``to_json(path)`` and, for kernel checks, the per-entry table ``entry_table()`` / ``to_csv(path)`` (row, col,
candidate, reference, absolute and scaled error, the tolerance used and where it came from, the entry's kind) —
pass ``record_entries=True`` (default in measure mode).

Error measure for kernels
-------------------------
For an entry (i, j) with reference value R = K_ref(xᵢ, x′ⱼ),

.. math::  e_{ij} = \frac{|K_{ij} - R_{ij}|}{\sqrt{K_{\rm ref}(x_i, x_i)\,K_{\rm ref}(x'_j, x'_j)}} ,

the error relative to the Cauchy–Schwarz bound |R| ≤ √(K(x,x)K(x′,x′)) (for a
PSD kernel), which is the scale a kernel entry can be known to.  It is scale
free (rows of norm 1e-150 and 1e150 alike) and meaningful where R itself is 0
(orthogonal rows, Θ(x, 0) = 0).  Entries fail where
|K − R| > τ·√(…) + ``atol`` with τ = max(user tolerance, ntkref's certified bound for that entry) — the
user tolerance being ``diag_tol`` on the diagonal of a symmetric call (x2 = None, i = j) and
``offdiag_tol`` elsewhere — and the report says which of the two applied, per entry and in total
(``tolerance_counts``).  ntkref's bound for FC kernels (ReLU, erf) is 1e-13: tests/test_kernels.py checks
every entry against 50-digit mpmath at input norms from 1e-300 to ~1e150 (see :mod:`ntkref.testing._kernel`
for the tests and the depth rule); for the CNTK see :func:`check_cntk`.  Where ntkref's bound is *proven*
(``kernels.fc(..., error_bound=True)``: ReLU or erf), the verdict is instead against the exact kernel at the user's τ —
decided by the proven bound, and an entry within that bound of the threshold by a ball-arithmetic enclosure
(python-flint, the ``rigorous`` extra; without it such entries fall back to the rule above, marked not
proven) — :mod:`ntkref._verdicts`; each entry says whether its verdict is ``proven`` and on which
``verdict_basis``, and ``report.verdicts`` counts them.  A non-finite candidate value always fails.  Tolerances down to ~1e-12 are meaningful in float64; float32 candidates are judged at 1e-5 by
default (section 'float32').

Known results (``validation/nt_oracle_check.py``): neural-tangents 0.6.5 in
float64 fails ``diag_tol=1e-11`` with a ~1e-8 error on the NTK diagonal (its
angle arctan2(√(q₁q₂ − k²), k) loses half the digits at θ = 0), while its
off-diagonal entries on generic inputs pass at ``offdiag_tol=1e-11``.

Inputs: ``inputs=`` and ``battery=``
------------------------------------
``inputs`` is the hypothesis strategy searched (default :func:`kernel_inputs`, every hard row kind).
``battery`` adds the fixed cases of :func:`hard_inputs` (images: :func:`hard_images`) *after* the search.
The default ``battery=None`` means "the battery runs only with the default strategy": a user's ``inputs=``
is searched alone (the battery's rows, d = 4, are not what a fixed-size or special-purpose candidate
accepts).  ``battery=True`` with ``inputs=`` runs both, the user's strategy first, and the report counts
each (``n_examples_by_source``) and names the source of each failure.  A user ``reference=`` is never
probed with made-up inputs: it is called only on the inputs searched (and the battery, if asked for).

Strategies
----------
:func:`rows`, :func:`kernel_inputs`, :func:`generic_kernel_inputs`, :func:`ill_conditioned_kernels`,
:func:`labels`, :func:`machine_problems`, :func:`learning_rates`, :func:`widths`, :func:`images`,
:func:`image_inputs` — hypothesis strategies returning NumPy arrays (convert them to
your namespace yourself), bounded in size, reproducible under hypothesis'
seeding.  :func:`hard_inputs` and :func:`hard_images` are fixed (non-hypothesis) batteries.

This module needs ``hypothesis`` — the ``oracle`` extra, ``pip install -e ".[oracle]"`` from ntkref's checkout
(ntkref is not on a package index) — and the rest of ntkref does not.
"""
from __future__ import annotations

try:
    import hypothesis  # noqa: F401 - the checkers and strategies below need it; say so clearly if missing
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "ntkref.testing needs the 'hypothesis' package: pip install hypothesis, or the 'oracle' extra from "
        "ntkref's checkout: pip install -e \".[oracle]\"."
    ) from exc

from ..kernels._accuracy import certified_bound, kernel_error
from ._coverage import CNTK_BATTERY, FC_BATTERY, CoverageWarning
from ._engine import MODES, OracleMismatch
from ._images import IMAGE_KINDS, check_cntk, hard_images, image_inputs, images
from ._kernel import check_kernel
from ._empirical import EMPIRICAL_NTK_BOUND, check_empirical_ntk
from ._machines import check_certificate, check_dynamics, check_fit, fit_convention_hint
from ._sampled import SampledCheck, check_gram_sample
from ._report import (
    ENTRY_COLUMNS,
    FAILURE_KINDS,
    REPORT_SCHEMA,
    CheckReport,
    KindSummary,
    Mismatch,
    json_safe,
)
from ._strategies import (
    ROW_KINDS,
    generic_kernel_inputs,
    hard_inputs,
    ill_conditioned_kernels,
    kernel_inputs,
    labels,
    learning_rates,
    machine_problems,
    rows,
    widths,
)

__all__ = [
    "ROW_KINDS",
    "IMAGE_KINDS",
    "MODES",
    "FAILURE_KINDS",
    "ENTRY_COLUMNS",
    "REPORT_SCHEMA",
    "OracleMismatch",
    "CoverageWarning",
    "FC_BATTERY",
    "CNTK_BATTERY",
    "CheckReport",
    "KindSummary",
    "Mismatch",
    "certified_bound",
    "json_safe",
    "rows",
    "kernel_inputs",
    "generic_kernel_inputs",
    "ill_conditioned_kernels",
    "labels",
    "machine_problems",
    "learning_rates",
    "widths",
    "hard_inputs",
    "images",
    "image_inputs",
    "hard_images",
    "kernel_error",
    "check_kernel",
    "check_cntk",
    "check_fit",
    "check_dynamics",
    "check_certificate",
    "check_gram_sample",
    "SampledCheck",
    "fit_convention_hint",
    "check_empirical_ntk",
    "EMPIRICAL_NTK_BOUND",
]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
