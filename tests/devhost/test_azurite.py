"""Azurite as the tests start it (a temporary folder, gone after stop) and as `make run` does (a
folder of the project, kept across restarts unless emptied first, and across a crash with every
acknowledged write), and the local host's lock."""

from __future__ import annotations

import socket
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from azure.core.exceptions import AzureError
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.queue import QueueClient, QueueServiceClient

from devhost import azurite
from devhost.__main__ import _lock


def write_some_data(connection_string: str) -> None:
    table = TableServiceClient.from_connection_string(connection_string).create_table("kept")
    table.create_entity({"PartitionKey": "p", "RowKey": "r", "value": "still here"})
    queue = QueueClient.from_connection_string(connection_string, "kept")
    queue.create_queue()
    queue.send_message("still queued")


def read_the_data(connection_string: str) -> tuple[list[str], list[str]]:
    tables = TableServiceClient.from_connection_string(connection_string)
    values = [entity["value"] for name in tables.list_tables() if name.name == "kept"
              for entity in tables.get_table_client("kept").list_entities()]
    queues = QueueServiceClient.from_connection_string(connection_string)
    messages = [message.content for name in queues.list_queues() if name.name == "kept"
                for message in queues.get_queue_client("kept").peek_messages(max_messages=32)]
    return values, messages


@pytest.mark.services
def test_a_persistent_location_keeps_its_data_across_a_restart_until_emptied(tmp_path: Path) -> None:
    location = tmp_path / "data"
    emulator = azurite.start(location=location)
    try:
        write_some_data(emulator.connection_string)
    finally:
        emulator.stop()
    assert any(location.iterdir()), "stop() must leave a persistent folder and its files"

    emulator = azurite.start(location=location)  # new random ports, same folder
    try:
        assert read_the_data(emulator.connection_string) == (["still here"], ["still queued"])
    finally:
        emulator.stop()

    (location / "devhost.lock").write_text("")
    azurite.empty(location, keep={"devhost.lock"})
    assert [entry.name for entry in location.iterdir()] == ["devhost.lock"]
    emulator = azurite.start(location=location)
    try:
        assert read_the_data(emulator.connection_string) == ([], [])
    finally:
        emulator.stop()
    assert location.is_dir()


@pytest.mark.services
def test_a_persistent_location_keeps_every_acknowledged_write_when_azurite_is_killed(
    tmp_path: Path,
) -> None:
    # Azurite itself saves every 5 s: killed at once, it would lose all of these.
    location = tmp_path / "data"
    emulator = azurite.start(location=location)
    try:
        tables = TableServiceClient.from_connection_string(emulator.connection_string)
        table = tables.create_table("kept")
        queue = QueueClient.from_connection_string(emulator.connection_string, "kept")
        queue.create_queue()
        table.create_entity({"PartitionKey": "p", "RowKey": "created", "value": 1})
        table.create_entity({"PartitionKey": "p", "RowKey": "deleted", "value": 1})
        table.update_entity({"PartitionKey": "p", "RowKey": "created", "value": 2})
        table.delete_entity("p", "deleted")
        table.submit_transaction(
            [("upsert", {"PartitionKey": "b", "RowKey": key, "value": 3}) for key in "xy"]
        )
        for text in ("received", "deleted"):
            queue.send_message(text)
        deleted = next(iter(queue.receive_messages(max_messages=1, visibility_timeout=300)))
        queue.delete_message(deleted)
        received = next(iter(queue.receive_messages(max_messages=1, visibility_timeout=300)))
        # Many at once too: Azurite answers those together after one save.
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(queue.send_message, (f"burst {n}" for n in range(30))))
        emulator.process.kill()  # SIGKILL, straight after the last acknowledgement
        emulator.process.wait(timeout=10)
    finally:
        emulator.stop()

    emulator = azurite.start(location=location)
    try:
        table = TableServiceClient.from_connection_string(emulator.connection_string)
        rows = table.get_table_client("kept").list_entities()
        assert {row["RowKey"]: row["value"] for row in rows} == {"created": 2, "x": 3, "y": 3}
        queue = QueueClient.from_connection_string(emulator.connection_string, "kept")
        visible = [message.content for message in queue.peek_messages(max_messages=32)]
        assert sorted(visible) == sorted(f"burst {n}" for n in range(30))
        # The received message is still invisible, and its receipt still deletes it.
        assert queue.get_queue_properties().approximate_message_count == 31
        queue.delete_message(received.id, received.pop_receipt)
        assert queue.get_queue_properties().approximate_message_count == 30
    finally:
        emulator.stop()


