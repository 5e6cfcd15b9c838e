"""Packaging: what the wheel carries is decided by pyproject.toml, and these are its cheap, static checks.

- The version is written once, as a literal ``__version__`` in ``ntkref/__init__.py``, which setuptools reads from
  the source's AST (``dynamic = ["version"]``) — without importing ntkref, whose import checks ``NTKREF_BACKEND``;
- every file of ``ntkref/`` that is not Python source is matched by ``[tool.setuptools.package-data]`` (else the
  wheel would lack it while the tests, run from the checkout, still pass);
- every folder of ``ntkref/`` is a package that ``[tool.setuptools.packages.find]`` finds;
- the entry points name objects that exist, and ``CHANGELOG.md`` has an entry for the version.

The full check — build the sdist and the wheel, ``twine check``, install the wheel alone into a fresh venv and run
the smoke test there — is ``.ci/wheel`` (a CI step); ``test_wheel_smoke`` runs it with ``-m slow``.
"""
from __future__ import annotations

import ast
import fnmatch
import importlib
import os
import pathlib
import re
import subprocess
import sys

import pytest

import ntkref

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ntkref"
# PEP 440's public version scheme
PEP440 = re.compile(r"^([1-9][0-9]*!)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
                    r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$")


def _pyproject():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _skipped(path):
    rel = path.relative_to(ROOT).parts
    return "__pycache__" in rel or path.suffix in (".pyc", ".pyo")


def _package_dirs():
    return sorted(d for d in [PACKAGE, *PACKAGE.rglob("*")] if d.is_dir() and not _skipped(d))


def _version_assignments(source):
    return [node for node in ast.parse(source).body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(getattr(t, "id", None) == "__version__"
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))]


