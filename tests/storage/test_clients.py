"""The app's storage clients from identity-based settings, as in Azure, and from a connection
string, as locally.

The identity path runs against a second Azurite with OAuth on, over HTTPS with a trustme CA:
real bearer tokens through the SDKs' own token policy. No Azure identity exists on this machine,
so the token comes from `StubCredential`, a stand-in named as such: it issues the unsigned JWT
that Azurite's basic OAuth mode checks (issuer, audience, lifetime).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import trustme
import urllib3
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from azure.storage.queue import QueueClient, TextBase64DecodePolicy, TextBase64EncodePolicy

from devhost import azurite
from shared.settings import (
    STORAGE,
    STORAGE_CLIENT_ID,
    STORAGE_CREDENTIAL,
    STORAGE_QUEUE_URI,
    STORAGE_TABLE_URI,
    SettingError,
    Settings,
    StorageIdentity,
)  # fmt: skip
from shared.storage.clients import queue_client, storage_credential, table_service
from shared.storage.queue_http import QueueHttp
from shared.storage.storage_http import trusting
from shared.storage.table_store import table_storage

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
STORAGE_SCOPE = "https://storage.azure.com/.default"


class StubCredential:
    """Stand-in for the Function App's managed identity, which cannot exist on this machine."""

    def __init__(self, lifetime_s: int = 3600) -> None:
        self.lifetime_s, self.scopes = lifetime_s, []

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        self.scopes.extend(scopes)
        now = int(time.time())
        claims = {"aud": "https://storage.azure.com", "iss": f"https://sts.windows.net/{TENANT}/",
                  "nbf": now - 600, "iat": now - 600, "exp": now + self.lifetime_s, "oid": "0000-stub", "tid": TENANT}  # fmt: skip
        encoded = [base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
                   for part in ({"alg": "none", "typ": "JWT"}, claims)]  # fmt: skip
        return AccessToken(".".join([*encoded, "unsigned"]), now + self.lifetime_s)


@pytest.fixture(scope="module")
def secure_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[azurite.Azurite, str]]:
    """Azurite over HTTPS with OAuth on; and the CA file that trusts it."""
    folder, ca = tmp_path_factory.mktemp("azurite-tls"), trustme.CA()
    certificate = ca.issue_cert("127.0.0.1")
    certificate.private_key_pem.write_to_path(str(folder / "key.pem"))
    certificate.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    emulator = azurite.start(options=["--oauth", "basic", "--cert", str(folder / "cert.pem"),
                                      "--key", str(folder / "key.pem")])  # fmt: skip
    yield emulator, str(folder / "ca.pem")
    emulator.stop()


def identity_settings(emulator: azurite.Azurite) -> Settings:
    return Settings.from_environment({
        STORAGE_TABLE_URI: f"https://127.0.0.1:{emulator.table_port}/{azurite.ACCOUNT}",
        STORAGE_QUEUE_URI: f"https://127.0.0.1:{emulator.queue_port}/{azurite.ACCOUNT}",
        STORAGE_CREDENTIAL: "managedidentity",
        STORAGE_CLIENT_ID: "11111111-2222-3333-4444-555555555555",
    })  # fmt: skip


def test_identity_settings_win_over_a_connection_string() -> None:
    settings = Settings.from_environment({STORAGE: "UseDevelopmentStorage=true",
                                          STORAGE_TABLE_URI: "https://acct.table.core.windows.net",
                                          STORAGE_QUEUE_URI: "https://acct.queue.core.windows.net",
                                          STORAGE_CREDENTIAL: "ManagedIdentity", STORAGE_CLIENT_ID: "cid"})  # fmt: skip
    assert settings.storage_identity == StorageIdentity("https://acct.table.core.windows.net",
                                                        "https://acct.queue.core.windows.net", "managedidentity", "cid")  # fmt: skip
    assert isinstance(storage_credential(settings.storage_identity), ManagedIdentityCredential)
    assert Settings.from_environment({STORAGE: "UseDevelopmentStorage=true"}).storage_identity is None
    without_kind = StorageIdentity("https://t", "https://q", None, None)
    assert isinstance(storage_credential(without_kind), DefaultAzureCredential)


