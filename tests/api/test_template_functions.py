"""The template functions end to end, through `importTemplate` as a client calls it: each page's
documented examples written into a collection's tags (with string(), as tags are text) by a
what-if and then by an import, read back with GET; and each bad input the attack run found a
400 InvalidTemplate that names the expression, where it was a 500 or froze the host."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.api.test_templates import import_into, new_group, provider
from tests.domain.templates.test_function_pages import PAGES, _type_of


def as_text(value: Any) -> str:
    """A value as ARM's string() writes it, for comparing with a tag."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def page_template(page: str) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """One collection per documented example of the page, its outputs as tags; and the tags
    each collection should end with."""
    parameters: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    resources, expected = [], {}
    for example, example_parameters, example_variables, outputs in PAGES[page]:
        name = re.sub(r"[^A-Za-z0-9-]", "-", f"{page}-{example}")[:60]
        prefix = name.replace("-", "_") + "_"
        renamed = {key: prefix + key for key in [*example_parameters, *example_variables]}

        def local(expression: str) -> str:
            return re.sub(r"(parameters|variables)\('(\w+)'\)",
                          lambda m: f"{m[1]}('{renamed.get(m[2], m[2])}')", expression)  # noqa: B023 (used at once)

        for key, value in example_parameters.items():
            parameters[renamed[key]] = {"type": _type_of(value), "defaultValue": value}
        for key, value in example_variables.items():
            variables[renamed[key]] = json.loads(local(json.dumps(value)))
        tags = {output: f"[string({local(expression)[1:-1]})]" for output, (expression, _) in outputs.items()}
        resources.append({"type": "Microsoft.Scheduler/jobCollections", "apiVersion": "2016-03-01",
                          "name": name, "location": "West Europe", "tags": tags})
        expected[name] = {output: as_text(value) for output, (_, value) in outputs.items()}
    return {"parameters": parameters, "variables": variables, "resources": resources}, expected


@pytest.mark.parametrize("page", list(PAGES))
def test_each_pages_documented_examples_through_what_if_and_import(api: httpx.Client, page: str) -> None:
    group = new_group()
    template, expected = page_template(page)
    what_if = import_into(api, group, template=template, whatIf=True)
    assert what_if.status_code == 200, what_if.text
    assert {each["name"]: each["outcome"] for each in what_if.json()["resources"]} == dict.fromkeys(expected, "Created")
    applied = import_into(api, group, template=template)
    assert applied.status_code == 200, applied.text
    listed = api.get(f"{provider(group)}/jobCollections").json()["value"]
    assert {collection["name"]: collection["tags"] for collection in listed} == expected


def a_collection_tagged(expression: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"variables": variables or {}, "resources": [
        {"type": "Microsoft.Scheduler/jobCollections", "name": "jc", "location": "West Europe",
         "tags": {"value": f"[{expression}]"}}]}  # fmt: skip


SQUARES = {"v0": 999999999} | {f"v{i}": f"[mul(variables('v{i - 1}'), variables('v{i - 1}'))]" for i in range(1, 22)}
FOUND = [
    ("squaring-21-times", "string(variables('v21'))", SQUARES, "outside the 64-bit integer range"),
    ("replace-into-a-billion-characters", "replace(variables('million'), 'a', variables('thousand'))",
     {"million": "[replace(padLeft('', 1000, 'a'), 'a', padLeft('', 1000, 'a'))]", "thousand": "[padLeft('', 1000, 'b')]"},
     "more than 1000000"),
    ("split-by-empty", "string(split('abc', ''))", None, "split() needs delimiters that are not empty"),
    ("min-of-nothing", "string(min(createArray()))", None, "min() needs at least one integer"),
    ("min-of-mixed", "string(min(createArray(1, 'a')))", None, "min() compares integers, not a string"),
    ("join-of-a-number", "join(1, ',')", None, "join() joins an array, not a number"),
    ("join-of-nothing", "join()", None, "join() takes 2 arguments, not 0"),
    ("not-of-nothing", "string(not())", None, "not() takes 1 arguments, not 0"),
    ("int-of-400-digits", "string(int('" + "9" * 400 + "'))", None, "not a whole number in the 64-bit range"),
    ("a-5000-digit-number", "string(" + "9" * 5000 + ")", None, "not a whole number in the 64-bit range"),
    ("string-of-a-huge-product", "string(mul(mul(999999999, 999999999), 999999999))", None, "mul() gives 999999997000000002999999999"),
    ("lambda", "string(filter(createArray(1), lambda('x', true())))", None, "uses the lambda function 'lambda'"),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "variables", "said"), [c[1:] for c in FOUND], ids=[c[0] for c in FOUND])
def test_bad_input_is_a_400_naming_the_expression(api: httpx.Client, expression: str, variables: Any, said: str) -> None:
    answer = import_into(api, new_group(), template=a_collection_tagged(expression, variables), whatIf=True)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "InvalidTemplate"
    assert said in error["message"]
