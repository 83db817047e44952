"""Keyless (Sigstore) signatures, offline.

Verification: a bundle recorded from Sigstore's public instance (model-transparency's own
v1.1.0 test signature, tests/data/keyless: Apache-2.0, signed by stefanb@us.ibm.com through
IBM's OIDC issuer) checked against a trust config given explicitly, built here from the
trusted root sigstore-python ships in its package, as sigstore's own tests do with theirs.

Signing cannot reach Fulcio or Rekor here. What runs: the ambient GitHub Actions token
request (a loopback stand-in for the Actions token service, with the request token as
bearer and audience=sigstore), the CSR sent to "Fulcio" (a loopback stand-in named in the
trust config's signing config) with the OIDC token as bearer, and sigstore's check of the
certificate it gets back (one without an SCT from a CT log the trust root knows: refused).
What does not run: a real Fulcio issuing a certificate with an SCT, the Rekor entry, the
timestamp authority, and therefore the verification of a bundle this tool signed keyless.
"""

from __future__ import annotations

import base64
import datetime
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import model_signing
import pytest
import sigstore
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ckpt_action.checkpoint.signing import GITHUB_ISSUER, SIGNATURE_NAME, SignatureError, SigningConfig
from ckpt_action.checkpoint.verifying import VerifyConfig, repo_only
from ckpt_action.errors import InputError
from tests.helpers.proxying import POLL_S
from tests.helpers.signing_helpers import dir_digests

RECORDED = Path(__file__).parents[1] / "data" / "keyless"
RECORDED_IDENTITY = "stefanb@us.ibm.com"
RECORDED_ISSUER = "https://sigstore.verify.ibm.com/oauth2"
_STORE = Path(sigstore.__file__).parent / "_store" / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev"


def trust_config(where: Path, signing_urls: str | None = None) -> Path:
    """A ClientTrustConfig: Sigstore's public trusted root, and its signing config (with
    every service moved to ``signing_urls`` when given)."""
    signing = json.loads((_STORE / "signing_config.v0.2.json").read_text())
    if signing_urls:
        for kind, path in (("caUrls", ""), ("oidcUrls", "/auth"), ("rekorTlogUrls", ""),
                           ("tsaUrls", "/api/v1/timestamp")):
            for svc in signing[kind]:
                svc["url"] = signing_urls + path
    doc = {"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
           "trustedRoot": json.loads((_STORE / "trusted_root.json").read_text()), "signingConfig": signing}
    path = where / "trust_config.json"
    path.write_text(json.dumps(doc))
    return path


def recorded_digests() -> dict[str, str]:
    return dir_digests(RECORDED)


# --------------------------------------------------------------------------- verification, offline


def test_a_recorded_keyless_bundle_verifies_offline_with_an_explicit_trust_config(tmp_path: Path) -> None:
    trust = trust_config(tmp_path)
    v = VerifyConfig.from_options(verify_identity=RECORDED_IDENTITY, verify_issuer=RECORDED_ISSUER,
                                  trust_config=trust)
    assert v is not None
    res = v.load().verify((RECORDED / SIGNATURE_NAME).read_bytes(), recorded_digests())
    assert res.signer == RECORDED_IDENTITY
    # model-signing's own verifier agrees on the same inputs.
    model_signing.verifying.Config().use_sigstore_verifier(
        identity=RECORDED_IDENTITY, oidc_issuer=RECORDED_ISSUER, trust_config=trust).verify(
        RECORDED, RECORDED / SIGNATURE_NAME)


@pytest.mark.parametrize(("identity", "issuer"), [
    ("someone@example.com", RECORDED_ISSUER),
    (RECORDED_IDENTITY, GITHUB_ISSUER),
    ("https://github.com/stefanb/model", RECORDED_ISSUER),  # a repo pin: this certificate names no repo
])
def test_another_identity_or_issuer_is_refused(tmp_path: Path, identity: str, issuer: str) -> None:
    v = VerifyConfig(identity=identity, issuer=issuer, trust_config=trust_config(tmp_path)).load()
    with pytest.raises(SignatureError, match="does not verify against the identity"):
        v.verify((RECORDED / SIGNATURE_NAME).read_bytes(), recorded_digests())


