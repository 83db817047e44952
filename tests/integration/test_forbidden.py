"""A 403 is an error (exit 1), never "no checkpoint": a token that may not read the repo
must not make latest answer found: false, or a job would start training from scratch."""

from __future__ import annotations

import pytest

from tests.helpers.chaos_helpers import env_for, one_line_error
from tests.helpers.hostile_proxy import hostile_fixture  # noqa: F401


@pytest.mark.parametrize(("path", "args"), [(r"/refs$", ["--revision", "main"]), (r"/tree/main$", []),
                                           (r"/tree/[0-9a-f]{40}$", ["--revision", "main"])],
                         ids=["refs", "listing", "listing-at-a-commit"])
def test_a_403_is_exit_1_never_found_false(path, args, seeded, hostile, cli, tmp_path):
    proxy = hostile(seeded)
    proxy.set_rules([{"path": path, "status": 403, "times": -1}])
    run = cli("latest", "--repo", "o/r", *args, "--json", env=env_for(proxy, tmp_path))
    assert proxy.fired(0) >= 1, f"latest sent no request matching {path}"
    assert run.code == 1, run.stdout + run.stderr
    assert '"found": false' not in run.stdout and "found" not in run.stdout, run.stdout
    assert "403" in one_line_error(run.stderr) or "denied" in one_line_error(run.stderr).lower()
