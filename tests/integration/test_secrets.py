"""The token never shows: every mode, succeeding, failing and faulted, with a known fake token.

The local Hub requires the token (auth is real). Afterwards every byte the runs produced is
searched: stdout, stderr, GITHUB_OUTPUT, the job summary, dotenv files, pulled dirs, the
manifests on the Hub, HF_HOME, and every file W&B (offline) wrote.
"""

from __future__ import annotations

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import ckpt, one_line_error
from tests.helpers.hostile_proxy import hostile_fixture, sink_fixture  # noqa: F401 - provide the hostile and sink fixtures

TOKEN = "hf_FAKE_not_a_real_token_Q7zSeCrEtXv93"
PIECES = [TOKEN, TOKEN[3:], TOKEN[8:24], "SeCrEtXv93"]  # the whole, and parts a careless scrub would leave


def _scan_bytes(data: bytes, where: str) -> None:
    for piece in PIECES:
        assert piece.encode() not in data, f"token ({piece!r}) found in {where}"


def _scan_tree(root, skip=()) -> int:
    n = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and not any(s in path.parts for s in skip):
            _scan_bytes(path.read_bytes(), str(path))
            n += 1
    return n


@pytest.mark.slow
def test_token_is_nowhere_in_any_output(hub_server, cli, tmp_path):
    hub = hub_server(token=TOKEN)
    other = hub_server(token="hf_someone_elses_token_000000")
    work = tmp_path / "work"
    work.mkdir()
    wandb_dir = work / "wandb-dir"
    base = clean_env(work, HF_TOKEN=TOKEN, HF_ENDPOINT=hub.url, CKPT_RETRIES="2", CKPT_TIMEOUT="2",
                     GITHUB_OUTPUT=str(work / "gh-output"), GITHUB_STEP_SUMMARY=str(work / "summary.md"),
                     WANDB_MODE="offline", WANDB_DIR=str(wandb_dir), WANDB_DATA_DIR=str(wandb_dir / "data"),
                     WANDB_CACHE_DIR=str(wandb_dir / "cache"), WANDB_CONFIG_DIR=str(wandb_dir / "config"),
                     WANDB_ARTIFACT_DIR=str(wandb_dir / "artifacts"), WANDB_SILENT="true", WANDB_CONSOLE="off")
    src = {s: write_checkpoint(work / f"src-{s}", ckpt(s, big=20_000)) for s in (1, 2, 3)}
    outputs: list[tuple[str, int, str, str]] = []

    def run(label: str, *args: str, expect: int | None = 0, env: dict[str, str] | None = None, **extra: str):
        e = dict(base if env is None else env)
        e.update(extra)
        r = cli(*args, "--dotenv", str(work / f"{label}.env"), env=e)
        outputs.append((label, r.code, r.stdout, r.stderr))
        if expect is not None:
            assert r.code == expect, f"{label}: exit {r.code}: {r.stderr}"
        if r.code != 0:
            one_line_error(r.stderr)
        return r

    # Succeeding runs of every mode, W&B pointer included.
    run("push1", "push", "--repo", "o/r", "--local-dir", str(src[1]), "--step", "1", "--wandb-project", "p",
        "--wandb-fatal")
    run("push2", "push", "--repo", "o/r", "--local-dir", str(src[2]), "--step", "2", "--json")
    run("push3-token-flag", "push", "--repo", "o/r", "--local-dir", str(src[3]), "--step", "3", "--token", TOKEN,
        env={k: v for k, v in base.items() if k != "HF_TOKEN"})
    run("repush", "push", "--repo", "o/r", "--local-dir", str(src[3]), "--step", "3")
    run("latest", "latest", "--repo", "o/r", "--json")
    run("list", "list", "--repo", "o/r")
    run("list-json", "list", "--repo", "o/r", "--json")
    run("pull", "pull", "--repo", "o/r", "--latest", "--local-dir", str(work / "pulled"))
    run("promote", "promote", "--repo", "o/r", "--subfolder", "checkpoint-2", "--to", "release", "--tag", "v1",
        "--wandb-project", "p")
    run("prune-dry", "prune", "--repo", "o/r", "--keep-last", "1", "--dry-run")
    run("prune", "prune", "--repo", "o/r", "--keep-last", "1")
    assert list(wandb_dir.rglob("*.wandb")), "the W&B offline run was not written: the scan below is hollow"

    # Failing runs: wrong token, missing things, faults, a stopped server.
    wrong = dict(base, HF_ENDPOINT=other.url)
    for mode_args in (["latest", "--repo", "o/r"], ["list", "--repo", "o/r"],
                      ["push", "--repo", "o/r", "--local-dir", str(src[1]), "--step", "1"],
                      ["pull", "--repo", "o/r", "--latest", "--local-dir", str(work / "nope")],
                      ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "rel"],
                      ["prune", "--repo", "o/r", "--keep-last", "1"]):
        r = run(f"wrong-token-{mode_args[0]}", *mode_args, expect=None, env=wrong)
        assert r.code == 1, f"{mode_args[0]} with a token the Hub refuses: exit {r.code}: {r.stderr}"
    run("missing-sub", "pull", "--repo", "o/r", "--subfolder", "nope", "--local-dir", str(work / "n2"), expect=1)
    run("bad-rev", "latest", "--repo", "o/r", "--revision", "no-such-branch", expect=1)
    run("bad-input", "push", "--repo", "o/r", "--local-dir", str(work / "missing"), "--step", "1", expect=2)
    hub.set_faults([{"path": "/refs$|/tree/", "status": 503, "times": -1}])  # latest lists without refs
    for mode_args in (["latest", "--repo", "o/r"], ["list", "--repo", "o/r"],
                      ["pull", "--repo", "o/r", "--latest", "--local-dir", str(work / "n3")],
                      ["push", "--repo", "o/r", "--local-dir", str(src[1]), "--step", "9"]):
        run(f"fault-503-{mode_args[0]}", *mode_args, expect=1)
    hub.set_faults([{"method": "POST", "path": "/commit/", "reset": 10, "times": -1}])
    run("fault-reset-commit", "push", "--repo", "o/r", "--local-dir", str(src[1]), "--step", "10", expect=1)
    hub.set_faults([{"method": "GET", "path": r"model\.safetensors$", "corrupt": True, "times": -1}])
    run("fault-corrupt-pull", "pull", "--repo", "o/r", "--latest", "--local-dir", str(work / "n4"), expect=1)
    hub.set_faults([])
    hub.stop()
    for mode_args in (["latest", "--repo", "o/r"],
                      ["pull", "--repo", "o/r", "--latest", "--local-dir", str(work / "n5")],
                      ["push", "--repo", "o/r", "--local-dir", str(src[1]), "--step", "11", "--wandb-project", "p"]):
        run(f"stopped-{mode_args[0]}", *mode_args, expect=1)

    assert len(outputs) >= 25
    for label, _code, stdout, stderr in outputs:
        _scan_bytes(stdout.encode(), f"{label} stdout")
        _scan_bytes(stderr.encode(), f"{label} stderr")
    assert (work / "gh-output").read_text() and (work / "summary.md").read_text()
    scanned = _scan_tree(work)  # GITHUB_OUTPUT, summary, dotenv files, pulled dirs, HF_HOME, W&B dirs
    assert scanned > 20
    # What landed on the Hub (manifests, the tag message, commit objects) and the server's log.
    _scan_tree(hub.base)


