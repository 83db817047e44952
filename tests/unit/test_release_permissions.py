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
