"""Coverage of the oracle (issue 24, items 4, 5, 9): the default battery of configurations and the coverage record,
float32 mode, the report's fields and size, and where hypothesis keeps its files.

Candidates are independent of ntkref where a pass is asserted (50-digit mpmath, tests/_mp_reference.py, or the
textbook recursion written here); planted bugs are slips of a known size, so each failure asserted is a real one.
"""
import json
import math
import os
import platform
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import strategies as st

from ntkref import kernels
from ntkref import testing as T

from ._mp_reference import fc_pair
from .test_testing import _validate

try:  # the real validator where installed; the small independent one of tests/test_testing.py otherwise
    import jsonschema
except ImportError:  # pragma: no cover - depends on the environment
    jsonschema = None


def schema_errors(data):
    if jsonschema is not None:
        return [e.message for e in jsonschema.Draft202012Validator(T.REPORT_SCHEMA).iter_errors(data)]
    return _validate(data, T.REPORT_SCHEMA)


# ---------------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------------
def mp_ntk(x1, x2=None, *, depth, activation, W_std, b_std, which):
    """Correct and independent: 50-digit mpmath per entry, taking the configuration as keywords."""
    sym = x2 is None
    x2 = x1 if sym else x2
    out = np.empty((len(x1), len(x2)))
    for i, a in enumerate(x1):
        for j, c in enumerate(x2):
            if sym and j < i:
                out[i, j] = out[j, i]
                continue
            nngp, ntk = fc_pair(a, c, depth, W_std, b_std, activation)[:2]
            out[i, j] = float(ntk if which == "ntk" else nngp)
    return out


def _fc(x1, x2, depth, activation, W_std, b_std, which):
    return np.asarray(getattr(kernels.fc(x1, x2, depth=depth, activation=activation, W_std=W_std, b_std=b_std), which))


# planted bugs, each invisible in the old default configuration (depth 1, ReLU, W_std 1, b_std 0, the NTK)
def bug_missing_bias(x1, x2=None, *, depth, activation, W_std, b_std, which):
    return _fc(x1, x2, depth, activation, W_std, 0.0, which)  # drops every b² term


def bug_layer_offset(x1, x2=None, *, depth, activation, W_std, b_std, which):
    return _fc(x1, x2, depth - 1 if depth >= 2 else depth, activation, W_std, b_std, which)  # one layer short ≥ 2


def bug_ntk_for_nngp(x1, x2=None, *, depth, activation, W_std, b_std, which):
    return _fc(x1, x2, depth, activation, W_std, b_std, "ntk")  # ignores `which`


def bug_relu_for_erf(x1, x2=None, *, depth, activation, W_std, b_std, which):
    return _fc(x1, x2, depth, "relu", W_std, b_std, which)  # the erf branch is never taken


def bug_w_not_squared(x1, x2=None, *, depth, activation, W_std, b_std, which):
    return _fc(x1, x2, depth, activation, math.sqrt(W_std), b_std, which)  # σ_w where σ_w² belongs


BUGS = [bug_missing_bias, bug_layer_offset, bug_ntk_for_nngp, bug_relu_for_erf, bug_w_not_squared]


def test_the_battery_covers_every_pair_of_values():
    # a covering array of strength 2: every pair of values of any two parameters occurs in some configuration
    values = {"depth": [0, 1, 2, 3], "activation": ["relu", "erf"], "W_std": [1.0, 1.5], "b_std": [0.0, 0.5],
              "which": ["nngp", "ntk"]}
    assert len(T.FC_BATTERY) == 16
    assert {(c["depth"], c["b_std"], c["which"]) for c in T.FC_BATTERY} == {
        (d, b, w) for d in values["depth"] for b in values["b_std"] for w in values["which"]}  # the full product
    names = list(values)
    for i, p in enumerate(names):
        for q in names[i + 1:]:
            pairs = {(c[p], c[q]) for c in T.FC_BATTERY}
            assert pairs == {(u, v) for u in values[p] for v in values[q]}, (p, q)
    cvalues = {"depth": [1, 2], "readout": ["gap", "flatten"], "W_std": [1.0, 1.5], "b_std": [0.0, 0.5],
               "which": ["nngp", "ntk"]}
    names = list(cvalues)
    for i, p in enumerate(names):
        for q in names[i + 1:]:
            assert {(c[p], c[q]) for c in T.CNTK_BATTERY} == {(u, v) for u in cvalues[p] for v in cvalues[q]}


