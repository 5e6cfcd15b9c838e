"""The one memory guard: refuse a Gram-sized temporary that would not fit, before allocating it.

Every function that allocates a Gram-sized (n1·n2) or width-sized temporary asks :func:`check_memory`
(entries) or :func:`check_bytes` (bytes).  The estimate is compared with the memory available where the
arrays live (:func:`available_memory`); too much is an :class:`~ntkref.InvalidParameterError` giving the size,
the parameters, the limit that bound it and the ways out, instead of NumPy's allocation failure or the
process being killed.

What "available" means (issue 26: reading only ``MemAvailable``, an accepted Gram failed with NumPy's raw
MemoryError under ``ulimit -v`` and was OOM-killed in a container):

- device memory (CuPy arrays) comes through the ``free_memory`` seam (the CUDA engine registers CuPy's free
  bytes plus its pool's unused blocks);
- host memory is the smallest of every limit the process is under (:func:`host_limits`):

  * ``MemAvailable`` of /proc/meminfo — the kernel's estimate of what can be allocated without swapping; it
    can read ~0 for a moment on a busy machine while a few MiB are still found, so it is never believed below
    256 MiB (:data:`HOST_FLOOR`; the guard is for Gram matrices of gigabytes, not for small arrays);
  * the memory cgroup of the process (containers, batch schedulers, systemd units) and of every ancestor
    cgroup up to the mounted root: cgroup v2 ``memory.max − (memory.current − inactive_file)``, cgroup v1
    ``memory.limit_in_bytes − (memory.usage_in_bytes − total_inactive_file)``.  Inactive page cache is
    reclaimed before the OOM killer runs, so it is not counted as used (the *working set* of the kubelet's
    eviction signal ``memory.available``).  The cgroup comes from /proc/self/cgroup, its folder from the
    cgroup mounts of /proc/self/mountinfo (default /sys/fs/cgroup);
  * the address-space limit ``RLIMIT_AS`` (``ulimit -v``) minus the process's virtual size (``VmSize`` of
    /proc/self/status), and ``RLIMIT_DATA`` minus ``VmData`` (Linux ≥ 4.7 counts private writable mappings,
    where NumPy's large arrays live, against it).

  A hard limit (cgroup, rlimit) is taken at its real headroom, never floored: beyond it the allocation fails
  or the process is killed, whatever MemAvailable says.

The reading is an :class:`Available` (an ``int`` of bytes) whose ``source`` names the limit that bound it;
the refusal's message quotes it.  All reads of /proc and /sys go through :func:`read_text` (tests replace it
with fake file contents).
"""
from __future__ import annotations

import os

import array_api_compat

from . import dispatch
from .backend import device_of, namespace
from .validation import InvalidParameterError

#: host memory below which MemAvailable is not believed (a busy machine can read ~0 for a moment)
HOST_FLOOR = 256 * 2**20  # bytes
#: cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything above this is no limit
_NO_LIMIT = 1 << 60
_GIB = 2.0**30


class Available(int):
    """Bytes available, with ``source``: the limit that bound the reading (a phrase for messages)."""

    def __new__(cls, value, source):
        obj = super().__new__(cls, max(int(value), 0))
        obj.source = source
        return obj

    def __repr__(self):
        return f"Available({int(self)}, {self.source!r})"


def read_text(path):
    """The text of a small /proc or /sys file, or ``None`` when it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _gib(n):
    return f"{n / _GIB:.3g} GiB"


# ------------------------------------------------------------------------------------------ /proc/meminfo
def meminfo_available():
    """``MemAvailable`` of /proc/meminfo in bytes, or ``None``."""
    text = read_text("/proc/meminfo")
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


# ------------------------------------------------------------------------------------------------ cgroups
def _unescape(field):
    r"""mountinfo escapes space, tab, newline and backslash as \040, \011, \012, \134."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def cgroup_mounts():
    """{"v2": [(root, mount point)], "v1": [(root, mount point)]} of the cgroup2 mounts and the cgroup v1
    mounts of the memory controller, from /proc/self/mountinfo (the defaults /sys/fs/cgroup and
    /sys/fs/cgroup/memory when it cannot be read)."""
    text = read_text("/proc/self/mountinfo")
    if text is None:
        return {"v2": [("/", "/sys/fs/cgroup")], "v1": [("/", "/sys/fs/cgroup/memory")]}
    mounts = {"v2": [], "v1": []}
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 5 or len(fields) < sep + 2:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        fstype = fields[sep + 1]
        options = fields[sep + 3].split(",") if len(fields) > sep + 3 else []
        if fstype == "cgroup2":
            mounts["v2"].append((root, point))
        elif fstype == "cgroup" and "memory" in options:
            mounts["v1"].append((root, point))
    return mounts


