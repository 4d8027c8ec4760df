"""The local host serves HTTP functions as the Functions host does: routes, keys, failures."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import azure.functions as func
import httpx
import pytest

from devhost.http_host import LARGEST_BODY, FunctionsHttpServer, compile_route, http_functions
from tests.conftest import Service

KEY = "the-key"
TIMEOUT_S = 1.0  # the strict host's request_timeout
PATIENCE_S = 5.0  # how long a test waits for an answer the host should give at once


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


def small_server(**options: float) -> FunctionsHttpServer:
    """The small app's host, listening on a free port but not yet accepting: see `serving`."""
    return FunctionsHttpServer(("127.0.0.1", 0), http_functions(small_app().get_functions(), "api"), keys=[KEY], **options)


@contextmanager
def serving(server: FunctionsHttpServer) -> Iterator[FunctionsHttpServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def host() -> Iterator[httpx.Client]:
    with serving(small_server()) as server, httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=5.0) as client:
        yield client


@pytest.fixture(scope="module")
def strict() -> Iterator[int]:
    """The port of a host that waits for clients only TIMEOUT_S, for the tests of malformed and
    stalled requests, sent on raw sockets."""
    with serving(small_server(request_timeout=TIMEOUT_S)) as server:
        yield server.server_port


def test_a_text_answer_names_its_charset(host: httpx.Client) -> None:
    response = host.get("/api/things/box/parts/special?code=the-key")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"


def test_routes_match_under_the_prefix_with_literals_in_any_case(host: httpx.Client) -> None:
    response = host.put(
        "/API/Things/Box%201/PARTS/lid?code=the-key&colour=red",
        content=b"payload",
        headers={"x-probe": "p"},
    )
    assert response.status_code == 200
    assert response.headers["x-seen"] == "yes"
    # As the Python worker's converter writes it: a charset for text/* types only.
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "route": {"thing": "Box 1", "part": "lid"},
        "query": {"code": "the-key", "colour": "red"},
        "method": "PUT",
        "body": "payload",
        "header": "p",
    }


@pytest.mark.parametrize(
    ("path", "thing"),
    [
        ("/api/things/a%7Eb/parts/x", "a~b"),  # how older Pythons send "~"
        ("/api/th%69ngs/box/parts/x", "box"),  # an encoded letter in a literal segment
        ("/api/things/50%2525/parts/x", "50%25"),  # decoded once, not twice
        ("/api/things/a%2Fb/parts/x", "a/b"),  # an encoded "/" stays inside its segment
        ("/api/things/caf%C3%A9/parts/x", "caf\u00e9"),
    ],
)
def test_paths_are_decoded_once_before_routes_match(host: httpx.Client, path: str, thing: str) -> None:
    response = host.get(path, headers={"x-functions-key": KEY})
    assert response.status_code == 200
    assert response.json()["route"] == {"thing": thing, "part": "x"}


def test_an_encoded_slash_never_makes_a_segment(host: httpx.Client) -> None:
    assert host.get("/api/things/a/parts%2Fspecial", headers={"x-functions-key": KEY}).status_code == 404


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
    # How a Functions route takes the host's root: an optional parameter that must be empty.
    root, _ = compile_route("{ignored:maxlength(0)?}")
    assert root.fullmatch("") is not None and root.fullmatch("console") is None


def test_the_service_refuses_requests_without_the_right_key(service: Service) -> None:
    path = "/subscriptions/s1/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01"
    missing = httpx.get(service.base_url + path, timeout=5)
    wrong = httpx.get(service.base_url + path, headers={"x-functions-key": "nope"}, timeout=5)
    # The app's routes are anonymous to the host: the app checks the key, and answers as ARM does.
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "AuthenticationFailed")
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "InvalidAuthenticationToken")
    assert httpx.get(service.base_url + path + f"&code={service.key}", timeout=5).status_code == 200


# --- malformed, hostile and stalled requests, on raw sockets ---------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


def connect(port: int, request: bytes = b"") -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)
    client.sendall(request)
    return client


def answer(client: socket.socket, patience: float = PATIENCE_S) -> Answer | None:
    """The next response on the connection; None if the host closed it (or stayed silent)
    without one."""
    client.settimeout(patience)
    received = b""
    try:
        while b"\r\n\r\n" not in received:
            chunk = client.recv(65536)
            if not chunk:
                return None
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        while len(body) < int(headers.get("content-length", "0")):
            chunk = client.recv(65536)
            if not chunk:
                return None
            body += chunk
    except (TimeoutError, ConnectionResetError):
        return None
    return Answer(int(status_line.split()[1]), headers, body)


def is_closed(client: socket.socket, patience: float = PATIENCE_S) -> bool:
    client.settimeout(patience)
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def exchange(port: int, request: bytes) -> Answer | None:
    with connect(port, request) as client:
        return answer(client)


def handler_threads() -> int:
    return sum("process_request_thread" in thread.name for thread in threading.enumerate())


