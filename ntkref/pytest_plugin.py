"""pytest plugin: the ``ntkref_oracle`` fixture and the ``ntkref`` marker.

Registered through the ``pytest11`` entry point, so a peer project with ntkref installed writes::

    # test_my_ntk.py
    import pytest

    @pytest.mark.ntkref(depth=2, diag_tol=1e-12, offdiag_tol=1e-12)   # defaults for this test's checks
    def test_my_ntk(ntkref_oracle):
        ntkref_oracle.check_kernel(my_fn)            # raises OracleMismatch (a test failure) on disagreement

The fixture is an :class:`Oracle` whose ``check_kernel``, ``check_cntk``, ``check_fit``, ``check_dynamics``
and ``check_certificate`` are those of :mod:`ntkref.testing` with these defaults, lowest priority first:

1. the command-line options: ``--ntkref-mode {assert,measure}`` (default ``assert``),
   ``--ntkref-max-examples N`` (default: each checker's own), ``--ntkref-seed S`` (default 0);
2. the marker's keyword arguments (``@pytest.mark.ntkref(...)`` on the test, its class or module); a keyword a
   checker does not take is ignored by that checker (so one marker can serve check_kernel and check_fit), but a
   keyword *no* checker takes (a typo such as ``max_exampels``) is an error naming it, the closest valid keyword
   and the valid ones;
3. the call's own keyword arguments.

``--ntkref-report DIR`` writes each check's report as JSON (``CheckReport.to_dict()``: the 20 worst failing
entries and the counts, a few kilobytes; schema ``ntkref.testing.REPORT_SCHEMA``) to ``DIR/<test id>-<k>.json``,
whether it passed or failed; its ``test_id`` is the pytest node id.  ``--ntkref-report-csv`` adds, for kernel checks
in measure mode, the whole per-entry table next to it (``.csv``).  The fixture's ``reports`` list holds the reports
of the test.  The terminal summary lists the files written.

Hypothesis' files never go to the working directory (:mod:`ntkref.testing._storage`): the checks use no example
database (they are seeded: ``--ntkref-seed`` reproduces a run, the ``@example`` line a failure), and hypothesis'
storage directory (its scratch files) is ``--ntkref-hypothesis-dir PATH`` (alias ``--ntkref-hypothesis-db``), else
the ini option ``ntkref_hypothesis_dir``, else ``$NTKREF_HYPOTHESIS_DIR``, else ``$XDG_CACHE_HOME/ntkref/hypothesis``
(``~/.cache/ntkref/hypothesis``).

The plugin imports nothing heavy at start-up (``ntkref.testing`` and hypothesis only when the fixture is used),
so it costs nothing to test suites that do not use it.
"""
from __future__ import annotations

import difflib
import inspect
import os
import re

import pytest

_CHECKS = ("check_kernel", "check_cntk", "check_fit", "check_dynamics", "check_certificate")
_REPORTS_KEY = pytest.StashKey[list]() if hasattr(pytest, "StashKey") else None


def pytest_addoption(parser):
    group = parser.getgroup("ntkref", "ntkref oracle (ntkref.testing)")
    group.addoption("--ntkref-mode", choices=("assert", "measure"), default="assert",
                    help="assert: stop at the first disagreement (default); measure: run the whole example budget "
                         "and report every failure kind")
    group.addoption("--ntkref-report", metavar="DIR", default=None,
                    help="write each ntkref_oracle check's report as JSON (and kernel tables as CSV) into DIR")
    group.addoption("--ntkref-max-examples", type=int, default=None, metavar="N",
                    help="hypothesis examples per check (default: each checker's own)")
    group.addoption("--ntkref-seed", type=int, default=0, metavar="S", help="hypothesis seed of the checks")
    group.addoption("--ntkref-report-csv", action="store_true", default=False,
                    help="with --ntkref-report: also write the whole per-entry table of kernel checks as CSV")
    group.addoption("--ntkref-hypothesis-dir", "--ntkref-hypothesis-db", dest="ntkref_hypothesis_dir",
                    metavar="PATH", default=None,
                    help="where hypothesis keeps its files during the checks (default: $NTKREF_HYPOTHESIS_DIR, else "
                         "$XDG_CACHE_HOME/ntkref/hypothesis, never the working directory; the seeded checks use no "
                         "example database); also the ini option ntkref_hypothesis_dir")
    parser.addini("ntkref_hypothesis_dir", "where hypothesis keeps its files during the ntkref_oracle checks",
                  default=None)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "ntkref(**options): default keyword arguments for the ntkref_oracle checks of this test "
        "(e.g. depth=2, diag_tol=1e-12, mode='measure')",
    )
    if _REPORTS_KEY is not None:
        config.stash[_REPORTS_KEY] = []


