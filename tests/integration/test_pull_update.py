"""Re-pull and update in place: a dir holding an earlier pull gets only the bytes it lacks.

Everything runs through the real CLI against the local Hub; what was transferred is read
from the server's access log, not from the CLI's own report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ENTRYPOINT, read_tree, write_checkpoint
from tests.helpers.chaos_helpers import ckpt, listing, one_line_error
from tests.helpers.pull_helpers import RECORD, Puller, pulled, record

BIG = 300_000


@pytest.fixture
def puller(hub_server, hf_client, cli, tmp_path):
    return Puller(hub_server(), cli, tmp_path)


def _two_checkpoints(puller):
    """checkpoint-1 and checkpoint-2 share their weights; configs differ; each has a file of its own."""
    one = ckpt(1, big=BIG) | {"only-1.txt": b"gone in 2"}
    two = dict(one)
    del two["only-1.txt"]
    two["config.json"] = b'{"step": 2}'
    two["nested/trainer_state.json"] = b'{"global_step": 2}'
    two["tokenizer.json"] = b'{"new": true}'
    return one, two, puller.seed("checkpoint-1", one, step=1), puller.seed("checkpoint-2", two, step=2)


def test_repull_of_an_unchanged_checkpoint_downloads_nothing(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    first = puller("checkpoint-1", dest)
    assert first.code == 0, first.stderr
    assert set(first.gets) == {f"checkpoint-1/{rel}" for rel in files}
    assert first.json["downloaded_files"] == 3 and first.json["reused_files"] == 0
    inode = (dest / "model.safetensors").stat().st_ino

    again = puller("checkpoint-1", dest)
    assert again.code == 0, again.stderr
    assert again.gets == {}, "a re-pull of an unchanged checkpoint fetched files"
    out = again.json
    assert (out["downloaded_files"], out["downloaded_bytes"], out["reused_files"]) == (0, 0, 3)
    assert (out["files"], out["bytes"], out["partial"]) == (3, sum(map(len, files.values())), False)
    assert pulled(dest) == files
    assert (dest / "model.safetensors").stat().st_ino == inode, "kept files are linked, not copied"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")], "staging or lock left behind"


def test_pull_n_plus_1_over_n_fetches_only_what_changed(puller, tmp_path):
    _one, two, _sha1, sha2 = _two_checkpoints(puller)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    run = puller("checkpoint-2", dest)
    assert run.code == 0, run.stderr
    assert set(run.gets) == {"checkpoint-2/config.json", "checkpoint-2/nested/trainer_state.json",
                             "checkpoint-2/tokenizer.json"}, run.gets
    assert run.json["reused_files"] == 1 and run.json["removed_files"] == 1 and run.json["downloaded_files"] == 3
    assert pulled(dest) == two, "the dir holds exactly checkpoint-2: only-1.txt is gone"
    rec = record(dest)
    assert (rec["subfolder"], rec["revision"]) == ("checkpoint-2", sha2)
    assert set(rec["files"]) == set(two) | {"ckpt-manifest.json"}
    manifest = json.loads((dest / "ckpt-manifest.json").read_bytes())
    assert manifest["step"] == 2


def test_a_changed_file_is_fetched_again_and_a_touched_one_rehashed(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    # Other bytes of the same size in a new inode (an editor's save), and a touch.
    damaged = bytearray(files["model.safetensors"])
    damaged[100] ^= 0xFF
    (dest / "model.safetensors").unlink()
    (dest / "model.safetensors").write_bytes(bytes(damaged))
    os.utime(dest / "config.json")  # touched: same bytes, new mtime
    # Other bytes are an edit, the user's: only --force overwrites them.
    refused = puller("checkpoint-1", dest)
    assert refused.code == 2 and "model.safetensors" in one_line_error(refused.stderr), refused.stderr
    run = puller("checkpoint-1", dest, "--force")
    assert run.code == 0, run.stderr
    assert set(run.gets) == {"checkpoint-1/model.safetensors"}, run.gets
    assert run.json["reused_files"] == 2 and run.json["downloaded_files"] == 1
    assert pulled(dest) == files


def test_files_added_to_a_pulled_dir_are_refused_and_never_deleted_even_with_force(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    (dest / "notes.txt").write_bytes(b"mine")
    for extra in ([], ["--force"]):
        start = len(puller.hub.log_entries())
        refused = puller("checkpoint-1", dest, *extra)
        line = one_line_error(refused.stderr)
        assert refused.code == 2 and "notes.txt" in line and "never deletes" in line, refused.stderr
        assert len(puller.hub.log_entries()) == start, "the refusal came after a request"
        assert (dest / "notes.txt").read_bytes() == b"mine"
    (dest / "notes.txt").unlink()
    again = puller("checkpoint-1", dest)
    assert again.code == 0 and again.gets == {}, again.stderr
    assert pulled(dest) == files


def test_force_never_replaces_a_dir_ckpt_action_did_not_fill(puller, tmp_path):
    puller.seed("checkpoint-1", ckpt(1, big=BIG), step=1)
    scratch = tmp_path / "scratch"
    assert puller("checkpoint-1", scratch).code == 0
    checkout = write_checkpoint(tmp_path / "checkout", {".git/HEAD": b"ref: refs/heads/main\n", "train.py": b"x"})
    # A valid record planted in a checkout (committed by mistake, or on purpose) does not
    # make the checkout something --force may replace.
    (checkout / RECORD).write_bytes((scratch / RECORD).read_bytes())
    workspace = write_checkpoint(tmp_path / "ws", {"src/main.py": b"y"})
    home = write_checkpoint(tmp_path / "home", {".bashrc": b"z"})
    other = write_checkpoint(tmp_path / "other", {"keep.txt": b"keep"})
    env = dict(puller.env, GITHUB_WORKSPACE=str(workspace), HOME=str(home))
    cases = {checkout: "git checkout", workspace: "workspace root", home: "home dir", other: "did not pull",
             tmp_path: "did not pull", tmp_path.parent: "parent of the current dir", Path("/"): "root"}
    if os.geteuid() != 0:  # a user who may not write `/` is refused that first, as for any such dir
        cases[Path("/")] = "is not writable"
    for target, words in cases.items():
        before = listing(tmp_path)
        start = len(puller.hub.log_entries())
        run = puller("checkpoint-1", target, "--force", env=env)
        assert run.code == 2, f"{target}: {run.code} {run.stderr}"
        line = one_line_error(run.stderr)
        assert words in line and ("dedicated dir" in line or words == "is not writable"), line
        assert len(puller.hub.log_entries()) == start and listing(tmp_path) == before


def test_an_empty_dir_is_pulled_into_without_force(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    (dest / "sub").mkdir(parents=True)  # only directories: nothing to lose
    run = puller("checkpoint-1", dest)
    assert run.code == 0, run.stderr
    assert pulled(dest) == files


def test_a_failed_update_leaves_the_earlier_pull_whole(puller, tmp_path):
    _one, _two, _sha1, _sha2 = _two_checkpoints(puller)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    before = read_tree(dest) | {RECORD: (dest / RECORD).read_bytes()}
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-2/tokenizer\.json$", "corrupt": True,
                            "times": -1}])
    run = puller("checkpoint-2", dest)
    puller.hub.set_faults([])
    assert run.code == 1 and "does not match" in one_line_error(run.stderr)
    assert read_tree(dest) | {RECORD: (dest / RECORD).read_bytes()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")]
    again = puller("checkpoint-1", dest)
    assert again.code == 0 and again.gets == {}, "the earlier pull is still recognised and kept"


@pytest.mark.process("kills a pull's process mid-transfer")
def test_staging_left_by_a_killed_pull_is_removed_by_the_next(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    # A pull killed while its file trickles in leaves its staging dir (and lock) behind.
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/model\.safetensors$", "delay_s": 30,
                            "times": -1}])
    proc = subprocess.Popen([sys.executable, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder", "checkpoint-1",
                             "--local-dir", str(dest)], env=puller.env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.ckpt-") and p.is_dir()]:
            assert proc.poll() is None and time.monotonic() < deadline, "the pull never staged anything"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    puller.hub.set_faults([])
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".dest.ckpt-"))
    assert leftovers, "the kill left nothing to clean"
    unrelated = [tmp_path / ".dest.ckpt-keep", tmp_path / ".other.ckpt-abcd1234"]
    for path in unrelated:
        path.mkdir()
    run = puller("checkpoint-1", dest)
    assert run.code == 0, run.stderr
    assert pulled(dest) == files
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".dest.ckpt-")) == [".dest.ckpt-keep"]
    assert all(p.exists() for p in unrelated), "only names a pull makes are removed"


@pytest.mark.process("two pulls at once, each a process holding its lock")
def test_a_second_pull_into_the_same_dir_fails_fast_while_one_runs(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/model\.safetensors$", "delay_s": 60,
                            "times": 1}])
    proc = subprocess.Popen([sys.executable, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder", "checkpoint-1",
                             "--local-dir", str(dest)], env=puller.env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / ".dest.ckpt-lock").exists() or not puller.hub.log_entries():
            assert proc.poll() is None and time.monotonic() < deadline, "the first pull never took the lock"
            time.sleep(0.02)
        second = puller("checkpoint-1", dest)
        assert second.code == 1 and "another pull into" in one_line_error(second.stderr)
        assert proc.poll() is None, "the first pull ended before the second was refused: the check proved nothing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    # The killed holder's lock is released with it: the next pull goes through and tidies up.
    run = puller("checkpoint-1", dest)
    assert run.code == 0, run.stderr
    assert pulled(dest) == files and not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.")]


def test_a_corrupt_record_means_not_a_pull(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    (dest / RECORD).write_bytes(b"{not json")
    run = puller("checkpoint-1", dest, "--force")
    assert run.code == 2 and "did not pull" in one_line_error(run.stderr)
    assert pulled(dest) == files


def test_force_with_local_dir_dot_in_a_checkout_deletes_nothing(puller, cli, tmp_path):
    """The report that started the rule: `pull --local-dir . --force` inside a checkout."""
    puller.seed("checkpoint-1", ckpt(1, big=BIG), step=1)
    write_checkpoint(tmp_path, {".git/HEAD": b"ref: refs/heads/main\n", "train.py": b"print('train')\n"})
    before = read_tree(tmp_path)
    start = len(puller.hub.log_entries())
    run = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--local-dir", ".", "--force", env=puller.env)
    assert run.code == 2 and "is a git checkout" in one_line_error(run.stderr)
    assert read_tree(tmp_path) == before and len(puller.hub.log_entries()) == start


def test_fifos_and_dangling_links_in_a_pulled_dir_are_refused_up_front_not_opened(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    os.mkfifo(dest / "pipe")
    os.symlink(tmp_path / "nowhere", dest / "nested" / "dangling")
    start = len(puller.hub.log_entries())
    refused = puller("checkpoint-1", dest)
    assert refused.code == 2 and "nested/dangling" in one_line_error(refused.stderr)
    assert len(puller.hub.log_entries()) == start
    forced = puller("checkpoint-1", dest, "--force")  # would hang here if the FIFO were opened
    assert forced.code == 2 and "nested/dangling" in one_line_error(forced.stderr), forced.stderr  # kept
    assert os.path.lexists(dest / "pipe") and os.path.lexists(dest / "nested" / "dangling")
    os.unlink(dest / "pipe")
    os.unlink(dest / "nested" / "dangling")
    assert puller("checkpoint-1", dest).code == 0 and pulled(dest) == files
    # A record that is a FIFO is no record: the dir is not taken for a pull, and nothing hangs.
    (dest / RECORD).unlink()
    os.mkfifo(dest / RECORD)
    run = puller("checkpoint-1", dest, "--force")
    assert run.code == 2 and "did not pull" in one_line_error(run.stderr)


def _in_mount_namespace(dest: Path) -> list[str] | None:
    """A command prefix that runs the CLI with ``dest`` bind-mounted on itself (a mount
    point, as ``docker run -v DIR:/data`` makes one), in a private mount namespace."""
    import shutil

    if not shutil.which("unshare"):
        return None
    script = 'mount --bind "$0" "$0" && exec "$@"'
    for flags in (["-m"], ["-r", "-m"]):
        probe = subprocess.run(["unshare", *flags, "sh", "-c", script, str(dest), "true"], capture_output=True,
                               check=False)
        if probe.returncode == 0:
            return ["unshare", *flags, "sh", "-c", script, str(dest)]
    return None


@pytest.mark.process("runs the pull in its own mount namespace (unshare)")
def test_a_mount_point_is_updated_entry_by_entry_and_never_left_half_done(puller, tmp_path):
    one, two, _sha1, _sha2 = _two_checkpoints(puller)
    dest = tmp_path / "mnt"
    dest.mkdir()
    prefix = _in_mount_namespace(dest)
    if prefix is None:
        pytest.skip("no private mount namespace here (unshare -m / -rm refused)")

    def pull_in_mount(subfolder):
        start = len(puller.hub.log_entries())
        proc = subprocess.run([*prefix, sys.executable, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder",
                               subfolder, "--local-dir", str(dest), "--json"], env=puller.env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, check=False)
        from tests.helpers.pull_helpers import file_gets

        return proc, file_gets(puller.hub, start)

    first, gets = pull_in_mount("checkpoint-1")
    assert first.returncode == 0, first.stderr
    assert pulled(dest) == one and len(gets) == len(one)
    assert sorted(p.name for p in dest.iterdir() if p.name.startswith(".")) == [RECORD], "staging left behind"
    second, gets = pull_in_mount("checkpoint-2")
    assert second.returncode == 0, second.stderr
    assert pulled(dest) == two and "checkpoint-2/model.safetensors" not in gets
    assert sorted(p.name for p in dest.iterdir() if p.name.startswith(".")) == [RECORD]
    assert record(dest)["subfolder"] == "checkpoint-2"
    before = read_tree(dest) | {RECORD: (dest / RECORD).read_bytes()}
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/config\.json$", "corrupt": True, "times": -1}])
    failed, _gets = pull_in_mount("checkpoint-1")
    assert failed.returncode == 1, failed.stderr
    assert read_tree(dest) | {RECORD: (dest / RECORD).read_bytes()} == before
    assert sorted(p.name for p in dest.iterdir() if p.name.startswith(".")) == [RECORD]


def test_a_folder_without_manifest_is_re_pulled_by_the_hashes_the_listing_gives(puller, tmp_path):
    """Trainer or `hf upload` folders carry no manifest: small files are known by git blob
    id only, big ones by LFS sha256; the record keeps both, so a re-pull still fetches nothing."""
    from huggingface_hub import HfApi

    files = ckpt(1, big=BIG)
    src = write_checkpoint(tmp_path / "trainer-out", files)
    api = HfApi(endpoint=puller.hub.url)
    api.create_repo("o/r", exist_ok=True)
    api.upload_folder(repo_id="o/r", folder_path=str(src), path_in_repo="checkpoint-7")
    dest = tmp_path / "dest"
    first = puller("checkpoint-7", dest)
    assert first.code == 0 and first.json["verified_by"] == "tree", first.stderr
    assert record(dest)["files"]["config.json"]["git_oid"], "a small file is known by its git blob id"
    again = puller("checkpoint-7", dest)
    assert again.code == 0 and again.gets == {} and again.json["reused_files"] == 3
    assert pulled(dest) == files


@pytest.mark.process("runs pulls with the work dir as their current dir (pull_here)")
def test_the_current_dir_holding_an_earlier_pull_is_updated_but_never_forced(puller, tmp_path):
    """The container's case: the work dir is the mounted dir pulled into, again and again.
    A file the earlier pull did not write stays, even with --force."""
    _one, two, _sha1, _sha2 = _two_checkpoints(puller)
    work = tmp_path / "work"
    work.mkdir()

    def pull_here(subfolder, *extra):
        return subprocess.run([sys.executable, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder", subfolder,
                               "--local-dir", ".", *extra], env=puller.env, cwd=work, capture_output=True,
                              text=True, timeout=300)

    assert pull_here("checkpoint-1").returncode == 0
    assert pull_here("checkpoint-2").returncode == 0
    assert pulled(work) == two
    (work / "notes.txt").write_bytes(b"mine")
    run = pull_here("checkpoint-1", "--force")
    assert run.returncode == 2 and "current dir" in run.stderr and "notes.txt" in run.stderr, run.stderr
    assert (work / "notes.txt").read_bytes() == b"mine"
    assert {k: v for k, v in pulled(work).items() if k != "notes.txt"} == two


# --- issue 18, item 4: a file is the tool's only if it still holds what the record says -------

def _forge_record(dest: Path, names: list[str]) -> None:
    """A record that merely names a dir's files: their sizes, made-up stats, made-up digests."""
    files = {rel: {"size": (dest / rel).stat().st_size, "sha256": "0" * 64, "git_oid": None,
                   "mtime_ns": 1, "ino": 1} for rel in names}
    doc = {"format": "ckpt-action/pull/v1", "repo": "o/r", "subfolder": "checkpoint-1", "revision": "a" * 40,
           "partial": False, "include": [], "exclude": [], "files": files}
    (dest / RECORD).write_text(json.dumps(doc))


