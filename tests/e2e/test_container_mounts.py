"""The container runtime mounts what the inputs table says, computed by the image: run
action/container.sh with a stand-in ``docker`` that runs ``--print-mounts`` with this
checkout's CLI and records the real run's arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_DOCKER = f"""#!/usr/bin/env bash
# image inspect: the image exists. run --rm ... IMAGE from-action --print-mounts: this
# checkout's CLI answers. run --rm ... from-action --check: passes (the inputs here are
# for mounts; tests/e2e/test_container_validation.py runs the checks). run --name ...:
# record the arguments.
case "$1" in
  image) exit 0 ;;
  rm) exit 0 ;;
  run)
    if [ "$2" = --rm ] && [ "${{@: -1}}" = --check ]; then exit 0; fi
    if [ "$2" = --rm ]; then exec {sys.executable} {ROOT / "entrypoint.py"} from-action --print-mounts; fi
    printf '%s\\n' "$@" > "$DOCKER_ARGS"; exit 0 ;;
esac
exit 1
"""


def test_container_run_mounts_the_paths_the_table_names(tmp_path: Path) -> None:
    bin_dir, work, outside = tmp_path / "bin", tmp_path / "work", tmp_path / "elsewhere"
    bin_dir.mkdir()
    work.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    (outside / "art").mkdir(parents=True)
    (outside / "art" / "checkpoint.json").write_text(json.dumps({}))
    out = tmp_path / "gh-output"
    out.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "CKPT_"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", DOCKER_ARGS=str(tmp_path / "args"), INPUT_IMAGE="img",
               INPUT_MODE="pull", INPUT_LOCAL_DIR=str(outside / "runs" / "ckpt"), INPUT_CACHE_DIR="cache",
               INPUT_POINTER=str(outside / "art" / "checkpoint.json"), GITHUB_OUTPUT=str(out))
    script = f'root={ROOT}; err() {{ echo "$1" >&2; exit "${{2:-2}}"; }}; lower() {{ printf %s "$1"; }}; ' \
             f'. {ROOT / "action" / "container.sh"}'
    proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    args = (tmp_path / "args").read_text().splitlines()
    volumes = {args[i + 1] for i, a in enumerate(args) if a == "--volume"}
    assert volumes == {f"{p}:{p}" for p in (work, outside / "runs", outside / "art", out)}, volumes
    assert (outside / "runs").is_dir(), "the pull target's parent is made before it is mounted"
    assert not (work / "cache").exists(), "a path under the work dir needs no mount of its own"


def _run_container_sh(tmp_path: Path, work: Path, **inputs: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "CKPT_", "ACTIONS_"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", DOCKER_ARGS=str(tmp_path / "args"), INPUT_IMAGE="img", **inputs)
    script = f'root={ROOT}; err() {{ echo "$1" >&2; exit "${{2:-2}}"; }}; ' \
             f'lower() {{ printf %s "$1" | tr "[:upper:]" "[:lower:]"; }}; . {ROOT / "action" / "container.sh"}'
    proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return (tmp_path / "args").read_text().splitlines()


def test_key_and_trust_files_are_mounted_alone_and_read_only(tmp_path: Path) -> None:
    work, keys = tmp_path / "work", tmp_path / "runner-temp"
    work.mkdir()
    keys.mkdir()
    for name in ("signing.pem", "cert.pem", "chain.pem", "trust.json"):
        (keys / name).write_text("-")
    (keys / "other-secret").write_text("not for the container")
    args = _run_container_sh(tmp_path, work, INPUT_MODE="push", INPUT_REPO="o/r",
                             INPUT_SIGNING_KEY=str(keys / "signing.pem"),
                             INPUT_SIGNING_CERTIFICATE=str(keys / "cert.pem"),
                             INPUT_SIGNING_CHAIN=str(keys / "chain.pem"),
                             INPUT_SIGSTORE_TRUST_CONFIG=str(keys / "trust.json"), INPUT_LOCAL_DIR="ckpt")
    volumes = {args[i + 1] for i, a in enumerate(args) if a == "--volume"}
    files = ("signing.pem", "cert.pem", "chain.pem", "trust.json")
    assert volumes == {f"{work}:{work}"} | {f"{keys / n}:{keys / n}:ro" for n in files}, volumes


def test_the_oidc_request_variables_reach_the_container_only_for_keyless_signing_or_auth(tmp_path: Path) -> None:
    """By name, only when something keyless needs them: signing, or the Hub's token exchange
    (input auth oidc, or auto with no token); never beside a token for a plain push."""
    work = tmp_path / "work"
    work.mkdir()
    names = {"ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"}

    def passed(**inputs: str) -> bool:
        args = _run_container_sh(tmp_path, work, INPUT_MODE="push", INPUT_REPO="o/r", INPUT_LOCAL_DIR="c", **inputs)
        given = {args[i + 1] for i, a in enumerate(args) if a == "--env"} & names
        assert given in (set(), names)
        return given == names

    assert passed(INPUT_SIGN_KEYLESS="True", HF_TOKEN="hf_x")
    assert passed(INPUT_AUTH="oidc", HF_TOKEN="hf_x") and passed(INPUT_AUTH="OIDC")
    assert passed(INPUT_AUTH="auto") and passed()  # auto without a token: keyless
    assert not passed(HF_TOKEN="hf_x") and not passed(INPUT_AUTH="auto", HF_TOKEN="hf_x")
    assert not passed(INPUT_AUTH="token", HF_TOKEN="hf_x")
