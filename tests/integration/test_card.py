"""--card: the table of the repo's checkpoints in README.md, written in the commit it
describes; every byte of the card outside the markers is the user's."""

from __future__ import annotations

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import env_for
from tests.helpers.commit_proxy import COMMIT, CommitProxy

START, END = b"<!-- ckpt-action:checkpoints:start -->", b"<!-- ckpt-action:checkpoints:end -->"


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url)


def hf(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def readme(hub, revision):
    import urllib.request

    with urllib.request.urlopen(f"{hub.url}/o/r/resolve/{revision}/README.md") as r:
        return r.read()


def push(cli, env, tmp_path, step, *extra):
    src = write_checkpoint(tmp_path / f"s{step}", {"w.bin": bytes([step]) * 20})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), "--json", *extra, env=env)
    assert run.code == 0, run.stderr
    return run.json


def write_card(hub, text: bytes):
    from huggingface_hub import CommitOperationAdd

    return hf(hub).create_commit("o/r", [CommitOperationAdd("README.md", text)], commit_message="card by hand").oid


def rows(card: bytes) -> dict[str, list[str]]:
    table = card[card.index(START):card.index(END)].decode().splitlines()[3:]
    return {cells[0]: cells[1:] for line in table if (cells := [c.strip() for c in line.strip("|").split("|")])}


def test_push_appends_the_table_to_a_card_without_markers_in_the_same_commit(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 1, "--metric", "eval_loss=0.5")
    hand = b"---\nlicense: mit\n---\n# My run\r\nnotes \xe2\x9c\x93 by hand"  # no newline at the end
    write_card(hub, hand)
    before = len(hf(hub).list_repo_commits("o/r"))
    out = push(cli, env, tmp_path, 2, "--metric", "eval_loss=0.25", "--card")
    assert len(hf(hub).list_repo_commits("o/r")) == before + 1, "the table is in the push's own commit"
    card = readme(hub, out["revision"])
    assert card.startswith(hand), "every byte of the card is kept"
    table = rows(card)
    assert table["checkpoint-2"][:2] == ["2", "this commit"] and table["checkpoint-2"][2] == "eval&#95;loss=0.25"
    assert table["checkpoint-1"][1].startswith("[`") and table["checkpoint-1"][3:5] == ["yes", "no"]
    assert out["uploaded_files"] == 1, "the card is not counted as a file of the checkpoint"


def test_prune_and_promote_keep_the_table_right_and_the_hand_edits(hub, env, cli, tmp_path):
    for step in (1, 2, 3):
        push(cli, env, tmp_path, step, "--metric", f"eval_loss={step / 10}")
    before, after = b"# Title\n\nintro\n\n", b"\n\n## Usage\nkeep | me <b>\n"
    write_card(hub, before + START + b"\nstale\n" + END + after)
    commits = len(hf(hub).list_repo_commits("o/r"))
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--card", "--json", env=env)
    assert run.code == 0, run.stderr
    assert len(hf(hub).list_repo_commits("o/r")) == commits + 1, "the table is in the prune's own commit"
    card = readme(hub, run.json["revision"])
    assert card.startswith(before) and card.endswith(after)
    assert sorted(rows(card)) == ["checkpoint-3"]
    promoted = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-3", "--to", "release", "--tag", "v1",
                   "--card", "--json", env=env)
    assert promoted.code == 0, promoted.stderr
    assert len(hf(hub).list_repo_commits("o/r")) == commits + 2, "the table is in the promote's own commit"
    card = readme(hub, "v1")
    assert card.startswith(before) and card.endswith(after)
    table = rows(card)
    assert table["release"][1] == "this commit" and table["release"][5] == "v1"
    assert table["checkpoint-3"][5] == "v1" and table["checkpoint-3"][1].startswith("[`")


def test_a_concurrent_edit_of_the_card_is_never_lost(hub, env, cli, tmp_path):
    for step in (1, 2):
        push(cli, env, tmp_path, step)
    write_card(hub, b"# v1 of the card\n")
    with CommitProxy(hub.url) as proxy:
        # Right before the prune's commit reaches the Hub, someone edits the card.
        proxy.before("POST", COMMIT, lambda: write_card(hub, b"# v2, edited meanwhile\n"))
        run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--card", "--json", env=env_for(proxy, tmp_path))
        statuses = [c.status for c in proxy.commits()]
    assert run.code == 0, run.stderr
    assert statuses == [412, 200], "the prune's first commit was pinned to the head the edit moved"
    card = readme(hub, run.json["revision"])
    assert card.startswith(b"# v2, edited meanwhile\n") and sorted(rows(card)) == ["checkpoint-2"]


