"""The pytest plugin used the way a peer uses it: a separate test module, run by pytest (pytester), with the
fixture ``ntkref_oracle``, the marker ``@pytest.mark.ntkref`` and the options ``--ntkref-mode`` /
``--ntkref-report``; the JSON it writes is validated against ``ntkref.testing.REPORT_SCHEMA``."""
import json
from importlib.metadata import PackageNotFoundError, distribution, entry_points

import pytest

from ntkref import testing as T

from .test_testing import _validate

pytest_plugins = ["pytester"]

PEER_MODULE = '''
import numpy as np
import pytest


def _probe():
    """Write into hypothesis' storage directory, as hypothesis' own scratch files would (its constants cache is
    written only for local source modules), to show where its writes land while a check runs."""
    import hypothesis
    import hypothesis.configuration as hconf
    if not hypothesis.currently_in_test_context():   # (the battery and the shrinking call it outside hypothesis)
        return
    probe = hconf.storage_directory("ntkref-probe")
    probe.create_if_missing()
    (probe.path / "touched").write_text("x")


def linear_ntk(x1, x2=None):
    """depth 0 (a linear model): Θ(x, x') = x·x'/d, written independently of ntkref."""
    _probe()
    x2 = x1 if x2 is None else x2
    return x1 @ x2.T / x1.shape[1]


def linear_ntk_without_one_over_d(x1, x2=None):
    _probe()
    x2 = x1 if x2 is None else x2
    return x1 @ x2.T


@pytest.mark.ntkref(depth=0, diag_tol=1e-12, offdiag_tol=1e-12, objective_tol=1e-9)
def test_my_ntk(ntkref_oracle):
    report = ntkref_oracle.check_kernel(linear_ntk)
    assert report.passed


@pytest.mark.ntkref(depth=0)
def test_my_wrong_ntk(ntkref_oracle):
    ntkref_oracle.check_kernel(linear_ntk_without_one_over_d)


def test_call_arguments_override_the_marker(ntkref_oracle):
    report = ntkref_oracle.check_kernel(linear_ntk_without_one_over_d, depth=0, raise_on_failure=False)
    assert not report.passed and ntkref_oracle.reports == [report]
'''


def _registered():
    return [e for e in entry_points(group="pytest11") if e.name == "ntkref"]


def _installed():
    try:
        distribution("ntkref")
    except PackageNotFoundError:
        return False
    return True


# A checkout used through PYTHONPATH (as on the GPU machine) has no entry point: load the plugin by name there.
PLUGIN = [] if _registered() else ["-p", "ntkref.pytest_plugin"]


@pytest.mark.skipif(not _installed(), reason="ntkref is used from a checkout on PYTHONPATH, not installed")
def test_entry_point_is_registered():
    eps = _registered()
    assert eps and eps[0].value == "ntkref.pytest_plugin"


def _reports(directory):
    out = {}
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        assert _validate(data, T.REPORT_SCHEMA) == [], path
        out[path.name] = data
    return out


def test_peer_module_assert_mode(pytester):
    pytester.makepyfile(test_peer=PEER_MODULE)
    out_dir = pytester.path / "reports"
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider", "--ntkref-max-examples", "15",
                                "--ntkref-report", str(out_dir))
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_my_wrong_ntk*", "*OracleMismatch*", "*ntkref oracle reports*"])
    reports = _reports(out_dir)
    assert len(reports) == 3
    good = [r for name, r in reports.items() if "test_my_ntk" in name]
    bad = [r for name, r in reports.items() if "test_my_wrong_ntk" in name]
    assert len(good) == len(bad) == 1
    good, bad = good[0], bad[0]
    assert good["passed"] and good["mode"] == "assert" and "diag_tol=1e-12" in good["description"]
    assert good["max_error"]["diagonal"] <= 1e-13  # x·x'/d vs ntkref: rounding only
    assert not bad["passed"] and bad["failure"]["kind"] == "convention"
    # the minimal example: one row of d ≥ 2 features (the 1/d bug is invisible for d = 1), off by the factor d
    x1 = bad["failure"]["inputs"]["x1"]
    d = len(x1[0])
    assert len(x1) == 1 and d >= 2
    assert bad["failure"]["error"] == pytest.approx(d - 1, rel=1e-12)
    assert f"{d:g} × reference" in bad["failure"]["hint"]


