#!/usr/bin/env bash
# Runs the ckpt-action CLI for the composite action (action.yml).
# Every input arrives as an INPUT_* environment variable; nothing is spliced into code.
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
truthy() { # truthy NAME VALUE: 0 for true, 1 for false/empty, exit 2 otherwise
  case "$(lower "$2")" in
    true | yes | 1 | on) return 0 ;;
    false | no | 0 | off | "") return 1 ;;
    *) err "input '$1' must be true or false, got '$2'" ;;
  esac
}

# The token travels only in the environment, as HF_TOKEN.
if [ -n "${INPUT_TOKEN:-}" ]; then
  HF_TOKEN="$INPUT_TOKEN"
  export HF_TOKEN
fi
unset INPUT_TOKEN

mode="$(lower "${INPUT_MODE:-}")"
repo="${INPUT_REPO:-}"
local_dir="${INPUT_LOCAL_DIR:-}"
case "$mode" in
  push | latest | pull | promote | list | prune) ;;
  *) err "input 'mode' must be one of push, latest, pull, promote, list, prune; got '${INPUT_MODE:-}'" ;;
esac
args=("$mode")
opt() { if [ -n "$2" ]; then args+=("$1" "$2"); fi; }
if [ -n "$repo" ]; then
  args+=(--repo "$repo")
elif [ "$mode" != "pull" ] || [ -z "${INPUT_POINTER:-}" ]; then
  err "input 'repo' is required"
fi

if [ -n "$local_dir" ]; then
  case "$local_dir" in
    /* | [A-Za-z]:[\\/]*) ;;
    *) local_dir="$PWD/$local_dir" ;;
  esac
fi

case "$mode" in
  push)
    [ -n "$local_dir" ] || err "mode push needs input 'local-dir'"
    [ -d "$local_dir" ] || err "local-dir '$INPUT_LOCAL_DIR' is not a directory"
    args+=(--local-dir "$local_dir")
    opt --subfolder "${INPUT_SUBFOLDER:-}"
    opt --step "${INPUT_STEP:-}"
    opt --commit-message "${INPUT_COMMIT_MESSAGE:-}"
    if [ -n "${INPUT_PRIVATE:-}" ]; then
      if truthy private "$INPUT_PRIVATE"; then args+=(--private); else args+=(--public); fi
    fi
    ;;
  latest)
    if truthy require "${INPUT_REQUIRE:-}"; then args+=(--require); fi
    ;;
  pull)
    [ -n "$local_dir" ] || err "mode pull needs input 'local-dir'"
    if [ -n "${INPUT_POINTER:-}" ]; then
      pointer="$INPUT_POINTER"
      case "$pointer" in
        /* | [A-Za-z]:[\\/]*) ;;
        *) pointer="$PWD/$pointer" ;;
      esac
      args+=(--pointer "$pointer")
    elif [ -n "${INPUT_SUBFOLDER:-}" ]; then
      args+=(--subfolder "$INPUT_SUBFOLDER")
    else
      args+=(--latest)
    fi
    opt --revision "${INPUT_REVISION:-}"
    args+=(--local-dir "$local_dir")
    if truthy force "${INPUT_FORCE:-}"; then args+=(--force); fi
    ;;
  promote)
    [ -n "${INPUT_SUBFOLDER:-}" ] || err "mode promote needs input 'subfolder'"
    [ -n "${INPUT_TO:-}" ] || err "mode promote needs input 'to'"
    args+=(--subfolder "$INPUT_SUBFOLDER")
    opt --revision "${INPUT_REVISION:-}"
    args+=(--to "$INPUT_TO")
    opt --to-repo "${INPUT_TO_REPO:-}"
    opt --tag "${INPUT_TAG:-}"
    opt --branch "${INPUT_BRANCH:-}"
    opt --wandb-registry "${INPUT_WANDB_REGISTRY:-}"
    ;;
  list) ;;
  prune)
    [ -n "${INPUT_KEEP_LAST:-}" ] || err "mode prune needs input 'keep-last'"
    args+=(--keep-last "$INPUT_KEEP_LAST")
    if truthy dry-run "${INPUT_DRY_RUN:-}"; then args+=(--dry-run); fi
    ;;
esac
case "$mode" in
  push | promote)
    opt --wandb-project "${INPUT_WANDB_PROJECT:-}"
    opt --wandb-entity "${INPUT_WANDB_ENTITY:-}"
    opt --wandb-run-id "${INPUT_WANDB_RUN_ID:-}"
    opt --wandb-artifact-name "${INPUT_WANDB_ARTIFACT_NAME:-}"
    if truthy wandb-fatal "${INPUT_WANDB_FATAL:-}"; then args+=(--wandb-fatal); fi
    ;;
esac
opt --endpoint "${INPUT_ENDPOINT:-}"
opt --timeout "${INPUT_TIMEOUT:-}"
opt --retries "${INPUT_RETRIES:-}"

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
