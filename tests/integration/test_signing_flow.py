"""Signed push, promote and verified pull/latest through the real CLI against the local Hub.

Each refusal is also run without ``--verify-key``: the same pull then succeeds, so what
refuses it is the signature check and nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from tests.conftest import clean_env, read_tree, write_checkpoint
from tests.helpers.signing_helpers import make_key, make_model, make_pki

PROVENANCE = "ckpt-provenance.json"
MANIFEST = "ckpt-manifest.json"
FILES = {"model.safetensors": b"w" * 200_000, "config.json": b'{"a": 1}', "sub/tok.json": b"{}"}


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url, GITHUB_SHA="a" * 40, GITHUB_REPOSITORY="org/train",
                     GITHUB_RUN_ID="7", GITHUB_SERVER_URL="https://github.com")


@pytest.fixture
def key(tmp_path):
    return make_key(tmp_path)


def hf(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def push(cli, env, tmp_path, *args, files=FILES, subfolder="checkpoint-900", step=900, repo="o/r"):
    src = write_checkpoint(tmp_path / f"src-{subfolder}-{len(list(tmp_path.iterdir()))}", files)
    run = cli("push", "--repo", repo, "--local-dir", str(src), "--subfolder", subfolder, "--step", str(step),
              "--json", *args, env=env)
    assert run.code == 0, run.stderr
    return run.json


def pull(cli, env, dest, *args, subfolder="checkpoint-900"):
    return cli("pull", "--repo", "o/r", "--subfolder", subfolder, "--local-dir", str(dest), "--json", *args, env=env)


def files_at(hub, revision, folder):
    return sorted(f.path[len(folder) + 1:] for f in hf(hub).list_repo_tree("o/r", path_in_repo=folder,
                                                                          revision=revision, recursive=True)
                  if not hasattr(f, "tree_id"))


# --------------------------------------------------------------------------- sign on push, verify on pull


def test_a_signed_push_writes_model_sig_with_the_manifest_and_pull_verifies_it(hub, env, cli, tmp_path, key):
    out = push(cli, env, tmp_path, "--signing-key", str(key.private))
    assert out["signed"] is True and out["signer"].startswith("key sha256:") and out["commits"] == 1
    assert files_at(hub, out["revision"], "checkpoint-900") == sorted([*FILES, MANIFEST, PROVENANCE, SIGNATURE_NAME])
    manifest = json.loads(Path(hf(hub).hf_hub_download("o/r", f"checkpoint-900/{MANIFEST}", revision=out["revision"],
                                                       cache_dir=tmp_path / "c")).read_bytes())
    assert PROVENANCE in manifest["files"] and SIGNATURE_NAME not in manifest["files"]
    run = pull(cli, env, tmp_path / "dest", "--verify-key", str(key.public))
    assert run.code == 0, run.stderr
    res = run.json
    assert (res["signed"], res["signature_verified"], res["signer"]) == (True, True, out["signer"])
    assert res["provenance"] == {"repo": "o/r", "subfolder": "checkpoint-900", "step": 900,
                                 "source_commit": "a" * 40, "workflow_run": "https://github.com/org/train/actions/runs/7",
                                 "promoted_from": None}
    got = read_tree(tmp_path / "dest")
    assert {k: got[k] for k in FILES} == FILES and SIGNATURE_NAME in got
    # model-signing's own verifier accepts the pulled dir as it is (the pull's record included).
    ms = subprocess.run([sys.executable, "-m", "model_signing", "verify", "key", "--public_key", str(key.public),
                         "--signature", str(tmp_path / "dest" / SIGNATURE_NAME), str(tmp_path / "dest")],
                        capture_output=True, text=True, timeout=120)
    assert ms.returncode == 0, ms.stderr
    # A re-push of the same checkpoint from the same run changes nothing.
    assert push(cli, env, tmp_path, "--signing-key", str(key.private))["commits"] == 0


def test_an_unsigned_pull_reports_the_signature_without_vouching_for_it(hub, env, cli, tmp_path, key):
    push(cli, env, tmp_path, "--signing-key", str(key.private))
    run = pull(cli, env, tmp_path / "dest")
    assert run.code == 0, run.stderr
    assert (run.json["signed"], run.json["signature_verified"]) == (True, False)
    assert "signer" not in run.json  # nobody vouched for it: no signer is reported


def test_certificate_mode_end_to_end(hub, env, cli, tmp_path):
    pki = make_pki(tmp_path)
    out = push(cli, env, tmp_path, "--signing-key", str(pki.key), "--signing-certificate", str(pki.certificate),
               "--signing-chain", str(pki.chain))
    assert out["signer"] == "CN=release-bot,O=Example Org"
    run = pull(cli, env, tmp_path / "dest", "--verify-certificate-chain", str(pki.root))
    assert run.code == 0, run.stderr
    assert run.json["signer"] == "CN=release-bot,O=Example Org"
    (tmp_path / "other").mkdir()
    other = make_pki(tmp_path / "other")
    run = pull(cli, env, tmp_path / "dest2", "--verify-certificate-chain", str(other.root))
    assert run.code == 1 and "does not verify against the CA" in run.stderr


def test_a_folder_signed_by_model_signing_and_uploaded_as_is_verifies_on_pull(hub, env, cli, tmp_path, key):
    model = make_model(tmp_path / "signed-by-model-signing")
    ms = subprocess.run([sys.executable, "-m", "model_signing", "sign", "key", "--private_key", str(key.private),
                         "--signature", str(model / SIGNATURE_NAME), str(model)], capture_output=True, text=True,
                        timeout=120)
    assert ms.returncode == 0, ms.stderr
    hf(hub).create_repo("o/r", exist_ok=True)
    hf(hub).upload_folder(repo_id="o/r", folder_path=str(model), path_in_repo="uploaded")
    run = pull(cli, env, tmp_path / "dest", "--verify-key", str(key.public), subfolder="uploaded")
    assert run.code == 0, run.stderr
    assert run.json["signature_verified"] is True and "provenance" not in run.json
    # No manifest to check before the download: the downloaded bytes are checked before the switch.
    hf(hub).upload_file(repo_id="o/r", path_or_fileobj=b'{"tampered": 1}', path_in_repo="uploaded/config.json")
    before = read_tree(tmp_path / "dest")
    run = pull(cli, env, tmp_path / "dest", "--verify-key", str(key.public), subfolder="uploaded")
    assert run.code == 1 and "'config.json' changed after signing" in run.stderr
    assert read_tree(tmp_path / "dest") == before
    assert pull(cli, env, tmp_path / "unchecked", subfolder="uploaded").code == 0


# --------------------------------------------------------------------------- refusals


def _commit(hub, ops, message="tamper"):
    hf(hub).create_commit("o/r", operations=ops, commit_message=message)


def _rewrite(hub, tmp_path, folder, changes):
    """Change files of a pushed folder and rewrite its manifest to match, leaving model.sig as
    it was: what someone with write access (or a leaked token) can do."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    from ckpt_action.checkpoint.manifest import Manifest, digest_bytes

    api = hf(hub)
    manifest = Manifest.from_json(Path(api.hf_hub_download("o/r", f"{folder}/{MANIFEST}",
                                                           cache_dir=tmp_path / "tamper")).read_bytes())
    ops = []
    for rel, data in changes.items():
        if data is None:
            manifest.files.pop(rel)
            ops.append(CommitOperationDelete(f"{folder}/{rel}"))
        else:
            manifest.files[rel] = digest_bytes(rel, data)
            ops.append(CommitOperationAdd(f"{folder}/{rel}", data))
    ops.append(CommitOperationAdd(f"{folder}/{MANIFEST}", manifest.to_json()))
    _commit(hub, ops)


