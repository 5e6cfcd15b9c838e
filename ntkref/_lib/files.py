"""The one atomic file writer: a file appears whole or not at all.

Used by the CLI's outputs (``--out``, ``--report``, ``--csv``), the oracle's reports
(``CheckReport.to_json`` / ``to_csv``) and the Gram stores.  ``write(f)`` runs on a temporary sibling of
the target (same folder, so the final ``os.replace`` is a rename within one file system, atomic on POSIX);
the data are flushed and fsync'd before the rename; on *any* exception — a serialiser raising half-way, a
full disk, ``KeyboardInterrupt`` — the temporary file is removed and an existing target is left untouched.
An :class:`OSError` propagates with the path in it; callers that own a parameter name (the CLI's
``--out``) turn it into their own error.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager

TEMP_PREFIX = ".ntkref-"
TEMP_SUFFIX = ".tmp"


def chmod_like_new_file(path):
    """mkstemp creates 0600 files; give ``path`` the permissions a plain ``open()`` would (0666 & ~umask)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def replace_atomically(path, write, *, mode="wb", encoding=None, newline=None):
    """Run ``write(f)`` on a temporary sibling of ``path`` opened with ``mode``, then rename it onto ``path``.

    Nothing is left behind on error: the temporary file is removed and an existing ``path`` keeps its old
    contents.  Raises the :class:`OSError` of the failing step (it names the path).
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding or "utf-8", "newline": newline}
        with os.fdopen(fd, mode, **kwargs) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        chmod_like_new_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def atomic_path(path, *, suffix=""):
    """Yield a fresh temporary sibling path of ``path``; on success move it onto ``path``, else remove it.

    For writers that need a path rather than a file object (memory-mapped ``.npy`` files, Zarr folders).
    A folder target is replaced by renaming the old one aside first and removing it only after the new
    one is in place, so a failure at any point leaves either the old target or the new one.
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = tempfile.mkdtemp(dir=folder, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    inner = os.path.join(tmp, "new" + suffix)
    try:
        yield inner
        if os.path.isdir(path) and not os.path.islink(path):
            aside = os.path.join(tmp, "old")
            os.rename(path, aside)
            try:
                os.rename(inner, path)
            except BaseException:
                os.rename(aside, path)
                raise
        else:
            os.replace(inner, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
