"""The wheel's smoke test, run by .ci/wheel with the fresh venv's Python (``python -I``, from a temporary folder).

``core REPO WORK``: ntkref installed from the wheel alone (its declared dependencies, no pytest, no hypothesis).
``plugin REPO WORK``: the same venv after pytest and hypothesis were added.
``test-requirements NAME...``: print the wheel's ``test`` extra's requirement for each NAME, one a line.

REPO is the source the wheel was built from (.ci/wheel's copy of the checkout): read, never imported, for the
version's source, the tree of files that must have been installed and the public API's list (``tests/test_public_api.py``). WORK is a scratch folder.
"""
from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import json
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import traceback

TOL = 1e-13          # ntkref's documented float64 accuracy on the golden vectors (tests/test_golden.py)
GOLDEN_CASE = "fc-relu-depth2-bias"   # computed through the `ntkref` command: W_std 1.3, b_std 0.2 on the 'hard' set
NEEDS = {"ntkref.testing": "hypothesis", "ntkref.pytest_plugin": "pytest"}   # public modules with an extra's package

PEER_TEST = '''
import pytest

from ntkref.testing import OracleMismatch


def linear_ntk(x1, x2=None):
    """depth 0 (a linear model): Θ(x, x') = x·x'/d, written without ntkref."""
    x2 = x1 if x2 is None else x2
    return x1 @ x2.T / x1.shape[1]


@pytest.mark.ntkref(depth=0, diag_tol=1e-12, offdiag_tol=1e-12)
def test_right_ntk(ntkref_oracle):
    assert ntkref_oracle.check_kernel(linear_ntk).passed


@pytest.mark.xfail(strict=True, raises=OracleMismatch, reason="twice the NTK is not the NTK")
@pytest.mark.ntkref(depth=0)
def test_wrong_ntk(ntkref_oracle):
    ntkref_oracle.check_kernel(lambda x1, x2=None: 2.0 * linear_ntk(x1, x2))
'''