def _copy_folder(hub, src, dst):
    from huggingface_hub import CommitOperationCopy

    api = hf(hub)
    paths = [f.path for f in api.list_repo_tree("o/r", path_in_repo=src, recursive=True) if not hasattr(f, "tree_id")]
    _commit(hub, [CommitOperationCopy(p, dst + p[len(src):]) for p in paths])


TAMPERS = {
    "unsigned": (lambda hub, cli, env, tmp, key: push(cli, env, tmp, files=FILES | {"config.json": b"{}"}),
                 "is not signed"),
    "another key": (lambda hub, cli, env, tmp, key: push(cli, env, tmp, "--signing-key",
                                                         str(make_key(tmp, "intruder").private),
                                                         files=FILES | {"config.json": b"{}"}),
                    "does not verify against the key"),
    "changed": (lambda hub, cli, env, tmp, key: _rewrite(hub, tmp, "checkpoint-900", {"config.json": b'{"a": 2}'}),
                "'config.json' changed after signing"),
    "added": (lambda hub, cli, env, tmp, key: _rewrite(hub, tmp, "checkpoint-900", {"extra.bin": b"x"}),
              "'extra.bin' was added after signing"),
    "removed": (lambda hub, cli, env, tmp, key: _rewrite(hub, tmp, "checkpoint-900", {"sub/tok.json": None}),
                "'sub/tok.json' was removed after signing"),
}