# --------------------------------------------------------------------------- issue 18, items 1 and 3
# A token in the forms a paste or a block scalar gives it: with its newline, padded.
PASTED = [TOKEN + "\n", "  " + TOKEN + "\r\n", "\t" + TOKEN + " "]


def _forms(raw: str) -> list[str]:
    """Every form a message could carry the token in: raw, stripped, and repr-quoted."""
    return [raw, raw.strip(), repr(raw)[1:-1], repr(raw.encode())[2:-1], *PIECES]


def _scan_text(text: str, raw: str, where: str) -> None:
    for form in _forms(raw):
        assert form not in text, f"token ({form!r}) found in {where}: {text!r}"


def _full_report(exc: BaseException) -> str:
    """What a caller could print of an exception: str, repr, and the whole traceback chain."""
    import traceback

    return "\n".join([str(exc), repr(exc), *traceback.format_exception(exc)])


@pytest.mark.parametrize("raw", PASTED, ids=["newline", "crlf-padded", "tab-space"])
def test_a_token_pasted_with_its_newline_works_and_is_never_printed(raw, hub_server, cli, tmp_path):
    hub = hub_server(token=TOKEN)  # auth is real: only the stripped token is let in
    env = clean_env(tmp_path, HF_TOKEN=raw, HF_ENDPOINT=hub.url, CKPT_RETRIES="1")
    src = write_checkpoint(tmp_path / "src", ckpt(1, big=5000))
    runs = [cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", env=env),
            cli("latest", "--repo", "o/r", "--json", env=env),
            cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "got"), "--json", env=env),
            cli("latest", "--repo", "o/r", "--token", raw, env={k: v for k, v in env.items() if k != "HF_TOKEN"})]
    for run in runs:
        assert run.code == 0, run.stderr
        _scan_text(run.stdout + run.stderr, raw, "the output")


