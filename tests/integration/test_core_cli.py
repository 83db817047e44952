"""push, latest and pull through the real CLI against the local Hub, as a user runs them.

The CLI runs in this process (``cli`` here is ``cli_in_process``: the same arguments,
environment and streams) where a test is about what a command does; the tests about what
the process prints besides its result (warnings, progress lines) start one
(``cli_process``), as a user does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import read_tree, write_checkpoint

SHA = re.compile(r"^[0-9a-f]{40}$")
# The real `hf` CLI installed beside this interpreter.
HF = str(Path(sys.executable).with_name("hf"))


def ckpt_files(step: int, big: int = 300_000) -> dict[str, bytes]:
    seed = step.to_bytes(4, "big")
    return {
        "model.safetensors": (seed * (big // 4 + 1))[:big] + os.urandom(64),
        "config.json": json.dumps({"step": step}).encode(),
        "nested/trainer_state.json": json.dumps({"global_step": step}).encode(),
    }


@pytest.fixture
def cli(cli_in_process):
    return cli_in_process


@pytest.fixture
def hub(hub_server, hf_client):
    """A local Hub subprocess; in-process HfApi calls in these tests go to it over plain LFS."""
    return hub_server()


def env_for(hub, tmp_path, **extra):
    from tests.conftest import clean_env

    return clean_env(tmp_path, HF_ENDPOINT=hub.url, **extra)


def commits_of(hub):
    return [e for e in hub.log_entries() if e["method"] == "POST" and "/commit/" in e["path"]]


def lfs_puts(hub):
    """Uploads of file bytes: LFS PUTs, or on the Xet path (the default) xorb and shard POSTs."""
    return [e for e in hub.log_entries() if e["method"] == "PUT" or (
        e["listener"] == "cas" and e["method"] == "POST" and e["path"].startswith(("/v1/xorbs/", "/v1/shards")))]


def test_push_latest_pull_round_trip_exact_bytes(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    pushed = {}
    for step in (10, 20, 30):
        files = ckpt_files(step)
        src = write_checkpoint(tmp_path / f"ckpt-{step}", files)
        run = cli("push", "--repo", "org/run", "--local-dir", str(src), "--step", str(step), "--json", env=env)
        assert run.code == 0, run.stderr
        out = run.json
        assert out["subfolder"] == f"checkpoint-{step}" and out["step"] == step
        assert SHA.match(out["revision"]) and out["repo"] == "org/run"
        assert out["hub_url"] == f"{hub.url}/org/run/tree/{out['revision']}/checkpoint-{step}"
        pushed[step] = (files, out["revision"])

    run = cli("latest", "--repo", "org/run", "--json", env=env)
    assert run.code == 0, run.stderr
    out = run.json
    assert out["found"] is True and out["subfolder"] == "checkpoint-30" and out["step"] == 30
    assert out["revision"] == pushed[30][1]

    dest = tmp_path / "resume"
    run = cli("pull", "--repo", "org/run", "--latest", "--local-dir", str(dest), "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["revision"] == pushed[30][1] and run.json["local_dir"] == str(dest)
    got = read_tree(dest)
    assert got.pop("ckpt-manifest.json")
    assert got == pushed[30][0]

    # An older checkpoint, pinned to the SHA its push reported.
    old = tmp_path / "old"
    run = cli("pull", "--repo", "org/run", "--subfolder", "checkpoint-10", "--revision", pushed[10][1],
              "--local-dir", str(old), "--json", env=env)
    assert run.code == 0, run.stderr
    got = read_tree(old)
    got.pop("ckpt-manifest.json")
    assert got == pushed[10][0]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".resume", ".old"))], "temp dirs left behind"


def test_repush_removes_stale_files_and_leaves_other_folders(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    other = write_checkpoint(tmp_path / "other", {"keep.bin": b"k" * 1000})
    assert cli("push", "--repo", "o/r", "--local-dir", str(other), "--subfolder", "checkpoint-1", env=env).code == 0
    first = write_checkpoint(tmp_path / "a", {"a.txt": b"a", "b.txt": b"b", "deep/c.bin": b"c" * 5000})
    assert cli("push", "--repo", "o/r", "--local-dir", str(first), "--subfolder", "sft", env=env).code == 0
    second = write_checkpoint(tmp_path / "b", {"a.txt": b"A2", "d.txt": b"d"})
    run = cli("push", "--repo", "o/r", "--local-dir", str(second), "--subfolder", "sft", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["deleted_files"] == 2 and "step" not in run.json

    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    files = sorted(api.list_repo_files("o/r", revision=run.json["revision"]))
    assert [f for f in files if f.startswith("sft/")] == ["sft/a.txt", "sft/ckpt-manifest.json", "sft/d.txt"]
    assert "checkpoint-1/keep.bin" in files
    dest = tmp_path / "pulled"
    assert cli("pull", "--repo", "o/r", "--subfolder", "sft", "--local-dir", str(dest), env=env).code == 0
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == {"a.txt": b"A2", "d.txt": b"d"}


def test_identical_repush_uploads_nothing_and_makes_no_commit(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    src = write_checkpoint(tmp_path / "c", ckpt_files(5, big=2_000_000))
    first = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "5", "--json", env=env)
    assert first.code == 0, first.stderr
    assert len(lfs_puts(hub)) >= 1
    before_commits, before_puts = len(commits_of(hub)), len(lfs_puts(hub))
    start = len(hub.log_entries())
    again = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "5", "--json", env=env)
    assert again.code == 0, again.stderr
    assert again.json["revision"] == first.json["revision"]
    assert again.json["commits"] == 0 and again.json["uploaded_files"] == 0
    assert len(commits_of(hub)) == before_commits
    assert len(lfs_puts(hub)) == before_puts
    second = hub.log_entries()[start:]
    assert second, "the re-push must have talked to the Hub"
    assert sum(e["bytes_in"] for e in second) == 0
    assert all(e["method"] in ("GET", "HEAD") for e in second), [e["path"] for e in second]


def test_latest_skips_a_partial_push_and_reads_one_snapshot(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    for step in range(1, 6):
        src = write_checkpoint(tmp_path / f"s{step}", ckpt_files(step, big=1000))
        assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), env=env).code == 0
    # A push of 12 files in commits of at most 5 files, interrupted after its first part.
    from huggingface_hub import CommitOperationAdd, HfApi

    from ckpt_action.checkpoint.manifest import Manifest, digest_files, scan_dir

    big = write_checkpoint(tmp_path / "s9", {f"shard-{i}.bin": bytes([i]) * 2000 for i in range(12)})
    marker = Manifest(files=digest_files(scan_dir(big)), step=9, complete=False)
    api = HfApi(endpoint=hub.url)
    api.create_commit("o/r", operations=[
        CommitOperationAdd("checkpoint-9/shard-0.bin", str(big / "shard-0.bin")),
        CommitOperationAdd("checkpoint-9/ckpt-manifest.json", marker.to_json()),
    ], commit_message="partial")
    # And a folder whose files were changed behind the manifest's back.
    api.upload_file(path_or_fileobj=b"tampered", path_in_repo="checkpoint-7/config.json", repo_id="o/r")
    src7 = write_checkpoint(tmp_path / "s7", ckpt_files(7, big=1000))
    assert cli("push", "--repo", "o/r", "--local-dir", str(src7), "--step", "7", env=env).code == 0
    api.upload_file(path_or_fileobj=b"tampered", path_in_repo="checkpoint-7/config.json", repo_id="o/r")

    start = len(hub.log_entries())
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-5" and run.json["found"] is True
    assert "skipped checkpoint-9" in run.stderr and "skipped checkpoint-7" in run.stderr
    head = api.list_repo_refs("o/r").branches[0].target_commit
    assert run.json["revision"] == head
    reads = hub.log_entries()[start:]
    tree_reads = [e for e in reads if "/tree/" in e["path"]]
    # The top level is listed at the branch (the manifest read names the commit); every other
    # listing, a folder judged file by file, at the SHA it reported.
    assert tree_reads and tree_reads[0]["path"].split("?")[0].endswith("/tree/main")
    assert all(head in e["path"] for e in tree_reads[1:])
    assert not any("recursive=true" in e["path"] and e["path"].split("?")[0].endswith(("/main", head))
                   for e in tree_reads), "latest must not list the whole repo recursively"


def test_multi_commit_push_reports_the_sha_with_the_complete_manifest(hub, cli, tmp_path):
    env = env_for(hub, tmp_path, CKPT_MAX_FILES_PER_COMMIT="5")
    src = write_checkpoint(tmp_path / "many", {f"part-{i:02d}.bin": bytes([i]) * (100 + i) for i in range(12)})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "3", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["commits"] == 3
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    commits = api.list_repo_commits("o/r")
    assert commits[0].commit_id == run.json["revision"]
    # The commit before the last holds part of the files and an incomplete marker: not "latest".
    partial = commits[1].commit_id
    run_partial = cli("latest", "--repo", "o/r", "--revision", partial, "--json", env=env)
    assert run_partial.code == 0 and run_partial.json["found"] is False, run_partial.stdout
    dest = tmp_path / "d"
    assert cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(dest), env=env).code == 0
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == read_tree(src)


def test_latest_nothing_found_and_require(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    run = cli("latest", "--repo", "o/missing", "--json", env=env)
    assert run.code == 0 and run.json["found"] is False and "revision" not in run.json
    src = write_checkpoint(tmp_path / "sft", {"w.bin": b"w"})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "sft", env=env).code == 0
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0 and run.json["found"] is False and SHA.match(run.json["revision"])
    run = cli("latest", "--repo", "o/r", "--require", env=env)
    assert run.code == 3
    assert run.stderr.strip().splitlines()[-1].startswith("error: no complete checkpoint")


def test_latest_on_a_stopped_server_fails_instead_of_saying_none(hub, cli, tmp_path):
    env = env_for(hub, tmp_path, CKPT_RETRIES="2")
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w"})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env).code == 0
    hub.stop()
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 1
    assert set(run.json) == {"error", "exit_code", "option"}  # --json: the error's object, no result
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "cannot reach" in lines[-1]


def test_hf_download_reads_what_push_wrote(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    files = ckpt_files(4, big=1_200_000)
    src = write_checkpoint(tmp_path / "c", files)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "4", "--json", env=env)
    assert run.code == 0, run.stderr
    out = tmp_path / "hf-dl"
    hf = subprocess.run([HF, "download", "o/r", "--revision",
                         run.json["revision"], "--include", "checkpoint-4/*", "--local-dir", str(out)],
                        env=env, capture_output=True, text=True, timeout=120)
    assert hf.returncode == 0, hf.stderr
    got = read_tree(out / "checkpoint-4")
    manifest = json.loads(got.pop("ckpt-manifest.json"))
    assert got == files
    assert manifest["complete"] is True and manifest["step"] == 4
    import hashlib

    assert {p: d["sha256"] for p, d in manifest["files"].items()} == {
        p: hashlib.sha256(b).hexdigest() for p, b in files.items()}


def test_latest_finds_folders_written_by_hf_upload(hub, cli, tmp_path):
    env = env_for(hub, tmp_path, HF_HUB_DISABLE_XET="1")
    written = {}
    for step in (50, 150):
        written[step] = ckpt_files(step, big=5000)
        folder = write_checkpoint(tmp_path / f"t{step}", written[step])
        hf = subprocess.run([HF, "upload", "o/trainer", str(folder),
                             f"checkpoint-{step}"], env=env, capture_output=True, text=True, timeout=120)
        assert hf.returncode == 0, hf.stderr
    run = cli("latest", "--repo", "o/trainer", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-150" and run.json["step"] == 150 and run.json["found"] is True
    dest = tmp_path / "d"
    run = cli("pull", "--repo", "o/trainer", "--latest", "--local-dir", str(dest), "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["verified_by"] == "tree"
    assert read_tree(dest) == written[150]


def test_outputs_reach_github_output_and_summary(hub, cli, tmp_path):
    gh_out, summary = tmp_path / "gh-output", tmp_path / "summary.md"
    env = env_for(hub, tmp_path, GITHUB_OUTPUT=str(gh_out), GITHUB_STEP_SUMMARY=str(summary))
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w" * 10})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "12", env=env)
    assert run.code == 0, run.stderr
    text = gh_out.read_text()
    blocks = re.findall(r"^([a-z-]+)<<(ghadelimiter_[0-9a-f]+)\n(.*?)\n?\2$", text, re.M | re.S)
    parsed = {name: value for name, _delim, value in blocks}
    # A push writes its outputs only: `found` belongs to latest, pull and list.
    assert {"repo", "subfolder", "revision", "step", "hub-url", "local-dir"} <= set(parsed) and "found" not in parsed
    assert parsed["subfolder"] == "checkpoint-12" and parsed["step"] == "12" and SHA.match(parsed["revision"])
    assert parsed["revision"] in summary.read_text() or parsed["revision"][:12] in summary.read_text()


def test_private_by_default_public_on_request(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w"})
    assert cli("push", "--repo", "o/priv", "--local-dir", str(src), "--step", "1", env=env).code == 0
    assert cli("push", "--repo", "o/pub", "--local-dir", str(src), "--step", "1", "--public", env=env).code == 0
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    assert api.repo_info("o/priv").private is True
    assert api.repo_info("o/pub").private is False


def test_pull_refuses_a_dir_it_did_not_fill_even_with_force(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"new"})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env).code == 0
    dest = write_checkpoint(tmp_path / "dest", {"old.txt": b"old"})
    run = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(dest), env=env)
    assert run.code == 2 and "--force" in run.stderr
    assert read_tree(dest) == {"old.txt": b"old"}
    # --force replaces only a dir that is empty or holds an earlier pull (tests/integration/test_pull_update.py).
    run = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(dest), "--force", env=env)
    assert run.code == 2 and "dedicated dir" in run.stderr
    assert read_tree(dest) == {"old.txt": b"old"}


def test_pull_by_tag_and_branch_reports_the_sha(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"v1"})
    first = cli("push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "sft", "--json", env=env)
    from huggingface_hub import HfApi

    HfApi(endpoint=hub.url).create_tag("o/r", tag="v1", revision=first.json["revision"])
    write_checkpoint(src, {"w.bin": b"v2"})
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "sft", env=env).code == 0
    dest = tmp_path / "d"
    run = cli("pull", "--repo", "o/r", "--subfolder", "sft", "--revision", "v1", "--local-dir", str(dest), "--json",
              env=env)
    assert run.code == 0, run.stderr
    assert run.json["revision"] == first.json["revision"]
    assert (dest / "w.bin").read_bytes() == b"v1"


def test_demo_runs(cli, tmp_path):
    run = cli("demo", timeout=180)
    assert run.code == 0, run.stderr
    assert "latest -> checkpoint-300" in run.stdout
    assert "skipped checkpoint-400" in run.stdout
    assert "identical" in run.stdout
    # Why latest's SHA is not the last push's, and how to look around afterwards.
    pushed = re.search(r"push   checkpoint-300 +-> ([0-9a-f]{40})", run.stdout)
    found = re.search(r"latest -> checkpoint-300 at ([0-9a-f]{40})", run.stdout)
    assert pushed and found and pushed.group(1) != found.group(1)
    assert "interrupted push of checkpoint-400 moved the head" in run.stdout
    assert "--keep" in run.stdout
    # The two homes together: train into a bucket (a content pin), promote into the model repo (a SHA).
    bucket = re.search(r"push   checkpoint-300 +-> hf://buckets/demo/ckpts/run-1 pinned sha256:([0-9a-f]{64})",
                       run.stdout)
    promoted = re.search(r"promote .* -> demo/tiny-llm/release at ([0-9a-f]{40}), tag v1", run.stdout)
    assert bucket and promoted, run.stdout
    # The outputs line comes after the bucket and the promote: it says whose outputs it prints.
    line = next(x for x in run.stdout.splitlines() if x.startswith("outputs"))
    assert line.startswith("outputs of latest and pull (what a CI step reads): {"), line
    assert json.loads(line.split(": ", 1)[1])["revision"] == found.group(1)


def test_top_level_help_names_the_demo_the_token_and_the_endpoint(cli):
    run = cli("--help")
    assert run.code == 0, run.stderr
    assert "ckpt-action demo" in run.stdout and "HF_TOKEN" in run.stdout and "HF_ENDPOINT" in run.stdout


@pytest.mark.process("what the process prints on its own stderr besides its result")
def test_ci_logs_get_progress_lines_not_bars(hub, cli_process, tmp_path):
    cli = cli_process
    env = env_for(hub, tmp_path, CI="true", CKPT_PROGRESS_INTERVAL="0.01")
    src = write_checkpoint(tmp_path / "c", ckpt_files(8, big=20_000_000))
    push = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "8", env=env)
    assert push.code == 0, push.stderr
    assert "push checkpoint-8: uploading: done, 19.1 MiB in" in push.stderr
    pull = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "d"), env=env)
    assert pull.code == 0, pull.stderr
    lines = pull.stderr.splitlines()
    assert any(line.startswith("pull checkpoint-8: done, 19.1 MiB in") for line in lines), lines
    assert not any("\r" in line or "it/s" in line for line in push.stderr.splitlines() + lines), "no tqdm bars in CI"


@pytest.mark.process("which modules a fresh process imports")
def test_a_resume_in_a_fresh_process_imports_no_more_than_it_reads_with(hub, cli, tmp_path):
    # latest and pull only read (refs, listings, the manifest, file bodies): the client's
    # whole API (huggingface_hub.hf_api) and its progress bars (tqdm, asyncio) are a tenth of
    # a second of every fresh process's start, on the resume's critical path.
    env = env_for(hub, tmp_path)
    src = write_checkpoint(tmp_path / "c", ckpt_files(4))
    assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "4", env=env).code == 0
    probe = (  # printed by an exit handler: the process ends without tearing Python down, after them
        "import atexit, json, sys, runpy; sys.argv = ['entrypoint.py', 'pull', '--repo', 'o/r', '--latest',"
        f" '--local-dir', {str(tmp_path / 'd')!r}, '--json']"
        "\natexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules"
        " if m in ('huggingface_hub.hf_api', 'tqdm')))))"
        f"\nrunpy.run_path({str(Path(__file__).parents[2] / 'entrypoint.py')!r}, run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[0])["subfolder"] == "checkpoint-4"
    assert json.loads(lines[-1]) == []


def test_push_replaces_an_unreadable_manifest_and_pull_takes_a_relative_target(hub, cli, tmp_path):
    env = env_for(hub, tmp_path)
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    api.create_repo("o/r")
    api.upload_file(path_or_fileobj=b"{not json", path_in_repo="checkpoint-2/ckpt-manifest.json", repo_id="o/r")
    src = write_checkpoint(tmp_path / "c", {"w.bin": b"w" * 100})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "2", "--json", env=env)
    assert run.code == 0, run.stderr
    pulled = cli("pull", "--repo", "o/r", "--latest", "--local-dir", "rel/dest", "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    assert (tmp_path / "rel" / "dest" / "w.bin").read_bytes() == b"w" * 100
