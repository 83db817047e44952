"""The container image, built with Podman from a locally made Debian base, used the way
other CI systems use it: ``docker run -e HF_TOKEN IMAGE push ...`` against a Hub on the host.

Needs Podman: ``.ci/podman.sh`` installs it and imports the base image (the tests call it
too, which is quick once done). Skips, saying so, when podman is not installed at all, and
when not run as root: the script installs packages and debootstraps the base image, which a
user without root cannot do.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import read_tree, write_checkpoint

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/ckpt-action:test"
SHA = re.compile(r"^[0-9a-f]{40}$")

# One worker builds the image, once (build_image is cached per process): these tests and the
# action's container test (tests/e2e/test_action_act.py), whose `docker build` reuses its layers.
IMAGE_GROUP = pytest.mark.xdist_group("image")
pytestmark = [pytest.mark.container, IMAGE_GROUP]


@functools.cache
def podman_env() -> dict[str, str]:
    """Environment from ``.ci/podman.sh`` (CKPT_PODMAN, CONTAINERS_CONF, CKPT_BASE_IMAGE, ...)."""
    if shutil.which("podman") is None and not os.environ.get("CKPT_PODMAN"):
        pytest.skip("podman is not installed (run .ci/podman.sh first)")
    if os.geteuid() != 0:
        pytest.skip(f"the image tests need root: .ci/podman.sh installs packages and debootstraps the base "
                    f"image (this run is uid {os.geteuid()})")
    proc = subprocess.run(["bash", str(ROOT / ".ci" / "podman.sh")], capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f".ci/podman.sh failed:\n{proc.stderr[-3000:]}")
    env: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = shlex.split(value)[0]
    return env


def podman(*args: str, check: bool = True, timeout: float = 300,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **podman_env(), **(env or {})}
    proc = subprocess.run([podman_env()["CKPT_PODMAN"], *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


@functools.cache
def build_image(tag: str = IMAGE) -> str:
    """Build the Dockerfile (cached layers make a rebuild take seconds); returns the tag."""
    penv = podman_env()
    args = ["build", "--format", "docker", "--pull=never", "--network", "host",
            "--build-arg", f"BASE_IMAGE={penv['CKPT_BASE_IMAGE']}", "-t", tag]
    if penv.get("CKPT_CA_BUNDLE"):
        args += ["--secret", f"id=extra_ca,src={penv['CKPT_CA_BUNDLE']}"]
    podman(*args, str(ROOT), timeout=1200)
    return tag


def parse_github_output(text: str) -> dict[str, str]:
    """Parse the GITHUB_OUTPUT file format: ``k=v`` lines and ``k<<DELIM`` ... ``DELIM`` blocks."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delim = line.split("<<", 1)
            value: list[str] = []
            for inner in lines:
                if inner == delim:
                    break
                value.append(inner)
            out[key] = "\n".join(value)
        elif "=" in line:
            key, value_ = line.split("=", 1)
            out[key] = value_
    return out


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


