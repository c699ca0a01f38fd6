"""A web worker keeps at most two malloc arenas (glibc): each thread that parsed a batch otherwise kept
an arena of its own, and with it the memory of the largest batch it parsed (see
:data:`lineage_core.infra.process.WEB_MALLOC_ARENAS`). Run in a fresh interpreter each, since the setting
lasts for the process: eight threads allocate at once, then glibc's ``malloc_info`` counts the arenas."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_ARENAS_AFTER_EIGHT_THREADS = """
import ctypes, ctypes.util, os, sys, tempfile, threading
from lineage_core.infra.process import limit_malloc_arenas

if sys.argv[1] == "limited":
    print("set" if limit_malloc_arenas() else "not set")
barrier = threading.Barrier(8)

def allocate():
    barrier.wait()  # every thread alive at once: none can take over another's arena
    kept = [bytearray(20_000) for _ in range(500)]  # under the mmap threshold: from an arena
    barrier.wait()
    del kept

threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fdopen.restype = ctypes.c_void_p
with tempfile.TemporaryFile() as report:
    stream = ctypes.c_void_p(libc.fdopen(os.dup(report.fileno()), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    report.seek(0)
    print("arenas", report.read().count(b"<heap nr="))
"""


def _run(mode: str, **env: str) -> list[str]:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")
    } | env
    result = subprocess.run(
        [sys.executable, "-c", _ARENAS_AFTER_EIGHT_THREADS, mode],
        cwd=ROOT,
        env={**environment, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.split("\n")[:-1]


@pytest.fixture(autouse=True)
def _glibc_only() -> None:
    if platform.libc_ver()[0] != "glibc":  # pragma: no cover - this product's images are glibc
        pytest.skip("malloc arenas are glibc's")


def test_eight_threads_keep_two_arenas_where_they_kept_one_each() -> None:
    (default,) = _run("default")  # the main thread's and one per thread, up to 8 per core
    assert int(default.removeprefix("arenas ")) > 2
    assert _run("limited") == ["set", "arenas 2"]


def test_an_operators_malloc_arena_max_stands() -> None:
    assert _run("limited", MALLOC_ARENA_MAX="4") == ["not set", "arenas 4"]
