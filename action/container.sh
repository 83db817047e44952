# Sourced by action/run.sh: run the CLI in the ckpt-action image.
command -v docker >/dev/null 2>&1 || err "runtime container needs docker on PATH"

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

image="${INPUT_IMAGE:-}"
if [ -z "$image" ] && [ -n "${CKPT_ACTION_REF:-}" ] && [ -n "${CKPT_ACTION_REPOSITORY:-}" ]; then
  # The published image for the action's own ref: ghcr.io/OWNER/ckpt-action:<ref>.
  tag="$(printf '%s' "$CKPT_ACTION_REF" | tr -c 'A-Za-z0-9_.-' '-')"
  candidate="ghcr.io/$(lower "$CKPT_ACTION_REPOSITORY"):$tag"
  if image_exists "$candidate" || docker pull --quiet "$candidate" >/dev/null 2>&1; then
    image="$candidate"
  else
    echo "ckpt-action: $candidate not available; building the action's Dockerfile"
  fi
elif [ -n "$image" ] && ! image_exists "$image"; then
  docker pull --quiet "$image" >/dev/null || err "cannot pull image '$image'" 1
fi

if [ -z "$image" ]; then
  # Build from the action's own source, tagged by a hash of what goes into the image.
  digest="$(cd "$root" && {
    cat Dockerfile requirements.lock
    find ckpt_action -name '*.py' -type f | LC_ALL=C sort | while IFS= read -r f; do
      printf '%s\n' "$f"
      cat "$f"
    done
  } | sha256sum | cut -c1-16)"
  image="localhost/ckpt-action-local:$digest"
  if image_exists "$image"; then
    echo "ckpt-action: using locally built $image"
  else
    build=(build --tag "$image")
    if [ -n "${CKPT_ACTION_BASE_IMAGE:-}" ]; then
      build+=(--build-arg "BASE_IMAGE=$CKPT_ACTION_BASE_IMAGE")
    fi
    if [ -n "${CKPT_ACTION_EXTRA_CA:-}" ]; then
      build+=(--secret "id=extra_ca,src=$CKPT_ACTION_EXTRA_CA")
    fi
    echo "::group::ckpt-action: docker build $image"
    docker "${build[@]}" "$root" || err "building the ckpt-action image failed" 1
    echo "::endgroup::"
  fi
fi

name="ckpt-action-$$-${RANDOM}"
envs=(--env HF_TOKEN --env HF_ENDPOINT --env HF_HUB_DISABLE_XET --env HF_HUB_DISABLE_TELEMETRY --env CI
  --env HF_OIDC_RESOURCE --env HF_OIDC_ID_TOKEN)
# By prefix, so nothing is listed twice: the inputs (the CLI reads them), every CKPT_*
# setting (ckpt_action.settings.Settings declares each with that prefix), W&B's and
# GitHub's own variables (outputs, summary, workspace).
while IFS= read -r var; do
  envs+=(--env "$var")
done < <(compgen -e | grep -E '^(INPUT_|CKPT_|WANDB_|GITHUB_)' | grep -vx 'GITHUB_TOKEN' || true)
run=(run --name "$name" --network host --user "$(id -u):$(id -g)" --workdir "$PWD" "${envs[@]}")
# Keyless signing and keyless auth (input auth, auto or oidc): sigstore and the Hub's token
# exchange ask the Actions token service for the job's OIDC token, by these two names
# (present only with `permissions: id-token: write`); passed by name only.
oidc=""
case "$(lower "${INPUT_SIGN_KEYLESS:-}")" in
  true | yes | 1 | on) oidc=1 ;;
esac
case "$(lower "${INPUT_AUTH:-}" | tr -d '[:space:]')" in
  oidc) oidc=1 ;;
  token) ;;
  *) if [ -z "${HF_TOKEN:-}" ]; then oidc=1; fi ;; # auto: keyless only without a token
