"""The official client, azure-mgmt-scheduler, unchanged, signed in with a token credential.

Nothing but its endpoint and its credential is set: no function key, no headers policy. The
credential here hands out tokens of the local host's issuer (`python -m devhost.identity`), as
DefaultAzureCredential hands out Entra ID tokens in Azure. The local host serves plain http, and
the SDK's bearer policy sends tokens only over https unless a call says `enforce_https=False`:
that is the one thing a call adds here, and nothing in Azure, which serves https.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.mgmt.scheduler import SchedulerManagementClient, models

from devhost.identity import mint
from tests.conftest import Service, identity_folder_of

SUBSCRIPTION = "sdk-token-subscription"
GROUP = "sdk-token-rg"
LOCAL = {"enforce_https": False}


class LocalIssuerCredential:
    """A TokenCredential whose tokens the local host accepts, for one person with some roles."""

    def __init__(self, service: Service, name: str, *roles: str) -> None:
        self.service, self.name, self.roles = service, name, roles
        self.scopes_asked: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes_asked.append(scopes)
        token = mint(identity_folder_of(self.service.log), self.name, self.roles, now=datetime.now(UTC))
        return AccessToken(token, int(time.time()) + 3600)


def client_for(service: Service, credential: LocalIssuerCredential) -> SchedulerManagementClient:
    return SchedulerManagementClient(credential=credential, subscription_id=SUBSCRIPTION, base_url=service.base_url)


@pytest.fixture(scope="module")
def contributor(service: Service) -> Iterator[tuple[SchedulerManagementClient, LocalIssuerCredential]]:
    credential = LocalIssuerCredential(service, "sdk-ann", "Scheduler.Contributor")
    with client_for(service, credential) as client:
        yield client, credential


def test_a_contributor_creates_and_reads_with_a_token_alone(contributor: tuple[SchedulerManagementClient, LocalIssuerCredential]) -> None:
    client, credential = contributor
    name = f"tok-{uuid.uuid4().hex[:8]}"
    created = client.job_collections.create_or_update(
        GROUP, name,
        models.JobCollectionDefinition(location="westeurope", properties=models.JobCollectionProperties(
            sku=models.Sku(name=models.SkuDefinition.STANDARD))),
        **LOCAL,
    )  # fmt: skip
    assert created.name == name
    assert name in [each.name for each in client.job_collections.list_by_resource_group(GROUP, **LOCAL)]
    assert credential.scopes_asked  # the SDK asked its credential, as it asks DefaultAzureCredential
    assert credential.scopes_asked[0] == ("https://management.azure.com/.default",)


def test_a_reader_reads_but_is_refused_a_write_with_arms_error(service: Service) -> None:
    credential = LocalIssuerCredential(service, "sdk-rita", "Scheduler.Reader")
    with client_for(service, credential) as client:
        list(client.job_collections.list_by_subscription(**LOCAL))
        with pytest.raises(HttpResponseError) as refused:
            client.job_collections.patch(GROUP, "anything", models.JobCollectionDefinition(tags={"a": "b"}), **LOCAL)
    assert refused.value.status_code == 403
    assert refused.value.error is not None and refused.value.error.code == "AuthorizationFailed"
    assert "does not have authorization to perform action 'Microsoft.Scheduler/jobCollections/write'" in str(refused.value)


def test_the_scope_the_docs_give_is_the_one_the_credential_is_asked_for(service: Service) -> None:
    # In Azure the platform accepts tokens for the service's own registration, not for Azure
    # Resource Manager: docs/calling-the-api.md passes credential_scopes, which reaches the credential.
    credential = LocalIssuerCredential(service, "sdk-sam", "Scheduler.Reader")
    scope = "api://00000000-0000-0000-0000-0000000c11e7/.default"
    with SchedulerManagementClient(credential=credential, subscription_id=SUBSCRIPTION, base_url=service.base_url,
                                   credential_scopes=[scope]) as client:  # fmt: skip
        list(client.job_collections.list_by_subscription(**LOCAL))
    assert credential.scopes_asked == [(scope,)]
