"""Progress from tqdm: bars with rate and time left on a terminal, plain lines (or nothing) elsewhere.

- The main job (``python -m validation``): under a pseudo-terminal tqdm bars with a rate appear; piped to a file
  its progress is plain lines (count, rate, time left) with no bar fragments and no carriage returns;
  ``--quiet`` prints no progress at all.
- The command line: a long Gram shows a bar on a terminal's stderr and nothing when piped or with ``--quiet``;
  the steps the command splits its work into give the results of one call (``kernels.fc``: bit for bit;
  ``kernels.cntk``: to rounding, exactly symmetric; ``certify.certified_radius``: bit for bit), and a bad row
  of ``--x1`` beyond the first block is refused with the message of one call.
"""
import io
import os
import pty
import re
import select
import subprocess
import sys

import array_api_compat
import numpy as np
import pytest

from ntkref import certify, cli, kernels
from ntkref.cli import _progress
from validation.common import Log, is_terminal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = re.compile(r"\d(?:\.\d+)?\s?(?:[kMG])?\s?(?:[a-zλτ§ ]+)/s|\d(?:\.\d+)?s/[a-zλτ ]+")
BAR = re.compile("[█▏▎▍▌▋▊▉]|\\d+%\\|")  # tqdm's bar: block characters, "NN%|"


def _read_all(fd, proc=None, timeout=240):
    """Everything written to a pty master until the writer closes (EOF/EIO) or the process ends."""
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the slave side was closed
            break
        if not data:
            break
        chunks.append(data)
    if proc is not None:
        proc.wait(timeout=timeout)
    return b"".join(chunks).decode("utf-8", "replace")


# --------------------------------------------------------------------------- the main job's Log
def test_log_not_on_a_terminal_prints_plain_progress_lines():
    out, err = io.StringIO(), io.StringIO()
    log = Log(stream=out, bar_stream=err)
    assert not log.bars and not is_terminal(err)
    for _ in log.progress(range(20), "loop", unit="it"):
        pass
    with log.progress(total=3, label="steps", unit="step") as p:
        p.set_postfix("a note")
        p.update(3)
    text = out.getvalue()
    assert err.getvalue() == ""
    assert "\r" not in text and not BAR.search(text) and "[#" not in text
    lines = [line for line in text.splitlines() if "loop:" in line]
    assert len(lines) == 10 and lines[-1].split("] ", 1)[1].startswith("  loop: 20/20 [")  # about every tenth
    assert all(RATE.search(line) for line in lines)  # count, elapsed<left, rate
    assert "steps: 3/3 [" in text and "a note" in text


def test_log_quiet_prints_nothing():
    out, err = io.StringIO(), io.StringIO()
    log = Log(stream=out, quiet=True, bar_stream=err, bars=True)
    log("a line")
    assert [x for x in log.progress([1, 2, 3], "loop")] == [1, 2, 3]
    assert out.getvalue() == "" and err.getvalue() == ""


@pytest.mark.parametrize("columns", [0, 100])  # 0: a pty without a window size (tqdm would draw nothing)
def test_log_on_a_terminal_draws_a_tqdm_bar_with_rate(columns):
    master, slave = pty.openpty()
    if columns:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    out = io.StringIO()
    with os.fdopen(slave, "w", encoding="utf-8") as tty:
        log = Log(stream=out, bar_stream=tty)
        assert log.bars and is_terminal(tty)
        for i in log.progress(range(5), "loop", unit="it"):
            log(f"line {i}")
    text = _read_all(master, timeout=5)
    os.close(master)
    assert "loop: 100%|" in text and BAR.search(text) and RATE.search(text), text
    assert "line 4" in out.getvalue() and "loop:" not in out.getvalue()  # lines on stdout, the bar on the tty


# --------------------------------------------------------------------------- python -m validation
TINY = """
import sys
from validation import common
import validation.__main__ as m
quick = common.Settings.quick
def tiny(cls):
    s = quick()
    s.n_train, s.n_test, s.t3_lams = 120, 40, (0.0, 1.0, 1000.0)
    s.b2_n, s.b2_width, s.b2_steps, s.b2_chunk = 40, 20, 6, 3
    return s
common.Settings.quick = classmethod(tiny)
sys.exit(m.main(sys.argv[1:]))
"""


def _validation(tmp_path, *extra, tty=False):
    cmd = [sys.executable, "-c", TINY, "--quick", "--no-figures", "--out", str(tmp_path), "--only", "table3",
           "figureB2", *extra]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not tty:
        with open(tmp_path / "log.txt", "w") as f:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, timeout=600)
        return r.returncode, (tmp_path / "log.txt").read_text(encoding="utf-8")
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
    os.close(slave)
    text = _read_all(master, proc, timeout=600)
    os.close(master)
    return proc.returncode, text


