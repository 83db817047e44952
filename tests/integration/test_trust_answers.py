"""Nothing the Hub answers is used before it is checked (issue 11, items 2 and 8).

A rewriting proxy (tests/helpers/hostile_proxy.py) in front of the local Hub makes it answer
malformed commit ids, manifest fields, folder names and hashes; the real CLI must fail
(exit 1, one line, nothing printed or written as an output) or skip what it cannot use
with a warning, never pass the text on.
"""

from __future__ import annotations

import json

import pytest

from ckpt_action.checkpoint.manifest import FileDigest, Manifest
from ckpt_action.checkpoint.verdict import satisfies
from tests.conftest import clean_env
from tests.helpers.chaos_helpers import FAST, ckpt, one_line_error, seed
from tests.helpers.hostile_proxy import hostile_fixture  # noqa: F401 - provides the hostile fixture

INJECTION = "::warning::injected"
REFS = r"/api/models/o/r/refs$"
TOP = r"/api/models/o/r/tree/(?:[0-9a-f]{40}|main)$"  # latest lists the default branch by name
MANIFEST = r"/o/r/resolve/(?:[0-9a-f]{40}|main)/checkpoint-1/ckpt-manifest\.json$"


def _env(proxy, tmp_path, **extra):
    return clean_env(tmp_path, HF_ENDPOINT=proxy.url, GITHUB_OUTPUT=str(tmp_path / "gh-output"), **{**FAST, **extra})


def _no_injection(run) -> None:
    """No printed line can start a workflow command, whatever the server sent."""
    for line in (run.stdout + run.stderr).splitlines():
        assert not line.lstrip().startswith("::warning::injected"), line


@pytest.mark.parametrize("said", ["A" * 40, "a" * 39, "g" * 40, "main", "a" * 40 + "x"],
                         ids=["uppercase", "short", "not-hex", "a-name", "long"])
def test_a_malformed_commit_in_the_manifest_answer_is_never_the_pin(said, seeded, hostile, cli, tmp_path):
    """latest takes the commit from the manifest read's X-Repo-Commit: one that is not 40
    lowercase hex is not used (nor printed); the branch is resolved and the manifest read
    again at the commit the refs name."""
    from huggingface_hub import HfApi

    head = HfApi(endpoint=seeded.url).repo_info("o/r").sha
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": r"/resolve/main/.*ckpt-manifest\.json$",
                      "headers": {"X-Repo-Commit": said}, "times": -1}])
    run = cli("latest", "--repo", "o/r", "--json", env=_env(proxy, tmp_path))
    assert run.code == 0 and run.json["revision"] == head, run.stdout + run.stderr
    assert said not in run.stdout.replace(head, "") and said not in run.stderr
    assert proxy.fired() >= 1
    assert any(r["path"].endswith("/refs") for r in proxy.requests), "the branch was not resolved instead"


@pytest.mark.parametrize("target", ["a" * 40 + "\n" + INJECTION, "a" * 40 + "\n", "A" * 40, "a" * 39, "g" * 40],
                         ids=["newline-command", "trailing-newline", "uppercase", "short", "not-hex"])
