"""What `python -m devhost` (`make run`) prints at start: addresses a newcomer can open as
they are, the web console's and the health route's among them."""

from __future__ import annotations

import re

import httpx

from tests.conftest import Service


def test_the_banner_prints_console_and_health_addresses_that_answer(service: Service) -> None:
    printed = service.log.read_text()
    assert f"Serving on {service.base_url}\n" in printed
    [console] = re.findall(r"^  console  (\S+)", printed, flags=re.MULTILINE)
    [health] = re.findall(r"^  health   (\S+)", printed, flags=re.MULTILINE)
    assert (console, health) == (f"{service.base_url}/console", f"{service.base_url}/health")
    page = httpx.get(console, timeout=10)  # no key: the page asks for it
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert httpx.get(health, timeout=10).json()["storage"]["tables"] == "reachable"