@pytest.mark.parametrize("how", sorted(TAMPERS))
def test_each_refusal_names_what_failed_and_leaves_the_target_as_it_was(hub, env, cli, tmp_path, key, how):
    push(cli, env, tmp_path, "--signing-key", str(key.private))
    dest = tmp_path / "dest"
    first = pull(cli, env, dest, "--verify-key", str(key.public))
    assert first.code == 0, first.stderr
    before = read_tree(dest), (dest / ".ckpt-pull.json").read_bytes()
    tamper, named = TAMPERS[how]
    tamper(hub, cli, env, tmp_path, key)
    run = pull(cli, env, dest, "--verify-key", str(key.public))
    assert run.code == 1, run.stdout
    assert named in run.stderr
    assert (read_tree(dest), (dest / ".ckpt-pull.json").read_bytes()) == before
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".ckpt-staging")]
    # Without the signature check the same pull goes through: the check is what refuses it.
    assert pull(cli, env, tmp_path / "unchecked").code == 0


def test_a_signed_checkpoint_copied_where_it_does_not_belong_is_refused(hub, env, cli, tmp_path, key):
    push(cli, env, tmp_path, "--signing-key", str(key.private), subfolder="checkpoint-100", step=100)
    _copy_folder(hub, "checkpoint-100", "release")  # valid bytes, valid signature, wrong place
    run = pull(cli, env, tmp_path / "dest", "--verify-key", str(key.public), subfolder="release")
    assert run.code == 1
    assert "made for 'o/r'/'checkpoint-100', not o/r/release" in run.stderr
    assert not (tmp_path / "dest").exists()
    assert pull(cli, env, tmp_path / "unchecked", subfolder="release").code == 0


# --------------------------------------------------------------------------- latest and promote