def test_peer_module_measure_mode_writes_tables(pytester):
    pytester.makepyfile(test_peer=PEER_MODULE)
    out_dir = pytester.path / "reports"
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider", "--ntkref-mode", "measure", "--ntkref-max-examples", "10",
                                "--ntkref-report", str(out_dir), "--ntkref-report-csv", "-k", "wrong")
    result.assert_outcomes(failed=1, deselected=2)
    (report,) = _reports(out_dir).values()
    assert report["mode"] == "measure" and report["n_examples_by_source"]["hypothesis"] == 10
    kind = report["failure"]["kind"]
    assert report["failures"][kind]["count"] >= 1
    assert report["failures"][kind]["minimal"]["replay"].startswith("@example((np.array(")
    csvs = list(out_dir.glob("*.csv"))
    assert len(csvs) == 1 and len(csvs[0].read_text().splitlines()) == report["n_entries"] + 1
    # the JSON holds the worst entries and the counts; the whole table is in the CSV only
    assert report["entries_listed"]["which"] == "worst" and len(report["entries"]) <= 20
    assert report["entries_listed"]["n_rows"] == report["n_entries"]
    assert report["test_id"] == "test_peer.py::test_my_wrong_ntk" and report["duration_s"] > 0
    assert report["config"]["depth"] == 0 and report["versions"]["ntkref"]


def test_no_csv_unless_asked_for_and_no_hypothesis_folder(pytester, monkeypatch):
    monkeypatch.delenv("NTKREF_HYPOTHESIS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "xdg"))
    pytester.makepyfile(test_peer=PEER_MODULE)
    out_dir = pytester.path / "reports"
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", "--ntkref-mode", "measure",
                                           "--ntkref-max-examples", "10", "--ntkref-report", str(out_dir), "-k", "wrong")
    result.assert_outcomes(failed=1, deselected=2)
    assert list(out_dir.glob("*.csv")) == [] and len(list(out_dir.glob("*.json"))) == 1
    assert not (pytester.path / ".hypothesis").exists()
    assert (pytester.path / "xdg" / "ntkref" / "hypothesis" / "ntkref-probe" / "touched").is_file()
    # the storage directory is configurable: the option, or the ini option
    elsewhere = pytester.path / "elsewhere"
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", "--ntkref-max-examples", "5",
                                           "--ntkref-hypothesis-dir", str(elsewhere), "-k", "test_my_ntk")
    result.assert_outcomes(passed=1, deselected=2)
    assert (elsewhere / "ntkref-probe" / "touched").is_file() and not (pytester.path / ".hypothesis").exists()
    pytester.makeini(f"[pytest]\nntkref_hypothesis_dir = {pytester.path / 'from_ini'}\n")
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", "--ntkref-max-examples", "5",
                                           "-k", "test_my_ntk")
    result.assert_outcomes(passed=1, deselected=2)
    assert (pytester.path / "from_ini" / "ntkref-probe" / "touched").is_file()
    assert not (pytester.path / ".hypothesis").exists()


def test_marker_rejects_unknown_keywords_naming_the_close_match(pytester):
    pytester.makepyfile(test_peer='''
import pytest

@pytest.mark.ntkref(max_exampels=5, depth=0)
def test_x(ntkref_oracle):
    pass
''')
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown keyword argument(s) 'max_exampels' (did you mean 'max_examples'?)*"])
    result.stdout.fnmatch_lines(["*Valid keywords:*diag_tol*"])


def test_marker_rejects_positional_arguments(pytester):
    pytester.makepyfile(test_peer='''
import pytest

@pytest.mark.ntkref(2)
def test_x(ntkref_oracle):
    pass
''')
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*keyword arguments only*"])
