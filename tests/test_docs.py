"""The documentation is checked like code.

- Every ```python runnable block of docs/*.md is executed, each in a fresh namespace. These blocks state the
  conventions and their mappings to scikit-learn with assertions, so a wrong formula in the docs fails here.
  Blocks that need packages the test environment lacks (neural-tangents, jax) are plain ```python blocks and
  are not run.
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
