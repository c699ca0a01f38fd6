"""Every process the suite starts is stopped by the end of the run, whatever happened to its test.

At the start of a run, :func:`mark_this_run` puts a run id in the environment, which every process the
tests start inherits (``subprocess`` passes ``os.environ`` on; tests/services.py's ``process_env``
copies it). At the end, :func:`leftover_processes` finds any process still carrying that id, by
reading ``/proc/<pid>/environ``, so a worker a killed or timed-out test left behind cannot outlive
the run unnoticed: conftest kills them and fails the run naming them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

RUN_VARIABLE = "OLX_TEST_RUN"
# One product process and everything it forks (RQ's work-horses call setpgrp and are reparented when
# their worker dies, so neither the process group nor /proc's children finds them all; the
# environment they inherit does).
FAMILY_VARIABLE = "OLX_TEST_FAMILY"


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str


def mark_this_run() -> str:
    """Give this run an id that its child processes inherit (kept if a parent run set one)."""
    return os.environ.setdefault(RUN_VARIABLE, uuid.uuid4().hex)


def leftover_processes(run_id: str) -> list[Leftover]:
    """Processes other than this one (and its ancestors) whose environment carries ``run_id``."""
    return _carrying(RUN_VARIABLE, run_id)


def family_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """``env`` with a new family id, which every process started with it passes to what it forks."""
    family = uuid.uuid4().hex
    return {**env, FAMILY_VARIABLE: family}, family


def kill_family(family: str) -> None:
    """SIGKILL every process still carrying ``family`` (a worker's work-horses after the worker)."""
    kill(_carrying(FAMILY_VARIABLE, family))


def _carrying(variable: str, value: str) -> list[Leftover]:
    marker = f"{variable}={value}".encode()
    mine = {os.getpid(), *_ancestors()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            environment = (entry / "environ").read_bytes()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker in environment.split(b"\0") and command:  # zombies have no command line left
            found.append(Leftover(int(entry.name), command))
    return found


def kill(leftovers: list[Leftover]) -> None:
    for leftover in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover.pid, signal.SIGKILL)


def _ancestors() -> set[int]:
    found: set[int] = set()
    pid = os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found
