"""The documentation is checked like code.

- Every ```python runnable block of docs/*.md is executed, each in a fresh namespace. These blocks state the
  conventions and their mappings to scikit-learn with assertions, so a wrong formula in the docs fails here.
  Every other ```python block of README.md and docs/*.md is listed in PLAIN with the reason it is not a runnable
  block: it runs (after a prelude) where the packages it needs are importable — neural-tangents and jax (the
  peers extra), a Dask cluster (slow) — and skips naming them otherwise, or it is checked statically (compiled,
  every name it uses imported or given, every ntkref.<module>.<name> existing).
- The repository is self-contained: the project's internal planning notes are not part of it, so the
  documentation, the README, the validation scripts and the test helpers listed below must not cite them,
  and the certify benchmark must not read a fixed data path outside the repository.
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python runnable[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def runnable_blocks():
    out = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for k, m in enumerate(FENCE.finditer(text)):
            line = text.count("\n", 0, m.start()) + 2
            out.append(pytest.param(page, line, m.group(1), id=f"{page.name}:{line}"))
    return out


BLOCKS = runnable_blocks()


def test_docs_exist_and_have_runnable_blocks():
    for name in ("conventions.md", "errata.md", "reference-numbers.md"):
        assert (DOCS / name).is_file(), name
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("page, line, code", BLOCKS)
def test_runnable_snippet(page, line, code):
    # the snippets compare with scikit-learn: skip (not fail) where it is not installed
    if "sklearn" in code:
        pytest.importorskip("sklearn")
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": f"docs_snippet_{page.stem}_{line}"})


# ------------------------------------------------------------------ every other ```python block
# Each plain ```python block of README.md and docs/*.md is listed here by (page, its first line), with why it is not a
# `runnable` block and how it is checked instead: "needs" modules make it run (after "prelude", which defines the
# names the prose gives it) where they are importable and skip with that reason where not; "static" blocks (a test
# file for the reader's project, a cheat sheet of signatures with placeholder arguments) are compiled, and every
# name they use must be imported by them or be one of "given", and every ntkref.<module>.<name> they use must exist.
ALL_FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_NT_PRELUDE = "import numpy as np\nx = np.random.default_rng(0).standard_normal((6, 4))\n"
_DASK_PRELUDE = """import numpy as np
rng = np.random.default_rng(0)
X_train, X_test = rng.uniform(0, 1, (300, 6)), rng.uniform(0, 1, (40, 6))
y, y_test, lam = np.sign(X_train[:, 0] - 0.5), np.sign(X_test[:, 0] - 0.5), 1e-2
import dask.array as _da
X_test_dask = _da.from_array(X_test, chunks=(20, -1))
"""
PLAIN = {
    ("README.md", "from dask.distributed import Client, LocalCluster"): dict(
        reason="needs dask.distributed (the dask extra) and starts a 2-worker LocalCluster",
        needs=("dask.distributed", "zarr"), prelude=_DASK_PRELUDE, slow=True,
        replace=(("chunks=(5000, -1)", "chunks=(100, -1)"), ("memory_limit=\"4GB\"", "memory_limit=\"1GB\""))),
    ("README.md", "from ntkref import kernels, nets, losses, machines, dynamics, bounds, equivalence, certify, datasets, kkt, krr"):
        dict(reason="a cheat sheet of signatures with placeholder arguments (x1, K, `...`), checked statically",
             static=True,
             given={"x1", "x2", "x", "images1", "images2", "d", "c", "in_channels", "channels", "depth", "y", "lam",
                    "lr", "steps", "K", "times", "Kt", "norm_K0", "n", "a", "emp", "x_train", "x_test", "f_values",
                    "Y", "zeta", "theta", "mu", "sigma"}),
    ("conventions.md", "# requires neural-tangents (and jax): tests/test_docs.py runs it where the peers extra is installed"):
        dict(reason="needs neural-tangents and jax (the peers extra)", needs=("neural_tangents",), prelude=""),
    ("oracle.md", "# test_my_ntk.py in your project"): dict(
        reason="a test file for the reader's project (pytest runs it with the plugin; tests/test_plugin.py runs the "
               "same through pytester)", static=True, given={"my_ntk"}),
    ("oracle.md", "import jax; jax.config.update(\"jax_enable_x64\", True)"): dict(
        reason="needs neural-tangents and jax (the peers extra)", needs=("neural_tangents",), prelude=_NT_PRELUDE),
}


def plain_blocks():
    out = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for m in ALL_FENCE.finditer(text):
            if m.group(1).strip() == "runnable":
                continue
            code = m.group(2)
            line = text.count("\n", 0, m.start()) + 2
            key = (page.name, code.splitlines()[0].strip() if code.strip() else "")
            marks = [pytest.mark.slow] if PLAIN.get(key, {}).get("slow") else []
            out.append(pytest.param(key, code, id=f"{page.name}:{line}", marks=marks))
    return out


PLAIN_BLOCKS = plain_blocks()


def test_every_plain_block_is_listed_with_a_reason():
    keys = [p.values[0] for p in PLAIN_BLOCKS]
    assert [k for k in keys if k not in PLAIN] == [], "a ```python block that is neither runnable nor listed in PLAIN"
    assert [k for k in PLAIN if k not in keys] == [], "a stale entry of PLAIN"
    assert all(PLAIN[k]["reason"] for k in PLAIN)


def _unbound_names(code):
    """Names a block loads but never binds (imports, assignments, defs, loop and with targets, arguments)."""
    import ast
    import builtins

    tree = ast.parse(code)
    bound, used = set(dir(builtins)), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else used).add(node.id)
    return used - bound


def _ntkref_attributes(code):
    """(module, name) for every `<ntkref module>.<name>` the block uses, the modules as imported from ntkref."""
    import ast

    tree = ast.parse(code)
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ntkref":
            modules.update({(a.asname or a.name): f"ntkref.{a.name}" for a in node.names})
    return {(modules[n.value.id], n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules}


@pytest.mark.parametrize("key, code", PLAIN_BLOCKS)
def test_plain_snippet(key, code, tmp_path, monkeypatch):
    import importlib

    spec = PLAIN[key]
    if spec.get("static"):
        compile(code, key[0], "exec")
        assert _unbound_names(code) - spec["given"] == set()
        missing = [f"{m}.{a}" for m, a in _ntkref_attributes(code) if not hasattr(importlib.import_module(m), a)]
        assert missing == []
        return
    for module in spec["needs"]:
        pytest.importorskip(module, reason=spec["reason"])
    for old, new in spec.get("replace", ()):
        assert old in code
        code = code.replace(old, new)
    monkeypatch.chdir(tmp_path)  # a snippet writing files (K.zarr) writes them here
    namespace = {"__name__": "docs_plain_snippet"}
    exec(compile(spec["prelude"] + code, key[0], "exec"), namespace)
    client = namespace.get("client")
    if client is not None:
        client.close()
        client.cluster.close()


def test_the_old_readme_cheat_sheet_imported_neither_kkt_nor_krr():
    """The README's cheat sheet once used kkt.duality_gap and krr.solve_cg without importing them: the static check
    finds exactly those."""
    old = "from ntkref import kernels, machines\nkkt.duality_gap(alpha, K)\nkrr.solve_cg(K, y, lam)\n"
    assert _unbound_names(old) - {"alpha", "K", "y", "lam"} == {"kkt", "krr"}


def test_snippet_extraction_finds_only_marked_blocks(tmp_path):
    text = "```python runnable\na = 1\n```\n\n```python\n# requires neural-tangents\nimport jax\n```\n"
    assert [m.group(1) for m in FENCE.finditer(text)] == ["a = 1\n"]


# every text file a user gets: none may cite the team's internal notes (a file the repository does not have)
OWNED = sorted(
    str(p.relative_to(ROOT))
    for pattern in ("ntkref/**/*.py", "ntkref/**/*.md", "validation/**/*.py", "tests/*.py", ".ci/*", "README.md",
                    "pyproject.toml")
    for p in ROOT.glob(pattern)
    if p.is_file()
)


@pytest.mark.parametrize("rel", OWNED + [str(p.relative_to(ROOT)) for p in sorted(DOCS.glob("*.md"))])
def test_no_citation_of_internal_notes(rel):
    text = (ROOT / rel).read_text(encoding="utf-8")
    token = "SP" + "EC"  # spelled in two parts so that this file passes its own check
    hits = [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if token in line]
    assert not hits, "\n".join(hits)


def test_certify_benchmark_reads_no_fixed_path_outside_the_repository():
    text = (ROOT / "validation" / "bench" / "bench_certify.py").read_text(encoding="utf-8")
    for bad in ("/work/", "shared/data", "parents[3]"):
        assert bad not in text, bad
    assert "--mnist" in text and "load_digits01" in text


def _write_idx(path, array):
    import struct

    import numpy as np

    a = np.ascontiguousarray(array, dtype=np.uint8)
    path.write_bytes(struct.pack(">HBB", 0, 0x08, a.ndim) + struct.pack(">" + "I" * a.ndim, *a.shape) + a.tobytes())


def test_certify_benchmark_data_from_mnist_dir_or_embedded(tmp_path):
    """``load_images(None)`` is the embedded 0/1 digits; ``load_images(DIR)`` reads a subset's IDX pair, else a full
    MNIST's train/t10k pairs (pooled); a directory with neither is a FileNotFoundError naming the files."""
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("bench_certify", ROOT / "validation" / "bench" / "bench_certify.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    images, labels, source = bench.load_images()
    assert images.shape == (2128, 784) and labels.shape == (2128,) and "load_digits01" in source

    rng = np.random.default_rng(0)
    img, lab = rng.integers(0, 256, (5, 28, 28)), np.array([0, 1, 1, 0, 7])
    _write_idx(tmp_path / "images-idx3-ubyte", img)
    _write_idx(tmp_path / "labels-idx1-ubyte", lab)
    images, labels, source = bench.load_images(tmp_path)
    assert images.shape == (5, 784) and np.array_equal(images, img.reshape(5, -1)) and np.array_equal(labels, lab)

    full = tmp_path / "full"
    full.mkdir()
    for prefix, k in (("train-", 3), ("t10k-", 2)):
        _write_idx(full / f"{prefix}images-idx3-ubyte", img[:k])
        _write_idx(full / f"{prefix}labels-idx1-ubyte", lab[:k])
    images, labels, _ = bench.load_images(full)
    assert images.shape == (5, 784) and np.array_equal(labels, np.array([0, 1, 1, 0, 1]))

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="images-idx3-ubyte"):
        bench.load_images(empty)