@pytest.mark.services
def test_a_write_that_cannot_be_saved_is_not_acknowledged(tmp_path: Path) -> None:
    location = tmp_path / "data"
    emulator = azurite.start(location=location)
    try:
        TableServiceClient.from_connection_string(emulator.connection_string).create_table("kept")
        table = TableClient.from_connection_string(
            emulator.connection_string, "kept", retry_total=0
        )
        # Where the table database is written before it is renamed into place: a folder now.
        blocker = location / "__azurite_db_table__.json~"
        blocker.mkdir()
        with pytest.raises(AzureError):  # the connection breaks: no answer, no acknowledgement
            table.create_entity({"PartitionKey": "p", "RowKey": "unsaved"})
        blocker.rmdir()
        table.create_entity({"PartitionKey": "p", "RowKey": "saved"})  # saving works again
        emulator.process.kill()
        emulator.process.wait(timeout=10)
    finally:
        emulator.stop()

    emulator = azurite.start(location=location)
    try:
        table = TableClient.from_connection_string(emulator.connection_string, "kept")
        # The first write was applied but not acknowledged; the next save kept it, as Azure may
        # keep a write whose answer was lost.
        assert {row["RowKey"] for row in table.list_entities()} == {"unsaved", "saved"}
    finally:
        emulator.stop()


@pytest.mark.services
def test_without_a_location_azurite_runs_on_a_temporary_folder_that_stop_removes() -> None:
    emulator = azurite.start()
    try:
        assert emulator.location.is_dir()
        write_some_data(emulator.connection_string)
    finally:
        emulator.stop()
    assert not emulator.location.exists()


def test_the_standard_ports_are_given_up_for_free_ones_when_one_is_taken() -> None:
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT leftovers
        try:
            squatter.bind(("127.0.0.1", azurite.STANDARD_PORTS[1]))
            squatter.listen()
        except OSError:
            pass  # already taken by someone else: the same case
        ports = azurite.standard_ports_or_free()
        assert ports != azurite.STANDARD_PORTS
        assert len(set(ports)) == 3
        assert all(azurite.is_free(port) for port in ports)


@pytest.mark.parametrize("round_", range(200))
def test_ports_chosen_together_never_coincide(round_: int) -> None:
    given = azurite.free_port()
    ports = azurite.chosen_ports((0, given, 0, 0))
    assert ports[1] == given
    assert len(set(ports)) == 4, ports


def test_the_data_folder_and_its_files_are_made_private_whatever_modes_they_had(tmp_path: Path) -> None:
    from devhost.__main__ import kept_key  # noqa: PLC0415

    folder = tmp_path / "data"
    (folder / "nested").mkdir(parents=True)
    folder.chmod(0o755)
    (folder / "nested").chmod(0o777)
    (folder / "function-key").write_text("a-key-an-earlier-version-kept\n")
    (folder / "function-key").chmod(0o644)
    (folder / "__azurite_db_table__.json").write_text("{}")
    (folder / "__azurite_db_table__.json").chmod(0o664)
    assert kept_key(folder) == "a-key-an-earlier-version-kept"
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (folder, *folder.rglob("*"))}
    assert modes == {"data": 0o700, "nested": 0o700, "function-key": 0o600, "__azurite_db_table__.json": 0o600}


@pytest.mark.services
def test_azurite_writes_its_files_for_its_owner_alone(tmp_path: Path) -> None:
    location = tmp_path / "data"
    emulator = azurite.start(location=location)
    try:
        write_some_data(emulator.connection_string)
    finally:
        emulator.stop()
    files = [path for path in location.rglob("*") if path.is_file()]
    assert files, "Azurite wrote nothing"
    for path in (location, *location.rglob("*")):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path}: {oct(path.stat().st_mode)}"


def test_only_one_local_host_at_a_time_holds_a_data_folder(tmp_path: Path) -> None:
    first = _lock(tmp_path / "data")
    assert first is not None
    assert _lock(tmp_path / "data") is None
    first.close()
    second = _lock(tmp_path / "data")
    assert second is not None
    second.close()


def test_the_connection_string_names_the_three_endpoints() -> None:
    emulator = azurite.Azurite(10000, 10001, 10002, process=None, location=Path("."))  # type: ignore[arg-type]
    assert emulator.endpoints == {
        "blob": "http://127.0.0.1:10000/devstoreaccount1",
        "queue": "http://127.0.0.1:10001/devstoreaccount1",
        "table": "http://127.0.0.1:10002/devstoreaccount1",
    }
    assert emulator.connection_string == (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={azurite.ACCOUNT_KEY};"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
        "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"
        "TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"
    )
    assert emulator.queue_endpoint_template == "http://127.0.0.1:10001/{account}"


def test_the_kept_data_folder_is_neither_committed_nor_deployed() -> None:
    from devhost.__main__ import AZURITE_DATA, ROOT  # noqa: PLC0415

    assert AZURITE_DATA == ROOT / ".azurite"
    assert ".azurite/" in (ROOT / ".gitignore").read_text().splitlines()
    assert ".azurite" in (ROOT / ".funcignore").read_text().splitlines()


def test_the_local_host_keeps_the_key_it_made_for_the_next_run(tmp_path: Path) -> None:
    from devhost.__main__ import kept_key  # noqa: PLC0415

    first = kept_key(tmp_path / "data")
    assert len(first) >= 40
    assert kept_key(tmp_path / "data") == first  # a restart signs in with the same key
    assert (tmp_path / "data" / "function-key").stat().st_mode & 0o077 == 0
    assert kept_key(tmp_path / "elsewhere") != first
