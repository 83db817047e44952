"""The token never shows: every mode, succeeding, failing and faulted, with a known fake token.

The local Hub requires the token (auth is real). Afterwards every byte the runs produced is
searched: stdout, stderr, GITHUB_OUTPUT, the job summary, dotenv files, pulled dirs, the
manifests on the Hub, HF_HOME, and every file W&B (offline) wrote.
"""

from __future__ import annotations

import pytest

from tests.chaos_helpers import ckpt, one_line_error
from tests.conftest import clean_env, write_checkpoint

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
    hub.set_faults([{"path": "/refs$", "status": 503, "times": -1}])
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