def threads_back_to(count: int) -> bool:
    deadline = time.monotonic() + PATIENCE_S
    while handler_threads() > count and time.monotonic() < deadline:
        time.sleep(0.05)
    return handler_threads() <= count


def request(method: str, target: str, *headers: str, body: bytes = b"") -> bytes:
    return "\r\n".join([f"{method} {target} HTTP/1.1", "Host: localhost", *headers, "", ""]).encode("latin-1") + body


PART = "/api/things/a/parts/b"
WITH_KEY = f"x-functions-key: {KEY}"
CLOSED = {"connection": "close"}


def refused(status: int) -> tuple[int, dict[str, str], bytes]:
    """What the host answers a request it refuses without reading its body."""
    return status, CLOSED, b""


def summary(got: Answer | None) -> tuple[int, dict[str, str], bytes] | None:
    return None if got is None else (got.status, {"connection": got.headers.get("connection", "")}, got.body)


@pytest.mark.parametrize(
    ("target", "headers", "status"),
    [
        (PART, ["x-functions-key: wrong", "Content-Length: 100000"], 401),
        (PART, ["Content-Length: 100000"], 401),
        ("/api/nothing/here?code=the-key", ["Content-Length: 100000"], 404),
        (PART, ["x-functions-key: wrong", "Transfer-Encoding: chunked"], 401),
    ],
    ids=["wrong-key", "no-key", "unknown-route", "chunked-wrong-key"],
)
def test_the_route_and_key_are_checked_before_the_body_is_read(strict: int, target: str, headers: list[str], status: int) -> None:
    # The body is announced but never sent: a host that waited for it would time out (408).
    with connect(strict, request("PUT", target, *headers)) as client:
        assert summary(answer(client)) == refused(status)
        assert is_closed(client)  # the unread body would be read as the next request


def test_a_request_without_a_body_keeps_its_connection_after_a_refusal(strict: int) -> None:
    with connect(strict, request("GET", PART)) as client:
        assert summary(answer(client)) == (401, {"connection": ""}, b"")
        client.sendall(request("GET", PART, WITH_KEY))
        got = answer(client)
        assert got is not None and got.status == 200


def test_expect_100_continue_is_answered_only_once_the_key_is_good(strict: int) -> None:
    expecting = ["Content-Length: 7", "Expect: 100-continue"]
    assert summary(exchange(strict, request("PUT", PART, "x-functions-key: wrong", *expecting))) == refused(401)
    with connect(strict, request("PUT", PART, WITH_KEY, *expecting)) as client:
        interim = answer(client)
        assert interim is not None and interim.status == 100
        client.sendall(b"payload")
        got = answer(client)
        assert got is not None and got.status == 200 and json.loads(got.body)["body"] == "payload"


def test_a_body_not_received_within_the_timeout_is_a_408_and_frees_the_thread(strict: int) -> None:
    before = handler_threads()
    with connect(strict, request("PUT", PART, WITH_KEY, "Content-Length: 10", body=b"abc")) as client:
        assert summary(answer(client)) == refused(408)
        assert is_closed(client)
    assert threads_back_to(before)


def test_a_body_sent_a_byte_at_a_time_is_cut_off_all_the_same(strict: int) -> None:
    # Each byte comes well within the timeout; the body as a whole does not.
    started = time.monotonic()
    trickling_until = started + TIMEOUT_S + 9.0
    with connect(strict, request("PUT", PART, WITH_KEY, "Content-Length: 1000")) as client:
        while time.monotonic() < trickling_until and not select.select([client], [], [], 0.3)[0]:
            client.sendall(b"x")
        assert summary(answer(client)) == refused(408)
        assert time.monotonic() < trickling_until  # answered while the client was still sending


def test_an_idle_connection_is_closed_after_the_timeout_and_frees_the_thread(strict: int) -> None:
    before = handler_threads()
    with connect(strict) as client:
        assert is_closed(client, patience=TIMEOUT_S + PATIENCE_S)
    with connect(strict, request("GET", PART, WITH_KEY)[:20]) as half_a_request_line:
        assert is_closed(half_a_request_line, patience=TIMEOUT_S + PATIENCE_S)
    assert threads_back_to(before)


@pytest.mark.parametrize(
    "lengths",
    [["abc"], ["-1"], ["+5"], ["1.5"], ["0x10"], ["5, 5"], [""], ["1" * 19], ["5", "6"], ["5", "5"]],
    ids=["letters", "negative", "plus-sign", "fraction", "hex", "list", "empty", "19-digits", "two-differing", "two-equal"],
)
def test_a_content_length_that_is_not_one_non_negative_integer_is_a_400(strict: int, lengths: list[str]) -> None:
    headers = [f"Content-Length: {length}" for length in lengths]
    assert summary(exchange(strict, request("PUT", PART, WITH_KEY, *headers, body=b"12345"))) == refused(400)


def test_a_content_length_with_leading_zeros_and_spaces_is_read(strict: int) -> None:
    got = exchange(strict, request("PUT", PART, WITH_KEY, "Content-Length:  007 ", body=b"payload"))
    assert got is not None and got.status == 200 and json.loads(got.body)["body"] == "payload"


