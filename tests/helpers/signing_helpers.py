"""Keys, a CA and signed folders made in the test, with ``cryptography`` (no fixture files)."""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ckpt_action.checkpoint.signing import SIGNATURE_NAME

CODE_SIGNING = ExtendedKeyUsageOID.CODE_SIGNING
SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path


def make_key(where: Path, name: str = "signing", *, curve: ec.EllipticCurve | None = None,
             password: bytes | None = None) -> KeyPair:
    key = ec.generate_private_key(curve or ec.SECP256R1())
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    priv = where / f"{name}.pem"
    pub = where / f"{name}.pub.pem"
    priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    return KeyPair(priv, pub)


@dataclass(frozen=True)
class Pki:
    root: Path
    """The root CA certificate (what a verifier trusts)."""
    chain: Path
    """The intermediate CA certificate (what the signer ships with its certificate)."""
    key: Path
    certificate: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example Org"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey, *,
          ca: bool, usage: x509.ObjectIdentifier | None = None, valid: tuple[datetime.datetime, datetime.datetime]
          | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = valid or (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=not ca, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                                            crl_sign=ca, encipher_only=False, decipher_only=False), critical=True))
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(where: Path, leaf: str = "release-bot", *, usage: x509.ObjectIdentifier | None = CODE_SIGNING,
             valid: tuple[datetime.datetime, datetime.datetime] | None = None) -> Pki:
    """Root CA -> intermediate CA -> a signing certificate with its key: a code-signing one
    valid now unless ``usage`` (its one extended key usage, None for none) or ``valid``
    (not before, not after) say otherwise."""
    root_key, mid_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    # The CAs are valid since 2019, so a leaf of any period in the tests chains to valid CAs.
    ca_valid = (datetime.datetime(2019, 1, 1, tzinfo=datetime.timezone.utc),
                datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1))
    root = _cert("Test Root CA", root_key, "Test Root CA", root_key, ca=True, valid=ca_valid)
    mid = _cert("Test Intermediate CA", mid_key, "Test Root CA", root_key, ca=True, valid=ca_valid)
    cert = _cert(leaf, leaf_key, "Test Intermediate CA", mid_key, ca=False, usage=usage, valid=valid)
    pem = serialization.Encoding.PEM
    paths = Pki(where / "root.pem", where / "chain.pem", where / f"{leaf}.key.pem", where / f"{leaf}.pem")
    paths.root.write_bytes(root.public_bytes(pem))
    paths.chain.write_bytes(mid.public_bytes(pem))
    paths.certificate.write_bytes(cert.public_bytes(pem))
    paths.key.write_bytes(leaf_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    return paths


def make_model(where: Path, files: dict[str, bytes] | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for rel, data in (files or {"model.safetensors": b"weights" * 100, "config.json": b"{}",
                               "sub/tokenizer.json": b'{"v": 1}'}).items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_bytes(data)
    return where


def dir_digests(root: Path) -> dict[str, str]:
    """sha256 of every file under root but the signature (what push and pull know)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != SIGNATURE_NAME}
