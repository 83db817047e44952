"""Bounded against a hostile or broken Hub (issue 11 items 1, 3 and 9; issue 13 item 8).

Each bound is driven past by the rewriting proxy in front of the local Hub and must end
in exit 1 with one line naming the bound and the setting that raises it. A run that
would not end on its own is caught by the subprocess timeout (``HANG``), which is a
guard, not a measurement: the bounds under test are a few seconds.
"""

from __future__ import annotations

import pytest

from tests.conftest import FAULT_MATRIX_TIMEOUT, clean_env
from tests.helpers.chaos_helpers import FAST, one_line_error, seed
from tests.helpers.hostile_proxy import hostile_fixture, sink_fixture  # noqa: F401 - provide the hostile and sink fixtures

HANG = 90  # seconds; far above every bound below, far below what an unbounded run takes
# The trickle cases' one setting: --timeout (silence allowed between bytes), the fault matrix's
# (FAULT_MATRIX_TIMEOUT, which holds on a loaded machine). The request deadline is half as long
# again, and the trickle sends a byte every twentieth of it, so the server is never silent long
# enough for the timeout, whatever the load, and each of its answers (a hundred bytes and more)
# outlasts the deadline many times over.
TRICKLE_TIMEOUT = FAULT_MATRIX_TIMEOUT
TRICKLE_DEADLINE = 1.5 * TRICKLE_TIMEOUT
TRICKLE_BPS = 20 / TRICKLE_TIMEOUT
REFS = r"/api/models/o/r/refs$"
TOP = r"/api/models/o/r/tree/main$"  # latest lists the default branch by name; refs: a named revision
TOKEN = "hf_" + "trust" * 6


def _env(proxy, tmp_path, **extra):
    return clean_env(tmp_path, HF_ENDPOINT=proxy.url, HF_TOKEN=TOKEN, **{**FAST, **extra})


@pytest.mark.parametrize(("where", "rule"), [
    ("refs body", {"method": "GET", "path": REFS, "trickle_bps": TRICKLE_BPS}),
    ("listing headers", {"method": "GET", "path": TOP, "trickle_headers_bps": TRICKLE_BPS}),
    ("manifest body", {"method": "GET", "path": r"/ckpt-manifest\.json$", "trickle_bps": TRICKLE_BPS}),
], ids=["refs-body", "listing-headers", "manifest-body"])
def test_a_trickling_server_is_cut_by_the_request_deadline(where, rule, seeded, hostile, cli, tmp_path):
    """--timeout bounds silence between bytes; a steady trickle is never silent for long."""
    proxy = hostile(seeded)
    proxy.set_rules([{**rule, "times": -1}])
    named = ["--revision", "main"] if rule["path"] == REFS else []  # only a named revision reads the refs
    run = cli("latest", "--repo", "o/r", *named, "--timeout", str(TRICKLE_TIMEOUT), "--retries", "1", env=_env(
        proxy, tmp_path, CKPT_REQUEST_DEADLINE=str(TRICKLE_DEADLINE)), timeout=HANG)
    assert run.code == 1, f"{where}: exit {run.code}\n{run.stdout}\n{run.stderr}"
    assert "CKPT_REQUEST_DEADLINE" in one_line_error(run.stderr) and run.stdout == ""
    assert proxy.fired() == 2, "one attempt and one retry, each cut"


def test_a_trickling_file_download_is_cut_by_its_size_at_the_minimum_rate(seeded, hostile, cli, tmp_path):
    """A checkpoint file may take long, in proportion to its size: the request deadline
    plus its size at CKPT_MIN_DOWNLOAD_RATE; a trickle of TRICKLE_BPS never gets there."""
    # A regular file (served by the Hub itself, not its CDN) whose trickle outlasts HANG.
    seed(seeded.url, "o/r", "checkpoint-2", {"notes.txt": b"n" * 300}, tmp_path / "seed2", step=2)
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": r"/resolve/[0-9a-f]{40}/checkpoint-2/notes\.txt$",
                      "trickle_bps": TRICKLE_BPS, "times": -1}])
    dest = tmp_path / "dest"
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-2", "--local-dir", str(dest), "--timeout",
              str(TRICKLE_TIMEOUT), "--retries", "1",
              env=_env(proxy, tmp_path, CKPT_REQUEST_DEADLINE=str(TRICKLE_DEADLINE)), timeout=HANG)
    assert run.code == 1, f"exit {run.code}\n{run.stdout}\n{run.stderr}"
    assert "CKPT_MIN_DOWNLOAD_RATE" in one_line_error(run.stderr) and run.stdout == ""
    assert proxy.fired() == 2, "one attempt and one retry, each cut"
    assert not dest.exists()


@pytest.mark.parametrize(("setting", "value"), [("CKPT_MAX_LISTING_PAGES", "5"), ("CKPT_MAX_LISTING_ENTRIES", "10"),
                                                 ("CKPT_MAX_LISTING_BYTES", "3000")])
def test_an_endless_listing_stops_at_its_bound(setting, value, seeded, hostile, cli, tmp_path):
    """A listing whose every page says there is a next one ends at the first bound it passes."""
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": TOP, "link_next": "endless", "times": -1}])
    run = cli("latest", "--repo", "o/r", env=_env(proxy, tmp_path, **{setting: value}), timeout=HANG)
    assert run.code == 1, run.stdout + run.stderr
    assert setting in one_line_error(run.stderr) and run.stdout == ""
    pages = proxy.fired()
    assert 2 <= pages <= 40, f"{pages} pages requested"
    if setting == "CKPT_MAX_LISTING_PAGES":
        assert pages == 5