def test_a_changed_file_under_a_keyless_signature_is_named(tmp_path: Path) -> None:
    v = VerifyConfig(identity=RECORDED_IDENTITY, issuer=RECORDED_ISSUER, trust_config=trust_config(tmp_path)).load()
    digests = recorded_digests() | {"signme-2": "00" * 32}
    with pytest.raises(SignatureError, match="'signme-2' changed after signing"):
        v.verify((RECORDED / SIGNATURE_NAME).read_bytes(), digests)


def test_a_trust_root_that_does_not_hold_the_signing_ca_refuses(tmp_path: Path) -> None:
    path = trust_config(tmp_path)
    doc = json.loads(path.read_text())
    staging = _STORE.parent / "https%3A%2F%2Ftuf-repo-cdn.sigstage.dev" / "trusted_root.json"
    doc["trustedRoot"]["certificateAuthorities"] = json.loads(staging.read_text())["certificateAuthorities"]
    path.write_text(json.dumps(doc))
    v = VerifyConfig(identity=RECORDED_IDENTITY, issuer=RECORDED_ISSUER, trust_config=path).load()
    with pytest.raises(SignatureError, match="does not verify"):
        v.verify((RECORDED / SIGNATURE_NAME).read_bytes(), recorded_digests())


def test_repo_only_identities() -> None:
    assert repo_only("https://github.com/org/repo") == "org/repo"
    assert repo_only("https://github.com/org/repo/") == "org/repo"
    assert repo_only("https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main") is None
    assert repo_only("https://github.com/org") is None
    assert repo_only("someone@example.com") is None


# --------------------------------------------------------------------------- signing, up to Fulcio


class _Stand(BaseHTTPRequestHandler):
    """The Actions token service and "Fulcio", on loopback; records what reached them."""

    seen: list[tuple[str, str, dict[str, str], bytes]]
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
    id_token: str

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, dict(self.headers), b""))
        if self.path.startswith("/token"):
            self._answer(200, {"value": self.id_token})
        else:
            self._answer(404, {"message": "not here"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append(("POST", self.path, dict(self.headers), body))
        if self.path != "/api/v2/signingCert":
            self._answer(404, {"message": "not here"})
            return
        csr = x509.load_pem_x509_csr(base64.b64decode(json.loads(body)["certificateSigningRequest"]))
        ca_cert, ca_key = self.ca
        now = datetime.datetime.now(datetime.timezone.utc)
        leaf = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca_cert.subject)
                .public_key(csr.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + datetime.timedelta(minutes=10))
                .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(
                    "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main")]), critical=True)
                .sign(ca_key, hashes.SHA256()))
        pem = serialization.Encoding.PEM
        self._answer(201, {"signedCertificateEmbeddedSct": {"chain": {"certificates": [
            leaf.public_bytes(pem).decode(), ca_cert.public_bytes(pem).decode()]}}})


@pytest.fixture
def stand_ins() -> Iterator[tuple[str, list, str]]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "not fulcio")])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
               .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .sign(ca_key, hashes.SHA256()))
    t = int(time.time())
    id_token = jwt.encode({"iss": GITHUB_ISSUER, "aud": "sigstore", "sub": "repo:org/repo:ref:refs/heads/main",
                           "iat": t, "nbf": t, "exp": t + 600,
                           "job_workflow_ref": "org/repo/.github/workflows/release.yml@refs/heads/main"},
                          "not-a-real-secret-key-but-long-enough", algorithm="HS256")
    seen: list = []
    handler = type("Stand", (_Stand,), {"seen": seen, "ca": (ca_cert, ca_key), "id_token": id_token})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen, id_token
    finally:
        server.shutdown()
        server.server_close()


