"""Resource ids, types and names in the ARM shape, and the rules a name must follow.

Names are case-insensitive and keep the case they were created with, as in ARM: lookups use the
folded name, responses the stored one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.domain.problems import FieldError, InvalidRequest

PROVIDER = "Microsoft.Scheduler"
COLLECTION_TYPE = f"{PROVIDER}/jobCollections"
JOB_TYPE = f"{COLLECTION_TYPE}/jobs"
HISTORY_TYPE = f"{JOB_TYPE}/history"

# ARM's own rules: resource groups allow letters, digits, '_', '-', '.', '(' and ')', up to 90;
# the Scheduler's names letters, digits, '-' and '_', up to 100. The patterns are public for the
# OpenAPI document; they are written in the part of regex syntax that Python and JSON Schema
# (ECMA-262) share, and match a whole name only when anchored (`fullmatch`, or `^...$`).
SUBSCRIPTION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
RESOURCE_GROUP_PATTERN = r"[A-Za-z0-9_().-]{0,89}[A-Za-z0-9_()-]"
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}"
_SUBSCRIPTION = re.compile(SUBSCRIPTION_PATTERN)
_RESOURCE_GROUP = re.compile(RESOURCE_GROUP_PATTERN)
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class CollectionId:
    subscription: str
    resource_group: str
    name: str

    @classmethod
    def of(cls, subscription: str, resource_group: str, name: str) -> CollectionId:
        """The id from a request's route, or InvalidRequest naming every part that is malformed."""
        problems = [
            *_name_problems("subscriptionId", subscription, _SUBSCRIPTION),
            *_name_problems("resourceGroupName", resource_group, _RESOURCE_GROUP),
            *_name_problems("jobCollectionName", name, _NAME),
        ]
        if problems:
            raise InvalidRequest(problems)
        return cls(subscription, resource_group, name)

    @property
    def arm_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
            f"/providers/{COLLECTION_TYPE}/{self.name}"
        )

    @property
    def cloud_service(self) -> CloudServiceId:
        """The cloud service it is in, for the classic API: its resource group."""
        return CloudServiceId(self.subscription, self.resource_group)


@dataclass(frozen=True)
class CloudServiceId:
    """A cloud service of the classic API: in the ARM view, the resource group of that name."""

    subscription: str
    name: str

    @classmethod
    def of(cls, subscription: str, name: str) -> CloudServiceId:
        problems = [
            *_name_problems("subscriptionId", subscription, _SUBSCRIPTION),
            *_name_problems("cloudServiceName", name, _RESOURCE_GROUP),
        ]
        if problems:
            raise InvalidRequest(problems)
        return cls(subscription, name)

    def collection(self, name: str) -> CollectionId:
        """One of its job collections, or InvalidRequest if `name` is malformed."""
        return CollectionId(self.subscription, self.name, _valid("jobCollectionName", name, _NAME))

    @property
    def arm_id(self) -> str:
        """The resource group it is in the ARM view."""
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.name}"


@dataclass(frozen=True)
class JobId:
    collection: CollectionId
    name: str

    @classmethod
    def of(cls, collection: CollectionId, name: str) -> JobId:
        return cls(collection, _valid("jobName", name, _NAME))

    @property
    def arm_id(self) -> str:
        return f"{self.collection.arm_id}/jobs/{self.name}"

    @property
    def arm_name(self) -> str:
        """ARM names a child resource by its path below the provider: `collection/job`."""
        return f"{self.collection.name}/{self.name}"


def valid_subscription(subscription: str) -> str:
    return _valid("subscriptionId", subscription, _SUBSCRIPTION)


def valid_resource_group(resource_group: str) -> str:
    return _valid("resourceGroupName", resource_group, _RESOURCE_GROUP)


def _valid(field: str, value: str, rule: re.Pattern[str]) -> str:
    """`value` if it follows `rule`, else InvalidRequest naming `field`."""
    problems = _name_problems(field, value, rule)
    if problems:
        raise InvalidRequest(problems)
    return value


def _name_problems(field: str, value: str, rule: re.Pattern[str]) -> list[FieldError]:
    if rule.fullmatch(value):
        return []
    shown = value if len(value) <= 60 else value[:57] + "..."
    return [FieldError(field, f"'{shown}' is not a valid name: {_RULE_WORDS[rule]}")]


_RULE_WORDS = {
    _SUBSCRIPTION: "1 to 64 letters, digits, '-' and '_', starting with a letter or digit",
    _RESOURCE_GROUP: "1 to 90 letters, digits, '_', '-', '.', '(' and ')', not ending in '.'",
    _NAME: "1 to 100 letters, digits, '-' and '_', starting with a letter or digit",
}
