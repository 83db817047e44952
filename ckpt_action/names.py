"""The name rules: repo ids, folder and ref names, endpoints, and the checks built on them.

Each failure is an :class:`~ckpt_action.errors.InputError` whose message says what to
change. Nothing here touches the network or the disk: checks of a local dir live in
:mod:`ckpt_action.disk`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from ckpt_action.errors import InputError, param, quoted
from ckpt_action.handle import BUCKET_PIN_RE, BUCKET_SCHEME, DEFAULT_ENDPOINT, MAX_STEP, SHA_RE, step_of

# The Hub's own rule (huggingface_hub.utils.validate_repo_id), plus a mandatory owner:
# a bare name would resolve against whoever the token belongs to, which CI jobs
# sharing a checkpoint repo must not depend on.
# Every pattern here is anchored with \A...\Z (and used with fullmatch): "$" alone would let a
# trailing newline through.
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_RE = re.compile(rf"\A{_REPO_PART}/{_REPO_PART}\Z")
_SEGMENT_RE = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9._+=@-]{0,199}\Z")
# A checkpoint-N name whatever N's length: one past MAX_STEP is refused, not pushed as a
# folder the checkpoint readers pass over.
_CHECKPOINT_LIKE_RE = re.compile(r"\Acheckpoint-[0-9]+\Z")
_REF_RE = re.compile(r"\A[A-Za-z0-9._/-]{1,200}\Z")
# What push refuses in a file name as its own policy, although the Hub takes both: control
# characters (newlines included) would confuse a log or a shell, and a backslash is a folder
# separator to Windows clients, which would then write the file somewhere else.
BAD_NAME_RE = re.compile(r"[\x00-\x1f\x7f\\]")
COMMIT_MESSAGE_MAX = 1000
# W&B names. An artifact: a conservative subset of what W&B accepts (it only forbids "/"
# and more than 128 characters) that also keeps ":" out, so ENTITY/PROJECT/NAME:ALIAS
# stays unambiguous. A reference ENTITY/PROJECT/NAME:ALIAS (the entity optional, as W&B
# allows). A registry collection, ORG/ optional.
WANDB_ARTIFACT_RE = re.compile(r"\A[A-Za-z0-9._-]{1,128}\Z")
WANDB_REF_RE = re.compile(r"\A(?:[^/:\s]+/)?[^/:\s]+/[A-Za-z0-9._-]+:[A-Za-z0-9._-]+\Z")
WANDB_REGISTRY_RE = re.compile(r"\A(?:[^/:\s]+/)?wandb-registry-[A-Za-z0-9._-]+/[A-Za-z0-9._-]+\Z")
# Projects, entities and run ids: W&B refuses "/\\#?%:" in projects and ":;,#?/'" in run ids;
# this subset also keeps whitespace and control characters out of logs and URLs.
WANDB_NAME_RE = re.compile(r"\A[^\s/\\#?%:;,'\"]{1,128}\Z")
# The Hub's limit on files in one repo.
MAX_PUSH_FILES = 100_000
# Folder levels a pushed dir may nest: far more than any checkpoint has, and it keeps every
# path well under the file system's PATH_MAX.
MAX_PUSH_DEPTH = 100
# Characters that reorder how a name prints (U+202E shows "a\u202etxt.exe" as "aexe.txt"):
# a name must read in a log as it is stored.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Names with a meaning to git, the Hub or the client's local-dir cache.
_RESERVED_SEGMENTS = {".git", ".cache", ".huggingface", ".gitattributes", ".gitignore"}
HUB_HOSTS = {"huggingface.co", "hf.co", "www.huggingface.co"}
# Names a pull writes at the top of its target: the record and its temp file, and (for a
# target that is a mount point) the lock and staging dirs of disk/target.py. A checkpoint
# file with one of these names (or under one) would be overwritten or deleted by the pull
# itself, so pull refuses a checkpoint holding one, and push leaves them out of a pulled
# dir (they are the tool's) and refuses them in any other (disk/source.py).
_RESERVED_TOP_RE = re.compile(r"\.ckpt-pull\.json.*|\..+\.ckpt-(?:lock|(?:old-)?[a-z0-9_]{8})", re.DOTALL)


def reserved_in_target(rel: str) -> bool:
    """A path (inside a checkpoint folder) that a pull keeps for its own files: a reserved
    name at the top, or a file under one (a staging dir).

    >>> reserved_in_target(".ckpt-pull.json.tmp"), reserved_in_target(".run.ckpt-lock")
    (True, True)
    >>> reserved_in_target(".run.ckpt-abcd1234/model.safetensors")
    True
    >>> reserved_in_target("sub/.ckpt-pull.json"), reserved_in_target("model.safetensors")
    (False, False)
    """
    return bool(_RESERVED_TOP_RE.fullmatch(rel.split("/", 1)[0]))


def _ref(name: str) -> str:
    """A parameter reference (``subfolder``), or a label given as it is (``pointer file x: subfolder``)."""
    return param(name) if name.isidentifier() else name


# A Storage Bucket is named wherever a repo is: ``hf://buckets/ORG/NAME`` (the form
# huggingface_hub parses), with an optional path prefix the checkpoint folders go under; a
# checkpoint in it is pinned by ``sha256:<64 hex>`` of its manifest as stored.


def bucket(value: str) -> tuple[str, str] | None:
    """(bucket id ``ORG/NAME``, prefix) of a checked bucket URI; None for a model repo id.

    >>> bucket("hf://buckets/org/ckpts/run-7"), bucket("org/run")
    (('org/ckpts', 'run-7'), None)
    """
    if not value.startswith(BUCKET_SCHEME):
        return None
    org, _, rest = value[len(BUCKET_SCHEME):].partition("/")
    name, _, prefix = rest.partition("/")
    return f"{org}/{name}", prefix


def _bucket_uri(value: str, name: str) -> str:
    """Check ``hf://buckets/ORG/NAME[/prefix]``: the bucket id as a repo id, the prefix as a
    folder path; the URI without a trailing '/'."""
    parsed = bucket(value)
    assert parsed is not None
    bucket_id, prefix = parsed
    bad = InputError(f"{_ref(name)} {quoted(value)} is not a valid bucket: use hf://buckets/OWNER/NAME, optionally"
                     " followed by /PREFIX (letters, digits and ._+=@- segments)", param=name)
    if not _REPO_RE.fullmatch(bucket_id) or "--" in bucket_id or ".." in bucket_id:
        raise bad
    if prefix.rstrip("/"):
        try:
            checked = subfolder(prefix, name=name)
        except InputError:
            raise bad from None
        if checked != prefix.rstrip("/"):
            raise bad
        return f"{BUCKET_SCHEME}{bucket_id}/{checked}"
    if prefix not in ("", "/") and prefix.strip("/") == "":
        raise bad
    return f"{BUCKET_SCHEME}{bucket_id}"


def repo_id(value: str | None, name: str = "repo") -> str:
    """Check a repo id of the form ``owner/name`` (``name``: the parameter that gave it), or
    a Storage Bucket as ``hf://buckets/OWNER/NAME[/PREFIX]``.

    >>> repo_id("org/llama-sft"), repo_id("hf://buckets/org/ckpts/run-7/")
    ('org/llama-sft', 'hf://buckets/org/ckpts/run-7')
    """
    if value and value.startswith(BUCKET_SCHEME):
        return _bucket_uri(value, name)
    if not value:
        raise InputError(f"{_ref(name)} is required: give the Hub model repo as OWNER/NAME", param=name)
    if value.lower().startswith("hf:") or "://" in value:  # a bucket URI mistyped (hf://bucket/..., hf:/buckets/...)
        raise InputError(f"{_ref(name)} {value!r} is neither a bucket nor a repo id: a bucket is"
                         " hf://buckets/OWNER/NAME[/PREFIX], a model repo plain OWNER/NAME", param=name)
    if not _REPO_RE.fullmatch(value) or "--" in value or ".." in value or value.endswith(".git"):
        raise InputError(
            f"{_ref(name)} {value!r} is not a valid repo id: use OWNER/NAME with letters, digits, '-', '_' or '.'"
            " (no '--' or '..', not ending in .git)", param=name
        )
    return value


def subfolder(value: str, *, name: str = "subfolder") -> str:
    """Check a subfolder path inside the repo (``sft``, ``checkpoint-1200``, ``release/v1``).

    >>> subfolder("checkpoint-1200")
    'checkpoint-1200'
    """
    if value is None or value.strip() == "":
        raise InputError(f"{_ref(name)} is empty: give a folder name such as checkpoint-100 or sft", param=name)
    if "\\" in value:
        raise InputError(f"{_ref(name)} {value!r} contains a backslash: use '/' between folder names", param=name)
    if value.startswith("/"):
        raise InputError(f"{_ref(name)} {value!r} is absolute: give a path inside the repo, e.g."
                         " checkpoint-100", param=name)
    value = value.rstrip("/")
    parts = value.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InputError(f"{_ref(name)} {value!r} has an empty, '.' or '..' segment: name a plain"
                             " folder", param=name)
        if part in _RESERVED_SEGMENTS:
            raise InputError(f"{_ref(name)} {value!r} uses the reserved name {part!r}: choose another folder"
                             " name", param=name)
        if not _SEGMENT_RE.fullmatch(part):
            raise InputError(
                f"{_ref(name)} {value!r} has an unsupported segment {part!r}: use letters, digits and ._+=@-"
                " (not starting with '.' or '-')"
            )
    return value


def step(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise InputError(f"{param('step')} {value} is negative: give the training step as a whole number >="
                         " 0", param='step')
    if value is not None and value > MAX_STEP:
        raise InputError(f"{param('step')} {value} is too big: a step has at most {len(str(MAX_STEP))} digits"
                         f" (at most {MAX_STEP})", param='step')
    return value


def push_target(sub: str | None, stp: int | None) -> tuple[str, int | None]:
    """Derive (subfolder, step) for push: ``--step N`` alone means ``checkpoint-N``.

    >>> push_target(None, 300)
    ('checkpoint-300', 300)
    >>> push_target("checkpoint-300", None)
    ('checkpoint-300', 300)
    """
    stp = step(stp)
    if sub is None:
        if stp is None:
            raise InputError(f"push needs {param('subfolder')} or {param('step')}: e.g. step 1200 pushes to"
                             " checkpoint-1200/")
        return f"checkpoint-{stp}", stp
    sub = subfolder(sub)
    implied = step_of(sub)
    if implied is None and _CHECKPOINT_LIKE_RE.fullmatch(sub):
        raise InputError(f"{param('subfolder')} {sub} names a step bigger than {MAX_STEP}, which latest, list and"
                         " prune would not see as a checkpoint: give a smaller step", param="subfolder")
    if implied is not None and stp is not None and implied != stp:
        raise InputError(
            f"{param('step')} {stp} disagrees with {param('subfolder')} {sub}: drop one, or make them name the"
            " same step"
        )
    return sub, stp if stp is not None else implied


def revision(value: str | None, name: str = "revision") -> str | None:
    """Check a commit SHA, branch or tag name.

    >>> revision("main"), revision("a" * 40) == "a" * 40
    ('main', True)
    """
    if value is None:
        return None
    if SHA_RE.fullmatch(value) or BUCKET_PIN_RE.fullmatch(value):
        return value
    if value.lower().startswith("sha256:"):
        raise InputError(f"{_ref(name)} {quoted(value)} is not a bucket checkpoint's pin: give it whole,"
                         " sha256:<64 hex> (the revision latest or push answered)", param=name)
    if not _REF_RE.fullmatch(value) or ".." in value or value.startswith("/") or value.endswith("/"):
        what = "a commit SHA, branch or tag name" if name == "revision" else "a valid branch or tag name"
        raise InputError(f"{_ref(name)} {value!r} is not {what}", param=name)
    return value


def commit_message(value: str) -> str:
    """A commit title: one line, bounded, no control characters."""
    if not value.strip() or BAD_NAME_RE.search(value.replace("\\", "")) or len(value) > COMMIT_MESSAGE_MAX:
        raise InputError(f"{param('commit_message')} must be one non-empty line of at most"
                         f" {COMMIT_MESSAGE_MAX} characters"
                         " without control characters")
    return value


def endpoint(value: str | None) -> str:
    value = (value or DEFAULT_ENDPOINT).rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{param('endpoint')} {value!r} is not an http(s) URL: e.g."
                         " https://huggingface.co", param='endpoint')
    if parts.username or parts.password:
        raise InputError(f"{param('endpoint')} must not carry credentials: pass the token with HF_TOKEN or"
                         f" {param('token')}", param='endpoint')
    return value


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_parts(url: str) -> tuple[str, str, int]:
    """(scheme, lower-case host, port with the scheme's default filled in): where a request to
    ``url`` goes, the one comparison deciding whether a URL may receive the token. Raises
    ValueError for a port that is not a number.

    >>> origin_parts("https://HF.co/org/run") == origin_parts("https://hf.co:443/x")
    True
    """
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` for a message, the default port left out.

    >>> origin("https://HF.co:443/org/run")
    'https://hf.co'
    """
    scheme, host, port = origin_parts(url)
    return f"{scheme}://{host}" + (f":{port}" if port != _DEFAULT_PORTS.get(scheme) else "")


def check_origin(named: str, configured: str, *, what: str = "the handle") -> None:
    """The token goes only to the configured endpoint: a handle or pointer naming another
    host is refused, naming both origins. Setting the endpoint to its host is the way to
    trust it. The one rule for every door: the API applies it, and the CLI and the action
    reach it through the API.

    >>> check_origin("http://127.0.0.1:8000", "http://127.0.0.1:8000/")
    """
    try:
        same = origin_parts(named) == origin_parts(configured)
        there = origin(named)
    except ValueError:  # not a port at all: an origin nothing configured can have
        same, there = False, named
    if not same:
        raise InputError(
            f"{what} names the Hub at {quoted(there, 120)}, but the configured endpoint is {origin(configured)}:"
            f" pass {param('endpoint')} {quoted(there, 120)} explicitly if that host is really trusted with the"
            " token", param="endpoint")


def is_public_hub(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() in HUB_HOSTS


def token_for_write(token: str | bool | None, url: str) -> None:
    if not token and is_public_hub(url):
        raise InputError(f"writing to the Hugging Face Hub needs a token: set HF_TOKEN (or pass {param('token')})")


MAX_COUNT_DIGITS = 18
"""Digits a count given as text may have (below 2**63; Python's ``int`` would take 4,300)."""
_NUMBER_RE = re.compile(r"\A-?[0-9]{1,15}(?:\.[0-9]{1,20})?\Z")
COUNT_FORM = f"a whole number: ASCII digits 0-9 only, at most {MAX_COUNT_DIGITS}"
NUMBER_FORM = "a finite number: ASCII digits 0-9, with at most one '.'"


def count_text(text: str, digits: int = MAX_COUNT_DIGITS, signed: bool = False) -> int | None:
    """The count ``text`` spells in ASCII digits, None for anything else: no ``²`` or ``٣``
    (which ``str.isdigit`` and ``int`` take), space, ``_``, sign (``-`` with ``signed``, for a
    caller that says why a negative is refused) or more than ``digits`` digits.

    >>> count_text("12"), count_text("\u00b2"), count_text("\u0663"), count_text("1_0"), count_text("9" * 19)
    (12, None, None, None, None)
    """
    if not isinstance(text, str) or len(text) > digits + signed:
        return None
    body = text[1:] if signed and text.startswith("-") else text
    return int(text) if body and body.isascii() and body.isdigit() else None


def number_text(text: str) -> float | None:
    """The number ``text`` spells in ASCII digits with at most one ``.`` (and a ``-``, for the
    caller to say why a negative is refused), None for anything else (``٣``, ``1e400``,
    ``nan``, ``inf``, ``+1``).

    >>> number_text("2.5"), number_text("\u0663"), number_text("nan"), number_text("1e3")
    (2.5, None, None, None)
    """
    return float(text) if isinstance(text, str) and _NUMBER_RE.match(text) else None


def positive(value: int | None, name: str) -> int | None:
    """A count of at least 1 given as an int (a bool is not one), or None."""
    if value is None:
        return None
    if not is_whole_int(value):
        raise InputError(f"{_ref(name)} {quoted(value, 40)} must be {COUNT_FORM}", param=name)
    if value < 1:
        raise InputError(f"{_ref(name)} {value} must be at least 1", param=name)
    return value


def is_whole_int(value: object) -> bool:
    """An int, not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def file_name_problem(path: str) -> str | None:
    """Why a file name or path inside a checkpoint is refused, None when it is usable.

    The one rule for file names: push checks every entry of its local dir with it up front,
    and every reader (tree listings, discovery, manifests) applies it to what the Hub
    sends, so push never commits a name its own readers refuse. The whole string must be
    printable (no control characters, newlines included, no U+00A0 or other spaces but
    ' ', no format characters such as the bidirectional controls) and hold no backslash.

    >>> file_name_problem("model.safetensors") is None, file_name_problem("a\u202eb")
    (True, 'a bidirectional control character')
    """
    if any(c in _BIDI_CONTROLS for c in path):
        return "a bidirectional control character"
    if "\u00a0" in path:
        return "a no-break space"
    if not path.isprintable():
        return "a control or non-printing character"
    if "\\" in path:
        return "a backslash"
    return None


def safe_relative(path: str) -> bool:
    """True when a repo path can be written under a target without escaping it.

    >>> safe_relative("a/b.bin"), safe_relative("../x"), safe_relative("/abs")
    (True, False, False)
    """
    if not path or "\\" in path or "\x00" in path or path.startswith("/"):
        return False
    pure = PurePosixPath(path)
    return not pure.is_absolute() and all(p not in ("", ".", "..") for p in path.split("/"))
