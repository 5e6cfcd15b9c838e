"""The temporary sibling of a Gram store being written, its locks, and the three kinds of task that write it.

:func:`graph` is the delayed object of one :func:`~ntkref.kernels.store_gram` call (the protocol is described
in :mod:`._store`): ``prepare`` (the hidden folder ``.ntkref-<name>.<token>.partial`` next to the target, its
data file or Zarr array with the space reserved, ``plan.json`` last) -> one ``write`` per block still missing
(checked finite, written, fsync'd, then recorded as ``blocks/<i>.<j>.<checksum>``) -> ``commit`` (the
manifest, the target checked again, the rename, the folder removed).  Any exception in a task removes the
folder (:func:`discard`); a kill leaves it for :func:`resume`.

Two locks (``fcntl.flock``, released by the kernel when their holder dies): ``live.lock``, held exclusively by
the process that prepared the store until it commits — a partial store whose ``live.lock`` nobody holds is
stale (its writer died) and is removed by the next store_gram of the target, or resumed; ``write.lock``, held
shared by every task while it writes and exclusively by :func:`discard`, which unlinks it first: a task that
starts after a clean-up finds it gone and writes nothing, so no file is recreated after the clean-up.
"""
from __future__ import annotations

import contextlib
import json
import os

import array_api_compat
import numpy as np

from ..._lib import files
from ..._lib.backend import to_numpy
from ..._lib.validation import InvalidParameterError
from . import _manifest as M

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks, single writer assumed
    fcntl = None

PARTIAL = ".partial"
_LIVE = {}  # partial folder -> fd of its live.lock, held while this process writes that store
_PLAN_KEYS = ("layout", "shape", "dtype", "chunks", "compressed")


class _Abandoned(RuntimeError):
    """A block task found its store's temporary folder removed (another block failed, or the store was cancelled)."""


class Run:
    """One store_gram call, as every task sees it (picklable)."""

    def __init__(self, target, partial, plan, overwrite, todo, done, resumed):
        self.target, self.partial, self.plan, self.overwrite = target, partial, plan, overwrite
        self.todo, self.done, self.resumed = todo, done, resumed
        self.layout, self.dtype = plan["layout"], np.dtype(plan["dtype"])
        self.shape, self.chunks = tuple(plan["shape"]), tuple(tuple(c) for c in plan["chunks"])
        self.offset = len(M.npy_header(self.shape, self.dtype))
        self.data = os.path.join(partial, "data.npy" if self.layout == "npy" else "store")

    def region(self, i, j):
        r, c = M.offsets(self.chunks[0]), M.offsets(self.chunks[1])
        return r[i], r[i + 1], c[j], c[j + 1]

    @property
    def nbytes(self):
        return self.shape[0] * self.shape[1] * self.dtype.itemsize


# ------------------------------------------------------------------------------------------------ locks
def _is_live(partial):
    """Whether a running store_gram holds ``partial``'s live.lock (a dead writer's lock is released)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(os.path.join(partial, "live.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _hold_live(partial, target):
    fd = os.open(os.path.join(partial, "live.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InvalidParameterError(f"The 'path' parameter of store_gram: another store_gram is writing {target!r} "
                                        f"(its temporary {os.path.basename(partial)} is locked); wait for it.") from None
    _LIVE[partial] = fd


def _release_live(partial):
    fd = _LIVE.pop(partial, None)
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def _writing(run):
    """Hold ``write.lock`` shared while writing into the partial folder; yields False (write nothing) if the
    folder was removed — a failing block's clean-up: its error is the one to report, not a follow-up."""
    lock = os.path.join(run.partial, "write.lock")
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        yield False
        return
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            alive = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            alive = False
        yield alive
    finally:
        os.close(fd)


def _abandoned(run):
    return _Abandoned(f"store_gram of {run.target!r}: its temporary store was removed (a block failed, or the store "
                      "was cancelled); nothing was written at the target.")


def discard(partial):
    """Remove a partial store: wait for the blocks being written (``write.lock`` exclusive), unlink the lock so
    that later tasks abandon, remove the folder."""
    fd = None
    try:
        fd = os.open(os.path.join(partial, "write.lock"), os.O_RDONLY)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.unlink(os.path.join(partial, "write.lock"))
    except FileNotFoundError:
        pass
    try:
        files.remove_tree(partial)
    finally:
        if fd is not None:
            os.close(fd)
        _release_live(partial)


