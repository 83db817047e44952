"""``--card``: a table of the repo's checkpoints in its model card (``README.md``), kept
between two markers and written in the same commit as the change it describes.

The card is the user's: every byte outside the markers is kept as it was, and a card
without them gets the table appended (:func:`splice`). The commit that writes it is pinned
to its parent like every other (:func:`~ckpt_action.stores.hub.commits.commit`), so an edit that
landed in between makes the writer plan again from it, never overwrite it.

Each cell is data (folder and metric names come from the Hub): every character but
letters, digits and a few plain marks becomes a numeric character reference, so a name
cannot end a cell, open a tag or a link, or start code (:func:`cell`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from ckpt_action.errors import InputError, param_on

if TYPE_CHECKING:
    from ckpt_action.ops.discover import CheckpointInfo
    from ckpt_action.stores.base import Store
    from ckpt_action.stores.writes import Put

CARD_NAME = "README.md"
START = "<!-- ckpt-action:checkpoints:start -->"
END = "<!-- ckpt-action:checkpoints:end -->"
NEW_CARD_METADATA = b"---\ntags:\n- ckpt-action\n---\n\n"
_PLAIN = re.compile(r"[^A-Za-z0-9 .,/-]")


@dataclass(frozen=True)
class Row:
    """One checkpoint folder as the card shows it."""

    subfolder: str
    step: int | None
    revision: str | None
    """A commit that holds it complete; None: the commit this table is written in."""
    metrics: Mapping[str, float] | None
    complete: bool
    signed: bool
    tags: tuple[str, ...] = ()


def cell(value: object) -> str:
    """``value`` as a table cell's text that Markdown and HTML take literally.

    >>> cell("eval_loss|<b>")
    'eval&#95;loss&#124;&#60;b&#62;'
    """
    return _PLAIN.sub(lambda m: f"&#{ord(m.group())};", " ".join(str(value).split()))


def _metrics(metrics: Mapping[str, float] | None, text: Callable[[object], str] = cell) -> str:
    return "<br>".join(f"{text(k)}={text(f'{v:.6g}')}" for k, v in sorted((metrics or {}).items()))


def table(rows: Sequence[Row], repo_url: str = "", text: Callable[[object], str] = cell) -> str:
    """The Markdown table: checkpoint, step, pinned SHA (a link to the folder at it), metrics,
    complete, signed, tags; one line each, ending with a newline. The one renderer of the
    table: the card and the GitHub job summary show it; ``text`` makes a value a cell's
    literal text (the card's :func:`cell`; the summary passes its own escaping)."""
    out = ["| checkpoint | step | pinned SHA | metrics | complete | signed | tags |",
           "|---|---:|---|---|---|---|---|"]
    for r in rows:
        if r.revision is None:
            sha = "this commit"
        elif repo_url:
            sha = f"[`{r.revision[:12]}`]({repo_url.rstrip('/')}/tree/{r.revision}/{quote(r.subfolder)})"
        else:
            sha = f"`{r.revision[:12]}`"
        out.append(f"| {text(r.subfolder)} | {'' if r.step is None else r.step} | {sha} "
                   f"| {_metrics(r.metrics, text)} | {'yes' if r.complete else 'no'} | {'yes' if r.signed else 'no'} "
                   f"| {', '.join(text(t) for t in r.tags)} |")
    return "\n".join(out) + "\n"


def splice(card: bytes | None, text: str) -> bytes:
    """``card`` with ``text`` between the markers: replacing what was there, or appended
    (after a newline, when the card does not end with one) where there are none. Every
    byte outside the markers is kept. A new card starts with the metadata block the Hub
    expects of a model card (a tag naming this tool), which the Hub's client otherwise warns
    is missing on every commit that writes it.

    The markers are parsed strictly: one start marker, then one end marker, or neither.
    Anything else (a start without an end, an end before the start, two tables) is refused
    with :class:`InputError` saying how to fix the card: a guess would replace the user's
    text after a lone start marker, or append a new table on every write."""
    block = f"{START}\n{text}{END}".encode()
    if card is None:
        return NEW_CARD_METADATA + block + b"\n"
    starts, ends = card.count(START.encode()), card.count(END.encode())
    if starts == ends == 0:
        sep = b"" if not card or card.endswith(b"\n") else b"\n"
        return card + sep + (b"\n" if card else b"") + block + b"\n"
    start, end = card.find(START.encode()), card.find(END.encode())
    if starts == ends == 1 and end > start:
        return card[:start] + block + card[end + len(END):]
    if starts and ends and end < start:
        problem = f"has an end marker before its start marker ({END} ... {START}): the end marker comes before"
        fix = "put the start marker before the table and the end marker after it, and delete any other"
    elif starts > 1 or ends > 1:
        problem = f"has more than one table (markers {START} / {END} appear more than once)"
        fix = "keep one start and one end marker, around the table, and delete the others"
    elif ends == 0:
        problem = f"has a start marker and no end marker ({START})"
        fix = f"put {END} on the line after the table, or delete the start marker"
    else:  # one end marker, no start marker (one of each, start first, was spliced above)
        problem = f"has an end marker and no start marker ({END})"
        fix = f"put {START} on the line before the table, or delete the end marker"
    raise InputError(f"{CARD_NAME} {problem}: {fix}, then run with {param_on('card')} again", param="card")


def rows_at(infos: Sequence[CheckpointInfo], revision: str, tags: Mapping[str, Sequence[str]],
            signed: set[str]) -> list[Row]:
    """The rows of the checkpoints ``list`` read at ``revision``; ``tags``: folder -> tags made
    for it; ``signed``: the folders holding a ``model.sig``."""
    return [Row(i.subfolder, i.step, revision if i.complete else None, i.metrics, i.complete,
                i.subfolder in signed, tuple(sorted(tags.get(i.subfolder, ())))) for i in infos]


def ordered(rows: Sequence[Row]) -> list[Row]:
    """The rows in the table's order: newest step first, folders without a step last."""
    return sorted(rows, key=lambda r: (r.step is None, -(r.step or 0), r.subfolder))


TagsOf = Callable[["Store", list[str]], Mapping[str, Sequence[str]]]


def card_operation(remote: Store, head: str | None, *, drop: Sequence[str] = (),
                   add: Sequence[Row] = (), tag: tuple[str, Sequence[str]] | None = None,
                   tags_of: TagsOf | None = None) -> Put | None:
    """The ``README.md`` write for a commit planned at ``head`` that deletes the folders
    ``drop`` and writes the ones ``add`` describes; ``tag``: (a tag this write will create,
    the folders it is made for); ``tags_of``: the tags made for each folder (prune's rule,
    :func:`~ckpt_action.ops.prune.tagged_folders`). A :class:`~ckpt_action.stores.base.Put`
    that goes into the same write as the change; None when the card already says it all."""
    from ckpt_action.ops.discover import list_checkpoints
    from ckpt_action.stores.writes import Put

    rows: list[Row] = []
    current = None
    if head is not None:
        _sha, infos = list_checkpoints(remote, head)
        written = {r.subfolder for r in add}
        kept = [i for i in infos if i.subfolder not in set(drop) | written]
        signed = {i.subfolder for i in kept if i.signed}
        tags = tags_of(remote, [i.subfolder for i in kept]) if tags_of is not None else {}
        rows = rows_at(kept, head, tags, signed)
        current = remote.read_small_file(head, CARD_NAME, missing_ok=True)
    rows += add
    if tag is not None:
        rows = [Row(r.subfolder, r.step, r.revision, r.metrics, r.complete, r.signed,
                    tuple(sorted({*r.tags, tag[0]})) if r.subfolder in tag[1] else r.tags) for r in rows]
    rows = ordered(rows)
    repo_url = f"{remote.settings.endpoint.rstrip('/')}/{remote.name}"
    new = splice(current, table(rows, repo_url))
    return None if new == current else Put(CARD_NAME, data=new)
