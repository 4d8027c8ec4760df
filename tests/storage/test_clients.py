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
import time
from collections.abc import Iterator

import pytest
import trustme
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

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
from shared.storage.store import Store

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
    store = Store(table_service(settings, credential, connection_verify=ca_file))
    store.create_tables()  # the app's own tables, created as the identity
    queue = queue_client(settings, "executions", credential, connection_verify=ca_file)
    queue.create_queue()
    queue.send_message("attempt")
    assert [m.content for m in queue.receive_messages()] == ["attempt"]
    assert set(credential.scopes) == {STORAGE_SCOPE}


def test_the_secure_azurite_refuses_a_token_that_has_expired(secure_azurite: tuple[azurite.Azurite, str]) -> None:
    """So the test above proves the token path, not an emulator that lets anything in."""
    emulator, ca_file = secure_azurite
    expired = StubCredential(lifetime_s=-300)
    queue = queue_client(identity_settings(emulator), "refused", expired, connection_verify=ca_file)
    with pytest.raises(ClientAuthenticationError, match="The token is expired"):
        queue.create_queue()


def test_a_connection_string_builds_the_same_clients_for_azurite(storage: str) -> None:
    settings = Settings.from_environment({STORAGE: storage})
    assert settings.storage_identity is None
    Store(table_service(settings)).create_tables()
    queue = queue_client(settings, "connection-string-path")
    queue.create_queue()
    queue.send_message("attempt")
    assert [m.content for m in queue.receive_messages()] == ["attempt"]
