"""model.sig from the digests at hand, in model-signing 1.1.1's format: interop both ways
(its CLI and Python API), key and certificate modes, and each refusal of the verifier."""

from __future__ import annotations

import base64
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import model_signing
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ckpt_action.checkpoint.signing import PASSWORD_ENV, SIGNATURE_NAME, SignatureError, SigningConfig
from ckpt_action.checkpoint.verifying import VerifyConfig
from ckpt_action.errors import InputError
from tests.helpers.signing_helpers import SERVER_AUTH, dir_digests, make_key, make_model, make_pki


def sign_dir(model: Path, **options: object) -> str:
    """Sign a plain dir with our module, from digests; returns the signer it reports."""
    env = {k: str(v) for k, v in options.pop("env", {}).items()}  # type: ignore[attr-defined]
    signer = SigningConfig.from_options(**options).load(env=env)  # type: ignore[arg-type]
    signed = signer.sign(dir_digests(model), model.name)
    (model / SIGNATURE_NAME).write_bytes(signed.data)
    return signed.signer


def ms_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "model_signing", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def statement(sig: Path | bytes) -> dict:
    data = sig.read_bytes() if isinstance(sig, Path) else sig
    return json.loads(base64.b64decode(json.loads(data)["dsseEnvelope"]["payload"]))


def verify(config: dict[str, object], model: Path) -> str:
    vc = VerifyConfig.from_options(**config)  # type: ignore[arg-type]
    assert vc is not None
    return vc.load().verify((model / SIGNATURE_NAME).read_bytes(), dir_digests(model)).signer


# --------------------------------------------------------------------------- the format