# ------------------------------------------------------------------------------------------------ targets
def _ours(path, layout):
    """Whether ``path`` holds a store written by store_gram (its manifest parses; its data are not checked)."""
    try:
        if layout == "npy":
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                tail = os.pread(f.fileno(), M.FOOTER, size - M.FOOTER) if size >= M.FOOTER else b""
                if tail[:len(M.MAGIC)] != M.MAGIC:
                    return False
                length = int.from_bytes(tail[len(M.MAGIC):], "little")
                raw = os.pread(f.fileno(), length, size - M.FOOTER - length) if length <= size - M.FOOTER else b""
        else:
            with open(os.path.join(path, M.ZARR_MANIFEST), "rb") as f:
                raw = f.read()
        M.parse(raw, path)
        return True
    except (OSError, InvalidParameterError):
        return False


def check_target(target, layout, overwrite):
    if not os.path.lexists(target):
        return
    if not _ours(target, layout):
        kind = "folder" if os.path.isdir(target) else "file"
        raise InvalidParameterError(f"The 'path' parameter of store_gram names an existing {kind} {target!r} that is "
                                    "not a store written by store_gram; it is left untouched: choose another path "
                                    "or remove it yourself.")
    if not overwrite:
        raise InvalidParameterError(f"The 'path' parameter of store_gram names an existing Gram store {target!r}; "
                                    "overwrite=False forbids replacing it (overwrite=True replaces it once the new "
                                    "store is complete); or read it with open_gram.")


# ------------------------------------------------------------------------------------------------ tasks
def _create_data(run):
    folder = os.path.dirname(run.target)
    if run.layout == "npy":
        fd = os.open(run.data, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, M.npy_header(run.shape, run.dtype))
            try:
                files.preallocate(fd, run.offset + run.nbytes)
            except OSError as exc:
                raise OSError(exc.errno, f"store_gram: cannot reserve the {run.nbytes / 2**30:.3g} GiB of the Gram "
                                         f"in {folder!r} ({exc.strerror}); nothing was written", run.target) from None
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    import zarr

    if not run.plan["compressed"]:
        import shutil

        free = shutil.disk_usage(folder).free
        if free < run.nbytes:
            import errno

            raise OSError(errno.ENOSPC, f"store_gram: the {run.nbytes / 2**30:.3g} GiB of the Gram do not fit in "
                                        f"{folder!r} ({free / 2**30:.3g} GiB free); nothing was written", run.target)
    fill = float("nan") if run.dtype.kind == "f" else 0
    zarr.create_array(store=run.data, shape=run.shape, chunks=(run.chunks[0][0], run.chunks[1][0]), dtype=run.dtype,
                      compressors="auto" if run.plan["compressed"] else None, fill_value=fill,
                      config={"write_empty_chunks": True}, zarr_format=3)


def _records(partial):
    """{(i, j): {checksums}} of the blocks recorded in ``partial``."""
    out = {}
    try:
        names = os.listdir(os.path.join(partial, "blocks"))
    except OSError:
        return out
    for name in names:
        parts = name.split(".")
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and len(parts[2]) == 32:
            out.setdefault((int(parts[0]), int(parts[1])), set()).add(parts[2])
    return out


def _prepare(run):
    if run.resumed:  # an interrupted store: take it over, drop the records that did not verify
        _hold_live(run.partial, run.target)
    else:
        for p in files.siblings(run.target, PARTIAL):
            if p != run.partial and not _is_live(p):
                discard(p)
        os.mkdir(run.partial)
    try:
        if not run.resumed:
            _hold_live(run.partial, run.target)
        else:
            with open(os.path.join(run.partial, "plan.json"), "rb") as f:
                theirs = json.loads(f.read())
                if {k: theirs[k] for k in _PLAN_KEYS} != {k: run.plan[k] for k in _PLAN_KEYS}:
                    raise InvalidParameterError(f"The 'resume' parameter of store_gram: the interrupted store of "
                                                f"{run.target!r} changed since store_gram was called.")
            # a kill during a clean-up may have unlinked write.lock only: the rest is still verified and usable
            os.close(os.open(os.path.join(run.partial, "write.lock"), os.O_WRONLY | os.O_CREAT, 0o644))
            for (i, j), sums in _records(run.partial).items():
                for hx in sums - {run.done.get((i, j))}:
                    os.unlink(os.path.join(run.partial, "blocks", f"{i}.{j}.{hx}"))
            if run.layout == "npy":  # drop the manifest of an interrupted commit; keep the reserved space
                fd = os.open(run.data, os.O_RDWR)
                try:
                    os.ftruncate(fd, run.offset + run.nbytes)
                    files.preallocate(fd, run.offset + run.nbytes)
                finally:
                    os.close(fd)
            else:  # the manifest of an interrupted commit, and Zarr's temporaries of chunks being written
                for root, _, names in os.walk(run.data):
                    rel = os.path.relpath(root, run.data).split(os.sep)
                    for n in names:
                        chunk = rel[0] == "c" and all(p.isdigit() for p in rel[1:]) and n.isdigit()
                        if not (chunk or (rel == ["."] and n == "zarr.json")):
                            os.unlink(os.path.join(root, n))
            return
        os.close(os.open(os.path.join(run.partial, "write.lock"), os.O_WRONLY | os.O_CREAT, 0o644))
        os.mkdir(os.path.join(run.partial, "blocks"))
        _create_data(run)
        files.write_durably(os.path.join(run.partial, "plan.json"), M.encode(run.plan))
        files.fsync_path(os.path.dirname(run.partial))
    except BaseException:
        discard(run.partial)
        raise


