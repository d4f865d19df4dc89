"""Process confinement used inside the sandbox: privilege drop, prctl, seccomp, mounts, raw I/O.

A harness module (runs inside the sandbox, passed to the interpreter as source): standard
library only.
"""

from __future__ import annotations

import os
import sys


def drop(uid):
    """Drop to ``uid`` (its group too, no supplementary groups) when root; else nothing."""
    if uid >= 0 and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


_LIBC = []  # [libc]: loaded once (in a zygote, before its forks), not per call


def _libc():
    import ctypes

    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def prctl(opt, arg):
    """``prctl(opt, arg)`` through libc, best effort (errors are ignored)."""
    try:
        _libc().prctl(opt, arg, 0, 0, 0)
    except Exception:
        pass


_os_exit = os._exit  # as it was before any program ran in this process


def flush_exit():
    """Flush stdout and stderr, then ``os._exit(0)`` (as bound before any program ran)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    _os_exit(0)


def write_all(fd, data):
    """Write all of ``data`` to ``fd`` (a blocking descriptor)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_all(fd):
    """Read ``fd`` to its end; returns the bytes."""
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


_KEYRING_SYSCALLS = {  # add_key, request_key, keyctl: the kernel keyrings of a uid outlive runs
    "x86_64": (0xC000003E, (248, 249, 250), 0x40000000),  # (AUDIT_ARCH, numbers, x32 bit)
    "aarch64": (0xC00000B7, (217, 218, 219), None),
}

_SECCOMP = []  # [True] once this process (a zygote) has the filter: its forks inherit it


def seccomp():
    """Install a seccomp filter (needs no_new_privs or CAP_SYS_ADMIN), best effort.

    The keyring syscalls fail with EPERM, as do syscalls of a foreign ABI (x32, or 32-bit
    int 0x80 on x86_64).
    """
    import ctypes

    spec = _KEYRING_SYSCALLS.get(os.uname().machine)
    if spec is None or _SECCOMP:
        return
    arch, numbers, x32 = spec
    LD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
    ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
    n = len(numbers)
    prog = [(LD, 0, 0, 4), (JEQ, 0, n + 3, arch), (LD, 0, 0, 0)]
    prog.append((JGE, n + 1, 0, x32) if x32 else (JEQ, 0, 0, 0))
    prog += [(JEQ, n - k, 0, nr) for k, nr in enumerate(numbers)]
    prog += [(RET, 0, 0, ALLOW), (RET, 0, 0, EPERM)]

    class Filter(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        ]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(prog))(*[Filter(*ins) for ins in prog])
    fprog = Prog(len(prog), filters)
    try:
        if _libc().prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0:
            _SECCOMP.append(True)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except Exception:
        pass


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 1 << 14, 1 << 18
_PROC_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC
_MS_KEEP = {  # per-mount flags a read-only remount must keep (dropping nosuid would arm suid)
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
}


def _c(value):
    return value if value is None or isinstance(value, bytes) else os.fsencode(value)


def mount(libc, source, target, fstype, flags, data):
    """Mount ``source`` on ``target`` through ``libc``; raises OSError naming the target."""
    import ctypes

    if libc.mount(_c(source), _c(target), _c(fstype), flags, _c(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def tmpfs(libc, path, opts, flags=MS_NOSUID | MS_NODEV):
    """Mount a tmpfs with mount options ``opts`` (e.g. ``size=...``) on ``path``."""
    mount(libc, "tmpfs", path, "tmpfs", flags, opts)


def _mountinfo():
    # [(mount point, per-mount options)] of this mount namespace, in mount order
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4]
            for esc, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n")):
                point = point.replace(esc, char)
            out.append((point.replace("\\134", "\\"), fields[5].split(",")))
    return out


def private_fs(spec, wuid):
    """Give this process (root, in a fresh mount namespace) the file system bubblewrap gives.

    ``spec`` is ``{"size": bytes, "hide": [dir, ...], "workdir": dir or None}``. Mount
    propagation becomes private, then every mount is remounted read-only (keeping nosuid, nodev,
    noexec) except the fresh ``/proc``, of which ``sys``, ``sysrq-trigger``, ``irq`` and ``bus``
    are made read-only (as bwrap's ``--proc``). Each ``hide`` directory is covered by an empty
    read-only tmpfs; ``/tmp`` and ``/dev/shm`` become fresh tmpfs of ``size`` bytes (mode 1777)
    and ``workdir`` one of its own owned by ``wuid`` (mode 0700), which becomes the cwd (else
    ``/tmp``). Nothing written there reaches the host's disk or another run.

    Raises:
        OSError: If a mount fails (the level's probe runs this too, so it then falls back).
    """
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    # first: no mount made below may propagate back to the host's namespace
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    for point, opts in _mountinfo():
        if point == "/proc" or point.startswith("/proc/"):
            continue  # the fresh procfs of this PID namespace (bwrap's is writable too)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name in opts:
            flags |= _MS_KEEP.get(name, 0)
        try:
            mount(libc, None, point, None, flags, None)
        except OSError as exc:
            # EINVAL/ENOENT: a mount shadowed by a later one at (or above) its path, out of reach
            if point == "/" or exc.errno not in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
                raise
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        if os.path.exists(path):  # the kernel-wide parts of /proc read-only, as bwrap's --proc
            mount(libc, path, path, None, MS_BIND | MS_REC, None)
            mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _PROC_FLAGS, None)
    for path in spec["hide"]:
        tmpfs(libc, path, "mode=0755,size=4k", MS_RDONLY | MS_NOSUID | MS_NODEV)
    size = int(spec["size"])
    tmpfs(libc, "/tmp", f"mode=1777,size={size}")
    if os.path.isdir("/dev/shm"):
        tmpfs(libc, "/dev/shm", f"mode=1777,size={size}")
    work = spec.get("workdir")
    if work:
        os.makedirs(work, exist_ok=True)
        owner = f",uid={wuid},gid={wuid}" if wuid >= 0 else ""
        tmpfs(libc, work, f"mode=0700,size={size}{owner}")
    os.chdir(work or "/tmp")


def drop_bounding_set(libc):
    """PR_CAPBSET_DROP for every capability the kernel knows (EINVAL past the last one)."""
    import ctypes

    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