@pytest.mark.parametrize(
    ("environment", "problem"),
    [
        ({STORAGE_TABLE_URI: "https://acct.table.core.windows.net"}, f"{STORAGE_QUEUE_URI} is needed too"),
        ({STORAGE_QUEUE_URI: "https://acct.queue.core.windows.net"}, f"{STORAGE_TABLE_URI} is needed too"),
        ({STORAGE_TABLE_URI: "https://t", STORAGE_QUEUE_URI: "https://q", STORAGE_CREDENTIAL: "password"},
         f"{STORAGE_CREDENTIAL} must be 'managedidentity' or unset"),
    ],
    ids=["no-queue-uri", "no-table-uri", "unknown-credential"],
)
def test_incomplete_identity_settings_stop_the_app_with_a_clear_reason(environment: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingError, match=problem):
        Settings.from_environment(environment)


def test_no_storage_setting_at_all_is_named() -> None:
    with pytest.raises(SettingError, match="AzureWebJobsStorage"):
        table_service(Settings.from_environment({}))


def test_tables_and_queues_work_with_the_managed_identitys_token(secure_azurite: tuple[azurite.Azurite, str]) -> None:
    emulator, ca_file = secure_azurite
    settings, credential = identity_settings(emulator), StubCredential()
    store = table_storage(table_service(settings, credential, connection_verify=ca_file))
    store.create_tables()  # the app's own tables, created as the identity
    queue = queue_client(settings, "executions", credential, connection_verify=ca_file,
                         message_encode_policy=TextBase64EncodePolicy())  # fmt: skip
    assert isinstance(queue, QueueHttp)  # the app's own queues go over plain HTTP too
    queue.create_queue()
    sent = queue.send_message("attempt", visibility_timeout=0)
    sdk = QueueClient(settings.storage_identity.queue_service_uri, "executions", credential=credential,
                      connection_verify=ca_file, message_decode_policy=TextBase64DecodePolicy())  # fmt: skip
    assert [(m.id, m.content) for m in sdk.peek_messages()] == [(sent.id, "attempt")]
    [received] = list(queue.receive_messages(messages_per_page=32))
    renewed = queue.update_message(received, visibility_timeout=0)
    assert queue.get_queue_properties().approximate_message_count == 1
    queue.delete_message(renewed)
    assert queue.peek_messages() == []
    assert set(credential.scopes) == {STORAGE_SCOPE}


