"""Concurrent pushes: different steps all land; the same subfolder never ends up mixed."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ENTRYPOINT, read_tree, write_checkpoint
from tests.helpers.chaos_helpers import assert_complete, ckpt, env_for, head_of, remote_checkpoint


def _start(args, env, cwd):
    return subprocess.Popen([sys.executable, str(ENTRYPOINT), *args], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def _finish(procs):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        out.append((p.returncode, stdout, stderr))
    return out


def test_eight_concurrent_pushes_all_land_and_latest_is_the_highest(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    env = env_for(hub, tmp_path, CKPT_RETRY_MAX_DELAY="1", CKPT_RETRIES="8")
    steps = [100 * i for i in range(1, 9)]
    content = {s: ckpt(s, big=50_000) for s in steps}
    srcs = {s: write_checkpoint(tmp_path / f"src-{s}", content[s]) for s in steps}
    # The repo exists first, so the 8 pushes race on commits rather than on creating it.
    first = cli("push", "--repo", "o/r", "--local-dir", str(srcs[100]), "--step", "100", env=env)
    assert first.code == 0, first.stderr
    procs = [_start(["push", "--repo", "o/r", "--local-dir", str(srcs[s]), "--step", str(s), "--json"], env, tmp_path)
             for s in steps[1:]]
    results = _finish(procs)
    for (code, stdout, stderr), s in zip(results, steps[1:], strict=True):
        assert code == 0, f"step {s}: {stderr}"
        out = json.loads(stdout.strip().splitlines()[-1])
        assert out["subfolder"] == f"checkpoint-{s}"
        # The SHA each push reports holds its checkpoint complete.
        manifest, files = remote_checkpoint(hub.url, "o/r", f"checkpoint-{s}", out["revision"], hf_client)
        assert_complete(manifest, files, content[s])
    commits = [e for e in hub.log_entries() if e["method"] == "POST" and "/commit/" in e["path"]]
    assert any(e["status"] == 412 for e in commits), "the pushes never raced: the test proves nothing"

    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-800" and run.json["revision"] == head_of(hub.url, "o/r")
    for s in steps:
        manifest, files = remote_checkpoint(hub.url, "o/r", f"checkpoint-{s}", run.json["revision"], hf_client)
        assert_complete(manifest, files, content[s])


def test_two_concurrent_pushes_to_one_subfolder_never_mix(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    # Several commits per push (3 files + manifest a commit), so the two interleave.
    env = env_for(hub, tmp_path, CKPT_MAX_FILES_PER_COMMIT="4", CKPT_RETRY_MAX_DELAY="1", CKPT_RETRIES="8")
    a = {f"shard-{i:02d}.bin": b"A" * (1000 + i) for i in range(10)}
    b = {f"shard-{i:02d}.bin": b"B" * (1000 + i) for i in range(0, 14, 2)} | {"only-b.txt": b"b"}
    src_a, src_b = write_checkpoint(tmp_path / "a", a), write_checkpoint(tmp_path / "b", b)
    assert cli("push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / "z", {"z": b"z"})),
               "--subfolder", "other", env=env).code == 0
    for _round in range(2):
        procs = [_start(["push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "sft", "--json"], env,
                        tmp_path) for src in (src_a, src_b)]
        results = _finish(procs)
        for (code, stdout, stderr), want in zip(results, (a, b), strict=True):
            assert code == 0, stderr
            out = json.loads(stdout.strip().splitlines()[-1])
            manifest, files = remote_checkpoint(hub.url, "o/r", "sft", out["revision"], hf_client)
            assert_complete(manifest, files, want)
        # At head, sft is one of the two, whole, and agrees with its manifest.
        manifest, files = remote_checkpoint(hub.url, "o/r", "sft", head_of(hub.url, "o/r"), hf_client)
        assert files in (a, b), sorted(files)
        assert_complete(manifest, files, files)
        dest = tmp_path / f"pulled-{_round}"
        run = cli("pull", "--repo", "o/r", "--subfolder", "sft", "--local-dir", str(dest), env=env)
        assert run.code == 0, run.stderr
        got = read_tree(dest)
        got.pop("ckpt-manifest.json")
        assert got == files