def test_the_api_strips_a_pasted_token(hub_server, hf_client, tmp_path):
    import ckpt_action as ckpt_api

    hub = hub_server(token=TOKEN)
    src = write_checkpoint(tmp_path / "src", ckpt(1, big=5000))
    handle = ckpt_api.push(src, repo="o/r", step=1, endpoint=hub.url, token=TOKEN + "\n")
    assert ckpt_api.latest("o/r", endpoint=hub.url, token=" " + TOKEN + "\r\n") == handle


@pytest.mark.parametrize("bad", ["hf_abc def", "hf_abc\ndef", "hf_abc\x00def", "hf_abc\x7fdef", "hf_abc\u00a0def"],
                         ids=["space", "newline", "nul", "del", "nbsp"])
def test_a_token_with_whitespace_or_control_inside_is_refused_without_it(bad):
    from ckpt_action.errors import InputError
    from ckpt_action.settings import Settings

    for given in ({"token": bad}, {}):
        with pytest.raises(InputError) as err:
            Settings.from_env({"HF_TOKEN": bad}, endpoint="http://127.0.0.1:9", **given)
        _scan_text(_full_report(err.value), bad, "the error")
        assert "HF_TOKEN" in str(err.value) and "token=" in str(err.value)


def test_settings_never_show_the_token():
    from ckpt_action.settings import Settings

    settings = Settings.from_env({}, endpoint="http://127.0.0.1:9", token=TOKEN + "\n")
    assert settings.token == TOKEN
    for text in (repr(settings), str(settings), f"{settings!r}", repr([settings])):
        _scan_text(text, TOKEN + "\n", "repr(Settings)")
    assert Settings.from_env({}, endpoint="http://127.0.0.1:9", token="  \n").token is None
    from ckpt_action.cli.app import HubOptions  # the CLI's options, handed to every command

    _scan_text(repr(HubOptions("http://127.0.0.1:9", TOKEN + "\n", False, None, None, None)), TOKEN + "\n",
               "repr(HubOptions)")


def test_an_error_made_from_a_call_holding_the_token_is_scrubbed_of_every_form():
    from ckpt_action.errors import RemoteError

    raw = "  " + TOKEN + "\n"
    for text in (f"header {raw.strip()}", f"Illegal header value b'Bearer {raw}'",
                 f"value {raw.encode()!r}", f"value {raw!r}", f"{raw!a}"):
        err = RemoteError(f"latest: {text}", secrets=[raw])
        _scan_text(_full_report(err), raw, "the message")
        assert "***" in str(err)


def _raise_with_the_token_inside(*args: object, **kwargs: object) -> object:
    """A client failure whose outermost error holds no token, its cause and context do: the
    chain a client builds when it wraps the error that echoed a header."""
    try:
        try:
            raise ValueError(f"Illegal header value b'Bearer {TOKEN}\\n'")
        except ValueError as inner:
            raise ConnectionError("the proxy dropped the connection") from inner
    except ConnectionError:
        raise RuntimeError("reading refs failed")  # noqa: B904 - the context is the point


