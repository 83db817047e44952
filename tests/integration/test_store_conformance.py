"""One contract, every store: the model repo and the Storage Bucket on the local Hub, each
also under the local Hub's fault injection (one transient failure at each kind of request a
command makes: a listing, a write, a file's bytes), through the CLI in process.

What every store must hold (CONTRIBUTING.md, "Adding a store": a store is done when it
passes this module):

- a push is complete or invisible at every interruption point (each write request failing
  in turn): ``latest`` keeps answering the last complete checkpoint, ``list`` never says the
  cut folder is complete, and the push run again completes it;
- the one verdict (:mod:`ckpt_action.checkpoint.verdict`) answers alike through ``list``,
  ``latest`` and ``pull`` on torn, overwritten, missing, extra, same-size-other-bytes and
  older-format folders;
- a pin outlives an overwrite (a repo: the commit still holds the bytes) or refuses it (a
  bucket: "overwritten since it was pinned"), never hands over other bytes;
- prune's keep rules count only complete checkpoints: a broken folder is never kept as
  best, and never costs a complete one its place;
- promote, within the store and across stores, copies only bytes whose identity the
  verdict confirmed (an older manifest on a bucket: read and checked first);
- ``latest``'s requests do not grow with the folders below the newest complete one, and
  a listing past its bound is refused naming the setting.

One local Hub per store kind per module (the fixtures below); each test writes its own
repo or bucket, and the faults are armed just before each command under test, so the
test's own setup (through huggingface_hub directly) never meets them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete, HfApi

from tests.conftest import clean_env, read_tree, write_checkpoint
from tests.helpers.localhub_fixtures import TOKEN, InProcessHub

MANIFEST = "ckpt-manifest.json"
KINDS = ["repo", "bucket"]
STORES = ["repo", "bucket", "repo-faults", "bucket-faults"]

# One transient failure at each kind of request a command makes; every command must still
# answer exactly what it answers without them (the retries are the client's own).
TRANSIENT = {
    "repo": [
        {"method": "GET", "path": r"^/api/models/[^/]+/[^/]+/(tree|revision)/", "status": 503, "times": 1},
        {"method": "POST", "path": r"^/api/models/[^/]+/[^/]+/commit/", "status": 500, "times": 1},
        {"method": "GET", "path": r"/resolve/", "reset": 5, "times": 1},
    ],
    "bucket": [
        {"method": "GET", "path": r"^/api/buckets/[^/]+/[^/]+/tree", "status": 503, "times": 1},
        {"method": "POST", "path": r"^/api/buckets/[^/]+/[^/]+/batch$", "status": 500, "times": 1},
        {"method": "GET", "path": r"^/buckets/[^/]+/[^/]+/resolve/", "reset": 5, "times": 1},
    ],
}


@pytest.fixture(scope="module")
def hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, InProcessHub]]:
    """One local Hub per store kind for the whole module (starting one costs little, but
    every test sharing it keeps the module fast); each test names its own repo or bucket."""
    started = {kind: InProcessHub(tmp_path_factory.mktemp(f"hub-{kind}"), token=TOKEN) for kind in KINDS}
    yield started
    for hub in started.values():
        hub.stop()


@dataclass
class StoreUnderTest:
    """One store of one kind on its Hub: the CLI against it, and what a test does to its
    folders behind the CLI's back (through huggingface_hub, faults off)."""

    kind: str
    faults: bool
    hub: InProcessHub
    cli: Any
    tmp: Path
    name: str
    api: HfApi = field(init=False)
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.api = HfApi(endpoint=self.hub.url, token=TOKEN)
        self.env = clean_env(self.tmp, HF_ENDPOINT=self.hub.url, HF_TOKEN=TOKEN, CKPT_RETRIES="4")
        self.uri = f"hf://buckets/{self.name}" if self.kind == "bucket" else self.name

    # ------------------------------------------------------------------ the CLI, faults armed

    def run(self, *args: str, faults: bool | None = None, **extra: str) -> Any:
        armed = self.faults if faults is None else faults
        self.hub.set_faults(TRANSIENT[self.kind] if armed else [])
        try:
            return self.cli(*args, env={**self.env, **extra})
        finally:
            self.hub.set_faults([])

    def push(self, step: int, files: dict[str, bytes] | None = None, *, metric: str | None = None,
             **extra: str) -> Any:
        files = files or checkpoint_files(step)
        src = write_checkpoint(self.tmp / f"src-{step}-{uuid.uuid4().hex[:6]}", files)
        args = ["push", "--repo", self.uri, "--local-dir", str(src), "--step", str(step), "--json"]
        return self.run(*args, *(["--metric", metric] if metric else []), **extra)

    def pushed(self, step: int, files: dict[str, bytes] | None = None, *, metric: str | None = None) -> dict:
        done = self.push(step, files, metric=metric)
        assert done.code == 0, done.stderr
        return done.json

    def latest(self, *extra: str) -> Any:
        return self.run("latest", "--repo", self.uri, "--json", *extra)

    def listing(self) -> dict[str, dict]:
        done = self.run("list", "--repo", self.uri, "--json")
        assert done.code == 0, done.stderr
        return {row["subfolder"]: row for row in done.json["checkpoints"]}

    # ------------------------------------------------------------------ behind the CLI's back

    def put(self, files: dict[str, bytes]) -> None:
        if self.kind == "bucket":
            self.api.batch_bucket_files(self.name, add=[(data, path) for path, data in files.items()])
        else:
            self.api.create_commit(self.name, [CommitOperationAdd(p, d) for p, d in files.items()],
                                   commit_message="behind the CLI's back")

    def delete(self, *paths: str) -> None:
        if self.kind == "bucket":
            self.api.batch_bucket_files(self.name, delete=list(paths))
        else:
            self.api.create_commit(self.name, [CommitOperationDelete(p) for p in paths], commit_message="delete")

    def copy_folder(self, src: str, dsts: list[str], *, without: str | None = None) -> None:
        """Copy ``src``'s files into each of ``dsts`` server-side (many folders, few bytes)."""
        if self.kind == "bucket":
            listed = [f for f in self.api.list_bucket_tree(self.name, f"{src}/", recursive=True)]
            copies = [("bucket", self.name, f.xet_hash, f.path.replace(f"{src}/", f"{dst}/", 1))
                      for dst in dsts for f in listed if not (without and f.path.endswith(without))]
            self.api.batch_bucket_files(self.name, copy=copies)
            return
        listed = [f.path for f in self.api.list_repo_tree(self.name, src, recursive=True)
                  if not hasattr(f, "tree_id")]
        ops = [CommitOperationCopy(p, p.replace(f"{src}/", f"{dst}/", 1)) for dst in dsts for p in listed
               if not (without and p.endswith(without))]
        self.api.create_commit(self.name, ops, commit_message="copies")

    def read(self, path: str) -> bytes:
        dest = self.tmp / "read" / uuid.uuid4().hex
        dest.parent.mkdir(parents=True, exist_ok=True)
        if self.kind == "bucket":
            self.api.download_bucket_files(self.name, [(path, str(dest))])
            return dest.read_bytes()
        return Path(self.api.hf_hub_download(self.name, path, local_dir=dest)).read_bytes()

    def older_format(self, folder: str) -> None:
        """Rewrite ``folder``'s manifest as one written before Xet hashes were recorded."""
        doc = json.loads(self.read(f"{folder}/{MANIFEST}"))
        for entry in doc["files"].values():
            entry.pop("xet", None)
        self.put({f"{folder}/{MANIFEST}": (json.dumps(doc, indent=2) + "\n").encode()})

    def paths(self, folder: str) -> list[str]:
        if self.kind == "bucket":
            return sorted(f.path for f in self.api.list_bucket_tree(self.name, f"{folder}/", recursive=True))
        try:
            return sorted(f.path for f in self.api.list_repo_tree(self.name, folder, recursive=True)
                          if not hasattr(f, "tree_id"))
        except Exception:  # the folder does not exist
            return []


