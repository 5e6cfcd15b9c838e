"""Sphinx configuration of ntkref's documentation site.

Build it (``pip install ".[docs]"``)::

    python -m sphinx -W --keep-going docs docs/_build/html

The API reference (``docs/api/``) is generated from the code before every build by ``docs/apigen.py``: one
page per public module, listing every name of its ``__all__``; the user guide is the README and the Markdown
pages of ``docs/`` (MyST), with the math rendered by MathJax.
"""
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # document the checkout, not another installed ntkref
sys.path.insert(0, str(DOCS))

import apigen  # noqa: E402
import ntkref  # noqa: E402

project = "ntkref"
author = "the ntkref developers"
copyright = "the ntkref developers"
release = version = ntkref.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**/__pycache__"]
templates_path = []
# The docstrings and pages write primes and quotes as ASCII on purpose (x', l'(z, y), "relu"): keep them.
smartquotes = False
# Types are written in prose in the numpydoc sections ("array, shape (n, d)", "float ≥ 0") and some docstrings
# cite a private module for developers (:mod:`ntkref._engines.cuda`): such references render as text, as
# they do by default; every other warning fails the build (-W).
nitpicky = False

# --- API reference -------------------------------------------------------------------------------------------------
apigen.write(DOCS / "api")
autosummary_generate = False  # apigen writes the pages; autosummary only draws the tables of names
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections state the types
# numpydoc: class members are documented by autodoc's :members: (one entry each), not by an extra table of
# stub pages; parameter types are plain text (no cross-reference attempts).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True

# --- MyST: the README and docs/*.md ----------------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # the README's and the pages' links to "#backends", "conventions.md#fc-kernels"

# --- HTML ------------------------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"ntkref {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_show_sourcelink = False

# The module docstrings are plain text written for ``help()``, with numpydoc-style underlined headings
# ("Seed equations implemented" over a row of dashes).  Inside an ``automodule`` directive a section title is
# not allowed (docutils: "Unexpected section title"), so those headings become rubrics on the page; the
# docstrings themselves stay as they are.
_UNDERLINE = re.compile(r"^(?P<char>[-=~^])(?P=char){2,}\s*$")


def _module_headings_to_rubrics(app, what, name, obj, options, lines):
    if what != "module":
        return
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (line.strip() and not line.startswith((" ", "\t")) and _UNDERLINE.match(nxt)
                and len(nxt.strip()) >= len(line.strip())):
            out += [f".. rubric:: {line.strip()}", ""]
            i += 2
            if i < len(lines) and not lines[i].strip():
                i += 1
            continue
        out.append(line)
        i += 1
    lines[:] = out


# In ntkref's docstrings a bar is mathematics — |x| an absolute value, |S| a set's size, |K − R| an error — never
# a reStructuredText substitution reference (no docstring defines a substitution).  Docutils would read
# "|x|" as one and warn that it is undefined; the bars are escaped for rendering, outside inline literals and
# roles (``…``, :math:`…`), directive bodies (``.. math::``), literal blocks (after "::") and doctest blocks.
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]*`)")
_BAR = re.compile(r"(?<!\\)\|")


def _escape_bars_in_text(line):
    parts = _CODE_SPAN.split(line)
    return "".join(part if k % 2 else _BAR.sub(r"\\|", part) for k, part in enumerate(parts))


_TABLE_BORDER = re.compile(r"^\s*=+( +=+)+\s*$")


def _escape_bars_in_row(line, border):
    """Escape a simple table's row cell by cell, keeping every cell at its column (docutils reads the columns
    from the border's positions: one more character per escaped bar would shift the cells after it)."""
    starts = [m.start() for m in re.finditer(r"=+", border)] + [None]
    cells = [line[a:b] for a, b in zip(starts[:-1], starts[1:])]
    out = ""
    for k, cell in enumerate(cells):
        text = _escape_bars_in_text(cell.rstrip())
        width = len(cell) if k < len(cells) - 1 else 0
        out += text.ljust(width) if len(text) < width else text
    return out


def _bars_as_text(app, what, name, obj, options, lines):
    out, protect_deeper_than, doctest, border = [], None, False, None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if protect_deeper_than is not None:
            if not stripped or indent > protect_deeper_than:
                out.append(line)
                continue
            protect_deeper_than = None
        if doctest:
            if stripped:
                out.append(line)
                continue
            doctest = False
        if _TABLE_BORDER.match(line):
            closing = border is not None and (i + 1 == len(lines) or not lines[i + 1].strip())
            border = None if closing else line
            out.append(line)
        elif border is not None:
            out.append(_escape_bars_in_row(line, border))
        elif stripped.startswith(">>>"):
            doctest = True
            out.append(line)
        elif stripped.startswith(".. ") and "::" in stripped:
            protect_deeper_than = indent  # a directive: its arguments and body are not prose
            out.append(line)
        else:
            if stripped.endswith("::"):
                protect_deeper_than = indent  # the literal block that follows
            out.append(_escape_bars_in_text(line))
    lines[:] = out


def _reread_the_api_pages(app, env, added, changed, removed):
    # autodoc records a dependency on the face (ntkref/kernels/__init__.py), not on the private module that
    # holds the docstring (ntkref/kernels/_fc.py): re-read the API pages on every build, so an incremental
    # build never shows a stale docstring
    return [docname for docname in env.found_docs if docname.startswith("api/")]


def setup(app):
    app.connect("env-get-outdated", _reread_the_api_pages)
    app.connect("autodoc-process-docstring", _module_headings_to_rubrics, priority=400)
    app.connect("autodoc-process-docstring", _bars_as_text, priority=600)  # after numpydoc's rewriting (500)