def test_python_m_validation_piped_to_a_file_prints_plain_lines(tmp_path):
    rc, text = _validation(tmp_path)
    assert rc == 0, text
    assert "\r" not in text and not BAR.search(text) and "[#" not in text
    progress = [line for line in text.splitlines() if re.search(r"(Table 3 models|Figure B\.2 steps|sections): \d+/\d+ \[",
                                                                   line)]
    assert progress and all(RATE.search(line) for line in progress), text
    assert "sections: 2/2 [" in text and "Summary" in text


def test_python_m_validation_on_a_terminal_shows_tqdm_bars_with_rates(tmp_path):
    rc, text = _validation(tmp_path, tty=True)
    assert rc == 0, text
    assert "sections: 100%|" in text and BAR.search(text), text
    assert RATE.search(text.split("sections: 100%|")[-1]), text  # the closed bar states its rate
    assert "Summary" in text


def test_python_m_validation_quiet_prints_no_progress(tmp_path):
    rc, text = _validation(tmp_path, "--quiet", tty=True)
    assert rc == 0, text
    assert "%|" not in text and not re.search(r"\d+/\d+ \[", text) and "[    " not in text, text
    assert "Summary" in text and "claims hold" in text


# --------------------------------------------------------------------------- the ntkref command
def _cli(args, tty=False):
    cmd = [sys.executable, "-m", "ntkref.cli", *[str(a) for a in args]]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not tty:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
                            env=env, text=True)
    os.close(slave)
    err = _read_all(master, timeout=300)
    os.close(master)
    out = proc.communicate(timeout=300)[0]
    return proc.returncode, out, err


def test_cli_long_gram_shows_a_bar_on_a_terminal_and_none_when_piped(tmp_path):
    x = np.random.default_rng(0).normal(size=(_progress.FC_ROWS + 300, 3))  # two row blocks
    np.save(tmp_path / "x.npy", x)
    args = ["kernel", "--x1", tmp_path / "x.npy", "--depth", 1, "--out", tmp_path / "k.npy"]
    code, out, err = _cli(args, tty=True)
    assert code == 0 and "wrote ntk" in out, (out, err)
    assert "kernel: 100%|" in err and BAR.search(err) and re.search(r"entries/s", err), err
    n = x.shape[0]
    assert f"{n * (n + 1) // 2 / 1e6:.2f}M/" in err  # the count: the pairs i ≤ j of a symmetric Gram
    code, out, err = _cli(args)  # piped
    assert code == 0 and "wrote ntk" in out and err == ""
    code, out, err = _cli(args + ["--quiet"], tty=True)
    assert code == 0 and "wrote ntk" in out and "%|" not in err and "entries" not in err, err


def test_cli_certify_bar_on_a_terminal(tmp_path):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "a.npy", rng.normal(size=20))
    np.save(tmp_path / "xtr.npy", rng.random((20, 4)))
    np.save(tmp_path / "xte.npy", rng.random((300, 4)))
    code, out, err = _cli(["certify", "--alpha", tmp_path / "a.npy", "--x-train", tmp_path / "xtr.npy", "--x-test",
                           tmp_path / "xte.npy", "--out", tmp_path / "r.npy"], tty=True)
    assert code == 0 and "wrote radii" in out, (out, err)
    assert "certify: 100%|" in err and "300/300" in err and "points/s" in err, err


# --------------------------------------------------------------------------- the steps give one call's results
def test_row_blocks_are_multiples_of_the_kernels_own_blocks():
    # kernels.fc's default blocks: 768 rows (256 with quadrature; 4096 on CuPy)
    assert _progress.FC_ROWS % 768 == 0 and _progress.FC_ROWS % 256 == 0
    assert _progress.FC_ROWS_CUPY % 4096 == 0 and _progress.FC_ROWS_CUPY % 256 == 0


@pytest.mark.parametrize("kw", [dict(depth=2), dict(depth=2, activation="erf", b_std=0.3, W_std=[1.2, 0.8, 1.0])])
def test_fc_gram_in_row_blocks_equals_one_call_bit_for_bit(kw, asxp, tonp):
    rng = np.random.default_rng(2)
    x, x2 = asxp(rng.normal(size=(_progress.FC_ROWS + 400, 5))), asxp(rng.normal(size=(40, 5)))
    both = ["nngp", "ntk"]

    def call(b1, b2):
        return kernels.fc(b1, b2, get=tuple(both), **kw)

    sym = _progress.gram_in_row_blocks(call, "fc", x, None, both, command="kernel", quiet=True, steps=True)  # host copies
    one = kernels.fc(x, **kw)
    for g in both:
        assert np.array_equal(sym[g], tonp(getattr(one, g))) and np.array_equal(sym[g], sym[g].T)
    rect = _progress.gram_in_row_blocks(call, "fc", x, x2, both, command="kernel", quiet=True, steps=True)
    one = kernels.fc(x, x2, **kw)
    assert all(np.array_equal(rect[g], tonp(getattr(one, g))) for g in both)


