"""Shared pieces of the seed-000 reproduction: the paper's numbers, run settings, logging, claims, figures."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import array_api_compat.numpy as HOST  # noqa: F401  (re-exported)
import numpy as np
from tqdm import tqdm

from ntkref._lib import backend as _backend
from ntkref.cli._progress import is_terminal, tqdm_options

# Where the reproductions run.  The data (MNIST digits, samples of seed 002's 𝒟, teacher networks, initial
# parameters) are drawn on the host with NumPy — the same numbers whatever the backend — and every call of one of
# ntkref's heavy functions (kernels, machines, dynamics, certificates, network training, flows) receives them through
# ``on_backend``: the namespace ``NTKREF_BACKEND`` names, on the device ``NTKREF_DEVICE`` names (NumPy by default,
# where it is the identity).  Results come back with ``host`` (an explicit copy) for tables, claims, plots and JSON;
# nothing in ``validation/`` applies NumPy to a device array.  ``backend_description()`` is what the report states.


def on_backend(a, dtype=None):
    """Host data → an array of the default namespace on the default device (``ntkref._lib.backend.asarray``).

    Lists and tuples are mapped element-wise (network parameters: a list of ``(W, b)`` with ``b`` possibly ``None``);
    ``None`` stays ``None``.  NumPy input is copied to the device explicitly; under NumPy nothing is copied.
    """
    if a is None:
        return None
    if isinstance(a, (list, tuple)):
        return type(a)(on_backend(v, dtype) for v in a)
    return _backend.asarray(a, dtype)


def host(a):
    """An array of any namespace/device → NumPy (``ntkref._lib.backend.to_numpy``, an explicit copy); lists and tuples
    element-wise, ``None`` and Python scalars unchanged."""
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, (list, tuple)):
        return type(a)(host(v) for v in a)
    return _backend.to_numpy(a)


def backend_description():
    """Which backend and device ran the reproductions (``ntkref._lib.backend.description()``)."""
    return _backend.description()

# --------------------------------------------------------------------------- the paper's numbers (docs/reference-numbers.md)
PAPER = {
    # Table 2: ℓ∞ certificates ×1e-3 (mean ± std over correctly classified test points, mean of 5 runs)
    "table2": {
        "100 test": {"1000": (7.4485, 2.5667), "10000": (2.9861, 1.0730), "100000": (0.99098, 0.35775),
                     "1000000": (0.31539, 0.11380), "svm": (8.0541, 2.5827)},
        "full test": {"1000": (7.2708, 2.1427), "10000": (2.9367, 0.89807), "100000": (0.97410, 0.29997),
                      "1000000": (0.30997, 0.095467), "svm": (7.9733, 2.1396)},
        "accuracy": 0.9995,
    },
    # Table 3: (λ, test accuracy, δ, improvement factor)
    "table3": {
        "krr": [(0.0, 0.9995, 3.30202e-5, None), (1e-3, 0.9995, 3.756122e-5, 1.14), (1e-2, 0.9995, 6.5055e-5, 1.97),
                (1e-1, 0.9995, 2.22996e-4, 6.75), (1.0, 0.9995, 1.005e-3, 30.43), (10.0, 0.9991, 5.181e-3, 156.90),
                (100.0, 0.9986, 2.0456e-2, 619.50), (1000.0, 0.9976, 2.6088e-2, 790.06)],
        "svm": (0.064, 0.9995, 8.054e-3, 243.91),
    },
    "figure1": "NN (3-layer, widths 1e4 and 900) and SVM outputs coincide over training (n = 128, η̂ ∈ {0.1, 0.01}, "
               "λ = 0.001 mean-hinge); the SVM−NN difference is smaller for the wider net (official README: it grows "
               "to about 0.4 by step 1e3 at width 900).",
    "figureB2": "width-100 NN ≈ its Theorem-4.1 KM (difference < 2e-3); bound 1.055 → 0.91 against NN test hinge "
                "1.0 → 0.84 over 100 epochs (official code, δ = 0.99 as coded, hinge loss treated as bounded).",
}


# --------------------------------------------------------------------------- settings
@dataclass
class Settings:
    """Sizes of every reproduction; ``quick()`` for CI (< 3 min on 2 cores), ``full()`` for the report."""

    name: str
    n_train: int | None  # None: all of the chosen data set's training images
    n_test: int | None
    # Table 3
    t3_lams: tuple = (0.0, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
    t3_svm_lam: float = 0.064
    # Figure 1
    f1_n: int = 128
    f1_n_test: int = 64
    f1_widths: tuple = (900, 10_000)
    f1_runs: tuple = ((0.1, 900), (0.1, 10_000), (0.01, 10_000))  # (η̂, width)
    f1_steps: int = 200
    f1_lam: float = 1e-3
    # Table 2
    t2_widths: tuple = (1000, 10_000)
    t2_seeds: tuple = (0, 1)
    t2_n_train: int = 384
    t2_steps: int = 300
    t2_lr: float = 1.0
    t2_batch: int = 64
    # Figure B.2
    b2_n: int = 1000
    b2_width: int = 100
    b2_steps: int = 100
    b2_chunk: int = 10
    b2_lr: float = 0.1
    # Table 1
    t1_n: int = 64
    t1_width: int = 2000
    t1_steps: int = 200
    t1_lr: float = 1.0
    # Figure A.1
    a1: bool = True
    a1_width: int = 10_000
    a1_n_train: int = 512
    a1_steps: int = 100
    seed: int = 0

    @classmethod
    def quick(cls):
        return cls(
            name="quick", n_train=400, n_test=100,
            f1_n=48, f1_n_test=16, f1_runs=((0.1, 900), (0.1, 10_000)), f1_steps=25,
            t2_seeds=(0,), t2_n_train=128, t2_steps=16,
            b2_n=150, b2_steps=20, b2_chunk=5,
            t1_n=24, t1_width=400, t1_steps=40,
            a1=False,
        )

    @classmethod
    def full(cls):
        return cls(name="full", n_train=None, n_test=None)


# --------------------------------------------------------------------------- progress
#: the plain progress line (no bar, no carriage return): tqdm's own count, elapsed, time left and rate
PLAIN_FORMAT = "{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class Log:
    """The main job's log: timestamped lines (``[  12.3 s] message``) and the progress of its loops.

    Lines go to ``stream`` (stdout).  Loops report through :meth:`progress`: a tqdm bar with rate and time left
    on ``bar_stream`` (stderr) when that is a terminal; otherwise (piped to a file, CI) plain lines on ``stream``
    about every tenth of a loop, with the same count, rate and time left and no bar fragments or carriage
    returns.  ``quiet=True`` prints neither lines nor progress.  ``bars`` forces the choice (``None``: decide
    by ``is_terminal(bar_stream)``).
    """

    def __init__(self, stream=None, quiet=False, *, bars=None, bar_stream=None):
        self.t0 = time.perf_counter()
        self.stream = stream or sys.stdout
        self.bar_stream = bar_stream or sys.stderr
        self.quiet = quiet
        self.bars = not quiet and (is_terminal(self.bar_stream) if bars is None else bool(bars))
        self.open_bars = 0

    def elapsed(self):
        return time.perf_counter() - self.t0

    def __call__(self, msg):
        if self.quiet:
            return
        line = f"[{self.elapsed():7.1f} s] {msg}"
        if self.bars:
            tqdm.write(line, file=self.stream)  # above the bars, which are redrawn below it
            self.stream.flush()
        else:
            print(line, file=self.stream, flush=True)

    def progress(self, iterable=None, label="", *, total=None, unit="it", leave=None):
        """The progress of one loop: iterate over it (``for x in log.progress(items, "label")``) or call
        ``update(k)`` (``with log.progress(total=n, label=...) as p``); ``set_postfix(text)`` adds a note.
        A bar stays on the screen when it closes (``leave``) unless it ran inside another bar."""
        return Progress(self, iterable, label, total, unit, leave)


class Progress:
    """One loop's progress (:meth:`Log.progress`): a tqdm bar, plain lines or nothing."""

    def __init__(self, log, iterable, label, total, unit, leave):
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.log, self.iterable, self.label, self.total, self.unit = log, iterable, label, total, unit
        self.n, self.t0, self.postfix = 0, time.perf_counter(), ""
        self._every = max(1, (total or 0) // 10)
        self._bar = None
        if log.bars:
            leave = log.open_bars == 0 if leave is None else leave
            log.open_bars += 1
            self._bar = tqdm(total=total, desc=label, unit=unit, file=log.bar_stream, leave=leave,
                             **tqdm_options(log.bar_stream))

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def set_postfix(self, text):
        self.postfix = str(text)
        if self._bar is not None:
            self._bar.set_postfix_str(self.postfix)

    def update(self, k=1):
        before, self.n = self.n, self.n + k
        if self._bar is not None:
            self._bar.update(k)
        elif not self.log.quiet and (self.n == self.total or self.n // self._every > before // self._every):
            self.log("  " + tqdm.format_meter(self.n, self.total, time.perf_counter() - self.t0, prefix=self.label,
                                              unit=self.unit, postfix=self.postfix or None, bar_format=PLAIN_FORMAT))

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self.log.open_bars -= 1


# --------------------------------------------------------------------------- claims
@dataclass
class Claim:
    """One qualitative claim of the paper and whether this run reproduces it.

    ``known_difference=True`` marks a statement of the paper that this reproduction is known not to reproduce, for a
    reason documented in its section (an erratum, an unstated setting, a result that does not hold): it is reported
    as "differs (documented)" with its measured detail and does not make the run fail.  Every other claim that does
    not hold makes ``python -m validation`` exit with status 1.
    """

    section: str
    text: str
    holds: bool
    detail: str
    checked_in_quick: bool = True
    known_difference: bool = False

    @property
    def verdict(self):
        if self.holds:
            return "holds"
        return "differs (documented)" if self.known_difference else "DIFFERS"

    @property
    def failed(self):
        return not self.holds and not self.known_difference

    def as_dict(self):
        return {"section": self.section, "claim": self.text, "holds": bool(self.holds), "detail": self.detail,
                "checked_in_quick": self.checked_in_quick, "known_difference": bool(self.known_difference)}


@dataclass
class Section:
    """What one reproduction returns: numbers (JSON-able), Markdown, figures, claims, wall time."""

    key: str
    title: str
    results: dict
    markdown: str
    figures: list = field(default_factory=list)
    claims: list = field(default_factory=list)
    seconds: float = 0.0


def mean_std(v):
    v = np.asarray(v, dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std())


def fmt(x, digits=4):
    """Compact number formatting for tables."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if x == 0:
        return "0"
    a = abs(x)
    if 1e-3 <= a < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def rel_diff(ours, paper):
    return (ours - paper) / paper if paper else float("nan")


def figure():
    """A new matplotlib figure module with the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_jsonable(obj):
    """Recursively convert NumPy values for ``json.dump``."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.floating,)):
        obj = float(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj

