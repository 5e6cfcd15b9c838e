"""The house's rules, checked on the code (not on a drawing of it).

- The import graph of ``ntkref/`` — function-level imports included — has no circle, between modules (files)
  and between rooms (a top-level module or subpackage of ``ntkref`` counted as one room).
- The ground floor ``ntkref._lib`` imports nothing of ntkref outside itself.
- The core never imports an engine (``ntkref._engines``), ``dask`` or ``cupy``; the engines never import each other;
  nothing imports the oracle's front ends (``cli``, ``pytest_plugin``) from below.
- A NumPy run of the main public functions loads neither ``dask`` nor ``cupy`` nor an engine.
- The README's table of *public function × engine* is the one the registry makes, and each engine's ``register()``
  fills exactly the seams it declares.
- No module over 900 lines without its reason in its docstring.

import-linter's contracts in ``pyproject.toml`` state the layers as well (``lint-imports`` runs in CI); these
tests keep the same rules where import-linter is not installed.
"""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "ntkref"


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(module, node):
    """The ntkref modules an import statement of ``module`` reaches (most specific existing module)."""
    is_pkg = MODULES[module].name == "__init__.py"
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                out.append(name)
        return out
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("ntkref"):
        return out
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub in MODULES:
            out.append(sub)
            continue
        name = target
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def _imports(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    edges, external = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            external.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            external.add((node.module or "").partition(".")[0])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            edges.update(m for m in _resolve(module, node) if m != module)
    return edges, external


GRAPH = {m: _imports(m) for m in MODULES}


def _room(module):
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def _cycles(graph):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_parent_package(a, b):
    """``b`` is a package containing ``a``: importing a submodule runs its packages, not an import edge."""
    return a.startswith(b + ".")


def test_no_import_cycle_between_modules():
    graph = {m: {t for t in edges if not _is_parent_package(m, t)} for m, (edges, _) in GRAPH.items()}
    assert _cycles(graph) == []


def test_no_import_cycle_between_rooms():
    rooms = {}
    for m, (edges, _) in GRAPH.items():
        rooms.setdefault(_room(m), set()).update(_room(t) for t in edges if _room(t) != _room(m))
    assert _cycles(rooms) == []


def test_the_ground_floor_imports_nothing_above_it():
    bad = {m: sorted(t for t in edges if not t.startswith("ntkref._lib"))
           for m, (edges, _) in GRAPH.items() if m.startswith("ntkref._lib")}
    assert {m: e for m, e in bad.items() if e} == {}


def _core(module):
    return not module.startswith(("ntkref._engines", "ntkref._lib"))


def test_the_core_never_imports_an_engine_dask_or_cupy():
    bad = {}
    for m, (edges, external) in GRAPH.items():
        if not _core(m):
            continue
        wrong = sorted(t for t in edges if t.startswith("ntkref._engines"))
        wrong += sorted(e for e in external if e in ("dask", "cupy", "cupyx", "distributed", "zarr"))
        if wrong:
            bad[m] = wrong
    assert bad == {}


def test_engines_are_independent_and_nothing_imports_the_front_ends():
    for m, (edges, _) in GRAPH.items():
        if m.startswith("ntkref._engines.dask"):
            assert not any(t.startswith("ntkref._engines.cuda") for t in edges), m
        if m.startswith("ntkref._engines.cuda"):
            assert not any(t.startswith("ntkref._engines.dask") for t in edges), m
        for front in ("ntkref.cli", "ntkref.pytest_plugin", "ntkref.adapters"):
            if not m.startswith(front):
                assert not any(t == front or t.startswith(front + ".") for t in edges), (m, front)


def test_no_importlib_of_ntkref_modules():
    """ntkref's own modules are imported by import statements (visible to every reader and tool); the one
    exception is the seam, which loads an engine by name (``_lib/dispatch.py``)."""
    for m, path in MODULES.items():
        if m == "ntkref._lib.dispatch":
            continue
        text = path.read_text(encoding="utf-8")
        assert 'import_module("ntkref' not in text and "import_module(f\"ntkref" not in text, m
        assert "import_module(f'ntkref" not in text, m


def test_modules_over_900_lines_say_why():
    for m, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 900:
            doc = ast.get_docstring(ast.parse(text)) or ""
            assert "900 lines" in doc, f"{m} has {text.count(chr(10))} lines and no reason in its docstring"


def test_a_numpy_run_loads_neither_dask_nor_cupy_nor_an_engine():
    code = """
import sys
import numpy as np
import ntkref
from ntkref import certify, dynamics, kernels, kkt, krr, machines, nets
rng = np.random.default_rng(0)
x = rng.normal(size=(12, 3))
y = np.sign(x[:, 0] + 0.1)
K = kernels.fc(x, depth=2, b_std=0.1).ntk
kernels.fc(x, depth=1)
kernels.cntk(rng.normal(size=(3, 1, 4, 4)), depth=1)
m = machines.solve(K, y, "hinge", 0.1)
machines.fit(K, y, "squared", 0.1)
machines.hard_margin_svm(K, y)
machines.predict(m.alpha_, K)
krr.solve_cg(K, y, 0.1)
kkt.fit_with_intercept(K, y, "hinge", 0.1)
dynamics.gradient_flow(K, y, "squared", 0.1, [0.0, 1.0])
dynamics.subgradient_descent(K, y, "hinge", 0.1, lr=0.1, steps=5)
certify.certified_radius(m.alpha_, x, x[:2])
net = nets.FullyConnected(3, 8, depth=1)
nets.empirical_ntk(net, net.init(0), x[:4])
bad = sorted(n for n in sys.modules if n.split(".")[0] in ("dask", "cupy", "cupyx", "distributed")
             or n.startswith("ntkref._engines"))
print(bad)
"""
    env = {**os.environ, "NTKREF_BACKEND": "numpy"}
    env.pop("NTKREF_DEVICE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_readme_prints_the_registry_table():
    from ntkref._lib import dispatch

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert dispatch.markdown_table() in readme


def test_each_engine_registers_exactly_what_it_declares():
    from ntkref._lib import dispatch

    declared = dispatch.declared()
    names = {s.name for s in dispatch.SEAMS}
    for engine, seams in declared.items():
        assert set(seams) <= names, engine
    pytest.importorskip("dask.array")
    dispatch.load("dask")
    registered = {s.name for s in dispatch.SEAMS if "dask" in s._impls}
    assert registered == set(declared["dask"])