def checkpoint_files(step: int, size: int = 40_000, salt: bytes = b"") -> dict[str, bytes]:
    seed = os.urandom(16) if salt == b"random" else bytes([step % 256]) * 16 + salt
    return {"model.safetensors": (seed * (size // len(seed) + 1))[:size],
            "config.json": json.dumps({"step": step}).encode()}


def _errors(stderr: str) -> list[str]:
    """The error lines (a retried fault adds warnings, which are not the error)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def other_bytes_same_size(data: bytes) -> bytes:
    return bytes(b ^ 0x5A for b in data)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, hubs: dict[str, InProcessHub], xet_client: Path, cli: Any,
          tmp_path: Path) -> StoreUnderTest:
    kind, _, faults = request.param.partition("-")
    name = f"local-user/c-{uuid.uuid4().hex[:10]}"
    return StoreUnderTest(kind, bool(faults), hubs[kind], cli, tmp_path, name)


@pytest.fixture(params=KINDS)
def bare(request: pytest.FixtureRequest, hubs: dict[str, InProcessHub], xet_client: Path, cli: Any,
         tmp_path: Path) -> StoreUnderTest:
    """A store without transient faults: for a test whose faults are its subject."""
    return StoreUnderTest(request.param, False, hubs[request.param], cli, tmp_path,
                          f"local-user/c-{uuid.uuid4().hex[:10]}")


# ---------------------------------------------------------------------------- complete or invisible


WRITES = r"^/api/(models|buckets)/|^/v1/(xorbs|shards)"


def test_a_push_is_complete_or_invisible_at_every_interruption_point(bare: StoreUnderTest) -> None:
    """Each write request of a push fails in turn (the k-th and every one after it, no
    retries): after each cut, latest still answers checkpoint-1 and list never calls
    checkpoint-2 complete; the push run again completes it."""
    s = bare
    first = s.pushed(1)
    cut_at = 0
    for k in range(1, 40):
        passed = [{"method": "POST", "path": WRITES, "delay_s": 0, "times": k - 1}] if k > 1 else []
        s.hub.set_faults([*passed, {"method": "POST", "path": WRITES, "status": 500, "times": -1}])
        try:
            src = write_checkpoint(s.tmp / f"cut-{k}", checkpoint_files(2))
            done = s.cli("push", "--repo", s.uri, "--local-dir", str(src), "--step", "2", "--json",
                         env={**s.env, "CKPT_RETRIES": "0", "HF_XET_CLIENT_RETRY_MAX_ATTEMPTS": "0"})
        finally:
            s.hub.set_faults([])
        if done.code == 0:
            break
        cut_at += 1
        found = s.latest()
        assert found.code == 0 and found.json["subfolder"] == "checkpoint-1", (k, found.stderr)
        assert found.json["revision"] == first["revision"]
        row = s.listing().get("checkpoint-2")
        assert row is None or row["complete"] is False, (k, row)
    else:
        pytest.fail("the push never got through")
    assert cut_at >= 2, "fewer than two interruption points: the test cut nothing"
    assert s.latest().json["subfolder"] == "checkpoint-2"


# ---------------------------------------------------------------------------- the verdict


def test_the_verdict_on_torn_overwritten_missing_extra_same_size_and_older_folders(store: StoreUnderTest) -> None:
    s = store
    good = s.pushed(1)
    for step in range(2, 9):
        s.pushed(step)
    big = checkpoint_files(3)["model.safetensors"]
    s.delete(f"checkpoint-8/{MANIFEST}")  # torn: cut before its manifest
    s.put({"checkpoint-7/model.safetensors": big[:100]})  # overwritten, another size
    s.delete("checkpoint-6/config.json")  # missing
    s.put({"checkpoint-5/extra.bin": b"not the checkpoint's"})  # extra
    s.put({"checkpoint-4/model.safetensors": other_bytes_same_size(checkpoint_files(4)["model.safetensors"])})
    s.older_format("checkpoint-3")  # older format, untouched: still a checkpoint
    s.older_format("checkpoint-2")  # older format, then the same size with other bytes
    s.put({"checkpoint-2/model.safetensors": other_bytes_same_size(checkpoint_files(2)["model.safetensors"])})

    rows = s.listing()
    expected = {"checkpoint-8": "manifest", "checkpoint-7": "model.safetensors", "checkpoint-6": "config.json",
                "checkpoint-5": "extra.bin", "checkpoint-4": "model.safetensors"}
    for name, word in expected.items():
        assert rows[name]["complete"] is False and word in rows[name]["problem"], rows[name]
    assert rows["checkpoint-3"]["complete"] is True and rows["checkpoint-1"]["complete"] is True
    found = s.latest()
    assert found.code == 0 and found.json["subfolder"] == "checkpoint-3", found.stderr
    skipped = "\n".join(found.stderr.splitlines())
    for name in expected:
        assert f"skipped {name}" in skipped, found.stderr
    for name in [*expected, "checkpoint-2"]:
        dest = s.tmp / f"pull-{name}"
        got = s.run("pull", "--repo", s.uri, "--subfolder", name, "--local-dir", str(dest))
        assert got.code == 1, (name, got.stdout, got.stderr)
        assert len(_errors(got.stderr)) == 1, got.stderr
        assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*")), name
    pulled = s.run("pull", "--repo", s.uri, "--subfolder", "checkpoint-3", "--local-dir", str(s.tmp / "p3"),
                   "--json")
    assert pulled.code == 0, pulled.stderr
    tree = read_tree(s.tmp / "p3")
    tree.pop(MANIFEST)
    assert tree == checkpoint_files(3)
    assert good["subfolder"] == "checkpoint-1"


def test_a_pin_outlives_an_overwrite_or_refuses_it(store: StoreUnderTest) -> None:
    s = store
    pinned = s.pushed(1)
    files = checkpoint_files(1)
    s.put({"checkpoint-1/model.safetensors": other_bytes_same_size(files["model.safetensors"])})
    dest = s.tmp / "pinned"
    got = s.run("pull", "--repo", s.uri, "--subfolder", "checkpoint-1", "--revision", pinned["revision"],
                "--local-dir", str(dest), "--json")
    if got.code == 0:  # the pin still holds the bytes it named
        tree = read_tree(dest)
        tree.pop(MANIFEST)
        assert tree == files
        assert s.kind == "repo", "a bucket has no history: its pin cannot outlive an overwrite"
    else:
        assert got.code == 1 and "overwritten since it was pinned" in got.stderr, got.stderr
        assert not dest.exists()


# ---------------------------------------------------------------------------- prune's keep rules


def test_prune_never_keeps_a_broken_folder_as_best_nor_deletes_the_best_complete_one(store: StoreUnderTest) -> None:
    """Round five: checkpoint-2, the best by its manifest, has a file overwritten after the
    manifest was written. keep-best keeps checkpoint-3, the best complete one, and latest
    --best still answers it afterwards."""
    s = store
    for step, loss in [(1, "0.5"), (2, "0.1"), (3, "0.3"), (4, "0.9")]:
        s.pushed(step, metric=f"eval_loss={loss}")
    s.put({"checkpoint-2/model.safetensors": other_bytes_same_size(checkpoint_files(2)["model.safetensors"])})
    run = s.run("prune", "--repo", s.uri, "--keep-best", "eval_loss:min", "--json")
    assert run.code == 0, run.stderr
    kept = {r["subfolder"]: r["reason"] for r in run.json["kept_reasons"]}
    assert "checkpoint-3" in kept and "best 1" in kept["checkpoint-3"], kept
    assert "best" not in kept.get("checkpoint-2", ""), kept
    assert "checkpoint-3" not in run.json["deleted"] and s.paths("checkpoint-3")
    best = s.latest("--best", "eval_loss:min")
    assert best.code == 0 and best.json["subfolder"] == "checkpoint-3", best.stdout + best.stderr


def test_keep_last_counts_complete_checkpoints_only(store: StoreUnderTest) -> None:
    """A broken folder never takes a complete one's place in keep-last: with checkpoint-3
    broken, keep-last 2 keeps checkpoint-2 and checkpoint-4; the broken one, older than the
    latest complete checkpoint, is deleted (an incomplete folder is kept only while it is
    newer than every complete checkpoint kept: a push may still be finishing it)."""
    s = store
    for step in (1, 2, 3, 4):
        s.pushed(step)
    s.pushed(5)
    s.delete(f"checkpoint-5/{MANIFEST}")  # the newest, cut short
    s.put({"checkpoint-3/model.safetensors": b"short"})
    run = s.run("prune", "--repo", s.uri, "--keep-last", "2", "--json", "--dry-run")
    assert run.code == 0, run.stderr
    assert sorted(run.json["deleted"]) == ["checkpoint-1", "checkpoint-3"], run.json
    kept = {r["subfolder"]: r["reason"] for r in run.json["kept_reasons"]}
    assert "among the last 2" in kept["checkpoint-2"] and "among the last 2" in kept["checkpoint-4"], kept
    assert "not complete" in kept["checkpoint-5"], kept
    every = s.run("prune", "--repo", s.uri, "--keep-every", "3", "--keep-last", "1", "--json")
    assert every.code == 0, every.stderr
    assert "checkpoint-3" in every.json["deleted"] and "checkpoint-4" not in every.json["deleted"], every.json
    assert s.paths("checkpoint-4") and not s.paths("checkpoint-3")


# ---------------------------------------------------------------------------- promote


def _other(s: StoreUnderTest) -> str:
    """A store of the other kind on the same Hub (promote across stores)."""
    name = f"local-user/t-{uuid.uuid4().hex[:10]}"
    if s.kind == "bucket":
        s.api.create_repo(name, private=True)
        return name
    s.api.create_bucket(name, private=True)
    return f"hf://buckets/{name}"


def test_promote_within_and_across_stores(store: StoreUnderTest) -> None:
    s = store
    pushed = s.pushed(1)
    within = s.run("promote", "--repo", s.uri, "--subfolder", "checkpoint-1", "--revision", pushed["revision"],
                   "--to", "release/v1", "--json")
    assert within.code == 0, within.stderr
    target = _other(s)
    across = s.run("promote", "--repo", s.uri, "--subfolder", "checkpoint-1", "--revision", pushed["revision"],
                   "--to", "release", "--to-repo", target, "--json")
    assert across.code == 0, across.stderr
    for repo, folder, pin in [(s.uri, "release/v1", within.json["revision"]),
                              (target, "release", across.json["revision"])]:
        dest = s.tmp / f"rel-{uuid.uuid4().hex[:6]}"
        got = s.run("pull", "--repo", repo, "--subfolder", folder, "--revision", pin, "--local-dir", str(dest))
        assert got.code == 0, got.stderr
        tree = read_tree(dest)
        tree.pop(MANIFEST)
        assert tree == checkpoint_files(1)
    assert s.listing()["release/v1"]["complete"] is True


def test_promote_copies_only_bytes_the_verdict_confirmed(store: StoreUnderTest) -> None:
    """Round five: an older manifest (no Xet hashes) pinned, then the same size with other
    bytes written under it: promote within the store refuses in one line (on a bucket, whose
    listing then vouches only for sizes, after reading the bytes), and writes nothing."""
    s = store
    s.pushed(1)
    s.older_format("checkpoint-1")
    pin = s.latest().json["revision"]
    s.put({"checkpoint-1/model.safetensors": other_bytes_same_size(checkpoint_files(1)["model.safetensors"])})
    run = s.run("promote", "--repo", s.uri, "--subfolder", "checkpoint-1", "--to", "release", "--json",
                *(["--revision", pin] if s.kind == "bucket" else []))
    assert run.code != 0, run.stdout
    assert len(_errors(run.stderr)) == 1, run.stderr
    assert not s.paths("release")
    assert "release" not in s.listing()


# ---------------------------------------------------------------------------- bounds and request counts


def _answered(entries: list[dict]) -> list[dict]:
    """The requests that got an answer (a retried fault leaves one more line)."""
    return [e for e in entries if isinstance(e["status"], int) and e["status"] < 500]


def test_latest_costs_the_same_requests_over_many_folders_and_a_listing_is_bounded(store: StoreUnderTest) -> None:
    s = store
    s.pushed(1000)
    start = len(s.hub.log_entries())
    alone = s.latest()
    assert alone.code == 0, alone.stderr
    one = len(_answered([e for e in s.hub.log_entries()[start:] if s.name in e["path"]]))
    s.copy_folder("checkpoint-1000", [f"checkpoint-{n}" for n in range(1, 200)])
    start = len(s.hub.log_entries())
    many = s.latest()
    assert many.code == 0 and many.json["subfolder"] == "checkpoint-1000", many.stderr
    assert len(_answered([e for e in s.hub.log_entries()[start:] if s.name in e["path"]])) == one
    bounded = s.run("list", "--repo", s.uri, CKPT_MAX_LISTING_ENTRIES="100")
    assert bounded.code == 1 and "CKPT_MAX_LISTING_ENTRIES" in bounded.stderr, bounded.stderr