def _write(block, run, i, j, _prepared=None):
    """Check, write, fsync and record block (i, j); returns its checksum.  Any failure removes the partial store."""
    try:
        xp = array_api_compat.array_namespace(block)
        if xp.isdtype(block.dtype, "real floating") and not bool(xp.all(xp.isfinite(block))):
            raise InvalidParameterError(f"The 'K' parameter of store_gram must be finite; block ({i}, {j}) holds NaN "
                                        "or inf.")
        a = np.ascontiguousarray(to_numpy(block), dtype=run.dtype)
        r0, r1, c0, c1 = run.region(i, j)
        if a.shape != (r1 - r0, c1 - c0):
            raise InvalidParameterError(f"The 'K' parameter of store_gram: block ({i}, {j}) has shape {a.shape}, its "
                                        f"chunks say {(r1 - r0, c1 - c0)}.")
        hx = M.checksum(a, run.dtype)
        with _writing(run) as alive:
            if not alive:
                return None
            if run.layout == "npy":
                fd = os.open(run.data, os.O_RDWR)
                try:
                    M.pwrite_block(fd, run.offset, run.shape[1], r0, c0, a)
                    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)
                finally:
                    os.close(fd)
            else:
                z = M.zarr_array(run.data, "r+", (run.partial, os.stat(run.data).st_ino))
                z[r0:r1, c0:c1] = a
                files.fsync_path(os.path.join(run.data, z.metadata.encode_chunk_key((i, j))), data_only=True)
            os.close(os.open(os.path.join(run.partial, "blocks", f"{i}.{j}.{hx}"), os.O_WRONLY | os.O_CREAT, 0o644))
        return hx
    except BaseException:
        discard(run.partial)
        raise


def _commit(run, sums):
    """Write the manifest, check the target again, rename the result onto it, remove the partial folder."""
    try:
        done = dict(run.done)
        done.update(zip(run.todo, sums))
        with _writing(run) as alive:
            if not alive or None in sums:
                raise _abandoned(run)
            raw = M.encode(M.build(run.plan, done))
            if run.layout == "npy":
                fd = os.open(run.data, os.O_RDWR)
                try:
                    buf, pos = memoryview(raw + M.MAGIC + len(raw).to_bytes(8, "little")), run.offset + run.nbytes
                    os.ftruncate(fd, pos)
                    while len(buf):
                        n = os.pwrite(fd, buf, pos)
                        buf, pos = buf[n:], pos + n
                    os.fsync(fd)
                finally:
                    os.close(fd)
            else:
                for root, _, _ in os.walk(run.data):
                    files.fsync_path(root)
                files.write_durably(os.path.join(run.data, M.ZARR_MANIFEST), raw, scratch=run.partial)
            check_target(run.target, run.layout, run.overwrite)
            files.replace_path(run.data, run.target, aside=os.path.join(run.partial, "old"))
    except _Abandoned:
        raise
    except BaseException:
        discard(run.partial)
        raise
    discard(run.partial)
    return run.target


def finish_committed(partial, target):
    discard(partial)
    return target


def graph(K, run):
    """The delayed object of the whole protocol: prepare -> one task per block still to write -> commit."""
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    name = "store-gram-" + tokenize(K.name, run.partial, run.todo)
    prep, commit = f"{name}-prepare", f"{name}-commit"
    dsk = {prep: (_prepare, run)}
    lean = Run(run.target, run.partial, run.plan, run.overwrite, [], {}, run.resumed)  # a block task needs no lists
    keys = []
    for i, j in run.todo:
        keys.append((f"{name}-block", i, j))
        dsk[keys[-1]] = (_write, (K.name, i, j), lean, i, j, prep)
    dsk[commit] = (_commit, run, keys)
    return Delayed(commit, HighLevelGraph.from_collections(name, dsk, dependencies=[K]), layer=name)


