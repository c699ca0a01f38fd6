#!/usr/bin/env bash
# Runs checkov on the Terraform module, offline, from a venv of its own (.venv-checkov).
#
# checkov cannot share the project venv: it depends on bc-python-hcl2, which installs a package named
# `hcl2` over the project's python-hcl2 (the tests need python-hcl2 8.x). The venv is created once and
# reused (a stamp file records the installed version), so a second run only scans, in a few seconds.
# The test suite runs checkov again, on generated configurations too, when this venv exists.
#
# Usage: bash .ci/checkov.sh [--install-only]
set -euo pipefail

CHECKOV_VERSION="3.3.30"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-checkov"
stamp="$venv/.installed-checkov-$CHECKOV_VERSION"

if [ ! -f "$stamp" ]; then
  echo "checkov: installing checkov $CHECKOV_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # Keeps the venv out of git and out of `ruff check .` (ruff honours nested .gitignore files).
  echo "*" > "$venv/.gitignore"
  "$venv/bin/pip" install -qq --upgrade pip
  "$venv/bin/pip" install -qq "checkov==$CHECKOV_VERSION"
  touch "$stamp"
fi

if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi
echo "checkov: scanning terraform/"
"$venv/bin/checkov" --skip-download --framework terraform -d "$root/terraform" --quiet --compact
