"""The Azure Functions entry point: it declares the functions and hands each to `shared/`.

Each function imports what it serves on its first call (a cold start's cost, issue 49): the
import declares the functions from the route tables alone, so an instance that only delivers
never loads the API, and one that serves a read never loads the execution side.
"""

import asyncio
import json

import azure.functions as func

from shared import services
from shared.api.routes import CLASSIC_ROUTES, ROUTES, ClassicRoute, Route
from shared.console.routes import ROUTES as CONSOLE_ROUTES
from shared.console.routes import ConsoleRoute

# Anonymous to the host: the app itself admits callers (shared/api/access.py), by the function
# key or by the platform's sign-in, so that a caller with a bearer token needs no key.
app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


def _register(route: Route) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        from shared.api.access import arm_guard
        from shared.api.arm import serve

        return serve(req, route.operation, services.current, guard=arm_guard(route.name))

    app.function_name(route.name)(app.route(route=route.template, methods=[route.method])(handle))


def _register_classic(route: ClassicRoute) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        from shared.api.access import classic_guard
        from shared.api.classic.serving import serve_classic

        return serve_classic(
            req, route.operation, services.current, guard=classic_guard(route.name)
        )

    app.function_name(route.name)(app.route(route=route.template, methods=[route.method])(handle))


def _register_console(route: ConsoleRoute) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        from shared.api.access import console_guard
        from shared.api.arm import serve

        guard = console_guard(route.name)
        return serve(req, route.operation, services.current, versioned=False, guard=guard)

    app.function_name(route.name)(app.route(route=route.template, methods=["GET"])(handle))


for _route in ROUTES:
    _register(_route)
for _classic_route in CLASSIC_ROUTES:
    _register_classic(_classic_route)
for _console_route in CONSOLE_ROUTES:
    _register_console(_console_route)


@app.timer_trigger(arg_name="tick", schedule="%SCHEDULER_TICK_SCHEDULE%", run_on_startup=False)
def due_attempts_timer(tick: func.TimerRequest) -> None:
    """Hands attempts due within the look-ahead from the due index to the execution queue."""
    from shared.execution import timer

    running = services.current()
    timer.tick(
        running.due_index,
        running.dispatcher,
        running.now(),
        running.settings.lookahead,
        fan_out=running.fan_out,
    )


@app.timer_trigger(arg_name="tick", schedule="%SCHEDULER_CLEANUP_SCHEDULE%", run_on_startup=False)
def retention_timer(tick: func.TimerRequest) -> None:
    """Removes history past what is kept, and jobs that ended long enough ago."""
    from shared.domain import activity
    from shared.execution import clean_up

    running = services.current()
    clean_up.clean_up(running.storage, running.now())
    running.activity_log.remove_before(running.now() - activity.KEPT_FOR)


@app.queue_trigger(
    arg_name="message", queue_name=services.EXECUTIONS_QUEUE, connection="AzureWebJobsStorage"
)
async def executor(message: func.QueueMessage) -> None:
    """Runs one attempt of one job, then records it and schedules what follows; or moves a
    range of the due index that the timer handed on (shared/execution/fan_out.py)."""
    from shared.execution import messages

    received, dequeue_count = messages.received(message.get_body().decode()), message.dequeue_count
    running = services.current()
    loop = asyncio.get_running_loop()
    if isinstance(received, messages.DueRange):
        await loop.run_in_executor(
            running.blocking_threads, running.fan_out.handle, received, dequeue_count or 1
        )
    elif received is not None:  # None: malformed, dropped (logged)
        # A message comes up to 1.5 s early (visibility delays are whole seconds): its jobs are
        # read meanwhile, and the rest of the wait is awaited, so that it holds no worker
        # thread; the work itself is blocking I/O.
        if running.worker.unread(received):
            await loop.run_in_executor(
                running.blocking_threads, running.worker.read_ahead, received
            )
        await asyncio.sleep(running.worker.seconds_until_due(received))
        await loop.run_in_executor(
            running.blocking_threads, running.worker.handle, received, dequeue_count or 1
        )


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    from shared.api import openapi

    return func.HttpResponse(json.dumps(openapi.document()), mimetype="application/json")


@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def health_check(req: func.HttpRequest) -> func.HttpResponse:
    """Storage reachable, queue depth, the timer's last tick: nothing secret (kept a few
    seconds: anyone may ask)."""
    from shared.api import health

    status, report = health.REPORTS.answer(services.current)
    return func.HttpResponse(json.dumps(report), status_code=status, mimetype="application/json")


# The host's root: `{ignored:maxlength(0)?}` is how a Functions route matches the empty path
# (in Azure, with AzureWebJobsDisableHomepage set, the host's own page gives way to it).
@app.route(
    route="{ignored:maxlength(0)?}", methods=["GET", "HEAD"], auth_level=func.AuthLevel.ANONYMOUS
)
def root_to_console(req: func.HttpRequest) -> func.HttpResponse:
    """The service's root address leads to the console."""
    return func.HttpResponse(status_code=302, headers={"Location": "/console"})


@app.route(route="console", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def console_page(req: func.HttpRequest) -> func.HttpResponse:
    """The web console; it asks for the function key itself."""
    from shared.console import pages

    return pages.file_response("index.html")


@app.route(route="console/static/{name}", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def console_file(req: func.HttpRequest) -> func.HttpResponse:
    from shared.console import pages

    return pages.file_response(req.route_params["name"])
