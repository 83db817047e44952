"""A hostile or broken server: corrupted bytes, tree paths and ETags that try to escape.

Every case must fail the pull (exit 1, one ``error:`` line), leave the target exactly as it
was, and write nothing outside it: the parent dir and HF_HOME are listed before and after.
"""

from __future__ import annotations

import pytest

from tests.conftest import read_tree
from tests.helpers.chaos_helpers import ckpt, env_for, listing, one_line_error, seed

FILE = r"/resolve/[0-9a-f]{40}/checkpoint-1/model\.safetensors$"
MANIFEST = r"/resolve/[0-9a-f]{40}/checkpoint-1/ckpt-manifest\.json$"


@pytest.fixture
def seeded(hub_server, hf_client, tmp_path):
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-0", ckpt(0), tmp_path / "seed", step=0)
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path / "seed", step=1)
    return hub


def _pull(cli, hub, tmp_path, *extra, subfolder="checkpoint-1"):
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    env = env_for(hub, tmp_path, HF_HOME=str(tmp_path / "hf-home"))
    (tmp_path / "hf-home").mkdir(parents=True, exist_ok=True)
    return cli("pull", "--repo", "o/r", "--subfolder", subfolder, "--local-dir", str(work / "dest"),
               *extra, env=env)


def _strays(tmp_path):
    """Any "escaped*" beside an ancestor of this test's dir. Every escape the cases try is
    "../" steps then a name (or an absolute /tmp name: the test's last check), so from a path
    under ``tmp_path`` it lands either under ``tmp_path`` (its listing) or directly in one of
    its ancestors: those are looked at, not every other test's files beside them (a walk of
    the session's whole temp dir grew with the suite, to seconds a test)."""
    return sorted(str(p) for parent in tmp_path.parents for p in parent.glob("escaped*"))


def _snapshot(tmp_path):
    """This test's whole dir (target's parent, HF_HOME, cwd), and any stray "escaped*" further up."""
    return listing(tmp_path / "work"), listing(tmp_path / "hf-home"), listing(tmp_path), _strays(tmp_path)


CASES = {
    "corrupt-lfs-file": [{"method": "GET", "path": FILE, "corrupt": True, "times": -1}],
    "corrupt-small-file": [{"method": "GET", "path": r"/checkpoint-1/config\.json$", "corrupt": True,
                            "times": -1}],
    "corrupt-manifest": [{"method": "GET", "path": MANIFEST, "corrupt": True, "times": -1}],
    "tree-parent-escape": [{"method": "GET", "path": "/tree/", "tree_escape": "../../escaped.txt", "times": -1}],
    "tree-inner-dotdot": [{"method": "GET", "path": "/tree/", "tree_escape": "checkpoint-1/../../../escaped.txt",
                           "times": -1}],
    "tree-absolute": [{"method": "GET", "path": "/tree/", "tree_escape": "/tmp/escaped.txt", "times": -1}],
    "tree-backslash": [{"method": "GET", "path": "/tree/", "tree_escape": "checkpoint-1/..\\..\\escaped.txt",
                        "times": -1}],
    "tree-sibling-folder": [{"method": "GET", "path": "/tree/", "tree_escape": "checkpoint-1-evil/x.bin",
                             "times": -1}],
    "etag-escape-file": [{"path": FILE, "etag": '"../../../../escaped"', "times": -1}],
    "etag-escape-all": [{"path": r"/resolve/", "etag": '"../../../../../../escaped-all"', "times": -1}],
    "etag-absolute": [{"path": FILE, "etag": '"/tmp/escaped-abs"', "times": -1}],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("existing", [None, "update", "force"],
                         ids=["fresh", "update-earlier-pull", "force-over-earlier-pull"])
def test_hostile_server_fails_the_pull_and_writes_nothing(case, existing, seeded, cli, tmp_path):
    hub = seeded
    (tmp_path / "work").mkdir()
    (tmp_path / "hf-home").mkdir()
    dest = tmp_path / "work" / "dest"
    old: dict[str, bytes] = {}
    if existing:
        # An earlier pull of another checkpoint, which the failing pull would update in place.
        assert _pull(cli, hub, tmp_path, subfolder="checkpoint-0").code == 0
        if existing == "force":  # a pulled file edited since: what --force may overwrite
            (dest / "config.json").write_bytes(b'{"edited": "since"}')
        old = read_tree(dest) | {".ckpt-pull.json": (dest / ".ckpt-pull.json").read_bytes()}
    # A clean pull works first, so the failure below is the fault's doing.
    probe = _pull(cli, hub, tmp_path / "probe")
    assert probe.code == 0, probe.stderr
    before = _snapshot(tmp_path)
    hub.set_faults(CASES[case])
    start = len(hub.log_entries())
    run = _pull(cli, hub, tmp_path, *(["--force"] if existing == "force" else []))
    hub.set_faults([])
    assert len(hub.log_entries()) > start
    assert run.code == 1, f"{case}: exit {run.code}\n{run.stdout}\n{run.stderr}"
    line = one_line_error(run.stderr)
    assert run.stdout == ""
    after = _snapshot(tmp_path)
    diff = [sorted(set(a) ^ set(b)) for a, b in zip(before, after, strict=True)]
    assert after == before, f"{case}: something was written ({diff}): {line}"
    if existing:
        assert read_tree(dest) | {".ckpt-pull.json": (dest / ".ckpt-pull.json").read_bytes()} == old
    else:
        assert not dest.exists()
    import glob

    assert not glob.glob("/tmp/escaped*"), "a file escaped to /tmp"


def test_hostile_listings_never_make_latest_pick_or_pull_an_escape(seeded, cli, tmp_path):
    hub = seeded
    env = env_for(hub, tmp_path)
    good = cli("latest", "--repo", "o/r", "--json", env=env)
    assert good.code == 0 and good.json["subfolder"] == "checkpoint-1"
    # Escaping names at the top level are not checkpoint-N folders: latest ignores them.
    hub.set_faults([{"method": "GET", "path": "/tree/[0-9a-f]{40}$", "tree_escape": "../checkpoint-9",
                     "times": -1}])
    top = cli("latest", "--repo", "o/r", "--json", env=env)
    assert top.code == 0 and top.json["subfolder"] == "checkpoint-1", top.stdout + top.stderr
    # A lying listing of the folder itself: latest proves the folder from its manifest and
    # git tree id without reading that listing; the pull that does read it refuses.
    hub.set_faults([{"method": "GET", "path": "/tree/[0-9a-f]{40}/checkpoint-1", "tree_escape": "../x",
                     "times": -1}])
    found = cli("latest", "--repo", "o/r", "--json", env=env)
    assert found.code == 0 and found.json["revision"] == good.json["revision"], found.stderr
    dest = tmp_path / "dest"
    run = cli("pull", "--repo", "o/r", "--subfolder", found.json["subfolder"], "--revision",
              found.json["revision"], "--local-dir", str(dest), env=env)
    assert run.code == 1, run.stdout + run.stderr
    assert "escapes" in one_line_error(run.stderr) and run.stdout == "" and not dest.exists()
