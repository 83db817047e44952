# Sourced by action/run.sh: run the CLI from a venv built from requirements.lock
# (pip --require-hashes), cached per lock hash, Python version and platform.
py="${INPUT_PYTHON:-}"
if [ -z "$py" ]; then
  if command -v python3 >/dev/null 2>&1; then py=python3; else py=python; fi
fi
command -v "$py" >/dev/null 2>&1 || err "native runtime needs Python >= 3.10 ('$py' not found)"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  err "native runtime needs Python >= 3.10; '$py' is $("$py" -V 2>&1)"

key="$("$py" - "$root/requirements.lock" <<'PY'
import hashlib, platform, sys
lock = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:16]
print("py%d%d-%s-%s-%s" % (sys.version_info[0], sys.version_info[1],
      sys.platform, platform.machine().lower(), lock))
PY
)"
key="$(printf '%s' "$key" | tr -d '\r')"
cache_root="${CKPT_ACTION_CACHE:-${RUNNER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}}/ckpt-action}"
venv="$cache_root/venv-$key"
venv_py() {
  if [ -x "$1/bin/python" ]; then printf '%s' "$1/bin/python"; else printf '%s' "$1/Scripts/python.exe"; fi
}

if [ ! -f "$venv/.complete" ]; then
  echo "::group::ckpt-action: creating Python environment ($venv)"
  mkdir -p "$cache_root"
  tmp="$venv.tmp.$$"
  rm -rf "$tmp"
  "$py" -m venv "$tmp"
  "$(venv_py "$tmp")" -m pip install --disable-pip-version-check --no-input --no-deps \
    --require-hashes --only-binary=:all: -r "$root/requirements.lock"
  touch "$tmp/.complete"
  # Another job may have won the race; either copy is fine. (A plain mv onto an existing
  # dir would move ours inside it, so look first and clean up if we still lost.)
  if [ -e "$venv" ] || ! mv "$tmp" "$venv" 2>/dev/null; then rm -rf "$tmp"; fi
  rm -rf "${venv:?}/$(basename "$tmp")"
  echo "::endgroup::"
else
  echo "ckpt-action: using cached environment $venv"
fi

if [ "${CKPT_ACTION_SETUP:-}" = 1 ]; then
  # A `ckpt-action` command for later steps: this venv's Python on this checkout's entrypoint.
  bin="$cache_root/bin-$key"
  mkdir -p "$bin"
  printf '#!/usr/bin/env bash\nexec %q %q "$@"\n' "$(venv_py "$venv")" "$root/entrypoint.py" >"$bin/ckpt-action"
  chmod +x "$bin/ckpt-action"
  [ -n "${GITHUB_PATH:-}" ] || err "mode 'setup' needs GITHUB_PATH (set by the runner) to put ckpt-action on PATH"
  printf '%s\n' "$bin" >>"$GITHUB_PATH"
  echo "ckpt-action: $bin/ckpt-action is on PATH for the next steps"
  return 0
fi

cd "${GITHUB_WORKSPACE:-$PWD}"
exec "$(venv_py "$venv")" "$root/entrypoint.py" from-action
