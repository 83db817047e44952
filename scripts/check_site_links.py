#!/usr/bin/env python3
"""Check the built site's internal links: every relative href or src of every page names a
file of the site, and every #anchor an id on its page.

    mkdocs build --strict -d site && python scripts/check_site_links.py site

A link from the site's root (/ckpt-action/..., as the 404 page has them) is resolved against
the path of mkdocs.yml's site_url.
Exit 1 with one line per broken link (.ci/run runs it after the strict build)."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in ("href", "src") and value and tag in ("a", "link", "script", "img"):
                self.links.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def base_path() -> str:
    """The path the site is served under: that of mkdocs.yml's site_url (/ckpt-action/)."""
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "mkdocs.yml").read_text(encoding="utf-8"))
    return urlsplit(config["site_url"]).path


def broken_links(site: Path, base: str = "/") -> list[str]:
    pages = {p: _parse(p) for p in site.rglob("*.html")}
    errors = []
    for path, page in sorted(pages.items()):
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue
            if parts.path.startswith("/"):
                if not parts.path.startswith(base):
                    errors.append(f"{path.relative_to(site)}: {link}: outside {base}")
                    continue
                target = (site / unquote(parts.path[len(base):])).resolve()
            else:
                target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if not target.is_file() or not target.resolve().is_relative_to(site.resolve()):
                errors.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    errors.append(f"{where}: no such anchor")
    return errors


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: check_site_links.py SITE_DIR", file=sys.stderr)
        return 2
    errors = broken_links(Path(argv[0]).resolve(), base_path())
    for line in errors:
        print(line, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
