"""Faces of the public modules: objects defined in private modules report the public path.

A public module of ntkref (``ntkref.machines``, ``ntkref.certify``, …) is a *face*: a docstring, imports from
its private modules and ``__all__``.  :func:`set_public_module` makes each class and function it exports
report the face as its ``__module__`` (NumPy's ``set_module``), so reprs, pickles, tracebacks of
``help()`` and the API reference show ``ntkref.machines.KernelMachine``, the path a user imports it from,
not ``ntkref.machines._result``.  Pickling of a function or class looks it up by ``__module__`` and
``__qualname__``, which the face exports, so pickles round-trip.
"""
from __future__ import annotations

import inspect


def set_public_module(module, namespace, names):
    """Set ``__module__ = module`` on the classes and functions ``names`` of ``namespace`` that report a
    private module of ntkref (one with a component starting with ``_``); others are left as they are."""
    for name in names:
        obj = namespace[name]
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        home = getattr(obj, "__module__", None) or ""
        if home.startswith("ntkref") and any(part.startswith("_") for part in home.split(".")):
            obj.__module__ = module
