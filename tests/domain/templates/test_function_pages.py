"""Microsoft's documented examples of the template functions, page by page (string, array,
comparison, logical, numeric, object, date): each example's parameters, variables and output
expressions, with the value its "Name | Type | Value" table gives, evaluated the way an import
evaluates a template (planning.plan), as a collection's tags."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shared.domain.templates.deployment import Deployment
from shared.domain.templates.planning import plan


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def outputs_of(expressions: dict[str, str], parameters: dict[str, Any] | None = None,
               variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """The values of `expressions` (by output name) in a template with these parameters (given
    as their defaults) and variables: planned as an import plans it, read from the tags."""
    template = {
        "parameters": {name: {"type": _type_of(value), "defaultValue": value}
                       for name, value in (parameters or {}).items()},
        "variables": variables or {},
        "resources": [{"type": "Microsoft.Scheduler/jobCollections", "apiVersion": "2016-03-01",
                       "name": "jc", "location": "West Europe", "tags": expressions}],
    }
    planned = plan(template, Deployment("00000000-0000-0000-0000-000000000000", "examples"))
    tags: dict[str, Any] = planned.resources[0].body["tags"]
    return tags


# Each page: (example id, parameters, variables, {output: (expression, documented value)}).
STRING = [
    ("base64", {"stringData": "one, two, three", "jsonFormattedData": "{'one': 'a', 'two': 'b'}"},
     {"base64String": "[base64(parameters('stringData'))]", "base64Object": "[base64(parameters('jsonFormattedData'))]"},
     {"base64Output": ("[variables('base64String')]", "b25lLCB0d28sIHRocmVl"),
      "toStringOutput": ("[base64ToString(variables('base64String'))]", "one, two, three"),
      "toJsonOutput": ("[base64ToJson(variables('base64Object'))]", {"one": "a", "two": "b"})}),
    ("dataUri", {"stringToTest": "Hello", "dataFormattedString": "data:;base64,SGVsbG8sIFdvcmxkIQ=="}, {},
     {"dataUriOutput": ("[dataUri(parameters('stringToTest'))]", "data:text/plain;charset=utf8;base64,SGVsbG8="),
      "toStringOutput": ("[dataUriToString(parameters('dataFormattedString'))]", "Hello, World!")}),
    ("startsWith-endsWith", {}, {},
     {"startsTrue": ("[startsWith('abcdef', 'ab')]", True), "startsCapTrue": ("[startsWith('abcdef', 'A')]", True),
      "startsFalse": ("[startsWith('abcdef', 'e')]", False), "endsTrue": ("[endsWith('abcdef', 'ef')]", True),
      "endsCapTrue": ("[endsWith('abcdef', 'F')]", True), "endsFalse": ("[endsWith('abcdef', 'e')]", False)}),
    ("format", {"greeting": "Hello", "name": "User", "numberToFormat": 8175133}, {},
     {"formatTest": ("[format('{0}, {1}. Formatted number: {2:N0}', parameters('greeting'), parameters('name'), parameters('numberToFormat'))]",
                     "Hello, User. Formatted number: 8,175,133")}),
    ("indexOf-lastIndexOf", {}, {},
     {"firstT": ("[indexOf('test', 't')]", 0), "lastT": ("[lastIndexOf('test', 't')]", 3),
      "firstString": ("[indexOf('abcdef', 'CD')]", 2), "lastString": ("[lastIndexOf('abcdef', 'AB')]", 0),
      "notFound": ("[indexOf('abcdef', 'z')]", -1)}),
    ("join", {}, {"arrayString": ["one", "two", "three"]},
     {"firstOutput": ("[join(variables('arrayString'), ',')]", "one,two,three"),
      "secondOutput": ("[join(variables('arrayString'), ';')]", "one;two;three")}),
    ("padLeft", {"testString": "123"}, {}, {"stringOutput": ("[padLeft(parameters('testString'),10,'0')]", "0000000123")}),
    ("replace", {"testString": "123-123-1234"}, {},
     {"firstOutput": ("[replace(parameters('testString'),'-', '')]", "1231231234"),
      "secondOutput": ("[replace(parameters('testString'),'1234', 'xxxx')]", "123-123-xxxx")}),
    ("split", {"firstString": "one,two,three", "secondString": "one;two,three"}, {"delimiters": [",", ";"]},
     {"firstOutput": ("[split(parameters('firstString'),',')]", ["one", "two", "three"]),
      "secondOutput": ("[split(parameters('secondString'),variables('delimiters'))]", ["one", "two", "three"])}),
    ("string", {"testObject": {"valueA": 10, "valueB": "Example Text"}, "testArray": ["a", "b", "c"], "testInt": 5}, {},
     {"objectOutput": ("[string(parameters('testObject'))]", '{"valueA":10,"valueB":"Example Text"}'),
      "arrayOutput": ("[string(parameters('testArray'))]", '["a","b","c"]'),
      "intOutput": ("[string(parameters('testInt'))]", "5")}),
    ("substring", {"testString": "one two three"}, {}, {"substringOutput": ("[substring(parameters('testString'), 4, 3)]", "two")}),
    ("toLower-toUpper", {"testString": "One Two Three"}, {},
     {"toLowerOutput": ("[toLower(parameters('testString'))]", "one two three"),
      "toUpperOutput": ("[toUpper(parameters('testString'))]", "ONE TWO THREE")}),
    ("trim", {"testString": "    one two three   "}, {}, {"return": ("[trim(parameters('testString'))]", "one two three")}),
    ("uri", {}, {"uriFormat": "[uri('http://contoso.com/resources/', 'nested/azuredeploy.json')]",
                 "uriEncoded": "[uriComponent(variables('uriFormat'))]"},
     {"uriOutput": ("[variables('uriFormat')]", "http://contoso.com/resources/nested/azuredeploy.json"),
      "componentOutput": ("[variables('uriEncoded')]", "http%3A%2F%2Fcontoso.com%2Fresources%2Fnested%2Fazuredeploy.json"),
      "toStringOutput": ("[uriComponentToString(variables('uriEncoded'))]", "http://contoso.com/resources/nested/azuredeploy.json")}),
]  # fmt: skip

ARRAY = [
    ("array", {"intToConvert": 1, "stringToConvert": "efgh", "objectToConvert": {"a": "b", "c": "d"}}, {},
     {"intOutput": ("[array(parameters('intToConvert'))]", [1]),
      "stringOutput": ("[array(parameters('stringToConvert'))]", ["efgh"]),
      "objectOutput": ("[array(parameters('objectToConvert'))]", [{"a": "b", "c": "d"}])}),
    ("concat", {"firstArray": ["1-1", "1-2", "1-3"], "secondArray": ["2-1", "2-2", "2-3"]}, {},
     {"return": ("[concat(parameters('firstArray'), parameters('secondArray'))]", ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"])}),
    ("contains", {"stringToTest": "OneTwoThree", "objectToTest": {"one": "a", "two": "b", "three": "c"},
                  "arrayToTest": ["one", "two", "three"]}, {},
     {"stringTrue": ("[contains(parameters('stringToTest'), 'e')]", True),
      "stringFalse": ("[contains(parameters('stringToTest'), 'z')]", False),
      "objectTrue": ("[contains(parameters('objectToTest'), 'one')]", True),
      "objectFalse": ("[contains(parameters('objectToTest'), 'a')]", False),
      "arrayTrue": ("[contains(parameters('arrayToTest'), 'three')]", True),
      "arrayFalse": ("[contains(parameters('arrayToTest'), 'four')]", False)}),
    ("createArray", {"objectToTest": {"one": "a", "two": "b", "three": "c"}, "arrayToTest": ["one", "two", "three"]}, {},
     {"stringArray": ("[createArray('a', 'b', 'c')]", ["a", "b", "c"]), "intArray": ("[createArray(1, 2, 3)]", [1, 2, 3]),
      "objectArray": ("[createArray(parameters('objectToTest'))]", [{"one": "a", "two": "b", "three": "c"}]),
      "arrayArray": ("[createArray(parameters('arrayToTest'))]", [["one", "two", "three"]]),
      "emptyArray": ("[createArray()]", [])}),
    ("empty", {"testArray": [], "testObject": {}, "testString": ""}, {},
     {"arrayEmpty": ("[empty(parameters('testArray'))]", True), "objectEmpty": ("[empty(parameters('testObject'))]", True),
      "stringEmpty": ("[empty(parameters('testString'))]", True)}),
    ("first-last", {"arrayToTest": ["one", "two", "three"]}, {},
     {"firstArray": ("[first(parameters('arrayToTest'))]", "one"), "firstString": ("[first('One Two Three')]", "O"),
      "lastArray": ("[last(parameters('arrayToTest'))]", "three"), "lastString": ("[last('One Two Three')]", "e")}),
    ("indexOf-arrays", {}, {"names": ["one", "two", "three"], "numbers": [4, 5, 6],
                            "collection": ["[variables('names')]", "[variables('numbers')]"], "duplicates": [1, 2, 3, 1]},
     {"index1": ("[lastIndexOf(variables('names'), 'two')]", 1), "index2": ("[indexOf(variables('names'), 'one')]", 0),
      "notFoundIndex1": ("[lastIndexOf(variables('names'), 'Three')]", -1),
      "index3": ("[lastIndexOf(variables('numbers'), 4)]", 0), "index4": ("[indexOf(variables('numbers'), 6)]", 2),
      "notFoundIndex2": ("[lastIndexOf(variables('numbers'), '5')]", -1),
      "index5": ("[indexOf(variables('collection'), variables('numbers'))]", 1),
      "index6": ("[indexOf(variables('duplicates'), 1)]", 0), "index7": ("[lastIndexOf(variables('duplicates'), 1)]", 3)}),
    ("intersection", {"firstArray": ["one", "two", "three"], "secondArray": ["two", "three"]}, {},
     {"arrayOutput": ("[intersection(parameters('firstArray'), parameters('secondArray'))]", ["two", "three"])}),
    ("length", {"arrayToTest": ["one", "two", "three"], "stringToTest": "One Two Three",
                "objectToTest": {"propA": "one", "propB": "two", "propC": "three", "propD": {"propD-1": "sub", "propD-2": "sub"}}}, {},
     {"arrayLength": ("[length(parameters('arrayToTest'))]", 3), "stringLength": ("[length(parameters('stringToTest'))]", 13),
      "objectLength": ("[length(parameters('objectToTest'))]", 4)}),
    ("range", {"startingInt": 5, "numberOfElements": 3}, {},
     {"rangeOutput": ("[range(parameters('startingInt'),parameters('numberOfElements'))]", [5, 6, 7])}),
    ("skip-take", {"testArray": ["one", "two", "three"], "testString": "one two three"}, {},
     {"skipArray": ("[skip(parameters('testArray'), 2)]", ["three"]), "skipString": ("[skip(parameters('testString'), 4)]", "two three"),
      "takeArray": ("[take(parameters('testArray'), 2)]", ["one", "two"]), "takeString": ("[take(parameters('testString'), 2)]", "on")}),
    ("union", {"firstArray": ["one", "two", "three"], "secondArray": ["three", "four"]}, {},
     {"arrayOutput": ("[union(parameters('firstArray'), parameters('secondArray'))]", ["one", "two", "three", "four"])}),
]  # fmt: skip

COMPARISON = [
    ("coalesce", {"objectToTest": {"null1": None, "null2": None, "string": "default", "int": 1,
                                   "object": {"first": "default"}, "array": [1]}}, {},
     {"stringOutput": ("[coalesce(parameters('objectToTest').null1, parameters('objectToTest').null2, parameters('objectToTest').string)]", "default"),
      "intOutput": ("[coalesce(parameters('objectToTest').null1, parameters('objectToTest').null2, parameters('objectToTest').int)]", 1),
      "objectOutput": ("[coalesce(parameters('objectToTest').null1, parameters('objectToTest').null2, parameters('objectToTest').object)]", {"first": "default"}),
      "arrayOutput": ("[coalesce(parameters('objectToTest').null1, parameters('objectToTest').null2, parameters('objectToTest').array)]", [1]),
      "emptyOutput": ("[empty(coalesce(parameters('objectToTest').null1, parameters('objectToTest').null2))]", True)}),
    ("equals", {"firstInt": 1, "secondInt": 1, "firstString": "a", "secondString": "a", "firstArray": ["a", "b"],
                "secondArray": ["a", "b"], "firstObject": {"a": "b"}, "secondObject": {"a": "b"}}, {},
     {"checkInts": ("[equals(parameters('firstInt'), parameters('secondInt') )]", True),
      "checkStrings": ("[equals(parameters('firstString'), parameters('secondString'))]", True),
      "checkArrays": ("[equals(parameters('firstArray'), parameters('secondArray'))]", True),
      "checkObjects": ("[equals(parameters('firstObject'), parameters('secondObject'))]", True),
      "checkNotEquals": ("[not(equals(1, 2))]", True)}),
    ("greater", {"firstInt": 1, "secondInt": 2, "firstString": "A", "secondString": "a"}, {},
     {"checkInts": ("[greater(parameters('firstInt'), parameters('secondInt') )]", False),
      "checkStrings": ("[greater(parameters('firstString'), parameters('secondString'))]", True)}),
    ("greaterOrEquals", {"firstInt": 1, "secondInt": 2, "firstString": "A", "secondString": "a"}, {},
     {"checkInts": ("[greaterOrEquals(parameters('firstInt'), parameters('secondInt') )]", False),
      "checkStrings": ("[greaterOrEquals(parameters('firstString'), parameters('secondString'))]", True)}),
    ("less", {"firstInt": 1, "secondInt": 2, "firstString": "A", "secondString": "a"}, {},
     {"checkInts": ("[less(parameters('firstInt'), parameters('secondInt') )]", True),
      "checkStrings": ("[less(parameters('firstString'), parameters('secondString'))]", False)}),
    ("lessOrEquals", {"firstInt": 1, "secondInt": 2, "firstString": "A", "secondString": "a"}, {},
     {"checkInts": ("[lessOrEquals(parameters('firstInt'), parameters('secondInt') )]", True),
      "checkStrings": ("[lessOrEquals(parameters('firstString'), parameters('secondString'))]", False)}),
]  # fmt: skip

LOGICAL = [
    ("and-or-not", {}, {},
     {"andExampleOutput": ("[and(bool('true'), bool('false'))]", False), "orExampleOutput": ("[or(bool('true'), bool('false'))]", True),
      "notExampleOutput": ("[not(bool('true'))]", False)}),
    ("bool", {}, {},
     {"trueString": ("[bool('true')]", True), "falseString": ("[bool('false')]", False), "trueInt": ("[bool(1)]", True),
      "falseInt": ("[bool(0)]", False)}),
    ("if", {}, {},
     {"yesOutput": ("[if(equals('a', 'a'), 'yes', 'no')]", "yes"), "noOutput": ("[if(equals('a', 'b'), 'yes', 'no')]", "no"),
      "objectOutput": ("[if(equals('a', 'a'), json('{\"test\": \"value1\"}'), json('null'))]", {"test": "value1"})}),
    ("true-false", {}, {}, {"trueOutput": ("[true()]", True), "falseOutput": ("[false()]", False)}),
]  # fmt: skip

NUMERIC = [
    ("add", {"first": 5, "second": 3}, {}, {"addResult": ("[add(parameters('first'), parameters('second'))]", 8)}),
    ("div", {"first": 8, "second": 3}, {}, {"divResult": ("[div(parameters('first'), parameters('second'))]", 2)}),
    ("int", {"stringToConvert": "4"}, {}, {"intResult": ("[int(parameters('stringToConvert'))]", 4)}),
    ("max", {"arrayToTest": [0, 3, 2, 5, 4]}, {},
     {"arrayOutput": ("[max(parameters('arrayToTest'))]", 5), "intOutput": ("[max(0,3,2,5,4)]", 5)}),
    ("min", {"arrayToTest": [0, 3, 2, 5, 4]}, {},
     {"arrayOutput": ("[min(parameters('arrayToTest'))]", 0), "intOutput": ("[min(0,3,2,5,4)]", 0)}),
    ("mod", {"first": 7, "second": 3}, {}, {"modResult": ("[mod(parameters('first'), parameters('second'))]", 1)}),
    ("mul", {"first": 5, "second": 3}, {}, {"mulResult": ("[mul(parameters('first'), parameters('second'))]", 15)}),
    ("sub", {"first": 7, "second": 3}, {}, {"subResult": ("[sub(parameters('first'), parameters('second'))]", 4)}),
    ("float", {}, {}, {"custom1": ("[float('3.0')]", 3.0), "custom2": ("[float(3)]", 3.0)}),
]  # fmt: skip

OBJECT = [
    ("createObject", {}, {},
     {"newObject": ("[createObject('intProp', 1, 'stringProp', 'abc', 'boolProp', true(), 'arrayProp', createArray('a', 'b', 'c'), 'objectProp', createObject('key1', 'value1'))]",
                    {"intProp": 1, "stringProp": "abc", "boolProp": True, "arrayProp": ["a", "b", "c"], "objectProp": {"key1": "value1"}})}),
    ("intersection", {"firstObject": {"one": "a", "two": "b", "three": "c"}, "secondObject": {"one": "a", "two": "z", "three": "c"}}, {},
     {"objectOutput": ("[intersection(parameters('firstObject'), parameters('secondObject'))]", {"one": "a", "three": "c"})}),
    ("items", {}, {"rgObject": {"item002": {"enabled": False, "displayName": "Example item 2", "number": 200},
                                "item001": {"enabled": True, "displayName": "Example item 1", "number": 300}}},
     {"itemsResult": ("[items(variables('rgObject'))]",
                      [{"key": "item001", "value": {"enabled": True, "displayName": "Example item 1", "number": 300}},
                       {"key": "item002", "value": {"enabled": False, "displayName": "Example item 2", "number": 200}}])}),
    ("json", {"jsonEmptyObject": "null", "jsonObject": '{"a": "b"}', "jsonString": '"test"', "jsonBoolean": "true",
              "jsonInt": "3", "jsonArray": "[[1,2,3 ]", "concatValue": "demo value"}, {},
     {"emptyObjectOutput": ("[empty(json(parameters('jsonEmptyObject')))]", True),
      "objectOutput": ("[json(parameters('jsonObject'))]", {"a": "b"}), "stringOutput": ("[json(parameters('jsonString'))]", "test"),
      "booleanOutput": ("[json(parameters('jsonBoolean'))]", True), "intOutput": ("[json(parameters('jsonInt'))]", 3),
      "arrayOutput": ("[json(parameters('jsonArray'))]", [1, 2, 3]),
      "concatObjectOutput": ("[json(concat('{\"a\": \"', parameters('concatValue'), '\"}'))]", {"a": "demo value"})}),
    ("null", {}, {}, {"emptyOutput": ("[empty(null())]", True)}),
    ("objectKeys", {}, {"obj": {"a": 1, "b": 2}}, {"keyArray": ("[objectKeys(variables('obj'))]", ["a", "b"])}),
    ("shallowMerge", {}, {"firstArray": [{"one": "a"}, {"two": "b"}, {"two": "c"}],
                          "secondArray": [{"one": "a", "nested": {"a": 1, "nested": {"c": 3}}}, {"two": "b", "nested": {"b": 2}}]},
     {"firstOutput": ("[shallowMerge(variables('firstArray'))]", {"one": "a", "two": "c"}),
      "secondOutput": ("[shallowMerge(variables('secondArray'))]", {"one": "a", "nested": {"b": 2}, "two": "b"})}),
    ("union", {"firstObject": {"one": "a", "two": "b", "three": "c1"}, "secondObject": {"three": "c2", "four": "d", "five": "e"}}, {},
     {"objectOutput": ("[union(parameters('firstObject'), parameters('secondObject'))]",
                       {"one": "a", "two": "b", "three": "c2", "four": "d", "five": "e"})}),
    ("union-deep", {"firstObject": {"property": {"one": "a", "two": "b", "three": "c1"}, "nestedArray": [1, 2]},
                    "secondObject": {"property": {"three": "c2", "four": "d", "five": "e"}, "nestedArray": [3, 4]}}, {},
     {"objectOutput": ("[union(parameters('firstObject'), parameters('secondObject'))]",
                       {"property": {"one": "a", "two": "b", "three": "c2", "four": "d", "five": "e"}, "nestedArray": [3, 4]})}),
]  # fmt: skip

DATE = [
    ("dateTimeAdd", {"baseTime": "2020-04-07 14:53:14Z"},
     {"add3Years": "[dateTimeAdd(parameters('baseTime'), 'P3Y')]", "subtract9Days": "[dateTimeAdd(parameters('baseTime'), '-P9D')]",
      "add1Hour": "[dateTimeAdd(parameters('baseTime'), 'PT1H')]"},
     {"add3YearsOutput": ("[variables('add3Years')]", "2023-04-07T14:53:14Z"),
      "subtract9DaysOutput": ("[variables('subtract9Days')]", "2020-03-29T14:53:14Z"),
      "add1HourOutput": ("[variables('add1Hour')]", "2020-04-07T15:53:14Z")}),
    ("dateTimeAdd-years-and-months-are-365-and-30-days", {}, {},
     {"addOneYearNonLeap": ("[dateTimeAdd('2023-01-01 00:00:00Z', 'P1Y')]", "2024-01-01T00:00:00Z"),
      "addOneYearLeap": ("[dateTimeAdd('2024-01-01 00:00:00Z', 'P1Y')]", "2024-12-31T00:00:00Z"),
      "addOneMonthNonLeap": ("[dateTimeAdd('2023-02-01 00:00:00Z', 'P1M')]", "2023-03-03T00:00:00Z"),
      "addOneMonthLeap": ("[dateTimeAdd('2024-02-01 00:00:00Z', 'P1M')]", "2024-03-02T00:00:00Z")}),
    ("dateTimeFromEpoch-and-back", {"epochValue": 1683040573}, {},
     {"convertedDate": ("[dateTimeFromEpoch(parameters('epochValue'))]", "2023-05-02T15:16:13Z"),
      "convertedEpoch": ("[dateTimeToEpoch(dateTimeFromEpoch(parameters('epochValue')))]", 1683040573)}),
]  # fmt: skip

PAGES = {"string": STRING, "array": ARRAY, "comparison": COMPARISON, "logical": LOGICAL,
         "numeric": NUMERIC, "object": OBJECT, "date": DATE}  # fmt: skip
EXAMPLES = [(f"{page}-{example[0]}", *example[1:]) for page, examples in PAGES.items() for example in examples]


@pytest.mark.parametrize(("parameters", "variables", "outputs"), [e[1:] for e in EXAMPLES], ids=[e[0] for e in EXAMPLES])
def test_each_documented_example_gives_the_documented_value(
    parameters: dict[str, Any], variables: dict[str, Any], outputs: dict[str, tuple[str, Any]]
) -> None:
    values = outputs_of({name: expression for name, (expression, _) in outputs.items()}, parameters, variables)
    assert values == {name: value for name, (_, value) in outputs.items()}


def test_outputs_keep_their_json_types() -> None:
    # A boolean is never 1 and an integer never True: the values are compared with their types.
    values = outputs_of({"bool": "[greater(2, 1)]", "int": "[add(1, 0)]", "float": "[float(1)]"})
    assert [type(values[name]) for name in ("bool", "int", "float")] == [bool, int, float]


def test_guid_is_a_version_5_uuid_of_its_values_joined_by_hyphens() -> None:
    values = outputs_of({"one": "[guid('a', 'b')]", "joined": "[guid('a-b')]", "other": "[guid('b', 'a')]",
                         "scoped": "[guid(resourceGroup().id, deployment().name)]"})
    assert values["one"] == values["joined"] != values["other"]
    assert all(uuid.UUID(value).version == 5 and len(value) == 36 for value in values.values())


def test_unique_string_in_concat_is_13_characters_of_base_32() -> None:
    value = outputs_of({"concatOutput": "[concat('prefix', '-', uniqueString(resourceGroup().id))]"})["concatOutput"]
    assert value.startswith("prefix-") and len(value) == len("prefix-") + 13
