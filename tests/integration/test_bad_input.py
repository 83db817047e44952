"""Bad input, table-driven: each case exits 2 with one line that says what to change,
makes no network call (no socket connects anywhere), and creates nothing.

The table runs in-process (the CLI changes no global state); a few rows also run as a
child process against a local Hub behind a proxy, as a user would meet them."""

from __future__ import annotations

import json
import os
import socket

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import env_for, listing, one_line_error

# (id, args, extra env, words the error line must contain). "{x}" names a path under tmp_path.
CASES: list[tuple[str, list[str], dict[str, str], list[str]]] = [
    # repo ids
    ("repo-no-owner", ["push", "--repo", "run", "--local-dir", "{good}", "--step", "1"], {}, ["--repo", "OWNER/NAME"]),
    ("repo-three-parts", ["push", "--repo", "a/b/c", "--local-dir", "{good}", "--step", "1"], {}, ["--repo"]),
    ("repo-leading-dash", ["latest", "--repo", "-org/run"], {}, ["--repo"]),
    ("repo-trailing-dash", ["latest", "--repo", "org/run-"], {}, ["--repo"]),
    ("repo-space", ["latest", "--repo", "org/ru n"], {}, ["--repo"]),
    ("repo-dotdot", ["pull", "--repo", "org/run..x", "--subfolder", "s", "--local-dir", "{new}"], {}, ["'..'"]),
    ("repo-double-dash", ["list", "--repo", "org--x/run"], {}, ["'--'"]),
    ("repo-dot-git", ["latest", "--repo", "org/run.git"], {}, [".git"]),
    ("repo-empty", ["latest", "--repo", ""], {}, ["--repo"]),
    ("repo-too-long", ["latest", "--repo", "o/" + "x" * 97], {}, ["--repo"]),
    # a bucket URI mistyped: the error shows the bucket form, not only the repo id's
    ("bucket-singular", ["push", "--repo", "hf://bucket/org/ckpts", "--local-dir", "{good}", "--step", "1"], {},
     ["--repo", "hf://buckets/OWNER/NAME"]),
    ("bucket-no-kind", ["latest", "--repo", "hf://org/ckpts"], {}, ["--repo", "hf://buckets/OWNER/NAME"]),
    ("bucket-one-slash", ["pull", "--repo", "hf:/buckets/org/x", "--latest", "--local-dir", "{new}"], {},
     ["--repo", "hf://buckets/OWNER/NAME"]),
    ("bucket-pin-cut", ["pull", "--repo", "hf://buckets/o/b", "--subfolder", "checkpoint-1", "--revision",
                        "sha256:d1a1152329fa", "--local-dir", "{new}"], {}, ["--revision", "sha256:<64 hex>"]),
    ("bucket-no-name", ["latest", "--repo", "hf://buckets/org"], {}, ["--repo", "hf://buckets/OWNER/NAME"]),
    # subfolders
    ("sub-dotdot", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "../up"], {}, ["'..'"]),
    ("sub-inner-dotdot", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "a/../b"], {}, ["'..'"]),
    ("sub-absolute", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "/abs"], {}, ["absolute"]),
    ("sub-backslash", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "a\\b"], {}, ["backslash"]),
    ("sub-empty", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", ""], {}, ["empty"]),
    ("sub-blank", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "   "], {}, ["empty"]),
    ("sub-dot-git", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", ".git"], {}, ["reserved"]),
    ("sub-cache", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "c/.cache"], {}, ["reserved"]),
    ("sub-gitattributes", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", ".gitattributes"], {},
     ["reserved"]),
    ("sub-double-slash", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "a//b"], {}, ["empty"]),
    ("sub-leading-dash", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "-x"], {}, ["segment"]),
    ("pull-sub-dotdot", ["pull", "--repo", "o/r", "--subfolder", "../x", "--local-dir", "{new}"], {}, ["'..'"]),
    ("promote-to-dotdot", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "../x"], {}, ["--to"]),
    # steps
    ("step-negative", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "-1"], {}, ["negative"]),
    ("step-too-big", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "10000000000000000000"], {},
     ["--step", "too big"]),
    ("step-float", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1.5"], {}, ["--step"]),
    ("step-word", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "abc"], {}, ["--step"]),
    ("step-disagrees", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "5", "--subfolder",
                        "checkpoint-6"], {}, ["disagrees"]),
    ("no-step-no-subfolder", ["push", "--repo", "o/r", "--local-dir", "{good}"], {}, ["--subfolder or --step"]),
    # local dirs
    ("dir-missing", ["push", "--repo", "o/r", "--local-dir", "{missing}", "--step", "1"], {}, ["does not exist"]),
    ("dir-empty", ["push", "--repo", "o/r", "--local-dir", "{empty}", "--step", "1"], {}, ["no files"]),
    ("dir-is-file", ["push", "--repo", "o/r", "--local-dir", "{afile}", "--step", "1"], {}, ["is a file"]),
    ("symlink-file-out", ["push", "--repo", "o/r", "--local-dir", "{linkfile}", "--step", "1"], {}, ["symlink"]),
    ("symlink-dir-out", ["push", "--repo", "o/r", "--local-dir", "{linkdir}", "--step", "1"], {}, ["symlink"]),
    ("symlink-dotdot", ["push", "--repo", "o/r", "--local-dir", "{linkrel}", "--step", "1"], {}, ["symlink"]),
    ("symlink-dir-inside", ["push", "--repo", "o/r", "--local-dir", "{linkin}", "--step", "1"], {},
     ["symlinked directory"]),
    ("promote-to-repo-bad", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                             "--to-repo", "not a repo"], {}, ["--to-repo"]),
    ("promote-to-repo-newline", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                                 "--to-repo", "o/r2\n"], {}, ["--to-repo"]),
    ("promote-branch-dotdot", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                               "--branch", "a..b"], {}, ["--branch"]),
    ("promote-branch-newline", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                                "--branch", "main\n"], {}, ["--branch"]),
    ("promote-into-itself", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-5", "--to",
                             "checkpoint-5/rel"], {}, ["overlaps"]),
    ("promote-over-parent", ["promote", "--repo", "o/r", "--subfolder", "release/v1", "--to", "release"], {},
     ["overlaps"]),
    ("dir-fifo", ["push", "--repo", "o/r", "--local-dir", "{fifo}", "--step", "1"], {}, ["not a regular file"]),
    ("dir-socket", ["push", "--repo", "o/r", "--local-dir", "{sock}", "--step", "1"], {}, ["not a regular file"]),
    ("dir-dangling-link", ["push", "--repo", "o/r", "--local-dir", "{dangling}", "--step", "1"], {},
     ["dangling symlink"]),
    ("dir-backslash-name", ["push", "--repo", "o/r", "--local-dir", "{backslash}", "--step", "1"], {},
     ["push does not take"]),
    ("dir-newline-name", ["push", "--repo", "o/r", "--local-dir", "{newline}", "--step", "1"], {},
     ["push does not take"]),
    # names push's own readers (latest, pull, list) would refuse after the commit: one rule for both
    ("dir-nbsp-name", ["push", "--repo", "o/r", "--local-dir", "{nbsp}", "--step", "1"], {}, ["no-break space"]),
    ("dir-bidi-name", ["push", "--repo", "o/r", "--local-dir", "{bidi}", "--step", "1"], {}, ["bidirectional"]),
    ("dir-dot-git", ["push", "--repo", "o/r", "--local-dir", "{dotgit}", "--step", "1"], {}, ["'.git'"]),
    ("dir-too-deep", ["push", "--repo", "o/r", "--local-dir", "{deep}", "--step", "1"], {}, ["levels deep"]),
    # whole-string patterns: a trailing newline is not a valid name
    ("sub-trailing-newline", ["push", "--repo", "o/r", "--local-dir", "{good}", "--subfolder", "checkpoint-7\n"],
     {}, ["segment"]),
    ("repo-trailing-newline", ["latest", "--repo", "o/r\n"], {}, ["--repo"]),
    ("revision-trailing-newline", ["latest", "--repo", "o/r", "--revision", "main\n"], {}, ["--revision"]),
    ("tag-newline", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release", "--tag",
                     "v1\n::x"], {}, ["--tag"]),
    ("commit-message-newline", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1",
                                "--commit-message", "one\ntwo"], {}, ["--commit-message"]),
    # pointer files: regular files only, bounded in bytes (CKPT_MAX_POINTER_BYTES), parsed depth-bounded
    ("pointer-dev-zero", ["pull", "--pointer", "/dev/zero", "--local-dir", "{new}"], {}, ["--pointer",
                                                                                          "not a regular file"]),
    ("pointer-fifo", ["pull", "--pointer", "{pfifo}", "--local-dir", "{new}"], {}, ["--pointer",
                                                                                   "not a regular file"]),
    ("pointer-dir-link-to-zero", ["pull", "--pointer", "{pzero}", "--local-dir", "{new}"], {},
     ["--pointer", "not a regular file"]),
    ("pointer-deep-json", ["pull", "--pointer", "{pdeep}", "--local-dir", "{new}"], {}, ["--pointer", "nested"]),
    ("pointer-over-bound", ["pull", "--pointer", "{pgood}", "--local-dir", "{new}"],
     {"CKPT_MAX_POINTER_BYTES": "64"}, ["--pointer", "CKPT_MAX_POINTER_BYTES"]),
    # W&B inputs: checked before the push, not after its commit
    ("wandb-artifact-name-space", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--wandb-project",
                                   "p", "--wandb-artifact-name", "bad name", "--wandb-fatal"],
     {"WANDB_MODE": "offline"}, ["--wandb-artifact-name"]),
    ("wandb-artifact-name-newline", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1",
                                     "--wandb-project", "p", "--wandb-artifact-name", "ok\n"],
     {"WANDB_MODE": "offline"}, ["--wandb-artifact-name"]),
    ("wandb-project-slash", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--wandb-project",
                             "team/p", "--wandb-fatal"], {"WANDB_MODE": "offline"}, ["--wandb-project"]),
    ("wandb-entity-colon", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--wandb-project", "p",
                            "--wandb-entity", "a:b"],
     {"WANDB_MODE": "offline"}, ["--wandb-entity"]),
    ("wandb-run-id-env", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--wandb-project", "p"],
     {"WANDB_MODE": "offline", "WANDB_RUN_ID": "run;1"}, ["--wandb-run-id"]),
    ("wandb-registry-bad", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                            "--wandb-project", "p", "--wandb-registry", "models/llama"], {"WANDB_MODE": "offline"},
     ["--wandb-registry"]),
    # output files are checked before any work
    ("dotenv-is-dir", ["latest", "--repo", "o/r", "--dotenv", "{empty}"], {}, ["--dotenv", "directory"]),
    ("dotenv-no-parent", ["latest", "--repo", "o/r", "--dotenv", "{missing}/out.env"], {}, ["--dotenv"]),
    # modes and flags
    ("unknown-mode", ["pushh", "--repo", "o/r"], {}, ["pushh"]),
    ("unknown-flag", ["latest", "--repo", "o/r", "--bogus"], {}, ["--bogus"]),
    ("pull-two-sources", ["pull", "--repo", "o/r", "--subfolder", "s", "--latest", "--local-dir", "{new}"], {},
     ["exactly one"]),
    ("pull-no-source", ["pull", "--repo", "o/r", "--local-dir", "{new}"], {}, ["exactly one"]),
    ("revision-dotdot", ["latest", "--repo", "o/r", "--revision", "a..b"], {}, ["--revision"]),
    ("prune-keep-zero", ["prune", "--repo", "o/r", "--keep-last", "0"], {}, ["--keep-last"]),
    ("prune-keep-every-zero", ["prune", "--repo", "o/r", "--keep-every", "0"], {}, ["--keep-every"]),
    ("prune-keep-best-form", ["prune", "--repo", "o/r", "--keep-best", "eval_loss"], {}, ["--keep-best",
                                                                                          "METRIC:min|max[:K]"]),
    ("prune-keep-best-newline", ["prune", "--repo", "o/r", "--keep-best", "a\n::warning::x:min"], {},
     ["--keep-best", "METRIC:min"]),
    ("prune-keep-best-escape", ["prune", "--repo", "o/r", "--keep-best", "a\x1bb:min"], {},
     ["--keep-best", "control"]),
    ("prune-no-rule", ["prune", "--repo", "o/r"], {}, ["--keep-last", "--keep-best"]),
    ("push-metric-nan", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--metric", "loss=nan"],
     {}, ["--metric", "finite"]),
    ("push-metric-name-long", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--metric",
                               "x" * 200 + "=1"], {}, ["--metric", "longer than"]),
    ("latest-best-mode", ["latest", "--repo", "o/r", "--best", "eval_loss:lowest"], {}, ["--best", "min or max"]),
    ("promote-best-and-subfolder", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--best",
                                    "eval_loss:min", "--to", "release"], {}, ["--best", "--subfolder"]),
    ("promote-no-source", ["promote", "--repo", "o/r", "--to", "release"], {}, ["--subfolder", "--best"]),
    ("timeout-zero", ["latest", "--repo", "o/r", "--timeout", "0"], {}, ["timeout"]),
    ("timeout-env-word", ["latest", "--repo", "o/r"], {"CKPT_TIMEOUT": "soon"}, ["CKPT_TIMEOUT"]),
    ("endpoint-ftp", ["latest", "--repo", "o/r", "--endpoint", "ftp://example.com"], {}, ["--endpoint"]),
    ("endpoint-creds", ["latest", "--repo", "o/r", "--endpoint", "http://u:p@127.0.0.1:9"], {}, ["credentials"]),
    # the real Hub without a token
    ("hub-push-no-token", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1", "--endpoint",
                           "https://huggingface.co"], {}, ["HF_TOKEN"]),
    ("hub-promote-no-token", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release",
                              "--endpoint", "https://huggingface.co"], {}, ["HF_TOKEN"]),
    ("hub-prune-no-token", ["prune", "--repo", "o/r", "--keep-last", "2", "--endpoint", "https://huggingface.co"],
     {}, ["HF_TOKEN"]),
    # tokens: surrounding whitespace is stripped where the token is read; inside, it is refused
    ("token-inner-space", ["latest", "--repo", "o/r"], {"HF_TOKEN": "hf_SeCrEt12 34xyz"}, ["HF_TOKEN", "--token"]),
    ("token-inner-newline", ["push", "--repo", "o/r", "--local-dir", "{good}", "--step", "1"],
     {"HF_TOKEN": "hf_SeCrEt12\n34xyz\n"}, ["HF_TOKEN"]),
    ("token-flag-control", ["pull", "--repo", "o/r", "--latest", "--local-dir", "{new}", "--token",
                            "hf_SeCrEt12\x1b34xyz"], {}, ["--token"]),
    # a pointer naming another host: the token goes only to the configured endpoint
    ("pointer-other-origin", ["pull", "--pointer", "{pointer}", "--local-dir", "{new}"],
     {"HF_TOKEN": "hf_SeCrEt1234xyz"}, ["--endpoint", "http://127.0.0.1:7", "configured endpoint"]),
    # watch: refused before the upload process, the training command or any request starts
    ("watch-pattern-no-group", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--pattern", r"step_\d+"], {},
     ["--pattern", "exactly one capture group", r"'step_\d+' has 0"]),  # the pattern as typed, not as a repr
    ("watch-pattern-two-groups", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--pattern", r"(s)_(\d+)"], {},
     ["--pattern", "exactly one capture group"]),
    ("watch-pattern-bad-regex", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--pattern", "step_(\\d+"], {},
     ["--pattern", "not a regular expression"]),
    ("watch-grace-word", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--grace", "soon"], {}, ["--grace"]),
    ("watch-settle-negative", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--settle", "-1"], {},
     ["--settle", ">= 0"]),
    ("watch-dir-is-file", ["watch", "--repo", "o/r", "--local-dir", "{afile}", "--", "true"], {},
     ["--local-dir", "is a file"]),
    ("watch-keep-zero", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--keep-last", "0"], {},
     ["--keep-last"]),
    ("watch-keep-best-mode", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--keep-best", "eval_loss:up"], {},
     ["--keep-best", "METRIC:min|max"]),
    ("watch-keep-every-zero", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--keep-every", "0"], {},
     ["--keep-every", "at least 1"]),
    # every count and number: ASCII digits only (issue 40: '\u0663' was taken as 3, a K of '\u00b2' or 5,000
    # digits was "unexpected ValueError", exit 1)
    *[(f"count-{cmd[0]}-{flag[2:]}-{label}", [*cmd, flag, value], {}, [flag, "ASCII digits"])
      for flag, cmd in (
          ("--keep-last", ["prune", "--repo", "o/r"]),
          ("--keep-every", ["prune", "--repo", "o/r"]),
          ("--retries", ["latest", "--repo", "o/r"]),
          ("--timeout", ["latest", "--repo", "o/r"]),
          ("--verify-min-step", ["latest", "--repo", "o/r"]),
          ("--step", ["push", "--repo", "o/r", "--local-dir", "{good}"]),
          ("--commits-per-hour", ["watch", "--repo", "o/r", "--local-dir", "{new}"]),
          ("--settle", ["watch", "--repo", "o/r", "--local-dir", "{new}"]),
          ("--grace", ["watch", "--repo", "o/r", "--local-dir", "{new}"]),
          ("--keep-last", ["watch", "--repo", "o/r", "--local-dir", "{new}"]))
      for label, value in (("superscript", "\u00b2"), ("arabic-indic", "\u0663"), ("5000-digits", "9" * 5000),
                           ("underscore", "1_0"))],
    *[(f"count-{cmd[0]}-keep-best-{label}", [*cmd, "--keep-best", f"eval_loss:min:{value}"], {},
       ["--keep-best", "ASCII digits"])
      for cmd in (["prune", "--repo", "o/r"], ["watch", "--repo", "o/r", "--local-dir", "{new}"])
      for label, value in (("superscript", "\u00b2"), ("arabic-indic", "\u0663"), ("5000-digits", "9" * 5000))],
    *[(f"size-max-shard-size-{label}", ["promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "r",
                                        "--as-model", "--max-shard-size", value], {}, ["--max-shard-size", "ASCII"])
      for label, value in (("arabic-indic", "\u0663GB"), ("5000-digits", "9" * 5000))],
    *[(f"env-{var}-{label}", ["latest", "--repo", "o/r"], {var: value}, [var, "ASCII digits"])
      for var in ("CKPT_RETRIES", "CKPT_TIMEOUT") for label, value in (("arabic-indic", "\u0663"),
                                                                       ("5000-digits", "9" * 5000))],
    ("watch-format", ["watch", "--repo", "o/r", "--local-dir", "{new}", "--format", "keras"], {}, ["--format"]),
    ("watch-repo", ["watch", "--repo", "run", "--local-dir", "{new}"], {}, ["--repo"]),
    # pull targets
    ("pull-nonempty-no-force", ["pull", "--repo", "o/r", "--subfolder", "s", "--local-dir", "{full}"], {},
     ["--force"]),
    ("pull-latest-nonempty", ["pull", "--repo", "o/r", "--latest", "--local-dir", "{full}"], {}, ["--force"]),
    ("pull-target-is-file", ["pull", "--repo", "o/r", "--subfolder", "s", "--local-dir", "{afile}"], {},
     ["not a directory"]),
]


def _layout(tmp_path):
    root = tmp_path / "in"
    paths = {
        "good": write_checkpoint(root / "good", {"w.bin": b"w"}),
        "empty": root / "empty",
        "afile": root / "afile.bin",
        "missing": root / "missing",
        "new": root / "new-target",
        "full": write_checkpoint(root / "full", {"old.txt": b"old"}),
        "linkfile": write_checkpoint(root / "linkfile", {"w.bin": b"w"}),
        "linkdir": write_checkpoint(root / "linkdir", {"w.bin": b"w"}),
        "linkrel": write_checkpoint(root / "linkrel", {"w.bin": b"w"}),
        "linkin": write_checkpoint(root / "linkin", {"real/w.bin": b"w"}),
        "fifo": write_checkpoint(root / "fifo", {"w.bin": b"w"}),
        "sock": write_checkpoint(root / "sock", {"w.bin": b"w"}),
        "dangling": write_checkpoint(root / "dangling", {"w.bin": b"w"}),
        "backslash": write_checkpoint(root / "backslash", {"a\\b.bin": b"w"}),
        "newline": write_checkpoint(root / "newline", {"a\nb.bin": b"w"}),
        "nbsp": write_checkpoint(root / "nbsp", {"w.bin": b"w", "a\u00a0b.bin": b"w"}),
        "bidi": write_checkpoint(root / "bidi", {"w.bin": b"w", "sub/a\u202etxt.exe": b"w"}),
        "dotgit": write_checkpoint(root / "dotgit", {"w.bin": b"w", ".git/config": b"[core]"}),
        "deep": write_checkpoint(root / "deep", {"w.bin": b"w", "d/" * 101 + "x.bin": b"w"}),
    }
    paths["empty"].mkdir(parents=True)
    paths["pointer"] = root / "checkpoint.json"
    # Another port than the configured endpoint (HF_ENDPOINT, below): another origin.
    elsewhere = f"http://127.0.0.1:7/o/r/tree/{'a' * 40}/checkpoint-1"
    paths["pointer"].write_text(json.dumps({"repo": "o/r", "subfolder": "checkpoint-1", "revision": "a" * 40,
                                            "step": 1, "hub_url": elsewhere}))
    pointers = root / "pointers"
    pointers.mkdir()
    paths["pfifo"] = pointers / "fifo.json"
    os.mkfifo(paths["pfifo"])  # no writer: reading it would block forever
    paths["pzero"] = pointers / "zero"
    paths["pzero"].mkdir()
    os.symlink("/dev/zero", paths["pzero"] / "checkpoint.json")
    paths["pdeep"] = pointers / "deep.json"
    paths["pdeep"].write_text("[" * 100_000 + "]" * 100_000)  # far under the byte bound
    paths["pgood"] = pointers / "good.json"
    sha = "a" * 40
    paths["pgood"].write_text(json.dumps({"repo": "o/r", "subfolder": "checkpoint-1", "revision": sha, "step": 1,
                                          "hub_url": f"http://127.0.0.1:9/o/r/tree/{sha}/checkpoint-1"}))
    (paths["empty"] / "sub").mkdir()  # only directories: still nothing to push
    paths["afile"].write_bytes(b"x")
    outside = write_checkpoint(tmp_path / "outside", {"secret.txt": b"secret"})
    os.symlink(outside / "secret.txt", paths["linkfile"] / "leak.txt")
    os.symlink(outside, paths["linkdir"] / "leakdir", target_is_directory=True)
    os.symlink("../../outside/secret.txt", paths["linkrel"] / "rel.txt")
    os.symlink("real", paths["linkin"] / "alias", target_is_directory=True)
    os.mkfifo(paths["fifo"] / "pipe")  # reading it would block forever
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(paths["sock"] / "s.sock"))
    os.symlink("gone.bin", paths["dangling"] / "link.bin")
    return paths


