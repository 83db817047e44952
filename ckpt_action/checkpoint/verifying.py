"""Checking ``model.sig`` against a trusted key, CA or Sigstore identity, and against the
digests of the bytes at hand (downloaded and hashed once, as pull does for the manifest).

The bundle is checked by model-signing's own verifiers (key, certificate chain) or by
sigstore's (keyless, with an identity policy); what they vouch for (every file's sha256) is
then compared with what was downloaded: a file added, removed or changed after signing is
named. Nothing here reads the checkpoint's files.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.signing import (
    GITHUB_ISSUER,
    SIGNATURE_NAME,
    Names,
    SignatureError,
    _api_name,
    _read_pem,
    certificate_identity,
    certificate_problem,
    key_fingerprint,
    read_trust_config,
)
from ckpt_action.errors import InputError, param, quoted

_GITHUB = "https://github.com/"


@dataclass(frozen=True)
class VerifyConfig:
    """Whom to trust: a public key, a CA chain, or a Sigstore identity and issuer."""

    key: Path | None = None
    certificate_chain: tuple[Path, ...] = ()
    identity: str | None = None
    issuer: str | None = None
    trust_config: Path | None = None
    """A Sigstore ClientTrustConfig JSON (identity only); None means Sigstore's public instance."""
    min_step: int | None = None
    """Refuse a checkpoint whose signed step is below this (a signed older release copied
    back verifies: a signature does not prove it is the newest)."""
    require_provenance: bool = False
    """Refuse a checkpoint without a signed provenance statement (one signed by another
    tool verifies wherever it is copied)."""

    @classmethod
    def from_options(cls, *, verify_key: str | os.PathLike[str] | None = None,
                     verify_certificate_chain: str | os.PathLike[str] | None = None,
                     verify_identity: str | None = None, verify_issuer: str | None = None,
                     trust_config: str | os.PathLike[str] | None = None, verify_min_step: int | None = None,
                     verify_require_provenance: bool = False,
                     names: Names = _api_name) -> VerifyConfig | None:
        """What the options ask to verify with (None: no signature check), checked before
        any request."""
        given = [bool(verify_key), bool(verify_certificate_chain), bool(verify_identity or verify_issuer)]
        for name, value in (("verify_min_step", verify_min_step is not None),
                            ("verify_require_provenance", verify_require_provenance)):
            if value and not any(given):
                raise InputError(f"{names(name)} needs {names('verify_key')}, {names('verify_certificate_chain')} "
                                 f"or {names('verify_identity')}: it checks what the signature vouches for")
        if verify_min_step is not None and (not isinstance(verify_min_step, int) or isinstance(verify_min_step, bool)
                                            or verify_min_step < 0):
            raise InputError(f"{names('verify_min_step')} must be a step, 0 or more")
        config = cls._which(verify_key=verify_key, verify_certificate_chain=verify_certificate_chain,
                            verify_identity=verify_identity, verify_issuer=verify_issuer, trust_config=trust_config,
                            names=names)
        return config and dataclasses.replace(config, min_step=verify_min_step,
                                              require_provenance=verify_require_provenance)

    @classmethod
    def _which(cls, *, verify_key: str | os.PathLike[str] | None,
               verify_certificate_chain: str | os.PathLike[str] | None, verify_identity: str | None,
               verify_issuer: str | None, trust_config: str | os.PathLike[str] | None,
               names: Names) -> VerifyConfig | None:
        given = [bool(verify_key), bool(verify_certificate_chain), bool(verify_identity or verify_issuer)]
        if sum(given) > 1:
            raise InputError(f"give one of {names('verify_key')}, {names('verify_certificate_chain')} or "
                             f"{names('verify_identity')}: a signature is checked one way")
        if verify_key:
            return cls(key=Path(verify_key))
        if verify_certificate_chain:
            return cls(certificate_chain=(Path(verify_certificate_chain),))
        if not verify_identity:
            if verify_issuer:
                raise InputError(f"{names('verify_issuer')} needs {names('verify_identity')}: the identity the "
                                 "issuer vouches for")
            return None
        if not verify_issuer:
            raise InputError(f"{names('verify_identity')} needs {names('verify_issuer')} (for GitHub Actions: "
                             f"{GITHUB_ISSUER})")
        if not verify_identity.isprintable() or not verify_issuer.isprintable():
            raise InputError(f"{names('verify_identity')} and {names('verify_issuer')} must be printable text")
        return cls(identity=verify_identity, issuer=verify_issuer,
                   trust_config=Path(trust_config) if trust_config else None)

    @property
    def describes(self) -> str:
        """Whom this config trusts, for messages."""
        if self.key is not None:
            return f"the key {self.key.name}"
        if self.certificate_chain:
            return f"the CA in {self.certificate_chain[0].name}"
        return f"the identity {quoted(self.identity)} from {quoted(self.issuer)}"

    def load(self, names: Names = _api_name) -> Verifier:
        """Read the key, the CA or the trust root now, before any download."""
        return Verifier(self, _verifier(self, names))


