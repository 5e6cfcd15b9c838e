"""The one atomic file writer: a file appears whole or not at all.

Used by the CLI's outputs (``--out``, ``--report``, ``--csv``), the oracle's reports
(``CheckReport.to_json`` / ``to_csv``) and the Gram stores.  ``write(f)`` runs on a temporary sibling of
the target (same folder, so the final ``os.replace`` is a rename within one file system, atomic on POSIX);
the data are flushed and fsync'd before the rename; on *any* exception — a serialiser raising half-way, a
full disk, ``KeyboardInterrupt`` — the temporary file is removed and an existing target is left untouched.
An :class:`OSError` propagates with the path in it; callers that own a parameter name (the CLI's
``--out``) turn it into their own error.

The Gram stores (``ntkref/_engines/dask/_store.py``) build on the smaller pieces: :func:`sibling` /
:func:`siblings` (hidden ``.ntkref-<name>.<tag>`` neighbours of a target, found again after a crash),
:func:`fsync_path` (a file's data or a folder's entries made durable), :func:`write_durably` (a small file
created atomically and durably), :func:`preallocate` (``posix_fallocate``: a full disk is an error *before*
anything is written, never a SIGBUS of a memory-mapped write), :func:`replace_path` (a file or folder moved
onto a target: one atomic rename, or for a folder target an atomic exchange where the system has one) and
:func:`remove_tree`.
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

    Nothing is left behind on a kill either, where the file system can: on Linux the temporary file is an
    unnamed ``O_TMPFILE`` in ``path``'s folder (it vanishes with the process), given its name only when
    complete (``linkat``: directly as ``path`` if there is none, else as a temporary name renamed onto
    ``path`` at once).  Elsewhere it is a named sibling ``.ntkref-w<pid>-<host>-<random>.tmp``
    (:func:`temporary_name`) that the next run removes once its writer is dead (:func:`remove_stale_temporaries`).
    """
    folder = os.path.dirname(os.path.abspath(path))
    # the unnamed file is linked through a descriptor of the folder, which needs read permission on it; a folder
    # that is only writable (mode 0733) takes the named route, as plain mkstemp + os.replace always could
    fd, tmp = (open_unnamed(folder) if os.access(folder, os.R_OK) else None), None
    if fd is None:
        fd, tmp = create_temporary(folder)
    kwargs = {} if "b" in mode else {"encoding": encoding or "utf-8", "newline": newline}
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            if tmp is None:
                link_unnamed(f.fileno(), path)  # before the close: closing an unlinked O_TMPFILE frees it
        if tmp is not None:
            chmod_like_new_file(tmp)
            os.replace(tmp, path)
            tmp = None
    except BaseException:
        if tmp is not None:
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


def sibling(path, tag):
    """The hidden sibling ``.ntkref-<name>.<tag>`` of ``path``: same folder, so renames between them are atomic."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f"{TEMP_PREFIX}{name}.{tag}")


def siblings(path, suffix):
    """The existing hidden siblings ``.ntkref-<name>.<tag><suffix>`` of ``path`` (sorted; ``<tag>`` holds no dot, so
    the siblings of ``K.npy.v2.npy`` are never taken for those of ``K.npy``); none if the folder is missing."""
    folder, name = os.path.split(os.path.abspath(path))
    prefix = f"{TEMP_PREFIX}{name}."
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    return sorted(os.path.join(folder, e) for e in entries
                  if e.startswith(prefix) and e.endswith(suffix) and len(e) > len(prefix) + len(suffix)
                  and "." not in e[len(prefix):len(e) - len(suffix)])


def fsync_path(path, *, data_only=False):
    """fsync a file (its data) or a folder (its entries: files created or renamed in it survive a power cut).

    Folders that cannot be opened for reading (not POSIX) are skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except IsADirectoryError:  # pragma: no cover - Windows
        return
    try:
        (os.fdatasync if data_only and hasattr(os, "fdatasync") else os.fsync)(fd)
    finally:
        os.close(fd)


