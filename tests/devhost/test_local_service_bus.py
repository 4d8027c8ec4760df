"""`make run SERVICE_BUS=1` (`python -m devhost --service-bus`): Service Bus jobs get a local
namespace. The endpoint a setting names wins; then whatever listens on the emulator's port;
otherwise the stand-in starts there, takes any queue or topic, and logs what it receives. Through
the unmodified azure-servicebus SDK, with the connection string Microsoft's emulator documents."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from devhost import azurite
from devhost.__main__ import local_service_bus
from shared.settings import SERVICEBUS_ENDPOINT


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Empty, as local settings leave it; and put back as it was after the test, since the
    # function under test sets it in this process's environment.
    monkeypatch.setenv(SERVICEBUS_ENDPOINT, "")
    yield


def test_an_endpoint_the_setting_names_is_used_and_nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVICEBUS_ENDPOINT, "sb://127.0.0.1:5999")
    assert local_service_bus(azurite.free_port()) is None
    assert os.environ[SERVICEBUS_ENDPOINT] == "sb://127.0.0.1:5999"


@pytest.mark.usefixtures("unset")
def test_a_broker_already_on_the_port_is_used_as_it_is() -> None:
    with socket.socket() as emulator:
        emulator.bind(("127.0.0.1", 0))
        emulator.listen()
        port = emulator.getsockname()[1]
        assert local_service_bus(port) is None
    assert os.environ[SERVICEBUS_ENDPOINT] == f"sb://127.0.0.1:{port}"


@pytest.mark.services
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("unset")
def test_the_stand_in_takes_any_queue_with_the_emulators_key_and_logs_each_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = azurite.free_port()
    broker = local_service_bus(port)
    assert broker is not None
    try:
        connection = (
            f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
        )
        with caplog.at_level(logging.INFO, logger="devhost"), ServiceBusClient.from_connection_string(
            connection, retry_total=0
        ) as client:
            with client.get_queue_sender("nightly-invoices") as sender:
                sender.send_messages(ServiceBusMessage("run\nthe invoices"), timeout=10)
            with client.get_topic_sender("releases") as sender:
                sender.send_messages(ServiceBusMessage("x" * 500), timeout=10)
            assert len(broker.wait_for(2)) == 2
        said = [record.getMessage() for record in caplog.records if "Service Bus:" in record.getMessage()]
        assert len(said) == 2, said
        assert said[0].startswith("Service Bus: 'nightly-invoices' received message ")
        assert said[0].endswith(": run\\nthe invoices")  # one line, as every log line
        assert said[1].endswith("x" * 200 + "... (500 characters)")
    finally:
        broker.stop()