def test_a_body_over_the_largest_is_a_413_once_the_key_is_good(strict: int) -> None:
    too_large = f"Content-Length: {LARGEST_BODY + 1}"
    assert summary(exchange(strict, request("PUT", PART, WITH_KEY, too_large))) == refused(413)
    assert summary(exchange(strict, request("PUT", PART, too_large))) == refused(401)


def test_a_chunked_body_is_read_as_the_functions_host_reads_it(host: httpx.Client) -> None:
    response = host.put(PART, content=iter([b"pay", b"load"]), headers={"x-functions-key": KEY})
    assert response.json()["body"] == "payload"
    assert response.request.headers["transfer-encoding"] == "chunked"


def test_chunk_extensions_and_trailers_are_read_and_the_connection_stays_usable(strict: int) -> None:
    chunks = b"3;name=value\r\npay\r\n4\r\nload\r\n0\r\nX-Trailer: dropped\r\n\r\n"
    with connect(strict, request("PUT", PART, WITH_KEY, "Transfer-Encoding: chunked", body=chunks)) as client:
        got = answer(client)
        assert got is not None and got.status == 200 and json.loads(got.body)["body"] == "payload"
        client.sendall(request("GET", PART, WITH_KEY))
        got = answer(client)
        assert got is not None and got.status == 200 and json.loads(got.body)["body"] == ""


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        (["Transfer-Encoding: chunked", "Content-Length: 5"], b"0\r\n\r\n", 400),
        (["Transfer-Encoding: gzip"], b"", 501),
        (["Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n", 501),
        (["Transfer-Encoding: chunked"], b"zz\r\n", 400),
        (["Transfer-Encoding: chunked"], b"-3\r\npay\r\n0\r\n\r\n", 400),
        (["Transfer-Encoding: chunked"], b"3\r\npayload\r\n0\r\n\r\n", 400),
        (["Transfer-Encoding: chunked"], b"400001\r\n", 413),
    ],
    ids=["with-content-length", "gzip", "gzip-then-chunked", "size-not-hex", "negative-size", "chunk-longer-than-its-size", "chunk-over-the-largest"],
)
def test_transfer_encodings_other_than_plain_chunked_are_refused(strict: int, headers: list[str], body: bytes, status: int) -> None:
    assert summary(exchange(strict, request("PUT", PART, WITH_KEY, *headers, body=body))) == refused(status)


def test_chunks_adding_up_to_more_than_the_largest_body_are_a_413(strict: int) -> None:
    chunk = b"%x\r\n" % (1024 * 1024) + b"x" * (1024 * 1024) + b"\r\n"
    with connect(strict, request("PUT", PART, WITH_KEY, "Transfer-Encoding: chunked")) as client:
        for _ in range(LARGEST_BODY // len(chunk) + 1):
            client.sendall(chunk)
        client.sendall(b"1\r\n")
        assert summary(answer(client)) == refused(413)


def test_header_values_beyond_ascii_are_read_never_dropped(strict: int) -> None:
    def get(target: str, header: bytes) -> Answer | None:  # the header line as raw bytes
        return exchange(strict, request("GET", target)[:-2] + header + b"\r\n\r\n")

    wrong_key = (401, {"connection": ""}, b"")
    assert summary(get(PART, b"x-functions-key: cl\xe9")) == wrong_key  # latin-1
    assert summary(get(PART, b"x-functions-key: \xe2\x82\xac\xff")) == wrong_key  # UTF-8, then a byte of neither
    assert summary(get(PART + "?code=%E2%82%AC%FF", b"x-probe: -")) == wrong_key
    got = get(PART, f"{WITH_KEY}\r\nx-probe: ".encode() + b"\xe9t\xe9")
    assert got is not None and got.status == 200
    assert json.loads(got.body)["header"] == "\u00e9t\u00e9"  # read as latin-1, as http.server reads headers


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/9.9\r\n\r\n", 505),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\n" + b"x-many: 1\r\n" * 101 + b"\r\n", 431),
    ],
    ids=["malformed-request-line", "unknown-version", "request-line-too-long", "too-many-headers"],
)
def test_what_http_server_refuses_itself_is_answered_with_an_empty_body(strict: int, sent: bytes, status: int) -> None:
    assert summary(exchange(strict, sent)) == refused(status)


def test_a_burst_of_100_connections_waits_in_the_backlog() -> None:
    server = small_server(request_timeout=TIMEOUT_S)  # listening, but accepting none yet
    deadline = time.monotonic() + 2.0
    clients: list[socket.socket] = []
    try:
        for _ in range(100):  # the kernel completes each handshake while the backlog has room
            clients.append(socket.create_connection(("127.0.0.1", server.server_port), timeout=max(deadline - time.monotonic(), 0.01)))
        with serving(server):
            for client in clients:
                client.sendall(request("GET", "/api/open"))
            statuses = [got.status if (got := answer(client)) else None for client in clients]
        assert statuses == [200] * 100
    finally:
        for client in clients:
            client.close()
        server.server_close()
