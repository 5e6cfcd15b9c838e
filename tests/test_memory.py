"""The memory guard sees the real limit (issue 26, item 8): MemAvailable, the memory cgroup (v2 and v1, the
process's own and its ancestors), RLIMIT_AS/RLIMIT_DATA and the device — and refuses before allocating.

* the readings, with fake /proc and /sys contents (``memory.read_text`` and ``memory.getrlimit`` replaced);
* a subprocess under ``RLIMIT_AS`` (set in ``preexec_fn``) and one in a memory cgroup made for the test (where
  the test runs as root with a writable cgroup hierarchy; skipped otherwise): an accepted Gram used to fail
  with NumPy's raw MemoryError (RLIMIT_AS) or be OOM-killed (cgroup); now it is ntkref's InvalidParameterError
  naming the parameters and the limit, and a Gram that fits still runs;
* the estimates of the new guards (two-layer kernels, gradient_flow, the networks' forward passes) bound the
  peak measured by tracemalloc, and each new guard refuses a too-large request naming the parameter
  (``tests/test_bad_input.py::test_memory_guard_refuses_gram_sized_temporaries`` has one case per call).
"""
import os
import subprocess
import sys
import textwrap
import tracemalloc
import uuid

import numpy as np
import pytest

from ntkref import InvalidParameterError
from ntkref._lib import memory

GIB = 2**30
MIB = 2**20


# ================================================================================ readings from fake files
def _fake(monkeypatch, files, rlimits=None):
    """/proc and /sys replaced by ``files`` (path -> text; missing paths cannot be read), the rlimits by
    ``rlimits`` (name -> soft limit; missing: unlimited)."""
    monkeypatch.setattr(memory, "read_text", lambda path: files.get(str(path)))
    monkeypatch.setattr(memory, "getrlimit", lambda which: (rlimits or {}).get(which))


def _meminfo(available_kib):
    return f"MemTotal:       64000000 kB\nMemFree:         1000 kB\nMemAvailable:   {available_kib} kB\n"


_MOUNT_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
_MOUNT_V1 = ("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")


