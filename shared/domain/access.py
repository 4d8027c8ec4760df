"""Who may do what: callers, their roles and the scopes those roles hold at (pure).

A caller is either the administrator (the function key) or a signed-in principal whose roles
come from two places: app roles in their token, which hold over the whole service, and role
assignments of this service, each held at a subscription or a resource group. An operation
needs an action (ARM's name for it, such as `Microsoft.Scheduler/jobCollections/jobs/write`)
at a scope (the path of the resource it touches); each action has the least role that may
perform it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from shared.domain.ids import PROVIDER


class Role(enum.Enum):
    """The app roles of the service's registration, from least to most."""

    READER = "Scheduler.Reader"
    OPERATOR = "Scheduler.Operator"
    CONTRIBUTOR = "Scheduler.Contributor"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    @classmethod
    def named(cls, name: str) -> Role | None:
        """The role a token or an assignment names (any case), or None for one we do not know."""
        for role in cls:
            if role.value.lower() == name.strip().lower():
                return role
        return None


@dataclass(frozen=True)
class Action:
    """What an operation does, as ARM names it, and the least role that may do it."""

    name: str
    least: Role
    changes: bool  # a write, delete, run, change of state or import: the activity log keeps it


def _action(suffix: str, least: Role, *, changes: bool) -> Action:
    return Action(f"{PROVIDER}/{suffix}", least, changes)


def reads(suffix: str) -> Action:
    return _action(suffix, Role.READER, changes=False)


def operates(suffix: str) -> Action:
    return _action(suffix, Role.OPERATOR, changes=True)


def writes(suffix: str) -> Action:
    return _action(suffix, Role.CONTRIBUTOR, changes=True)


@dataclass(frozen=True)
class Grant:
    """A role held at a scope ("/" for the whole service; else a subscription's or a resource
    group's path, `/subscriptions/{s}[/resourceGroups/{g}]`)."""

    role: Role
    scope: str = "/"

    def covers(self, scope: str) -> bool:
        if self.scope == "/":
            return True
        held, asked = self.scope.rstrip("/").lower(), scope.rstrip("/").lower()
        return asked == held or asked.startswith(held + "/")


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the administrator (the function key) or a signed-in principal."""

    object_id: str  # the principal's object id; "" for the administrator
    name: str  # what logs and the activity log show: a user's name, an app's client id
    client_id: str = ""  # the app (client) the token was issued to, when the token says
    grants: tuple[Grant, ...] = field(default_factory=tuple)
    administrator: bool = False

    def with_grants(self, more: Iterable[Grant]) -> Caller:
        return Caller(
            self.object_id,
            self.name,
            self.client_id,
            (*self.grants, *more),
            self.administrator,
        )

    def may(self, action: Action, scope: str) -> bool:
        """Whether the caller may perform `action` on the resource at `scope`."""
        if self.administrator:
            return True
        return any(
            grant.role.rank >= action.least.rank and grant.covers(scope) for grant in self.grants
        )

    def strongest_role(self, scope: str) -> Role | None:
        """The most a caller may do at `scope` (the console hides what this cannot do)."""
        if self.administrator:
            return Role.CONTRIBUTOR
        held = [grant.role for grant in self.grants if grant.covers(scope)]
        return max(held, key=lambda role: role.rank) if held else None


ADMINISTRATOR = Caller(object_id="", name="function key", administrator=True)


def refusal_message(caller: Caller, action: Action, scope: str) -> str:
    """ARM's words for a caller refused an action (403 AuthorizationFailed)."""
    return (
        f"The client '{caller.name}' with object id '{caller.object_id}' does not have "
        f"authorization to perform action '{action.name}' over scope '{scope}' or the scope is "
        "invalid. If access was recently granted, please refresh your credentials."
    )