def write_durably(path, data, *, scratch=None):
    """Create or replace the small file ``path`` with the bytes ``data``: atomically (a named temporary file in
    ``scratch``, default ``path``'s folder, same file system; fsync; rename) and durably (the folder fsync'd
    after the rename).  For files inside a folder that is itself temporary (a Gram store being written): a kill
    leaves the temporary file in ``scratch``, removed with it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=scratch or folder, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
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
    fsync_path(folder)


def preallocate(fd, size):
    """Reserve ``size`` bytes for the open file ``fd`` (``posix_fallocate``), so that writing into it later cannot
    run out of space: ENOSPC is raised here, before anything is written.  Where the system has no
    ``posix_fallocate`` the file is only extended (``ftruncate``)."""
    if size <= 0:
        return
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as exc:
            import errno

            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
    os.ftruncate(fd, max(size, os.fstat(fd).st_size))


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(a, b):
    """Swap the paths ``a`` and ``b`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where the system
    or the file system has no such call (nothing is changed then)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover - glibc < 2.28, musl
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import errno

    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), a, None, b)


def replace_path(src, dst, aside):
    """Move the file or folder ``src`` onto ``dst`` and fsync ``dst``'s folder.

    A file (or a missing ``dst``) is one ``os.replace``/``os.rename``: atomic.  An existing folder ``dst`` is
    exchanged with ``src`` atomically where the system can (the old ``dst`` then lies at ``src``); else it is
    renamed to ``aside`` first and ``src`` renamed onto ``dst`` (put back if that fails): a crash between the
    two renames leaves ``dst`` absent, the old folder at ``aside`` and the new one at ``src``.  Returns where
    the old ``dst`` now lies (``src`` or ``aside``), or None if it was a file or did not exist.
    """
    if not (os.path.isdir(dst) and not os.path.islink(dst)):
        os.replace(src, dst)
        fsync_path(os.path.dirname(os.path.abspath(dst)))
        return None
    if exchange(src, dst):
        old = src
    else:
        os.rename(dst, aside)
        try:
            os.rename(src, dst)
        except BaseException:
            os.rename(aside, dst)
            raise
        old = aside
    fsync_path(os.path.dirname(os.path.abspath(dst)))
    return old


def remove_tree(path, *, attempts=50):
    """Remove a file or folder tree; retried while entries appear during the removal (a writer finishing)."""
    import time

    for _ in range(attempts):
        if not os.path.lexists(path):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        if os.path.lexists(path):
            time.sleep(0.01)
    if os.path.lexists(path):  # pragma: no cover - something keeps writing there
        shutil.rmtree(path)


# ------------------------------------------------------------------ temporaries that do not survive a kill
def host_tag():
    """Eight hex digits naming this host and PID namespace (the hostname and the namespace's inode): a writer's
    pid in a temporary's name is only checked by processes that see the same pids."""
    import socket
    import zlib

    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = 0
    return f"{zlib.crc32(f'{socket.gethostname()}/{ns}'.encode()) & 0xFFFFFFFF:08x}"


#: ``.ntkref-w<pid>-<host tag>-<8 random>.tmp``: the only names :func:`remove_stale_temporaries` removes
_TEMPORARY = r"\.ntkref-w(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{8})-[a-z0-9_]{8}\.tmp"
#: a named temporary of another host (its pid cannot be checked) is stale after this long without a write
STALE_AFTER_S = 3600.0


def temporary_name(folder):
    """A fresh path ``folder/.ntkref-w<pid>-<host>-<random>.tmp`` (not created)."""
    import secrets
    import string

    alphabet = string.ascii_lowercase + string.digits + "_"
    rand = "".join(secrets.choice(alphabet) for _ in range(8))
    return os.path.join(folder, f"{TEMP_PREFIX}w{os.getpid()}-{host_tag()}-{rand}{TEMP_SUFFIX}")


def create_temporary(folder):
    """Create a named temporary file in ``folder`` (mode 0600, exclusive): ``(fd, path)``."""
    while True:
        path = temporary_name(folder)
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), path
        except FileExistsError:  # pragma: no cover - 36⁸ names
            continue


def open_unnamed(folder):
    """An unnamed file in ``folder`` (Linux ``O_TMPFILE``, permissions 0666 & ~umask like a plain ``open``), or
    ``None`` where the system or the file system has none (or /proc, needed to give it a name, is missing).
    Other errors (a missing or read-only folder) are raised with the folder's path."""
    import errno

    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        # EISDIR: a kernel without O_TMPFILE (it contains O_DIRECTORY); EOPNOTSUPP: a file system without it
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOSYS):
            return None
        raise


def link_unnamed(fd, path):
    """Give the complete unnamed file ``fd`` the name ``path`` (``linkat(AT_SYMLINK_FOLLOW)`` of /proc/self/fd/N,
    the idiom of open(2)): directly when ``path`` does not exist, else as a temporary name renamed onto
    ``path`` at once (a kill between the two leaves that name, for :func:`remove_stale_temporaries`); the
    folder is fsync'd.  Where the link is refused (a /proc that does not resolve to the file system), the
    contents are copied into a named temporary renamed onto ``path``."""
    source = f"/proc/self/fd/{fd}"
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    dirfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        # a dst_dir_fd makes os.link call linkat with AT_SYMLINK_FOLLOW (plain link(2) would link the /proc
        # symlink itself: EXDEV)
        try:
            os.link(source, name, dst_dir_fd=dirfd, follow_symlinks=True)
        except FileExistsError:
            tmp = os.path.basename(temporary_name(folder))
            try:
                os.link(source, tmp, dst_dir_fd=dirfd, follow_symlinks=True)
            except OSError:  # the link refused here too: the copy, as for a new file
                _copy_unnamed(fd, folder, name, dirfd)
            else:
                _rename_or_remove(tmp, name, dirfd)
        except OSError:
            _copy_unnamed(fd, folder, name, dirfd)
        try:
            os.fsync(dirfd)
        except OSError:  # pragma: no cover - folders that cannot be fsync'd
            pass
    finally:
        os.close(dirfd)


def _rename_or_remove(tmp, name, dirfd):
    try:
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dirfd)
        except OSError:
            pass
        raise


def _copy_unnamed(fd, folder, name, dirfd):
    out, tmp = create_temporary(folder)
    try:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            while True:
                chunk = os.read(fd, 1 << 22)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
            os.fsync(out)
        finally:
            os.close(out)
        chmod_like_new_file(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _rename_or_remove(os.path.basename(tmp), name, dirfd)


def _writer_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:  # pragma: no cover
        return True
    try:  # a killed writer not yet reaped by its parent is a zombie: dead for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def remove_stale_temporaries(folder, *, now=None):
    """Remove the named temporaries ``.ntkref-w<pid>-<host>-<random>.tmp`` of killed writers from ``folder``:
    those of this host whose writer pid is dead, and those of other hosts not written for
    :data:`STALE_AFTER_S`.  Regular files of exactly that pattern only (the Gram stores' siblings and
    anything else are never touched); returns the removed paths.  Errors are ignored (a best effort)."""
    import re
    import time

    pattern = re.compile(_TEMPORARY)
    here = host_tag()
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if match["host"] == here:
                pid = int(match["pid"])
                if pid == os.getpid() or _writer_alive(pid):
                    continue
            elif now - entry.stat(follow_symlinks=False).st_mtime < STALE_AFTER_S:
                continue
            os.unlink(entry.path)
            removed.append(entry.path)
        except OSError:
            continue
    return removed