def test_payload_is_byte_for_byte_what_model_signing_writes(tmp_path: Path) -> None:
    key = make_key(tmp_path)
    model = make_model(tmp_path / "checkpoint-7")
    ours = SigningConfig(key=key.private).load(env={}).sign(dir_digests(model), model.name).data
    model_signing.signing.Config().use_elliptic_key_signer(private_key=key.private).set_hashing_config(
        model_signing.hashing.Config().set_ignored_paths(paths=[SIGNATURE_NAME])).sign(model, model / SIGNATURE_NAME)
    theirs = (model / SIGNATURE_NAME).read_bytes()
    # ECDSA signatures are randomized; everything they sign is identical.
    assert json.loads(ours)["dsseEnvelope"]["payload"] == json.loads(theirs)["dsseEnvelope"]["payload"]
    assert json.loads(ours)["verificationMaterial"] == json.loads(theirs)["verificationMaterial"]
    doc = json.loads(ours)
    assert doc["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert doc["dsseEnvelope"]["payloadType"] == "application/vnd.in-toto+json"
    st = statement(ours)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://model_signing/signature/v1.0"
    assert st["subject"][0]["name"] == "checkpoint-7"
    ser = st["predicate"]["serialization"]
    assert (ser["method"], ser["hash_type"], ser["allow_symlinks"]) == ("files", "sha256", False)
    assert sorted(ser["ignore_paths"]) == [".git", ".gitattributes", ".github", ".gitignore", SIGNATURE_NAME]
    assert st["predicate"]["resources"] == [{"name": rel, "algorithm": "sha256", "digest": d}
                                            for rel, d in sorted(dir_digests(model).items())]


def _payload(bundle: bytes) -> dict:
    """The in-toto statement a signature bundle signs, its ignore_paths sorted."""
    st = json.loads(base64.b64decode(json.loads(bundle)["dsseEnvelope"]["payload"]))
    st["predicate"]["serialization"]["ignore_paths"].sort()
    return st


def test_names_a_copy_may_hold_are_recorded_as_model_signing_records_ignore_paths(tmp_path: Path) -> None:
    key = make_key(tmp_path)
    model = make_model(tmp_path / "m")
    ours = SigningConfig(key=key.private).load(env={}).sign(dir_digests(model), "m", also_ignore=(".ckpt-pull.json",))
    model_signing.signing.Config().use_elliptic_key_signer(private_key=key.private).set_hashing_config(
        model_signing.hashing.Config().set_ignored_paths(paths=[".ckpt-pull.json", SIGNATURE_NAME])).sign(
        model, model / SIGNATURE_NAME)
    # The same statement, but for the order of ignore_paths: model-signing lists them from a
    # set, so its order follows the process's hash seed (the verifier reads them as a set).
    assert _payload(ours.data) == _payload((model / SIGNATURE_NAME).read_bytes())
    (model / SIGNATURE_NAME).write_bytes(ours.data)
    (model / ".ckpt-pull.json").write_text("{}")  # what a pull leaves: model-signing skips it as told
    res = ms_cli("verify", "key", "--public_key", key.public, "--signature", model / SIGNATURE_NAME, model)
    assert res.returncode == 0, res.stderr


def test_signing_reads_no_file_only_the_digests(tmp_path: Path) -> None:
    key = make_key(tmp_path)
    digests = {"model.safetensors": "ab" * 32, "ckpt-manifest.json": "cd" * 32}  # no such files anywhere
    st = statement(SigningConfig(key=key.private).load(env={}).sign(digests, "x").data)
    assert {r["name"]: r["digest"] for r in st["predicate"]["resources"]} == digests
    with pytest.raises(ValueError, match="cannot sign itself"):
        SigningConfig(key=key.private).load(env={}).sign({SIGNATURE_NAME: "00" * 32}, "x")


def test_a_git_named_file_of_the_checkpoint_is_signed_not_ignored(tmp_path: Path) -> None:
    key = make_key(tmp_path)
    model = make_model(tmp_path / "m", {".gitattributes": b"*.bin lfs", "w.bin": b"w"})
    sign_dir(model, signing_key=key.private)
    st = statement(model / SIGNATURE_NAME)
    assert ".gitattributes" not in st["predicate"]["serialization"]["ignore_paths"]
    assert [r["name"] for r in st["predicate"]["resources"]] == [".gitattributes", "w.bin"]
    # model-signing's verifier skips git-named files unless told not to (its CLI's
    # --no-ignore-git-paths); told so, it checks the file like every other.
    res = ms_cli("verify", "key", "--no-ignore-git-paths", "--public_key", key.public, "--signature",
                 model / SIGNATURE_NAME, model)
    assert res.returncode == 0, res.stderr
    assert verify({"verify_key": key.public}, model).startswith("key ")


# --------------------------------------------------------------------------- interop, both ways


def test_our_key_signature_verifies_with_model_signing_cli_and_api(tmp_path: Path) -> None:
    key = make_key(tmp_path)
    model = make_model(tmp_path / "m")
    signer = sign_dir(model, signing_key=key.private)
    assert signer.startswith("key sha256:")
    res = ms_cli("verify", "key", "--public_key", key.public, "--signature", model / SIGNATURE_NAME, model)
    assert res.returncode == 0, res.stderr
    assert "Verification succeeded" in res.stdout
    model_signing.verifying.Config().use_elliptic_key_verifier(public_key=key.public).verify(
        model, model / SIGNATURE_NAME)
    (model / "config.json").write_bytes(b'{"tampered": 1}')  # and its verifier does refuse a change
    assert ms_cli("verify", "key", "--public_key", key.public, "--signature", model / SIGNATURE_NAME,
                  model).returncode == 1


def test_model_signing_key_signature_verifies_with_ours(tmp_path: Path) -> None:
    key = make_key(tmp_path, curve=ec.SECP384R1())
    model = make_model(tmp_path / "m")
    res = ms_cli("sign", "key", "--private_key", key.private, "--signature", model / SIGNATURE_NAME, model)
    assert res.returncode == 0, res.stderr
    assert verify({"verify_key": key.public}, model) == sign_dir(make_model(tmp_path / "n"), signing_key=key.private)
    api_model = make_model(tmp_path / "api")
    model_signing.signing.Config().use_elliptic_key_signer(private_key=key.private).set_hashing_config(
        model_signing.hashing.Config().set_ignored_paths(paths=[SIGNATURE_NAME])).sign(
        api_model, api_model / SIGNATURE_NAME)
    assert verify({"verify_key": key.public}, api_model).startswith("key sha256:")


def test_certificate_mode_end_to_end_both_ways(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    model = make_model(tmp_path / "m")
    signer = sign_dir(model, signing_key=pki.key, signing_certificate=pki.certificate, signing_chain=pki.chain)
    assert signer == "CN=release-bot,O=Example Org"
    res = ms_cli("verify", "certificate", "--certificate_chain", pki.root, "--signature", model / SIGNATURE_NAME, model)
    assert res.returncode == 0, res.stderr
    assert verify({"verify_certificate_chain": pki.root}, model) == signer
    theirs = make_model(tmp_path / "theirs")
    res = ms_cli("sign", "certificate", "--private_key", pki.key, "--signing_certificate", pki.certificate,
                 "--certificate_chain", pki.chain, "--signature", theirs / SIGNATURE_NAME, theirs)
    assert res.returncode == 0, res.stderr
    assert verify({"verify_certificate_chain": pki.root}, theirs) == signer


def test_an_encrypted_key_takes_its_password_from_the_environment_only(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    key = serialization.load_pem_private_key(pki.key.read_bytes(), None)
    pki.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,  # type: ignore[union-attr]
                                          serialization.BestAvailableEncryption(b"s3cret")))
    model = make_model(tmp_path / "m")
    opts = {"signing_key": pki.key, "signing_certificate": pki.certificate, "signing_chain": pki.chain}
    with pytest.raises(InputError, match=f"signing_key= is encrypted: put its password in {PASSWORD_ENV}"):
        sign_dir(model, **opts)
    with pytest.raises(InputError, match=f"{PASSWORD_ENV} does not decrypt signing_key="):
        sign_dir(model, env={PASSWORD_ENV: "wrong"}, **opts)
    sign_dir(model, env={PASSWORD_ENV: "s3cret"}, **opts)
    assert verify({"verify_certificate_chain": pki.root}, model) == "CN=release-bot,O=Example Org"


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    key = make_key(tmp_path)
    model = make_model(tmp_path / "m")
    sign_dir(model, signing_key=key.private)
    return model, key.public


def test_unsigned_is_refused(signed: tuple[Path, Path]) -> None:
    model, pub = signed
    v = VerifyConfig(key=pub).load()
    with pytest.raises(SignatureError, match=r"not signed \(no model.sig\)"):
        v.verify(None, dir_digests(model))


def test_another_key_is_refused(signed: tuple[Path, Path], tmp_path: Path) -> None:
    model, _ = signed
    other = make_key(tmp_path, "other")
    with pytest.raises(SignatureError, match=r"does not verify against the key other\.pub\.pem"):
        verify({"verify_key": other.public}, model)


@pytest.mark.parametrize(("change", "named"), [
    (lambda m: (m / "config.json").write_bytes(b"[]"), "'config.json' changed after signing"),
    (lambda m: (m / "extra.bin").write_bytes(b"x"), "'extra.bin' was added after signing"),
    (lambda m: (m / "sub" / "tokenizer.json").unlink(), "'sub/tokenizer.json' was removed after signing"),
])
def test_a_file_changed_added_or_removed_after_signing_is_named(signed: tuple[Path, Path], change, named) -> None:
    model, pub = signed
    change(model)
    with pytest.raises(SignatureError, match=named):
        verify({"verify_key": pub}, model)


def test_a_signature_whose_statement_was_rewritten_is_refused(signed: tuple[Path, Path]) -> None:
    model, pub = signed
    doc = json.loads((model / SIGNATURE_NAME).read_bytes())
    st = statement(model / SIGNATURE_NAME)
    st["predicate"]["resources"][0]["digest"] = "00" * 32
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    (model / SIGNATURE_NAME).write_text(json.dumps(doc))
    with pytest.raises(SignatureError, match="does not verify against the key"):
        verify({"verify_key": pub}, model)


def test_a_certificate_from_another_ca_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    pki, other = make_pki(tmp_path / "a"), make_pki(tmp_path / "b")
    model = make_model(tmp_path / "m")
    sign_dir(model, signing_key=pki.key, signing_certificate=pki.certificate, signing_chain=pki.chain)
    with pytest.raises(SignatureError, match=r"does not verify against the CA in root\.pem"):
        verify({"verify_certificate_chain": other.root}, model)


def _signed_by_model_signing(pki, model: Path) -> Path:
    """Signed with model-signing's own certificate signer, which checks neither the
    certificate's dates nor its purpose (ours refuses both before signing)."""
    model_signing.signing.Config().use_certificate_signer(
        private_key=pki.key, signing_certificate=pki.certificate, certificate_chain=[pki.chain]).set_hashing_config(
        model_signing.hashing.Config().set_ignored_paths(paths=[SIGNATURE_NAME])).sign(model, model / SIGNATURE_NAME)
    return model


_2021 = (datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
         datetime.datetime(2021, 1, 1, tzinfo=datetime.timezone.utc))


@pytest.mark.parametrize(("pki_options", "named"), [
    ({"valid": _2021}, "the signing certificate expired on 2021-01-01 (checked at the current time)"),
    ({"usage": SERVER_AUTH}, "the signing certificate is not a code-signing certificate"),
    ({"usage": None}, "the signing certificate is not a code-signing certificate"),
], ids=["expired", "tls-server", "no-extended-usage"])
def test_a_certificate_chain_refuses_an_expired_or_non_code_signing_leaf(tmp_path: Path, pki_options, named) -> None:
    pki = make_pki(tmp_path, **pki_options)
    model = _signed_by_model_signing(pki, make_model(tmp_path / "m"))
    with pytest.raises(SignatureError, match=re.escape(f"does not verify against the CA in root.pem: '{named}")):
        verify({"verify_certificate_chain": pki.root}, model)
    # Our signer refuses to make such a signature at all, before anything is pushed.
    with pytest.raises(InputError, match=re.escape(f"signing_certificate=: {named}")):
        sign_dir(make_model(tmp_path / "n"), signing_key=pki.key, signing_certificate=pki.certificate,
                 signing_chain=pki.chain)
    # The same chain with a valid code-signing leaf verifies: the leaf is what was refused.
    (tmp_path / "ok").mkdir()
    good = make_pki(tmp_path / "ok")
    assert verify({"verify_certificate_chain": good.root}, _signed_by_model_signing(
        good, make_model(tmp_path / "good"))) == "CN=release-bot,O=Example Org"


def test_garbage_signature_is_refused(signed: tuple[Path, Path]) -> None:
    model, pub = signed
    with pytest.raises(SignatureError, match="not a Sigstore bundle"):
        VerifyConfig(key=pub).load().verify(b"{not json", dir_digests(model))


# --------------------------------------------------------------------------- options, in the door's words


def test_signer_options_are_checked_in_the_doors_words(tmp_path: Path) -> None:
    cli = lambda kw: "--" + kw.replace("_", "-")  # noqa: E731
    assert SigningConfig.from_options() is None
    with pytest.raises(InputError, match="--signing-certificate needs --signing-key"):
        SigningConfig.from_options(signing_certificate="c.pem", names=cli)
    with pytest.raises(InputError, match="signing_certificate= and signing_chain= go together"):
        SigningConfig.from_options(signing_key="k.pem", signing_certificate="c.pem")
    with pytest.raises(InputError, match="--sign-keyless does not go with --signing-key"):
        SigningConfig.from_options(signing_key="k.pem", sign_keyless=True, names=cli)
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(InputError, match="--signing-key must be an elliptic-curve key on P-256"):
        SigningConfig(key=rsa_key).load(env={}, names=cli)
    with pytest.raises(InputError, match=r"signing_key=: private key not found: .*missing\.pem") as missing:
        SigningConfig(key=tmp_path / "missing.pem").load(env={}, names=cli)
    assert missing.value.render("cli").startswith("--signing-key: private key not found")
    pki = make_pki(tmp_path)
    with pytest.raises(InputError, match="--signing-certificate is not the certificate of --signing-key"):
        SigningConfig(key=make_key(tmp_path).private, certificate=pki.certificate, chain=(pki.chain,)).load(
            env={}, names=cli)


def test_verify_options_are_checked_in_the_doors_words() -> None:
    assert VerifyConfig.from_options() is None
    with pytest.raises(InputError, match="give one of verify_key=, verify_certificate_chain= or verify_identity="):
        VerifyConfig.from_options(verify_key="k.pub", verify_identity="x")
    with pytest.raises(InputError, match=r"verify_identity= needs verify_issuer= .*token\.actions\.githubusercontent"):
        VerifyConfig.from_options(verify_identity="https://github.com/o/r/.github/workflows/x.yml@refs/heads/main")
    with pytest.raises(InputError, match="verify_issuer= needs verify_identity="):
        VerifyConfig.from_options(verify_issuer="https://token.actions.githubusercontent.com")


def test_the_signing_modules_load_none_of_model_signing_until_they_sign_or_verify() -> None:
    code = ("import sys\n"
            "from ckpt_action.checkpoint import signing, verifying, provenance\n"
            "signing.SigningConfig.from_options(signing_key='k.pem')\n"
            "verifying.VerifyConfig.from_options(verify_key='k.pub')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'model_signing', 'sigstore', 'sigstore_models', 'cryptography', 'OpenSSL', 'in_toto_attestation'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the provenance statement


def test_provenance_says_where_a_signed_checkpoint_belongs() -> None:
    from ckpt_action.checkpoint.provenance import Provenance

    env = {"GITHUB_SHA": "a" * 40, "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "org/train",
           "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2"}
    p = Provenance.here("org/run", "release", 900, env, promoted_from="org/run/checkpoint-900@" + "b" * 40)
    assert p.workflow_run == "https://github.com/org/train/actions/runs/42/attempts/2"
    assert Provenance.from_json(p.to_json()) == p
    assert p.to_json() == Provenance.here("org/run", "release", 900, env,
                                          promoted_from="org/run/checkpoint-900@" + "b" * 40).to_json()
    p.check("org/run", "release", 900)
    with pytest.raises(SignatureError, match="made for 'org/run'/'release', not org/run/checkpoint-100"):
        p.check("org/run", "checkpoint-100", 900)
    with pytest.raises(SignatureError, match="says step 900, the manifest says 100"):
        p.check("org/run", "release", 100)
    assert Provenance.here("o/r", "c", None, {"GITHUB_SHA": "not a sha"}).source_commit is None


@pytest.mark.parametrize("doc", [
    b"[]", b'{"format": "other"}',
    b'{"format": "ckpt-action/provenance/v1", "repo": "o/r", "subfolder": "x\\u001b[31m", "step": 1}',
    b'{"format": "ckpt-action/provenance/v1", "repo": "o/r", "subfolder": "x", "step": -1}',
    b'{"format": "ckpt-action/provenance/v1", "repo": "o/r", "subfolder": "x", "workflow_run": "javascript:x"}',
])
def test_an_unusable_provenance_statement_is_refused(doc: bytes) -> None:
    from ckpt_action.checkpoint.provenance import Provenance

    with pytest.raises(SignatureError, match=r"ckpt-provenance\.json is unreadable"):
        Provenance.from_json(doc)
