"""The ``ntkref`` command under kills and a bad environment (issue 26, items 6 and 7).

* A CLI ``--out`` write SIGKILLed at random points leaves either the old output or the new one, never a
  mixture, and no temporary file: with ``O_TMPFILE`` none exists at any moment (the data live in an unnamed
  file until complete); with the named fallback (file systems without it) the killed writer's
  ``.ntkref-w<pid>-…tmp`` is removed by the next run.  On 0ba5a20 the kill left a hidden ``.ntkref-*.tmp`` as
  large as the output.  8 kills per mode in the default suite, 50 per mode with ``-m slow``.
* A bad ``NTKREF_BACKEND`` made every command, ``--help`` and ``--version`` included, die with a traceback and
  exit status 1 (``import ntkref`` raises at import); now ``--help``/``--version`` work and every command is
  one line ``ntkref: error: ...`` with exit status 2 — while ``import ntkref`` still raises for a library user.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ntkref._lib import files

_WRITER = """
import sys
import ntkref._lib.files as files
if sys.argv[1] == "named":  # a file system without O_TMPFILE
    files.open_unnamed = lambda folder: None
import ntkref.cli._main as m
real = m.write_atomic
def announced(*args, **kwargs):
    print("WRITING", flush=True)
    return real(*args, **kwargs)
m.write_atomic = announced
from ntkref.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _env():
    return {**os.environ, "NTKREF_BACKEND": "numpy", "NTKREF_DEVICE": "", "OPENBLAS_NUM_THREADS": "1"}


def _writer(mode, x, out, depth):
    return subprocess.Popen([sys.executable, "-c", _WRITER, mode, "kernel", "--x1", str(x), "--depth", str(depth),
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def _temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith(".ntkref-"))


def _kill_writers(tmp_path, mode, n_kills, seed):
    """Kill ``n_kills`` CLI writers at random points of their write (after the announcement, within 1.5× the
    measured duration of a whole write) and check the target after each kill."""
    rng = random.Random(seed)
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(seed).normal(size=(1500, 3)))  # an 18 MB Gram
    out = tmp_path / "k.npy"
    # the outputs of depth 1 and depth 2, and how long a write takes
    for depth in (1, 2):
        proc = _writer(mode, x, tmp_path / f"ref{depth}.npy", depth)
        assert proc.stdout.readline() == "WRITING\n"
        written = time.monotonic()
        assert proc.wait() == 0, proc.stderr.read()
        duration = time.monotonic() - written
    refs = {d: (tmp_path / f"ref{d}.npy").read_bytes() for d in (1, 2)}
    outcomes = {"old": 0, "new": 0, "absent": 0}
    for k in range(n_kills):
        old = refs[1 + k % 2]
        depth = 2 - k % 2  # the new output differs from the old one
        if k % 3 == 2 and out.exists():
            out.unlink()  # sometimes a first write: no old output
        elif k % 3 != 2:
            out.write_bytes(old)
        had_old = out.exists()
        proc = _writer(mode, x, out, depth)
        assert proc.stdout.readline() == "WRITING\n", proc.stderr.read()
        time.sleep(rng.uniform(0.0, 1.5 * duration))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not out.exists():
            assert not had_old, "the old output was lost"
            outcomes["absent"] += 1
        else:
            got = out.read_bytes()
            assert got == refs[depth] or (had_old and got == old), "a partial or mixed output"
            outcomes["new" if got == refs[depth] else "old"] += 1
        leftovers = _temporaries(tmp_path)
        if mode == "unnamed":  # nothing named exists before the file is complete
            assert leftovers == [], leftovers
        else:
            assert all(re.fullmatch(files._TEMPORARY, name) for name in leftovers), leftovers
    # the next run removes what the killed writers left
    proc = _writer(mode, x, out, 1)
    proc.stdout.readline()
    assert proc.wait() == 0, proc.stderr.read()
    assert _temporaries(tmp_path) == []
    assert out.read_bytes() == refs[1]
    return outcomes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="O_TMPFILE and /proc are Linux's")
@pytest.mark.parametrize("mode", ["unnamed", "named"])
def test_killed_cli_write_leaves_old_or_new_and_no_temporary(tmp_path, mode):
    if mode == "unnamed" and files.open_unnamed(str(tmp_path)) is None:
        pytest.skip("this file system has no O_TMPFILE")
    _kill_writers(tmp_path, mode, 8, seed=0)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="O_TMPFILE and /proc are Linux's")
