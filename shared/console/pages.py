"""The web console's HTTP side: its files (anonymous, nothing in them is secret) and the
reads it makes beside the management API (behind the function key, like the API; their routes
are in shared/console/routes.py).

The page changes things (creates and edits jobs and collections, runs now, enables, disables,
deletes, previews a schedule) through the management API itself, so that it works against any
deployment exactly as a script would.
"""

from __future__ import annotations

import json
from pathlib import Path

import azure.functions as func

from shared.api.arm import ApiRequest, ApiResponse
from shared.api.collection_operations import collection_id
from shared.api.errors import ResourceNotFound
from shared.api.health import CLAIM_OVERDUE, MOST_COUNTED
from shared.console.attention import (
    MOST_LISTED,
    Attention,
    AttentionCounts,
    claim_list,
    poison_list,
)
from shared.domain.ids import JobId
from shared.domain.schedule.exclusion_reasons import holiday_countries
from shared.services import EXECUTIONS_QUEUE, Services

STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {
    "index.html": "text/html",
    "console.js": "text/javascript",
    "forms.js": "text/javascript",
    "templates.js": "text/javascript",
    "attention.js": "text/javascript",
    "activity.js": "text/javascript",
    "roles.js": "text/javascript",
    "charts.js": "text/javascript",
    "exclusions.js": "text/javascript",
    "console.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
# Everything the page uses is served from here: nothing from elsewhere may load or run.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def file_response(name: str) -> func.HttpResponse:
    """One of the console's files, or a 404 in the API's error envelope."""
    content_type = CONTENT_TYPES.get(name)
    if content_type is None:
        error = ResourceNotFound(f"The console has no file '{name[:100]}'.")
        return func.HttpResponse(
            json.dumps(error.envelope), status_code=error.status, mimetype="application/json"
        )
    return func.HttpResponse(
        (STATIC / name).read_bytes(), headers=HEADERS, mimetype=content_type, charset="utf-8"
    )


def list_collections(request: ApiRequest, services: Services) -> ApiResponse:
    """Every collection of every subscription, with its jobs counted by state; and how many
    poison messages and claims past their deadline need a look (as /health counts them)."""
    # The views (with the schedule's words behind them) are imported on the console's first
    # read, not by a cold start that never serves one (issue 49).
    from shared.console.views import collection_view  # noqa: PLC0415

    storage, now = services.storage, services.now()
    found = sorted(
        storage.collections.all_collections(),
        key=lambda stored: (stored.id.subscription, stored.id.resource_group, stored.id.name),
    )
    counts: AttentionCounts = {
        "poisonMessages": services.dispatcher.poison_depth(),
        "claimsPastDeadline": storage.executor.overdue_claims(now - CLAIM_OVERDUE, MOST_COUNTED),
        "claimsCountedUpTo": MOST_COUNTED,
    }
    collections = [collection_view(stored, storage.jobs.jobs(stored.id), now) for stored in found]
    return ApiResponse(200, {"value": collections, "attention": counts})


def show_attention(request: ApiRequest, services: Services) -> ApiResponse:
    """What needs an operator's look: the poison queue's first messages (peeked, left there)
    and the jobs with a claim past its deadline by more than CLAIM_OVERDUE."""
    now, dispatcher = services.now(), services.dispatcher
    before = now - CLAIM_OVERDUE
    # One past what is listed, to say that there are more.
    claimed = services.storage.executor.jobs_with_overdue_claims(before, MOST_LISTED + 1)
    found: Attention = {
        "poison": poison_list(
            f"{EXECUTIONS_QUEUE}-poison", dispatcher.poison_depth(), dispatcher.peek_poison()
        ),
        "claimsPastDeadline": claim_list(claimed, before, now),
    }
    return ApiResponse(200, found)


def show_collection(request: ApiRequest, services: Services) -> ApiResponse:
    """A collection, its jobs and the timeline of their next 24 hours."""
    from shared.console.views import collection_view, job_row, timeline  # noqa: PLC0415

    stored = services.storage.collections.existing_collection(collection_id(request))
    jobs, now = list(services.storage.jobs.jobs(stored.id)), services.now()
    runs = stored.document.enabled
    return ApiResponse(
        200,
        {
            "collection": collection_view(stored, jobs, now),
            "jobs": [job_row(job, now, collection_runs=runs) for job in jobs],
            "timeline": timeline(jobs, now),
        },
    )


def show_job(request: ApiRequest, services: Services) -> ApiResponse:
    """A job: its row, its definition without secrets and its next occurrences."""
    from shared.console.views import job_detail  # noqa: PLC0415

    storage = services.storage
    collection = storage.collections.existing_collection(collection_id(request))
    job = storage.jobs.existing_job(JobId.of(collection.id, request.route["jobName"]))
    runs = collection.document.enabled  # a job of a suspended collection waits: it is not late
    return ApiResponse(200, job_detail(job, services.now(), collection_runs=runs))


def list_holiday_calendars(request: ApiRequest, services: Services) -> ApiResponse:
    """The countries and subdivisions whose public holidays a job may exclude, for the form's
    pickers: the `holidays` package's own list, so that the page never falls behind it."""
    return ApiResponse(200, {"value": holiday_countries()})


def show_me(request: ApiRequest, services: Services) -> ApiResponse:
    """Who is signed in, and the most their roles allow over the whole service (the page hides
    what that cannot do; role assignments at narrower scopes are listed beside it)."""
    caller = request.caller
    if caller is None:  # only a route without a guard, which the app never registers
        raise ResourceNotFound("No caller is known for this request.")
    role = caller.strongest_role("/")
    role_name = role.value if role else "no role"
    return ApiResponse(
        200,
        {
            "name": caller.name,
            "objectId": caller.object_id,
            "administrator": caller.administrator,
            "role": role.name.lower() if role else None,
            "roleName": "administrator" if caller.administrator else role_name,
            "grants": [{"role": grant.role.value, "scope": grant.scope} for grant in caller.grants],
        },
    )
