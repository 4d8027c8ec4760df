"""The function table the local host serves, as JSON: `python -m devhost.table`.

For each function of function_app.py: its name, every binding as declared (type, direction and
settings), and what the local host makes of its trigger: the route it matches (under host.json's
routePrefix), the methods, whether a key is needed, the timer's schedule, the queue's name. The
conformance tests compare the table built from the runtime library's indexing (Python 3.13+)
with the one built from the app's own declarations, called directly (every Python): they must
be equal, or the local host would serve one thing and Azure another.

`--invocation direct|runtime` chooses the path (DEVHOST_INVOCATION); by default, as the host.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from devhost.http_host import http_functions
from devhost.triggers import QueueTrigger, TimerTrigger, host_extensions, triggers_of

# Only read by the queue clients, which the table never uses to connect.
_NO_STORAGE = "UseDevelopmentStorage=true"


def function_table(functions: list[Any]) -> list[dict[str, Any]]:
    """One row per function, sorted by name (see the module's text)."""
    extensions = host_extensions()
    route_prefix = extensions.get("http", {}).get("routePrefix", "api")
    routes = {served.name: served for served in http_functions(functions, route_prefix)}
    runners = {
        runner.name: runner
        for runner in triggers_of(functions, extensions.get("queues", {}), _NO_STORAGE)
    }
    rows = []
    for function in functions:
        name = function.get_function_name()
        bindings = [json.loads(raw) for raw in function.get_raw_bindings()]
        row: dict[str, Any] = {"name": name, "bindings": sorted(bindings, key=json.dumps)}
        if name in routes:
            served = routes[name]
            row["route"] = served.route.pattern
            row["methods"] = sorted(served.methods)
            row["needsKey"] = served.needs_key
        runner = runners.get(name)
        if isinstance(runner, TimerTrigger):
            row["schedule"] = runner.schedule
        elif isinstance(runner, QueueTrigger):
            row["queue"] = runner.queue_name
        rows.append(row)
    return sorted(rows, key=lambda row: str(row["name"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devhost.table", description=__doc__)
    parser.add_argument("--invocation", choices=["direct", "runtime"])
    options = parser.parse_args(argv)
    if options.invocation:
        os.environ["DEVHOST_INVOCATION"] = options.invocation
    from devhost.__main__ import load_local_settings  # noqa: PLC0415
    from devhost.worker import declared_functions  # noqa: PLC0415

    load_local_settings()  # the app reads its settings when imported, as under the host
    json.dump(function_table(declared_functions()), sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
