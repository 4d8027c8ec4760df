"""The template functions answered by the deployment itself: `parameters`, `variables`,
`resourceGroup`, `subscription`, `deployment`, `resourceId` and `copyIndex`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.domain.templates.expressions import ExpressionError, Scope
from shared.domain.templates.functions_common import arguments, int64, text, whole


def _named(table: Mapping[str, Any], what: str, name: Any) -> Any:
    # By key, then indexed: variables are a lazy mapping that evaluates the one read.
    for key in table:
        if key.casefold() == str(name).casefold():
            return table[key]
    raise ExpressionError(f"reads the {what} '{name}', which the template does not declare")


def parameters(scope: Scope, given: Sequence[Any]) -> Any:
    arguments("parameters", given, 1)
    return _named(scope.parameters, "parameter", given[0])


def variables(scope: Scope, given: Sequence[Any]) -> Any:
    arguments("variables", given, 1)
    return _named(scope.variables, "variable", given[0])


def resource_group(scope: Scope, given: Sequence[Any]) -> Any:
    arguments("resourceGroup", given, 0)
    return dict(scope.resource_group)


def subscription(scope: Scope, given: Sequence[Any]) -> Any:
    arguments("subscription", given, 0)
    return dict(scope.subscription)


def deployment(scope: Scope, given: Sequence[Any]) -> Any:
    arguments("deployment", given, 0)
    return dict(scope.deployment)


def resource_id(scope: Scope, given: Sequence[Any]) -> str:
    """`resourceId([subscriptionId], [resourceGroupName], type, name, ...)`: the type is the
    first argument that has a provider namespace (`Microsoft.X/...`)."""
    texts = [text("resourceId", value) for value in given]
    at = next(
        (i for i, each in enumerate(texts) if "/" in each and "." in each.split("/")[0]), None
    )
    if at is None or at > 2:
        raise ExpressionError(
            "resourceId() needs a resource type such as 'Microsoft.Scheduler/jobCollections'"
        )
    before, kind_of, names = texts[:at], texts[at].strip("/"), texts[at + 1 :]
    namespace, *types = kind_of.split("/")
    names = [part for name in names for part in name.split("/")]
    if len(names) != len(types):
        raise ExpressionError(
            f"resourceId() gives {len(names)} names for '{kind_of}', which needs {len(types)}"
        )
    subscription_id = before[0] if len(before) == 2 else scope.subscription["subscriptionId"]
    group = before[-1] if before else scope.resource_group["name"]
    path = "/".join(f"{kind_}/{name}" for kind_, name in zip(types, names, strict=True))
    return f"/subscriptions/{subscription_id}/resourceGroups/{group}/providers/{namespace}/{path}"


def copy_index(scope: Scope, given: Sequence[Any]) -> int:
    arguments("copyIndex", given, 0, 2)
    loop = next((value for value in given if isinstance(value, str)), None)
    offsets = [value for value in given if not isinstance(value, str)]
    offset = whole("copyIndex", offsets[0]) if offsets else 0
    if loop is None:
        if len(scope.copy_indexes) != 1:
            raise ExpressionError("copyIndex() is used outside a copy loop")
        return int64("copyIndex", next(iter(scope.copy_indexes.values())) + offset)
    index: int = _named(scope.copy_indexes, "copy loop", loop)
    return int64("copyIndex", index + offset)
