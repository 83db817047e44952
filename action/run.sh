#!/usr/bin/env bash
# Runs the ckpt-action CLI for the composite action (action.yml).
# Every input arrives as an INPUT_* environment variable and is turned into CLI
# arguments in Python (`ckpt-action from-action`, ckpt_action/ci/action_inputs.py); this
# script only picks the runtime and starts it. Nothing is spliced into code.
# Works with bash 3.2 (macOS) and Git Bash (Windows) for the native runtime.
set -Eeuo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# shellcheck source=action/common.sh
. "$root/action/common.sh"
trap 'on_error $? "${BASH_SOURCE[0]##*/}" "$LINENO" "$BASH_COMMAND"' ERR
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }

# The token travels only in the environment, as HF_TOKEN.
if [ -n "$(strip "${INPUT_TOKEN:-}")" ]; then
  HF_TOKEN="$(strip "$INPUT_TOKEN")"
  export HF_TOKEN
fi
unset INPUT_TOKEN

# mode: setup builds the native runtime and puts `ckpt-action` on PATH for the job's later
# `run:` steps (as actions/setup-python does), e.g. `ckpt-action watch ... -- python train.py`.
if [ "$(lower "$(strip "${INPUT_MODE:-}")")" = "setup" ]; then
  CKPT_ACTION_SETUP=1
  # shellcheck source=action/native.sh
  . "$root/action/native.sh"
  exit 0
fi

runtime="$(lower "${INPUT_RUNTIME:-auto}")"
case "$runtime" in
  auto)
    runtime=native
    if [ "${RUNNER_OS:-$(uname -s)}" = "Linux" ] && command -v docker >/dev/null 2>&1 &&
      docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
      runtime=container
    fi
    echo "ckpt-action: runtime auto -> $runtime"
    ;;
  container | native) ;;
  *) err "input 'runtime' must be auto, container or native; got '${INPUT_RUNTIME:-}'" ;;
esac

if [ "$runtime" = "native" ]; then
  # shellcheck source=action/native.sh
  . "$root/action/native.sh"
else
  # shellcheck source=action/container.sh
  . "$root/action/container.sh"
fi