def repo_only(identity: str) -> str | None:
    """``ORG/REPO`` when the identity pins only a GitHub repo (``https://github.com/ORG/REPO``,
    no workflow path): any workflow of that repo is accepted."""
    if not identity.startswith(_GITHUB):
        return None
    rest = identity[len(_GITHUB):].rstrip("/")
    parts = rest.split("/")
    return rest if len(parts) == 2 and all(parts) and "@" not in rest else None


def identity_policy(identity: str, issuer: str) -> Any:
    """sigstore's policy for ``--verify-identity``/``--verify-issuer``: the certificate's
    identity exactly, or for a repo alone the repository Fulcio certified (its GitHub
    workflow repository extension) from that issuer."""
    from sigstore.verify import policy

    repo = repo_only(identity)
    if repo:
        return policy.AllOf([policy.OIDCIssuer(issuer), policy.GitHubWorkflowRepository(repo)])
    return policy.Identity(identity=identity, issuer=issuer)


def _verifier(config: VerifyConfig, names: Names) -> Any:
    if config.key is not None:
        return _key_verifier(config.key, names)
    if config.certificate_chain:
        return _chain_verifier(config.certificate_chain, names)
    return _identity_verifier(config)


def _key_verifier(path: Path, names: Names) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from model_signing._signing import sign_ec_key

    try:
        key = serialization.load_pem_public_key(_read_pem(path, "verify_key", "public key"))
    except ValueError as exc:
        raise InputError(f"{names('verify_key')} is not a public key PEM") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in ("secp256r1", "secp384r1",
                                                                               "secp521r1"):
        raise InputError(f"{names('verify_key')} must be an elliptic-curve public key on P-256, P-384 or P-521")

    class KeyVerifier(sign_ec_key.Verifier):
        """model-signing's key verifier over a key already read (bounded, checked)."""

        def __init__(self, public_key: Any) -> None:
            self._public_key = public_key
            self.fingerprint = key_fingerprint(public_key)

    return KeyVerifier(key)


def _chain_verifier(paths: tuple[Path, ...], names: Names) -> Any:
    from cryptography import x509
    from model_signing._signing import sign_certificate
    from OpenSSL import crypto

    try:
        cas = x509.load_pem_x509_certificates(b"".join(_read_pem(p, "verify_certificate_chain", "CA certificates")
                                                       for p in paths))
    except ValueError as exc:
        raise InputError(f"{names('verify_certificate_chain')} holds no readable certificate") from exc

    class ChainVerifier(sign_certificate.Verifier):
        """model-signing's certificate verifier over CA certificates already read (bounded),
        with the chain checked at the current time and a code-signing leaf required
        (:func:`~ckpt_action.checkpoint.signing.certificate_problem`): its own checks the
        chain at the leaf's own not-before, so an expired leaf passes, and takes any leaf
        allowing digital signatures, a TLS server certificate of the same CA too."""

        def __init__(self, roots: list[Any]) -> None:
            self._log_fingerprints = False
            self._store = crypto.X509Store()  # no set_time: OpenSSL checks at the current time
            for cert in roots:
                self._store.add_cert(crypto.X509.from_cryptography(cert))

        def _verify_certificates(self, verification_material: Any, log_fingerprints: bool = False) -> Any:
            certs = [x509.load_der_x509_certificate(c.raw_bytes)
                     for c in verification_material.x509_certificate_chain.certificates]
            problem = certificate_problem(certs[0])
            if problem:
                raise ValueError(problem)
            crypto.X509StoreContext(self._store, crypto.X509.from_cryptography(certs[0]),
                                    [crypto.X509.from_cryptography(c) for c in certs[1:]]).verify_certificate()
            return certs[0].public_key()

    return ChainVerifier(cas)


def _identity_verifier(config: VerifyConfig) -> Any:
    from model_signing._signing import signing as ms_signing
    from sigstore import errors as sigstore_errors
    from sigstore import models as sigstore_models
    from sigstore.verify import Verifier as SigstoreVerifier

    assert config.identity is not None and config.issuer is not None
    try:
        trust = (sigstore_models.ClientTrustConfig.from_json(read_trust_config(config.trust_config))
                 if config.trust_config else sigstore_models.ClientTrustConfig.production())
    except (OSError, ValueError) as exc:
        raise InputError(f"{param('sigstore_trust_config')} cannot be used: {quoted(str(exc), 200)}",
                         param="sigstore_trust_config") from exc
    except sigstore_errors.Error as exc:  # the public trust root, fetched through TUF
        raise SignatureError(f"Sigstore's trust root cannot be had: {quoted(str(exc), 200)}") from exc
    rule = identity_policy(config.identity, config.issuer)

    class IdentityVerifier(ms_signing.Verifier):
        """model-signing's Sigstore verifier with our policy: its own matches one exact
        identity, which cannot pin a repo alone."""

        def _verify_signed_content(self, signature: Any) -> tuple[str, bytes]:
            return sigstore.verify_dsse(bundle=signature.bundle, policy=rule)

    sigstore = SigstoreVerifier(trusted_root=trust.trusted_root)
    return IdentityVerifier()


