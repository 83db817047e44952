"""The keyless example (``.github/workflows/example-keyless.yml``) run by act against a local
Hub that trusts the test issuer: no Hub token in the workflow, its variables or the job's
environment; the jobs get their id token as GitHub gives it (``ACTIONS_ID_TOKEN_REQUEST_URL``
and ``_TOKEN``, the test issuer's), and every request the Hub logged carried a token it
exchanged, scoped to the one repo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from ckpt_localhub.testissuer import TestIssuer
from tests.e2e.test_action_act import NATIVE, WORKFLOWS, act_env, run_act
from tests.helpers.localhub_fixtures import entries

pytestmark = pytest.mark.act

ADMIN = "act-admin-7d0b2e"  # the Hub's own token, for the setup here: the workflow never has it
REPO = "act/keyless"
GITHUB_REPO = "acme/ckpt-action"


@NATIVE
def test_example_keyless_pushes_finds_and_promotes_with_exchanged_tokens_only(hub_server, tool_cache: Path,
                                                                               cli) -> None:
    workflow = (WORKFLOWS / "example-keyless.yml").read_text()
    assert "secrets." not in workflow and not re.search(r"^\s*token:", workflow, re.M)
    with TestIssuer(repository=GITHUB_REPO) as issuer:
        hub = hub_server(token=ADMIN, extra_args=("--oidc-issuer", issuer.url,
                                                  "--trusted-publisher", f"{REPO}={GITHUB_REPO}"))
        HfApi(endpoint=hub.url, token=ADMIN).create_repo(REPO, private=True)
        hub.access_log.write_text("")
        env = act_env()
        assert not [k for k in env if k.startswith("HF_")]
        proc = run_act(WORKFLOWS / "example-keyless.yml", "workflow_dispatch", "-P", "ubuntu-latest=-self-hosted",
                       "--env", f"CKPT_ACTION_CACHE={tool_cache}",
                       *(arg for name, value in issuer.actions_env().items() for arg in ("--env", f"{name}={value}")),
                       "--var", f"HF_ENDPOINT={hub.url}", "--var", f"CKPT_REPO={REPO}",
                       "--var", "CKPT_RUNTIME=native", "--input", "tag=v1.0", env=env)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-6000:]
        minted = len(issuer.minted)
    released = re.search(r"released commit ([0-9a-f]{40}) as ([0-9a-f]{40}), tagged v1.0, keyless", log)
    assert released, log[-6000:]
    assert ADMIN not in log and "hf_oidc_" not in log  # the exchanged tokens are masked (prefix and all)
    # Every request to the Hub's API carried an exchanged token scoped to the repo, written:
    # the three steps (push, latest, promote) one exchange each, from an id token minted each.
    requests = [e for e in entries(hub, listener="hub") if e["path"] != "/oauth/token"
                and not (e["path"].startswith("/localhub-lfs/") and "&sig=" in e["path"])]
    assert requests
    assert {e["credential"] for e in requests} == {f"exchanged:write:model/{REPO}"}, \
        {(e["path"], e["credential"]) for e in requests}
    assert {e["status"] for e in entries(hub, "POST", "/oauth/token")} == {200}
    logged = "\n".join(f'{e["method"]} {e["path"][:50]} {e["listener"]}' for e in entries(hub))
    assert len(entries(hub, "POST", "/oauth/token")) == minted == 3, logged
    assert all(e["credential"] in ("xet", None) for e in entries(hub, listener="cas"))
    listed = cli("list", "--repo", REPO, "--revision", "v1.0", "--json", HF_ENDPOINT=hub.url, HF_TOKEN=ADMIN)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["release"]["complete"] and rows["release"]["source"]["revision"] == released.group(1)
