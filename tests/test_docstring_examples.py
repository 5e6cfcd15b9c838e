"""Every public function and class of the mathematical core's main modules shows an example that runs.

The examples themselves run in CI as a separate step, ``python -m pytest -q --doctest-modules ntkref -p
no:cacheprovider`` (NumPy backend; options in pyproject's ``doctest_optionflags``).  These tests check what that
step cannot: that no public name of ``kernels``, ``machines``, ``dynamics``, ``bounds`` and ``certify`` is
without a numpydoc ``Examples`` section, and that doctest's collection finds each example exactly once.  The
faces set each object's ``__module__`` to the public module and doctest attributes an object to the module
``inspect.getmodule`` names, so the examples are collected from the faces, never also from the private modules
(a name found twice would run twice; a name found nowhere would silently not run).
"""
from __future__ import annotations

import collections
import importlib
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

MODULES = ("ntkref.kernels", "ntkref.machines", "ntkref.dynamics", "ntkref.bounds", "ntkref.certify")
# public names of ntkref.kernels served by the Dask engine (the face loads it on first access); doctest collects
# their examples from the engine's module, whose functions they are
ENGINE = {"store_gram": "ntkref._engines.dask._store", "open_gram": "ntkref._engines.dask._store"}
ROOT = pathlib.Path(__file__).resolve().parents[1]
SECTION = re.compile(r"^\s*Examples\n\s*--------\n(?:.*\n)*?\s*>>> ", re.MULTILINE)


def public_objects():
    out = []
    for name in MODULES:
        mod = importlib.import_module(name)
        for attr in mod.__all__:
            if attr in ENGINE:
                out.append(pytest.param(name, attr, id=f"{name}.{attr}"))
                continue
            obj = getattr(mod, attr)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                out.append(pytest.param(name, attr, id=f"{name}.{attr}"))
    return out


def _object(module, attr):
    if attr in ENGINE:
        pytest.importorskip("dask.array")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize(("module", "attr"), public_objects())
def test_every_public_function_and_class_has_an_examples_section(module, attr):
    doc = inspect.getdoc(_object(module, attr)) or ""
    assert SECTION.search(doc + "\n"), f"{module}.{attr} has no numpydoc 'Examples' section with a '>>>' line"


def test_doctest_collection_imports_every_module_and_finds_each_example_exactly_once():
    # exactly what the CI step collects: every module of ntkref imported (none may fail or run anything), and the
    # examples of the public names above found once each (the Dask stores' in the engine module: the engine
    # renames their __module__ only when it registers, which collection does not do)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--doctest-modules", "ntkref", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    found = collections.Counter(line.rsplit("::", 1)[1] for line in out.stdout.splitlines() if "::" in line)
    expected = {f"{ENGINE.get(attr, module)}.{attr}" for module, attr in (p.values for p in public_objects())}
    assert len(expected) == 48
    assert {n: found[n] for n in sorted(expected) if found[n] != 1} == {}


def test_the_cli_main_module_runs_nothing_on_import():
    # pydoc, Sphinx's autodoc and doctest collectors import modules: `python -m ntkref.cli` must run only as a script
    out = subprocess.run([sys.executable, "-c", "import ntkref.cli.__main__; print('imported')"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == "imported\n", (out.returncode, out.stdout, out.stderr[-2000:])