def _check(run, words, tmp_path, before):
    assert run.code == 2, f"exit {run.code}\n{run.stdout}\n{run.stderr}"
    line = one_line_error(run.stderr)
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for word in words:
        assert word in line, line
    assert run.stdout == ""
    assert listing(tmp_path) == before, "bad input created files"
    assert (tmp_path / "outside" / "secret.txt").read_bytes() == b"secret"
    for secret in ("SeCrEt12", "34xyz"):  # no part of a refused token is printed
        assert secret not in run.stderr + run.stdout


@pytest.mark.parametrize(("args", "extra", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_without_network_or_files(args, extra, words, cli_in_process, tmp_path, monkeypatch):
    paths = _layout(tmp_path)
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", **extra)
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    before = listing(tmp_path)
    connects: list[object] = []

    def refuse(sock, address):
        connects.append(address)
        raise ConnectionRefusedError("bad input must not reach the network")

    # Every connection the client or our own downloads open goes through this.
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    run = cli_in_process(*argv, env=env)
    assert connects == [], "bad input reached the network"
    _check(run, words, tmp_path, before)


# One row per kind of check, as a child process a user starts: parsing, a name rule, the
# local dir, the pull target, and the real Hub's token rule (any request would reach the
# local Hub's log through the proxy).
AS_A_USER = ("step-word", "repo-no-owner", "dir-fifo", "pull-nonempty-no-force", "hub-push-no-token")


@pytest.mark.parametrize(("args", "extra", "words"), [c[1:] for c in CASES if c[0] in AS_A_USER],
                         ids=[c[0] for c in CASES if c[0] in AS_A_USER])
def test_bad_input_in_a_child_process(args, extra, words, hub_server, cli, tmp_path):
    hub = hub_server()
    paths = _layout(tmp_path)
    env = env_for(hub, tmp_path, HTTPS_PROXY=hub.url, HTTP_PROXY=hub.url, NO_PROXY="", **extra)
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    before = listing(tmp_path)
    run = cli(*argv, env=env)
    assert hub.log_entries() == [], "bad input reached the network"
    _check(run, words, tmp_path, before)


def test_case_table_is_big_enough():
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)
