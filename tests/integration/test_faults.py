"""The fault matrix: push, latest and pull against a local Hub that fails on purpose.

Each cell injects one fault (500, 503, 429 + Retry-After, a connection reset mid-body,
or an answer slower than the timeout) once, at one endpoint the mode uses, and runs the
real CLI. Every cell must end in success after bounded retries with the complete
checkpoint (never a partial one, never a second commit, never "none found"). Persistent
faults must end in exit 1 with one ``error:`` line, nothing reported, nothing written.

Push runs on the Xet path (the default: the xet token, xorb and shard cells) and, for the
LFS cells, with ``HF_HUB_DISABLE_XET=1``, so both upload paths meet every fault.

Timeouts and retry delays are shortened through CKPT_* variables, not patched. Every
duration here derives from one setting, ``TIMEOUT`` (the environment's
``FAULT_MATRIX_TIMEOUT``, default 0.5 s, which held on 2 cores with a CPU-bound process on
each beside the run): the client's timeout, the server's slow answers, the bounds; on a
machine too slow for it, raise that one value.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.conftest import FAULT_MATRIX_TIMEOUT, read_tree, write_checkpoint
from tests.helpers.chaos_helpers import (
    assert_complete,
    ckpt,
    commit_ids,
    env_for,
    head_of,
    one_line_error,
    remote_checkpoint,
    reports_nothing,
    seed,
)

TIMEOUT = FAULT_MATRIX_TIMEOUT  # CKPT_TIMEOUT for the matrix: the one setting
SLOW = 2.5 * TIMEOUT  # seconds a "slow" answer waits; well past TIMEOUT, so the client gives up on it
BOUND = 30 * TIMEOUT  # no cell may take longer than this (bounded retries)
SETTLE = 10 * TIMEOUT  # how long a cell waits for the server to log a request it finished late

# endpoint -> (method, path regex) as the client requests it from the local Hub.
ENDPOINTS = {
    "refs": ("GET", r"/api/models/[^/]+/[^/]+/refs$"),
    "create": ("POST", r"^/api/repos/create$"),
    "tree": ("GET", r"/api/models/[^/]+/[^/]+/tree/"),
    # latest reads the default branch's manifest by the branch's name (the answer names the commit)
    "manifest": ("GET", r"/resolve/(?:[0-9a-f]{40}|main)/.*ckpt-manifest\.json$"),
    "preupload": ("POST", r"/preupload/"),
    "lfs-batch": ("POST", r"\.git/info/lfs/objects/batch$"),
    "lfs-put": ("PUT", r"^/localhub-lfs/"),
    "commit": ("POST", r"/api/models/[^/]+/[^/]+/commit/"),
    "file-get": ("GET", r"/resolve/[0-9a-f]{40}/.*model\.safetensors$"),
    "xet-token": ("GET", r"/xet-write-token/"),
    "xorb": ("POST", r"^/v1/xorbs/default/"),
    "shard": ("POST", r"^/v1/shards$"),
}
LFS_ONLY = {"lfs-batch", "lfs-put"}  # cells run with HF_HUB_DISABLE_XET=1; every other push cell on Xet
MODE_ENDPOINTS = {
    "push": ["refs", "create", "tree", "manifest", "preupload", "xet-token", "xorb", "shard", "lfs-batch", "lfs-put",
             "commit"],
    "latest": ["refs", "tree", "manifest"],
    "pull": ["refs", "tree", "manifest", "file-get"],  # one GET a file: no HEAD
}
FAULTS: dict[str, dict[str, object]] = {
    "500": {"status": 500},
    "503": {"status": 503},
    "429": {"status": 429, "retry_after": 0},  # the header, honoured (its wait: test_retry_after_is_honoured)
    "reset": {"reset": 5},
    "slow": {"delay_s": SLOW},
}
CELLS = [(m, e, f) for m, eps in MODE_ENDPOINTS.items() for e in eps for f in FAULTS]


def _fired(entries: list[dict], endpoint: str, fault: str) -> bool:
    method, pattern = ENDPOINTS[endpoint]
    hits = [e for e in entries if e["method"] == method and re.search(pattern, e["path"].split("?")[0])]
    if fault == "slow":
        return any(e["ms"] >= SLOW * 1000 for e in hits)
    want = "reset" if fault == "reset" else int(fault)
    return any(e["status"] == want for e in hits)


def _push_titles(url: str, repo: str) -> list[str]:
    from huggingface_hub import HfApi

    return [c.title for c in HfApi(endpoint=url).list_repo_commits(repo) if c.title.startswith("Push ")]


@pytest.mark.parametrize(("mode", "endpoint", "fault"), CELLS, ids=[f"{m}-{e}-{f}" for m, e, f in CELLS])
def test_fault_cell(mode, endpoint, fault, hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    repo = "o/new" if endpoint == "create" else "o/r"
    v1, v2 = ckpt(1), ckpt(1, salt=b"v2")
    v2.pop("nested/trainer_state.json")
    v2["extra.txt"] = b"added in v2"
    if endpoint != "create":
        seed(hub.url, repo, "checkpoint-1", v1, tmp_path, step=1)
    if mode == "latest":
        seed(hub.url, repo, "checkpoint-2", ckpt(2), tmp_path, step=2)
    before = commit_ids(hub.url, repo) if endpoint != "create" else []
    method, pattern = ENDPOINTS[endpoint]
    hub.set_faults([{"method": method, "path": pattern, "times": 1, **FAULTS[fault]}])
    start = len(hub.log_entries())
    env = env_for(hub, tmp_path, CKPT_TIMEOUT=str(TIMEOUT))
    if endpoint in LFS_ONLY:
        env["HF_HUB_DISABLE_XET"] = "1"
    dest = tmp_path / "dest"

    t0 = time.monotonic()
    if mode == "push":
        src = write_checkpoint(tmp_path / "src", v2)
        run = cli("push", "--repo", repo, "--local-dir", str(src), "--step", "1", "--json", env=env)
    elif mode == "latest":
        # latest lists the default branch by name; a named revision is what reads the refs
        named = ["--revision", "main"] if endpoint == "refs" else []
        run = cli("latest", "--repo", repo, *named, "--json", env=env)
    else:
        run = cli("pull", "--repo", repo, "--subfolder", "checkpoint-1", "--local-dir", str(dest), "--json",
                  env=env)
    elapsed = time.monotonic() - t0
    # A slow request is logged once the server finishes it (and, for a write, lands it): wait for that.
    deadline = time.monotonic() + SLOW + SETTLE
    while not (fired := _fired(hub.log_entries()[start:], endpoint, fault)) and time.monotonic() < deadline:
        time.sleep(0.1)
    hub.set_faults([])

    assert fired, "the fault never fired: the cell tests nothing"
    assert elapsed < BOUND, f"{elapsed:.1f}s: retries are not bounded"
    assert run.code == 0, f"{mode} {endpoint} {fault}: exit {run.code}: {run.stderr}"
    assert "Traceback" not in run.stderr
    out = run.json
    if mode == "push":
        head = head_of(hub.url, repo)
        assert out["revision"] == head
        after = commit_ids(hub.url, repo)
        assert after[: len(after) - len(before)] and after[len(after) - len(before):] == before
        assert len(_push_titles(hub.url, repo)) == 1, "a retry made a second commit"
        manifest, files = remote_checkpoint(hub.url, repo, "checkpoint-1", out["revision"], hf_client)
        assert_complete(manifest, files, v2)
        assert manifest["step"] == 1
    elif mode == "latest":
        assert out["found"] is True and out["subfolder"] == "checkpoint-2"
        assert out["revision"] == head_of(hub.url, repo) == before[0]
    else:
        assert out["revision"] == before[0] and out["found"] is True
        got = read_tree(dest)
        assert got.pop("ckpt-manifest.json")
        assert got == v1
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dest")] == []


# --- persistent faults: give up, one line, nothing reported, nothing written ------------------------

GIVE_UP: list[tuple[str, str, dict[str, object]]] = [
    ("push", "refs", {"status": 503}),
    ("push", "commit", {"status": 500}),
    ("push", "commit", {"status": 429, "retry_after": 0}),
    ("latest", "refs", {"status": 503}),
    ("latest", "refs", {"delay_s": SLOW}),
    ("latest", "tree", {"status": 503}),
    ("latest", "tree", {"delay_s": SLOW}),
    ("latest", "manifest", {"reset": 5}),
    ("pull", "refs", {"status": 429, "retry_after": 0}),
    ("pull", "file-get", {"status": 503}),
    ("pull", "manifest", {"delay_s": SLOW}),
]


@pytest.mark.parametrize(("mode", "endpoint", "fault"), GIVE_UP,
                         ids=[f"{m}-{e}-{'slow' if 'delay_s' in f else '-'.join(map(str, f.values()))}"
                              for m, e, f in GIVE_UP])
def test_persistent_fault_gives_up_cleanly(mode, endpoint, fault, hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    before = commit_ids(hub.url, "o/r")
    method, pattern = ENDPOINTS[endpoint]
    fault = dict(fault)
    retries = fault.pop("_retries", "2")
    hub.set_faults([{"method": method, "path": pattern, "times": -1, **fault}])
    gh_out = tmp_path / "gh-output"
    env = env_for(hub, tmp_path, CKPT_TIMEOUT=str(TIMEOUT), CKPT_RETRIES=retries, GITHUB_OUTPUT=str(gh_out))
    dest = tmp_path / "dest"
    t0 = time.monotonic()
    if mode == "push":
        src = write_checkpoint(tmp_path / "src", ckpt(1, salt=b"new"))
        run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json", env=env)
    elif mode == "latest":
        named = ["--revision", "main"] if endpoint == "refs" else []  # only a named revision reads the refs
        run = cli("latest", "--repo", "o/r", *named, "--json", env=env)
    else:
        run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(dest), "--json",
                  env=env)
    elapsed = time.monotonic() - t0
    if "delay_s" in fault:
        time.sleep(SLOW)
    hub.set_faults([])

    assert run.code == 1, f"exit {run.code}: {run.stdout} {run.stderr}"
    line = one_line_error(run.stderr)
    assert "none found" not in line and "no complete checkpoint" not in line
    assert reports_nothing(run), "a failed run must report nothing"
    assert not gh_out.exists() or "found" not in gh_out.read_text()
    assert elapsed < 2 * BOUND, f"gave up only after {elapsed:.1f}s"
    assert commit_ids(hub.url, "o/r") == before, "a failed push must not leave commits behind"
    assert not dest.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".dest")]


def test_commit_that_lands_after_a_timeout_is_found_not_repeated(hub_server, hf_client, cli, tmp_path):
    """An ambiguous commit failure: the POST times out but the commit lands; the retry sees it."""
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    before = commit_ids(hub.url, "o/r")
    # The server sleeps SLOW then commits; the client gives up at TIMEOUT and re-reads 3-4.5
    # TIMEOUTs later, once the commit has landed.
    hub.set_faults([{"method": "POST", "path": ENDPOINTS["commit"][1], "times": 1, "delay_s": SLOW}])
    start = len(hub.log_entries())
    env = env_for(hub, tmp_path, CKPT_TIMEOUT=str(TIMEOUT), CKPT_RETRY_DELAY=str(3 * TIMEOUT),
                  CKPT_RETRY_MAX_DELAY=str(4 * TIMEOUT))
    new = ckpt(1, salt=b"landed")
    src = write_checkpoint(tmp_path / "src", new)
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--json", env=env)
    assert run.code == 0, run.stderr
    after = commit_ids(hub.url, "o/r")
    assert len(after) == len(before) + 1, "the retry made a second commit"
    assert run.json["revision"] == after[0]
    assert run.json["commits"] == 1, "the commit that landed behind the timeout is this push's: count it"
    commits = [e for e in hub.log_entries()[start:] if e["method"] == "POST" and "/commit/" in e["path"]]
    assert len(commits) == 1, "the push committed again instead of checking what landed"
    manifest, files = remote_checkpoint(hub.url, "o/r", "checkpoint-1", run.json["revision"], hf_client)
    assert_complete(manifest, files, new)


def test_ambiguous_multi_batch_push_never_mixes(hub_server, hf_client, cli, tmp_path):
    """A batched push whose second commit is cut off mid-body still ends complete, once."""
    hub = hub_server()
    files = {f"shard-{i:02d}.bin": bytes([i]) * (300 + i) for i in range(9)}
    # The first commit passes (a no-op rule uses its one fire); the second is cut off mid-body.
    hub.set_faults([{"method": "POST", "path": ENDPOINTS["commit"][1], "times": 1, "delay_s": 0},
                    {"method": "POST", "path": ENDPOINTS["commit"][1], "times": 1, "reset": 20}])
    env = env_for(hub, tmp_path, CKPT_MAX_FILES_PER_COMMIT="4")
    src = write_checkpoint(tmp_path / "src", files)
    run = cli("push", "--repo", "o/b", "--local-dir", str(src), "--step", "7", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["revision"] == head_of(hub.url, "o/b")
    manifest, got = remote_checkpoint(hub.url, "o/b", "checkpoint-7", run.json["revision"], hf_client)
    assert_complete(manifest, got, files)
    assert len(_push_titles(hub.url, "o/b")) == 3  # 9 files, 3 per commit + the manifest
    assert any(e["status"] == "reset" for e in hub.log_entries()), "the fault never fired"


def test_retry_after_is_honoured(hub_server, hf_client, cli, tmp_path):
    """A 429 on refs (which the client library does not retry) waits the Retry-After, not our short delay."""
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    hub.set_faults([{"method": "GET", "path": ENDPOINTS["refs"][1], "times": 1, "status": 429, "retry_after": 1}])
    t0 = time.monotonic()
    run = cli("latest", "--repo", "o/r", "--revision", "main", "--json", env=env_for(hub, tmp_path))  # a name: refs
    assert run.code == 0 and run.json["found"] is True, run.stderr
    refs = [e for e in hub.log_entries() if e["path"].endswith("/refs")]
    assert [e["status"] for e in refs] == [429, 200]
    gap = refs[1]["ts"] - refs[0]["ts"]
    assert gap >= 0.95, f"retried after {gap:.2f}s, Retry-After said 1 (the retry delay here: 0.05 s)"
    assert time.monotonic() - t0 < 20


def test_timeout_is_configurable_by_flag(hub_server, hf_client, cli, tmp_path):
    """--timeout bounds a silent server: a stalled refs answer fails within the bound, not the default 60 s."""
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    hub.set_faults([{"method": "GET", "path": ENDPOINTS["refs"][1], "times": -1, "delay_s": 12 * TIMEOUT}])
    t0 = time.monotonic()
    run = cli("latest", "--repo", "o/r", "--revision", "main", "--timeout", str(TIMEOUT), "--retries", "1",
              env=env_for(hub, tmp_path))  # a named revision: the refs are read
    elapsed = time.monotonic() - t0
    assert run.code == 1 and "cannot reach" in one_line_error(run.stderr)
    assert elapsed < 11 * TIMEOUT, f"{elapsed:.1f}s: --timeout {TIMEOUT:g} --retries 1 should give up after about" \
        f" {2 * TIMEOUT:g} s"
    hub.set_faults([])


def test_a_download_cut_mid_body_resumes_with_range(hub_server, hf_client, cli, tmp_path):
    """A dropped connection costs the rest of the file, not the whole file: the retry asks for a Range."""
    hub = hub_server()
    files = ckpt(1)
    seed(hub.url, "o/r", "checkpoint-1", files, tmp_path, step=1)
    size = len(files["model.safetensors"])
    hub.set_faults([{"method": "GET", "path": ENDPOINTS["file-get"][1], "times": 1, "reset": size // 2}])
    start = len(hub.log_entries())
    dest = tmp_path / "dest"
    run = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(dest), env=env_for(hub, tmp_path))
    assert run.code == 0, run.stderr
    assert (dest / "model.safetensors").read_bytes() == files["model.safetensors"]
    # The requests that carried bytes (the Hub's redirects to its CDN aside).
    gets = [e for e in hub.log_entries()[start:] if e["method"] == "GET" and "model.safetensors" in e["path"]
            and e["status"] != 302]
    assert [e["status"] for e in gets] == ["reset", 206], gets
    assert gets[1]["bytes_out"] == size - size // 2
