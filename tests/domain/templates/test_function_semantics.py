"""The template functions where .NET's semantics differ from Python's, and every bad input a
function can be given: each answered with an ExpressionError that says what is wrong (a 400
InvalidTemplate at the API), never a Python exception, an unbounded integer or a value built
before its size is checked."""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest
import pyuca
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.templates.deployment import Deployment, TemplateError
from shared.domain.templates.expressions import ExpressionError, Scope, parse
from shared.domain.templates.functions import AZURE_ONLY, FUNCTIONS, LAMBDAS
from shared.domain.templates.functions_common import compare
from shared.domain.templates.planning import plan

SCOPE = Scope(functions=FUNCTIONS, parameters={"big": 10**30, "names": ["a", "b"]}, azure_only=AZURE_ONLY)
LARGEST, SMALLEST = 2**63 - 1, -(2**63)


def evaluate(text: str) -> Any:
    return SCOPE.evaluate(parse(text))


DOTNET = [
    ("mod-takes-the-sign-of-the-dividend", "mod(-7, 3)", -1),
    ("mod-by-a-negative", "mod(7, -3)", 1),
    ("div-truncates-toward-zero", "div(-7, 2)", -3),
    ("div-by-a-negative", "div(7, -2)", -3),
    ("largest-integer-literal", f"add({LARGEST}, 0)", LARGEST),
    ("smallest-integer-literal", f"sub({SMALLEST}, 0)", SMALLEST),
    ("string-of-true", "string(true())", "True"),
    ("string-of-false-in-concat", "concat('is ', false())", "is False"),
    ("string-of-nested-booleans-is-json", "string(createArray(true(), 1))", "[true,1]"),
    ("string-keeps-non-ascii", "string(createObject('k', 'é'))", '{"k":"é"}'),
    ("greater-strings-by-culture-not-ordinal", "greater('B', 'a')", True),
    ("less-lower-case-first", "less('a', 'A')", True),
    ("greater-equal-strings", "greaterOrEquals('abc', 'abc')", True),
    ("greater-integers-is-a-boolean", "greater(2, 1)", True),
    ("a-boolean-is-not-a-number-in-arrays", "contains(createArray(1), true())", False),
    ("indexOf-array-is-exact", "indexOf(parameters('names'), 'B')", -1),
    ("indexOf-string-any-case", "indexOf('ABC', 'b')", 1),
    ("toUpper-keeps-the-length", "length(toUpper('straße'))", 6),
    ("format-negative-padded", "format('{0:D3}', -7)", "-007"),
    ("format-hex-of-negative-is-twos-complement", "format('{0:x}', -1)", "ffffffffffffffff"),
    ("format-alignment", "format('[{0,4}][{1,-4}]', 1, 'ab')", "[   1][ab  ]"),
    ("format-N-has-two-decimals-by-default", "format('{0:N}', 1234)", "1,234.00"),
    ("format-text-ignores-a-number-format", "format('{0:N0}', 'text')", "text"),
    ("int-reads-white-space-and-sign", "int(' -42 ')", -42),
    ("split-takes-the-first-delimiter-that-matches", "split('a--b-c', createArray('--', '-'))", ["a", "b", "c"]),
    ("json-reads-single-quotes", "json('{''a'': [1, 2]}').a[1]", 2),
    ("trim-unicode-white-space", "trim('\u00a0 x \u2003')", "x"),
    ("coalesce-all-null", "coalesce(null(), null())", None),
    ("tryGet-missing-is-null", "tryGet(createObject('a', 1), 'b')", None),
    ("tryGet-any-case-then-index", "tryGet(createObject('A', createArray(5, 6)), 'a', 1)", 6),
    ("range-empty", "range(3, 0)", []),
    ("union-arrays-distinct-by-json", "union(createArray(1, true()), createArray(true(), '1'))", [1, True, "1"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), [c[1:] for c in DOTNET], ids=[c[0] for c in DOTNET])
def test_values_follow_dotnet_where_python_differs(text: str, value: Any) -> None:
    result = evaluate(text)
    assert result == value and type(result) is type(value)


BAD_INPUT = [
    ("split-by-empty", "split('abc', '')", "split() needs delimiters that are not empty"),
    ("min-of-nothing", "min(createArray())", "min() needs at least one integer"),
    ("min-of-mixed", "min(createArray(1, 'a'))", "min() compares integers, not a string"),
    ("max-of-no-arguments", "max()", "max() takes at least 1 arguments, not 0"),
    ("join-not-an-array", "join(1, ',')", "join() joins an array, not a number"),
    ("join-no-arguments", "join()", "join() takes 2 arguments, not 0"),
    ("join-nested-array", "join(createArray(createArray(1)), ',')", "join() joins strings, numbers and booleans"),
    ("not-no-arguments", "not()", "not() takes 1 arguments, not 0"),
    ("not-a-string", "not('true')", "not() needs booleans, not a string"),
    ("and-one-argument", "and(true())", "and() takes at least 2 arguments, not 1"),
    ("int-of-400-digits", "int('" + "9" * 400 + "')", "int() reads '999"),
    ("int-of-letters", "int('12a')", "int() cannot read '12a' as a whole number"),
    ("int-with-underscores", "int('1_000')", "int() cannot read '1_000'"),
    ("int-past-64-bits", "int('9223372036854775808')", "outside the 64-bit integer range"),
    ("literal-of-5000-digits", "add(" + "9" * 5000 + ", 1)", "not a whole number in the 64-bit range"),
    ("literal-past-64-bits", "add(9223372036854775808, 0)", "outside the 64-bit integer range"),
    ("add-overflows", f"add({LARGEST}, 1)", "add() gives 9223372036854775808, outside the 64-bit integer range"),
    ("sub-overflows", f"sub({SMALLEST}, 1)", "outside the 64-bit integer range"),
    ("mul-overflows", "mul(mul(999999999, 999999999), 999999999)", "mul() gives 999999997000000002999999999"),
    ("div-overflows", f"div({SMALLEST}, -1)", "div() gives 9223372036854775808"),
    ("mod-by-zero", "mod(1, 0)", "mod() divides by zero"),
    ("a-parameter-past-64-bits", "add(parameters('big'), 1)", "add() gives 1000000000000000000000000000000"),
    ("string-of-a-parameter-past-64-bits", "string(parameters('big'))", "string() gives 1000000000000000000000000000000"),
    ("greater-of-mixed-kinds", "greater(1, 'a')", "greater() compares two integers or two strings, not a number and a string"),
    ("greater-of-booleans", "less(true(), false())", "less() compares two integers or two strings"),
    ("concat-array-and-string", "concat(createArray(1), 'a')", "concat() joins arrays or strings, not both at once"),
    ("replace-empty", "replace('abc', '', 'x')", "replace() needs a string to replace that is not empty"),
    ("padLeft-two-characters", "padLeft('a', 3, 'xy')", "padLeft() pads with one character, not 2"),
    ("substring-past-the-end", "substring('abc', 2, 5)", "substring() must stay within the string"),
    ("format-lone-brace", "format('a } b', 1)", "format() has a '}' that is not part of an item"),
    ("format-unknown-number-format", "format('{0:Q}', 1)", "format() does not know the number format 'Q'"),
    ("format-huge-precision", "format('{0:D99999}', 1)", "format() takes a precision of at most 1000"),
    ("format-huge-alignment", "format('{0,99999999999}', 1)", "format() aligns to at most 1000 characters"),
    ("range-too-long", "range(0, 10001)", "range() makes 0 to 10000 integers, not 10001"),
    ("range-past-int32", "range(2147483647, 2)", "range() must end by 2147483647"),
    ("json-not-json", "json('{a:')", "json() was given text that is not JSON"),
    ("json-integer-past-64-bits", "json('[99999999999999999999]')", "json() gives 99999999999999999999"),
    ("base64ToString-not-base64", "base64ToString('@@')", "base64ToString() was given text that is not base64"),
    ("base64ToJson-not-json", "base64ToJson(base64('nope'))", "base64ToJson() was given text that is not JSON"),
    ("dataUriToString-not-a-data-uri", "dataUriToString('http://x')", "dataUriToString() needs a data URI"),
    ("uri-relative-base", "uri('relative/', 'x')", "uri() needs an absolute base URI"),
    ("dateTimeAdd-bad-duration", "dateTimeAdd('2020-01-01T00:00:00Z', 'one day')", "dateTimeAdd() needs an ISO 8601 duration"),
    ("dateTimeAdd-bad-date", "dateTimeAdd('yesterday', 'P1D')", "dateTimeAdd() needs an ISO 8601 date and time"),
    ("dateTimeAdd-past-year-9999", "dateTimeAdd('9999-12-31T00:00:00Z', 'P2D')", "after 9999"),
    ("dateTimeFromEpoch-past-year-9999", "dateTimeFromEpoch(9223372036854775807)", "after 9999"),
    ("tryGet-wrong-kind", "tryGet('text', 0)", "tryGet() reads an object by a string or an array by an integer"),
    ("items-of-an-array", "items(createArray())", "items() needs an object, not an array"),
    ("empty-of-a-number", "empty(1)", "empty() needs a string, an array or an object, not a number"),
    ("guid-of-nothing", "guid()", "guid() takes at least 1 arguments, not 0"),
    *[(f"lambda-{name}", f"{name}(createArray(1))", f"uses the lambda function '{name}', which is not supported here")
      for name in LAMBDAS],
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_an_expression_error_that_says_what_is_wrong(text: str, said: str) -> None:
    with pytest.raises(ExpressionError) as failed:
        evaluate(text)
    assert said in str(failed.value)


def test_squaring_in_variables_stops_at_the_64_bit_range_instead_of_freezing() -> None:
    # 21 steps of squaring froze the host when integers grew without bound: now step 2 is refused.
    steps = {"v0": 999999999} | {f"v{i}": f"[mul(variables('v{i - 1}'), variables('v{i - 1}'))]" for i in range(1, 22)}
    template = {"variables": steps, "resources": [
        {"type": "Microsoft.Scheduler/jobCollections", "name": "jc", "location": "x", "tags": {"t": "[string(variables('v21'))]"}}]}  # fmt: skip
    with pytest.raises(TemplateError, match="mul\\(\\) gives 999999996000000005999999996000000001, outside the 64-bit"):
        plan(template, Deployment("s", "rg"))


SIZED = [
    ("replace", "replace(variables('big'), 'a', variables('piece'))"),
    ("format", "format(concat(variables('slots'), variables('slots')), variables('piece'))"),
    ("concat", "concat(variables('big'), variables('big'), variables('big'), variables('big'))"),
    ("join", "join(createArray(variables('big'), variables('big'), variables('big'), variables('big')), '')"),
    ("string", "string(createArray(variables('big'), variables('big'), variables('big'), variables('big')))"),
    ("uriComponent", "uriComponent(variables('slashes'))"),
    ("base64", "base64(variables('eight'))"),
    ("dataUri", "dataUri(variables('eight'))"),
    ("union", "union(createArray(variables('big')), createArray(variables('big2')))"),
]  # fmt: skip


@pytest.mark.parametrize("text", [c[1] for c in SIZED], ids=[c[0] for c in SIZED])
def test_results_too_large_are_refused_before_they_are_built(text: str) -> None:
    big = "a" * 700_000
    scope = Scope(functions=FUNCTIONS, variables={"big": big, "big2": "b" * 700_000, "piece": "b" * 5000,
                                                  "slots": "{0}" * 1000,
                                                  "slashes": "/" * 400_000, "eight": "c" * 800_000})  # fmt: skip
    tracemalloc.start()
    try:
        with pytest.raises(ExpressionError, match="more than 1000000"):
            scope.evaluate(parse(text))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"{peak} bytes were taken before the result was refused"


REFERENCE = pyuca.Collator()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aAbBzZ09 -_~.,'éÉñçßœ\u0301\u0327ああ漢l·LŁ\u0e40\u0e01\x00", max_size=8),
       st.text(alphabet="aAbBzZ09 -_~.,'éÉñçßœ\u0301\u0327ああ漢l·LŁ\u0e40\u0e01\x00", max_size=8))  # fmt: skip
def test_strings_order_as_the_unicode_collation_algorithm_orders_them(left: str, right: str) -> None:
    # The linear-time keys agree with pyuca's own (quadratic) sort_key on every pair.
    before, after = REFERENCE.sort_key(left), REFERENCE.sort_key(right)
    expected = (before > after) - (before < after) or (left > right) - (left < right)
    assert compare("greater", left, right) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=8), st.text(alphabet=st.characters(max_codepoint=127), max_size=8))
