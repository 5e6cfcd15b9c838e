r"""The ``ntkref`` command line: language-neutral access to the reference.

Inputs are ``.npy`` files or arrays of ``.npz`` files (``file.npz:key``; the key
may be omitted when the archive holds one array); outputs are ``.npy``/``.npz``.
Files are always read with ``numpy.load(..., allow_pickle=False)``: a pickled
or object array is refused.  Output paths (``--out``, ``compare --report``/``--csv``) are
checked before any work (an existing, writable folder; not itself a folder), and
outputs are written atomically (a temporary file in the same folder, then a
rename; the temporary file is removed on any error), so a failed command leaves
nothing behind — nor does a killed one: on Linux the temporary file is an unnamed
``O_TMPFILE`` that gets its name only when complete, elsewhere a killed writer's
``.ntkref-w<pid>-….tmp`` is removed by the next command writing to that folder.  Options that the chosen ``--family`` does not use (``--activation``
with ``cntk``; ``--readout``, ``--filter-size``, ``--fix-first-last`` with ``fc``)
are refused, and ``compare``'s ``--rtol``, ``--diag-rtol``, ``--atol`` must be
finite and ≥ 0.

Commands (``ntkref COMMAND --help`` documents each):

``kernel``
    NNGP/NTK of a fully connected net (``ntkref.kernels.fc``, neural-tangents'
    convention, docs/conventions.md, 'FC kernels'): ``ntkref kernel --x1 a.npy [--x2 b.npy] --depth 3
    --activation relu --W-std 1 --b-std 0 --get ntk --out k.npy``; with
    ``--family cntk`` the CNTK of seed 004 (``ntkref.kernels.cntk``, images
    (n, C, H, W), ``--readout gap|flatten``).
``fit``
    Exact kernel-machine coefficients α of seed 000 eq. (7) (``ntkref.machines.fit``).
``dynamics``
    Gradient-flow or subgradient-descent trajectories (``ntkref.dynamics``).
``certify``
    Certified ℓ∞/ℓ2 radii of the two-layer NTK machine (``ntkref.certify.certified_radius``).
``compare``
    Compare a user's array with the reference computed from the same inputs and
    print max/median absolute, relative and scaled errors over the finite entries,
    where, the non-finite entries apart, and whether each entry is within its
    tolerance (FC kernels with ReLU or erf: the user's tolerance against the exact kernel, a proven verdict;
    elsewhere max(user tolerance, ntkref's stated bound for that entry), a tested one; each entry says which);
    exit status 1 on disagreement.  ``--report FILE.json`` writes the numbers
    (per-array summaries, worst entries with (row, col) and input rows, grouped
    by cause as non_finite / convention / precision / formula; schema in :mod:`ntkref.cli._verdict`),
    ``--csv FILE.csv`` the per-entry table.  ``--get both`` compares a .npz with
    'nngp' and 'ntk'.  On disagreement it tests the usual convention slips
    (kernels: NNGP vs NTK, a constant factor such as Arora et al.'s d·2^L; fits:
    λ′ = 2λ, λ/2, nλ, λ/n, 1/λ) and prints a hint for each that explains the
    candidate; ``--kind fit`` also reports the candidate's own duality gap and
    KKT residual (:mod:`ntkref.kkt`).

Exit status: 0 success (``compare``: agreement), 1 ``compare`` found a
disagreement, 2 usage or input error (argparse's convention; nothing written;
one line on stderr, no traceback) — a bad ``NTKREF_BACKEND``/``NTKREF_DEVICE``
included (``ntkref: error: ...``; ``--help`` and ``--version`` still work, while
``import ntkref`` in a program raises :class:`~ntkref.BackendError`).

Where the work runs: inputs are read with NumPy, moved explicitly to the namespace
``NTKREF_BACKEND`` names on the device ``NTKREF_DEVICE`` names (``--backend``
overrides the namespace; NumPy by default), the computation runs there, and
the results are copied back to the host (``ntkref._lib.backend.to_numpy``) only to
be written or printed.  So ``NTKREF_BACKEND=cupy ntkref kernel ...`` computes
on the GPU.  ``--json`` prints a machine-readable summary, and it, the one-line
messages and ``compare --report`` name the backend and device that ran
(``ntkref._lib.backend.description()``, e.g. "cupy on <CUDA Device 0> (NVIDIA H200)").
"""
from ..kernels._accuracy import kernel_error  # the one definition (validated), shared with ntkref.testing
from ._io import CLIError
from ._main import build_parser, main

__all__ = ["main", "build_parser", "kernel_error", "CLIError"]

from .._lib.api import set_public_module  # noqa: E402

set_public_module(__name__, globals(), __all__)
