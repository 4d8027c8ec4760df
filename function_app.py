"""The Azure Functions entry point: it declares the functions and hands each to `shared/`."""

import json

import azure.functions as func

from shared import openapi
from shared.arm import serve
from shared.routes import ROUTES, Route

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


def _register(route: Route) -> None:
    def handle(req: func.HttpRequest) -> func.HttpResponse:
        return serve(req, route.operation)

    app.function_name(route.name)(app.route(route=route.template, methods=[route.method])(handle))


for _route in ROUTES:
    _register(_route)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def openapi_document(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(openapi.document()), mimetype="application/json")
