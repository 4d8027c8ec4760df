"""The local host serves HTTP functions as the Functions host does: routes, keys, failures."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import azure.functions as func
import httpx
import pytest

from devhost.http_host import FunctionsHttpServer, compile_route, http_functions
from tests.conftest import Service

KEY = "the-key"


def small_app() -> func.FunctionApp:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

    @app.route(route="things/{thing}/parts/{part}", methods=["GET", "PUT"])
    def part(req: func.HttpRequest) -> func.HttpResponse:
        body = {"route": dict(req.route_params), "query": dict(req.params), "method": req.method,
                "body": req.get_body().decode(), "header": req.headers.get("x-probe")}
        return func.HttpResponse(json.dumps(body), mimetype="application/json", headers={"x-seen": "yes"})

    @app.route(route="things/{thing}/parts/special", methods=["GET"])
    def special(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse("special")

    @app.route(route="open", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
    async def open_to_all(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse("anyone")

    @app.route(route="broken", methods=["GET"])
    def broken(req: func.HttpRequest) -> func.HttpResponse:
        raise RuntimeError("secret internals")

    return app


@pytest.fixture(scope="module")
def host() -> Iterator[httpx.Client]:
    server = FunctionsHttpServer(("127.0.0.1", 0), http_functions(small_app().get_functions(), "api"), keys=[KEY])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=5.0) as client:
        yield client
    server.shutdown()
    server.server_close()


def test_routes_match_under_the_prefix_with_literals_in_any_case(host: httpx.Client) -> None:
    response = host.put(
        "/API/Things/Box%201/PARTS/lid?code=the-key&colour=red",
        content=b"payload",
        headers={"x-probe": "p"},
    )
    assert response.status_code == 200
    assert response.headers["x-seen"] == "yes"
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "route": {"thing": "Box 1", "part": "lid"},
        "query": {"code": "the-key", "colour": "red"},
        "method": "PUT",
        "body": "payload",
        "header": "p",
    }


def test_the_more_literal_route_wins(host: httpx.Client) -> None:
    response = host.get("/api/things/box/parts/special", headers={"x-functions-key": KEY})
    assert response.text == "special"


def test_a_function_needs_its_key_and_anonymous_ones_do_not(host: httpx.Client) -> None:
    assert host.get("/api/things/a/parts/b").status_code == 401
    assert host.get("/api/things/a/parts/b", headers={"x-functions-key": "wrong"}).status_code == 401
    assert host.get("/api/things/a/parts/b", headers={"x-functions-key": KEY}).status_code == 200
    assert host.get("/api/open").text == "anyone"  # an async function, awaited by the host


def test_unknown_routes_and_methods_are_404(host: httpx.Client) -> None:
    assert host.get("/api/nothing/here?code=the-key").status_code == 404
    assert host.delete("/api/things/a/parts/b?code=the-key").status_code == 404
    assert host.get("/things/a/parts/b?code=the-key").status_code == 404  # outside the prefix


def test_an_exception_is_a_bare_500_that_reveals_nothing(host: httpx.Client) -> None:
    response = host.get("/api/broken", headers={"x-functions-key": KEY})
    assert response.status_code == 500
    assert response.content == b""


def test_route_templates() -> None:
    pattern, literals = compile_route("files/{dir}/{*rest}")
    match = pattern.fullmatch("FILES/a/b/c.txt")
    assert match is not None and match.groupdict() == {"dir": "a", "rest": "b/c.txt"}
    assert literals == 1
    with pytest.raises(ValueError, match="beyond what devhost supports"):
        compile_route("files/{id:int}")


def test_the_service_refuses_requests_without_the_right_key(service: Service) -> None:
    path = "/subscriptions/s1/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01"
    missing = httpx.get(service.base_url + path, timeout=5)
    wrong = httpx.get(service.base_url + path, headers={"x-functions-key": "nope"}, timeout=5)
    assert (missing.status_code, missing.content) == (401, b"")
    assert (wrong.status_code, wrong.content) == (401, b"")
    assert httpx.get(service.base_url + path + f"&code={service.key}", timeout=5).status_code == 200
