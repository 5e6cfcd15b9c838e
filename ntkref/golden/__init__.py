"""Golden vectors: small, versioned reference inputs and outputs for implementations in any language.

The files (``manifest.json`` and ``golden.npz`` in this folder, described in
``README.md``) are produced by ``validation/make_golden.py`` from an
independent high-precision mpmath evaluation of each kernel's defining formula
— not by ntkref — and ``tests/test_golden.py`` checks ntkref against them.

>>> from ntkref import golden
>>> m = golden.manifest()
>>> m["version"]
1
>>> case = golden.case("eq63")
>>> golden.inputs(case["inputs"]).shape
(7, 4)
"""
from __future__ import annotations

import json
from importlib import resources

__all__ = ["manifest", "cases", "case", "inputs", "values", "path"]


def path(name="manifest.json"):
    """A traversable path to one of the golden files (``manifest.json``, ``golden.npz``, ``README.md``)."""
    return resources.files(__name__).joinpath(name)


def manifest():
    """The parsed ``manifest.json`` (version, conventions, inputs, cases with their values)."""
    return json.loads(path("manifest.json").read_text(encoding="utf-8"))


def cases():
    """The list of cases (dicts with ``id``, ``family``, ``params``, ``inputs``, ``function``, ``values``)."""
    return manifest()["cases"]


def case(case_id):
    """The case called ``case_id``."""
    for c in cases():
        if c["id"] == case_id:
            return c
    raise KeyError(f"no golden case {case_id!r}; see ntkref.golden.cases()")


def inputs(name):
    """The input set ``name`` as a float64 NumPy array ((n, d); ``"images"``: (n, C, H, W))."""
    import numpy as np

    return np.array(manifest()["inputs"][name]["values"], dtype=np.float64)


def values(case_id, output="ntk"):
    """The reference matrix ``output`` (``"ntk"`` or ``"nngp"``) of a case, float64 (n, n)."""
    import numpy as np

    return np.array(case(case_id)["values"][output], dtype=np.float64)
