"""Signed checkpoints: ``model.sig`` in the OpenSSF model-signing format, from digests we have.

A signature is a Sigstore bundle (v0.3) holding a DSSE envelope over an in-toto statement
whose predicate (``https://model_signing/signature/v1.0``) lists every file of the folder
with its sha256, exactly as ``model-signing`` 1.1.1 writes it for its "files" serialization.
Push already hashed every file for the manifest, so the statement is built from those
digests (model-signing's own ``Manifest``/``Payload``/signer classes, fed in memory): no
file is read a second time. Verification checks the bundle with model-signing's verifiers,
then compares the signed digests with the digests of the bytes actually downloaded.

``model_signing`` (and sigstore, cryptography) is imported only inside the functions that
sign or verify: commands that do neither never load it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.localfiles import read_bounded
from ckpt_action.errors import InputError, IntegrityError, param, quoted

SIGNATURE_NAME = "model.sig"
"""The format's usual name; the one file of a folder the signature does not cover."""
PASSWORD_ENV = "CKPT_SIGNING_KEY_PASSWORD"  # noqa: S105 (the variable's name, not a password)
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
GITHUB_ID_TOKEN_ENV = ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
ID_TOKEN_HINT = "the workflow needs `permissions: id-token: write` for keyless signing"  # noqa: S105
# What model-signing's CLI leaves out of a signed dir besides the signature; recorded in the
# statement as it does, so its verifier (which ignores them by default) hashes what we signed.
_GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")
_PEM_LIMIT = 1024 * 1024  # a key, certificate chain or trust config file; anything bigger is not one


class SignatureError(IntegrityError):
    """A signature is missing, does not verify, or does not cover exactly these bytes."""


def _api_name(keyword: str) -> str:
    return f"{keyword}="


Names = Callable[[str], str]
"""How the door spells an option (``signing_key`` -> ``--signing-key``, ``signing_key=``,
``signing-key``), so each message says what to change in the caller's own words."""


def _read_pem(path: Path, name: str, what: str = "PEM file") -> bytes:
    """A key or certificate file the option ``name`` gave: a regular file, bounded, PEM."""
    data = read_bounded(path, _PEM_LIMIT, name, what, regular_hint="give the PEM file itself",
                        large_hint="too large for a key or certificate PEM")
    if b"-----BEGIN" not in data:
        raise InputError(f"{param(name)}: {what} {quoted(str(path))} is not a PEM file", param=name)
    return data


def read_trust_config(path: Path) -> str:
    """The text of ``--sigstore-trust-config``: a regular file, bounded (a ClientTrustConfig
    is a few kilobytes), UTF-8."""
    data = read_bounded(path, _PEM_LIMIT, "sigstore_trust_config", "Sigstore trust config",
                        regular_hint="give the ClientTrustConfig JSON file itself",
                        large_hint="too large for a Sigstore trust config")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{param('sigstore_trust_config')}: Sigstore trust config {quoted(str(path))} is not"
                         " UTF-8 JSON", param="sigstore_trust_config") from None