@pytest.mark.parametrize("mode", ["unnamed", "named"])
def test_killed_cli_write_at_fifty_random_points(tmp_path, mode):
    if mode == "unnamed" and files.open_unnamed(str(tmp_path)) is None:
        pytest.skip("this file system has no O_TMPFILE")
    outcomes = _kill_writers(tmp_path, mode, 50, seed=1)
    assert outcomes["old"] + outcomes["absent"] > 0 and outcomes["new"] > 0, outcomes  # kills before and after


def test_unnamed_writes_show_no_name_until_complete(tmp_path):
    """During ``write(f)`` the folder holds no new name (O_TMPFILE), or only the pid-tagged temporary (fallback);
    afterwards the target has a plain open()'s permissions in both cases."""
    target = tmp_path / "r.json"
    seen = {}

    def write(f):
        f.write("{}")
        seen["names"] = sorted(os.listdir(tmp_path))

    unnamed = files.open_unnamed(str(tmp_path))
    if unnamed is not None:
        os.close(unnamed)
        files.replace_atomically(str(target), write, mode="w")
        assert seen["names"] == [] and target.read_text() == "{}"
        files.replace_atomically(str(target), write, mode="w")  # over an existing file: the same
        assert seen["names"] == ["r.json"] and target.read_text() == "{}"
        mode_unnamed = target.stat().st_mode & 0o777
    else:
        mode_unnamed = None
    real, files.open_unnamed = files.open_unnamed, lambda folder: None
    try:
        target.unlink()
        files.replace_atomically(str(target), write, mode="w")
    finally:
        files.open_unnamed = real
    assert len(seen["names"]) == 1 and re.fullmatch(files._TEMPORARY, seen["names"][0]), seen
    assert f"w{os.getpid()}-{files.host_tag()}-" in seen["names"][0]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert mode_unnamed in (None, 0o666 & ~umask)


