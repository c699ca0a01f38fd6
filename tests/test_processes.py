"""The guard that fails a run whose tests leave processes behind (tests/processes.py) finds them."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.processes import RUN_VARIABLE, kill, leftover_processes


def test_a_process_started_by_a_test_is_found_until_it_is_stopped() -> None:
    run_id = os.environ[RUN_VARIABLE]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in {p.pid for p in leftover_processes(run_id)}
        assert [p.pid for p in leftover_processes("another-run")] == []
    finally:
        kill([p for p in leftover_processes(run_id) if p.pid == child.pid])
        child.wait(timeout=10)
    assert child.pid not in {p.pid for p in leftover_processes(run_id)}
