"""The local Hub's fault rules: the file's validation and how rules fire, without a server
(the faults seen through the client: tests/integration/test_localhub_faults.py)."""

from __future__ import annotations

import json

import pytest

from ckpt_localhub import FaultFileError, FaultSet


@pytest.mark.parametrize("text,message", [
    ("{}", "expected a JSON list"),
    ('[{"path": "x"}]', "needs one of"),
    ('[{"path": "x", "status": 503, "times": 0}]', "'times'"),
    ('[{"path": "x", "reset": -1}]', "'reset'"),
    ('[{"path": "x", "bogus": 1, "status": 500}]', "unknown key"),
    ('[{"path": "x", "ratelimit_reset": "soon"}]', "'ratelimit_reset'"),
    ('[{"path": "x", "ratelimit_reset": 5, "ratelimit_quota": -1}]', "'ratelimit_quota'"),
    ('[{"path": "/commit/", "commit_quota": "many"}]', "'commit_quota'"),
    ('[{"path": "/commit/", "commit_quota": 2, "commit_window": 0}]', "'commit_window'"),
])
def test_fault_file_validation(tmp_path, text, message):
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(FaultFileError, match=message):
        FaultSet(path)


def test_fault_rules_fire_in_order_and_count(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"method": "GET", "path": "/resolve/", "reset": 10, "times": 2},
                                {"path": "/resolve/", "corrupt": True}]))
    faults = FaultSet(path)
    assert faults.take("HEAD", "/a/b/resolve/main/x") is None  # corrupt never matches a HEAD

    def fired(redirect: bool = False) -> int | None:
        firing = faults.take("GET", "/a/b/resolve/main/x", redirect=redirect)
        return firing.rule.index if firing else None

    assert fired(redirect=True) is None  # byte rules pass over redirects, and keep their fires
    assert [fired() for _ in range(4)] == [0, 0, 1, None]


def test_a_commit_quota_counts_landed_commits_per_repo_within_its_window(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"method": "POST", "path": "/commit/", "commit_quota": 2, "commit_window": 60}]))
    faults = FaultSet(path)
    firing = faults.take("POST", "/api/models/o/r/commit/main")
    assert firing is not None and firing.rule.commit_quota == 2
    for _ in range(2):
        assert faults.quota_wait(firing.rule, "/api/models/o/r") is None
        faults.count_commit(firing.rule, "/api/models/o/r")
    wait = faults.quota_wait(firing.rule, "/api/models/o/r")
    assert wait is not None and 59 <= wait <= 60
    assert faults.quota_wait(firing.rule, "/api/models/o/other") is None
    assert faults.take("POST", "/api/models/o/r/commit/main") is not None  # it uses no fires
