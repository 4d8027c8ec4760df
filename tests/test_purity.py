"""The domain modules are pure: they never read the clock and never do I/O; `now` is passed in.

Loading a zone's rules from the tz database (zoneinfo, cached per name) is the one read they
make, and it is reference data, not state.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DOMAIN = ["wire.py", "errors.py", "recurrence.py", "occurrences.py", "timezones.py", "execution.py",
          "job_documents.py", "job_rules.py"]
CLOCK_METHODS = {"now", "utcnow", "today", "time_ns", "monotonic", "perf_counter", "sleep"}
IO_FUNCTIONS = {"open", "print", "input", "urlopen", "getenv"}
PURE_PARTS = {"urllib.parse"}  # string handling only
IO_MODULES = {"os", "socket", "subprocess", "requests", "httpx", "urllib", "pathlib", "time", "random"}


def impurities(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            called = node.func
            if isinstance(called, ast.Attribute):
                # `datetime.now()`, `time.time()`; not `time(5, 15)` or `moment.time()`.
                owner = called.value.id if isinstance(called.value, ast.Name) else ""
                if called.attr in CLOCK_METHODS | IO_FUNCTIONS or (owner, called.attr) == ("time", "time"):
                    found.append(f"line {node.lineno}: calls {called.attr}()")
            elif isinstance(called, ast.Name) and called.id in IO_FUNCTIONS:
                found.append(f"line {node.lineno}: calls {called.id}()")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: imports {m}" for m in modules
                      if m.split(".")[0] in IO_MODULES and m not in PURE_PARTS]  # fmt: skip
    return found


@pytest.mark.parametrize("module", DOMAIN)
def test_domain_module_reads_no_clock_and_does_no_io(module: str) -> None:
    source = (Path(__file__).parent.parent / "shared" / module).read_text()
    assert impurities(source) == []


def test_the_check_would_catch_a_clock_read() -> None:
    assert impurities("from datetime import datetime\nx = datetime.now()\n") == ["line 2: calls now()"]
    assert impurities("import time\ntime.time()\n") == ["line 1: imports time", "line 2: calls time()"]
    assert impurities("open('x')\n") == ["line 1: calls open()"]
    assert impurities("import urllib.request\nfrom urllib.parse import quote\n") == ["line 1: imports urllib.request"]
    assert impurities("from datetime import time\nt = time(5, 15)\n") == []