def test_cgroup_v2_limit_of_a_container(monkeypatch):
    """A container (cgroup namespace: "0::/"): memory.max − (memory.current − inactive_file); the limit bounds the
    reading although MemAvailable (the host's) is far larger, and the message names it."""
    _fake(monkeypatch, {
        "/proc/meminfo": _meminfo(40 * 2**20),  # 40 GiB
        "/proc/self/cgroup": "0::/\n",
        "/proc/self/mountinfo": _MOUNT_V2,
        "/sys/fs/cgroup/memory.max": f"{2 * GIB}\n",
        "/sys/fs/cgroup/memory.current": f"{3 * GIB // 2}\n",
        "/sys/fs/cgroup/memory.stat": f"anon 1000\nfile {GIB // 2}\ninactive_file {GIB // 4}\nactive_file 5\n",
    })
    got = memory.available_memory(np, np.ones(1))
    assert got == 2 * GIB - (3 * GIB // 2 - GIB // 4)  # 0.75 GiB
    assert "memory.max" in got.source and "/sys/fs/cgroup" in got.source
    with pytest.raises(InvalidParameterError, match=r"about 0.75 GiB is available where the arrays live \(bound by "
                                                    r"the cgroup memory limit /sys/fs/cgroup/memory.max = 2 GiB"):
        memory.check_bytes(GIB, "The 'x1'/'x2' parameters", "fc", np, np.ones(1), "ways out")


def test_cgroup_v2_limit_of_an_ancestor_binds(monkeypatch):
    """A systemd-style hierarchy: the process's own cgroup has no limit ("max"), its parent slice has one."""
    _fake(monkeypatch, {
        "/proc/meminfo": _meminfo(40 * 2**20),
        "/proc/self/cgroup": "0::/batch.slice/job-7.scope\n",
        "/proc/self/mountinfo": _MOUNT_V2,
        "/sys/fs/cgroup/batch.slice/job-7.scope/memory.max": "max\n",
        "/sys/fs/cgroup/batch.slice/job-7.scope/memory.current": f"{GIB}\n",
        "/sys/fs/cgroup/batch.slice/memory.max": f"{4 * GIB}\n",
        "/sys/fs/cgroup/batch.slice/memory.current": f"{3 * GIB}\n",
        "/sys/fs/cgroup/batch.slice/memory.stat": "inactive_file 0\n",
    })
    got = memory.available_memory(np, np.ones(1))
    assert got == GIB and "batch.slice/memory.max" in got.source


def test_cgroup_path_relative_to_the_mounted_root(monkeypatch):
    """Without a cgroup namespace the process sees its full path ("/docker/abc") while the container mounts that
    cgroup as the root of /sys/fs/cgroup: the folder is the mount point itself.  Mount points are unescaped."""
    _fake(monkeypatch, {
        "/proc/meminfo": _meminfo(40 * 2**20),
        "/proc/self/cgroup": "0::/docker/abc\n",
        "/proc/self/mountinfo": "30 23 0:26 /docker/abc /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
        "/sys/fs/my cgroup/memory.max": f"{GIB}\n",
        "/sys/fs/my cgroup/memory.current": f"{GIB // 4}\n",
    })
    got = memory.available_memory(np, np.ones(1))
    assert got == 3 * GIB // 4 and got.source.startswith("the cgroup memory limit /sys/fs/my cgroup/memory.max")


def test_cgroup_v1_limit_and_no_limit(monkeypatch):
    """cgroup v1: limit_in_bytes − (usage_in_bytes − total_inactive_file); "no limit" is a huge number (this
    machine's own reading: 9223372036854771712) and is ignored, as is the cpu controller's line."""
    files = {
        "/proc/meminfo": _meminfo(20 * 2**20),
        "/proc/self/cgroup": "9:name=systemd:/\n5:cpu,cpuacct:/\n4:memory:/process_api/4d5b\n0::/\n",
        "/proc/self/mountinfo": _MOUNT_V1,
        "/sys/fs/cgroup/memory/process_api/4d5b/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cgroup/memory/process_api/4d5b/memory.usage_in_bytes": "29609984\n",
        "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    }
    _fake(monkeypatch, files)
    got = memory.available_memory(np, np.ones(1))
    assert got == 20 * GIB and got.source == "MemAvailable of /proc/meminfo"
    files["/sys/fs/cgroup/memory/process_api/4d5b/memory.limit_in_bytes"] = f"{GIB}\n"
    files["/sys/fs/cgroup/memory/process_api/4d5b/memory.stat"] = f"cache 9\ninactive_file 1\ntotal_inactive_file {MIB}\n"
    _fake(monkeypatch, files)
    got = memory.available_memory(np, np.ones(1))
    assert got == GIB - (29609984 - MIB) and "4d5b/memory.limit_in_bytes = 1 GiB" in got.source


def test_mountinfo_unreadable_falls_back_to_sys_fs_cgroup(monkeypatch):
    _fake(monkeypatch, {
        "/proc/meminfo": _meminfo(40 * 2**20),
        "/proc/self/cgroup": "0::/user.slice\n",
        "/sys/fs/cgroup/user.slice/memory.max": f"{GIB}\n",
        "/sys/fs/cgroup/user.slice/memory.current": "0\n",
    })
    assert memory.available_memory(np, np.ones(1)) == GIB


def test_rlimit_as_headroom_is_the_limit_minus_the_virtual_size(monkeypatch):
    _fake(monkeypatch, {"/proc/meminfo": _meminfo(40 * 2**20), "/proc/self/status": "Name:\tpython\nVmSize:\t 3670016 kB\n"
                                                                                     "VmData:\t 1048576 kB\n"},
          rlimits={"RLIMIT_AS": 4 * GIB})
    got = memory.available_memory(np, np.ones(1))
    assert got == GIB // 2  # 4 GiB − 3.5 GiB
    assert "RLIMIT_AS (ulimit -v) = 4 GiB" in got.source
    _fake(monkeypatch, {"/proc/meminfo": _meminfo(40 * 2**20), "/proc/self/status": "VmSize:\t 3670016 kB\n"
                                                                                     "VmData:\t 1048576 kB\n"},
          rlimits={"RLIMIT_AS": 4 * GIB, "RLIMIT_DATA": 5 * GIB // 4})
    got = memory.available_memory(np, np.ones(1))
    assert got == GIB // 4 and "RLIMIT_DATA" in got.source  # 1.25 GiB − 1 GiB of data


def test_hard_limits_are_not_floored_but_memavailable_is(monkeypatch):
    """MemAvailable reading ~0 is noise (floored at 256 MiB: a small kernel is never refused); a cgroup or an
    rlimit with 10 MiB left is real: 10 MiB, and a 20 MiB request is refused naming the limit."""
    _fake(monkeypatch, {"/proc/meminfo": _meminfo(0)})
    got = memory.available_memory(np, np.ones(1))
    assert got == memory.HOST_FLOOR and "floored" in got.source
    _fake(monkeypatch, {"/proc/meminfo": _meminfo(0), "/proc/self/status": f"VmSize:\t {GIB // 1024} kB\n"},
          rlimits={"RLIMIT_AS": GIB + 10 * MIB})
    assert memory.available_memory(np, np.ones(1)) == 10 * MIB
    x = np.ones((1600, 1))  # 2 × 1600² float64 outputs: 41 MB
    from ntkref import kernels

    with pytest.raises(InvalidParameterError, match=r"'x1'/'x2' parameters .* of fc .* \(bound by the address-space "
                                                    r"limit RLIMIT_AS"):
        kernels.fc(x)
    # usage above the limit (a limit lowered under a running process): no headroom at all, never negative
    _fake(monkeypatch, {"/proc/meminfo": _meminfo(10**8), "/proc/self/status": f"VmSize:\t {2 * GIB // 1024} kB\n"},
          rlimits={"RLIMIT_AS": GIB})
    assert memory.available_memory(np, np.ones(1)) == 0


def test_nothing_readable_means_no_guard_and_the_device_seam_wins(monkeypatch):
    _fake(monkeypatch, {})
    monkeypatch.setattr(memory.os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert memory.available_memory(np, np.ones(1)) is None
    memory.check_bytes(10**15, "what", "caller", np, np.ones(1), "ways")  # unknown: no refusal

    class Engine:  # the free_memory seam (CuPy's engine): the device's own reading, not the host's limits
        @staticmethod
        def lookup(like):
            return lambda like: 3 * GIB

    _fake(monkeypatch, {"/proc/meminfo": _meminfo(0)}, rlimits={"RLIMIT_AS": 1})
    monkeypatch.setattr(memory.dispatch, "free_memory", Engine)
    got = memory.available_memory(np, np.ones(1))
    assert got == 3 * GIB and "free memory of the device" in got.source


def test_the_real_reading_of_this_machine_is_consistent(monkeypatch):
    """On the machine running the tests: the reading is the smallest of the limits found, each positive (one
    snapshot of the files: MemAvailable moves between two reads)."""
    snapshot, real = {}, memory.read_text
    monkeypatch.setattr(memory, "read_text", lambda path: snapshot.setdefault(path, real(path)))
    limits = memory.host_limits()
    got = memory.available_memory(np, np.ones(1))
    assert limits and got == min(v for v, _ in limits) and got.source in [s for _, s in limits]


# ============================================================================ real limits, in subprocesses
_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from ntkref import InvalidParameterError, kernels
    kernels.fc(np.ones((200, 2)))  # a small Gram: runs
    n = int(sys.argv[1])
    try:
        k = kernels.fc(np.random.default_rng(0).normal(size=(n, 2)), get="ntk", n_jobs=1)  # one worker on any machine
    except InvalidParameterError as exc:
        print("REFUSED", exc)
    except MemoryError as exc:
        print("MEMORYERROR", exc)
    else:
        print("COMPUTED", float(k.ntk[0, 0]))
""")


def _run_child(n, preexec_fn, timeout=300):
    return subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec_fn, env={**os.environ, "NTKREF_BACKEND": "numpy",
                                                      "NTKREF_DEVICE": "", "OPENBLAS_NUM_THREADS": "1"})


def _child_vm_bytes():
    probe = subprocess.run([sys.executable, "-c", "import numpy, ntkref.kernels; numpy.ones(3) @ numpy.ones(3);"
                            "print(open('/proc/self/status').read())"], capture_output=True, text=True,
                           env={**os.environ, "NTKREF_BACKEND": "numpy", "NTKREF_DEVICE": "", "OPENBLAS_NUM_THREADS": "1"})
    line = [v for v in probe.stdout.splitlines() if v.startswith("VmPeak:")]
    if not line:
        pytest.skip("no /proc/self/status VmPeak on this system")
    return int(line[0].split()[1]) * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_ulimit_v_refuses_before_allocating():
    """Under RLIMIT_AS = (the interpreter's size + 1 GiB): a 6000² float64 NTK (0.27 GiB of output, fits) is
    computed; a 20 000² one (3 GiB) is refused by ntkref naming 'x1'/'x2' and RLIMIT_AS — before 0ba5a20's
    guard, which read only MemAvailable, let it through to NumPy's raw MemoryError."""
    import resource

    limit = _child_vm_bytes() + GIB

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    small = _run_child(6000, cap)
    assert small.stdout.startswith("COMPUTED"), small.stdout + small.stderr
    big = _run_child(20_000, cap)
    assert big.stdout.startswith("REFUSED"), big.stdout + big.stderr
    assert "'x1'/'x2' parameters" in big.stdout and "RLIMIT_AS" in big.stdout and "of fc would need about" in big.stdout


def _cgroup_parent():
    """(version, folder under which the test may make a memory cgroup), or None."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    groups = memory.process_cgroups()
    mounts = memory.cgroup_mounts()
    for version in ("v2", "v1"):
        for _, point in mounts[version]:
            if version == "v2":
                try:
                    with open(os.path.join(point, "cgroup.controllers")) as f:
                        if "memory" not in f.read().split():
                            continue
                    with open(os.path.join(point, "cgroup.subtree_control")) as f:
                        if "memory" not in f.read().split():
                            continue
                except OSError:
                    continue
            if groups[version] is not None and os.access(point, os.W_OK):
                return version, point
    return None


@pytest.mark.skipif(_cgroup_parent() is None, reason="needs root and a writable cgroup hierarchy with the memory "
                                                     "controller")
def test_cgroup_memory_limit_refuses_before_allocating():
    """A child process moved (in preexec_fn) into a fresh memory cgroup limited to 1 GiB: a 6000² NTK runs, a
    20 000² one (3 GiB, which the OOM killer would end) is refused naming 'x1'/'x2' and the cgroup's limit."""
    version, parent = _cgroup_parent()
    folder = os.path.join(parent, f"ntkref-test-{uuid.uuid4().hex[:12]}")
    os.mkdir(folder)
    try:
        limit_file = "memory.max" if version == "v2" else "memory.limit_in_bytes"
        with open(os.path.join(folder, limit_file), "w") as f:
            f.write(str(GIB))
        if version == "v1":  # no swap beyond the limit where the kernel accounts it
            try:
                with open(os.path.join(folder, "memory.memsw.limit_in_bytes"), "w") as f:
                    f.write(str(GIB))
            except OSError:
                pass
        procs = os.path.join(folder, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write("0")

        small = _run_child(6000, join)
        assert small.stdout.startswith("COMPUTED"), small.stdout + small.stderr
        big = _run_child(20_000, join)
        assert big.returncode == 0 and big.stdout.startswith("REFUSED"), (big.returncode, big.stdout + big.stderr)
        assert "'x1'/'x2' parameters" in big.stdout and f"the cgroup memory limit {folder}/{limit_file}" in big.stdout
    finally:
        os.rmdir(folder)


# ============================================================== the estimates bound what is really allocated
def _peak(fn):
    fn()  # warm caches (and imports) outside the measurement
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _estimate(monkeypatch, modules, fn):
    """The bytes the guards of ``fn`` were asked about (the largest request to ``check_memory`` of ``modules``)."""
    seen = []
    for module in modules if isinstance(modules, (list, tuple)) else [modules]:
        def spy(n, what, caller, like, *, itemsize=None, ways_out=None, _real=module.check_memory):
            seen.append(int(n) * (itemsize or (4 if like.dtype == np.float32 else 8)))
            return _real(n, what, caller, like, itemsize=itemsize, ways_out=ways_out)

        monkeypatch.setattr(module, "check_memory", spy)
    try:
        fn()
    finally:
        monkeypatch.undo()
    return max(seen)


@pytest.mark.parametrize("name, kw", [("two_layer_relu_ntk", {}), ("wei_k1_k2", {}), ("wei_kernel", {}),
                                      ("arora_ntk", {"depth": 0}), ("arora_ntk", {"depth": 1}),
                                      ("arora_ntk", {"depth": 4}), ("arora_ntk", {"depth": 9})])
@pytest.mark.parametrize("pair", [False, True])
def test_two_layer_kernel_estimates_bound_the_measured_peak(monkeypatch, name, kw, pair):
    from ntkref import kernels
    from ntkref.kernels import _two_layer

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    x[1] = 3 * x[0]  # a parallel pair: the refinement's temporaries
    args = (x, rng.normal(size=(300, 5))) if pair else (x,)
    fn = getattr(kernels, name)
    peak = _peak(lambda: fn(*args, **kw))
    estimate = _estimate(monkeypatch, _two_layer, lambda: fn(*args, **kw))
    assert peak <= estimate <= 2 * peak, (peak, estimate)


@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
def test_gradient_flow_estimate_bounds_the_measured_peak(monkeypatch, loss):
    from ntkref import dynamics
    from ntkref.dynamics import _flow

    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 3))
    K, Kt = X @ X.T / 3 + 0.1 * np.eye(150), rng.normal(size=(40, 3)) @ X.T / 3
    y = np.sign(rng.normal(size=150))
    ts = np.linspace(0.0, 2.0, 2000)

    def run():
        return dynamics.gradient_flow(K, y, loss, 0.1, ts, K_test=Kt)

    peak = _peak(run)
    estimate = _estimate(monkeypatch, _flow, run)
    assert peak <= estimate <= 3 * peak, (peak, estimate)


@pytest.mark.parametrize("which", ["fc", "homogeneous", "cnn", "cnn-flatten-5x5"])
def test_forward_pass_estimates_bound_the_measured_peak(monkeypatch, which):
    from ntkref.nets import ConvNet, FullyConnected, HomogeneousNet, _common

    rng = np.random.default_rng(2)
    if which == "fc":
        net, x = FullyConnected(5, 1500, depth=2), rng.normal(size=(300, 5))
    elif which == "homogeneous":
        net, x = HomogeneousNet(5, 1500, depth=3), rng.normal(size=(300, 5))
    elif which == "cnn":
        net, x = ConvNet(2, 48, 2), rng.normal(size=(20, 2, 8, 8))
    else:
        net, x = ConvNet(3, 32, 3, filter_size=5, readout="flatten", spatial_shape=(6, 6)), rng.normal(size=(10, 3, 6, 6))
    import array_api_compat.numpy as cnp

    params = net.init(0, xp=cnp)  # NumPy whatever NTKREF_BACKEND says: tracemalloc sees NumPy's allocations
    from ntkref.nets import _cnn

    for run in (lambda: net.apply(params, x), lambda: net.vjp(params, x, np.ones(x.shape[0]))):
        peak = _peak(run)
        estimate = _estimate(monkeypatch, [_common, _cnn], run)  # ConvNet.vjp goes through the guarded Jacobian
        assert peak <= estimate <= 2 * peak, (peak, estimate)


# ==================================================================== kernels.cntk with a filter wider than 2·max(H, W) − 1
def test_cntk_filter_wider_than_the_image_is_computed_at_the_clipped_size(monkeypatch):
    """Issue 26: cntk(filter_size=99) on three tiny images asked for 51.8 GiB, and none of the ways out the
    message suggested fitted (the padding, not the images, was the size).  Taps beyond 2·max(H, W) − 1 read only
    zero padding: the kernel is the clipped filter's with W_std scaled by q_c/q.  Checked here against the
    independent loop transcription of the recursion *with the full filter* (tests/test_cntk.py), and the
    computation now fits in 64 MiB."""
    from ntkref.kernels import cntk

    from .test_cntk import _naive_cntk_pair

    monkeypatch.setattr(memory, "available_memory", lambda xp, like: 64 * MIB)
    rng = np.random.default_rng(3)
    for (h, w), q, depth in (((3, 2), 7, 2), ((3, 2), 9, 1), ((2, 2), 21, 2), ((1, 1), 99, 2)):
        x = rng.normal(size=(3, 2, h, w))
        ws, bs = [1.2, 0.9, 1.1][: depth + 1], [0.3, 0.0, 0.5][: depth + 1]
        for readout in ("gap", "flatten"):
            for fix in (False, True):
                got = cntk(x, depth=depth, readout=readout, filter_size=q, W_std=ws, b_std=bs, fix_first_last=fix)
                for i in range(3):
                    for j in range(3):
                        nngp, ntk = _naive_cntk_pair(x[i], x[j], depth, q, ws, bs, readout, fix)
                        rtol = 1e-7 if i == j else 1e-11  # the arccos oracle's own accuracy (test_cntk)
                        np.testing.assert_allclose(got.nngp[i, j], nngp, rtol=rtol)
                        np.testing.assert_allclose(got.ntk[i, j], ntk, rtol=rtol)
    # the reported case: three 4×4 images, filter_size=99 — computed (it was refused asking for 51.8 GiB)
    x = rng.normal(size=(3, 1, 4, 4))
    k99 = cntk(x, depth=2, filter_size=99)
    k7 = cntk(x, depth=2, filter_size=7, W_std=[7 / 99, 7 / 99, 1.0])
    np.testing.assert_allclose(k99.ntk, k7.ntk, rtol=1e-15, atol=0)
    assert np.all(np.isfinite(k99.ntk)) and np.all(np.linalg.eigvalsh(k99.ntk) > 0)