@pytest.mark.process("runs pulls as processes of their own (pull_here)")
@pytest.mark.parametrize("here", [False, True], ids=["dir", "cwd"])
def test_a_forged_record_never_makes_user_files_the_tools(here, puller, cli, tmp_path):
    puller.seed("checkpoint-1", ckpt(1, big=BIG), step=1)
    work = write_checkpoint(tmp_path / "work", {"train.py": b"print('train')\n", "src/model.py": b"class M: ...\n"})
    _forge_record(work, ["train.py", "src/model.py"])
    before = read_tree(work)
    for extra in ([], ["--force"]):
        start = len(puller.hub.log_entries())
        if here:
            run = subprocess.run([sys.executable, str(ENTRYPOINT), "pull", "--repo", "o/r", "--subfolder",
                                  "checkpoint-1", "--local-dir", ".", *extra], env=puller.env, cwd=work,
                                 capture_output=True, text=True, timeout=300)
            code, err = run.returncode, run.stderr
        else:
            run = puller("checkpoint-1", work, *extra)
            code, err = run.code, run.stderr
        if extra:  # --force may overwrite recorded files the user edited: these are named by the record
            continue
        assert code == 2, err
        line = one_line_error(err)
        assert "train.py" in line or "src/model.py" in line, line
        assert len(puller.hub.log_entries()) == start, "the refusal came after a request"
        assert read_tree(work) == before


