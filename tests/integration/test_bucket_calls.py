"""A bucket's calls without HfApi (stores/hub/bucketreads.py, bucketbatch.py): the same answers
and errors as huggingface_hub's methods, and a listing read as a repo's is: bounded, on the
endpoint, every entry checked.

The rewriting proxy (tests/helpers/hostile_proxy.py) in front of a local Hub holding one
pushed checkpoint makes the bucket's tree answer what a broken or hostile Hub would.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import FAST, ckpt, one_line_error
from tests.helpers.hostile_proxy import hostile_fixture, sink_fixture  # noqa: F401 - provide the hostile and sink fixtures

BUCKET = "o/ckpts"
URI = f"hf://buckets/{BUCKET}"
TREE = rf"/api/buckets/{BUCKET}/tree"
TOKEN = "hf_" + "bucket" * 5
HANG = 90  # seconds; a guard far above every bound below


def _env(url, tmp_path, **extra):
    return clean_env(tmp_path, HF_ENDPOINT=url, HF_TOKEN=TOKEN, **{**FAST, **extra})


@pytest.fixture
def bucket_hub(hub_server, hf_client, cli, tmp_path):
    """A local Hub whose bucket holds one complete checkpoint-1, pushed by the CLI."""
    hub = hub_server()
    src = write_checkpoint(tmp_path / "src", ckpt(1))
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--subfolder", "checkpoint-1", "--step", "1",
              env=_env(hub.url, tmp_path))
    assert run.code == 0, run.stderr
    return hub


def test_the_bucket_is_found_through_the_proxy(bucket_hub, hostile, cli, tmp_path):
    """The cases below differ from this one by their rule alone."""
    proxy = hostile(bucket_hub)
    run = cli("latest", "--repo", URI, "--json", env=_env(proxy.url, tmp_path), timeout=HANG)
    assert run.code == 0 and run.json["subfolder"] == "checkpoint-1", run.stdout + run.stderr


def test_an_endless_bucket_listing_stops_at_its_page_bound(bucket_hub, hostile, cli, tmp_path):
    proxy = hostile(bucket_hub)
    proxy.set_rules([{"method": "GET", "path": TREE, "link_next": "endless", "times": -1}])
    run = cli("latest", "--repo", URI, env=_env(proxy.url, tmp_path, CKPT_MAX_LISTING_PAGES="5"), timeout=HANG)
    assert run.code == 1 and run.stdout == "", run.stdout + run.stderr
    assert "CKPT_MAX_LISTING_PAGES" in one_line_error(run.stderr) and "bucket" in one_line_error(run.stderr)
    assert proxy.fired() == 5


def test_a_bucket_listings_next_page_on_another_origin_never_gets_the_token(bucket_hub, hostile, sink, cli,
                                                                            tmp_path):
    proxy = hostile(bucket_hub)
    proxy.set_rules([{"method": "GET", "path": TREE, "link_next": f"{sink.url}/api/buckets/{BUCKET}/tree?cursor=1"}])
    run = cli("latest", "--repo", URI, env=_env(proxy.url, tmp_path), timeout=HANG)
    assert proxy.fired() == 1
    assert sink.requests == [], "a request went to the other origin"
    assert run.code == 1 and "another origin" in one_line_error(run.stderr), run.stdout + run.stderr
    assert TOKEN not in run.stdout + run.stderr


@pytest.mark.parametrize("route", [rf"^/api/buckets/{BUCKET}$", rf"^/api/buckets/{BUCKET}/paths-info$"],
                         ids=["info", "paths-info"])
def test_a_bucket_answer_past_its_bound_is_cut(route, bucket_hub, hostile, cli, tmp_path):
    """The bucket's info (read by a push) and paths-info (by a push, to take an old manifest
    away) are bounded in bytes like a listing page: one line naming the setting."""
    proxy = hostile(bucket_hub)
    proxy.set_rules([{"path": route, "body": json.dumps([{"pad": "x" * 5000}]), "times": -1}])
    src = write_checkpoint(tmp_path / "again", ckpt(1))
    run = cli("push", "--repo", URI, "--local-dir", str(src), "--subfolder", "checkpoint-1", "--step", "1",
              env=_env(proxy.url, tmp_path, CKPT_MAX_LISTING_BYTES="3000"), timeout=HANG)
    assert run.code == 1 and run.stdout == "", run.stdout + run.stderr
    assert "CKPT_MAX_LISTING_BYTES" in one_line_error(run.stderr), run.stderr
    assert proxy.fired() >= 1


@pytest.mark.parametrize("xet", ["\x1b[31m" + "a" * 59, "A" * 64, "a" * 63, 7])
def test_a_bucket_listing_with_a_malformed_xet_hash_is_refused(xet, bucket_hub, hostile, cli, tmp_path):
    """The listing's Xet hash is compared with the manifest's and may end up in a message:
    data from outside, checked like the listed size."""
    proxy = hostile(bucket_hub)
    listed = [{"type": "directory", "path": "checkpoint-1"},
              {"type": "file", "path": "checkpoint-1/w.bin", "size": 3, "xetHash": xet}]
    proxy.set_rules([{"method": "GET", "path": TREE, "body": json.dumps(listed), "times": -1}])
    run = cli("latest", "--repo", URI, env=_env(proxy.url, tmp_path), timeout=HANG)
    assert run.code != 0 and run.stdout == "", run.stdout + run.stderr
    assert "with a malformed Xet hash" in one_line_error(run.stderr)
    assert "\x1b" not in run.stderr


@pytest.mark.parametrize("entry", [{"type": "file", "path": "checkpoint-1/w.bin"}, ["not", "an", "object"],
                                   {"type": "file", "path": 7, "size": 3, "xetHash": "a" * 64},
                                   {"type": "file", "path": "checkpoint-1/w.bin", "size": True, "xetHash": "a" * 64}],
                         ids=["no-size", "a-list", "path-not-text", "size-not-a-number"])
def test_a_malformed_bucket_listing_entry_is_one_line_not_a_traceback(entry, bucket_hub, hostile, cli, tmp_path):
    proxy = hostile(bucket_hub)
    proxy.set_rules([{"method": "GET", "path": TREE, "body": json.dumps([entry]), "times": -1}])
    run = cli("latest", "--repo", URI, env=_env(proxy.url, tmp_path), timeout=HANG)
    assert run.code != 0 and run.stdout == "", run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "malformed" in one_line_error(run.stderr), run.stderr


# Runs the CLI with huggingface_hub's HfApi module and its bucket types unimportable (None in
# sys.modules makes an import fail): the bucket reads need only the shared client (bucketreads.py).
_WITHOUT_HFAPI = """
import sys
sys.modules["huggingface_hub.hf_api"] = sys.modules["huggingface_hub._buckets"] = None
from ckpt_action.cli.app import main
main(sys.argv[1:])
"""


def test_a_bucket_is_read_and_pushed_without_importing_hfapi(bucket_hub, tmp_path):
    """latest, list, a verified pull and a push into an existing bucket never import
    ``HfApi`` nor its bucket types (about 0.15 s of a fresh process, more than a read takes):
    what imports them breaks this test."""
    import subprocess
    import sys

    env = _env(bucket_hub.url, tmp_path)
    pull = ["pull", "--repo", URI, "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "got"), "--json"]
    push = ["push", "--repo", URI, "--local-dir", str(write_checkpoint(tmp_path / "two", ckpt(2))), "--step", "2",
            "--json"]
    for args in (["latest", "--repo", URI, "--json"], ["list", "--repo", URI, "--json"], pull, push):
        proc = subprocess.run([sys.executable, "-c", _WITHOUT_HFAPI, *args], env=env, capture_output=True, text=True,
                              timeout=HANG)
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr}"
        assert json.loads(proc.stdout)
    assert (tmp_path / "got" / "model.safetensors").read_bytes() == ckpt(1)["model.safetensors"]
    found = subprocess.run([sys.executable, "-c", _WITHOUT_HFAPI, "latest", "--repo", URI, "--json"], env=env,
                           capture_output=True, text=True, timeout=HANG)
    assert json.loads(found.stdout)["subfolder"] == "checkpoint-2", found.stderr


def test_the_bucket_reads_answer_what_hfapi_answers(bucket_hub, tmp_path):
    """bucketreads makes HfApi's three bucket reads without it (nor the module of its answer
    types): the same answers, the same error for a missing bucket (the store words it,
    test_latest_missing)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import BucketNotFoundError

    from ckpt_action.settings import Settings
    from ckpt_action.stores.hub import bucketreads
    from ckpt_action.stores.hub.transport import client_headers

    api = HfApi(endpoint=bucket_hub.url, token=TOKEN)
    settings = Settings(bucket_hub.url, token=TOKEN)
    headers = client_headers(bucket_hub.url, TOKEN)

    def seen(entries):  # ours and huggingface_hub's, by what the store reads of them
        return sorted((e.path, getattr(e, "folder", type(e).__name__ == "BucketFolder"), getattr(e, "size", None),
                       getattr(e, "xet_hash", None)) for e in entries)

    for prefix, recursive in ((None, True), (None, False), ("checkpoint-1/", True), ("checkpoint-1/nested/", False)):
        ours = bucketreads.list_bucket_tree(settings, headers, BUCKET, prefix, recursive=recursive, what="listing")
        assert ours and seen(ours) == seen(api.list_bucket_tree(BUCKET, prefix, recursive=recursive)), prefix
    info, theirs = bucketreads.bucket_info(settings, headers, BUCKET), api.bucket_info(BUCKET)
    assert (info["id"], info["private"], info["size"], info["totalFiles"]) == \
        (theirs.id, theirs.private, theirs.size, theirs.total_files)
    paths = [f"checkpoint-1/{name}" for name in ("model.safetensors", "config.json", "missing.bin")]
    assert seen(bucketreads.get_bucket_paths_info(settings, headers, BUCKET, paths)) == \
        seen(api.get_bucket_paths_info(BUCKET, paths))
    for read in (lambda: bucketreads.bucket_info(settings, headers, "o/missing"),
                 lambda: api.bucket_info("o/missing")):
        with pytest.raises(BucketNotFoundError):
            read()


