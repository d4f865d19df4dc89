"""Platform probing: which isolation level works here, and which interpreter to run."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

from sage_env.sandbox.host.cgroups import cgroups_available
from sage_env.sandbox.host.config import (
    CHILD_ENV,
    HARNESS_DIR,
    HIDE_PATHS,
    ISOLATION_LEVELS,
    PACKAGE_DIR,
)

log = logging.getLogger("sage_env.sandbox")

_PROBE_LOCK = threading.Lock()
_LEVEL: str | None = None


def _reachable_by_others(path: str) -> bool:
    """Whether ``path`` can be executed by an unprivileged other user (o+x on every parent)."""
    try:
        real = os.path.realpath(path)
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(real)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def default_python() -> str:
    """The interpreter the sandbox runs: ``sys.executable`` unless the dropped uid cannot reach it.

    As root, an interpreter under a mode-700 directory (e.g. pyenv under ``/root``) is not
    executable by uid 65534; then ``/usr/bin/python3`` is used.
    """
    if os.geteuid() != 0 or _reachable_by_others(sys.executable):
        return sys.executable
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if _reachable_by_others(cand):
            return cand
    return sys.executable


def gold_paths() -> list[str]:
    """Directories that hold answers a program must not read, wherever the package sits.

    The package's own data (seed answers, held-out execution outputs, validation gold:
    ``sage_env/data``), the learners' benchmark files beside it (``learners/data``, in a
    checkout or in ``site-packages`` alike), ``$SAGE_ENV_DATA``, the model and warm-up cache
    (``$SAGE_ENV_CACHE`` or ``~/.cache/sage-env``) and any directory of
    ``$SAGE_SANDBOX_HIDE`` (``:``-separated). Each existing one is covered by an empty tmpfs
    inside the sandbox (bwrap and unshare levels); the ``rlimits`` level cannot hide files,
    so there the static allow-list of a task program (no file reader) is the only guard.
    """
    package = PACKAGE_DIR
    cands = [
        os.path.join(package, "data"),
        os.path.join(os.path.dirname(package), "learners", "data"),
        os.environ.get("SAGE_ENV_DATA", ""),
        os.environ.get("SAGE_ENV_CACHE") or os.path.expanduser("~/.cache/sage-env"),
        *os.environ.get("SAGE_SANDBOX_HIDE", "").split(":"),
    ]
    return [os.path.realpath(c) for c in cands if c and os.path.isdir(c)]


def _hidden_paths(workdir: str | None, python: str) -> list[str]:
    """The directories to hide that exist (``HIDE_PATHS`` and :func:`gold_paths`), less those
    holding the interpreter or the workdir, and less those inside one already hidden."""
    keep = [os.path.realpath(python)] + ([os.path.realpath(workdir)] if workdir else [])
    hidden: list[str] = []
    for path in [*HIDE_PATHS, *gold_paths()]:
        if not os.path.isdir(path) or any(k == path or k.startswith(path + "/") for k in keep):
            continue
        if not any(path == h or path.startswith(h.rstrip("/") + "/") for h in hidden):
            hidden.append(path)
    return hidden


def bwrap_argv(
    workdir: str | None, python: str, disk_bytes: int, *, zygote: bool = False
) -> list[str]:
    """Build bubblewrap's argv up to ``--``.

    ``workdir`` gets a private tmpfs and becomes the cwd; a ``zygote`` keeps the capabilities it
    needs to give every job its own mounts.
    """
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in _hidden_paths(workdir, python):
        argv += ["--tmpfs", path]
    argv += ["--perms", "1777", "--size", str(disk_bytes), "--tmpfs", "/tmp"]
    if workdir:
        argv += ["--perms", "0777", "--size", str(disk_bytes), "--tmpfs", workdir]
    argv += ["--chdir", workdir or "/tmp"]
    argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if zygote:
            argv += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    return argv + ["--"]


#: The ``unshare`` level's wrapper (util-linux): new network, PID (its first child is PID 1),
#: mount (``--mount-proc``), IPC and UTS namespaces. The harness then gives itself the rest
#: of bubblewrap's file system view (see :func:`unshare_fs_arg`).
UNSHARE_ARGV = [
    "unshare",
    "--net",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--ipc",
    "--uts",
]


def unshare_fs_arg(workdir: str | None, python: str, disk_bytes: int) -> str:
    """The harness argument (``fs=<json>``) that asks for bubblewrap's file system view.

    Inside its fresh mount namespace the harness (still root) remounts every mount read-only,
    covers the hidden directories with empty tmpfs and mounts private size-capped tmpfs on
    ``/tmp``, ``/dev/shm`` and ``workdir`` (the cwd), as
    :func:`sage_env.sandbox.harness.confine.private_fs` describes.
    """
    spec = {"size": int(disk_bytes), "hide": _hidden_paths(workdir, python), "workdir": workdir}
    return "fs=" + json.dumps(spec)


def _probe_level(level: str, python: str) -> bool:
    workdir = tempfile.mkdtemp(prefix="sage-probe-")
    try:
        code = "import socket; socket.socket().connect_ex(('127.0.0.1', 9)); print('ok')"
        inner = [python, "-I", "-S", "-c", code]
        if level == "bwrap":
            if shutil.which("bwrap") is None:
                return False
            argv = bwrap_argv(workdir, python, 1 << 20) + inner
        elif level == "unshare":
            if shutil.which("unshare") is None:
                return False
            # the level includes the private file system view: set it up exactly as a harness
            with open(os.path.join(HARNESS_DIR, "confine.py"), encoding="utf-8") as fh:
                confine = fh.read()
            spec = unshare_fs_arg(workdir, python, 1 << 20)[3:]
            setup = f"\nimport json\nprivate_fs(json.loads({spec!r}), -1)\n"
            argv = UNSHARE_ARGV + [python, "-I", "-S", "-c", confine + setup + code]
        else:
            return True
        out = subprocess.run(
            argv, capture_output=True, timeout=20, env=dict(CHILD_ENV), cwd=workdir
        )
        return out.returncode == 0 and out.stdout.strip() == b"ok"
    except Exception:
        return False
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_level() -> str:
    """The isolation level in use (``"bwrap"``, ``"unshare"`` or ``"rlimits"``).

    Probed once per process, strongest first; ``SAGE_SANDBOX_ISOLATION`` forces a level (it is
    still probed; an unusable forced level falls back with a warning). Logged with ``logging``.
    """
    global _LEVEL
    with _PROBE_LOCK:
        if _LEVEL is not None:
            return _LEVEL
        python = default_python()
        forced = os.environ.get("SAGE_SANDBOX_ISOLATION", "").strip().lower()
        order = list(ISOLATION_LEVELS)
        if forced in ISOLATION_LEVELS:
            order = order[order.index(forced) :]
        if sys.platform != "linux":
            order = ["rlimits"]
        for level in order:
            if _probe_level(level, python):
                _LEVEL = level
                break
            hint = ""
            if level in ("bwrap", "unshare") and shutil.which(level) is None:
                package = "bubblewrap" if level == "bwrap" else "util-linux"
                hint = f" ({level} is not installed: apt-get install {package})"
            elif level == "unshare" and os.geteuid() != 0:
                hint = " (it needs root)"
            log.warning("sandbox: isolation level %r unavailable here%s, falling back", level, hint)
        assert _LEVEL is not None
        cg = cgroups_available()
        log.info(
            "sandbox: isolation=%s, cgroups(pids=%s, memory=%s), root=%s, python=%s",
            _LEVEL,
            cg["pids"],
            cg["memory"],
            os.geteuid() == 0,
            python,
        )
        if _LEVEL == "rlimits":
            log.warning(
                "sandbox: no network/PID namespace; untrusted code keeps network access "
                "(see docs/reference/sandbox.md)"
            )
        return _LEVEL
