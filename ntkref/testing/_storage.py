"""Where hypothesis keeps its files while an ``ntkref.testing`` check runs: never the working directory.

Hypothesis writes its files under one *storage directory*, ``./.hypothesis`` unless told otherwise: its example
database and scratch files such as its cache of the constants found in local source modules (written even with
``database=None``).  ntkref's checks run with ``database=None`` and a ``@seed`` (hypothesis uses no example database
for a seeded test anyway): a check is reproduced by its seed, and a failure by its ``@example(...)`` replay line, on
any machine, with no state.  During every check (:func:`ntkref.testing._engine.run_search`) hypothesis' storage
directory is :func:`cache_dir`, and the previous setting is restored afterwards (the user's own hypothesis tests
keep theirs):

1. the directory set by :func:`storage_dir` (the pytest plugin's ``--ntkref-hypothesis-dir PATH``, alias
   ``--ntkref-hypothesis-db``, or its ini option ``ntkref_hypothesis_dir``), else
2. the environment variable ``NTKREF_HYPOTHESIS_DIR``, else
3. ``$XDG_CACHE_HOME/ntkref/hypothesis`` (``~/.cache/ntkref/hypothesis`` when ``XDG_CACHE_HOME`` is unset).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from pathlib import Path

import hypothesis.configuration as _hconf

ENV_DIR = "NTKREF_HYPOTHESIS_DIR"

_DIR = contextvars.ContextVar("ntkref_hypothesis_dir", default=None)


def cache_dir():
    """Hypothesis' storage directory during ntkref's checks (module docstring)."""
    override = _DIR.get()
    if override:
        return Path(override).expanduser()
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ntkref" / "hypothesis"


@contextlib.contextmanager
def storage_dir(path):
    """Use ``path`` (``None``: the default, module docstring) as hypothesis' storage directory inside the block."""
    token = _DIR.set(None if path is None else os.fspath(path))
    try:
        yield cache_dir()
    finally:
        _DIR.reset(token)


@contextlib.contextmanager
def hypothesis_home():
    """Point hypothesis' storage directory at :func:`cache_dir` for the duration, then restore the previous one."""
    previous = getattr(_hconf, "__hypothesis_home_directory", None)
    _hconf.set_hypothesis_home_dir(cache_dir())
    try:
        yield
    finally:
        _hconf.set_hypothesis_home_dir(previous)
