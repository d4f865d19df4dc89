"""The harness entry point: a one-job harness, or the zygote that forks one per job.

A harness module (runs inside the sandbox): standard library only. Started by
:func:`sage_env.sandbox.host.launch.harness_argv`.
"""

from __future__ import annotations

import os
import sys

from sage_env.sandbox.harness.confine import (
    MS_PRIVATE,
    MS_REC,
    drop_bounding_set,
    flush_exit,
    mount,
    private_fs,
    seccomp,
    tmpfs,
    write_all,
)
from sage_env.sandbox.harness.judge import run_judge, warm

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000


def _job_process(hdr, fds, wuid, huid, libc):
    # H, forked by the zygote as root (inside the zygote's bwrap namespaces and cgroups): take
    # private mount and IPC namespaces with fresh size-capped tmpfs for the
    # cwd, /tmp and /dev/shm (so nothing a run writes outlives it or reaches the next run),
    # drop every capability from the bounding set, then judge exactly like a fresh harness.
    import ctypes

    os.setsid()
    high = [os.dup(fd) for fd in fds]  # received fds may collide with 0..3
    for fd in fds:
        os.close(fd)
    for dst, src in enumerate(high):  # job -> stdin, out -> 1, err -> 2, report -> 3
        os.dup2(src, dst)
    os.closerange(4, 1 << 16)
    with open("/proc/self/oom_score_adj", "w") as fh:  # the OOM killer takes jobs, not the zygote
        fh.write("1000")

    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    size = int(hdr["disk_bytes"])
    tmpfs(libc, "/tmp", f"mode=1777,size={size}")
    work = hdr["workdir"]
    os.mkdir(work, 0o700)
    owner = f",uid={wuid},gid={wuid}" if wuid >= 0 else ""
    tmpfs(libc, work, f"mode=0700,size={size}{owner}")
    if os.path.isdir("/dev/shm"):
        tmpfs(libc, "/dev/shm", f"mode=1777,size={size}")
    os.chdir(work)
    drop_bounding_set(libc)
    run_judge(wuid, huid, 0)


def _zygote(ctl, wuid, huid):
    # The zygote Z: a long-lived root process inside one bwrap/unshare sandbox. It never reads a
    # job: for each request it forks H with the request's pipes and waits for it.
    import ctypes
    import gc
    import json
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    sock = socket.socket(fileno=ctl)
    os.set_inheritable(ctl, False)
    seccomp()  # once for every job forked from here (the zygote needs no keyrings either)
    warm()  # the judge's caches and specialised bytecode, made once for every job's fork
    gc.freeze()  # forked children's collections skip (and so do not copy) inherited objects
    sock.send(b'{"ev": "ready"}')
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
        except InterruptedError:
            continue
        except OSError:
            break
        if not msg:
            break
        try:
            hdr = json.loads(msg)
            if len(fds) != 4:
                raise ValueError(f"expected 4 fds, got {len(fds)}")
        except BaseException as exc:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"ev": "refused", "msg": str(exc)[:200]}).encode())
            continue
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _job_process(hdr, fds, wuid, huid, libc)
            except BaseException as exc:
                try:
                    write_all(
                        3,
                        (
                            json.dumps(
                                {
                                    "ev": "harness_error",
                                    "exc": type(exc).__name__,
                                    "msg": str(exc)[:200],
                                }
                            )
                            + "\n"
                        ).encode("ascii"),
                    )
                except BaseException:
                    pass
            flush_exit()
        for fd in fds:
            os.close(fd)
        while True:
            try:
                status = os.waitpid(pid, 0)[1]
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                status = -1
                break
        try:
            sock.send(json.dumps({"ev": "exit", "status": status}).encode())
        except OSError:
            break


def _init(child, ctl):
    # PID 1 of an `unshare` PID namespace (bwrap brings its own): reap every orphan a job leaves
    # (the host kills them through the cgroup) and exit with the zygote ``child``'s status.
    os.close(ctl)
    while True:
        try:
            pid, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def main(argv: list[str]) -> None:
    """Run the harness.

    ``argv`` is ``[prog, wuid, huid, report_fd]`` (one job) or ``[prog, "zygote", wuid, huid,
    ctl_fd]``; a uid of -1 means no drop. An optional ``fs=<json>`` right after ``prog`` (the
    ``unshare`` level) first gives this process a private file system view, see
    :func:`~sage_env.sandbox.harness.confine.private_fs`.
    """
    if hasattr(sys, "set_int_max_str_digits"):  # results are sent as decimal text
        sys.set_int_max_str_digits(0)
    fs = None
    if argv[1].startswith("fs="):
        import json

        fs = json.loads(argv.pop(1)[3:])
    if argv[1] == "zygote":
        ctl, wuid = int(argv[4]), int(argv[2])
        if fs is not None:
            private_fs(fs, wuid)
            if os.getpid() == 1:
                child = os.fork()
                if child:
                    _init(child, ctl)
        _zygote(ctl, wuid, int(argv[3]))
    else:
        rfd = int(argv[3])
        if rfd != 3:
            os.dup2(rfd, 3)
            os.close(rfd)
        if fs is not None:
            import ctypes

            private_fs(fs, int(argv[1]))
            drop_bounding_set(ctypes.CDLL(None, use_errno=True))
        run_judge(int(argv[1]), int(argv[2]), 0)
    flush_exit()