@pytest.mark.parametrize("bug", BUGS, ids=lambda f: f.__name__)
def test_the_default_battery_catches_what_the_old_default_missed(bug):
    old_default = dict(depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk")
    # the old default configuration: each bug is exactly right there (the reason it went unnoticed)
    assert T.check_kernel(bug, **old_default, max_examples=10, raise_on_failure=False).passed
    report = T.check_kernel(bug, max_examples=16, raise_on_failure=False)
    assert not report.passed and report.failure.kind not in ("exception", "shape")
    assert report.coverage["how"] == "keywords" and report.failure.config is not None
    # the failing configuration really differs from the reference there (an independent mpmath value)
    cfg = report.failure.config
    x1, x2 = report.failure.inputs["x1"], report.failure.inputs["x2"]
    i, j = report.failure.location
    a, c = x1[i], (x1 if x2 is None else x2)[j]
    truth = fc_pair(a, c, cfg["depth"], cfg["W_std"], cfg["b_std"], cfg["activation"])[1 if cfg["which"] == "ntk"
                                                                                         else 0]
    assert report.failure.reference_value == pytest.approx(float(truth), rel=1e-12, abs=1e-300)
    assert abs(report.failure.candidate_value - float(truth)) > 1e-6 * abs(float(truth))


def test_a_correct_keyword_candidate_passes_every_configuration():
    # 50-digit mpmath, generic rows (mpmath is slow: a small budget), all 16 configurations in measure mode
    report = T.check_kernel(mp_ntk, inputs=T.generic_kernel_inputs(n1=(1, 2), n2=(1, 2), d=(2, 3)), max_examples=16,
                            mode="measure", diag_tol=1e-13, offdiag_tol=1e-13)
    assert report.passed and len(report.coverage["configs"]) == 16
    assert all(c["passed"] and c["n_examples"] == 1 for c in report.coverage["configs"])
    assert report.coverage["not_exercised"] == {"depth": [], "activation": [], "biases": [], "W_std": [],
                                                "which": [], "inputs": report.coverage["not_exercised"]["inputs"]}
    assert report.config["depth"] == [c["depth"] for c in T.FC_BATTERY]
    assert report.n_examples == sum(c["n_examples"] for c in report.coverage["configs"])


def test_a_factory_is_swept_too():
    built = []

    def make(depth, b_std, which):                   # builds the kernel of one configuration (as stax would)
        built.append((depth, b_std, which))
        return lambda x1, x2=None: _fc(x1, x2, depth, "relu", 1.0, b_std, which)

    report = T.check_kernel(make, factory=True, activation="relu", W_std=1.0, max_examples=8)
    assert report.passed and sorted(set(built)) == sorted({(d, b, w) for d in range(4) for b in (0.0, 0.5)
                                                           for w in ("nngp", "ntk")})
    assert report.coverage["how"] == "factory" and report.coverage["pinned"] == {"activation": "relu", "W_std": 1.0}
    bad = T.check_kernel(lambda depth, b_std, which: (lambda x1, x2=None: _fc(x1, x2, depth, "relu", 1.0, 0.0, which)),
                         factory=True, activation="relu", W_std=1.0, max_examples=8, raise_on_failure=False)
    assert not bad.passed and bad.failure.config["b_std"] == 0.5


def test_a_fixed_candidate_is_told_what_was_not_exercised():
    def fixed(x1, x2=None):
        return _fc(x1, x2, 1, "relu", 1.0, 0.0, "ntk")

    with pytest.warns(T.CoverageWarning, match=r"depth=, activation=, W_std=, b_std=, which=.*factory=True"):
        report = T.check_kernel(fixed, max_examples=10)
    assert report.passed and report.coverage["how"] == "fixed"
    missing = report.coverage["not_exercised"]
    assert missing["depth"] == [0, 2, 3] and missing["biases"] == ["with"] and missing["which"] == ["nngp"]
    assert missing["activation"] == ["erf"] and missing["W_std"] == ["!= 1"]
    assert "NOT exercised: depth 0, 2, 3" in report.coverage["line"] and report.coverage["line"] in str(report)
    assert report.coverage["assumed"] == {"depth": 1, "activation": "relu", "W_std": 1.0, "b_std": 0.0,
                                          "which": "ntk"}
    # pinning every parameter is a deliberate choice: no warning, and the line still says what was left out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pinned = T.check_kernel(fixed, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk", max_examples=5)
    assert pinned.coverage["assumed"] == {} and "depth 0, 2, 3" in pinned.coverage["line"]


def test_input_kinds_are_read_off_the_inputs_evaluated():
    # the default battery contains every hard kind; a strategy of generic rows of scale ~1 contains none of them
    hard = T.check_kernel(mp_ntk, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk", max_examples=0)
    seen = set(hard.coverage["exercised"]["inputs"])
    assert {"zero row", "tiny norm", "huge norm", "antiparallel (angle pi)", "near-parallel (angle <= 1e-6)",
            "orthogonal", "duplicate rows", "d = 1"} <= seen
    # extremes: the battery's 1e-150 and 1e150 rows and its 1e-12 rad angle (each computed here from hard_inputs)
    rows = [r for _, x1, x2 in T.hard_inputs(4) for r in (list(x1) + ([] if x2 is None else list(x2)))]
    norms = [float(np.linalg.norm(r / np.max(np.abs(r))) * np.max(np.abs(r))) for r in rows if np.any(r)]
    ext = hard.coverage["input_extremes"]
    assert ext["min_norm"] == pytest.approx(min(norms), rel=1e-12)
    assert ext["max_norm"] == pytest.approx(max(norms), rel=1e-12)
    assert ext["min_angle"] <= 1.1e-12
    plain = T.check_kernel(mp_ntk, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk", max_examples=5,
                           inputs=T.generic_kernel_inputs(n1=(2, 2), n2=(2, 2), d=(3, 3), scale_range=(0.5, 2.0)))
    assert plain.coverage["exercised"]["inputs"] == []
    assert {"tiny norm", "huge norm", "zero row", "antiparallel (angle pi)"} <= set(
        plain.coverage["not_exercised"]["inputs"])


def test_assert_mode_stops_at_the_first_failing_configuration_and_says_so():
    report = T.check_kernel(bug_layer_offset, max_examples=16, raise_on_failure=False)
    configs = report.coverage["configs"]
    ran = [c for c in configs if c["passed"] is not None]
    assert [c["passed"] for c in ran] == [True] * (len(ran) - 1) + [False]
    assert ran[-1]["depth"] == 2 and all(c["depth"] < 2 for c in ran[:-1])  # the first configuration it breaks
    assert all(c["n_examples"] == 0 for c in configs[len(ran):])
    assert any("stopped at the first failing configuration" in n for n in report.coverage["notes"])
    full = T.check_kernel(bug_layer_offset, max_examples=16, raise_on_failure=False, mode="measure")
    assert [c["passed"] for c in full.coverage["configs"]] == [c["depth"] < 2 for c in T.FC_BATTERY]


def _gap_as_flatten(x1, x2=None, *, depth, readout, W_std, b_std, which):
    return np.asarray(getattr(kernels.cntk(x1, x2, depth=depth, readout="flatten", W_std=W_std, b_std=b_std), which))


def _cntk(x1, x2=None, *, depth, readout, W_std, b_std, which):
    return np.asarray(getattr(kernels.cntk(x1, x2, depth=depth, readout=readout, W_std=W_std, b_std=b_std), which))


def test_check_cntk_sweeps_gap_and_flatten():
    report = T.check_cntk(_cntk, max_examples=8)
    assert report.passed and len(report.coverage["configs"]) == 8
    assert report.coverage["exercised"]["readout"] == ["gap", "flatten"]
    assert report.coverage["exercised"]["depth"] == [1, 2]
    bad = T.check_cntk(_gap_as_flatten, max_examples=8, mode="measure", raise_on_failure=False)
    assert [c["passed"] for c in bad.coverage["configs"]] == [c["readout"] == "flatten" for c in T.CNTK_BATTERY]


# ---------------------------------------------------------------------------------------------
# float32
# ---------------------------------------------------------------------------------------------
def _float32_fc(x1, x2=None, *, depth, activation, W_std, b_std, which):
    """ntkref's kernel computed in float32 (a correct float32 library)."""
    a1 = np.asarray(x1, dtype=np.float32)
    a2 = None if x2 is None else np.asarray(x2, dtype=np.float32)
    return _fc(a1, a2, depth, activation, W_std, b_std, which)


def textbook_float32(x1, x2=None, *, depth, which, relu_slip=1.0):
    """The ReLU recursion written out (independent of ntkref) in float64, returned in float32 — a float32 library
    whose own error is float64's √eps near parallel rows (~1e-8) plus the final rounding (~6e-8), far below the
    float32 bound 1e-5; ``relu_slip`` ≠ 1 plants a bug (a relative slip per layer)."""
    x1 = np.asarray(x1, dtype=np.float64)
    x2 = x1 if x2 is None else np.asarray(x2, dtype=np.float64)
    d = x1.shape[1]
    k = x1 @ x2.T / d
    q1, q2 = np.sum(x1 * x1, axis=1) / d, np.sum(x2 * x2, axis=1) / d
    ntk = k.copy()
    for _ in range(depth):
        s = np.sqrt(q1)[:, None] * np.sqrt(q2)[None, :]
        with np.errstate(all="ignore"):
            rho = np.clip(np.where(s > 0, k / np.where(s > 0, s, 1.0), 0.0), -1.0, 1.0)
        theta = np.arccos(rho)
        k = s * (np.sin(theta) + (np.pi - theta) * rho) / (2 * np.pi) * relu_slip
        ntk = k + ntk * (np.pi - theta) / (2 * np.pi)
        q1, q2 = q1 / 2 * relu_slip, q2 / 2 * relu_slip
    return (ntk if which == "ntk" else k).astype(np.float32)


def test_float32_mode_takes_the_certified_float32_bound():
    report = T.check_kernel(_float32_fc, dtype="float32", max_examples=16, mode="measure", raise_on_failure=False)
    assert report.passed, str(report)
    bound = T.certified_bound("fc", depth=1, dtype="float32")[0]
    assert bound == 1e-5
    first = T.check_kernel(_float32_fc, dtype="float32", depth=1, activation="relu", W_std=1.0, b_std=0.0,
                           which="ntk", max_examples=5)
    assert first.tolerance["user"] == {"diagonal": bound, "off-diagonal": bound, "atol": 0.0}
    assert "certified_bound('fc', depth=1, dtype='float32')" in first.tolerance["user_source"]
    assert first.tolerance["dtype_bound"] == bound and first.config["dtype"] == "float32"
    # the float32 errors are real (well above float64 rounding) and below the bound
    assert 1e-9 < max(report.max_error.values()) <= bound
    # an explicit tolerance still wins
    tight = T.check_kernel(_float32_fc, dtype="float32", depth=1, activation="relu", W_std=1.0, b_std=0.0,
                           which="ntk", diag_tol=1e-10, offdiag_tol=1e-10, max_examples=5, raise_on_failure=False)
    assert not tight.passed and tight.tolerance["user_source"] == "given by the call"


def test_float32_mode_passes_an_independent_float32_library_and_fails_a_buggy_one():
    def good(x1, x2=None, *, depth, which):
        return textbook_float32(x1, x2, depth=depth, which=which)

    def slipped(x1, x2=None, *, depth, which):  # a 1e-3 relative slip per layer: far above float32 rounding
        return textbook_float32(x1, x2, depth=depth, which=which, relu_slip=1.001)

    kw = dict(dtype="float32", activation="relu", W_std=1.0, b_std=0.0, max_examples=24)
    assert T.check_kernel(good, **kw).passed
    bad = T.check_kernel(slipped, **kw, raise_on_failure=False)
    assert not bad.passed and bad.failure.error > 1e-4 and bad.failure.config["depth"] >= 1


# ---------------------------------------------------------------------------------------------
# reports
# ---------------------------------------------------------------------------------------------
def test_report_fields_versions_duration_config():
    import time

    import hypothesis

    import ntkref

    t0 = time.perf_counter()
    report = T.check_kernel(bug_missing_bias, max_examples=16, raise_on_failure=False)
    wall = time.perf_counter() - t0
    assert report.versions["ntkref"] == ntkref.__version__ and report.versions["numpy"] == np.__version__
    assert report.versions["hypothesis"] == hypothesis.__version__
    assert report.versions["python"] == platform.python_version()
    assert 0 < report.duration_s <= wall and report.test_id is None
    d = report.to_dict()
    assert schema_errors(d) == [] and d["test_id"] is None and d["duration_s"] == report.duration_s
    assert d["failure"]["config"] == report.failure.config and d["config"]["dtype"] == "float64"
    assert d["config"]["tolerances"] == {"diag_tol": 1e-10, "offdiag_tol": 1e-10, "atol": 0.0}
    one = T.check_kernel(bug_missing_bias, depth=2, activation="erf", W_std=1.5, b_std=0.5, which="nngp",
                         max_examples=5, raise_on_failure=False).to_dict()
    assert {k: one["config"][k] for k in ("family", "depth", "activation", "W_std", "b_std", "which")} == {
        "family": "fc", "depth": 2, "activation": "erf", "W_std": 1.5, "b_std": 0.5, "which": "nngp"}
    assert schema_errors(one) == []


def test_a_failing_measure_mode_report_stays_small():
    def off_by_two(x1, x2=None, *, depth, activation, W_std, b_std, which):  # every entry fails
        return 2.0 * _fc(x1, x2, depth, activation, W_std, b_std, which)

    report = T.check_kernel(off_by_two, mode="measure", max_examples=200, raise_on_failure=False)
    failing = sum(s.n_entries for s in report.failures.values())
    assert failing > 1000 and len(report.entries) == report.n_entries
    d = report.to_dict()
    text = json.dumps(d, allow_nan=False)
    assert len(text.encode()) < 50_000, len(text)
    assert schema_errors(json.loads(text)) == []
    assert len(d["entries"]) == 20 and d["entries_listed"]["n_failing"] == failing
    assert d["entries_listed"]["n_rows"] == report.n_entries and d["entries_listed"]["which"] == "worst"
    worst = max(r["scaled_err"] / r["tolerance"] for r in report.entry_table("failing"))
    assert d["entries"][0]["scaled_err"] / d["entries"][0]["tolerance"] == worst
    # everything on request
    assert len(report.to_dict(entries="failing")["entries"]) == failing
    assert len(report.to_dict(entries="all")["entries"]) == report.n_entries
    with pytest.raises(T.InvalidParameterError if hasattr(T, "InvalidParameterError") else Exception,
                       match="entries"):
        report.to_dict(entries="everything")


# ---------------------------------------------------------------------------------------------
# hypothesis' files
# ---------------------------------------------------------------------------------------------
_SCRIPT = """
import numpy as np
from ntkref import kernels
from ntkref.testing import check_kernel, check_fit
import hypothesis
import hypothesis.configuration as hconf
def wrong(x1, x2=None):
    # a probe for whatever hypothesis writes while the check runs (its constants cache is written only for local
    # source modules, so not when ntkref is installed in site-packages): it lands in hypothesis' storage directory
    if hypothesis.currently_in_test_context():     # (the battery and the shrinking call it outside hypothesis)
        probe = hconf.storage_directory("ntkref-probe")
        probe.create_if_missing()
        (probe.path / "touched").write_text("x")
    return 2 * np.asarray(kernels.fc(x1, x2, depth=1).ntk)
r = check_kernel(wrong, depth=1, activation="relu", W_std=1.0, b_std=0.0, which="ntk", max_examples=20,
                 raise_on_failure=False)
assert not r.passed
"""


def _run_in(cwd, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NTKREF_HYPOTHESIS", "HYPOTHESIS_STORAGE"))}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(T.__file__)))]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    subprocess.run([sys.executable, "-c", _SCRIPT], cwd=cwd, env=env, check=True, timeout=300)


def test_no_hypothesis_folder_in_the_working_directory(tmp_path):
    # a fresh process (hypothesis caches the constants of local modules once per process, in its storage directory)
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    _run_in(work, {"XDG_CACHE_HOME": str(cache)})
    assert list(work.iterdir()) == []                           # nothing in the cwd, no .hypothesis
    store = cache / "ntkref" / "hypothesis"
    assert (store / "ntkref-probe" / "touched").is_file()       # hypothesis' writes land in the store
    assert not (store / "examples").exists()                    # and there is no example database
    other = tmp_path / "elsewhere"
    _run_in(work, {"XDG_CACHE_HOME": str(cache), "NTKREF_HYPOTHESIS_DIR": str(other)})
    assert list(work.iterdir()) == [] and (other / "ntkref-probe" / "touched").is_file()


def test_in_process_checks_leave_no_hypothesis_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    T.check_kernel(bug_missing_bias, max_examples=8, raise_on_failure=False)
    T.check_cntk(_cntk, max_examples=2)
    T.check_fit(lambda K, y, lam: np.linalg.solve(K + lam / 2 * np.eye(len(y)), y), loss="squared",
                max_examples=5, raise_on_failure=False)
    assert not (tmp_path / ".hypothesis").exists()
    st.integers()  # (hypothesis itself stays importable and usable afterwards)
