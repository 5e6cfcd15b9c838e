"""Golden vectors (ntkref/golden): ntkref agrees with them, and the script reproduces them.

The golden values come from validation/make_golden.py, an mpmath evaluation (650 working digits;
60 for the CNTK's moderate images) of each kernel's defining formula that does not import ntkref.  Here ntkref (in the namespace of
NTKREF_BACKEND) must match every entry to 1e-13 of the Cauchy–Schwarz scale √(K(x,x)K(x′,x′)),
its documented float64 accuracy, and exactly where that scale is 0.
"""
import json

import numpy as np
import pytest

from ntkref import InvalidParameterError, golden
from ntkref import kernels as K
from validation import make_golden

MANIFEST = golden.manifest()
CASES = MANIFEST["cases"]
TOL = 1e-13

# Cases ntkref is known to get wrong (strict xfail).  Empty: "fc-erf-depth2-hard" (erf at input norms
# 1e±100) found a cancellation and an overflow in the erf recursion, fixed in _layers._erf_layer.
KNOWN_WRONG = {}


def _ntkref_values(case, x, asxp, tonp):
    xa = asxp(x)
    p = case["params"]
    if case["family"] == "fc":
        r = K.fc(xa, depth=p["depth"], activation=p["activation"], W_std=p["W_std"], b_std=p["b_std"])
        return {"nngp": tonp(r.nngp), "ntk": tonp(r.ntk)}
    if case["family"] == "eq63":
        return {"ntk": tonp(K.two_layer_relu_ntk(xa))}
    if case["family"] == "arora":
        return {"ntk": tonp(K.arora_ntk(xa, depth=p["depth"]))}
    if case["family"] == "wei":
        return {"ntk": tonp(K.wei_kernel(xa, r_w=p["r_w"], r_u=p["r_u"]))}
    if case["family"] == "cntk":
        r = K.cntk(xa, depth=p["depth"], readout=p["readout"], filter_size=p["filter_size"], W_std=p["W_std"],
                   b_std=p["b_std"])
        return {"nngp": tonp(r.nngp), "ntk": tonp(r.ntk)}
    raise AssertionError(case["family"])


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c["id"], marks=[pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[c["id"]])]
                  if c["id"] in KNOWN_WRONG else []) for c in CASES],
)
def test_ntkref_matches_golden(case, asxp, tonp):
    x = golden.inputs(case["inputs"])
    got = _ntkref_values(case, x, asxp, tonp)
    for output, values in case["values"].items():
        G = np.array(values)
        s = np.sqrt(np.diag(G))
        scale = s[:, None] * s[None, :]
        bound = TOL * scale
        diff = np.abs(got[output] - G)
        assert np.all(np.isfinite(got[output]))
        bad = diff > bound
        assert not bad.any(), (
            f"{case['id']} {output}: max error {np.max(diff / np.where(scale > 0, scale, 1)):.3e} of the scale at "
            f"{np.unravel_index(np.argmax(bad), bad.shape)}"
        )


def test_manifest_structure_and_npz_agree():
    assert MANIFEST["format"] == "ntkref-golden" and MANIFEST["version"] == make_golden.VERSION
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    families = {c["family"] for c in CASES}
    assert families == {"fc", "eq63", "arora", "wei", "cntk"}
    assert {(c["params"]["readout"], c["params"]["depth"]) for c in CASES if c["family"] == "cntk"} >= {
        ("gap", 1), ("gap", 2), ("flatten", 1), ("flatten", 2)}
    fc_cases = {(c["params"]["activation"], c["params"]["depth"], c["params"]["b_std"] != 0)
                for c in CASES if c["family"] == "fc"}
    assert {(a, L, b) for a in ("relu", "erf") for L in range(4) for b in (False, True)} <= fc_cases
    with golden.path("golden.npz").open("rb") as f, np.load(f, allow_pickle=False) as z:
        for name in MANIFEST["inputs"]:
            assert np.array_equal(z[f"inputs__{name}"], golden.inputs(name))
        for c in CASES:
            for output, values in c["values"].items():
                G = np.array(values)
                assert np.array_equal(z[f"{c['id']}__{output}"], G)
                assert np.array_equal(G, G.T)  # symmetric Gram matrices
                assert np.all(np.diag(G) >= 0)
    assert golden.values("eq63").shape == (7, 7)
    with pytest.raises(KeyError):
        golden.case("no-such-case")