def test_latest_with_verify_passes_over_what_does_not_verify(hub, env, cli, tmp_path, key):
    push(cli, env, tmp_path, "--signing-key", str(key.private), subfolder="checkpoint-1", step=1)
    push(cli, env, tmp_path, subfolder="checkpoint-2", step=2, files=FILES | {"config.json": b"2"})
    run = cli("latest", "--repo", "o/r", "--verify-key", str(key.public), "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["subfolder"] == "checkpoint-1"
    assert "checkpoint-2" in run.stderr and "not signed" in run.stderr
    assert cli("latest", "--repo", "o/r", "--json", env=env).json["subfolder"] == "checkpoint-2"
    res = cli("pull", "--repo", "o/r", "--local-dir", str(tmp_path / "d"), "--verify-key", str(key.public),
              "--latest", "--json", env=env)
    assert res.code == 0, res.stderr
    assert res.json["subfolder"] == "checkpoint-1" and res.json["signature_verified"] is True


def test_promote_signs_the_release_with_its_own_statement(hub, env, cli, tmp_path, key):
    out = push(cli, env, tmp_path, "--signing-key", str(key.private))
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-900", "--to", "release", "--tag", "v1",
              "--signing-key", str(key.private), "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["signed"] is True and run.json["signer"] == out["signer"]
    res = cli("pull", "--repo", "o/r", "--subfolder", "release", "--revision", "v1", "--local-dir",
              str(tmp_path / "deploy"), "--verify-key", str(key.public), "--json", env=env)
    assert res.code == 0, res.stderr
    prov = res.json["provenance"]
    assert (prov["subfolder"], prov["step"], prov["source_commit"]) == ("release", 900, "a" * 40)
    assert prov["promoted_from"] == f"o/r/checkpoint-900@{out['revision']}"
    # Unsigned, a promote copies neither the source's signature nor its statement.
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-900", "--to", "plain", "--json", env=env)
    assert run.code == 0, run.stderr
    assert not {SIGNATURE_NAME, PROVENANCE} & set(files_at(hub, run.json["revision"], "plain"))


def test_signing_options_are_refused_in_the_doors_words(hub, env, cli, tmp_path, key):
    run = cli("push", "--repo", "o/r", "--local-dir", str(make_model(tmp_path / "m")), "--step", "1",
              "--signing-certificate", str(key.public), env=env)
    assert run.code == 2 and "--signing-certificate needs --signing-key" in run.stderr
    run = cli("push", "--repo", "o/r", "--local-dir", str(tmp_path / "m"), "--step", "1", "--sign-keyless", env=env)
    assert run.code == 2 and "id-token: write" in run.stderr
    run = cli("pull", "--repo", "o/r", "--subfolder", "x", "--local-dir", str(tmp_path / "d"), "--verify-identity",
              "https://github.com/o/r", env=env)
    assert run.code == 2 and "--verify-identity needs --verify-issuer" in run.stderr
    assert not hf(hub).repo_exists("o/r")  # nothing reached the Hub


def test_commands_that_do_not_sign_load_none_of_model_signing(hub, env, tmp_path):
    src = write_checkpoint(tmp_path / "plain", FILES)
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'model_signing', 'sigstore', 'OpenSSL', 'cryptography'}), file=sys.stderr))\n"
            "from ckpt_action.cli.app import main\n"
            "main()\n")
    for args in (["push", "--repo", "o/r", "--local-dir", str(src), "--step", "5"],
                 ["pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "d")]):
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                              timeout=300, cwd=Path(__file__).resolve().parents[2])
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- the Python API


def test_the_python_api_takes_the_same_signing_keywords(local_hub, tmp_path, key, monkeypatch):
    import ckpt_action as ckpt

    for name in ("GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_REPOSITORY"):
        monkeypatch.delenv(name, raising=False)
    src = write_checkpoint(tmp_path / "src", FILES)
    h = ckpt.push(src, repo="o/r", step=3, signing_key=key.private, endpoint=local_hub.url)
    # A handle names its Hub; the API trusts it with the token only when told so (endpoint=).
    hub = {"endpoint": local_hub.url}
    assert ckpt.pull(h, tmp_path / "ok", verify_key=key.public, **hub).joinpath(SIGNATURE_NAME).exists()
    other = make_key(tmp_path, "other")
    with pytest.raises(ckpt.SignatureError, match=r"does not verify against the key other\.pub\.pem"):
        ckpt.pull(h, tmp_path / "no", verify_key=other.public, endpoint=local_hub.url)
    assert not (tmp_path / "no").exists()
    ckpt.push(write_checkpoint(tmp_path / "src4", FILES | {"config.json": b"4"}), repo="o/r", step=4,
              endpoint=local_hub.url)
    found = ckpt.latest("o/r", verify_key=key.public, endpoint=local_hub.url)
    assert found is not None and found.subfolder == "checkpoint-3"
    rel = ckpt.promote(found, "release", signing_key=key.private, endpoint=local_hub.url)
    assert ckpt.pull(rel, tmp_path / "rel", verify_key=key.public, **hub).joinpath(PROVENANCE).exists()
    with pytest.raises(ckpt.InputError, match="signing_certificate= needs signing_key="):
        ckpt.push(src, repo="o/r", step=5, signing_certificate=key.public, endpoint=local_hub.url)
    with pytest.raises(ckpt.InputError, match="verify_identity= needs verify_issuer="):
        ckpt.pull(h, tmp_path / "x", verify_identity="https://github.com/o/r", endpoint=local_hub.url)


def test_keyless_verification_through_the_cli_with_an_explicit_trust_config(hub, env, cli, tmp_path):
    from tests.integration.test_signing_keyless import RECORDED, RECORDED_IDENTITY, RECORDED_ISSUER, trust_config

    hf(hub).create_repo("o/r", exist_ok=True)
    hf(hub).upload_folder(repo_id="o/r", folder_path=str(RECORDED), path_in_repo="keyless")
    trust = str(trust_config(tmp_path))
    run = pull(cli, env, tmp_path / "dest", "--verify-identity", RECORDED_IDENTITY, "--verify-issuer",
               RECORDED_ISSUER, "--sigstore-trust-config", trust, subfolder="keyless")
    assert run.code == 0, run.stderr
    assert (run.json["signer"], run.json["signature_verified"]) == (RECORDED_IDENTITY, True)
    run = pull(cli, env, tmp_path / "other", "--verify-identity", "https://github.com/o/r", "--verify-issuer",
               "https://token.actions.githubusercontent.com", "--sigstore-trust-config", trust, subfolder="keyless")
    assert run.code == 1 and "does not verify against the identity 'https://github.com/o/r'" in run.stderr
    assert not (tmp_path / "other").exists()


def test_a_signed_promote_into_another_repo_signs_the_copy(hub, env, cli, tmp_path, key):
    out = push(cli, env, tmp_path, "--signing-key", str(key.private))
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-900", "--to", "release", "--to-repo", "o/prod",
              "--signing-key", str(key.private), "--json", env=env)
    assert run.code == 0, run.stderr
    res = cli("pull", "--repo", "o/prod", "--subfolder", "release", "--local-dir", str(tmp_path / "deploy"),
              "--verify-key", str(key.public), "--json", env=env)
    assert res.code == 0, res.stderr
    prov = res.json["provenance"]
    assert (prov["repo"], prov["subfolder"], prov["promoted_from"]) == (
        "o/prod", "release", f"o/r/checkpoint-900@{out['revision']}")


def test_a_distributed_push_refuses_a_signer_rather_than_pushing_unsigned(tmp_path, key):
    import ckpt_action as ckpt

    src = write_checkpoint(tmp_path / "src", FILES)
    # No request is made: the port is closed, and the refusal comes first.
    with pytest.raises(ckpt.InputError, match=r"distributed=.*does not sign yet"):
        ckpt.push(src, repo="o/r", step=1, distributed=True, signing_key=key.private, endpoint="http://127.0.0.1:9")