class Oracle:
    """The ``ntkref_oracle`` fixture: ``ntkref.testing``'s checkers with the session's and the marker's defaults.

    Attributes
    ----------
    defaults : dict
        The keyword arguments every check gets unless the call overrides them.
    reports : list of CheckReport
        The reports of the checks run so far (in this test).
    report_dir : str or None
        Where reports are written (``--ntkref-report``).
    """

    def __init__(self, defaults, report_dir=None, name="test", written=None, *, csv=False, hypothesis_dir=None):
        self.defaults = dict(defaults)
        self.reports = []
        self.report_dir = report_dir
        self.test_id = name
        self.csv = bool(csv)
        self.hypothesis_dir = hypothesis_dir
        self._name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "test"
        self._written = written if written is not None else []

    def _run(self, check, candidate, kwargs):
        from . import testing  # lazily: hypothesis only when the fixture is used (module docstring)
        from .testing import _storage

        fn = getattr(testing, check)
        accepted = inspect.signature(fn).parameters
        merged = {k: v for k, v in self.defaults.items() if k in accepted}
        merged.update(kwargs)
        raise_on_failure = merged.pop("raise_on_failure", True)
        with _storage.storage_dir(self.hypothesis_dir):
            report = fn(candidate, raise_on_failure=False, **merged)
        report.test_id = self.test_id
        self.reports.append(report)
        self._write(report)
        if not report.passed and raise_on_failure:
            raise testing.OracleMismatch(report)
        return report

    def _write(self, report):
        if not self.report_dir:
            return
        os.makedirs(self.report_dir, exist_ok=True)
        base = os.path.join(self.report_dir, f"{self._name}-{len(self.reports)}")
        report.to_json(base + ".json")
        self._written.append(base + ".json")
        if report.entries and self.csv:
            report.to_csv(base + ".csv")
            self._written.append(base + ".csv")

    def check_kernel(self, candidate, **kwargs):
        """:func:`ntkref.testing.check_kernel` with the fixture's defaults."""
        return self._run("check_kernel", candidate, kwargs)

    def check_cntk(self, candidate, **kwargs):
        """:func:`ntkref.testing.check_cntk` with the fixture's defaults."""
        return self._run("check_cntk", candidate, kwargs)

    def check_fit(self, candidate, **kwargs):
        """:func:`ntkref.testing.check_fit` with the fixture's defaults."""
        return self._run("check_fit", candidate, kwargs)

    def check_dynamics(self, candidate, **kwargs):
        """:func:`ntkref.testing.check_dynamics` with the fixture's defaults."""
        return self._run("check_dynamics", candidate, kwargs)

    def check_certificate(self, candidate, **kwargs):
        """:func:`ntkref.testing.check_certificate` with the fixture's defaults."""
        return self._run("check_certificate", candidate, kwargs)


@pytest.fixture
def ntkref_oracle(request):
    """An :class:`Oracle` bound to the command-line options and the test's ``@pytest.mark.ntkref`` arguments."""
    config = request.config
    defaults = {"mode": config.getoption("--ntkref-mode"), "seed": config.getoption("--ntkref-seed")}
    n = config.getoption("--ntkref-max-examples")
    if n is not None:
        defaults["max_examples"] = n
    for marker in reversed(list(request.node.iter_markers("ntkref"))):  # closest marker last: it wins
        if marker.args:
            raise pytest.UsageError("@pytest.mark.ntkref takes keyword arguments only "
                                    f"(got positional {marker.args!r}).")
        _check_marker_keywords(marker.kwargs)
        defaults.update(marker.kwargs)
    written = config.stash[_REPORTS_KEY] if _REPORTS_KEY is not None else []
    return Oracle(defaults, config.getoption("--ntkref-report"), request.node.nodeid, written,
                  csv=config.getoption("--ntkref-report-csv"), hypothesis_dir=_hypothesis_dir(config))


def _valid_keywords():
    """The keyword arguments at least one checker takes (the marker's vocabulary)."""
    from . import testing

    names = set()
    for check in _CHECKS:
        params = inspect.signature(getattr(testing, check)).parameters.values()
        names |= {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD} - {"candidate"}
    return sorted(names)


def _check_marker_keywords(kwargs):
    valid = _valid_keywords()
    unknown = [k for k in kwargs if k not in valid]
    if not unknown:
        return
    parts = []
    for k in unknown:
        close = difflib.get_close_matches(k, valid, n=1)
        parts.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise pytest.UsageError(f"@pytest.mark.ntkref got unknown keyword argument(s) {', '.join(parts)}: no ntkref "
                            f"check takes them. Valid keywords: {', '.join(valid)}.")


def _hypothesis_dir(config):
    """--ntkref-hypothesis-dir, else the ini option, else None (``ntkref.testing._storage``'s default)."""
    value = config.getoption("ntkref_hypothesis_dir")
    if value is None:
        value = config.getini("ntkref_hypothesis_dir") or None
    return value


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _REPORTS_KEY is None:
        return
    written = config.stash.get(_REPORTS_KEY, [])
    if written:
        terminalreporter.write_sep("-", "ntkref oracle reports")
        for path in written:
            terminalreporter.write_line(path)