def _warn_if_readable_by_others(path: Path) -> None:
    """A private key others may read is warned about, as ssh does (not refused: a CI secret
    written with the runner's umask is such a file, and the job may be the only user)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if os.name == "posix" and mode & 0o077:
        # The whole path (escaped, not cut at quoted()'s usual 80 characters): it is what to chmod.
        logging.getLogger("ckpt_action").warning(
            "signing key %s is readable by group or others (mode %s): chmod 600 it", quoted(str(path), limit=4096),
            oct(stat.S_IMODE(mode)))


# --------------------------------------------------------------------------- signing


@dataclass(frozen=True)
class SigningConfig:
    """What to sign with: a key, a key with its certificate and chain, or keyless Sigstore."""

    key: Path | None = None
    certificate: Path | None = None
    chain: tuple[Path, ...] = ()
    keyless: bool = False
    trust_config: Path | None = None
    """A Sigstore ClientTrustConfig JSON (keyless only); None means Sigstore's public instance."""

    @classmethod
    def from_options(cls, *, signing_key: str | os.PathLike[str] | None = None,
                     signing_certificate: str | os.PathLike[str] | None = None,
                     signing_chain: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
                     sign_keyless: bool = False, trust_config: str | os.PathLike[str] | None = None,
                     names: Names = _api_name) -> SigningConfig | None:
        """The signer the options ask for (None: do not sign), checked before any request."""
        chain = (signing_chain,) if isinstance(signing_chain, (str, os.PathLike)) else tuple(signing_chain or ())
        if sign_keyless:
            if signing_key or signing_certificate or chain:
                raise InputError(f"{names('sign_keyless')} does not go with {names('signing_key')}: "
                                 "sign with a key or keyless, not both")
            return cls(keyless=True, trust_config=Path(trust_config) if trust_config else None)
        if not signing_key:
            if signing_certificate or chain:
                raise InputError(f"{names('signing_certificate')} needs {names('signing_key')} "
                                 "(the certificate's private key)")
            return None
        if bool(signing_certificate) != bool(chain):
            raise InputError(f"{names('signing_certificate')} and {names('signing_chain')} go together: "
                             "the chain holds the CA certificates up to the root the verifier trusts")
        return cls(key=Path(signing_key), certificate=Path(signing_certificate) if signing_certificate else None,
                   chain=tuple(Path(p) for p in chain))

    def load(self, env: Mapping[str, str] | None = None, names: Names = _api_name) -> LoadedSigner:
        """Read the key and certificates (or check the ambient OIDC token) now, so a wrong
        key or a missing ``id-token: write`` fails before anything is uploaded."""
        env = os.environ if env is None else env
        if self.keyless:
            return _keyless_signer(self, env)
        assert self.key is not None
        private_key = _load_private_key(self.key, env, names)
        if self.certificate is None:
            return LoadedSigner(_key_signer(private_key), f"key {key_fingerprint(private_key.public_key())}")
        cert, chain = _load_certificates(self, private_key, names)
        return LoadedSigner(_certificate_signer(private_key, cert, chain), certificate_identity(cert))


@dataclass(frozen=True)
class LoadedSigner:
    """A signer ready to sign (model-signing's ``Signer``) and how a pull will name it."""

    signer: Any
    identity: str
    keyless: bool = False

    def sign(self, digests: Mapping[str, str], model_name: str, also_ignore: Sequence[str] = ()) -> Signed:
        """``model.sig`` for a folder whose files (every one but ``model.sig``, relative
        posix paths) have these sha256 digests. ``also_ignore``: names a copy of the folder
        may hold that are not part of it (a pull's record), recorded so that
        model-signing's verifier skips them too."""
        from model_signing._signing.signing import Payload

        payload = Payload(_manifest(digests, model_name, also_ignore))
        if not self.keyless:
            return Signed(self.signer.sign(payload).bundle.to_json().encode(), self.identity)
        signature = _sign_keyless(self.signer, payload)
        # The identity is what Fulcio certified, known only now.
        return Signed(signature.bundle.to_json().encode(), certificate_identity(signature.bundle.signing_certificate))


@dataclass(frozen=True)
class Signed:
    data: bytes
    """``model.sig``'s bytes."""
    signer: str


def _manifest(digests: Mapping[str, str], model_name: str, also_ignore: Sequence[str] = ()) -> Any:
    """model-signing's in-memory manifest of a dir with these files, as its "files"
    serialization with sha256 would build it by hashing them, and with the ignore paths its
    CLI records (the signature, the git paths); a git path that is a file of the checkpoint
    is signed instead, so nothing the folder holds goes unsigned."""
    from model_signing import manifest as ms_manifest
    from model_signing._hashing.hashing import Digest

    if SIGNATURE_NAME in digests:
        raise ValueError(f"{SIGNATURE_NAME} cannot sign itself")
    tops = {rel.split("/", 1)[0] for rel in digests}
    # Built as its CLI builds it (--ignore-paths, the signature, then the git paths, a frozenset
    # of Paths), so the list comes out in the order model-signing would write in this process.
    ignore = frozenset(pathlib.Path(p) for p in (*also_ignore, SIGNATURE_NAME, *_GIT_PATHS) if p not in tops)
    serialization = ms_manifest._FileSerialization("sha256", False, ignore)
    items = [ms_manifest.FileManifestItem(path=pathlib.PurePosixPath(rel), digest=Digest("sha256", bytes.fromhex(d)))
             for rel, d in digests.items()]
    return ms_manifest.Manifest(model_name, items, serialization)


