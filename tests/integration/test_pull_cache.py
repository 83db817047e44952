"""The content cache: each distinct file crosses the network once, never served unverified,
never shared between pulled dirs, trimmed to its size least recently used first."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.helpers.chaos_helpers import ckpt, listing, one_line_error
from tests.helpers.pull_helpers import Puller, pulled

BIG = 300_000


@pytest.fixture
def puller(hub_server, hf_client, cli, tmp_path):
    return Puller(hub_server(), cli, tmp_path)


def _entry(cache, data: bytes):
    sha = hashlib.sha256(data).hexdigest()
    return cache / "sha256" / sha[:2] / sha


def test_a_second_dir_is_filled_from_the_cache_by_copy(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    cache = tmp_path / "cache"
    a, b = tmp_path / "a", tmp_path / "b"
    first = puller("checkpoint-1", a, "--cache-dir", str(cache))
    assert first.code == 0 and len(first.gets) == 3, first.stderr
    entry = _entry(cache, files["model.safetensors"])
    assert entry.read_bytes() == files["model.safetensors"]
    second = puller("checkpoint-1", b, "--cache-dir", str(cache))
    assert second.code == 0, second.stderr
    assert second.gets == {} and second.json["cached_files"] == 3 and second.json["downloaded_bytes"] == 0
    assert pulled(b) == files
    ino_a, ino_b = ((d / "model.safetensors").stat().st_ino for d in (a, b))
    assert entry.stat().st_ino not in (ino_a, ino_b), "the cache stores copies: it never shares a pulled inode"
    assert ino_b != ino_a, "the cache hands out copies: pulled dirs never share an inode"


def test_the_cache_dir_comes_from_the_environment_too(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    env = dict(puller.env, CKPT_CACHE_DIR=str(tmp_path / "cache"))
    assert puller("checkpoint-1", tmp_path / "a", env=env).code == 0
    run = puller("checkpoint-1", tmp_path / "b", env=env)
    assert run.code == 0 and run.gets == {} and pulled(tmp_path / "b") == files


def test_a_damaged_entry_is_detected_downloaded_and_replaced(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    cache = tmp_path / "cache"
    a = tmp_path / "a"
    assert puller("checkpoint-1", a, "--cache-dir", str(cache)).code == 0
    # The cache is local disk, not trusted: its entry is damaged in place.
    entry = _entry(cache, files["model.safetensors"])
    with open(entry, "r+b") as fh:
        fh.seek(10)
        fh.write(b"XXXX")
    assert entry.read_bytes() != files["model.safetensors"], "the setup did not damage the entry"
    assert pulled(a) == files, "the damage reached a pulled dir: they share an inode"
    b = tmp_path / "b"
    run = puller("checkpoint-1", b, "--cache-dir", str(cache))
    assert run.code == 0, run.stderr
    assert set(run.gets) == {"checkpoint-1/model.safetensors"}, run.gets
    assert pulled(b) == files, "a damaged entry is never served"
    assert entry.read_bytes() == files["model.safetensors"], "the entry now holds the verified bytes"
    # A job writes into its pulled file in place: that file is now the user's (an edit),
    # which only --force overwrites, from the cache.
    with open(a / "model.safetensors", "r+b") as fh:
        fh.seek(10)
        fh.write(b"XXXX")
    assert entry.read_bytes() == files["model.safetensors"], "an edit of a pulled file reached the cache"
    assert puller("checkpoint-1", a, "--cache-dir", str(cache)).code == 2
    again = puller("checkpoint-1", a, "--cache-dir", str(cache), "--force")
    assert again.code == 0 and again.gets == {} and again.json["cached_files"] == 1, again.stderr
    assert pulled(a) == files


def test_the_cache_is_trimmed_least_recently_used_first(puller, tmp_path):
    blobs = {step: os.urandom(BIG) for step in (1, 2, 3)}
    for step, blob in blobs.items():
        puller.seed(f"checkpoint-{step}", {"model.safetensors": blob}, step=step)
    cache = tmp_path / "cache"
    env = dict(puller.env, CKPT_CACHE_MAX_SIZE=str(int(2.5 * BIG)))
    for step in (1, 2, 3):
        run = puller(f"checkpoint-{step}", tmp_path / "d", "--cache-dir", str(cache), env=env)
        assert run.code == 0, run.stderr
    kept = {step for step, blob in blobs.items() if _entry(cache, blob).exists()}
    assert kept == {2, 3}, kept
    total = sum(p.stat().st_size for p in (cache / "sha256").rglob("*") if p.is_file())
    assert total <= 2.5 * BIG
    # Using an entry makes it recent: 2 is read again, so 3 is the one to go next.
    assert puller("checkpoint-2", tmp_path / "e", "--cache-dir", str(cache), env=env).gets == {}
    assert puller("checkpoint-1", tmp_path / "f", "--cache-dir", str(cache), env=env).code == 0
    kept = {step for step, blob in blobs.items() if _entry(cache, blob).exists()}
    assert kept == {1, 2}, kept


def test_a_cache_that_fails_costs_a_warning_never_the_pull(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "sha256").write_bytes(b"not a dir")  # every store and lookup below it fails
    run = puller("checkpoint-1", tmp_path / "a", "--cache-dir", str(cache))
    assert run.code == 0, run.stderr
    assert pulled(tmp_path / "a") == files and len(run.gets) == 3
    assert "could not add" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(("extra", "env", "words"), [
    (["--cache-dir", "{dest}/cache"], {}, "overlaps"),
    (["--cache-dir", "{afile}"], {}, "not a directory"),
    ([], {"CKPT_CACHE_DIR": "{tmp}/c", "CKPT_CACHE_MAX_SIZE": "lots"}, "not a size"),
], ids=["inside-target", "a-file", "bad-size"])
def test_bad_cache_settings_exit_2_before_any_request(extra, env, words, puller, tmp_path):
    (tmp_path / "afile").write_bytes(b"x")
    fmt = {"dest": str(tmp_path / "dest"), "afile": str(tmp_path / "afile"), "tmp": str(tmp_path)}
    before = listing(tmp_path)
    start = len(puller.hub.log_entries())
    run = puller("checkpoint-1", tmp_path / "dest", *[a.format(**fmt) for a in extra],
                 env=dict(puller.env, **{k: v.format(**fmt) for k, v in env.items()}))
    assert run.code == 2 and words in one_line_error(run.stderr)
    assert len(puller.hub.log_entries()) == start and listing(tmp_path) == before


@pytest.mark.process("reads the pull's peak memory (VmHWM of its process)")
@pytest.mark.slow
def test_memory_stays_bounded_whatever_the_source(puller, tmp_path):
    """A 256 MiB file downloaded, re-hashed after a touch, and copied from the cache: the
    process's peak RSS stays far below the file (buffers are reused, never the whole file)."""
    import subprocess
    import sys

    from tests.conftest import ENTRYPOINT

    size = 256 * 2**20
    big = tmp_path / "seed-src" / "model.safetensors"
    big.parent.mkdir()
    with open(big, "wb") as fh:
        block = os.urandom(2**20)
        for i in range(size // len(block)):
            fh.write(i.to_bytes(8, "little") + block[8:])
    from huggingface_hub import CommitOperationAdd, HfApi

    from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, digest_files, scan_dir

    api = HfApi(endpoint=puller.hub.url)
    api.create_repo("o/r", exist_ok=True)
    manifest = Manifest(files=digest_files(scan_dir(big.parent)), step=1)
    api.create_commit("o/r", operations=[CommitOperationAdd("checkpoint-1/model.safetensors", str(big)),
                                         CommitOperationAdd(f"checkpoint-1/{MANIFEST_NAME}", manifest.to_json())],
                      commit_message="big")
    # The peak RSS of this process image: VmHWM starts anew at exec, whereas getrusage's
    # ru_maxrss carries over the parent's peak (a test worker that trained a model is big).
    # Printed by an exit handler: the process ends without tearing Python down, after them.
    wrapper = ("import atexit, os, runpy, sys\n"
               "sys.argv = sys.argv[1:]\n"
               "sys.path.insert(0, os.path.dirname(sys.argv[0]))\n"
               "def peak():\n"
               "    hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]\n"
               "    print('peak-rss-kib', hwm, file=sys.stderr)\n"
               "atexit.register(peak)\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")

    def peak(dest, *extra):
        proc = subprocess.run([sys.executable, "-c", wrapper, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder",
                               "checkpoint-1", "--local-dir", str(dest), "--json", *extra], env=puller.env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        kib = int(proc.stderr.rsplit("peak-rss-kib", 1)[1].split()[0])
        return kib * 1024, json.loads(proc.stdout.strip().splitlines()[-1])

    cache = str(tmp_path / "cache")
    rss, out = peak(tmp_path / "a", "--cache-dir", cache)
    assert out["downloaded_bytes"] == size and rss < 200 * 2**20, f"download: {rss / 2**20:.0f} MiB"
    os.utime(tmp_path / "a" / "model.safetensors")
    rss, out = peak(tmp_path / "a")
    assert out["reused_files"] == 1 and rss < 200 * 2**20, f"re-hash: {rss / 2**20:.0f} MiB"
    rss, out = peak(tmp_path / "b", "--cache-dir", cache)
    assert out["cached_files"] == 1 and rss < 200 * 2**20, f"cache fill: {rss / 2**20:.0f} MiB"
