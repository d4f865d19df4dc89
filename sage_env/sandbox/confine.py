"""Process confinement used inside the sandbox: privilege drop, prctl, seccomp, raw I/O.

A harness module (runs inside the sandbox, passed to the interpreter as source): standard
library only.
"""

from __future__ import annotations

import os
import sys


def _drop(uid):
    if uid >= 0 and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _prctl(opt, arg):
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(opt, arg, 0, 0, 0)
    except Exception:
        pass


_os_exit = os._exit  # as it was before any program ran in this process


def _flush_exit():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    _os_exit(0)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_all(fd):
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


def _seccomp():
    # A seccomp filter (needs no_new_privs or CAP_SYS_ADMIN): the keyring syscalls fail with
    # EPERM, as do syscalls of a foreign ABI (x32, or 32-bit int 0x80 on x86_64). Best effort.
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
        if ctypes.CDLL(None, use_errno=True).prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0:
            _SECCOMP.append(True)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    except Exception:
        pass
