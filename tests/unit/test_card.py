"""The model card's table of checkpoints: rendered from rows, spliced between its markers,
every byte outside them kept."""

from __future__ import annotations

import pytest

from ckpt_action.errors import InputError
from ckpt_action.ops.card import END, START, Row, splice, table

SHA = "a" * 40


def rows():
    return [Row("checkpoint-200", 200, SHA, {"eval_loss": 0.25, "acc": 0.5}, True, True, ("v1",)),
            Row("checkpoint-100", 100, None, None, False, False, ())]


def test_table_has_every_column():
    text = table(rows(), repo_url="https://hub/o/r")
    lines = text.splitlines()
    assert lines[0] == "| checkpoint | step | pinned SHA | metrics | complete | signed | tags |"
    assert "[`aaaaaaaaaaaa`](" in lines[2] and "acc=0.5<br>eval&#95;loss=0.25" in lines[2]
    assert lines[2].endswith("| yes | yes | v1 |")
    assert "this commit" in lines[3] and lines[3].endswith("| no | no |  |")


def test_cells_cannot_break_the_table_or_add_html():
    evil = Row("checkpoint-1", 1, SHA, {"a|b<script>`x`": 1.0}, True, False, ("t|<b>",))
    line = table([evil], repo_url="https://hub/o/r").splitlines()[2]
    assert line.count("|") == 8 and "<script>" not in line and "<b>" not in line and "`x`" not in line


def test_a_card_without_markers_gets_the_table_appended_and_keeps_every_byte():
    card = b"---\nlicense: mit\n---\n# My model\r\nhand-written \xe2\x9c\x93 text"
    out = splice(card, "T\n")
    assert out.startswith(card) and out.endswith(f"{START}\nT\n{END}\n".encode())
    again = splice(out, "U\n")
    assert again.startswith(card) and f"{START}\nU\n{END}".encode() in again and b"T\n" not in again[len(card):]
    assert splice(None, "T\n") == b"---\ntags:\n- ckpt-action\n---\n\n" + f"{START}\nT\n{END}\n".encode()


def test_the_table_between_markers_is_replaced_and_the_rest_kept():
    before, after = b"# Title\n\nintro\n", b"\n## Usage\nkeep me\n"
    card = before + f"{START}\nold table\n{END}".encode() + after
    out = splice(card, "new\n")
    assert out == before + f"{START}\nnew\n{END}".encode() + after
    assert splice(out, "new\n") == out


@pytest.mark.parametrize(("card", "words"), [
    # A start marker without an end marker: splicing guessed, and lost the user's text after it.
    (f"# Title\n{START}\nold table\n## Usage\nkeep me\n".encode(), "has a start marker and no end marker"),
    # An end marker before the first start marker: a new table was appended on every write.
    (f"# Title\n{END}\nnotes\n{START}\nold\n".encode(), "end marker comes before"),
    (f"# Title\n{END}\nnotes\n{START}\nold\n{END}\n".encode(), "end marker comes before"),
    (f"{START}\na\n{END}\n{START}\nb\n{END}\n".encode(), "more than one"),
    (f"notes\n{END}\n".encode(), "has an end marker and no start marker"),
])
def test_unmatched_markers_are_refused_saying_how_to_fix_the_card(card, words):
    with pytest.raises(InputError) as caught:
        splice(card, "T\n")
    message = caught.value.render("cli")
    assert words in message and "\n" not in message
    assert "README.md" in message and "--card" in message


def test_a_refused_card_is_not_written(tmp_path):
    """The refusal leaves the card as it was: the user's text after a lone start marker is
    never replaced by a table."""
    card = f"# Title\n{START}\nold table\n## Usage\nkeep me\n".encode()
    with pytest.raises(InputError):
        splice(card, "T\n")
    assert splice(card.replace(b"old table\n", b"old table\n" + END.encode() + b"\n"), "T\n").endswith(
        b"## Usage\nkeep me\n")