def test_help_labels_user_and_size(image: str) -> None:
    out = podman("run", "--rm", image, "--help")
    assert "push" in out.stdout and "pull" in out.stdout and "latest" in out.stdout
    # Without arguments the image prints its help too.
    assert "Usage" in podman("run", "--rm", image).stdout
    # GitLab-style: a shell runs the script, and the CLI is on PATH as ckpt-action.
    shell = podman("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "ckpt-action --version")
    assert "ckpt-action, version" in shell.stdout

    info = json.loads(podman("image", "inspect", image).stdout)[0]
    labels = info["Config"]["Labels"]
    for key in ("title", "source", "version", "revision", "licenses", "description"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert info["Config"]["User"] not in ("", "0", "root")
    assert podman("run", "--rm", "--entrypoint", "id", image, "-u").stdout.strip() != "0"

    base = json.loads(podman("image", "inspect", podman_env()["CKPT_BASE_IMAGE"]).stdout)[0]
    added = (info["Size"] - base["Size"]) / 1e6
    print(f"image {info['Size'] / 1e6:.0f} MB, {added:.0f} MB above its base")
    assert added < 300, f"the image adds {added:.0f} MB above its base"


def test_push_pull_roundtrip_json_dotenv_github_output(image: str, hub_server, tmp_path: Path) -> None:
    hub = hub_server(token="hf_container_token")
    src = write_checkpoint(tmp_path / "ckpt", {"model.bin": os.urandom(200_000),
                                               "config.json": b'{"a": 1}', "sub/opt.pt": b"x" * 1000})
    out = tmp_path / "out"
    out.mkdir()
    gh_output = out / "github_output"
    gh_output.touch()
    # The image's own user (10001) reads the checkpoint and writes into /out.
    for p in (src, src / "sub", out):
        p.chmod(0o777)
    for p in src.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    gh_output.chmod(0o666)

    env = {"HF_TOKEN": hub.token or ""}
    run_base = ["run", "--rm", "--network", "host", "-e", "HF_TOKEN"]
    push = podman(*run_base, "-v", f"{src}:/data:ro", "-v", f"{out}:/out",
                  "-e", "GITHUB_OUTPUT=/out/github_output",
                  image, "push", "--repo", "ci/container", "--local-dir", "/data", "--step", "7",
                  "--endpoint", hub.url, "--json", "--dotenv", "/out/push.env", env=env, check=False)
    assert push.returncode == 0, push.stderr
    pushed = json.loads(push.stdout.strip().splitlines()[-1])
    assert SHA.match(pushed["revision"]) and pushed["subfolder"] == "checkpoint-7" and pushed["step"] == 7
    assert "hf_container_token" not in push.stdout + push.stderr

    dotenv = dict(line.split("=", 1) for line in (out / "push.env").read_text().splitlines() if line)
    assert dotenv["CKPT_REVISION"] == pushed["revision"]
    assert dotenv["CKPT_SUBFOLDER"] == "checkpoint-7" and dotenv["CKPT_REPO"] == "ci/container"
    gh = parse_github_output(gh_output.read_text())
    assert gh["revision"] == pushed["revision"] and gh["subfolder"] == "checkpoint-7"
    assert gh["hub-url"] == pushed["hub_url"] and gh["step"] == "7"

    # Pull as the calling user (what the action does) into a host dir that user owns.
    # local-dir below the mount: pull moves a verified staging dir into place.
    (tmp_path / "work").mkdir()
    dest = tmp_path / "work" / "pulled"
    uid_gid = f"{os.getuid()}:{os.getgid()}"
    pull = podman(*run_base, "--user", uid_gid, "-v", f"{tmp_path / 'work'}:/work", "-v", f"{out}:/out",
                  image, "pull", "--repo", "ci/container", "--latest", "--local-dir", "/work/pulled",
                  "--endpoint", hub.url, "--json", "--dotenv", "/out/pull.env", env=env, check=False)
    assert pull.returncode == 0, pull.stderr
    pulled = json.loads(pull.stdout.strip().splitlines()[-1])
    assert pulled["revision"] == pushed["revision"] and pulled["found"] is True
    got = read_tree(dest)
    for rel, data in read_tree(src).items():
        assert got[rel] == data, rel
    pull_env = (out / "pull.env").read_text()
    assert f"CKPT_REVISION={pushed['revision']}" in pull_env and "CKPT_FOUND=true" in pull_env


def test_exit_codes_come_through(image: str, hub_server) -> None:
    hub = hub_server()
    missing = podman("run", "--rm", "--network", "host", image, "latest", "--repo", "ci/nothing",
                     "--require", "--endpoint", hub.url, check=False)
    assert missing.returncode == 3, missing.stdout + missing.stderr
    bad = podman("run", "--rm", image, "push", "--repo", "not a repo", "--local-dir", "/nope", check=False)
    assert bad.returncode == 2, bad.stdout + bad.stderr


def test_pull_into_mount_point(image: str, hub_server, tmp_path: Path) -> None:
    hub = hub_server()
    src = write_checkpoint(tmp_path / "ckpt", {"model.bin": b"m" * 5000})
    podman("run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
           "-v", f"{src}:/data:ro", image, "push", "--repo", "ci/mount", "--local-dir", "/data",
           "--step", "1", "--endpoint", hub.url)
    dest = tmp_path / "dest"
    dest.mkdir()
    podman("run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
           "-v", f"{dest}:/data", image, "pull", "--repo", "ci/mount", "--latest",
           "--local-dir", "/data", "--endpoint", hub.url)
    assert (dest / "model.bin").read_bytes() == b"m" * 5000
    names = sorted(p.name for p in dest.iterdir())
    assert names == [".ckpt-pull.json", "ckpt-manifest.json", "model.bin"], "no staging left"
