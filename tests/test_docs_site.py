"""The API reference site (docs/conf.py, Sphinx): it lists every public name and renders the pages' math.

Fast tests check the sources that ``docs/apigen.py`` generates (one page per public module, every name of
``tests/test_public_api.py``'s ``PUBLIC_API`` with an entry, no private module); the ``slow`` tests build the
site once (``python -m sphinx -W --keep-going``: zero warnings) and read the HTML: every public name has an
entry or a link on its module's page, ``ntkref.kernels.fc`` shows its signature, its parameters and a rendered
example, and the four Markdown pages render their math with MathJax.  CI runs them all after installing
``.[docs]``; without Sphinx they are skipped.
"""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("numpydoc")
pytest.importorskip("myst_parser")
pytest.importorskip("pydata_sphinx_theme")

from .test_public_api import PUBLIC_API  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ("conventions", "errata", "reference-numbers", "oracle")


def _apigen():
    spec = importlib.util.spec_from_file_location("ntkref_docs_apigen", DOCS / "apigen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _is_private(path):
    return any(part.startswith("_") for part in path.split("."))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    modules = _apigen().write(out)
    return modules, {path.stem: path.read_text(encoding="utf-8") for path in out.glob("*.rst")}


def test_every_public_module_has_a_page_and_no_private_one(sources):
    modules, pages = sources
    assert set(PUBLIC_API) <= set(modules), sorted(set(PUBLIC_API) - set(modules))
    assert not [m for m in modules if _is_private(m)]
    assert set(pages) == set(modules) | {"index"}
    # the reference's index lists them all, in its table and its toctree
    for module in modules:
        assert re.search(rf"^   {re.escape(module)}$", pages["index"], re.M), module


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_the_generated_page_lists_every_public_name(sources, module):
    text = sources[1][module]
    assert f".. automodule:: {module}" in text
    listed = set(re.findall(r"^   (\w+)$", text, re.M))
    missing = [name for name in PUBLIC_API[module] if name not in listed]
    assert not missing, f"{module}: not in the summary tables: {missing}"
    documented = set(re.findall(r"^\.\. (?:autofunction|autoclass|autoexception|data):: (\w+)$", text, re.M))
    submodules = {name for name in PUBLIC_API[module]
                  if importlib.util.find_spec(f"{module}.{name}") is not None} if module == "ntkref" else set()
    undocumented = [name for name in PUBLIC_API[module] if name not in documented | submodules]
    assert not undocumented, f"{module}: no entry for {undocumented}"
    # nothing is documented under a private path
    assert not re.findall(r"::\s+\S*\._\w", text)


def test_constants_carry_the_docstring_where_they_are_defined(sources):
    # certify.H_ARGMIN is defined in a private module with an attribute docstring: the face's page shows it
    text = sources[1]["ntkref.certify"]
    block = text[text.index(".. data:: H_ARGMIN"):]
    assert "argmin h over [−1, 1]" in block.split(".. data::")[1]


# --- the built site ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs-site")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-d", str(out / "doctrees"), str(DOCS),
         str(out / "html")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    return proc, out / "html"


def _html(site, page):
    proc, html = site
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return (html / f"{page}.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_site_builds_with_zero_warnings(site):
    proc, html = site
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-3000:]
    assert (html / "index.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_every_public_name_appears_in_the_built_reference(site, module):
    text = _html(site, f"api/{module}")
    ids = set(re.findall(r'<dt[^>]*\bid="([^"]+)"', text))
    missing = [name for name in PUBLIC_API[module]
               if f"{module}.{name}" not in ids and f'#module-{module}.{name}"' not in text]
    assert not missing, f"{module}: no entry or link in the built page: {missing}"
    assert not [i for i in ids if _is_private(i.rpartition(".")[0])], "an object documented under a private module"


def _entry(text, object_id):
    """The HTML of one autodoc entry (its <dl>), from its <dt id=...> to the end of its description."""
    start = text.index(f'id="{object_id}"')
    dl = text.rindex("<dl", 0, start)
    depth, pos = 0, dl
    for match in re.finditer(r"<(/?)dl\b", text[dl:]):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            pos = dl + match.end()
            break
    return text[dl:pos]


@pytest.mark.slow
def test_kernels_fc_shows_its_signature_parameters_and_a_rendered_example(site):
    entry = _entry(_html(site, "api/ntkref.kernels"), "ntkref.kernels.fc")
    plain = re.sub(r"<[^>]+>", "", entry)
    # the signature, from the function itself
    assert re.search(r"ntkref\.kernels\.\s*fc\s*\(\s*x1\s*,\s*x2\s*=\s*None", plain), plain[:400]
    for default in ("depth=1", "activation='relu'", "W_std=1.0", "b_std=0.0", "engine='auto'"):
        assert default in re.sub(r"\s+", "", plain.split(")")[0] + ")") or default in re.sub(r"\s+", "", plain)
    # numpydoc's parameter list: every parameter by name, with its type
    params = entry[entry.index("Parameters"):entry.index("Returns")]
    for name in ("x1", "x2", "depth", "activation", "W_std, b_std", "get", "method", "block_size", "n_jobs",
                 "dtype", "engine"):
        assert f"<strong>{name}</strong>" in params, name
    assert "Number of hidden layers" in params
    # a rendered example: the docstring's Examples section as a highlighted doctest block
    assert "Examples" in entry, "ntkref.kernels.fc has no Examples section"
    example = entry[entry.index("Examples"):]
    assert "highlight-pycon" in example or "doctest" in example
    assert "&gt;&gt;&gt;" in example and "fc" in re.sub(r"<[^>]+>", "", example)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_the_pages_render_with_their_math(site, page):
    text = _html(site, page)
    assert re.search(r"<script[^>]+mathjax", text, re.I), "no MathJax script"
    assert re.search(r'class="math[^"]*"', text) and re.search(r"\\\(|\\\[", text), "no math node"


@pytest.mark.slow
def test_the_readme_and_its_tables_are_linked(site):
    index = _html(site, "index")
    for anchor in ("readme.html#conventions", "readme.html#backends", "api/index.html"):
        assert f'href="{anchor}"' in index, anchor
    readme = _html(site, "readme")
    assert 'id="backends"' in readme and 'id="conventions"' in readme
    # the backend table and the engines' dispatch table are rendered as tables
    tables = re.findall(r"<table.*?</table>", readme, re.S)
    assert any("array_api_strict" in t and "device1" in t for t in tables)
    assert any("kernels.fc" in t and "Dask arrays" in t for t in tables)
    # the README's links to the pages point at the pages of the site
    assert 'href="conventions.html"' in readme and 'href="errata.html"' in readme
