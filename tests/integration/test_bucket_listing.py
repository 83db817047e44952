"""A bucket's listing is read as a repo's is: bounded, on the endpoint, every entry checked.

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
                                   {"type": "file", "path": "checkpoint-1/w.bin", "size": 3, "xetHash": "a" * 64,
                                    "mtime": "not a time"}], ids=["no-size", "a-list", "bad-mtime"])
def test_a_malformed_bucket_listing_entry_is_one_line_not_a_traceback(entry, bucket_hub, hostile, cli, tmp_path):
    proxy = hostile(bucket_hub)
    proxy.set_rules([{"method": "GET", "path": TREE, "body": json.dumps([entry]), "times": -1}])
    run = cli("latest", "--repo", URI, env=_env(proxy.url, tmp_path), timeout=HANG)
    assert run.code != 0 and run.stdout == "", run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "malformed" in one_line_error(run.stderr), run.stderr


# Runs the CLI with huggingface_hub's HfApi module unimportable (None in sys.modules makes an
# import of it fail): the bucket reads need only the shared client (stores/hub/bucketreads.py).
_WITHOUT_HFAPI = """
import sys
sys.modules["huggingface_hub.hf_api"] = None
from ckpt_action.cli.app import main
main(sys.argv[1:])
"""


def test_a_bucket_is_read_without_importing_hfapi(bucket_hub, tmp_path):
    """latest, list and a verified pull of a bucket never import ``HfApi`` (about 0.09 s of
    a fresh process, more than such a read takes): what imports it breaks this test."""
    import subprocess
    import sys

    env = _env(bucket_hub.url, tmp_path)
    pull = ["pull", "--repo", URI, "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "got"), "--json"]
    for args in (["latest", "--repo", URI, "--json"], ["list", "--repo", URI, "--json"], pull):
        proc = subprocess.run([sys.executable, "-c", _WITHOUT_HFAPI, *args], env=env, capture_output=True, text=True,
                              timeout=HANG)
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr}"
        assert json.loads(proc.stdout)
    assert (tmp_path / "got" / "model.safetensors").read_bytes() == ckpt(1)["model.safetensors"]


def test_the_bucket_reads_answer_what_hfapi_answers(bucket_hub, tmp_path):
    """bucketreads makes HfApi's three bucket reads without it: the same answers, the same
    error for a missing bucket (the store words it, test_latest_missing)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import BucketNotFoundError

    from ckpt_action.settings import Settings
    from ckpt_action.stores.hub import bucketreads
    from ckpt_action.stores.hub.transport import client_headers

    api = HfApi(endpoint=bucket_hub.url, token=TOKEN)
    settings = Settings(bucket_hub.url, token=TOKEN)
    headers = client_headers(bucket_hub.url, TOKEN)

    def seen(entries):
        return sorted((type(e).__name__, e.path, getattr(e, "size", None), getattr(e, "xet_hash", None),
                       getattr(e, "mtime", None), e.uploaded_at) for e in entries)

    for prefix, recursive in ((None, True), (None, False), ("checkpoint-1/", True), ("checkpoint-1/nested/", False)):
        ours = bucketreads.list_bucket_tree(settings, headers, BUCKET, prefix, recursive=recursive, what="listing")
        assert ours and seen(ours) == seen(api.list_bucket_tree(BUCKET, prefix, recursive=recursive)), prefix
    assert vars(bucketreads.bucket_info(bucket_hub.url, headers, BUCKET)) == vars(api.bucket_info(BUCKET))
    paths = [f"checkpoint-1/{name}" for name in ("model.safetensors", "config.json", "missing.bin")]
    assert seen(bucketreads.get_bucket_paths_info(bucket_hub.url, headers, BUCKET, paths)) == \
        seen(api.get_bucket_paths_info(BUCKET, paths))
    for read in (lambda: bucketreads.bucket_info(bucket_hub.url, headers, "o/missing"),
                 lambda: api.bucket_info("o/missing")):
        with pytest.raises(BucketNotFoundError):
            read()
