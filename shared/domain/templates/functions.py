"""Every template function by name, in one registry (`FUNCTIONS`), as Microsoft's template
function reference groups them; each page's functions live in a module of their own:
functions_string.py and functions_encoding.py (string), functions_array.py (array, and what
strings and objects share with arrays), functions_comparison.py, functions_logical.py,
functions_numeric.py, functions_object.py, functions_date.py and functions_deployment.py
(the deployment's scope). `if` is evaluated by expressions.Scope, which takes one branch.

Functions whose answer only Azure has (`reference()`, `listKeys()`, `utcNow()`, `newGuid()`)
are answered only with values the caller supplies (`expressions.Scope.supplied`). Lambda
functions (`filter`, `map`, ...) are refused by name: their arguments are expressions to
evaluate per item, which this evaluator does not do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.domain.templates import (
    functions_array,
    functions_comparison,
    functions_date,
    functions_deployment,
    functions_encoding,
    functions_logical,
    functions_numeric,
    functions_object,
    functions_string,
)
from shared.domain.templates.expressions import ExpressionError, Function, Scope
from shared.domain.templates.functions_common import LONGEST_PADDING
from shared.domain.templates.functions_encoding import unique_string

__all__ = ["AZURE_ONLY", "FUNCTIONS", "LAMBDAS", "LONGEST_PADDING", "unique_string"]

# Functions whose answer only Azure has: resources' runtime state, their keys, Key Vault, the
# clock and fresh GUIDs (an import evaluated twice must give the same answer).
AZURE_ONLY = frozenset(
    {"reference", "listkeys", "listsecrets", "list", "listaccountsas", "listservicesas",
     "listconnectionstrings", "pickzones", "providers", "environment", "managementgroup",
     "tenant", "newguid", "utcnow"}
)  # fmt: skip

LAMBDAS = ("filter", "groupBy", "lambda", "lambdaVariables", "map", "mapValues", "reduce",
           "sort", "toObject")  # fmt: skip


def _lambda_refused(name: str) -> Function:
    def refuse(_scope: Scope, _given: Sequence[Any]) -> Any:
        raise ExpressionError(
            f"uses the lambda function '{name}', which is not supported here "
            f"(none of {', '.join(LAMBDAS)} is)"
        )

    return refuse


_BY_PAGE: dict[str, Function] = {
    # Deployment and resource: what the deployment itself answers.
    "parameters": functions_deployment.parameters,
    "variables": functions_deployment.variables,
    "resourceGroup": functions_deployment.resource_group,
    "subscription": functions_deployment.subscription,
    "deployment": functions_deployment.deployment,
    "resourceId": functions_deployment.resource_id,
    "copyIndex": functions_deployment.copy_index,
    # String.
    "base64": functions_encoding.to_base64,
    "base64ToJson": functions_encoding.base64_to_json,
    "base64ToString": functions_encoding.base64_to_string,
    "dataUri": functions_encoding.data_uri,
    "dataUriToString": functions_encoding.data_uri_to_string,
    "endsWith": functions_string.ends_with,
    "format": functions_string.format_,
    "guid": functions_encoding.guid,
    "join": functions_string.join,
    "padLeft": functions_string.pad_left,
    "replace": functions_string.replace,
    "split": functions_string.split,
    "startsWith": functions_string.starts_with,
    "string": functions_string.to_string,
    "substring": functions_string.substring,
    "toLower": functions_string.to_lower,
    "toUpper": functions_string.to_upper,
    "trim": functions_string.trim,
    "uniqueString": functions_encoding.unique_string_of,
    "uri": functions_encoding.uri,
    "uriComponent": functions_encoding.uri_component,
    "uriComponentToString": functions_encoding.uri_component_to_string,
    # Array (strings and objects too, where the pages say so).
    "array": functions_array.to_array,
    "concat": functions_array.concat,
    "contains": functions_array.contains,
    "createArray": functions_array.create_array,
    "empty": functions_array.empty,
    "first": functions_array.first,
    "indexOf": functions_array.index_of,
    "intersection": functions_array.intersection,
    "last": functions_array.last,
    "lastIndexOf": functions_array.last_index_of,
    "length": functions_array.length,
    "range": functions_array.range_of,
    "skip": functions_array.skip,
    "take": functions_array.take,
    "union": functions_array.union,
    # Comparison.
    "coalesce": functions_comparison.coalesce,
    "equals": functions_comparison.equals,
    "greater": functions_comparison.greater,
    "greaterOrEquals": functions_comparison.greater_or_equals,
    "less": functions_comparison.less,
    "lessOrEquals": functions_comparison.less_or_equals,
    # Logical.
    "and": functions_logical.and_,
    "bool": functions_logical.to_bool,
    "false": functions_logical.false,
    "not": functions_logical.not_,
    "or": functions_logical.or_,
    "true": functions_logical.true,
    # Numeric.
    "add": functions_numeric.add,
    "div": functions_numeric.div,
    "float": functions_numeric.to_float,
    "int": functions_numeric.to_int,
    "max": functions_numeric.max_,
    "min": functions_numeric.min_,
    "mod": functions_numeric.mod,
    "mul": functions_numeric.mul,
    "sub": functions_numeric.sub,
    # Object.
    "createObject": functions_object.create_object,
    "items": functions_object.items,
    "json": functions_object.json_value,
    "null": functions_object.null,
    "objectKeys": functions_object.object_keys,
    "shallowMerge": functions_object.shallow_merge,
    "tryGet": functions_object.try_get,
    # Date.
    "dateTimeAdd": functions_date.date_time_add,
    "dateTimeFromEpoch": functions_date.date_time_from_epoch,
    "dateTimeToEpoch": functions_date.date_time_to_epoch,
} | {name: _lambda_refused(name) for name in LAMBDAS}

# Looked up by the name folded to lower case: ARM's function names match in any case.
FUNCTIONS: dict[str, Function] = {name.casefold(): function for name, function in _BY_PAGE.items()}
SUPPORTED = tuple(sorted(name for name in _BY_PAGE if name not in LAMBDAS))
