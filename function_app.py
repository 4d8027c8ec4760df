"""The Azure Functions entry point: it declares the functions and hands each to `shared/`."""

import asyncio
import json

import azure.functions as func

from shared import services
from shared.api import openapi
from shared.api.arm import serve
from shared.api.classic import serve_classic
from shared.api.routes import CLASSIC_ROUTES, ROUTES, ClassicRoute, Route
from shared.execution import clean_up, timer

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


def _register(route: Route) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        return serve(req, route.operation, services.current)

    app.function_name(route.name)(app.route(route=route.template, methods=[route.method])(handle))


def _register_classic(route: ClassicRoute) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        return serve_classic(req, route.operation, services.current, api_version=route.api_version)

    app.function_name(route.name)(app.route(route=route.template, methods=[route.method])(handle))


for _route in ROUTES:
    _register(_route)
for _classic_route in CLASSIC_ROUTES:
    _register_classic(_classic_route)


@app.timer_trigger(arg_name="tick", schedule="%SCHEDULER_TICK_SCHEDULE%", run_on_startup=False)
def due_attempts_timer(tick: func.TimerRequest) -> None:
    """Hands attempts due within the look-ahead from the due index to the execution queue."""
    running = services.current()
    timer.tick(running.due_index, running.dispatcher, running.now(), running.settings.lookahead)


@app.timer_trigger(arg_name="tick", schedule="%SCHEDULER_CLEANUP_SCHEDULE%", run_on_startup=False)
def retention_timer(tick: func.TimerRequest) -> None:
    """Removes history past what is kept, and jobs that ended long enough ago."""
    running = services.current()
    clean_up.clean_up(running.store, running.now())


@app.queue_trigger(
    arg_name="message", queue_name=services.EXECUTIONS_QUEUE, connection="AzureWebJobsStorage"
)
async def executor(message: func.QueueMessage) -> None:
    """Runs one attempt of one job, then records it and schedules what follows."""
    text, deliveries = message.get_body().decode(), message.dequeue_count or 1
    # A message comes up to 1.5 s early (visibility delays are whole seconds): the wait is
    # awaited, so that it holds no worker thread; the work itself is blocking I/O.
    running = services.current()
    await asyncio.sleep(running.worker.seconds_until_due(text))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(running.blocking_threads, running.worker.handle, text, deliveries)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(openapi.document()), mimetype="application/json")