def test_unknown_names_are_refused_naming_the_parameter():
    """Unknown case ids, input sets, outputs and file names: a KeyError (FileNotFoundError for files) that is also
    an InvalidParameterError naming the parameter and listing the valid names."""
    from ntkref import InvalidParameterError

    for call, name, kind in [(lambda: golden.case("no-such-case"), "case_id", KeyError),
                             (lambda: golden.values("no-such-case"), "case_id", KeyError),
                             (lambda: golden.values("eq63", "nngp"), "output", KeyError),
                             (lambda: golden.inputs("no-such-set"), "name", KeyError),
                             (lambda: golden.path("no-such-file.json"), "name", FileNotFoundError)]:
        with pytest.raises(kind) as info:
            call()
        assert isinstance(info.value, InvalidParameterError) and f"'{name}'" in str(info.value)
    assert "'eq63'" in str(pytest.raises(KeyError, golden.case, "eq64").value)  # the valid ids are listed
    assert golden.path("golden.npz").is_file() and golden.path().name == "manifest.json"


def test_golden_encodes_the_conventions():
    # Θ(x, 0) = 0 without biases (row 3 of "hard" is zero); with biases it is b² terms only
    assert np.all(golden.values("fc-relu-depth2-nobias")[3] == 0)
    assert np.all(golden.values("fc-relu-depth2-bias")[3] > 0)
    # the identities of docs/conventions.md, 'FC kernels', hold between the independently computed golden families
    x = golden.inputs("hard")
    d = x.shape[1]
    np.testing.assert_allclose(golden.values("eq63"), golden.values("fc-relu-depth1-nobias"), rtol=1e-15, atol=0)
    np.testing.assert_allclose(golden.values("arora-depth1"), d * 2 * golden.values("fc-relu-depth1-nobias"),
                               rtol=1e-15)
    np.testing.assert_allclose(golden.values("arora-depth2"), d * 4 * golden.values("fc-relu-depth2-nobias"),
                               rtol=1e-15)


def test_inputs_are_reproduced_exactly():
    for name, x in make_golden.input_sets().items():
        assert np.array_equal(x, golden.inputs(name)), name


@pytest.mark.parametrize("case_id, rows", [("fc-relu-depth2-bias", [0, 1, 2, 3]), ("fc-erf-depth1-nobias", [0, 2, 3]),
                                           ("eq63", [1, 2, 5, 6]), ("arora-depth1", [0, 1]), ("wei", [2, 4]),
                                           ("cntk-gap-depth1", [0, 2])])
def test_script_reproduces_stored_values(case_id, rows):
    spec = next(s for s in make_golden.case_specs() if s["id"] == case_id)
    x = make_golden.input_sets()[spec["inputs"]]
    outs = make_golden.compute_case(spec, x, rows)
    for output, M in outs.items():
        stored = golden.values(case_id, output)[np.ix_(rows, rows)]
        assert np.array_equal(M, stored), (case_id, output)


def test_full_regeneration_reproduces_the_files():  # ~3 s: every case at 650 digits
    assert make_golden.check() == []


def test_manifest_is_plain_json():
    text = golden.path("manifest.json").read_text(encoding="utf-8")
    assert json.loads(text)["version"] == 1
    assert "NaN" not in text and "Infinity" not in text


# ------------------------------------------------------------------ device placement


@pytest.mark.parametrize("case_id", ["fc-relu-depth2-bias", "fc-erf-depth1-bias", "eq63", "arora-depth1", "wei",
                                     "cntk-gap-depth1"])
def test_golden_inputs_on_device1_give_results_on_device1(case_id):
    """The golden readers return host NumPy data; moved explicitly to array_api_strict's device1 (the CPU stand-in
    for a GPU), every kernel family returns arrays on device1 that still match the golden values."""
    import array_api_compat

    from ntkref import to_numpy

    strict = pytest.importorskip("array_api_strict")
    dev = strict.Device("device1")
    c = golden.case(case_id)
    x = golden.inputs(c["inputs"])
    assert isinstance(x, np.ndarray) and isinstance(golden.values(case_id), np.ndarray)

    def on_device1(a, dtype=None):
        return strict.asarray(a, device=dev)

    got = _ntkref_values(c, x, on_device1, lambda a: a)
    for output, values in c["values"].items():
        a = got[output]
        assert array_api_compat.array_namespace(a) is strict and array_api_compat.device(a) == dev
        G = np.array(values)
        s = np.sqrt(np.diag(G))
        assert np.all(np.abs(to_numpy(a) - G) <= TOL * s[:, None] * s[None, :]), (case_id, output)


