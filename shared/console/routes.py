"""The console's reads beside the management API, and where they are served: what
function_app.py registers, without importing the reads themselves (shared/console/pages.py)
until one is asked for."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.api.routes import OnFirstRequest

if TYPE_CHECKING:
    from shared.api.arm import Operation


@dataclass(frozen=True)
class ConsoleRoute:
    """A read of the console's: GET, behind the function key, no api-version."""

    name: str
    template: str
    operation: Operation


_pages = functools.partial(OnFirstRequest, "shared.console.pages")

COLLECTIONS = "console/api/collections"
COLLECTION = f"{COLLECTIONS}/{{subscriptionId}}/{{resourceGroupName}}/{{jobCollectionName}}"
ROUTES = [
    ConsoleRoute("console_collections", COLLECTIONS, _pages("list_collections")),
    ConsoleRoute("console_collection", COLLECTION, _pages("show_collection")),
    ConsoleRoute("console_job", f"{COLLECTION}/jobs/{{jobName}}", _pages("show_job")),
    ConsoleRoute("console_attention", "console/api/attention", _pages("show_attention")),
    ConsoleRoute("console_me", "console/api/me", _pages("show_me")),
    ConsoleRoute("console_holidays", "console/api/holidays", _pages("list_holiday_calendars")),
]
