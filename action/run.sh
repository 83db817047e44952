#!/usr/bin/env bash
# Runs the ckpt-action CLI for the composite action (action.yml).
# Every input arrives as an INPUT_* environment variable and is turned into CLI
# arguments in Python (`ckpt-action from-action`, ckpt_action/ci/action_inputs.py); this
# script only picks the runtime and starts it. Nothing is spliced into code.
# Works with bash 3.2 (macOS) and Git Bash (Windows) for the native runtime.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

err() { # err MSG [CODE]: error annotation on Actions, plain message elsewhere
  if [ "${GITHUB_ACTIONS:-}" = "true" ]; then
    # Escape as the runner expects, so an input value cannot end the annotation and start
    # another workflow command.
    local msg="$1"
    msg="${msg//'%'/'%25'}"
    msg="${msg//$'\r'/'%0D'}"
    msg="${msg//$'\n'/'%0A'}"
    printf '::error title=ckpt-action::%s\n' "$msg"
  else
    printf 'ckpt-action: error: %s\n' "$1" >&2
  fi
  exit "${2:-2}"
}
lower() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]'; }
# Absolute path of an input path, against the workspace (for container mounts).
abspath() {
  case "$1" in
    "") ;;
    /* | [A-Za-z]:[\\/]*) printf '%s' "$1" ;;
    *) printf '%s' "$PWD/$1" ;;
  esac
}

# The token travels only in the environment, as HF_TOKEN.
if [ -n "${INPUT_TOKEN:-}" ]; then
  HF_TOKEN="$INPUT_TOKEN"
  export HF_TOKEN
fi
unset INPUT_TOKEN

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
