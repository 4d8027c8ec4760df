"""ARM's template limits and the evaluator's hardening (shared/domain/templates/limits.py,
planning.py, evaluation.py, expressions.py): what a template may cost is refused before it is
spent, every failure is a TemplateError, and no message shows a secure value."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest

from shared.domain.templates import expressions
from shared.domain.templates.deployment import Deployment, TemplateError
from shared.domain.templates.evaluation import scope_of
from shared.domain.templates.expressions import ExpressionError, Scope, parse
from shared.domain.templates.functions import FUNCTIONS
from shared.domain.templates.planning import plan

COLLECTION, JOB = "Microsoft.Scheduler/jobCollections", "Microsoft.Scheduler/jobCollections/jobs"
ACTION = {"type": "Http", "request": {"uri": "https://example.org/", "method": "GET"}}
DEPLOYMENT = Deployment("sub", "rg", "West Europe")


def site(name: str, count: int, *children: dict[str, Any]) -> dict[str, Any]:
    """A resource of another provider (skipped, never applied) copied `count` times."""
    return {"type": "Microsoft.Web/sites", "name": f"[concat('{name}', copyIndex())]",
            "copy": {"name": name, "count": count}, "resources": list(children)}  # fmt: skip


def refused(template: Any, deployment: Deployment = DEPLOYMENT) -> str:
    with pytest.raises(TemplateError) as failed:
        plan(template, deployment)
    return str(failed.value)


# The issue's bomb: a 306-byte body that expanded to 640,000 resources; and three levels.
NESTED_COPIES = [
    ("two-levels", {"resources": [site("outer", 800, site("inner", 800))]},
     "resources[0].resources[0], property 'copy.count': brings the template to 640,800 resources counting "
     "copies (800 copies in each of 800 copies of the resource it is nested in); ARM allows at most 800"),
    ("three-levels", {"resources": [site("a", 800, site("b", 800, site("c", 800)))]},
     "resources[0].resources[0], property 'copy.count': brings the template to 640,800 resources"),
    ("small-loops-multiplied", {"resources": [site("a", 10, site("b", 10, site("c", 10)))]},
     "resources[0].resources[0].resources[0], property 'copy.count': brings the template to 1,110 resources"),
    ("without-copies", {"resources": [{"type": "Microsoft.Web/sites", "name": f"s{n}"} for n in range(801)]},
     "resources[800]: brings the template to 801 resources counting copies; ARM allows at most 800"),
]  # fmt: skip


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("template", "said"), [c[1:] for c in NESTED_COPIES], ids=[c[0] for c in NESTED_COPIES])
def test_resources_are_counted_with_their_copies_multiplied_through_nesting(template: Any, said: str) -> None:
    assert said in refused(template)


def test_a_nested_count_that_grows_with_its_parents_index_is_still_held_to_800() -> None:
    inner = site("inner", 1)
    inner["copy"]["count"] = "[if(equals(copyIndex('outer'), 0), 1, 800)]"  # 1 for the first parent only
    said = refused({"resources": [site("outer", 2, inner)]})
    assert said == "resources[0].resources[0]: makes more than 800 resources counting copies, the most ARM allows"


def test_at_most_800_resources_counting_copies_is_planned() -> None:
    template = {"resources": [site("outer", 20, site("inner", 39))]}  # 20 + 780
    assert len(plan(template, DEPLOYMENT).skipped) == 800


def declaring(section: str, count: int) -> dict[str, Any]:
    values = {"parameters": {"type": "string", "defaultValue": "x"}, "variables": "x", "outputs": {"type": "string", "value": "x"}}
    return {section: {f"n{n}": values[section] for n in range(count)}, "resources": []}  # fmt: skip


@pytest.mark.parametrize(("section", "most"), [("parameters", 256), ("variables", 512), ("outputs", 64)])
def test_parameters_variables_and_outputs_are_limited_as_in_arm(section: str, most: int) -> None:
    plan(declaring(section, most), DEPLOYMENT)
    said = refused(declaring(section, most + 1))
    assert f"the template, property '{section}': declares {most + 1}; ARM allows at most {most}" in said


def test_variables_made_by_copy_loops_count_towards_the_variables_limit() -> None:
    template = declaring("variables", 510)
    template["variables"]["copy"] = [{"name": f"loop{n}", "count": 1, "input": "x"} for n in range(3)]
    assert "declares 513 (counting those made by copy loops)" in refused(template)


def test_a_template_larger_than_4_mb_is_refused() -> None:
    template = {"variables": {f"v{n}": "x" * 1_000_000 for n in range(5)}, "resources": []}
    assert "the template: is 5,000,0" in refused(template)
    assert "ARM allows at most 4,194,304" in refused(template)


def test_a_resource_definition_larger_than_1_mb_is_refused() -> None:
    template = {"resources": [{"type": "Microsoft.Web/sites", "name": "s", "properties": {"x": "y" * 1_100_000}}]}
    assert "resources[0]: is 1,100,0" in refused(template)


def test_definitions_times_their_copies_larger_than_4_mb_are_refused_before_expansion() -> None:
    template = {"resources": [site("s", 600, )]}
    template["resources"][0]["properties"] = {"x": "y" * 10_000}
    assert "resources[0]: brings the template, its copies made, to more than 4,194,304 characters" in refused(template)


def test_a_body_larger_than_1_mb_once_evaluated_is_refused() -> None:
    template = {"variables": {"x": "x" * 20_000, "half": "[concat(" + ", ".join(["variables('x')"] * 30) + ")]"},
                "resources": [{"type": COLLECTION, "name": "jc", "location": "x",
                               "tags": {"a": "[variables('half')]", "b": "[variables('half')]"}}]}  # fmt: skip
    assert "resource 'jc' (Microsoft.Scheduler/jobCollections): is 1,200,0" in refused(template)


def test_an_expression_longer_than_arm_allows_is_refused_before_parsing() -> None:
    text = "concat(" + ", ".join(["'a'"] * 300_000) + ")"  # the issue's 300,000 arguments
    template = {"resources": [{"type": COLLECTION, "name": f"[{text}]", "location": "x"}]}
    assert (f"the template, property 'resources[0].name': is an expression of {len(text):,} characters; "
            "ARM allows at most 24,576") in refused(template)  # fmt: skip
    with pytest.raises(ExpressionError, match="at most 24,576"):
        parse("concat('" + "a" * 24_576 + "')")


def test_the_parser_cache_holds_a_bounded_amount_of_text_however_long_the_expressions() -> None:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(120):  # 120 distinct expressions of 24,000 characters: 2.9 million in all
            parse(f"concat('{n:04d}{'a' * 24_000}')")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1_500_000, f"the cache holds {held:,} bytes"


def test_supplied_values_are_read_once_however_many_calls_look_them_up(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = expressions.parse

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(expressions, "parse", counting)
    supplied = {f"reference('site{n}')": {"v": n} for n in range(300)}
    names = [f"[concat('jc', string(reference('site{n}').v))]" for n in range(0, 300, 10)]
    template = {"resources": [{"type": COLLECTION, "name": name, "location": "x"} for name in names]}
    planned = plan(template, Deployment("sub", "rg", expression_values=supplied))
    assert [r.name for r in planned.resources][:3] == ["jc0", "jc10", "jc20"]
    assert len(parsed) <= len(supplied) + len(names)


def test_a_call_text_that_is_not_an_expression_is_named() -> None:
    said = refused({"resources": []}, Deployment("sub", "rg", expression_values={"reference(": 1}))
    assert said.startswith("expressionValues: a call's text is not an expression")


def raising(error: BaseException) -> Any:
    def function(_scope: Scope, _given: Sequence[Any]) -> Any:
        raise error

    return function


@pytest.mark.parametrize("error", [ValueError("TOPSECRET-PW-42"), MemoryError(), KeyError("x"), StopIteration()],
                         ids=["ValueError", "MemoryError", "KeyError", "StopIteration"])  # fmt: skip
def test_any_python_error_inside_evaluation_is_a_template_error_naming_the_expression(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    monkeypatch.setitem(FUNCTIONS, "boom", raising(error))
    template = {"resources": [{"type": COLLECTION, "name": "jc", "location": "[boom()]"}]}
    said = refused(template)
    assert said == (f"resource 'jc' (Microsoft.Scheduler/jobCollections), property 'location', expression "
                    f"'[boom()]': cannot be evaluated: it fails with {type(error).__name__}")  # fmt: skip


def test_a_python_error_of_the_issue_is_a_template_error() -> None:
    template = {"resources": [{"type": COLLECTION, "name": "jc", "location": "[string(split('abc', ''))]"}]}
    assert "expression '[string(split('abc', ''))]'" in refused(template)


def test_the_same_collection_listed_twice_is_refused_by_name() -> None:
    collection = {"type": COLLECTION, "name": "jc", "location": "x"}
    said = refused({"resources": [collection, dict(collection)]})
    assert said == "resource 'jc' (Microsoft.Scheduler/jobCollections), property 'name': is defined more than once in the template"


def test_dependencies_still_order_resources_after_those_they_name() -> None:
    template = {"resources": [
        {"type": JOB, "name": "jc/b", "dependsOn": ["jc/a"], "properties": {"action": ACTION}},
        {"type": JOB, "name": "jc/a", "dependsOn": ["[resourceId('Microsoft.Scheduler/jobCollections', 'jc')]"], "properties": {"action": ACTION}},
        {"type": JOB, "name": "jc/c", "properties": {"action": ACTION}},
        {"type": COLLECTION, "name": "jc", "location": "x"},
    ]}  # fmt: skip
    assert [r.name for r in plan(template, DEPLOYMENT).resources] == ["jc", "jc/a", "jc/b", "jc/c"]


# The examples of Microsoft's page on variable iteration.
def test_a_variable_made_by_a_copy_loop_is_an_array_of_its_input() -> None:
    template = {
        "parameters": {"itemCount": {"type": "int", "defaultValue": 5}},
        "variables": {
            "copy": [
                {"name": "stringArray", "count": "[parameters('itemCount')]",
                 "input": "[concat('item', copyIndex('stringArray', 1))]"},
                {"name": "objectArray", "count": 2,
                 "input": {"name": "[concat('myDataDisk', copyIndex('objectArray', 1))]", "diskSizeGB": "1",
                           "diskIndex": "[copyIndex('objectArray')]"}},
            ],
            "topLevelObject": {"sampleProperty": "sampleValue", "copy": [
                {"name": "disks", "count": 2, "input": {"diskIndex": "[copyIndex('disks')]"}}]},
        },
        "resources": [{"type": COLLECTION, "name": "[variables('stringArray')[4]]", "location": "x"}],
    }  # fmt: skip
    assert plan(template, DEPLOYMENT).resources[0].name == "item5"
    variables = scope_of(template, DEPLOYMENT).variables
    assert variables["stringArray"] == ["item1", "item2", "item3", "item4", "item5"]
    assert variables["objectArray"] == [{"name": "myDataDisk1", "diskSizeGB": "1", "diskIndex": 0},
                                        {"name": "myDataDisk2", "diskSizeGB": "1", "diskIndex": 1}]  # fmt: skip
    assert variables["topLevelObject"] == {"sampleProperty": "sampleValue", "disks": [{"diskIndex": 0}, {"diskIndex": 1}]}


def test_a_variable_copy_loop_is_limited_as_a_resource_loop() -> None:
    template = {"variables": {"copy": [{"name": "many", "count": 801, "input": "x"}]},
                "resources": [{"type": COLLECTION, "name": "[string(length(variables('many')))]", "location": "x"}]}  # fmt: skip
    assert "variables, property 'many.count': must be a whole number from 0 to 800" in refused(template)


SECRET = "TOPSECRET-PW-42"
SECURE = {"pw": {"type": "securestring", "allowedValues": ["other-secret"]}}


SECRET_CASES = [
    ("allowed-values", {"parameters": SECURE, "resources": [{"type": COLLECTION, "name": "[parameters('pw')]"}]}),
    ("an-index", {"parameters": {"pw": {"type": "securestring"}}, "variables": {"list": [1, 2]},
                  "resources": [{"type": COLLECTION, "name": "[string(variables('list')[parameters('pw')])]"}]}),
    ("a-member", {"parameters": {"pw": {"type": "secureObject"}},
                  "resources": [{"type": COLLECTION, "name": "[string(createObject('a', 1)[parameters('pw').inner])]"}]}),
    ("a-python-error", {"parameters": {"pw": {"type": "securestring"}},
                        "resources": [{"type": COLLECTION, "name": "[boomWith(parameters('pw'))]"}]}),
    ("a-default-value", {"parameters": {"pw": {"type": "securestring", "defaultValue": SECRET, "allowedValues": ["x"]}},
                         "resources": [{"type": COLLECTION, "name": "[parameters('pw')]"}]}),
]  # fmt: skip


@pytest.mark.parametrize("template", [c[1] for c in SECRET_CASES], ids=[c[0] for c in SECRET_CASES])
def test_no_message_shows_a_secure_value(monkeypatch: pytest.MonkeyPatch, template: Any) -> None:
    def boom_with(_scope: Scope, given: Sequence[Any]) -> Any:
        raise ValueError(f"cannot read {given[0]!r}")

    monkeypatch.setitem(FUNCTIONS, "boomwith", boom_with)
    declared = template["parameters"]["pw"]
    value: Any = {"inner": SECRET} if declared["type"] == "secureObject" else SECRET
    given = {} if "defaultValue" in declared else {"pw": {"value": value}}
    said = refused(template, Deployment("sub", "rg", "x", parameters=given))
    assert SECRET not in said and SECRET[:12] not in said


# What one import may cost the host, whatever ARM's limits let through (expressions.Meter).
def test_evaluation_steps_of_one_import_are_bounded() -> None:
    many = "concat(" + ", ".join(["copyIndex('loop')"] * 700) + ")"
    template = {"variables": {"copy": [{"name": "loop", "count": 800, "input": f"[{many}]"}]},
                "resources": [{"type": COLLECTION, "name": "[string(length(variables('loop')))]", "location": "x"}]}  # fmt: skip
    assert "past 500,000 steps of evaluation in all, the most one import may take" in refused(template)


def test_characters_made_by_one_import_are_bounded() -> None:
    template = {"variables": {"big": "b" * 999_000, "copy": [
                    {"name": "loop", "count": 800, "input": "[concat(variables('big'), string(copyIndex('loop')))]"}]},
                "resources": [{"type": COLLECTION, "name": "[string(length(variables('loop')))]", "location": "x"}]}  # fmt: skip
    assert "past 16,000,000 characters or items made in all, the most one import may make" in refused(template)


def test_expression_text_parsed_by_one_import_is_bounded() -> None:
    variables = {f"v{n}": f"[concat('{n:02d}{'t' * 24_000}')]" for n in range(11)}  # 264,000 characters
    template = {"variables": variables,
                "resources": [{"type": COLLECTION, "name": "[string(length(concat(" + ", ".join(
                    f"variables('v{n}')" for n in range(11)) + ")))]", "location": "x"}]}  # fmt: skip
    assert "past 262,144 characters of expressions parsed in all, the most one import may parse" in refused(template)