# ------------------------------------------------------------------------------------------------ resume
def _src_of(run):
    """A reader of the partial store's data (None if the data are missing or not the plan's)."""
    try:
        if run.layout == "npy":
            with open(run.data, "rb") as f:
                if f.read(run.offset) != M.npy_header(run.shape, run.dtype):
                    return None
                if os.fstat(f.fileno()).st_size < run.offset + run.nbytes:
                    return None
            return M.Source(run.data, "npy", run.shape, run.dtype, offset=run.offset)
        import zarr

        z = zarr.open_array(run.data, mode="r")
        if tuple(z.shape) != run.shape or np.dtype(z.dtype) != run.dtype or tuple(z.chunks) != (
                run.chunks[0][0], run.chunks[1][0]):
            return None
        return M.Source(run.data, "zarr", run.shape, run.dtype)
    except Exception:  # missing or damaged: nothing to resume from
        return None


def _committed(run, recs):
    """The target's block checksums if it is the store this partial folder was committing (killed before its
    clean-up), else None."""
    try:
        man = M.read_npy(run.target)[0] if run.layout == "npy" else M.read_zarr(run.target)[0]
    except (InvalidParameterError, OSError):
        return None
    if (man["layout"], man["dtype"], man["shape"], man["chunks"]) != (run.layout, run.dtype.str, run.shape, run.chunks):
        return None
    sums = {(i, j): hx for i, row in enumerate(man["blocks"]) for j, hx in enumerate(row)}
    return sums if all(hx in recs.get(ij, ()) for ij, hx in sums.items()) else None


def _check_record(src, run, i, j, hx):
    r0, r1, c0, c1 = run.region(i, j)
    try:
        M.check_blocks(src, [(i, j, r0, r1, c0, c1, hx)], caller="store_gram")
        return True
    except (InvalidParameterError, OSError):
        return False


def resume(K, target, plan, overwrite):
    """(run, committed) for an interrupted store of ``target`` made by ``plan``, or None to start afresh."""
    import dask

    mine = {k: plan[k] for k in _PLAN_KEYS}
    found, others, live = [], [], []
    for p in files.siblings(target, PARTIAL):
        if _is_live(p):
            live.append(p)
            continue
        try:
            with open(os.path.join(p, "plan.json"), "rb") as f:
                theirs = json.loads(f.read())
            same = {k: theirs[k] for k in _PLAN_KEYS} == mine
        except (OSError, ValueError, KeyError, TypeError):
            continue
        (found if same else others).append((len(_records(p)), p, theirs))
    if not found:
        if live:
            raise InvalidParameterError(f"The 'resume' parameter of store_gram: the interrupted store of {target!r} "
                                        "is being written by another store_gram that is still running; wait for it.")
        if others:
            t = others[0][2]
            raise InvalidParameterError(
                f"The 'resume' parameter of store_gram: the interrupted store of {target!r} is a {t.get('layout')} "
                f"store of shape {tuple(t.get('shape', ()))}, dtype {t.get('dtype')}, blocks of "
                f"{[c[0] for c in t.get('chunks', [[0], [0]])]}; K is of shape {tuple(plan['shape'])}, dtype "
                f"{plan['dtype']}, blocks of {[c[0] for c in plan['chunks']]}. Pass resume=False to start over.")
        return None
    _, partial, theirs = max(found, key=lambda t: t[0])
    recs = _records(partial)
    run = Run(target, partial, dict(theirs), overwrite, [], {}, True)
    committed = _committed(run, recs)
    if committed is not None:
        run.done = committed
    else:
        src = _src_of(run)
        if src is None:
            return None
        cands = sorted((ij, hx) for ij, sums in recs.items() for hx in sums)
        ok = dask.compute(*[dask.delayed(_check_record, pure=False)(src, run, i, j, hx) for (i, j), hx in cands])
        run.done = {ij: hx for (ij, hx), good in zip(cands, ok) if good}
    if run.done:
        # Is K the Gram being written?  A Gram's block (i, j) depends on the row chunks i and j of its inputs, so
        # one recorded block recomputed per row chunk and per column chunk that the records touch (at most
        # 2·(number of chunks) blocks, not all of them) sees a change of any input chunk whose blocks are kept.
        # (An arbitrary Dask array could change entries independently; resume is for the same Gram, as documented.)
        probe = {}
        for (i, j), hx in sorted(run.done.items()):
            probe.setdefault(("row", i), ((i, j), hx))
            probe.setdefault(("col", j), ((i, j), hx))
        checks = sorted(set(probe.values()))
        got = dask.compute(*[K.blocks[i, j] for (i, j), _ in checks])
        for ((i, j), hx), block in zip(checks, got):
            if M.checksum(to_numpy(block), run.dtype) != hx:
                raise InvalidParameterError(
                    f"The 'K' parameter of store_gram: K is not the Gram that the interrupted store of {target!r} "
                    f"was writing (its block ({i}, {j}) differs from the one written). Pass resume=False to start "
                    "over.")
    return run, committed is not None