def _public_api(repo):
    """The frozen ``PUBLIC_API`` dict of tests/test_public_api.py, read from its AST (that file imports pytest)."""
    tree = ast.parse((repo / "tests" / "test_public_api.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PUBLIC_API" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("tests/test_public_api.py has no PUBLIC_API")


def _source_version(repo):
    tree = ast.parse((repo / "ntkref" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("ntkref/__init__.py assigns no __version__")


def _site_packages():
    return pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()


def _inside(path, folder):
    return pathlib.Path(path).resolve().is_relative_to(folder)


def _run(args, cwd, ok=(0,)):
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    if p.returncode not in ok:
        raise AssertionError(f"{' '.join(map(str, args))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def _bin(name):
    exe = pathlib.Path(sys.executable).with_name(name)
    assert exe.is_file(), f"the venv has no {name} script ({exe})"
    return exe


# ---------------------------------------------------------------- core: the wheel alone

def check_installed_from_the_wheel(repo, work):
    import ntkref

    site = _site_packages()
    assert _inside(ntkref.__file__, site), f"ntkref imported from {ntkref.__file__}, not from {site}"
    assert not _inside(ntkref.__file__, repo), f"ntkref imported from the checkout {ntkref.__file__}"
    # nothing on the path but the interpreter's own folders and the venv: no checkout, no current folder
    roots = [pathlib.Path(sys.base_prefix).resolve(), pathlib.Path(sys.prefix).resolve()]
    stray = [p for p in sys.path if not p or not any(_inside(p, r) for r in roots)]
    assert not stray, f"sys.path has {stray}"


def check_version_single_sourced(repo, work):
    import ntkref

    source = _source_version(repo)
    assert ntkref.__version__ == source == md.version("ntkref"), (ntkref.__version__, source, md.version("ntkref"))


def check_every_file_installed(repo, work):
    def relevant(parts):
        return "__pycache__" not in parts and not parts[-1].endswith((".pyc", ".pyo"))

    tree = {p.relative_to(repo).as_posix() for p in (repo / "ntkref").rglob("*")
            if p.is_file() and relevant(p.relative_to(repo).parts)}
    installed = {str(f).replace(os.sep, "/") for f in md.files("ntkref") if str(f).startswith("ntkref/")}
    installed = {f for f in installed if relevant(tuple(f.split("/")))}
    assert tree - installed == set(), f"files of ntkref/ missing from the wheel: {sorted(tree - installed)}"
    assert installed - tree == set(), f"files in the wheel that ntkref/ does not have: {sorted(installed - tree)}"
    site = _site_packages()
    missing = [f for f in installed if not (site / f).is_file()]
    assert not missing, f"listed in RECORD but not on disk: {missing}"


def check_golden_vectors(repo, work):
    import numpy as np

    from ntkref import golden

    m = golden.manifest()
    assert m["version"] == 1 and len(m["cases"]) >= 20, (m["version"], len(m["cases"]))
    assert golden.path("README.md").read_text(encoding="utf-8").startswith("# ntkref golden vectors")
    with golden.path("golden.npz").open("rb") as f, np.load(f, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for name in m["inputs"]:
        assert np.array_equal(arrays[f"inputs__{name}"], golden.inputs(name)), name
    for case in golden.cases():
        n = golden.inputs(case["inputs"]).shape[0]
        for output in case["values"]:
            v = golden.values(case["id"], output)
            assert v.shape == (n, n) and np.all(np.isfinite(v)) and np.array_equal(v, v.T), (case["id"], output)
            assert np.array_equal(arrays[f"{case['id']}__{output}"], v), (case["id"], output)


def check_embedded_digits(repo, work):
    import numpy as np

    from ntkref import data

    images, labels, index = data.load_digits01(return_index=True)
    assert images.shape == (data.N_DIGITS01, 784) and images.dtype == np.uint8, (images.shape, images.dtype)
    assert labels.shape == (data.N_DIGITS01,) and int((labels == 1).sum()) == 1127 and set(np.unique(labels)) == {0, 1}
    assert index.shape == (data.N_DIGITS01,) and len(np.unique(index)) == data.N_DIGITS01
    assert "MNIST" in data.path("README.md").read_text(encoding="utf-8")


def check_public_modules(repo, work):
    api = _public_api(repo)
    assert len(api) >= 20, sorted(api)
    for module, names in api.items():
        if module in NEEDS:
            continue
        mod = importlib.import_module(module)
        assert _inside(mod.__file__, _site_packages()), mod.__file__
        # ntkref's own lazily loaded submodules are imported by hasattr: those needing an extra come in 'plugin'
        missing = [n for n in names if f"{module}.{n}" not in NEEDS and not hasattr(mod, n)]
        assert not missing, f"{module} lacks {missing}"


def check_extra_modules_say_what_they_need(repo, work):
    # without the test extra, the modules that need it refuse with an ImportError naming the package
    for module, package in NEEDS.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            assert package in str(exc), f"import {module}: {exc}"
        else:
            raise AssertionError(f"{module} imported without {package} installed")


def check_console_script(repo, work):
    import numpy as np

    import ntkref
    from ntkref import golden

    (ep,) = [e for e in md.entry_points(group="console_scripts") if e.name == "ntkref"]
    assert ep.value == "ntkref.cli:main", ep.value
    exe = _bin("ntkref")
    out = _run([exe, "--version"], work).stdout.strip()
    assert out == f"ntkref {ntkref.__version__}", out

    case = golden.case(GOLDEN_CASE)
    p = case["params"]
    assert case["family"] == "fc" and p["activation"] == "relu", case
    np.save(work / "x.npy", golden.inputs(case["inputs"]))
    run = _run([exe, "kernel", "--x1", "x.npy", "--depth", str(p["depth"]), "--W-std", str(p["W_std"]),
                "--b-std", str(p["b_std"]), "--get", "both", "--out", "K.npz", "--json"], work)
    summary = json.loads(run.stdout)
    assert summary["backend"].startswith("numpy") and set(summary["arrays"]) == {"nngp", "ntk"}, summary
    with np.load(work / "K.npz", allow_pickle=False) as k:
        for output in ("nngp", "ntk"):
            ref = golden.values(GOLDEN_CASE, output)
            s = np.sqrt(np.diag(ref))
            err = np.abs(k[output] - ref)
            assert np.all(err <= TOL * s[:, None] * s[None, :]), (output, float(err.max()))


CORE = [check_installed_from_the_wheel, check_version_single_sourced, check_every_file_installed,
        check_golden_vectors, check_embedded_digits, check_public_modules, check_extra_modules_say_what_they_need,
        check_console_script]


# ---------------------------------------------------------------- plugin: with pytest and hypothesis

def check_extra_modules_import(repo, work):
    api = _public_api(repo)
    for module in NEEDS:
        mod = importlib.import_module(module)
        assert _inside(mod.__file__, _site_packages()), mod.__file__
        missing = [n for n in api.get(module, ()) if not hasattr(mod, n)]
        assert not missing, f"{module} lacks {missing}"


def check_pytest11_entry_point(repo, work):
    eps = [e for e in md.entry_points(group="pytest11") if e.name == "ntkref"]
    assert len(eps) == 1 and eps[0].value == "ntkref.pytest_plugin", eps
    assert eps[0].dist is None or eps[0].dist.name == "ntkref", eps[0].dist


def check_pytest_lists_the_plugin(repo, work):
    peer = work / "peer"
    peer.mkdir(exist_ok=True)
    (peer / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")   # rootdir here, no outside configuration
    help_text = _run([_bin("pytest"), "-p", "no:cacheprovider", "--help"], peer).stdout
    for option in ("--ntkref-mode", "--ntkref-report", "--ntkref-max-examples", "--ntkref-seed"):
        assert option in help_text, f"pytest --help does not list {option}"
    markers = _run([_bin("pytest"), "-p", "no:cacheprovider", "--markers"], peer).stdout
    assert "@pytest.mark.ntkref(**options)" in markers, markers


def check_peer_test_with_the_fixture(repo, work):
    peer = work / "peer"
    peer.mkdir(exist_ok=True)
    (peer / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (peer / "test_peer.py").write_text(PEER_TEST, encoding="utf-8")
    run = _run([_bin("pytest"), "-p", "no:cacheprovider", "-q", "--ntkref-max-examples", "20",
                "--ntkref-report", "reports", "test_peer.py"], peer)
    assert re.search(r"\b1 passed, 1 xfailed\b", run.stdout), run.stdout
    reports = sorted((peer / "reports").glob("*.json"))
    assert len(reports) == 2, reports
    verdicts = sorted(json.loads(r.read_text(encoding="utf-8"))["passed"] for r in reports)
    assert verdicts == [False, True], verdicts


PLUGIN = [check_extra_modules_import, check_pytest11_entry_point, check_pytest_lists_the_plugin,
          check_peer_test_with_the_fixture]


def test_requirements(names):
    """The wheel's ``test`` extra's requirement for each name (e.g. ``pytest>=7``), one a line."""
    found = {}
    for req in md.requires("ntkref") or ():
        spec, _, marker = req.partition(";")
        if re.search(r"""extra\s*==\s*["']test["']""", marker):
            name = re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0).lower()
            found[name] = spec.strip()
    missing = [n for n in names if n.lower() not in found]
    if missing:
        sys.exit(f"the wheel's test extra does not name {missing}: {found}")
    print("\n".join(found[n.lower()] for n in names))


def main(argv):
    if argv[:1] == ["test-requirements"]:
        return test_requirements(argv[1:])
    if len(argv) != 3 or argv[0] not in ("core", "plugin"):
        sys.exit(__doc__)
    stage, repo, work = argv[0], pathlib.Path(argv[1]).resolve(), pathlib.Path(argv[2]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    failed = 0
    checks = CORE if stage == "core" else PLUGIN
    for check in checks:
        try:
            check(repo, work)
        except Exception:  # every check runs; each failure is shown in full
            failed += 1
            print(f"FAIL {check.__name__}\n{traceback.format_exc()}", flush=True)
        else:
            print(f"ok   {check.__name__}", flush=True)
    print(f"wheel smoke ({stage}): {len(checks) - failed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
