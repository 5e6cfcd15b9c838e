"""Writes the API reference's sources: one reStructuredText page per public module of ntkref.

The public modules are found in the package itself: ``ntkref`` and every module or package below it whose
dotted path has no component starting with ``_`` (the faces; the private modules behind them never appear).
A module's public names are its ``__all__`` (in that order), or, for a module without one (the pytest plugin),
the classes and functions it defines whose names do not start with ``_``.  Each page has the module's docstring,
a summary table of every public name, then one entry per name: ``autofunction`` / ``autoclass`` /
``autoexception`` from the objects themselves (they report their public module, e.g.
``ntkref.machines.KernelMachine``), and a ``data`` entry for constants with the attribute docstring found where
the constant is defined.  ``docs/conf.py`` runs :func:`write` before every build, so the pages always follow the
code; ``tests/test_docs_site.py`` checks that every name of ``tests/test_public_api.py``'s ``PUBLIC_API`` is
listed.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

ROOT_PACKAGE = "ntkref"
KINDS = (  # section title, directive; a page lists its names in this order of kinds
    ("Modules", None),
    ("Functions", "autofunction"),
    ("Classes", "autoclass"),
    ("Exceptions and warnings", "autoexception"),
    ("Constants", "data"),
)


def public_modules():
    """The dotted paths of ntkref's public modules, sorted (``ntkref`` first)."""
    found = [ROOT_PACKAGE]

    def walk(package):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name.rsplit(".", 1)[1].startswith("_"):
                continue  # private modules and __main__
            found.append(info.name)
            if info.ispkg:
                walk(importlib.import_module(info.name))

    walk(importlib.import_module(ROOT_PACKAGE))
    return sorted(found)


def public_names(modname):
    """A module's public names: its ``__all__``, or the public classes and functions it defines."""
    module = importlib.import_module(modname)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [name for name, obj in vars(module).items()
            if not name.startswith("_") and getattr(obj, "__module__", None) == modname
            and (inspect.isclass(obj) or callable(obj))]


def kind(obj):
    """The section a public object is listed in (one of :data:`KINDS`' titles)."""
    if inspect.ismodule(obj):
        return "Modules"
    if inspect.isclass(obj):
        return "Exceptions and warnings" if issubclass(obj, BaseException) else "Classes"
    if callable(obj):
        return "Functions"
    return "Constants"


def _defining_module(modname, name, depth=0):
    """Follow ``from .x import name`` in the faces' sources to the module that assigns a constant."""
    module = importlib.import_module(modname)
    source = inspect.getsource(module)
    package = modname if hasattr(module, "__path__") else modname.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(alias.name == name and alias.asname in (None, name)
                                                    for alias in node.names):
            origin = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            return _defining_module(origin, name, depth + 1) if depth < 5 else origin
    return modname


def _attribute_doc(modname, name):
    """The attribute docstring (or ``#:`` comment) of a constant, from the module that assigns it."""
    from sphinx.pycode import ModuleAnalyzer

    lines = ModuleAnalyzer.for_module(_defining_module(modname, name)).find_attr_docs().get(("", name), [])
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return list(lines)


def _value(obj):
    """A short, deterministic rendering of a constant's value (no addresses, no page-long dicts)."""
    text = repr(obj)
    if len(text) <= 100 and " at 0x" not in text:
        return text
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{key!r}: …" for key in obj) + "}"
    return f"{type(obj).__name__} of {len(obj)} entries" if hasattr(obj, "__len__") else type(obj).__name__


def _title(text, char):
    return [text, char * len(text), ""]


def module_page(modname):
    """The reStructuredText source of one module's page."""
    module = importlib.import_module(modname)
    names = public_names(modname)
    groups = {title: [] for title, _ in KINDS}
    for name in names:
        groups[kind(getattr(module, name))].append(name)

    lines = [f".. _api-{modname}:", ""] + _title(f"``{modname}``", "=")
    lines += [f".. automodule:: {modname}", "   :no-members:", "", f".. currentmodule:: {modname}", ""]
    lines += _title("Summary", "-")
    lines += [f"Every public name of ``{modname}`` ({len(names)}).", ""]
    for title, _ in KINDS:
        if groups[title]:
            lines += [f".. rubric:: {title}", "", ".. autosummary::", "   :nosignatures:", ""]
            lines += [f"   {name}" for name in groups[title]]
            lines += [""]
    for title, directive in KINDS:
        if directive is None or not groups[title]:
            continue
        lines += _title(title, "-")
        for name in groups[title]:
            if directive == "data":
                lines += [f".. data:: {name}", f"   :value: {_value(getattr(module, name))}", ""]
                lines += [f"   {line}" if line else "" for line in _attribute_doc(modname, name)] + [""]
            else:
                lines += [f".. {directive}:: {name}"]
                if directive == "autoclass":
                    lines += ["   :members:"]
                lines += [""]
    return "\n".join(lines).rstrip() + "\n"


def index_page(modules):
    lines = [".. _api-reference:", ""] + _title("API reference", "=")
    lines += [
        "One page per public module, generated from the code: each lists every name of the module's ``__all__``",
        "with its docstring (parameters, returns, the equations it implements, its accuracy).  Objects are",
        "documented under the module a user imports them from (``ntkref.machines.KernelMachine``); the private",
        "modules behind these faces are not part of the API.",
        "",
        ".. autosummary::",
        "   :nosignatures:",
        "",
    ]
    lines += [f"   {modname}" for modname in modules] + [""]
    lines += [".. toctree::", "   :hidden:", "   :maxdepth: 1", ""]
    lines += [f"   {modname}" for modname in modules]
    return "\n".join(lines) + "\n"


def write(outdir):
    """Write ``index.rst`` and one ``<module>.rst`` per public module into ``outdir``; remove stale pages.

    Files whose content is unchanged are not rewritten, so Sphinx's incremental builds stay incremental.
    Returns the modules written.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    modules = public_modules()
    pages = {f"{modname}.rst": module_page(modname) for modname in modules}
    pages["index.rst"] = index_page(modules)
    for stale in outdir.glob("*.rst"):
        if stale.name not in pages:
            stale.unlink()
    for filename, text in pages.items():
        path = outdir / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return modules