def _load_private_key(path: Path, env: Mapping[str, str], names: Names) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    data = _read_pem(path, "signing_key", "private key")
    _warn_if_readable_by_others(path)
    password = env.get(PASSWORD_ENV) or None
    try:
        key = serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError as exc:
        if password:
            raise InputError(f"{names('signing_key')} is not encrypted: unset {PASSWORD_ENV}") from exc
        raise InputError(f"{names('signing_key')} is encrypted: put its password in {PASSWORD_ENV}") from exc
    except ValueError as exc:
        if password:
            raise InputError(f"{PASSWORD_ENV} does not decrypt {names('signing_key')} (or it is not a private "
                             "key PEM)") from exc
        raise InputError(f"{names('signing_key')} is not a private key PEM") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in ("secp256r1", "secp384r1",
                                                                                "secp521r1"):
        raise InputError(f"{names('signing_key')} must be an elliptic-curve key on P-256, P-384 or P-521 "
                         "(what the model-signing format supports)")
    return key


def _load_certificates(config: SigningConfig, private_key: Any, names: Names) -> tuple[Any, list[Any]]:
    from cryptography import x509

    assert config.certificate is not None
    try:
        cert = x509.load_pem_x509_certificate(_read_pem(config.certificate, "signing_certificate", "certificate"))
        chain = x509.load_pem_x509_certificates(
            b"".join(_read_pem(p, "signing_chain", "certificate chain") for p in config.chain))
    except ValueError as exc:
        raise InputError(f"{names('signing_certificate')} or {names('signing_chain')} holds no readable "
                         "certificate") from exc
    if cert.public_key() != private_key.public_key():
        raise InputError(f"{names('signing_certificate')} is not the certificate of {names('signing_key')}: "
                         "their public keys differ")
    problem = certificate_problem(cert)
    if problem:  # a verifier would refuse it: say so before anything is pushed
        raise InputError(f"{names('signing_certificate')}: {problem}", param="signing_certificate")
    return cert, chain


def certificate_problem(cert: Any) -> str | None:
    """Why ``cert`` cannot vouch for a model signature now, or None. It must be valid at
    the current time (a key or certificate signature carries no trusted time stamp, so the
    time it was made cannot be proved: an expired certificate no longer vouches for
    anything) and be meant for code signing (extended key usage ``codeSigning``; a TLS server
    certificate of the same CA is not)."""
    import datetime

    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    if now > cert.not_valid_after_utc:
        return f"the signing certificate expired on {cert.not_valid_after_utc:%Y-%m-%d} (checked at the current time)"
    if now < cert.not_valid_before_utc:
        return f"the signing certificate is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = []
    if ExtendedKeyUsageOID.CODE_SIGNING not in usages:
        return "the signing certificate is not a code-signing certificate (no codeSigning extended key usage)"
    try:
        if not cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature:
            return "the signing certificate's key usage does not allow digital signatures"
    except x509.ExtensionNotFound:
        pass
    return None


def _key_signer(private_key: Any) -> Any:
    from model_signing._signing import sign_ec_key

    class KeySigner(sign_ec_key.Signer):
        """model-signing's key signer over a key already loaded (its own loads from a path,
        and hands the password to cryptography as str, which cryptography refuses)."""

        def __init__(self, key: Any) -> None:
            self._private_key = key

    return KeySigner(private_key)