# ------------------------------------------------------------------ the README's check formula


def _hard_fc_cases():
    return [c for c in CASES if c["inputs"] == "hard" and c["family"] == "fc"]


def test_readme_formula_product_of_square_roots_holds_where_the_old_form_fails():
    """ntkref/golden/README.md's check: |K − K_golden| ≤ tol·√K(x,x)·√K(x′,x′).  The old form
    tol·√(K(x,x)·K(x′,x′)) underflows to 0 at the hard set's row of norm 1e-100 (K(x,x) ~ 1e-200, the product
    1e-400), so it demands exact equality there and fails ntkref — correct to 1e-13 by the new form — on several
    cases; it also overflows to inf at the 1e100 row, where it would accept any value."""
    x = golden.inputs("hard")
    norms = np.linalg.norm(x, axis=1)
    tiny, huge = int(np.argmin(np.where(norms > 0, norms, np.inf))), int(np.argmax(norms))
    assert norms[tiny] < 1e-99 and norms[huge] > 1e99
    old_failures = 0
    for c in _hard_fc_cases():
        got = _ntkref_values(c, x, np.asarray, np.asarray)
        for output, values in c["values"].items():
            G = np.array(values)
            d = np.diag(G)
            with np.errstate(over="ignore"):
                old = TOL * np.sqrt(d[:, None] * d[None, :])
            new = TOL * np.sqrt(d)[:, None] * np.sqrt(d)[None, :]
            diff = np.abs(got[output] - G)
            assert np.all(diff <= new), (c["id"], output)                         # the README's form holds
            old_failures += int(np.sum(diff > old))
            if 0 < d[tiny] < 1e-160:                                               # no bias: K ~ 1e-200
                assert old[tiny, tiny] == 0 < new[tiny, tiny]                     # underflow of the old form
            if d[huge] > 1e160:
                assert old[huge, huge] == np.inf > new[huge, huge]                # overflow: accepts anything
    assert old_failures >= 5, old_failures
    text = golden.path("README.md").read_text(encoding="utf-8")
    assert "tol · √K_golden(x,x) · √K_golden(x′,x′)" in text
    assert "√(K_golden(x,x) · K_golden(x′,x′))" not in text


# ------------------------------------------------------------------ record / replay of one's own inputs


@pytest.fixture
def recorded(tmp_path):
    x = golden.inputs("hard")  # near-parallel, antiparallel, zero, 1e-100 and 1e100 rows
    path = tmp_path / "pinned.json"
    doc = golden.record(path, x, depth=2, activation="relu", W_std=1.3, b_std=0.2, which="both")
    return path, x, doc


def test_record_holds_the_reference_with_versions_and_replays(recorded):
    import ntkref

    path, x, doc = recorded
    assert doc["ntkref_version"] == ntkref.__version__ and doc["numpy_version"] == np.__version__
    assert doc["format"] == golden.RECORD_FORMAT and doc["format_version"] == golden.RECORD_VERSION == 1
    assert doc["config"] == {"depth": 2, "activation": "relu", "W_std": 1.3, "b_std": 0.2,
                             "which": ["nngp", "ntk"], "dtype": "float64"}
    assert golden.load_record(path) == doc                                  # the file round-trips exactly
    # the recorded values are the reference: within 1e-13·√·√ of the mpmath golden values of the same case
    G = golden.values("fc-relu-depth2-bias", "ntk")
    R = np.array(doc["values"]["ntk"])
    s = np.sqrt(np.diag(G))
    assert np.all(np.abs(R - G) <= 1e-13 * s[:, None] * s[None, :])
    assert np.array_equal(np.array(doc["inputs"]["x1"]), x)                 # inputs exact (17 digits)

    def mine(x1, x2=None):
        return K.fc(x1, x2, depth=2, activation="relu", W_std=1.3, b_std=0.2)

    res = golden.replay(path, mine, tol=1e-13)
    assert res.passed and res.n_outside == {"nngp": 0, "ntk": 0} and res.ntkref_version == ntkref.__version__


