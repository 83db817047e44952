"""release.yml: every job that may write packages or mint an id token waits behind a
deployment environment (``release``; the PyPI job's ``pypi``, which PyPI's trusted publisher
names), and the workflow grants nothing by default."""

from __future__ import annotations

from pathlib import Path

import yaml

RELEASE = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "release.yml"
POWERFUL = {("packages", "write"), ("id-token", "write")}


def _environment(job: dict) -> str | None:
    env = job.get("environment")
    return env.get("name") if isinstance(env, dict) else env


def test_release_workflow_grants_nothing_by_default() -> None:
    assert yaml.safe_load(RELEASE.read_text())["permissions"] == {}


def test_every_job_holding_packages_or_id_token_write_is_behind_an_environment() -> None:
    jobs = yaml.safe_load(RELEASE.read_text())["jobs"]
    gated = {name: _environment(job) for name, job in jobs.items()
             if POWERFUL & set((job.get("permissions") or {}).items())}
    assert gated, "release.yml holds no packages: write or id-token: write job any more: update this test"
    for name, environment in gated.items():
        expected = "pypi" if name == "pypi" else "release"
        assert environment == expected, f"job {name} holds packages/id-token write without environment {expected}"


WORKFLOW = RELEASE.read_text()
JOBS = yaml.safe_load(WORKFLOW)["jobs"]


def test_no_job_holds_both_contents_write_and_id_token_write() -> None:
    for name, job in JOBS.items():
        granted = set((job.get("permissions") or {}).items())
        assert not {("contents", "write"), ("id-token", "write")} <= granted, name


def test_every_action_is_pinned_by_commit_and_buildkit_and_the_sbom_generator_by_digest() -> None:
    import re

    for uses in re.findall(r"uses: (\S+)", WORKFLOW):
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses), uses
    env = yaml.safe_load(WORKFLOW)["env"]
    assert re.fullmatch(r"moby/buildkit:v[0-9.]+@sha256:[0-9a-f]{64}", env["BUILDKIT_IMAGE"])
    assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", env["SBOM_GENERATOR"])
    build = next(s["run"] for s in JOBS["image"]["steps"] if s.get("id") == "build")
    assert '--driver-opt "image=$BUILDKIT_IMAGE"' in build
    assert "--provenance=mode=max" in build and '--sbom="generator=$SBOM_GENERATOR"' in build
    assert "--provenance=false" not in WORKFLOW


def test_the_image_is_attested_to_the_registry_and_signed_keyless_and_checked_as_the_docs_say() -> None:
    steps = JOBS["sign"]["steps"]
    attest = next(s for s in steps if str(s.get("uses", "")).startswith("actions/attest-build-provenance@"))
    assert attest["with"]["push-to-registry"] is True
    assert attest["with"]["subject-digest"] == "${{ needs.manifest.outputs.digest }}"
    run = next(s["run"] for s in steps if "cosign sign" in s.get("run", ""))
    assert 'cosign sign --yes "$image@$DIGEST"' in run
    assert "--certificate-oidc-issuer https://token.actions.githubusercontent.com" in run
    assert 'gh attest verify "oci://$image@$DIGEST" --owner' in run
    guide = (RELEASE.parents[2] / "docs" / "guides" / "github-action.md").read_text()
    assert "gh attest verify oci://ghcr.io/OWNER/ckpt-action:" in guide and "--owner OWNER" in guide
    assert "workflow=https://github.com/OWNER/ckpt-action/.github/workflows/release.yml\n" in guide
    assert '--certificate-identity "$workflow@refs/tags/' in guide
    assert "--certificate-oidc-issuer https://token.actions.githubusercontent.com" in guide