def process_cgroups():
    """{"v2": path or None, "v1": path or None}: the process's cgroup in the unified hierarchy ("0::path") and
    in the v1 hierarchy of the memory controller ("N:...memory...:path"), from /proc/self/cgroup."""
    found = {"v2": None, "v1": None}
    for line in (read_text("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            found["v2"] = path.strip()
        elif "memory" in controllers.split(","):
            found["v1"] = path.strip()
    return found


def _folders(path, mounts):
    """The folders of cgroup ``path`` and of its ancestors up to each mount's root, innermost first."""
    for root, point in mounts:
        root = root.rstrip("/")
        if path == root or path.startswith(root + "/"):
            rel = path[len(root):]
        else:  # the process's cgroup is outside this mount's root (another namespace): the mount is its root
            rel = ""
        parts = [p for p in rel.split("/") if p]
        for k in range(len(parts), -1, -1):
            yield os.path.join(point, *parts[:k])


def _stat_value(text, key):
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _int(text):
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _limit_files(version, folder):
    if version == "v2":
        return (os.path.join(folder, "memory.max"), os.path.join(folder, "memory.current"), "inactive_file")
    return (os.path.join(folder, "memory.limit_in_bytes"), os.path.join(folder, "memory.usage_in_bytes"),
            "total_inactive_file")


def _read_limit(path):
    text = read_text(path)
    if text is None or text.strip() == "max":
        return None
    limit = _int(text)
    return None if limit is None or limit >= _NO_LIMIT else limit


#: (key, time, [(version, folder)]) of the last search for limited cgroups (see :func:`limited_cgroups`)
_found = [None, 0.0, []]
_REDISCOVER_S = 5.0


def limited_cgroups():
    """[(version, folder)] of the process's memory cgroups (v2 and v1, the process's own and every ancestor up
    to the mounted root: a limit on a parent — a systemd slice, a Kubernetes pod — binds its children too)
    that have a memory limit.  The search reads /proc/self/cgroup, /proc/self/mountinfo and every folder's
    limit; its answer is kept for 5 s (the limits are read afresh at every check, the usage too)."""
    import time

    key = (os.getpid(), read_text)
    now = time.monotonic()
    if _found[0] == key and now - _found[1] < _REDISCOVER_S:
        return _found[2]
    groups, mounts, found = process_cgroups(), None, []
    for version in ("v2", "v1"):
        if groups[version] is None:
            continue
        mounts = mounts or cgroup_mounts()
        for folder in _folders(groups[version], mounts[version]):
            if _read_limit(_limit_files(version, folder)[0]) is not None:
                found.append((version, folder))
    _found[:] = [key, now, found]
    return found


def cgroup_headroom():
    """The tightest memory cgroup limit of the process, as (bytes still available, description), or ``None``
    when no limit is set (or none can be read): limit − (usage − inactive page cache) of each
    :func:`limited_cgroups` folder."""
    best = None
    for version, folder in limited_cgroups():
        limit_path, usage_path, inactive_key = _limit_files(version, folder)
        limit = _read_limit(limit_path)
        usage = _int(read_text(usage_path))
        if limit is None or usage is None:
            continue
        inactive = _stat_value(read_text(os.path.join(folder, "memory.stat")), inactive_key) or 0
        used = max(usage - inactive, 0)
        headroom = max(limit - used, 0)
        if best is None or headroom < best[0]:
            best = (headroom, f"the cgroup memory limit {limit_path} = {_gib(limit)}, {_gib(used)} of it in use")
    return best


# ------------------------------------------------------------------------------------------------ rlimits
def _status_kib(key):
    for line in (read_text("/proc/self/status") or "").splitlines():
        if line.startswith(key + ":"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def getrlimit(which):
    """The soft limit ``resource.getrlimit(which)`` (``None``: unlimited or no ``resource`` module)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    number = getattr(resource, which, None)
    if number is None:
        return None
    soft, _ = resource.getrlimit(number)
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def rlimit_headroom():
    """The tightest of ``RLIMIT_AS − VmSize`` and ``RLIMIT_DATA − VmData`` as (bytes, description), or
    ``None`` when neither limit is set.  When the process's size cannot be read the limit itself is the bound."""
    best = None
    for which, key, name in (("RLIMIT_AS", "VmSize", "the address-space limit RLIMIT_AS (ulimit -v)"),
                             ("RLIMIT_DATA", "VmData", "the data-segment limit RLIMIT_DATA (ulimit -d)")):
        limit = getrlimit(which)
        if limit is None:
            continue
        used = _status_kib(key) or 0
        headroom = max(limit - used, 0)
        if best is None or headroom < best[0]:
            best = (headroom, f"{name} = {_gib(limit)}, {_gib(used)} of it in use ({key})")
    return best


# ---------------------------------------------------------------------------------------------- readings
def host_limits():
    """Every readable limit on host memory as (bytes, description): MemAvailable (floored at 256 MiB), else
    the available physical pages; the cgroup limit; the rlimits."""
    limits = []
    mem = meminfo_available()
    if mem is not None:
        limits.append((max(mem, HOST_FLOOR), "MemAvailable of /proc/meminfo" + (
            " (read below 256 MiB: floored)" if mem < HOST_FLOOR else "")))
    else:
        try:
            pages = int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
            limits.append((max(pages, HOST_FLOOR), "the available physical pages (sysconf)"))
        except (ValueError, OSError, AttributeError):
            pass
    for reading in (cgroup_headroom(), rlimit_headroom()):
        if reading is not None:
            limits.append(reading)
    return limits


def host_available():
    """The smallest of :func:`host_limits` as an :class:`Available`, or ``None`` when nothing can be read."""
    limits = host_limits()
    if not limits:
        return None
    value, source = min(limits, key=lambda item: item[0])
    return Available(value, source)


def available_memory(xp, like):
    """Bytes that can still be allocated where ``like`` lives (an :class:`Available`), or ``None`` when unknown.

    An engine's device (CuPy): what the ``free_memory`` seam says (free device memory plus the unused
    blocks of CuPy's pool; host limits do not bound device memory); torch/JAX on an accelerator: unknown
    (no guard); everything else lives in host memory: :func:`host_available`, the smallest of MemAvailable
    (never less than 256 MiB), the cgroup limits and the rlimits (module docstring).
    """
    engine = dispatch.free_memory.lookup(like)
    if engine is not None:
        free = engine(like)
        return None if free is None else Available(free, f"the free memory of the device {device_of(like)}")
    dev = str(device_of(like)).lower()
    if ("cuda" in dev or "gpu" in dev or "tpu" in dev or "mps" in dev) and not array_api_compat.is_numpy_namespace(xp):
        return None
    return host_available()


def check_bytes(needed, what, caller, xp, like, ways_out):
    """Refuse (InvalidParameterError) a computation estimated to need more than ``needed`` bytes available.

    ``what`` names the parameters and the arrays (it is the start of the message), ``ways_out`` how to
    make it fit.  The message names the limit that bound the reading (MemAvailable, a cgroup, an rlimit,
    the device).
    """
    available = available_memory(xp, like)
    if available is None or needed <= available:
        return
    source = getattr(available, "source", None)
    bound = f" (bound by {source})" if source else ""
    raise InvalidParameterError(
        f"{what} of {caller} would need about {needed / _GIB:.3g} GiB, but about {available / _GIB:.3g} GiB "
        f"is available where the arrays live{bound}; {ways_out}."
    )


def check_memory(n_elements, what, caller, like, *, itemsize=None, ways_out=None):
    """Refuse a Gram-sized temporary (``n_elements`` entries, e.g. n1·n2) that would not fit.

    The estimate is entries × itemsize of ``like``'s dtype; below 16 MiB it is never worth a look-up.
    """
    xp = namespace(like)
    if itemsize is None:
        itemsize = 4 if like.dtype == xp.float32 else 8
    needed = int(n_elements) * int(itemsize)
    if needed < (1 << 24):
        return
    check_bytes(needed, what, caller, xp, like,
                ways_out or "use float32 inputs or fewer rows per call (split the inputs into blocks)")
