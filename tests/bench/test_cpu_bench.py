"""The pure parts of the CPU benchmarks (bench.cpu, bench.ab, bench.counting_proxy): counting
requests in a byte stream, ratios and their spread, reading what the host said."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from bench.ab import Spread, Target, paired_ratios
from bench.counting_proxy import CountingProxy, RequestFraming
from bench.cpu import Cost, Run, functions_path

PUT = (
    b"PUT /devstoreaccount1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n"
    b'{"a": "\r\n\r\nGET "}'
)
GET = b"GET /devstoreaccount1/jobs(PartitionKey='a') HTTP/1.1\r\nHost: x\r\n\r\n"
CHUNKED = (
    b"POST /devstoreaccount1/$batch HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
)


def test_requests_are_counted_whole_whatever_their_bodies_hold() -> None:
    framing = RequestFraming()
    assert framing.feed(PUT + GET + CHUNKED + GET) == 4


def test_requests_fed_a_byte_at_a_time_count_once_each_when_complete() -> None:
    framing = RequestFraming()
    stream = PUT + CHUNKED + GET
    completed_at = [n for n in range(len(stream)) if framing.feed(stream[n : n + 1])]
    assert completed_at == [len(PUT) - 1, len(PUT) + len(CHUNKED) - 1, len(stream) - 1]
    assert framing.requests == 3


def test_a_request_cut_inside_its_body_is_not_counted_yet() -> None:
    framing = RequestFraming()
    assert framing.feed(PUT[:-3]) == 0
    assert framing.feed(PUT[-3:]) == 1


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: several requests on one connection

    def do_GET(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._answer()

    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *arguments: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_proxy_forwards_and_counts_each_request_on_kept_alive_connections(
    upstream: int,
) -> None:
    proxy = CountingProxy([upstream])
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{proxy.ports[upstream]}") as client:
            answers = [client.get("/a"), client.put("/b", content=b"x" * 70_000), client.get("/c")]
        assert [answer.text for answer in answers] == ["ok", "ok", "ok"]
        assert proxy.counts == {upstream: 3}
    finally:
        proxy.stop()


def test_ratios_pair_each_round_and_leave_out_a_zero_base() -> None:
    assert paired_ratios([10.0, 8.0, 0.0], [5.0, 6.0, 1.0]) == [0.5, 0.75]
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


def test_the_spread_is_the_median_and_the_range() -> None:
    spread = Spread.of([0.9, 1.2, 1.0, 1.05])
    assert (spread.median, spread.low, spread.high) == (1.025, 0.9, 1.2)
    assert str(spread) == "1.02 (0.90–1.20)"
    assert str(Spread.of([0.5])) == "0.50"


def test_a_target_is_met_only_when_every_round_meets_it() -> None:
    assert Target(0.5).met([0.45, 0.5])
    assert not Target(0.5).met([0.45, 0.51])
    assert not Target(0.5).met([])
    assert Target(1.6, at_least=True).met([1.6, 1.9])
    assert not Target(1.6, at_least=True).met([1.59, 1.9])
    assert (str(Target(0.5)), str(Target(1.6, at_least=True))) == ("≤ 0.5", "≥ 1.6")


def test_the_host_line_that_names_the_python_and_the_functions_path_is_found() -> None:
    output = (
        "2026-11-27 01:20:00 devhost INFO Python functions indexed\n"
        "Serving on http://127.0.0.1:7071\n"
        "Function key (x-functions-key header or ?code=): k\n"
        "Functions are called directly (azure-functions 1.26.0), on Python 3.11.7\n"
    )
    assert functions_path(output) == (
        "Functions are called directly (azure-functions 1.26.0), on Python 3.11.7"
    )
    assert functions_path("Serving on http://127.0.0.1:7071\n") == ""


def test_a_run_survives_its_json_form() -> None:
    cost = Cost(200, 10.0, 9.0, 3.0, 2.4, 40.0, 180.0)
    run = Run({"execute": cost}, "AMD EPYC, 2 cores", "on Python 3.11.7", "abc1234", 20.0, "now")
    assert Run.from_json(run.to_json()) == run
    assert (cost.rate, cost.host_to_azurite) == (20.0, 3.0)


def test_the_sustained_rate_is_the_highest_step_under_a_second_of_p99() -> None:
    def step(rate: float, p99: float) -> Cost:
        return Cost(round(rate * 30), 30.0, 9.0, 3.0, 2.4, 100.0, p99)

    ramp = [step(20, 150), step(30, 400), step(40, 999), step(50, 1000)]
    run = Run({}, "m", "p", "c", 20.0, "now", ramp=ramp)
    assert run.sustained == 40.0
    assert Run({}, "m", "p", "c", 20.0, "now").sustained == 0.0