def test_cntk_gram_in_row_blocks_agrees_with_one_call(monkeypatch, asxp, tonp):
    monkeypatch.setattr(_progress, "CNTK_PAIRS", 64)  # 2 rows per call: many blocks
    rng = np.random.default_rng(3)
    imgs = asxp(rng.normal(size=(30, 2, 6, 6)))
    for kw in (dict(depth=2), dict(depth=1, readout="flatten", b_std=0.2)):
        def call(b1, b2):
            return kernels.cntk(b1, b2, **kw)

        sym = _progress.gram_in_row_blocks(call, "cntk", imgs, None, ["nngp", "ntk"], command="kernel", quiet=True, steps=True)
        one = kernels.cntk(imgs, **kw)
        for g in ("nngp", "ntk"):
            ref = tonp(getattr(one, g))
            scale = np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
            assert np.array_equal(sym[g], sym[g].T)
            assert np.all(np.abs(sym[g] - ref) <= 1e-14 * scale)
        rect = _progress.gram_in_row_blocks(call, "cntk", imgs, imgs[:7, ...], ["ntk"], command="kernel", quiet=True, steps=True)
        assert np.array_equal(rect["ntk"], tonp(kernels.cntk(imgs, imgs[:7, ...], **kw).ntk))


@pytest.mark.parametrize("kw", [dict(), dict(norm="l2", method="paper")])
def test_certify_in_chunks_equals_one_call_bit_for_bit(monkeypatch, kw, asxp, tonp):
    monkeypatch.setattr(_progress, "CERTIFY_POINTS", 7)
    rng = np.random.default_rng(4)
    alpha, xtr, xte = asxp(rng.normal(size=30)), asxp(rng.random((30, 6))), asxp(rng.random((40, 6)))
    y = asxp(np.sign(rng.normal(size=40)))

    def call(part):
        return certify.certified_radius(alpha, xtr, xte[part, ...], y=y[part], return_info=True, **kw)

    radii, g = _progress.radii_in_chunks(call, 40, command="certify", quiet=True, steps=True)  # host copies
    r1, info = certify.certified_radius(alpha, xtr, xte, y=y, return_info=True, **kw)
    if array_api_compat.is_numpy_namespace(array_api_compat.array_namespace(r1)):
        assert np.array_equal(radii, tonp(r1)) and np.array_equal(g, tonp(info["g"]))  # the same BLAS calls
        return
    # other libraries may sum g(x) = Σⱼ αⱼ Θ(x, xⱼ) in another order for another number of rows (torch does):
    # each sum of n = 30 terms then differs by at most 2·n·eps·Σⱼ |αⱼ| Θ(x, xⱼ) (Θ ≥ 0: the same g with |α|),
    # and each radius, a bisection to relative tol 1e-4, by at most that tolerance
    scale = tonp(certify.certified_radius(asxp(np.abs(tonp(alpha))), xtr, xte, return_info=True, **kw)[1]["g"])
    assert np.all(np.abs(g - tonp(info["g"])) <= 2 * 30 * np.finfo(np.float64).eps * np.abs(scale))
    assert np.all(np.abs(radii - tonp(r1)) <= 1e-4 * np.maximum(radii, tonp(r1)))


def test_cli_blocked_gram_refuses_a_bad_row_as_one_call_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_progress, "FC_ROWS", 768)
    x = np.random.default_rng(5).normal(size=(1700, 3))
    x[1500] = 1e200  # in the third block: its first-layer variance overflows
    np.save(tmp_path / "x.npy", x)
    code = cli.main(["kernel", "--x1", str(tmp_path / "x.npy"), "--depth", "1", "--out", str(tmp_path / "k.npy")])
    err = capsys.readouterr().err
    with pytest.raises(Exception) as one:
        kernels.fc(x, depth=1)
    assert code == 2 and "'x1'" in err and "'x2'" not in err
    assert " ".join(str(one.value).split()) in err  # the message of one call (the largest row norm of all of x1)
    assert not (tmp_path / "k.npy").exists()


def test_cli_blocked_gram_is_checked_against_host_memory(tmp_path, monkeypatch, capsys):
    from ntkref._lib import memory

    monkeypatch.setattr(_progress, "FC_ROWS", 256)
    x = np.random.default_rng(6).normal(size=(2000, 3))
    np.save(tmp_path / "x.npy", x)
    real = memory.available_memory

    def small(xp, like):  # room for a block (the 256 × 2000 rows), not for the 2000 × 2000 Gram
        got = real(xp, like)
        return None if got is None else min(got, 20 * 2**20)

    monkeypatch.setattr(memory, "available_memory", small)
    monkeypatch.setattr(_progress, "is_terminal", lambda stream: True)  # a bar is drawn: the blocked route
    code = cli.main(["kernel", "--x1", str(tmp_path / "x.npy"), "--get", "both", "--depth", "1",
                     "--out", str(tmp_path / "k.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "2000×2000 Gram" in err and "GiB" in err and "--dtype float32" in err, err
    assert not (tmp_path / "k.npz").exists()