@dataclass(frozen=True)
class Verified:
    """A signature that verified: who made it and what it vouches for."""

    signer: str
    """The key fingerprint, the certificate's subject or the Sigstore identity."""
    digests: dict[str, str]
    """Every file it covers (relative path -> sha256)."""

    def covers(self, actual: Mapping[str, str]) -> None:
        """Raise unless these are exactly the signed files with the signed digests
        (relative path -> sha256 of the bytes at hand, ``model.sig`` left out)."""
        _compare(self.digests, actual)

    def covers_some(self, actual: Mapping[str, str]) -> None:
        """Raise unless each of these files (a pull of some files of the folder) is signed with
        this digest; the folder as a whole was checked by :meth:`covers` against its manifest."""
        _compare({p: self.digests[p] for p in actual if p in self.digests}, actual)


@dataclass(frozen=True)
class Verifier:
    config: VerifyConfig
    impl: Any

    def open(self, signature: bytes | None) -> Verified:
        """Check ``model.sig`` (None: the folder has none) against the trusted key, CA or
        identity; :class:`SignatureError` names what failed (unsigned, another signer)."""
        if signature is None:
            raise SignatureError(f"the checkpoint is not signed (no {SIGNATURE_NAME}): it cannot be "
                                 f"verified against {self.config.describes}")
        bundle = self._parse(signature)
        return Verified(self._signer(bundle), self._check(bundle))

    def verify(self, signature: bytes | None, actual: Mapping[str, str]) -> Verified:
        """:meth:`open`, then :meth:`Verified.covers`: a file added, removed or changed after
        signing is named."""
        verified = self.open(signature)
        verified.covers(actual)
        return verified

    def _parse(self, data: bytes) -> Any:
        try:
            if self.config.identity is not None:
                from model_signing._signing import sign_sigstore
                from sigstore.models import Bundle

                return sign_sigstore.Signature(Bundle.from_json(data))
            return _pb_signature(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SignatureError(f"{SIGNATURE_NAME} is not a Sigstore bundle this tool can read "
                                 f"({type(exc).__name__})") from exc

    def _check(self, signature: Any) -> dict[str, str]:
        """The files and digests the signature vouches for, once it verifies."""
        from cryptography.exceptions import InvalidSignature
        from OpenSSL.crypto import X509StoreContextError
        from sigstore.errors import VerificationError

        try:
            manifest = self.impl.verify(signature)
        except (InvalidSignature, X509StoreContextError, VerificationError, ValueError, KeyError, TypeError,
                IndexError, AttributeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SignatureError(f"{SIGNATURE_NAME} does not verify against {self.config.describes}: "
                                 f"{quoted(reason, 200)}") from exc
        params = manifest.serialization_type
        if params.get("method") != "files" or params.get("hash_type") != "sha256":
            raise SignatureError(f"{SIGNATURE_NAME} is signed with the {quoted(params.get('method'))}/"
                                 f"{quoted(params.get('hash_type'))} serialization: this tool checks files/sha256")
        return {rd.identifier: rd.digest.digest_hex for rd in manifest.resource_descriptors()}

    def _signer(self, signature: Any) -> str:
        if self.config.key is not None:
            return f"key {self.impl.fingerprint}"
        from cryptography import x509

        if self.config.identity is not None:
            return certificate_identity(signature.bundle.signing_certificate)
        der = signature.bundle.verification_material.x509_certificate_chain.certificates[0].raw_bytes
        return certificate_identity(x509.load_der_x509_certificate(der))


def _pb_signature(data: bytes) -> Any:
    """model-signing's ``sign_sigstore_pb.Signature.read``, from bytes instead of a path
    (the bytes were downloaded and bounded; they need not touch the disk)."""
    from model_signing._signing import sign_sigstore_pb
    from sigstore_models.bundle import v1 as bundle_pb

    parsed = json.loads(data)
    material = parsed["verificationMaterial"]
    material.setdefault("tlogEntries", [])
    if "publicKey" in material:
        material["publicKey"].setdefault("hint", None)
        for k in ("rawBytes", "keyDetails"):
            material["publicKey"].pop(k, None)
    return sign_sigstore_pb.Signature(bundle_pb.Bundle.from_dict(parsed))


def _compare(signed: Mapping[str, str], actual: Mapping[str, str]) -> None:
    problems = [f"{quoted(p)} was added after signing" for p in sorted(actual) if p not in signed]
    problems += [f"{quoted(p)} was removed after signing" for p in sorted(signed) if p not in actual]
    problems += [f"{quoted(p)} changed after signing" for p in sorted(signed) if p in actual and
                 signed[p] != actual[p]]
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise SignatureError(f"the signature does not cover these bytes: {'; '.join(problems[:5])}{more}")
