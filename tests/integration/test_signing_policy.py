"""What a signature does not prove, and the checks that refuse it (issue 27, items 10, 12, 25
and 26), through the real CLI against the local Hub.

A signature proves who signed which bytes for which repo, folder and step: a signed older
release copied back (a rollback) still verifies unless ``--verify-min-step`` is given; a
folder signed by another tool (no provenance statement) verifies unless
``--verify-require-provenance`` is given. The pre-download check and the repo check of
the provenance statement each get a test that fails when that one check is gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from tests.conftest import clean_env, write_checkpoint
from tests.helpers.pull_helpers import file_gets
from tests.helpers.signing_helpers import make_key, make_model

PROVENANCE = "ckpt-provenance.json"
MANIFEST = "ckpt-manifest.json"
FILES = {"model.safetensors": b"w" * 200_000, "config.json": b'{"a": 1}', "sub/tok.json": b"{}"}


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url)


@pytest.fixture
def key(tmp_path):
    return make_key(tmp_path)


def hf(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def push(cli, env, tmp_path, key, step, files=FILES, repo="o/r"):
    src = write_checkpoint(tmp_path / f"src-{repo.replace('/', '-')}-{step}", files)
    run = cli("push", "--repo", repo, "--local-dir", str(src), "--step", str(step), "--signing-key", str(key.private),
              "--json", env=env)
    assert run.code == 0, run.stderr
    return run.json


def copy_folder(hub, tmp_path, src_repo, src, dst_repo, dst, revision=None):
    """Every file of ``src_repo/src`` at ``revision``, written over ``dst_repo/dst`` as they
    are (signature and statement included): what someone with write access can do."""
    from huggingface_hub import CommitOperationAdd

    api = hf(hub)
    paths = [f.path for f in api.list_repo_tree(src_repo, path_in_repo=src, revision=revision, recursive=True)
             if not hasattr(f, "tree_id")]
    ops = [CommitOperationAdd(dst + p[len(src):], Path(api.hf_hub_download(
        src_repo, p, revision=revision, cache_dir=tmp_path / "copy")).read_bytes()) for p in paths]
    api.create_repo(dst_repo, exist_ok=True)
    api.create_commit(dst_repo, operations=ops, commit_message="copy")


def pull(cli, env, dest, *args, subfolder="release", repo="o/r"):
    return cli("pull", "--repo", repo, "--subfolder", subfolder, "--local-dir", str(dest), "--json", *args, env=env)


# --------------------------------------------------------------------------- item 10: a signed rollback


def test_a_signed_rollback_verifies_and_verify_min_step_refuses_it(hub, env, cli, tmp_path, key):
    for step in (900, 1000):
        push(cli, env, tmp_path, key, step, FILES | {"config.json": str(step).encode()})
        run = cli("promote", "--repo", "o/r", "--subfolder", f"checkpoint-{step}", "--to", "release", "--tag",
                  f"v{step}", "--signing-key", str(key.private), env=env)
        assert run.code == 0, run.stderr
    copy_folder(hub, tmp_path, "o/r", "release", "o/r", "release", revision="v900")  # the rollback
    verify = ("--verify-key", str(key.public))

    rolled_back = pull(cli, env, tmp_path / "accepted", *verify)
    assert rolled_back.code == 0, rolled_back.stderr  # a valid signature: it proves no more than that
    assert rolled_back.json["provenance"]["step"] == 900

    run = pull(cli, env, tmp_path / "refused", *verify, "--verify-min-step", "1000")
    assert run.code == 1, run.stdout + run.stderr
    assert "release holds step 900; --verify-min-step asks for 1000 or later" in run.stderr
    assert not (tmp_path / "refused").exists()
    assert pull(cli, env, tmp_path / "at-min", *verify, "--verify-min-step", "900").code == 0

    import ckpt_action as ckpt

    with pytest.raises(ckpt.SignatureError, match="verify_min_step= asks for 1000 or later"):
        ckpt.pull("o/r", tmp_path / "api", subfolder="release", verify_key=key.public, verify_min_step=1000,
                  endpoint=hub.url)


def test_latest_refuses_a_newest_verified_checkpoint_below_the_minimum(hub, env, cli, tmp_path, key):
    push(cli, env, tmp_path, key, 900)
    push(cli, env, tmp_path, key, 1000, FILES | {"config.json": b"1000"})
    from huggingface_hub import CommitOperationDelete

    verify = ("--verify-key", str(key.public), "--verify-min-step", "1000")
    assert cli("latest", "--repo", "o/r", *verify, "--json", env=env).json["step"] == 1000
    hf(hub).create_commit("o/r", operations=[CommitOperationDelete("checkpoint-1000/")], commit_message="rollback")
    run = cli("latest", "--repo", "o/r", *verify, "--json", env=env)
    assert run.code == 1 and "checkpoint-900 holds step 900; --verify-min-step asks for 1000" in run.stderr, run.stderr
    run = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "d"), *verify, env=env)
    assert run.code == 1 and "asks for 1000 or later" in run.stderr and not (tmp_path / "d").exists()


@pytest.mark.parametrize(("args", "named"), [
    (["--verify-min-step", "5"], "--verify-min-step needs --verify-key, --verify-certificate-chain or"
                                 " --verify-identity"),
    (["--verify-require-provenance"], "--verify-require-provenance needs --verify-key"),
    (["--verify-min-step", "-1", "--verify-key", "{pub}"], "--verify-min-step must be a step, 0 or more"),
])
def test_the_new_verify_options_are_checked_before_any_request(hub, env, cli, tmp_path, key, args, named):
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "d"),
              *(a.format(pub=key.public) for a in args), env=env)
    assert run.code == 2 and named in run.stderr, run.stderr
    assert hub.log_entries() == []


# --------------------------------------------------------------------------- item 12: provenance required


def test_verify_require_provenance_refuses_a_folder_signed_without_a_statement(hub, env, cli, tmp_path, key):
    import subprocess
    import sys

    model = make_model(tmp_path / "signed-by-model-signing")
    ms = subprocess.run([sys.executable, "-m", "model_signing", "sign", "key", "--private_key", str(key.private),
                         "--signature", str(model / SIGNATURE_NAME), str(model)], capture_output=True, text=True,
                        timeout=120)
    assert ms.returncode == 0, ms.stderr
    hf(hub).create_repo("o/r", exist_ok=True)
    hf(hub).upload_folder(repo_id="o/r", folder_path=str(model), path_in_repo="checkpoint-5")
    verify = ("--verify-key", str(key.public))
    assert pull(cli, env, tmp_path / "ok", *verify, subfolder="checkpoint-5").code == 0  # verifies wherever copied
    run = pull(cli, env, tmp_path / "no", *verify, "--verify-require-provenance", subfolder="checkpoint-5")
    assert run.code == 1, run.stdout + run.stderr
    assert "checkpoint-5 has no signed ckpt-provenance.json" in run.stderr
    assert "--verify-require-provenance" in run.stderr and not (tmp_path / "no").exists()
    # A folder ckpt-action signed has one, and passes.
    push(cli, env, tmp_path, key, 3)
    assert pull(cli, env, tmp_path / "own", *verify, "--verify-require-provenance", subfolder="checkpoint-3").code == 0


# --------------------------------------------------------------------------- items 25 and 26: the guards


def test_a_tampered_manifest_is_refused_before_any_file_is_downloaded(hub, env, cli, tmp_path, key):
    """The signature must cover the manifest's files and digests before a byte of them is
    downloaded: the later check of the downloaded bytes alone would refuse the same
    tampering, but only after fetching every file."""
    from huggingface_hub import CommitOperationAdd

    from ckpt_action.checkpoint.manifest import Manifest, digest_bytes

    push(cli, env, tmp_path, key, 900)
    api = hf(hub)
    manifest = Manifest.from_json(Path(api.hf_hub_download("o/r", f"checkpoint-900/{MANIFEST}",
                                                           cache_dir=tmp_path / "m")).read_bytes())
    manifest.files["config.json"] = digest_bytes("config.json", b'{"a": 2}')
    api.create_commit("o/r", commit_message="tamper", operations=[
        CommitOperationAdd("checkpoint-900/config.json", b'{"a": 2}'),
        CommitOperationAdd(f"checkpoint-900/{MANIFEST}", manifest.to_json())])
    start = len(hub.log_entries())
    run = pull(cli, env, tmp_path / "dest", "--verify-key", str(key.public), subfolder="checkpoint-900")
    assert run.code == 1 and "'config.json' changed after signing" in run.stderr, run.stderr
    fetched = set(file_gets(hub, start)) - {f"checkpoint-900/{SIGNATURE_NAME}", f"checkpoint-900/{PROVENANCE}"}
    assert fetched == set(), f"downloaded before the refusal: {sorted(fetched)}"


def test_a_signed_checkpoint_copied_into_another_repo_is_refused(hub, env, cli, tmp_path, key):
    push(cli, env, tmp_path, key, 900)
    copy_folder(hub, tmp_path, "o/r", "checkpoint-900", "o/other", "checkpoint-900")  # same folder, same step
    verify = ("--verify-key", str(key.public))
    run = pull(cli, env, tmp_path / "dest", *verify, subfolder="checkpoint-900", repo="o/other")
    assert run.code == 1, run.stdout + run.stderr
    assert "made for 'o/r'/'checkpoint-900', not o/other/checkpoint-900" in run.stderr
    assert not (tmp_path / "dest").exists()
    assert pull(cli, env, tmp_path / "home", *verify, subfolder="checkpoint-900").code == 0
    assert pull(cli, env, tmp_path / "unchecked", subfolder="checkpoint-900", repo="o/other").code == 0
