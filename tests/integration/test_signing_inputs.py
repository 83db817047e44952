"""The signing and verification inputs, refused before any request (issue 27, items 13, 14
and 24): every file input is a regular file of bounded size, checked before it is read; a
signed push of a dir whose names collide with what signing writes is refused before the
repo is made; a signing key others may read is warned about, not refused."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import one_line_error
from tests.helpers.signing_helpers import make_key, make_pki

FILES = {"model.safetensors": b"w" * 1000, "config.json": b"{}"}
IDENTITY = ["--verify-identity", "https://github.com/o/r", "--verify-issuer",
            "https://token.actions.githubusercontent.com"]
# (id, the flag that gets the bad file, the command's other arguments)
INPUTS = [
    ("signing-key", "--signing-key", ["push", "--step", "1"]),
    ("signing-certificate", "--signing-certificate", ["push", "--step", "1", "--signing-key", "{key}",
                                                      "--signing-chain", "{chain}"]),
    ("signing-chain", "--signing-chain", ["push", "--step", "1", "--signing-key", "{key}",
                                          "--signing-certificate", "{cert}"]),
    ("sign-keyless-trust-config", "--sigstore-trust-config", ["push", "--step", "1", "--sign-keyless"]),
    ("verify-key", "--verify-key", ["pull", "--subfolder", "checkpoint-1"]),
    ("verify-certificate-chain", "--verify-certificate-chain", ["pull", "--subfolder", "checkpoint-1"]),
    ("verify-identity-trust-config", "--sigstore-trust-config", ["pull", "--subfolder", "checkpoint-1", *IDENTITY]),
]


@pytest.fixture
def no_network(monkeypatch):
    """Every connection attempt, recorded and refused: bad input must not reach the network."""
    connects: list[object] = []

    def refuse(sock, address):
        connects.append(address)
        raise ConnectionRefusedError("bad input must not reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return connects


def _argv(command: list[str], flag: str, bad: str, paths: dict[str, str], tmp_path) -> list[str]:
    mode, *rest = command
    where = (["--local-dir", str(write_checkpoint(tmp_path / "src", FILES))] if mode == "push"
             else ["--local-dir", str(tmp_path / "dest")])
    return [mode, "--repo", "o/r", *where, *(a.format(**paths) for a in rest), flag, bad]


@pytest.mark.parametrize("bad", ["fifo", "dev-zero", "too-big"])
@pytest.mark.parametrize(("flag", "command"), [i[1:] for i in INPUTS], ids=[i[0] for i in INPUTS])
def test_a_fifo_dev_zero_or_huge_file_input_is_refused_before_it_is_read(flag, command, bad, cli_in_process,
                                                                         no_network, tmp_path):
    """A FIFO with no writer would block a read forever; /dev/zero would fill the memory."""
    pki = make_pki(tmp_path)
    paths = {"key": str(pki.key), "cert": str(pki.certificate), "chain": str(pki.chain)}
    if bad == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif bad == "dev-zero":
        target = tmp_path / "zero.pem"
        os.symlink("/dev/zero", target)
    else:
        target = tmp_path / "big.pem"
        target.write_bytes(b"-----BEGIN " + b"A" * (2 * 1024 * 1024))
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN="hf_" + "x" * 30,
                    ACTIONS_ID_TOKEN_REQUEST_URL="http://127.0.0.1:9/token", ACTIONS_ID_TOKEN_REQUEST_TOKEN="t")
    run = cli_in_process(*_argv(command, flag, str(target), paths, tmp_path), env=env, timeout=60)
    assert run.code == 2, f"exit {run.code}\n{run.stdout}\n{run.stderr}"
    line = one_line_error(run.stderr)
    assert line.startswith(f"error: {flag}: "), line
    assert ("not a regular file" if bad != "too-big" else "more than 1048576 bytes") in line, line
    assert no_network == [] and not (tmp_path / "dest").exists()


@pytest.mark.parametrize(("name", "signed"), [("ckpt-provenance.json", True), ("model.sig", True),
                                            ("ckpt-manifest.json", True), ("ckpt-manifest.json", False)])
def test_a_push_of_a_dir_holding_a_folder_named_like_what_push_writes_is_refused_first(
        name, signed, cli_in_process, no_network, tmp_path):
    key = make_key(tmp_path)
    src = write_checkpoint(tmp_path / "src", {**FILES, f"{name}/inner.json": b"{}"})
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN="hf_" + "x" * 30)
    run = cli_in_process("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1",
                         *(["--signing-key", str(key.private)] if signed else []), env=env)
    assert run.code == 2, f"exit {run.code}\n{run.stdout}\n{run.stderr}"
    line = one_line_error(run.stderr)
    assert "--local-dir" in line and repr(name) in line, line
    assert no_network == [], "the push reached the network before refusing"


def test_a_signed_push_of_such_a_dir_creates_no_repo(hub_server, cli, tmp_path):
    hub = hub_server()
    key = make_key(tmp_path)
    src = write_checkpoint(tmp_path / "src", {**FILES, "model.sig/x.bin": b"x"})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--signing-key", str(key.private),
              env=clean_env(tmp_path, HF_ENDPOINT=hub.url))
    assert run.code == 2, run.stderr
    assert hub.log_entries() == [], "a request was made"
    from huggingface_hub import HfApi

    assert not HfApi(endpoint=hub.url).repo_exists("o/r")


def test_a_signing_key_others_may_read_is_warned_about_not_refused(hub_server, cli, tmp_path):
    hub = hub_server()
    key = make_key(tmp_path)
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    warning = "is readable by group or others (mode 0o644): chmod 600 it"
    os.chmod(key.private, 0o644)
    run = cli("push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / "a", FILES)), "--step", "1",
              "--signing-key", str(key.private), env=env)
    assert run.code == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if warning in line]
    assert len(lines) == 1 and f"signing key '{key.private}' is readable" in lines[0], run.stderr
    os.chmod(key.private, stat.S_IRUSR | stat.S_IWUSR)
    run = cli("push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / "b", FILES)), "--step", "2",
              "--signing-key", str(key.private), env=env)
    assert run.code == 0, run.stderr
    assert "readable by group or others" not in run.stderr