def test_storage_over_tls_loads_its_roots_once_a_process_and_still_checks_them(
    secure_azurite: tuple[azurite.Azurite, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given a bundle's path (`ca_certs`), urllib3 loads it into a new context on every
    connection it opens; the own client hands every pool one context per bundle, the roots
    loaded once (what urllib3 is handed for each connection is recorded). Its checks still
    hold: the default roots (certifi's) do not trust Azurite's CA, and the CA's certificate is
    for 127.0.0.1, not for `localhost`. A refusal in the handshake sends nothing, and says so
    as the SDKs do (ServiceRequestError), a write's included."""
    emulator, ca_file = secure_azurite
    settings, credential = identity_settings(emulator), StubCredential()
    handed: list[tuple[object, object]] = []
    wrap = urllib3.connection._ssl_wrap_socket_and_match_hostname

    def recorded(*args: Any, **options: Any) -> Any:
        handed.append((options["ca_certs"], options["ssl_context"]))
        return wrap(*args, **options)

    monkeypatch.setattr(urllib3.connection, "_ssl_wrap_socket_and_match_hostname", recorded)
    queue = queue_client(settings, "roots", credential, connection_verify=ca_file)
    table_storage(table_service(settings, credential, connection_verify=ca_file)).create_tables()
    queue.create_queue()
    with ThreadPoolExecutor(4) as pool:  # connections opened at once to the queue endpoint
        list(pool.map(lambda _: queue.send_message("attempt"), range(8)))
    assert queue.get_queue_properties().approximate_message_count == 8
    assert len(handed) >= 3  # the tables' connection, and the queues' (at least two)
    assert {ca_certs for ca_certs, _ in handed} == {None}
    assert {id(context) for _, context in handed} == {id(trusting(ca_file))}
    untrusted = queue_client(settings, "roots", credential)  # certifi's roots
    by_name = Settings.from_environment({
        STORAGE_TABLE_URI: f"https://localhost:{emulator.table_port}/{azurite.ACCOUNT}",
        STORAGE_QUEUE_URI: f"https://localhost:{emulator.queue_port}/{azurite.ACCOUNT}",
        STORAGE_CREDENTIAL: "managedidentity",
    })  # fmt: skip
    misnamed = queue_client(by_name, "roots", credential, connection_verify=ca_file)
    for refused, why in ((untrusted, "CERTIFICATE_VERIFY_FAILED"), (misnamed, "localhost")):
        refused._endpoint.sleep = lambda _s: None  # type: ignore[attr-defined]  # no pauses
        with pytest.raises(ServiceRequestError, match=why):  # refused in the handshake: unsent
            refused.peek_messages()
        with pytest.raises(ServiceRequestError, match=why):  # so a write is not "maybe applied"
            refused.send_message("attempt")


def test_the_secure_azurite_refuses_a_token_that_has_expired(secure_azurite: tuple[azurite.Azurite, str]) -> None:
    """So the test above proves the token path, not an emulator that lets anything in."""
    emulator, ca_file = secure_azurite
    expired = StubCredential(lifetime_s=-300)
    queue = queue_client(identity_settings(emulator), "refused", expired, connection_verify=ca_file)
    assert isinstance(queue, QueueHttp)
    with pytest.raises(ClientAuthenticationError, match="The token is expired"):
        queue.create_queue()
    with pytest.raises(ClientAuthenticationError, match="The token is expired"):
        queue.send_message("attempt")


def test_a_connection_string_builds_the_same_clients_for_azurite(storage: str) -> None:
    settings = Settings.from_environment({STORAGE: storage})
    assert settings.storage_identity is None
    table_storage(table_service(settings)).create_tables()
    queue = queue_client(settings, "connection-string-path")
    queue.create_queue()
    queue.send_message("attempt")
    assert [m.content for m in queue.receive_messages()] == ["attempt"]


def test_proxy_settings_count_as_they_were_when_the_clients_were_built(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients read HTTP_PROXY and NO_PROXY once, when built, not on every call."""
    settings = Settings.from_environment({STORAGE: storage})
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    nowhere = f"http://127.0.0.1:{azurite.free_port()}"  # a proxy that is not there
    built_before = queue_client(settings, "proxy-read-once", retry_total=0)

    monkeypatch.setenv("HTTP_PROXY", nowhere)
    built_after = queue_client(settings, "proxy-read-once", retry_total=0)
    with pytest.raises(ServiceRequestError):
        built_after.create_queue()  # through the proxy named when it was built
    built_before.create_queue()  # it was built without one, and stays so

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    exempt = queue_client(settings, "proxy-read-once", retry_total=0)
    exempt.send_message("attempt")  # NO_PROXY counts too


def test_calls_from_many_threads_at_once_keep_their_connections(storage: str, caplog: pytest.LogCaptureFixture) -> None:
    """More calls under way than requests' default pool of 10 connections: none is closed and
    opened again for it."""
    queue = queue_client(Settings.from_environment({STORAGE: storage}), "many-threads")
    queue.create_queue()
    start = threading.Barrier(24)

    def sender(number: int) -> None:
        start.wait(timeout=10)
        for n in range(10):
            queue.send_message(f"{number}-{n}")

    with (
        caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"),
        ThreadPoolExecutor(24) as pool,
    ):
        list(pool.map(sender, range(24)))
    assert queue.get_queue_properties().approximate_message_count == 240
    assert not [record.getMessage() for record in caplog.records if "pool is full" in record.getMessage()]