def test_card_refusals_name_the_option(hub, env, cli, tmp_path):
    src = write_checkpoint(tmp_path / "x", {"w.bin": b"w"})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--card", "--distributed", env=env)
    assert run.code == 2 and "--card" in run.stderr.strip().splitlines()[-1]


def test_the_hubs_warning_about_a_card_reaches_the_log_as_one_escaped_line(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 1)
    write_card(hub, b"# the team's own card, without metadata\n")
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--card", env=env | {"GITHUB_ACTIONS": "true"})
    assert run.code == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "metadata" in line]
    assert said and all(line.startswith("::warning::huggingface_hub: ") for line in said), run.stderr


def test_a_card_the_tool_starts_carries_metadata_so_the_hub_client_does_not_warn(hub, env, cli, tmp_path):
    src = write_checkpoint(tmp_path / "s1", {"w.bin": b"w" * 20})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "1", "--card", env=env)
    assert run.code == 0 and "metadata" not in run.stderr, run.stderr
    assert readme(hub, "main").startswith(b"---\ntags:\n- ckpt-action\n---\n")


def test_a_signed_push_and_promote_show_as_signed(hub, env, cli, tmp_path):
    pytest.importorskip("model_signing", reason="needs the signing extra")
    from tests.helpers.signing_helpers import make_key

    key = make_key(tmp_path)
    push(cli, env, tmp_path, 1)
    push(cli, env, tmp_path, 2, "--signing-key", str(key.private), "--card")
    card = rows(readme(hub, "main"))
    assert card["checkpoint-2"][4] == "yes" and card["checkpoint-1"][4] == "no"
    run = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release", "--signing-key",
              str(key.private), "--card", "--json", env=env)
    assert run.code == 0, run.stderr
    card = rows(readme(hub, run.json["revision"]))
    assert card["release"][4] == "yes" and card["checkpoint-2"][4] == "yes" and card["checkpoint-1"][4] == "no"


def _summary_table(text: str) -> list[str]:
    """The lines of the card's table in a job summary section (its header to its last row)."""
    lines = text.splitlines()
    first = lines.index("| checkpoint | step | pinned SHA | metrics | complete | signed | tags |")
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[first:end]


def test_the_job_summary_shows_the_cards_table_for_list_prune_and_promote(hub, env, cli, tmp_path):
    hostile = "x|<img/src>`[l](u)"
    push(cli, env, tmp_path, 1, "--metric", "eval_loss=0.5", "--metric", f"{hostile}=1")
    push(cli, env, tmp_path, 2, "--metric", "eval_loss=0.2")
    push(cli, env, tmp_path, 3, "--metric", "eval_loss=0.4")
    summary = tmp_path / "summary.md"
    senv = {**env, "GITHUB_STEP_SUMMARY": str(summary)}

    def section(*args):
        summary.write_text("")
        run = cli(*args, env=senv)
        assert run.code == 0, run.stderr
        return summary.read_text()

    listed = _summary_table(section("list", "--repo", "o/r"))
    got = {r[0]: r[1:] for line in listed[2:] if (r := [c.strip() for c in line.strip("|").split("|")])}
    assert set(got) == {"checkpoint-1", "checkpoint-2", "checkpoint-3"}, listed
    assert got["checkpoint-2"][0] == "2" and "eval&#95;loss=0.2" in got["checkpoint-2"][2]
    assert got["checkpoint-2"][3] == "yes"
    # The hostile name arrives as character references: it adds no cell, tag, code or link.
    text = "\n".join(listed)
    assert "<img" not in text and "`[" not in text and "x|<" not in text
    assert all(len(line.strip("|").split("|")) == 7 for line in listed), listed

    pruned = _summary_table(section("prune", "--repo", "o/r", "--keep-last", "1", "--keep-best", "eval_loss:min"))
    assert [line.split("|")[1].strip() for line in pruned[2:]] == ["checkpoint-3", "checkpoint-2"], pruned

    promoted = _summary_table(section("promote", "--repo", "o/r", "--best", "eval_loss:min", "--to", "release",
                                      "--tag", "v1"))
    rel = next(line for line in promoted if line.startswith("| release |"))
    assert "eval&#95;loss=0.2" in rel and rel.rstrip(" |").endswith("v1"), rel