def test_replay_catches_a_bug_and_names_the_entries(recorded):
    path, x, _ = recorded

    def no_bias_in_readout(x1, x2=None):  # a missing b² term in the last layer
        k = K.fc(x1, x2, depth=2, W_std=1.3, b_std=[0.2, 0.2, 0.0])
        return {"nngp": np.asarray(k.nngp), "ntk": np.asarray(k.ntk)}

    with pytest.raises(golden.ReplayMismatch) as info:
        golden.replay(path, no_bias_in_readout)
    res = info.value.result
    assert isinstance(info.value, AssertionError) and not res.passed
    # every entry but those of the 1e100 row, where b² = 0.04 is below 1e-13 of the scale √K(x,x)·√K(x′,x′)
    assert res.n_outside["ntk"] == 6 * 6 and res.worst[0]["scaled_error"] > 1e-3
    assert all(w["row"] != 6 and w["col"] != 6 for w in res.worst)
    assert not golden.replay(path, no_bias_in_readout, raise_on_failure=False).passed

    def nan_at_zero_row(x1, x2=None):
        k = K.fc(x1, x2, depth=2, W_std=1.3, b_std=0.2)
        out = {"nngp": np.array(k.nngp), "ntk": np.array(k.ntk)}
        out["ntk"][3, 3] = np.nan
        return out

    res = golden.replay(path, nan_at_zero_row, raise_on_failure=False)
    assert res.n_outside == {"nngp": 0, "ntk": 1} and res.worst[0]["row"] == 3


def test_replay_rectangular_single_kernel(tmp_path):
    rng = np.random.default_rng(4)
    x1, x2 = rng.normal(size=(5, 3)), rng.normal(size=(4, 3))
    path = tmp_path / "rect.json"
    golden.record(path, x1, x2, depth=1, activation="erf", which="nngp")
    assert golden.replay(path, lambda a, b: K.fc(a, b, activation="erf").nngp).passed
    res = golden.replay(path, lambda a, b: 1.5 * np.asarray(K.fc(a, b, activation="erf").nngp),
                        raise_on_failure=False)
    assert res.n_outside == {"nngp": 20}
    with pytest.raises(InvalidParameterError, match="'candidate'.*shape"):
        golden.replay(path, lambda a, b: np.zeros((4, 5)))


def test_corrupted_or_foreign_files_are_refused(recorded, tmp_path):
    path, _, doc = recorded
    text = path.read_text(encoding="utf-8")
    # one digit of one value changed: the checksum no longer matches
    v = repr(doc["values"]["ntk"][0][1])
    assert text.count(v) >= 1
    changed = text.replace(v, v[:-1] + ("1" if v[-1] != "1" else "2"), 1)
    for bad_text, message in ((changed, "checksum"), (text[: len(text) // 2], "readable record"),
                              (json.dumps({"format": "other"}), "not an ntkref record"),
                              (text.replace('"format_version": 1', '"format_version": 2'), "format version 2")):
        bad = tmp_path / "bad.json"
        bad.write_text(bad_text, encoding="utf-8")
        with pytest.raises(InvalidParameterError, match=message):
            golden.replay(bad, lambda x1, x2=None: K.fc(x1, x2))
    with pytest.raises(InvalidParameterError, match="readable record"):
        golden.load_record(tmp_path / "missing.json")


def test_record_refuses_bad_parameters_and_keeps_the_old_file(recorded):
    path, x, _ = recorded
    before = path.read_bytes()
    for kw, name in (({"which": "all"}, "which"), ({"activation": "tanh"}, "activation"),
                     ({"W_std": -1.0}, "W_std")):
        with pytest.raises(InvalidParameterError, match=name):
            golden.record(path, x, **kw)
    with pytest.raises(InvalidParameterError, match="'x1'"):
        golden.record(path, np.full((2, 2), np.nan))
    with pytest.raises(InvalidParameterError, match="'path'"):
        golden.record(str(path)[:-5] + ".npz", x)
    with pytest.raises(InvalidParameterError, match="at most"):
        golden.record(path, np.ones((600, 2)))
    assert path.read_bytes() == before                                      # nothing half-written
    assert not [p for p in path.parent.iterdir() if p.name != path.name]    # no temporaries left