def test_a_next_page_on_another_origin_never_gets_the_token(seeded, hostile, sink, cli, tmp_path):
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": TOP, "link_next": f"{sink.url}/api/models/o/r/tree/x?cursor=1"}])
    run = cli("latest", "--repo", "o/r", env=_env(proxy, tmp_path), timeout=HANG)
    assert proxy.fired() == 1
    assert sink.requests == [], "a request went to the other origin"
    assert run.code == 1 and "another origin" in one_line_error(run.stderr), run.stdout + run.stderr


def test_a_redirect_to_another_origin_drops_the_token(seeded, hostile, sink, cli, tmp_path):
    """Kept from the client's own behaviour: a cross-origin redirect carries no Authorization."""
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": r"/ckpt-manifest\.json$", "redirect": f"{sink.url}/m.json"}])
    run = cli("latest", "--repo", "o/r", env=_env(proxy, tmp_path), timeout=HANG)
    assert proxy.fired() == 1 and len(sink.requests) == 1, run.stdout + run.stderr
    assert [k for k in sink.requests[0]["headers"] if k.lower() == "authorization"] == []
    assert TOKEN not in str(sink.requests)
    assert any(TOKEN in str(r["headers"]) for r in proxy.requests), "the token did reach the configured endpoint"


def test_a_manifest_past_its_bound_makes_only_its_folder_unreadable(seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    env = _env(proxy, tmp_path, CKPT_MAX_MANIFEST_BYTES="100")
    run = cli("latest", "--repo", "o/r", "--json", env=env, timeout=HANG)
    assert run.code == 0 and run.json["found"] is False, run.stdout + run.stderr
    assert "skipped checkpoint-1:" in run.stderr and "CKPT_MAX_MANIFEST_BYTES" in run.stderr
    pulled = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", str(tmp_path / "d"), env=env)
    assert pulled.code == 1 and "CKPT_MAX_MANIFEST_BYTES" in one_line_error(pulled.stderr)


RATE_LIMITED = {"status": 429, "headers": {"RateLimit": '"api";r=0;t=2',
                                           "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}}


def test_a_rate_limit_window_is_waited_out(seeded, hostile, cli, tmp_path):
    """429 with IETF RateLimit headers and no Retry-After: wait for the announced reset.

    Two quick retries (0.05 s, 0.1 s) all fall inside the 2 s window, so plain backoff
    gives up; honouring ``t=2`` gets through on the first retry.
    """
    proxy = hostile(seeded)
    proxy.set_rules([{"method": "GET", "path": TOP, **RATE_LIMITED, "window_s": 2, "times": -1}])
    run = cli("latest", "--repo", "o/r", "--json", env=_env(proxy, tmp_path, CKPT_RETRIES="2",
                                                            CKPT_RETRY_DELAY="0.05", CKPT_RETRY_MAX_DELAY="0.1"),
              timeout=HANG)
    assert run.code == 0 and run.json["subfolder"] == "checkpoint-1", run.stdout + run.stderr
    assert proxy.fired() == 1, "one 429, then the wait, then the answer"


def test_a_rate_limit_reset_beyond_the_bound_fails_at_once(seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    rule = {**RATE_LIMITED, "headers": {**RATE_LIMITED["headers"], "RateLimit": '"api";r=0;t=3600'}}
    proxy.set_rules([{"method": "GET", "path": TOP, **rule, "times": -1}])
    run = cli("latest", "--repo", "o/r", env=_env(proxy, tmp_path, CKPT_MAX_RATE_LIMIT_WAIT="60"), timeout=HANG)
    assert run.code == 1 and "CKPT_MAX_RATE_LIMIT_WAIT" in one_line_error(run.stderr), run.stdout + run.stderr
    assert proxy.fired() == 1, "no retry when the Hub asks for more than the bound"


@pytest.mark.parametrize(("args", "env", "words"), [
    (["--timeout", "nan"], {}, ["timeout", "finite"]),
    (["--timeout", "inf"], {}, ["timeout", "finite"]),
    ([], {"CKPT_TIMEOUT": "inf"}, ["CKPT_TIMEOUT", "finite"]),
    (["--timeout", "-1"], {}, ["timeout", "> 0"]),
    (["--retries", "1000"], {}, ["retries", "at most 20"]),
    ([], {"CKPT_REQUEST_DEADLINE": "nan"}, ["CKPT_REQUEST_DEADLINE"]),
    ([], {"CKPT_MAX_LISTING_PAGES": "0"}, ["CKPT_MAX_LISTING_PAGES"]),
], ids=["timeout-nan", "timeout-inf", "env-timeout-inf", "timeout-negative", "retries-huge", "deadline-nan",
        "pages-zero"])
def test_bounds_that_bound_nothing_are_refused_before_any_request(args, env, words, seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    run = cli("latest", "--repo", "o/r", *args, env=_env(proxy, tmp_path, **env), timeout=HANG)
    assert run.code == 2, run.stdout + run.stderr
    line = one_line_error(run.stderr)
    assert all(w in line for w in words), line
    assert proxy.requests == []
