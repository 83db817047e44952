#!/usr/bin/env bash
# The action's first step: mask the token input in the job's log before anything can print
# it. The runner masks one line per ::add-mask::, so a multi-line value is masked line by
# line, each stripped (`token: |` ends the value with a newline; a CRLF paste adds a \r).
set -Eeuo pipefail
# shellcheck source=action/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
trap 'on_error $? "${BASH_SOURCE[0]##*/}" "$LINENO" "$BASH_COMMAND"' ERR

mask() { # the runner decodes %25, %0D and %0A in a command's data: encode % so it masks this value
  local v="${1//'%'/'%25'}"
  printf '::add-mask::%s\n' "$v"
}

token="$(strip "${INPUT_TOKEN:-}")"
# Line by line: a value holding a newline would end the command and print the rest.
while IFS= read -r line || [ -n "$line" ]; do
  line="$(strip "$line")"
  if [ -n "$line" ]; then mask "$line"; fi
done <<<"$token"