def test_only_stale_temporaries_of_ntkref_writers_are_removed(tmp_path):
    """Removed: the pid-tagged temporaries of dead writers of this host, and those of other hosts not written for
    an hour.  Kept: a live writer's (this process), a recent one of another host, the Gram stores' siblings,
    the former mkstemp names, a folder with a matching name, the user's files."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = files.host_tag()
    other = "0123abcd" if here != "0123abcd" else "4567ef01"
    names = {
        f".ntkref-w{dead.pid}-{here}-abcd1234.tmp": "removed",
        f".ntkref-w{os.getpid()}-{here}-abcd1234.tmp": "kept",
        f".ntkref-w1-{other}-old00000.tmp": "removed",
        f".ntkref-w1-{other}-new00000.tmp": "kept",
        ".ntkref-gram.npy.partial": "kept",
        ".ntkref-k.npy.tmp": "kept",
        ".ntkref-x7ab_9c2.tmp": "kept",
        "k.npy": "kept",
    }
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    os.mkdir(tmp_path / f".ntkref-w{dead.pid}-{here}-dir00000.tmp")
    old = time.time() - 2 * files.STALE_AFTER_S
    os.utime(tmp_path / f".ntkref-w1-{other}-old00000.tmp", (old, old))
    removed = sorted(os.path.basename(p) for p in files.remove_stale_temporaries(str(tmp_path)))
    assert removed == sorted(n for n, fate in names.items() if fate == "removed")
    left = set(os.listdir(tmp_path))
    assert {n for n, fate in names.items() if fate == "kept"} <= left
    assert f".ntkref-w{dead.pid}-{here}-dir00000.tmp" in left


# ------------------------------------------------------------------------------- a bad NTKREF_BACKEND
def _commands(all_of_them):
    """``python -m ntkref.cli``, and the installed console script (where it is installed)."""
    commands = [[sys.executable, "-m", "ntkref.cli"]]
    script = shutil.which("ntkref", path=os.path.dirname(sys.executable))
    if all_of_them and script is not None:
        commands.append([script])
    return commands


@pytest.mark.parametrize("env", [{"NTKREF_BACKEND": "bogus"}, {"NTKREF_BACKEND": "array_api_strict", "NTKREF_DEVICE": "device9"},
                                 {"NTKREF_BACKEND": "numpy", "NTKREF_DEVICE": "cuda:3"}])
def test_bad_backend_is_one_line_and_exit_2_and_help_still_works(tmp_path, env):
    np.save(tmp_path / "x.npy", np.ones((3, 2)))
    full = {**os.environ, "NTKREF_DEVICE": "", **env}
    variable = "NTKREF_DEVICE" if "NTKREF_DEVICE" in env else "NTKREF_BACKEND"
    for command in _commands(all_of_them=env["NTKREF_BACKEND"] == "bogus"):
        for flag in ("--help", "--version"):
            done = subprocess.run(command + [flag], capture_output=True, text=True, env=full, cwd=tmp_path)
            assert done.returncode == 0 and done.stderr == "", (command, flag, done.stderr)
            assert ("usage: ntkref" in done.stdout) if flag == "--help" else done.stdout.startswith("ntkref ")
        done = subprocess.run(command + ["kernel", "--help"], capture_output=True, text=True, env=full, cwd=tmp_path)
        assert done.returncode == 0 and "--out" in done.stdout
        done = subprocess.run(command + ["kernel", "--x1", "x.npy", "--out", "k.npy"], capture_output=True, text=True,
                              env=full, cwd=tmp_path)
        assert done.returncode == 2, (command, done.returncode, done.stderr)
        assert done.stderr.startswith(f"ntkref: error: {variable}=") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert not (tmp_path / "k.npy").exists()
    # a library user still gets the error at import (documented)
    done = subprocess.run([sys.executable, "-c", "import ntkref"], capture_output=True, text=True, env=full)
    assert done.returncode == 1 and "BackendError" in done.stderr and variable in done.stderr
    done = subprocess.run([sys.executable, "-c", "import ntkref.cli"], capture_output=True, text=True, env=full)
    assert done.returncode == 1 and "BackendError" in done.stderr


def test_the_command_detection_is_exact(monkeypatch):
    """Only the console script (named ntkref) and ``python -m ntkref.cli`` defer the environment's error."""
    from ntkref._lib.backend import launched_as_the_command

    for argv0, orig, expected in [
        ("/venv/bin/ntkref", ["python", "/venv/bin/ntkref", "kernel"], True),
        ("/opt/venv/Scripts/ntkref.exe", ["ntkref.exe"], True),
        ("-m", ["python", "-m", "ntkref.cli", "--help"], True),
        ("-m", ["python", "-W", "ignore", "-X", "dev", "-m", "ntkref.cli"], True),
        ("-m", ["python", "-mntkref.cli"], True),
        ("-m", ["python", "-m", "pytest"], False),
        ("-c", ["python", "-c", "import ntkref", "-m", "ntkref.cli"], False),
        ("/home/me/ntkref_job.py", ["python", "/home/me/ntkref_job.py"], False),
        ("/home/me/run.py", ["python", "/home/me/run.py", "-m", "ntkref.cli"], False),
    ]:
        monkeypatch.setattr(sys, "argv", [argv0])
        monkeypatch.setattr(sys, "orig_argv", orig, raising=False)
        assert launched_as_the_command() is expected, (argv0, orig)


def test_an_overwrite_falls_back_to_the_copy_where_the_link_is_refused(tmp_path, monkeypatch):
    """Where linkat of /proc/self/fd/N is refused (EXDEV), a new file and an overwrite both fall back to the copy
    (the overwrite used to raise, keeping the old file)."""
    import errno

    from ntkref._lib import files

    real_link = os.link

    def refuse_proc(src, dst, *args, **kwargs):
        if str(src).startswith("/proc/"):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", refuse_proc)
    target = tmp_path / "out.bin"
    files.replace_atomically(os.fspath(target), lambda f: f.write(b"first"))
    files.replace_atomically(os.fspath(target), lambda f: f.write(b"second"))
    assert target.read_bytes() == b"second"
    assert sorted(os.listdir(tmp_path)) == ["out.bin"]


def test_a_write_only_folder_takes_the_named_route(tmp_path, monkeypatch):
    """A folder with mode 0733 (write and search, no read) cannot be opened for linkat, but plain mkstemp + rename
    works there: replace_atomically takes the named route for a folder it may not read (it raised PermissionError
    after the computation). The permission is simulated (the tests run as root, which reads every folder)."""
    from ntkref._lib import files

    folder = tmp_path / "drop"
    folder.mkdir()
    real_access = os.access

    def no_read(path, mode, *args, **kwargs):
        if os.path.abspath(path) == os.fspath(folder) and mode & os.R_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("the folder was opened for linkat")

    monkeypatch.setattr(os, "access", no_read)
    monkeypatch.setattr(files, "link_unnamed", refuse)
    files.replace_atomically(os.fspath(folder / "out.bin"), lambda f: f.write(b"ok"))
    assert (folder / "out.bin").read_bytes() == b"ok"
    assert sorted(os.listdir(folder)) == ["out.bin"]