def card_of(hub, repo, revision):
    import urllib.request

    with urllib.request.urlopen(f"{hub.url}/{repo}/resolve/{revision}/README.md") as r:
        return r.read()


def test_the_release_pipeline_promotes_the_best_into_another_repo_with_its_card(hub, env, cli, tmp_path):
    """prune keep-last 2 + keep-best, then promote --best --to-repo --tag --card: the target
    repo's card lists the release with its metrics and tag, in the promote's one commit; the
    hand-written rest of that card is untouched."""
    for step, loss in [(1, "0.9"), (2, "0.2"), (3, "0.5"), (4, "0.6"), (5, "0.7")]:
        push(cli, env, tmp_path, step, "--metric", f"eval_loss={loss}")
    pruned = cli("prune", "--repo", "o/r", "--keep-last", "2", "--keep-best", "eval_loss:min", "--json", env=env)
    assert pruned.code == 0 and sorted(pruned.json["deleted"]) == ["checkpoint-1", "checkpoint-3"], pruned.stdout
    from huggingface_hub import CommitOperationAdd

    hf(hub).create_repo("o/model")
    before, after = b"# The model\n\n", b"\n## License\nby hand | <i>\n"
    hf(hub).create_commit("o/model", [CommitOperationAdd("README.md", before + START + b"\nold\n" + END + after)],
                          commit_message="card by hand")
    commits = len(hf(hub).list_repo_commits("o/model"))
    run = cli("promote", "--repo", "o/r", "--best", "eval_loss:min", "--to-repo", "o/model", "--to", "release",
              "--tag", "v1", "--card", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["source_subfolder"] == "checkpoint-2" and run.json["tag"] == "v1"
    assert len(hf(hub).list_repo_commits("o/model")) == commits + 1, "the card is in the promote's own commit"
    card = card_of(hub, "o/model", "v1")
    assert card.startswith(before) and card.endswith(after), card
    table = rows(card)
    assert sorted(table) == ["release"], table
    assert table["release"][:3] == ["2", "this commit", "eval&#95;loss=0.2"] and table["release"][5] == "v1"
    got = cli("pull", "--repo", "o/model", "--subfolder", "release", "--revision", "v1",
              "--local-dir", str(tmp_path / "rel"), "--json", env=env)
    assert got.code == 0 and got.json["step"] == 2, got.stderr


def test_the_list_summary_names_the_tags_like_the_card(hub, env, cli, tmp_path):
    push(cli, env, tmp_path, 1, "--metric", "eval_loss=0.5")
    push(cli, env, tmp_path, 2, "--metric", "eval_loss=0.4")
    assert cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release", "--tag", "v1",
               env=env).code == 0
    summary = tmp_path / "summary.md"
    assert cli("list", "--repo", "o/r", env={**env, "GITHUB_STEP_SUMMARY": str(summary)}).code == 0
    got = {r[0]: r[1:] for line in _summary_table(summary.read_text())[2:]
           if (r := [c.strip() for c in line.strip("|").split("|")])}
    # A tag names the checkpoint it was made for (the promoted source: prune's rule) and the
    # folder the promote wrote, so a later card keeps the release row's tag.
    assert got["checkpoint-1"][5] == "v1" and got["checkpoint-2"][5] == "", got
    assert got["release"][5] == "v1", got


def test_a_card_with_a_start_marker_and_no_end_is_refused_and_kept_whole(hub, env, cli, tmp_path):
    """The second push of a card whose end marker was deleted: refused (exit 2, one line
    saying how to fix the card), nothing committed, the user's text after the marker kept."""
    push(cli, env, tmp_path, 1)
    hand = b"# Title\n" + START + b"\nold table\n\n## Usage\nkeep me\n"
    card_at = write_card(hub, hand)
    src = write_checkpoint(tmp_path / "s2", {"w.bin": b"\x02" * 20})
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", "2", "--card", env=env)
    assert run.code == 2, run.stderr
    assert "README.md has a start marker and no end marker" in run.stderr and "--card" in run.stderr
    assert len([line for line in run.stderr.splitlines() if line.startswith("error:")]) == 1, run.stderr
    assert hf(hub).list_repo_commits("o/r")[0].commit_id == card_at, "nothing was committed"
    assert readme(hub, "main") == hand
