"""The console's scripts are ES modules that import each other and share nothing through globals.

A classic script (`<script src>` without `type="module"`) puts its top-level names in the page's
one global scope, where another file can come to rely on them unseen by the type checker; these
tests read the files as they are shipped, with no browser and no server.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from shared.console.pages import CONTENT_TYPES, STATIC, file_response

SCRIPTS = sorted(STATIC.glob("*.js"))
IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"([^"]+)";', re.M)
EXPORT = re.compile(
    r"^export\s+(?:async\s+)?(?:function\*?|class|const|let)\s+([A-Za-z_$][\w$]*)", re.M
)
# `window.x = ...` or `globalThis.x = ...`: a value handed to other files past the imports.
GLOBAL_WRITE = re.compile(
    r"\b(?:window|globalThis|self)\s*(?:\.\s*[A-Za-z_$][\w$]*|\[[^\]]*\])\s*=(?!=)"
)


class ScriptTags(HTMLParser):
    """Each `<script>` of a page: its attributes and whether it has a body of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append(dict(attrs))
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data.strip())


def page_scripts() -> ScriptTags:
    tags = ScriptTags()
    tags.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    return tags


def imports_of(script: Path) -> dict[str, set[str]]:
    """The files a script imports (by name, beside it) and the names it takes from each."""
    found: dict[str, set[str]] = {}
    for names, source in IMPORT.findall(script.read_text(encoding="utf-8")):
        assert source.startswith("./") and source.endswith(".js"), (
            f"{script.name} imports {source!r}: only sibling files, by their full name"
        )
        found.setdefault(source.removeprefix("./"), set()).update(
            name.strip() for name in names.split(",") if name.strip()
        )
    return found


def test_the_page_loads_its_scripts_as_modules_only() -> None:
    tags = page_scripts()
    assert tags.scripts, "index.html loads no script at all"
    for attributes in tags.scripts:
        assert attributes.get("type") == "module", f"a classic script: {attributes}"
        source = attributes.get("src") or ""
        assert source.startswith("/console/static/") and source.endswith(".js"), attributes
        assert (STATIC / source.removeprefix("/console/static/")).is_file(), source
    assert tags.inline == [], "an inline script: the Content-Security-Policy refuses it"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_is_type_checked_and_writes_no_global(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    assert text.startswith("// @ts-check\n"), f"{script.name} does not start with // @ts-check"
    assert not GLOBAL_WRITE.findall(text), f"{script.name} hands values over through a global"
    assert '"use strict"' not in text, "a module is strict already: the directive is left over"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_import_names_what_its_file_exports(script: Path) -> None:
    for source, names in imports_of(script).items():
        imported = STATIC / source
        assert imported.is_file(), f"{script.name} imports {source}, which is not there"
        exported = set(EXPORT.findall(imported.read_text(encoding="utf-8")))
        assert names <= exported, f"{script.name} takes {sorted(names - exported)} from {source}"


def test_every_script_is_reached_from_the_page_through_imports() -> None:
    """A file nobody imports would only run if the page loaded it as a script of its own."""
    reached: set[str] = set()
    waiting = [str(tag["src"]).removeprefix("/console/static/") for tag in page_scripts().scripts]
    while waiting:
        name = waiting.pop()
        if name not in reached:
            reached.add(name)
            waiting.extend(imports_of(STATIC / name))
    assert reached == {script.name for script in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_script_is_served_as_javascript_under_the_policy(script: Path) -> None:
    # Browsers refuse a module script served with any other type (a classic one they would run).
    assert CONTENT_TYPES.get(script.name) == "text/javascript"
    answer = file_response(script.name)
    assert answer.status_code == 200
    assert answer.mimetype == "text/javascript"
    policy = answer.headers["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy
    assert answer.get_body() == script.read_bytes()