def test_an_edited_pulled_file_needs_force_and_an_added_file_is_never_deleted(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    # Edited in place, its size kept: the stat changed, and then the bytes decide.
    path = dest / "config.json"
    path.write_bytes(files["config.json"][::-1])
    start = len(puller.hub.log_entries())
    refused = puller("checkpoint-1", dest)
    assert refused.code == 2 and "config.json" in one_line_error(refused.stderr) and "--force" in refused.stderr
    assert len(puller.hub.log_entries()) == start
    forced = puller("checkpoint-1", dest, "--force")
    assert forced.code == 0, forced.stderr
    assert pulled(dest) == files
    # A file the record does not name is the user's: never deleted, --force or not.
    (dest / "notes.txt").write_bytes(b"mine")
    for extra in ([], ["--force"]):
        run = puller("checkpoint-1", dest, *extra)
        assert run.code == 2 and "notes.txt" in one_line_error(run.stderr), run.stderr
        assert (dest / "notes.txt").read_bytes() == b"mine"


def test_a_pulled_file_whose_stat_changed_but_bytes_did_not_is_still_the_tools(puller, tmp_path):
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    os.utime(dest / "model.safetensors", ns=(1, 1))  # touched (or copied without -p)
    again = puller("checkpoint-1", dest)
    assert again.code == 0 and again.gets == {}, again.stderr


# --- issue 27, item 23: the record vouches only for bytes the tool saw written ---------------

def test_a_record_rewritten_to_an_edited_files_stat_vouches_for_nothing(puller, tmp_path):
    """Someone edits a pulled file (same size) and rewrites the record's entry to the edited
    file's new stat: the stat shortcut would keep the wrong bytes and report them verified.
    The record the tool did not write proves nothing: the file is hashed, found edited, and
    the pull refuses it (exit 2) or, with --force, replaces it with the checkpoint's bytes."""
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    path = dest / "config.json"
    path.write_bytes(files["config.json"][::-1])
    doc = record(dest)
    st = path.stat()
    doc["files"]["config.json"].update(size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)
    (dest / RECORD).write_text(json.dumps(doc))

    refused = puller("checkpoint-1", dest)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "config.json" in one_line_error(refused.stderr) and "--force" in refused.stderr
    assert path.read_bytes() == files["config.json"][::-1], "the user's edit was touched"
    forced = puller("checkpoint-1", dest, "--force")
    assert forced.code == 0, forced.stderr
    assert pulled(dest) == files and forced.json["verified_by"] == "manifest"
    again = puller("checkpoint-1", dest)  # the record the tool wrote again vouches: nothing fetched
    assert again.code == 0 and again.gets == {}, again.stderr


def test_a_record_without_the_tools_mark_has_every_kept_file_hashed_not_trusted(puller, tmp_path):
    """A record from before the mark (or copied from another machine) still names the
    tool's files, which are kept if their bytes match: hashed, never taken on their stat."""
    files = ckpt(1, big=BIG)
    puller.seed("checkpoint-1", files, step=1)
    dest = tmp_path / "dest"
    assert puller("checkpoint-1", dest).code == 0
    doc = record(dest)
    assert doc.pop("mac", None) is not None, "the record carries no mark of the tool"
    (dest / RECORD).write_text(json.dumps(doc))
    again = puller("checkpoint-1", dest)
    assert again.code == 0 and again.gets == {}, again.stderr
    assert pulled(dest) == files