esac
if [ -n "$oidc" ]; then run+=(--env ACTIONS_ID_TOKEN_REQUEST_URL --env ACTIONS_ID_TOKEN_REQUEST_TOKEN); fi
if [ -t 1 ]; then run+=(--tty); fi

self=""
if [ -f /.dockerenv ] || [ -f /run/.containerenv ]; then
  # This job itself runs in a container (container jobs, act): our paths are its
  # mounts, so share them with the tool container at the same places.
  # Our container id: from the engine's /etc/hostname bind mount (Docker and Podman),
  # else the hostname (wrong with host networking, hence the check).
  self="$(sed -n 's#.*/\([0-9a-f]\{64\}\)/\(userdata/\)\{0,1\}hostname /etc/hostname .*#\1#p' \
    /proc/self/mountinfo 2>/dev/null | head -n1)"
  if [ -z "$self" ]; then self="$(cat /etc/hostname 2>/dev/null || true)"; fi
  if [ -z "$self" ] || ! docker inspect --type container "$self" >/dev/null 2>&1; then self=""; fi
fi
if [ -n "$self" ]; then
  run+=(--volumes-from "$self")
else
  # Bind each path the CLI touches at the same path inside the container. Which paths
  # those are is the inputs table's to say (ckpt_action/ci/action_inputs.py, mounts()):
  # the image answers, since this host may have no Python, and it checks the inputs first,
  # so a step that will exit 2 exits here with that code, having created nothing. One
  # "create|mount|readonly<TAB>PATH" a line; a dir to create is made here first, or nothing
  # would be mounted and what is written there would stay in the container; a readonly one
  # is a single file (a key).
  rc=0  # `||`, not `set +e`: the ERR trap would add a second error line to the tool's own
  listing="$(docker run --rm --network none --user "$(id -u):$(id -g)" --workdir "$PWD" --volume "$PWD:$PWD" \
    "${envs[@]}" "$image" from-action --print-mounts)" || rc=$?
  if [ "$rc" -ne 0 ]; then exit "$rc"; fi
  [ -n "$listing" ] || err "the ckpt-action image listed no mounts" 1
  # Then the command's own checks (the real run's, up to its first request), with no
  # network and those paths mounted as they are now: a dir still to be created is seen
  # through its nearest existing parent, so the checks find what the run will (missing,
  # writable or not). A step that will exit 2 exits here too, before any dir is created.
  check=(run --rm --network none --user "$(id -u):$(id -g)" --workdir "$PWD" "${envs[@]}")
  seen=$'\n'
  while IFS=$'\t' read -r how path; do
    [ -n "$path" ] || continue
    if [ ! -e "$path" ]; then
      [ "$how" = create ] || continue
      while [ ! -e "$path" ]; do path="$(dirname -- "$path")"; done
      [ "$path" != / ] || continue
    fi
    case "$seen" in *$'\n'"$path"$'\n'*) continue ;; esac
    seen+="$path"$'\n'
    if [ "$how" = readonly ]; then check+=(--volume "$path:$path:ro"); else check+=(--volume "$path:$path"); fi
  done <<<"$listing"
  rc=0
  docker "${check[@]}" "$image" from-action --check || rc=$?
  if [ "$rc" -ne 0 ]; then exit "$rc"; fi
  while IFS=$'\t' read -r how path; do
    if [ "$how" = create ]; then mkdir -p -- "$path"; fi
    if [ -z "$path" ] || [ ! -e "$path" ]; then continue; fi
    if [ "$how" = readonly ]; then run+=(--volume "$path:$path:ro"); else run+=(--volume "$path:$path"); fi
  done <<<"$listing"
fi

cleanup() { docker rm --force "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# No --rm: exit codes must come through (Podman's Docker API loses them with --rm).
# The tool's own failure already printed its error line: `||` keeps the ERR trap (one
# error line for a failure the scripts did not foresee) from adding a second.
rc=0
docker "${run[@]}" "$image" from-action || rc=$?
exit "$rc"
