"""The layers of `shared/`: each imports only the layers below it, and the domain is pure.

Lowest first: `domain` (pure: no clock, no I/O; `now` is passed in), `settings` (with `logs` and
`once`, a value built on first use, beside it), the SDK clients'
`transport` (which reads what requests would from the environment through settings), then `storage`,
`actions` and `telemetry` side by side, `execution`, `services` (the composition root), `api`, and the web
`console` on top of the API. Loading a
zone's rules from the tz database (zoneinfo, cached per name) is the one read the domain makes,
and it is reference data, not state.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SHARED = Path(__file__).parent.parent / "shared"
DOMAIN = sorted(str(path.relative_to(SHARED)) for path in (SHARED / "domain").rglob("*.py"))
LAYERS = {"domain": 0, "settings": 1, "logs": 1, "once": 1, "transport": 2, "storage": 3, "actions": 3, "telemetry": 3, "execution": 4, "services": 5, "api": 6, "console": 7}
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


def layer_of(module: str) -> str:
    """`shared.storage.jobs` -> `storage`."""
    return module.split(".")[1]


def imported(source: str) -> set[str]:
    """Every module of `shared` that a source imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "shared":
            found |= {f"{node.module}.{alias.name}" if node.module == "shared" else node.module for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "shared"}
    return found


def layering_breaches(module: str, source: str) -> list[str]:
    """The imports of `module` that reach its own layer's equals (side by side) or a higher layer."""
    mine = layer_of(module)
    return sorted(
        target for target in imported(source)
        if layer_of(target) != mine and LAYERS[layer_of(target)] >= LAYERS[mine]
    )  # fmt: skip


def test_every_part_of_shared_has_a_layer() -> None:
    parts = {path.stem for path in SHARED.iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()}
    assert parts - {"__init__"} == set(LAYERS)


@pytest.mark.parametrize("path", sorted(str(path.relative_to(SHARED)) for path in SHARED.rglob("*.py")))
def test_no_layer_imports_a_higher_one(path: str) -> None:
    module = "shared." + path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    if module == "shared.__init__":
        return
    assert layering_breaches(module, (SHARED / path).read_text()) == []


@pytest.mark.parametrize("module", DOMAIN)
def test_domain_module_reads_no_clock_and_does_no_io(module: str) -> None:
    assert impurities((SHARED / module).read_text()) == []


def test_the_check_would_catch_a_clock_read() -> None:
    assert impurities("from datetime import datetime\nx = datetime.now()\n") == ["line 2: calls now()"]
    assert impurities("import time\ntime.time()\n") == ["line 1: imports time", "line 2: calls time()"]
    assert impurities("open('x')\n") == ["line 1: calls open()"]
    assert impurities("import urllib.request\nfrom urllib.parse import quote\n") == ["line 1: imports urllib.request"]
    assert impurities("from datetime import time\nt = time(5, 15)\n") == []


def test_the_check_would_catch_a_layer_reaching_up() -> None:
    assert layering_breaches("shared.storage.jobs", "from shared.api.errors import Conflict\n") == ["shared.api.errors"]
    assert layering_breaches("shared.actions.http", "from shared.storage import store\n") == ["shared.storage"]
    assert layering_breaches("shared.domain.ids", "import shared.settings\n") == ["shared.settings"]
    assert layering_breaches("shared.api.arm", "from shared.domain.problems import FieldError\n") == []


# The parts of the Table Storage store: above storage, only the composition root may name them.
TABLE_STORE_PARTS = {"table_store", "documents", "jobs", "job_rows", "job_collections", "job_counting", "counter_rows",
                     "history", "executor_records", "classic_records", "batches"}  # fmt: skip


def table_store_parts_used(module: str, source: str) -> list[str]:
    """The parts of the Table Storage store that `module` imports, where it should speak to the
    storage interface (shared/storage/interface.py) instead."""
    if layer_of(module) in {"domain", "settings", "logs", "transport", "storage", "services"}:
        return []
    return sorted(target for target in imported(source)
                  if target.startswith("shared.storage.") and target.split(".")[2] in TABLE_STORE_PARTS)  # fmt: skip


@pytest.mark.parametrize("path", sorted(str(path.relative_to(SHARED)) for path in SHARED.rglob("*.py")))
def test_the_layers_above_storage_depend_on_its_interface_not_its_parts(path: str) -> None:
    module = "shared." + path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    assert table_store_parts_used(module, (SHARED / path).read_text()) == []


def test_the_check_would_catch_a_part_of_the_store_used_above_it() -> None:
    assert table_store_parts_used("shared.execution.worker", "from shared.storage.jobs import JobSlot\n") == ["shared.storage.jobs"]
    assert table_store_parts_used("shared.api.arm", "from shared.storage.interface import Preconditions\n") == []
    assert table_store_parts_used("shared.services", "from shared.storage.table_store import table_storage\n") == []