def test_a_token_only_in_the_chain_of_an_error_never_reaches_the_error_or_the_output(cli_in_process, monkeypatch,
                                                                                     tmp_path):
    """The token sits in the ``__cause__`` of the ``__context__`` of what the call raised,
    never in the outermost error: the API's error, its repr and its whole traceback carry
    none of it, and neither does what the CLI prints."""
    import traceback

    import ckpt_action as ckpt_api
    from ckpt_action.stores.hub import listing as listing_module
    from ckpt_action.stores.hub import repo as repo_module

    # latest's first request is the listing (or the refs, given a revision): both raise it
    for module in (listing_module, repo_module):
        monkeypatch.setattr(module, "get_bounded", _raise_with_the_token_inside)
    with pytest.raises(ckpt_api.CkptError) as err:
        ckpt_api.latest("o/r", endpoint="http://127.0.0.1:9", token=TOKEN, retries=0)
    chain, current = [], err.value
    while current is not None:  # the chain is really there: the test would miss nothing
        chain.append(current)
        current = current.__cause__ or current.__context__
    assert len(chain) >= 4 and "Illegal header value" in str(chain[-1]), [repr(e) for e in chain]
    _scan_text(_full_report(err.value), TOKEN, "the API's error and its chain")
    for link in chain:
        _scan_text("".join(traceback.format_exception_only(link)), TOKEN, f"the chained {type(link).__name__}")
    run = cli_in_process("latest", "--repo", "o/r", HF_TOKEN=TOKEN, HF_ENDPOINT="http://127.0.0.1:9",
                         CKPT_RETRIES="0")
    assert run.code == 1, run.stderr
    _scan_text(run.stdout + run.stderr, TOKEN, "the CLI's output")


def test_an_echoed_authorization_header_never_reaches_an_api_error(seeded, hostile, hf_client, tmp_path):
    """The server (or a proxy) echoes the Authorization header in its error: the API's
    exception carries none of it, not in its text, its repr or its chain."""
    import ckpt_action as ckpt_api
    from ckpt_action.errors import RemoteError

    proxy = hostile(seeded)
    proxy.set_rules([{"path": "/", "status": 400, "echo_auth": True, "times": -1}])
    for raw in (TOKEN, TOKEN + "\n"):
        with pytest.raises(RemoteError) as err:
            ckpt_api.latest("o/r", endpoint=proxy.url, token=raw, retries=0)
        sent = {k.lower(): v for k, v in proxy.requests[-1]["headers"].items()}
        assert sent.get("authorization") == f"Bearer {TOKEN}"  # the stripped token went, and was echoed
        _scan_text(_full_report(err.value), raw, "the API's error")


def test_an_echoed_authorization_header_never_reaches_the_cli(seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    proxy.set_rules([{"path": "/", "status": 400, "echo_auth": True, "times": -1}])
    env = clean_env(tmp_path, HF_TOKEN=TOKEN + "\n", HF_ENDPOINT=proxy.url, CKPT_RETRIES="0")
    for args in (["latest", "--repo", "o/r"], ["latest", "--repo", "o/r", "--json"],
                 ["pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "got")]):
        run = cli(*args, env=env)
        assert run.code == 1, run.stderr
        _scan_text(run.stdout + run.stderr, TOKEN + "\n", "the CLI's output")


@pytest.mark.parametrize("env_endpoint", [False, True], ids=["no-HF_ENDPOINT", "HF_ENDPOINT-set"])
def test_the_api_never_sends_the_token_to_a_handle_from_another_origin(env_endpoint, seeded, sink, hf_client,
                                                                       monkeypatch, tmp_path):
    """A handle (or pointer) naming another host is refused before any request, naming both
    origins; ``endpoint=`` set to its host is the way to trust it."""
    import ckpt_action as ckpt_api
    from ckpt_action.errors import InputError

    good = ckpt_api.latest("o/r", endpoint=seeded.url)
    forged = ckpt_api.CheckpointHandle(good.repo, good.subfolder, good.revision, good.step, sink.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    if env_endpoint:
        monkeypatch.setenv("HF_ENDPOINT", seeded.url)
    configured = seeded.url if env_endpoint else "https://huggingface.co"
    for call in (lambda: ckpt_api.pull(forged, tmp_path / "got"),
                 lambda: ckpt_api.promote(forged, "release")):
        with pytest.raises(InputError) as err:
            call()
        assert sink.url in str(err.value) and configured in str(err.value) and "endpoint=" in str(err.value)
    assert sink.requests == []
    assert not (tmp_path / "got").exists()
    # Trusted explicitly: the handle's own host is the endpoint.
    same = ckpt_api.CheckpointHandle(good.repo, good.subfolder, good.revision, good.step, seeded.url)
    assert (ckpt_api.pull(same, tmp_path / "ok", endpoint=seeded.url) / "config.json").exists()