def test_a_malformed_ref_target_fails_the_command(target, seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": REFS, "ref_target": target, "times": -1}])
    env = _env(proxy, tmp_path)
    for args in (["latest", "--repo", "o/r", "--revision", "main"],
                 ["pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "dest")]):
        run = cli(*args, env=env)
        assert run.code == 1, f"{args[0]}: exit {run.code}\n{run.stdout}\n{run.stderr}"
        assert "malformed commit id" in one_line_error(run.stderr) and run.stdout == ""
        _no_injection(run)
        assert not (tmp_path / "gh-output").exists() or (tmp_path / "gh-output").read_text() == ""
    assert proxy.fired() >= 2 and not (tmp_path / "dest").exists()


def test_a_malformed_commit_oid_from_a_push_is_refused(seeded, hostile, cli, tmp_path):
    from tests.conftest import write_checkpoint

    proxy = hostile(seeded)
    proxy.set_rules([{"method": "POST", "path": r"/api/models/o/r/commit/", "commit_oid": "f" * 40 + "\n" + INJECTION}])
    src = write_checkpoint(tmp_path / "src", {"a.txt": b"a"})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "2", env=_env(proxy, tmp_path))
    assert run.code == 1 and proxy.fired() == 1, run.stdout + run.stderr
    assert "malformed commit id" in one_line_error(run.stderr) and run.stdout == ""
    _no_injection(run)


def test_a_malformed_commit_oid_from_prune_is_refused(seeded, hostile, cli, tmp_path):
    seed(seeded.url, "o/r", "checkpoint-2", ckpt(2), tmp_path / "seed2", step=2)
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "POST", "path": r"/api/models/o/r/commit/", "commit_oid": "f" * 40 + "\n" + INJECTION}])
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", env=_env(proxy, tmp_path))
    assert run.code == 1 and proxy.fired() == 1, run.stdout + run.stderr
    assert "malformed commit id" in one_line_error(run.stderr) and run.stdout == ""


def test_refs_with_unusable_names_are_skipped_with_a_warning(seeded, hostile, cli, tmp_path):
    from huggingface_hub import HfApi

    HfApi(endpoint=seeded.url).create_tag("o/r", tag="v1")
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": REFS, "json_merge": {"tags": [
        {"name": "v1\n" + INJECTION, "ref": "refs/tags/v1", "targetCommit": "a" * 40}]}, "times": -1}])
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--dry-run", env=_env(proxy, tmp_path))
    assert run.code == 0, run.stdout + run.stderr
    assert "skipped " + ascii("v1\n" + INJECTION) in run.stderr and "is not a usable tag name" in run.stderr
    _no_injection(run)


@pytest.mark.parametrize("step", ["1\n" + INJECTION, True, -1, 1.5, [1]], ids=["string", "bool", "negative",
                                                                           "float", "list"])
def test_a_manifest_step_that_is_not_a_whole_number_makes_the_manifest_unreadable(step, seeded, hostile, cli,
                                                                                   tmp_path):
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": MANIFEST, "json_merge": {"step": step}, "times": -1}])
    env = _env(proxy, tmp_path)
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "d"), env=env)
    assert pulled.code == 1, pulled.stdout + pulled.stderr
    assert "unreadable" in one_line_error(pulled.stderr) and pulled.stdout == ""
    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0, listed.stderr
    (row,) = listed.json["checkpoints"]
    assert row["status"] == "unreadable" and row["step"] == 1 and "step" in row["problem"]
    latest = cli("latest", "--repo", "o/r", "--json", env=env)
    assert latest.code == 0 and latest.json["found"] is False, latest.stdout + latest.stderr
    assert "skipped checkpoint-1" in latest.stderr
    for run in (pulled, listed, latest):
        _no_injection(run)


@pytest.mark.parametrize("name", ["checkpoint-9\n", "checkpoint-9\n" + INJECTION, "checkpoint-\u0669",
                                  "checkpoint-9\u2028"], ids=["trailing-newline", "newline-command",
                                                              "arabic-digit", "line-separator"])
def test_folder_names_that_are_not_usable_are_skipped_with_a_warning(name, seeded, hostile, cli,
                                                                     tmp_path):
    seed(seeded.url, "o/r", "checkpoint-2", ckpt(2), tmp_path / "seed2", step=2)
    proxy = hostile(seeded)
    rename = [r"^checkpoint-2(?=/|$)", name]
    proxy.set_rules([{"method": "GET", "path": r"/api/models/o/r/tree/", "rename": rename, "times": -1}])
    env = _env(proxy, tmp_path)
    latest = cli("latest", "--repo", "o/r", "--json", env=env)
    assert latest.code == 0 and latest.json["subfolder"] == "checkpoint-1", latest.stdout + latest.stderr
    assert "skipped " + ascii(name) in latest.stderr
    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0 and [r["subfolder"] for r in listed.json["checkpoints"]] == ["checkpoint-1"], listed.stderr
    assert "skipped " + ascii(name) in listed.stderr
    pruned = cli("prune", "--repo", "o/r", "--keep-last", "1", "--dry-run", "--json", env=env)
    assert pruned.code == 0 and pruned.json["deleted"] == [] and pruned.json["kept"] == ["checkpoint-1"], pruned.stderr
    assert "skipped " + ascii(name) in pruned.stderr
    for run in (latest, listed, pruned):
        _no_injection(run)
        assert name not in run.stdout + run.stderr