def _theirs(add):
    """The same add as huggingface_hub's own batch takes it."""
    from huggingface_hub._buckets import _BucketAddFile

    theirs = _BucketAddFile(source=add.source, destination=add.destination, xet_hash=add.xet_hash, size=add.size)
    theirs.mtime = add.mtime
    return theirs


def test_the_bucket_batch_does_what_hfapis_does(bucket_hub, tmp_path, monkeypatch):
    """bucketbatch posts what HfApi.batch_bucket_files posts for stored bytes: files added by
    Xet hash, copied, deleted; a refused operation raised as the same BucketBatchError, in
    the same words; a big batch in chunks, copies first, then adds, then deletes."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import BucketBatchError

    from ckpt_action.stores.hub import bucketbatch
    from ckpt_action.stores.hub.bucketbatch import Add, post_batch
    from ckpt_action.stores.hub.transport import client_headers

    api = HfApi(endpoint=bucket_hub.url, token=TOKEN)
    headers = client_headers(bucket_hub.url, TOKEN)
    [weights] = api.get_bucket_paths_info(BUCKET, ["checkpoint-1/model.safetensors"])
    source = write_checkpoint(tmp_path / "w", {"w.bin": b"x"}) / "w.bin"

    def listed(prefix):
        return sorted((f.path.split("/", 1)[1], f.size, f.xet_hash, f.mtime is not None)
                      for f in api.list_bucket_tree(BUCKET, prefix, recursive=True))

    for who, prefix in (("ours", "a"), ("theirs", "b")):
        copy = ("bucket", BUCKET, weights.xet_hash, f"{prefix}/copied.safetensors")
        add = Add(str(source), f"{prefix}/w.safetensors", weights.xet_hash, weights.size)
        if who == "ours":
            post_batch(bucket_hub.url, headers, BUCKET, adds=[add], copies=[copy])
            post_batch(bucket_hub.url, headers, BUCKET, deletes=[f"{prefix}/copied.safetensors"])
        else:
            api.batch_bucket_files(BUCKET, add=[_theirs(add)], copy=[copy])
            api.batch_bucket_files(BUCKET, delete=[f"{prefix}/copied.safetensors"])
    assert listed("a") == listed("b") == [("w.safetensors", weights.size, weights.xet_hash, True)]

    unknown = Add(b"y", "c/unknown.bin", "e" * 64, 1)
    refusals = []
    for send in (lambda: post_batch(bucket_hub.url, headers, BUCKET, adds=[unknown]),
                 lambda: api.batch_bucket_files(BUCKET, add=[_theirs(unknown)])):
        with pytest.raises(BucketBatchError) as refused:
            send()
        refusals.append((str(refused.value).splitlines()[0], refused.value.failures))
    assert refusals[0] == refusals[1] and refusals[0][1], refusals

    posted = []
    real = bucketbatch._post
    monkeypatch.setattr(bucketbatch, "BATCH_CHUNK", 2)
    monkeypatch.setattr(bucketbatch, "_post", lambda *a: posted.append([op["type"] for op in a[3]]) or real(*a))
    adds = [Add(str(source), f"d/{i}.bin", weights.xet_hash, weights.size) for i in range(3)]
    post_batch(bucket_hub.url, headers, BUCKET, adds=adds, copies=[copy], deletes=["a/w.safetensors"])
    assert posted == [["copyFile"], ["addFile", "addFile"], ["addFile"], ["deleteFile"]]
    assert [p for p, *_ in listed("d")] == ["0.bin", "1.bin", "2.bin"] and listed("a") == []
