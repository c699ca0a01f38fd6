"""The guard that fails a run whose tests leave processes behind (tests/processes.py) finds them."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.faults import wait_for
from tests.processes import RUN_VARIABLE, family_env, kill, kill_family, leftover_processes


def test_a_process_started_by_a_test_is_found_until_it_is_stopped() -> None:
    run_id = os.environ[RUN_VARIABLE]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # Found once it runs its own program: until its exec, /proc shows the environment this process
        # started with, which the run id was added to later.
        wait_for(lambda: child.pid in {p.pid for p in leftover_processes(run_id)}, "the child found", 10)
        assert [p.pid for p in leftover_processes("another-run")] == []
    finally:
        kill([p for p in leftover_processes(run_id) if p.pid == child.pid])
        child.wait(timeout=10)
    assert child.pid not in {p.pid for p in leftover_processes(run_id)}


# A worker's work-horse: forked, in a process group of its own, and reparented once its parent dies.
_ORPHANING_PARENT = """
import os, sys, time
child = os.fork()
if child == 0:
    os.setpgrp()
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_a_family_is_ended_with_the_orphan_its_killed_parent_left() -> None:
    env, family = family_env(dict(os.environ))
    parent = subprocess.Popen([sys.executable, "-c", _ORPHANING_PARENT], env=env, stdout=subprocess.PIPE)
    assert parent.stdout is not None
    with parent.stdout:
        orphan = int(parent.stdout.readline())
    parent.kill()
    parent.wait(timeout=10)
    run_id = os.environ[RUN_VARIABLE]
    try:
        assert orphan in {p.pid for p in leftover_processes(run_id)}  # outlived its parent
        kill_family(family)
        wait_for(lambda: orphan not in {p.pid for p in leftover_processes(run_id)}, "the orphan ended", 10)
    finally:
        kill([p for p in leftover_processes(run_id) if p.pid == orphan])
