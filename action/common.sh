# Sourced by the action's steps (action/mask.sh, action/run.sh): the one error line and
# the one whitespace strip. Works with bash 3.2 (macOS) and Git Bash (Windows).

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

# A failing command the scripts did not foresee still ends in one error line, naming the
# command, instead of a bare exit code. (err exits, which does not fire the trap again.)
on_error() { # on_error RC SCRIPT LINE COMMAND
  err "'$4' failed with exit code $1 ($2 line $3): fix what the log above names, then re-run" "$1"
}

strip() { # strip VALUE: VALUE without surrounding white space (a pasted newline, a block scalar's)
  local v="$1"
  v="${v#"${v%%[![:space:]]*}"}"
  v="${v%"${v##*[![:space:]]}"}"
  printf '%s' "$v"
}
