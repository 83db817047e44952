"""The option groups the commands share, each defined once: where the Hub is
(:class:`Connection`), how push and promote sign (:class:`Signing`), what pull and
latest require of a signature (:class:`Verification`), and what prune keeps
(:class:`Retention`).

Typed, frozen, and plain data: nothing is read or checked here (the client loads and checks
a group before its command's first request, and its errors name the fields, which are the
parameters' own names: ``signing_key=`` in Python, ``--signing-key`` on the command line,
input ``signing-key`` in the action). The :class:`~ckpt_action.client.Client`, the CLI's
shared options, the action's input table and the integrations all build these.

>>> Signing(signing_key="key.pem").wanted, Signing().wanted
(True, False)
>>> Verification.from_keywords(verify_key="pub.pem", sigstore_trust_config=None).verify_key
'pub.pem'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Connection:
    """Where the Hub is and how hard to try, given once: ``endpoint`` (else ``HF_ENDPOINT``,
    else the Hub), ``token`` (else ``HF_TOKEN`` or a token saved by ``hf auth login``),
    ``timeout`` and ``retries`` (else ``CKPT_TIMEOUT``, ``CKPT_RETRIES``), and ``auth``:
    ``auto`` (None: a token given, else keyless when the job can mint an OIDC id token, else
    none), ``token`` or ``oidc`` (a short-lived token exchanged per repo). The environment
    is read when a command runs, not here."""

    endpoint: str | None = None
    token: str | None = field(default=None, repr=False)
    timeout: float | None = None
    retries: int | None = None
    auth: str | None = None


class _Group:
    """What the groups share: built from (and spelled as) the commands' keywords."""

    @classmethod
    def from_keywords(cls, **keywords: Any) -> Any:
        """The group from the commands' keywords; an empty string counts as not given."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: (None if v == "" else v) for k, v in keywords.items() if k in names})

    def keywords(self) -> dict[str, Any]:
        """The group as the commands' keywords."""
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Signing(_Group):
    """How push and promote sign ``model.sig`` and the provenance statement: a key
    (``signing_key``, its password only from ``CKPT_SIGNING_KEY_PASSWORD``), with its
    certificate and chain, or keyless with Sigstore (``sign_keyless``, in GitHub Actions
    with ``permissions: id-token: write``). Empty: unsigned."""

    signing_key: PathLike | None = None
    signing_certificate: PathLike | None = None
    signing_chain: PathLike | Sequence[PathLike] | None = None
    sign_keyless: bool = False
    sigstore_trust_config: PathLike | None = None

    @property
    def wanted(self) -> bool:
        """Whether anything asks for a signature."""
        return bool(self.signing_key or self.signing_certificate or self.signing_chain or self.sign_keyless)


@dataclass(frozen=True)
class Verification(_Group):
    """What pull and latest require of ``model.sig``: a public key, a CA certificate chain,
    or a Sigstore identity and issuer; ``verify_min_step`` refuses a signed step below it (a
    rollback), ``verify_require_provenance`` a folder without a signed provenance statement.
    Empty: no signature check."""

    verify_key: PathLike | None = None
    verify_certificate_chain: PathLike | None = None
    verify_identity: str | None = None
    verify_issuer: str | None = None
    sigstore_trust_config: PathLike | None = None
    verify_min_step: int | None = None
    verify_require_provenance: bool = False

    @property
    def wanted(self) -> bool:
        """Whether anything asks for a check."""
        return bool(self.verify_key or self.verify_certificate_chain or self.verify_identity or self.verify_issuer
                    or self.verify_min_step is not None or self.verify_require_provenance)


@dataclass(frozen=True)
class Retention(_Group):
    """What prune keeps (the Trainer callback's prune after each push too), as the union of
    what each rule keeps: ``keep_last`` the newest K ``checkpoint-N``, ``keep_every`` every
    one whose step is a multiple of N, ``keep_best`` (``METRIC:min|max[:K]``, K default 1)
    the K best by that metric of their manifests. Empty: nothing to keep by, an InputError
    for prune.

    >>> Retention(keep_last=2, keep_best="eval_loss:min").wanted, Retention().wanted
    (True, False)
    """

    keep_last: int | None = None
    keep_every: int | None = None
    keep_best: str | None = None

    @property
    def wanted(self) -> bool:
        """Whether any rule is given."""
        return self.keep_last is not None or self.keep_every is not None or self.keep_best is not None
