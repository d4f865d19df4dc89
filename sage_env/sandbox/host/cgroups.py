"""Per-run and per-zygote cgroup v1 groups (``pids``, ``memory``) and how to empty them."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import sys
import time

from sage_env.sandbox.host.config import CG_DIR, CG_ROOT

log = logging.getLogger("sage_env.sandbox")

_CGROUPS: dict[str, bool] | None = None
_COUNTER = itertools.count()


def cgroups_available() -> dict[str, bool]:
    """Which cgroup v1 controllers (``pids``, ``memory``) this process can create groups in."""
    global _CGROUPS
    if _CGROUPS is not None:
        return _CGROUPS
    found = {}
    for ctrl in ("pids", "memory"):
        ok = False
        if sys.platform == "linux" and os.environ.get("SAGE_SANDBOX_NO_CGROUPS") != "1":
            base = os.path.join(CG_ROOT, ctrl, CG_DIR)
            probe = os.path.join(base, f"probe-{os.getpid()}")
            try:
                os.makedirs(base, exist_ok=True)
                os.mkdir(probe)
                os.rmdir(probe)
                ok = True
            except OSError:
                ok = False
            if ok:
                _sweep_stale(base)
        found[ctrl] = ok
    _CGROUPS = found
    return found


def _sweep_stale(base: str) -> None:
    """Remove per-run cgroups left by sandbox hosts that no longer exist (e.g. killed hosts)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        try:
            owner = int(name[1:].split("-", 1)[0])
        except ValueError:
            continue
        if name.startswith("r") and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _kill_members(cgroup: Cgroup, pids: list[int]) -> None:
    """SIGKILL ``pids`` that are still members of ``cgroup``, never a recycled pid.

    A pid read from ``cgroup.procs`` may exit and be reused by an unrelated process before the
    signal is sent. A pidfd pins the process it was opened for, so each pid is opened first and
    signalled only if it is still listed in the cgroup afterwards (no process can join a group
    whose ``pids.max`` is 0 by forking). Falls back to ``kill`` where pidfds are unavailable.
    """
    opened: list[tuple[int, int]] = []
    try:
        for pid in pids:
            try:
                opened.append((pid, os.pidfd_open(pid)))
            except ProcessLookupError:
                continue
            except (AttributeError, OSError):  # no pidfd support: plain kill
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        members = set(cgroup.pids()) if opened else set()
        for pid, fd in opened:
            if pid in members:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
    finally:
        for _pid, fd in opened:
            os.close(fd)


class Cgroup:
    """A per-run cgroup v1 group in the ``pids`` and/or ``memory`` controllers."""

    def __init__(self, pids_max: int, memory_bytes: int) -> None:
        self.pids_max = pids_max
        avail = cgroups_available()
        name = f"r{os.getpid()}-{next(_COUNTER)}"
        self.paths: dict[str, str] = {}
        for ctrl in ("pids", "memory"):
            if not avail[ctrl]:
                continue
            path = os.path.join(CG_ROOT, ctrl, CG_DIR, name)
            try:
                os.mkdir(path)
                if ctrl == "pids":
                    _write(os.path.join(path, "pids.max"), str(pids_max))
                else:
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(memory_bytes))
                    try:
                        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(memory_bytes))
                    except OSError:
                        pass
                self.paths[ctrl] = path
            except OSError as exc:
                log.debug("sandbox: cgroup %s unavailable: %s", path, exc)
                try:
                    os.rmdir(path)
                except OSError:
                    pass

    def procs_file(self, ctrl: str) -> str:
        """The ``cgroup.procs`` file of controller ``ctrl`` (``os.devnull`` without it)."""
        return os.path.join(self.paths[ctrl], "cgroup.procs") if ctrl in self.paths else os.devnull

    def pids(self) -> list[int]:
        """The processes in the group, sorted."""
        out: set[int] = set()
        for path in self.paths.values():
            try:
                with open(os.path.join(path, "cgroup.procs")) as fh:
                    out.update(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def oom_kills(self) -> int:
        """How many processes the memory controller has OOM-killed in the group."""
        path = self.paths.get("memory")
        if path is None:
            return 0
        try:
            with open(os.path.join(path, "memory.oom_control")) as fh:
                for line in fh:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self, keep: frozenset[int] = frozenset()) -> bool:
        """Freeze forking (``pids.max`` = 0) and SIGKILL every process but ``keep``.

        Repeats until none is left (for up to about 0.4 s), then restores ``pids.max`` if
        processes were kept (a zygote's own). Returns whether no other process is left.
        """
        pids_dir = self.paths.get("pids")
        if pids_dir is not None:
            try:
                _write(os.path.join(pids_dir, "pids.max"), "0")
            except OSError:
                pass
        pids: list[int] = []
        for _ in range(200):
            pids = [pid for pid in self.pids() if pid not in keep]
            if not pids:
                break
            _kill_members(self, pids)
            time.sleep(0.002)
        if keep and pids_dir is not None:
            self.set_pids_max(self.pids_max)
        return not pids

    def set_pids_max(self, value: int) -> None:
        """Set ``pids.max`` (and remember it)."""
        self.pids_max = value
        if "pids" in self.paths:
            try:
                _write(os.path.join(self.paths["pids"], "pids.max"), str(value))
            except OSError:
                pass

    def lower_memory_limit(self, value: int) -> None:
        """Lower the memory and memory+swap limits to ``value`` bytes.

        memsw must stay >= the memory limit, so the memory limit goes first.
        """
        path = self.paths.get("memory")
        if path is None:
            return
        for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            try:
                _write(os.path.join(path, name), str(value))
            except OSError:
                pass

    def memory_stat(self) -> dict[str, int]:
        """``memory.stat`` of the group as ``{name: bytes}`` (empty without the controller)."""
        path = self.paths.get("memory")
        out: dict[str, int] = {}
        try:
            with open(os.path.join(path, "memory.stat")) as fh:  # type: ignore[arg-type]
                for line in fh:
                    name, _, value = line.partition(" ")
                    out[name] = int(value)
        except (OSError, TypeError, ValueError):
            pass
        return out

    def held(self) -> int:
        """Usage that reclaim cannot give back, bytes.

        All but clean page cache: tmpfs, anonymous and kernel memory (e.g. pipe buffers).
        """
        stat = self.memory_stat()
        return self.usage() - stat.get("cache", 0) + stat.get("shmem", 0)

    def usage(self) -> int:
        """Current memory usage of the group, bytes (0 without the memory controller)."""
        path = self.paths.get("memory")
        try:
            with open(os.path.join(path, "memory.usage_in_bytes")) as fh:  # type: ignore[arg-type]
                return int(fh.read())
        except (OSError, TypeError, ValueError):
            return 0

    def destroy(self) -> None:
        """Kill everything in the group and remove its directories."""
        self.kill_all()
        for path in self.paths.values():
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        self.paths = {}


def join_cgroup_argv(cgroup: Cgroup) -> list[str]:
    """``sh -c`` prefix that moves itself into ``cgroup`` and then ``exec``s the rest of argv."""
    join = 'unset PWD OLDPWD; echo $$ >"$1" && echo $$ >"$2" && shift 2 && exec "$@"'
    return ["/bin/sh", "-c", join, "sh", cgroup.procs_file("pids"), cgroup.procs_file("memory")]