def _certificate_signer(private_key: Any, cert: Any, chain: list[Any]) -> Any:
    from model_signing._signing import sign_certificate

    class CertificateSigner(sign_certificate.Signer):
        """model-signing's certificate signer over a loaded key (its own cannot take a
        password) and loaded certificates."""

        def __init__(self, key: Any, leaf: Any, rest: list[Any]) -> None:
            self._private_key, self._signing_certificate, self._trust_chain = key, leaf, rest

    return CertificateSigner(private_key, cert, chain)


def _keyless_signer(config: SigningConfig, env: Mapping[str, str]) -> LoadedSigner:
    missing = [name for name in GITHUB_ID_TOKEN_ENV if not env.get(name)]
    if missing:
        raise InputError(f"keyless signing found no GitHub Actions OIDC token ({', '.join(missing)} unset): "
                         f"{ID_TOKEN_HINT}")
    from model_signing._signing import sign_sigstore
    from sigstore import models as sigstore_models
    from sigstore import oidc
    from sigstore import sign as sigstore_sign

    class AmbientSigner(sign_sigstore.Signer):
        """model-signing's Sigstore signer that takes the ambient token or fails: its own
        falls back to an interactive browser login, which a CI job cannot answer, and
        fetches that login's OIDC configuration when built."""

        def __init__(self, trust_path: Path | None) -> None:
            trust = (sigstore_models.ClientTrustConfig.from_json(read_trust_config(trust_path)) if trust_path
                     else sigstore_models.ClientTrustConfig.production())
            self._signing_context = sigstore_sign.SigningContext.from_trust_config(trust)
            self._client_id = sign_sigstore._DEFAULT_CLIENT_ID

        def _get_identity_token(self) -> Any:
            try:
                token = oidc.detect_credential(self._client_id)
            except oidc.IdentityError as exc:
                raise SignatureError(f"the GitHub Actions OIDC token could not be fetched ({exc}): "
                                     f"{ID_TOKEN_HINT}") from exc
            if not token:
                raise SignatureError(f"no GitHub Actions OIDC token: {ID_TOKEN_HINT}")
            return oidc.IdentityToken(token, self._client_id)

    from sigstore import errors as sigstore_errors

    try:
        signer = AmbientSigner(config.trust_config)
    except (OSError, ValueError) as exc:
        raise InputError(f"{param('sigstore_trust_config')} cannot be used: {quoted(str(exc), 200)}",
                         param="sigstore_trust_config") from exc
    except sigstore_errors.Error as exc:  # the public trust root, fetched through TUF
        raise SignatureError(f"Sigstore's trust root cannot be had: {quoted(str(exc), 200)}") from exc
    return LoadedSigner(signer, "keyless (GitHub Actions OIDC identity)", keyless=True)


def _sign_keyless(signer: Any, payload: Any) -> Any:
    """Fulcio certifies a fresh key for the OIDC identity, Rekor logs the signature: a
    failure of either (or of their answers' checks) is a failed signature, named."""
    import requests
    from sigstore import errors as sigstore_errors
    from sigstore._internal.fulcio.client import ExpiredCertificate, FulcioClientError

    try:
        return signer.sign(payload)
    except (sigstore_errors.Error, FulcioClientError, ExpiredCertificate, requests.RequestException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SignatureError(f"keyless signing failed at Sigstore: {quoted(reason, 200)}") from exc


def key_fingerprint(public_key: Any) -> str:
    """``sha256:`` of the key's SubjectPublicKeyInfo PEM: the hint model-signing records."""
    from cryptography.hazmat.primitives import serialization

    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(pem).hexdigest()


def certificate_identity(cert: Any) -> str:
    """How a certificate names its holder: the SAN (URI, then email) Sigstore certifies,
    else the subject."""
    from cryptography import x509

    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for kind in (x509.UniformResourceIdentifier, x509.RFC822Name):
            values = san.get_values_for_type(kind)
            if values:
                return str(values[0])
    except x509.ExtensionNotFound:
        pass
    return str(cert.subject.rfc4514_string())