def test_ascii_strings_order_as_the_unicode_collation_algorithm_orders_them(left: str, right: str) -> None:
    # Two ASCII strings take the fast path (their weights' ranks, a byte each): the same order.
    before, after = REFERENCE.sort_key(left), REFERENCE.sort_key(right)
    assert compare("less", left, right) == ((before > after) - (before < after) or (left > right) - (left < right))


def test_long_ascii_strings_order_at_any_length() -> None:
    scope = Scope(functions=FUNCTIONS, variables={"a": "a" * 900_000, "b": "b" * 900_000})
    assert scope.evaluate(parse("greater(variables('b'), variables('a'))")) is True
    assert scope.evaluate(parse("less(concat(variables('a'), 'b'), concat(variables('a'), 'B'))")) is True


def test_long_text_beyond_ascii_is_refused_rather_than_ordered_slowly() -> None:
    with pytest.raises(ExpressionError, match="greater\\(\\) orders text beyond ASCII of up to 10000 characters, not 10001"):
        evaluate(f"greater('{'é' * 10_001}', 'e')")


def test_comparing_values_that_repeat_one_array_fifty_times_is_refused_not_walked() -> None:
    # Each level holds the one below twice by reference: 2**50 items, built in microseconds.
    doubled = {"d0": [1], "e0": [1]} | {f"{v}{i}": f"[createArray(variables('{v}{i - 1}'), variables('{v}{i - 1}'))]"
                                        for v in "de" for i in range(1, 51)}  # fmt: skip
    for expression in ("equals(variables('d50'), variables('e50'))", "contains(variables('d50'), variables('e49'))",
                       "indexOf(variables('d50'), variables('e49'))", "union(createObject('a', variables('d50')), createObject('a', variables('e50')))"):
        template = {"variables": doubled, "resources": [
            {"type": "Microsoft.Scheduler/jobCollections", "name": "jc", "location": "x", "tags": {"t": f"[{expression}]"}}]}  # fmt: skip
        with pytest.raises(TemplateError, match="would compare more than 100000 items"):
            plan(template, Deployment("s", "rg"))


SAMPLES = [None, True, False, 0, -1, 3, LARGEST, SMALLEST, 2.5, "", "a", "A,b", "{'a': 1}", "2024-02-29T12:00:00Z",
           "P1M", "{0}", "data:,x%zz", "http://h/p", "é", [], [1, "a"], [[1]], {}, {"a": {"b": 1}}, {"A": 1}]  # fmt: skip


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_any_function_with_any_arguments_gives_a_value_or_an_expression_error(name: str) -> None:
    calls = [list(c) for count in range(3) for c in itertools.product(SAMPLES, repeat=count)]
    calls += [list(c) for c in itertools.islice(itertools.product(SAMPLES, repeat=3), 0, None, 11)]
    for arguments in calls:
        try:
            made = FUNCTIONS[name](SCOPE, arguments)
        except ExpressionError:
            continue
        pending = [made]
        while pending:  # whatever is made holds only JSON, and integers in 64 bits
            item = pending.pop()
            assert item is None or isinstance(item, bool | int | float | str | list | dict), arguments
            if isinstance(item, int) and not isinstance(item, bool):
                assert SMALLEST <= item <= LARGEST, arguments
            if isinstance(item, list | dict):
                pending.extend(item.values() if isinstance(item, dict) else item)
