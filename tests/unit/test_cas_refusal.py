"""What hf_xet reports of a CAS refusal becomes a one-line error saying what was refused:
escaped, bounded, scrubbed of the token, and not retried as a network failure."""

from __future__ import annotations

from ckpt_action.errors import AuthError, RemoteError
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.failures import is_transient
from ckpt_action.stores.hub.transport import translate

TOKEN = "hf_FAKE_cas_unit_token_0xq7"


def _xet_error(status: str, url: str) -> ConnectionError:
    # hf_xet's own wording for a refused CAS request (its exception carries no body).
    return ConnectionError(f"Network error: Request error: HTTP status client error ({status}), domain: {url}")


def _settings() -> Settings:
    return Settings.from_env({}, endpoint="http://127.0.0.1:9", token=TOKEN)


def test_a_cas_400_names_the_route_and_the_status_and_is_not_transient():
    exc = _xet_error("400 Bad Request", "http://127.0.0.1:7/v1/xorbs/default/" + "a" * 64)
    assert not is_transient(exc)
    error = translate(exc, "committing checkpoint-1", _settings(), "o/r")
    assert type(error) is RemoteError
    text = str(error)
    assert text.startswith("committing checkpoint-1: the Hub's Xet storage (CAS) at http://127.0.0.1:7 refused")
    assert "400 Bad Request" in text and "/v1/xorbs/default/" in text and "cannot reach" not in text


def test_a_cas_401_is_an_auth_error():
    error = translate(_xet_error("401 Unauthorized", "http://127.0.0.1:7/v1/shards"), "committing x",
                      _settings(), "o/r")
    assert isinstance(error, AuthError) and "401" in str(error) and "HF_TOKEN" in str(error)


def test_what_the_cas_refused_is_escaped_bounded_and_scrubbed():
    url = f"http://127.0.0.1:7/v1/shards?t={TOKEN}&\x1b[2J" + "x" * 5000 + "\n::error::forged"
    error = translate(_xet_error("400 Bad Request", url), "committing x", _settings(), "o/r")
    text = str(error)
    assert TOKEN not in text and "\x1b" not in text and "\n" not in text and len(text) < 700, text
    assert "\\x1b[2J" in text and "::error::" not in text, text  # escaped, and the forged line never shown


def test_a_cas_5xx_or_429_is_still_retried():
    for status in ("503 Service Unavailable", "429 Too Many Requests", "408 Request Timeout"):
        assert is_transient(ConnectionError(
            f"Network error: Request error: HTTP status server error ({status}), domain: http://h/v1/shards"))
