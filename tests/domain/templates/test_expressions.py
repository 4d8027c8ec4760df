"""The template expression language (shared/domain/templates): each function as ARM evaluates it."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.templates.deployment import Deployment, TemplateError
from shared.domain.templates.expressions import ExpressionError, Scope, escaped, parse, unescaped
from shared.domain.templates.functions import AZURE_ONLY, FUNCTIONS, unique_string
from shared.domain.templates.planning import plan

SCOPE = Scope(
    functions=FUNCTIONS,
    parameters={"site": "contoso", "count": 3, "tags": {"team": "ops"}, "names": ["a", "b"]},
    variables={"suffix": "-jobs"},
    resource_group={"id": "/subscriptions/s/resourceGroups/rg", "name": "rg", "location": "West Europe"},
    subscription={"id": "/subscriptions/s", "subscriptionId": "s"},
    copy_indexes={"jobs": 2},
    supplied={"reference('site')": {"hostNames": ["h1", "h2"]}},
    azure_only=AZURE_ONLY,
)

EVALUATED = [
    ("concat", "concat('http://', parameters('site'), variables('suffix'))", "http://contoso-jobs"),
    ("concat-arrays", "concat(parameters('names'), createArray('c'))", ["a", "b", "c"]),
    ("format", "format('{0}-{1:D3}-{{x}}', parameters('site'), 7)", "contoso-007-{x}"),
    ("resource-group", "resourceGroup().location", "West Europe"),
    ("subscription", "subscription().subscriptionId", "s"),
    ("resource-id", "resourceId('Microsoft.Scheduler/jobCollections/jobs', 'jc', 'j')",
     "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc/jobs/j"),
    ("resource-id-trailing-slash", "resourceId('Microsoft.Scheduler/jobCollections/', 'jc')",
     "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc"),
    ("resource-id-other-group", "resourceId('other', 'Microsoft.Web/sites', 'w')",
     "/subscriptions/s/resourceGroups/other/providers/Microsoft.Web/sites/w"),
    ("unique-string", "uniqueString(resourceGroup().id)", unique_string("/subscriptions/s/resourceGroups/rg")),
    ("if-true", "if(equals(parameters('count'), 3), 'three', reference('nowhere'))", "three"),
    ("if-false", "if(not(true()), 1, 2)", 2),
    ("copy-index", "copyIndex(1)", 3),
    ("copy-index-named", "copyIndex('jobs')", 2),
    ("case-insensitive-names", "CONCAT(Parameters('SITE'))", "contoso"),
    ("member-and-index", "reference('site').hostNames[1]", "h2"),
    ("supplied-matches-whatever-the-spacing", "reference( 'site' ).hostNames[0]", "h1"),
    ("object-member", "parameters('tags').team", "ops"),
    ("string-functions", "toUpper(substring(replace(trim('  a-b  '), '-', '+'), 1, 2))", "+B"),
    ("split-and-join", "join(split('a,b;c', createArray(',', ';')), '|')", "a|b|c"),
    ("conversions", "concat(string(int('4')), string(bool('true')), string(json('{\"a\":1}')))", "4True{\"a\":1}"),
    ("length-and-contains", "and(contains(parameters('names'), 'a'), equals(length('abc'), 3))", True),
    ("arithmetic", "add(mul(2, 3), mod(7, 4))", 9),
    ("escaped-quote", "concat('it''s')", "it's"),
    ("pad-left", "padLeft(string(7), 3, '0')", "007"),
    ("coalesce-and-empty", "coalesce(null(), 'x')", "x"),
    ("base64", "base64ToString(base64('hi'))", "hi"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), [case[1:] for case in EVALUATED], ids=[c[0] for c in EVALUATED])
def test_each_function_evaluates_as_arm_does(text: str, value: Any) -> None:
    assert SCOPE.evaluate(parse(text)) == value


# Values of ARM's uniqueString() for these arguments.
@pytest.mark.parametrize(("arguments", "expected"), [
    (("test",), "rbgf3xv4ufgzg"),
    (("hello", "world"), "a7wkljktk6wne"),
    (("abc",), "cgtzqvhu4i23s"),
    (("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/my-rg",), "bmg7c6xu4tw46"),
    (("foo", "bar", "baz"), "xzi4ioaxtmth4"),
])  # fmt: skip
def test_unique_string_gives_the_values_azure_gives(arguments: tuple[str, ...], expected: str) -> None:
    assert unique_string(*arguments) == expected


FAILING = [
    ("unknown-function", "frobnicate(1)", "uses the function 'frobnicate', which is not supported here"),
    ("needs-azure", "listKeys('rule', '2018-01-01').primaryKey",
     "needs Azure to answer listKeys('rule', '2018-01-01'): give its value in expressionValues"),
    ("unknown-parameter", "parameters('nope')", "reads the parameter 'nope', which the template does not declare"),
    ("missing-member", "parameters('tags').owner", "reads 'owner', which the object does not have"),
    ("index-past-the-end", "parameters('names')[5]", "reads item 5 of an array of 2"),
    ("if-not-boolean", "if('yes', 1, 2)", "if() needs a boolean condition, not a string"),
    ("format-slot-missing", "format('{1}', 'a')", "format() has no value for {1}"),
    ("a-value-too-large", "padLeft('a', 100000)", "padLeft() pads to at most 1000 characters"),
    ("bad-syntax", "concat('a',", "is not a valid expression"),
    ("division-by-zero", "div(1, 0)", "div() divides by zero"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), [case[1:] for case in FAILING], ids=[c[0] for c in FAILING])
def test_what_cannot_be_evaluated_says_why(text: str, said: str) -> None:
    with pytest.raises(ExpressionError) as failed:
        SCOPE.evaluate(parse(text))
    assert said in str(failed.value)


def test_literal_brackets_are_escaped_and_read_back_as_themselves() -> None:
    for text in ("[1, 2]", "[[x]", "[not an expression", "plain"):
        assert unescaped(escaped(text)) == text


def test_variables_read_each_other_in_any_order_but_never_themselves() -> None:
    template = {
        "variables": {"b": "[concat(variables('a'), 'b')]", "a": "a", "loop": "[variables('loop')]"},
        "resources": [{"type": "Microsoft.Scheduler/jobCollections", "name": "[variables('b')]", "location": "x"}],
    }
    assert plan(template, Deployment("s", "rg")).resources[0].name == "ab"
    template["resources"][0]["name"] = "[variables('loop')]"
    with pytest.raises(TemplateError, match="'loop' reads itself"):
        plan(template, Deployment("s", "rg"))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.sampled_from(["[concat('a', 'b')]", "[parameters('p')]", "[copyIndex()]", "Microsoft.Scheduler/jobCollections",
                       "jobs", "[reference('x')]", "[[x]", "[variables('v')]"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "name", "resources", "properties", "location", "dependsOn", "copy", "count",
                         "condition", "parameters", "variables", "defaultValue", "value", "p", "v"]), inner, max_size=5),
    max_leaves=30,
)  # fmt: skip


@given(template=JSON, parameters=st.dictionaries(st.sampled_from(["p", "q"]), JSON, max_size=2))
def test_any_json_is_planned_or_refused_with_a_template_error_never_anything_else(template: Any, parameters: Any) -> None:
    with contextlib.suppress(TemplateError):
        plan(template, Deployment("s", "rg", "West Europe", parameters=parameters))