def test_keyless_signing_runs_up_to_fulcio_and_checks_its_answer(tmp_path: Path, stand_ins, monkeypatch) -> None:
    url, seen, id_token = stand_ins
    # sigstore's ambient detection (the `id` package) reads os.environ itself.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", f"{url}/token?api-version=2.0")
    monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-token")
    config = SigningConfig.from_options(sign_keyless=True, trust_config=trust_config(tmp_path, url))
    assert config is not None
    signer = config.load()
    with pytest.raises(SignatureError, match="keyless signing failed at Sigstore") as failed:
        signer.sign({"model.safetensors": "ab" * 32, "ckpt-manifest.json": "cd" * 32}, "release")
    token_req = [s for s in seen if s[1].startswith("/token")]
    assert token_req and "audience=sigstore" in token_req[0][1]
    assert token_req[0][2]["Authorization"] == "bearer request-token"
    fulcio = [s for s in seen if s[1] == "/api/v2/signingCert"]
    assert len(fulcio) == 1, seen
    assert fulcio[0][2]["Authorization"] == f"Bearer {id_token}"
    csr = x509.load_pem_x509_csr(base64.b64decode(json.loads(fulcio[0][3])["certificateSigningRequest"]))
    assert csr.is_signature_valid and isinstance(csr.public_key(), ec.EllipticCurvePublicKey)
    # The certificate came back without an SCT from a known CT log: refused, nothing went on to Rekor.
    assert "does not contain a signed certificate timestamp" in str(failed.value)
    assert not [s for s in seen if "/api/v1/log" in s[1] or "/timestamp" in s[1]]


def test_keyless_signing_without_the_id_token_says_what_the_workflow_needs(monkeypatch) -> None:
    for name in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    config = SigningConfig.from_options(sign_keyless=True)
    assert config is not None
    with pytest.raises(InputError, match=r"the workflow needs `permissions: id-token: write`"):
        config.load()
    with pytest.raises(InputError, match="ACTIONS_ID_TOKEN_REQUEST_TOKEN unset"):
        config.load(env={"ACTIONS_ID_TOKEN_REQUEST_URL": "http://127.0.0.1:9/token"})


def test_an_unusable_trust_config_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "trust.json"
    bad.write_text('{"mediaType": "nope"}')
    with pytest.raises(InputError, match=r"sigstore_trust_config= cannot be used: .*mediaType"):
        VerifyConfig(identity=RECORDED_IDENTITY, issuer=RECORDED_ISSUER, trust_config=bad).load()
    with pytest.raises(InputError, match="sigstore_trust_config=: Sigstore trust config not found"):
        SigningConfig(keyless=True, trust_config=tmp_path / "missing.json").load(
            env={"ACTIONS_ID_TOKEN_REQUEST_URL": "http://127.0.0.1:9/t", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"})


def _actions_cert(repo: str, issuer: str = GITHUB_ISSUER) -> x509.Certificate:
    """A certificate with the extensions Fulcio writes for a GitHub Actions identity."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    oid = x509.ObjectIdentifier
    return (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(x509.Name([]))
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(minutes=10))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(
                f"https://github.com/{repo}/.github/workflows/release.yml@refs/heads/main")]), critical=True)
            .add_extension(x509.UnrecognizedExtension(oid("1.3.6.1.4.1.57264.1.1"), issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(oid("1.3.6.1.4.1.57264.1.5"), repo.encode()), critical=False)
            .sign(key, hashes.SHA256()))


def test_a_repo_pin_accepts_any_workflow_of_that_repo_and_nothing_else() -> None:
    from sigstore.errors import VerificationError

    from ckpt_action.checkpoint.verifying import identity_policy

    identity_policy("https://github.com/org/repo", GITHUB_ISSUER).verify(_actions_cert("org/repo"))
    for cert in (_actions_cert("org/other"), _actions_cert("org/repo", "https://evil.example")):
        with pytest.raises(VerificationError):
            identity_policy("https://github.com/org/repo", GITHUB_ISSUER).verify(cert)
    exact = "https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"
    identity_policy(exact, GITHUB_ISSUER).verify(_actions_cert("org/repo"))
    with pytest.raises(VerificationError):
        identity_policy(exact.replace("main", "dev"), GITHUB_ISSUER).verify(_actions_cert("org/repo"))
