"""What a pull learned once it does not work out again: counted, in requests in the local
Hub's access log and in bytes this process read (``/proc/self/io`` rchar).

- a pull that chose its checkpoint with latest reads that folder's manifest once (latest
  read it to choose; the pull takes those bytes);
- a verified pull reads ``model.sig`` (and the signed statement) once and checks the
  signature once;
- a re-pull over files whose bytes are unchanged but whose mtime changed (a restore from a
  cache) reads each of them once: the API's look at the target hashes it, and the pull
  under the lock and its reuse take that digest while the file's stat holds. A record whose
  mark does not verify still has every kept file hashed: once.

The Hub runs in its own process, so its reads are not counted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ckpt_action as ckpt
from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import env_for, seed
from tests.helpers.procio import needs_proc_io, read_so_far
from tests.helpers.signing_helpers import make_key

BIG = 4 * 1024 * 1024  # far above what a listing, a manifest and a record take


def _gets(entries: list[dict], name: str) -> int:
    """GETs of ``name`` (a path in the repo) through /resolve."""
    return sum(1 for e in entries if e["method"] == "GET" and "/resolve/" in e["path"]
               and e["path"].split("?", 1)[0].endswith("/" + name))


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def two_checkpoints(hub, tmp_path):
    seed(hub.url, "o/r", "checkpoint-1", {"config.json": b'{"step": 1}'}, tmp_path / "seeds", step=1)
    seed(hub.url, "o/r", "checkpoint-2", {"config.json": b'{"step": 2}', "model.safetensors": b"w" * 5000},
         tmp_path / "seeds", step=2)
    return hub


# --------------------------------------------------------------------------- latest, then pull


def test_a_pull_through_the_api_with_latest_reads_the_chosen_manifest_once(two_checkpoints, tmp_path):
    hub = two_checkpoints
    hub.mark()
    res = ckpt.Client(hub.url, retries=0).pull("o/r", tmp_path / "d", latest=True)
    log = hub.since_mark()
    assert res.handle.subfolder == "checkpoint-2" and (tmp_path / "d" / "model.safetensors").exists()
    assert _gets(log, "checkpoint-2/ckpt-manifest.json") == 1, [e["path"] for e in log]


def test_a_pull_of_the_handle_latest_answered_reads_its_manifest_once(two_checkpoints, tmp_path):
    """``ckpt.pull(ckpt.latest(repo), dest)``: the handle latest answered carries what latest
    read of its folder (at that SHA, which never changes) down to the pull."""
    hub = two_checkpoints
    hub.mark()
    found = ckpt.latest("o/r", endpoint=hub.url, retries=0)
    path = ckpt.pull(found, tmp_path / "d", endpoint=hub.url, retries=0)
    log = hub.since_mark()
    assert found is not None and found.subfolder == "checkpoint-2" and (path / "model.safetensors").exists()
    assert _gets(log, "checkpoint-2/ckpt-manifest.json") == 1, [e["path"] for e in log]


def test_a_handle_rebuilt_from_its_fields_is_read_again(two_checkpoints, tmp_path):
    """What rides along is the handle's own: an equal handle built elsewhere (a pointer, a
    log) reads the manifest itself."""
    hub = two_checkpoints
    found = ckpt.latest("o/r", endpoint=hub.url, retries=0)
    assert found is not None
    hub.mark()
    again = ckpt.CheckpointHandle(found.repo, found.subfolder, found.revision, found.step, found.endpoint)
    ckpt.pull(again, tmp_path / "d", endpoint=hub.url, retries=0)
    assert _gets(hub.since_mark(), "checkpoint-2/ckpt-manifest.json") == 1


def test_pull_latest_on_the_command_line_reads_the_chosen_manifest_once(two_checkpoints, cli, tmp_path):
    hub = two_checkpoints
    hub.mark()
    run = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "d"), "--json",
              env=env_for(hub, tmp_path))
    log = hub.since_mark()
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-2"
    assert _gets(log, "checkpoint-2/ckpt-manifest.json") == 1, [e["path"] for e in log]


def test_resume_from_hub_reads_the_chosen_manifest_once(two_checkpoints, tmp_path):
    pytest.importorskip("transformers", reason="resume_from_hub needs the [transformers] extra")
    from ckpt_action.integrations.transformers import resume_from_hub

    hub = two_checkpoints
    hub.mark()
    path = resume_from_hub("o/r", tmp_path / "out", endpoint=hub.url, retries=0)
    log = hub.since_mark()
    assert path == str(tmp_path / "out" / "checkpoint-2")
    assert _gets(log, "checkpoint-2/ckpt-manifest.json") == 1, [e["path"] for e in log]


# --------------------------------------------------------------------------- a verified pull


def test_a_verified_pull_with_latest_reads_and_checks_the_signature_once(hub, tmp_path, monkeypatch):
    from ckpt_action.ops import signatures

    key = make_key(tmp_path)
    src = write_checkpoint(tmp_path / "src", {"config.json": b'{"step": 3}', "model.safetensors": b"w" * 5000})
    ckpt.push(src, "o/r", step=3, signing_key=key.private, endpoint=hub.url, retries=0)
    checks = []
    real = signatures.check_before_download

    def counted(*args, **kwargs):
        checks.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(signatures, "check_before_download", counted)
    hub.mark()
    res = ckpt.Client(hub.url, retries=0).pull("o/r", tmp_path / "d", latest=True,
                                              verification=ckpt.Verification(verify_key=key.public))
    log = hub.since_mark()
    assert res.signature_verified and res.provenance is not None
    assert res.handle.subfolder == "checkpoint-3"
    seen = {name: _gets(log, f"checkpoint-3/{name}")
            for name in ("model.sig", "ckpt-provenance.json", "ckpt-manifest.json")}
    assert seen == {"model.sig": 1, "ckpt-provenance.json": 1, "ckpt-manifest.json": 1}, [e["path"] for e in log]
    assert len(checks) == 1, f"the signature was checked {len(checks)} times"
    assert (tmp_path / "d" / "model.sig").exists() and (tmp_path / "d" / "ckpt-provenance.json").exists()


def test_a_verified_pull_of_the_handle_a_verified_latest_answered_checks_the_signature_once(hub, tmp_path,
                                                                                           monkeypatch):
    """``ckpt.pull(ckpt.latest(repo, verify_key=k), dest, verify_key=k)``: the same check
    latest made of that folder is not made again; another check (here none at latest) is."""
    from ckpt_action.ops import signatures

    key = make_key(tmp_path)
    src = write_checkpoint(tmp_path / "src", {"config.json": b'{"step": 3}', "model.safetensors": b"w" * 5000})
    ckpt.push(src, "o/r", step=3, signing_key=key.private, endpoint=hub.url, retries=0)
    checks = []
    real = signatures.check_before_download

    def counted(*args, **kwargs):
        checks.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(signatures, "check_before_download", counted)
    hub.mark()
    found = ckpt.latest("o/r", verify_key=key.public, endpoint=hub.url, retries=0)
    ckpt.pull(found, tmp_path / "d", verify_key=key.public, endpoint=hub.url, retries=0)
    log = hub.since_mark()
    seen = {name: _gets(log, f"checkpoint-3/{name}") for name in ("model.sig", "ckpt-manifest.json")}
    assert seen == {"model.sig": 1, "ckpt-manifest.json": 1}, [e["path"] for e in log]
    assert len(checks) == 1, f"the signature was checked {len(checks)} times"

    unchecked = ckpt.latest("o/r", endpoint=hub.url, retries=0)  # no check at latest: the pull makes its own
    ckpt.pull(unchecked, tmp_path / "e", verify_key=key.public, endpoint=hub.url, retries=0)
    assert len(checks) == 2


# --------------------------------------------------------------------------- a re-pull after an mtime change


def _pulled_then_touched(hub, tmp_path) -> tuple[Path, bytes]:
    weights = os.urandom(BIG)
    seed(hub.url, "o/r", "checkpoint-1", {"model.safetensors": weights, "config.json": b'{"step": 1}'},
         tmp_path / "seeds", step=1)
    dest = tmp_path / "dest"
    ckpt.pull("o/r", dest, subfolder="checkpoint-1", endpoint=hub.url, retries=0)
    ckpt.pull("o/r", dest, subfolder="checkpoint-1", endpoint=hub.url, retries=0)  # warm every import
    st = (dest / "model.safetensors").stat()
    os.utime(dest / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))  # a restore from a cache
    return dest, weights


@needs_proc_io
def test_a_repull_after_an_mtime_change_reads_the_file_once(hub, tmp_path):
    dest, weights = _pulled_then_touched(hub, tmp_path)
    hub.mark()
    before = read_so_far()
    res = ckpt.Client(hub.url, retries=0).pull("o/r", dest, subfolder="checkpoint-1")
    read = read_so_far() - before
    assert res.reused_files == 2 and res.downloaded_files == 0
    assert _gets(hub.since_mark(), "checkpoint-1/model.safetensors") == 0
    assert BIG <= read < BIG + BIG // 4, f"read {read / BIG:.2f} times the file's bytes, not once"
    assert (dest / "model.safetensors").read_bytes() == weights


@needs_proc_io
def test_a_repull_whose_record_mark_does_not_verify_hashes_each_kept_file_once(hub, tmp_path, monkeypatch):
    dest, weights = _pulled_then_touched(hub, tmp_path)
    os.utime(dest / "model.safetensors")  # back to a fresh mtime: the key below is what makes it be hashed
    monkeypatch.setenv("HF_HOME", str(tmp_path / "another-home"))  # another key: the record's mark fails
    before = read_so_far()
    res = ckpt.Client(hub.url, retries=0).pull("o/r", dest, subfolder="checkpoint-1")
    read = read_so_far() - before
    assert res.reused_files == 2 and res.downloaded_files == 0
    assert BIG <= read < BIG + BIG // 4, f"read {read / BIG:.2f} times the file's bytes, not once"
    assert (dest / "model.safetensors").read_bytes() == weights
