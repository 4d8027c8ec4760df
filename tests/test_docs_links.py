"""Every relative link of README.md and docs/*.md leads to a file that exists, and every anchor to
a heading that exists, as GitHub renders them; so does every `docs/<page>.md#<heading>` that a
code comment points to. Pages get split and headings renamed; a link left behind fails here."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = [
    ROOT / "function_app.py",
    *(
        path
        for folder in ("shared", "devhost", "tests", "bench", "infra")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in {".py", ".js", ".html", ".css", ".bicep"}
    ),
]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1", re.DOTALL)
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
DOCS_REFERENCE = re.compile(r"\bdocs/([\w-]+\.md)(?:#([\w-]+))?")


def _prose(markdown: str) -> str:
    """The text outside code blocks and code spans, where links and headings are."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it: lower case, markup and punctuation dropped
    (hyphens and underscores kept), spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page has: its headings' slugs (a repeated one numbered -1, -2, ...) and
    explicit HTML anchors."""
    markdown = FENCE.sub("", page.read_text())
    seen: Counter[str] = Counter()
    found = set(HTML_ANCHOR.findall(markdown))
    for heading in HEADING.findall(markdown):
        base = slug(heading.replace("`", ""))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def broken(source: Path, target: str) -> str | None:
    """Why a relative link from `source` to `target` leads nowhere, or None if it leads somewhere."""
    path_part, _, anchor = target.partition("#")
    destination = (source.parent / path_part).resolve() if path_part else source
    if not destination.exists():
        return f"{target}: no such file"
    if anchor and destination.suffix != ".md":
        return f"{target}: an anchor into a file that is not markdown"
    if anchor and anchor not in anchors(destination):
        return f"{target}: no heading '{anchor}' in {_shown(destination)}"
    return None


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(_prose(page.read_text()))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]  # fmt: skip


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_of_the_page_resolves(page: Path) -> None:
    problems = [problem for target in relative_links(page) if (problem := broken(page, target))]
    assert problems == []


def test_every_docs_heading_the_code_points_to_exists() -> None:
    problems = []
    for path in CODE:
        for name, anchor in DOCS_REFERENCE.findall(path.read_text()):
            target = f"{name}#{anchor}" if anchor else name
            if problem := broken(ROOT / "docs" / "README.md", target):
                problems.append(f"{path.relative_to(ROOT)}: {problem}")
    assert problems == []


def test_a_link_to_a_missing_heading_or_file_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A `GET /health` heading\n\n## Calling Azure with the app's identity\n\n"
        "[ok](#a-get-health-heading) [ok](#calling-azure-with-the-apps-identity) "
        "[gone](#performance) [gone](other.md)\n\n```sh\n[not a link](#nowhere)\n```\n"
    )
    found = [problem for target in relative_links(page) if (problem := broken(page, target))]
    assert found == ["#performance: no heading 'performance' in page.md", "other.md: no such file"]