def test_version_is_single_sourced():
    project = _pyproject()["project"]
    assert "version" not in project, "pyproject.toml writes the version: it belongs in ntkref/__init__.py alone"
    assert "version" in project.get("dynamic", [])
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ntkref.__version__"}
    (assignment,) = _version_assignments((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    # a literal: setuptools reads it from the AST; anything computed would make it import ntkref
    assert isinstance(assignment.value, ast.Constant) and isinstance(assignment.value.value, str)
    assert assignment.value.value == ntkref.__version__
    assert PEP440.match(ntkref.__version__), ntkref.__version__


def test_setuptools_reads_the_version_without_importing_ntkref():
    # an import of ntkref under a bad NTKREF_BACKEND raises (check_environment): the build must not import it.
    # setuptools' attr: reads a literal from the AST, and imports the module for anything else (shown with
    # BACKENDS). A fresh process, so that no ntkref is already imported.
    pytest.importorskip("setuptools.config.expand")
    code = ("import sys\nfrom setuptools.config.expand import read_attr\n"
            "print(read_attr(sys.argv[1], package_dir=None, root_dir=sys.argv[2]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"NTKREF_BACKEND": "bogus"}

    def read(attr):
        return subprocess.run([sys.executable, "-I", "-c", code, attr, str(ROOT)], capture_output=True, text=True,
                              env=env, cwd=ROOT.parent, timeout=120)

    version = read("ntkref.__version__")
    assert version.returncode == 0 and version.stdout.strip() == ntkref.__version__, version.stderr
    imported = read("ntkref.BACKENDS")
    assert imported.returncode != 0 and "BackendError" in imported.stderr, (imported.stdout, imported.stderr)


def test_installed_metadata_has_the_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("ntkref")
    except PackageNotFoundError:
        pytest.skip("ntkref is used from a checkout on PYTHONPATH, not installed")
    assert installed == ntkref.__version__


def test_package_data_covers_every_data_file():
    package_data = _pyproject()["tool"]["setuptools"]["package-data"]
    data_files = [p for p in PACKAGE.rglob("*") if p.is_file() and not _skipped(p) and p.suffix != ".py"]
    assert any(p.name == "golden.npz" for p in data_files) and any(p.suffix == ".npz" for p in data_files)
    unmatched = []
    for path in data_files:
        package = ".".join(path.parent.relative_to(ROOT).parts)
        patterns = [*package_data.get(package, ()), *package_data.get("*", ()), *package_data.get("", ())]
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns):
            unmatched.append(str(path.relative_to(ROOT)))
    assert not unmatched, f"not in [tool.setuptools.package-data], so not in the wheel: {unmatched}"
    # and no pattern names a package that does not exist (a moved module's data left behind)
    packages = {".".join(d.relative_to(ROOT).parts) for d in _package_dirs()}
    assert set(package_data) - {"*", ""} <= packages, sorted(set(package_data) - packages)


def test_every_folder_is_a_package_that_setuptools_finds():
    dirs = _package_dirs()
    assert len(dirs) >= 10, dirs
    missing = [str(d.relative_to(ROOT)) for d in dirs if not (d / "__init__.py").is_file()]
    assert not missing, f"folders of ntkref/ without __init__.py (not packages, not in the wheel): {missing}"
    setuptools = pytest.importorskip("setuptools")
    find = _pyproject()["tool"]["setuptools"]["packages"]["find"]
    found = set(setuptools.find_packages(where=str(ROOT), include=find["include"], exclude=find.get("exclude", ())))
    assert found == {".".join(d.relative_to(ROOT).parts) for d in dirs}
    for name in ("ntkref._lib", "ntkref._engines", "ntkref._engines.dask", "ntkref.machines", "ntkref.golden",
                 "ntkref.data"):
        assert name in found, name


def test_entry_points_name_existing_objects():
    pyproject = _pyproject()["project"]
    module, _, attr = pyproject["scripts"]["ntkref"].partition(":")
    assert callable(getattr(importlib.import_module(module), attr))
    plugin = importlib.import_module(pyproject["entry-points"]["pytest11"]["ntkref"])
    assert callable(plugin.pytest_addoption)


def test_changelog_has_an_entry_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = re.compile(rf"^## \[?{re.escape(ntkref.__version__)}\]?(\s|$)", re.MULTILINE)
    assert heading.search(text), f"CHANGELOG.md has no '## {ntkref.__version__}' section"
    assert "include CHANGELOG.md" in (ROOT / "MANIFEST.in").read_text(encoding="utf-8")  # the sdist carries it


@pytest.mark.slow
def test_wheel_smoke():
    # builds with `python -m build` (build and twine installed into a throwaway venv from the package index),
    # installs the wheel alone into a fresh venv and runs .ci/wheel_smoke.py there: about a minute
    run = subprocess.run(["bash", str(ROOT / ".ci" / "wheel")], capture_output=True, text=True, timeout=900,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                         | {"PYTHON": sys.executable})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert re.search(r"wheel smoke \(core\): \d+ passed, 0 failed", out), out[-3000:]
    assert re.search(r"wheel smoke \(plugin\): \d+ passed, 0 failed", out), out[-3000:]


def _third_party_imports(path):
    """Top-level names of every module an ntkref file imports (absolute imports only)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"ntkref"}


def test_the_oracle_extra_is_what_the_oracle_imports():
    """`pip install -e ".[oracle]"` installs hypothesis and nothing else; every package ntkref.testing, the pytest
    plugin and the golden record/replay import is then a core dependency, hypothesis, or pytest (the plugin runs
    inside pytest) — and the whole core (what ntkref.testing builds on) needs no other extra."""
    meta = _pyproject()["project"]
    assert meta["optional-dependencies"]["oracle"] == ["hypothesis>=6.80"]
    dist = {re.split(r"[<>=!\[ ;]", d)[0].replace("-", "_") for d in meta["dependencies"]}
    allowed = dist | {"hypothesis", "pytest"} | {"array_api_compat", "numpy", "scipy", "threadpoolctl", "tqdm"}
    files = [*sorted((PACKAGE / "testing").glob("*.py")), PACKAGE / "pytest_plugin.py",
             *sorted((PACKAGE / "golden").glob("*.py"))]
    found = {str(p.relative_to(ROOT)): sorted(_third_party_imports(p) - allowed) for p in files}
    assert {k: v for k, v in found.items() if v} == {}


def test_install_messages_say_what_works_from_a_checkout():
    """ntkref is not on a package index: `pip install "ntkref[peers]"` fails, so no message or doc says it; they say
    `pip install -e ".[EXTRA]"` from the checkout."""
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
             for p in [*PACKAGE.rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md",
                       ROOT / "validation" / "peers.py"]}
    bad = re.compile(r"pip install ['\"]?ntkref\[")
    assert {k for k, t in texts.items() if bad.search(t)} == set()
    assert '.[peers]' in texts["ntkref/adapters.py"] and '.[oracle]' in texts["ntkref/testing/__init__.py"]