def test_an_unusable_path_inside_a_folder_makes_that_folder_unreadable(seeded, hostile, cli, tmp_path):
    seed(seeded.url, "o/r", "checkpoint-2", ckpt(2), tmp_path / "seed2", step=2)
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": r"/api/models/o/r/tree/", "rename": [
        r"^checkpoint-2/config\.json$", "checkpoint-2/con\n" + INJECTION], "times": -1}])
    env = _env(proxy, tmp_path)
    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["checkpoint-2"]["status"] == "unreadable" and rows["checkpoint-1"]["status"] == "complete"
    assert "control" in rows["checkpoint-2"]["problem"]
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-2", "--local-dir", str(tmp_path / "d"), env=env)
    assert pulled.code == 1 and "refusing the listing" in one_line_error(pulled.stderr)
    for run in (listed, pulled):
        _no_injection(run)


def test_a_manifest_entry_without_any_hash_is_refused_not_trusted(seeded, hostile, cli, tmp_path):
    """sha256 null and no git_oid vouch for nothing: altered bytes of the same size must not pass."""
    proxy = hostile(seeded)
    proxy.set_rules([
        {"method": "GET", "path": MANIFEST, "json_merge": {"files": {"config.json": {"sha256": None, "git_oid": None}}},
         "times": -1},
        {"method": "GET", "path": r"/resolve/[0-9a-f]{40}/checkpoint-1/config\.json$", "corrupt": True, "times": -1},
    ])
    dest = tmp_path / "dest"
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(dest), "--json",
              env=_env(proxy, tmp_path))
    assert run.code == 1, run.stdout + run.stderr
    assert "nothing to verify it by" in one_line_error(run.stderr) and not dest.exists()


def test_satisfies_needs_a_hash_and_from_json_checks_every_field():
    from ckpt_action.checkpoint.manifest import digest_bytes
    from ckpt_action.errors import IntegrityError

    data = b"x" * 10
    have = digest_bytes("a.bin", data)
    assert not satisfies(have, FileDigest(10, None, None)), "a size alone vouches for nothing"
    assert satisfies(have, FileDigest(10, None, have.git_oid)) and satisfies(have, FileDigest(10, have.sha256))
    good = json.loads(Manifest(files={"a.bin": have}, step=3).to_json())
    assert Manifest.from_json(json.dumps(good).encode()).step == 3
    bad_docs = {
        "step bool": {**good, "step": True}, "step negative": {**good, "step": -1},
        "step string": {**good, "step": "3"}, "no hash": {**good, "files": {"a.bin": {"size": 10, "sha256": None}}},
        "short sha256": {**good, "files": {"a.bin": {"size": 10, "sha256": "ab"}}},
        "uppercase git oid": {**good, "files": {"a.bin": {"size": 10, "sha256": None, "git_oid": "A" * 40}}},
        "size bool": {**good, "files": {"a.bin": {"size": True, "sha256": have.sha256}}},
        "escaping path": {**good, "files": {"../a.bin": good["files"]["a.bin"]}},
        "control character path": {**good, "files": {"a\n.bin": good["files"]["a.bin"]}},
        "source revision": {**good, "source": {"repo": "o/r", "subfolder": "checkpoint-1", "revision": "x"}},
        "source subfolder": {**good, "source": {"repo": "o/r", "subfolder": "../x", "revision": "a" * 40}},
        "not an object": [1, 2],
        "unknown format": {**good, "format": "ckpt-action/manifest/v999"},
    }
    for why, doc in bad_docs.items():
        with pytest.raises(IntegrityError, match="manifest is unreadable"):
            Manifest.from_json(json.dumps(doc).encode())
            pytest.fail(f"accepted a manifest with a bad {why}")
