"""ARM template expressions: `[concat('http://', parameters('site'))]`, parsed by a grammar
(lark) into a small tree and evaluated against a scope (parameters, variables, the deployment's
resource group and subscription, the copy loop's index, and values the caller supplies for what
only Azure knows).

A string is an expression when it starts with `[` and ends with `]`; `[[` at the start escapes
a literal `[`. Function names match in any case, as in ARM.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from cachetools import LRUCache
from lark import Lark, LarkError, Token, Transformer, UnexpectedInput, v_args

from shared.domain.problems import json_type as kind

_GRAMMAR = r"""
?start: expr
?expr: primary
     | expr "." NAME           -> member
     | expr "[" expr "]"       -> index
?primary: NAME "(" [expr ("," expr)*] ")"  -> call
        | STRING                            -> string
        | NUMBER                            -> number
NAME: /[A-Za-z_][A-Za-z0-9_]*/
STRING: /'(?:[^']|'')*'/
NUMBER: /-?\d+(\.\d+)?/
%ignore /[ \t\r\n]+/
"""


class ExpressionError(Exception):
    """An expression that cannot be evaluated; the message says why, in the template's terms."""


# The tree of an expression: a literal, a function call, `.name` of a value, `[index]` of one.
@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    arguments: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Member:
    target: Node
    name: str


@dataclass(frozen=True, slots=True)
class Index:
    target: Node
    position: Node


Node = Literal | Call | Member | Index


def source(node: Node) -> str:
    """An expression in one canonical spelling: how a supplied value names the call it answers."""
    match node:
        case Literal(value=str() as text):
            return "'" + text.replace("'", "''") + "'"
        case Literal(value=value):
            return str(value)
        case Call(name=name, arguments=arguments):
            return f"{name}({', '.join(source(argument) for argument in arguments)})"
        case Member(target=target, name=name):
            return f"{source(target)}.{name}"
        case Index(target=target, position=position):
            return f"{source(target)}[{source(position)}]"
    raise AssertionError(node)  # pragma: no cover (every node matched)


@v_args(inline=True)
class _ToTree(Transformer[Token, Node]):
    def call(self, name: Token, *arguments: Node | None) -> Call:
        return Call(str(name), tuple(argument for argument in arguments if argument is not None))

    def string(self, text: Token) -> Literal:
        return Literal(str(text)[1:-1].replace("''", "'"))

    def number(self, text: Token) -> Literal | Call:
        # ARM's integers are 64-bit. A literal past that range (or a decimal too large for a
        # double) becomes a call that refuses it when evaluated, saying why: an error raised
        # here would reach the caller wrapped in lark's VisitError, not as an ExpressionError.
        digits = str(text).lstrip("-")
        if "." in digits:
            value = float(text) if len(digits) <= 400 else math.inf
            return Literal(value) if math.isfinite(value) else Call("float", (Literal(str(text)),))
        if len(digits.lstrip("0")) <= 19 and -(2**63) <= (whole := int(text)) < 2**63:
            return Literal(whole)
        return Call("int", (Literal(str(text)),))

    def member(self, target: Node, name: Token) -> Member:
        return Member(target, str(name))

    def index(self, target: Node, position: Node) -> Index:
        return Index(target, position)


# The tree is built as the parser reduces, not from a parse tree afterwards: half the time, and
# no recursion, so an expression nested thousands deep parses (its evaluation then says it is
# nested too deeply). Built on the first parse: building it is a tenth of a second, which every
# cold start would pay at import, and only template requests parse expressions.
@functools.cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False, transformer=_ToTree())


# ARM's limit on an expression's length (its text between the brackets): longer ones are
# refused before parsing, which costs about 10 microseconds per token here.
LONGEST_EXPRESSION = 24_576
# The parser's cache holds trees of at most this many characters of expression text in all. A
# tree takes about 25 bytes per character at worst (`concat(1,1,...)`, one node per two
# characters, measured with tracemalloc), so the cache holds at most some 13 MB, however long
# the expressions it meets.
CACHED_CHARACTERS = 512 * 1024
# Each entry is the tree and the length of its text, which is what it weighs.
_parsed: LRUCache[str, tuple[Node, int]] = LRUCache(
    maxsize=CACHED_CHARACTERS, getsizeof=lambda entry: entry[1]
)
_parsed_lock = threading.Lock()


def parse(text: str) -> Node:
    """An expression's text (without its brackets) as a tree, or ExpressionError saying where
    it stops making sense. Trees are cached, by the size of their text (CACHED_CHARACTERS)."""
    with _parsed_lock:
        cached = _parsed.get(text)
    if cached is not None:
        return cached[0]
    if len(text) > LONGEST_EXPRESSION:
        raise ExpressionError(
            f"is {len(text):,} characters long; an expression may have at most "
            f"{LONGEST_EXPRESSION:,}, as in ARM"
        )
    try:
        tree = cast(Node, _parser().parse(text))  # what the transformer builds
    except UnexpectedInput as unexpected:
        column = getattr(unexpected, "column", "?")
        raise ExpressionError(f"is not a valid expression (at character {column})") from None
    except LarkError:
        raise ExpressionError("is not a valid expression") from None
    with _parsed_lock:
        _parsed[text] = (tree, max(len(text), 1))
    return tree


def is_expression(value: Any) -> bool:
    """Whether a template string is an expression: `[...]`, but not `[[...` (an escaped `[`)."""
    return (
        isinstance(value, str)
        and value.startswith("[")
        and value.endswith("]")
        and not value.startswith("[[")
    )


def unescaped(value: str) -> str:
    """A literal template string as ARM reads it: `[[...]` is the text `[...]`."""
    return value[1:] if value.startswith("[[") and value.endswith("]") else value


def escaped(value: str) -> str:
    """Text written into a template so that it reads back as itself, not as an expression."""
    return "[" + value if value.startswith("[") and value.endswith("]") else value


Function = Callable[["Scope", Sequence[Any]], Any]
# The longest string or array an expression may make: a template that doubles a value in each
# of fifty variables must not exhaust the memory of the service.
LARGEST_VALUE = 1_000_000
# What all the expressions of one deployment may do together, whatever their copies multiply:
# the characters of distinct expression text parsed (about 10 microseconds per token here),
# steps of evaluation (a literal read, a call, a member or an index taken: 1.5 to 4
# microseconds each), and the characters or items of the strings, arrays and objects their
# calls make. Real templates need a small part of each (the two quickstarts of
# tests/templates: 421 and 603 characters parsed, 24 and 34 steps, 138 and 198 characters
# made); these bound what one import costs the host.
MOST_PARSED = 256 * 1024
MOST_STEPS = 500_000
MOST_MADE = 16_000_000


@dataclass
class Meter:
    """The work the expressions of one deployment have done so far (MOST_PARSED, MOST_STEPS,
    MOST_MADE); shared by every scope derived from the deployment's."""

    steps: int = 0
    made: int = 0
    parsed: int = 0
    texts: set[str] = field(default_factory=set)
    # Of the walk through the resources (shared/domain/templates/resources.py): how many it
    # made, copies counted, and how large their bodies are in all.
    resources: int = 0
    bodies: int = 0

    def parse(self, text: str) -> Node:
        """`parse(text)`, each distinct text counted once, whether the cache had it or not (so
        that a template gets the same answer whatever was imported before)."""
        if text not in self.texts:
            self.parsed += len(text)
            if self.parsed > MOST_PARSED:
                raise ExpressionError(
                    f"takes the template past {MOST_PARSED:,} characters of expressions "
                    "parsed in all, the most one import may parse"
                )
            self.texts.add(text)
        return parse(text)


@dataclass(frozen=True)
class Scope:
    """What an expression may read. `supplied` maps the canonical spelling of a call that only
    Azure could answer (`reference(...)`, `listKeys(...)`) to the value the caller gives for it
    (`by_call` makes it from the caller's spellings)."""

    functions: Mapping[str, Function]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    variables: Mapping[str, Any] = field(default_factory=dict)
    resource_group: Mapping[str, Any] = field(default_factory=dict)
    subscription: Mapping[str, Any] = field(default_factory=dict)
    deployment: Mapping[str, Any] = field(default_factory=dict)
    copy_indexes: Mapping[str, int] = field(default_factory=dict)
    supplied: Mapping[str, Any] = field(default_factory=dict)
    # Functions whose answer only Azure has: supplied by the caller, or an error.
    azure_only: frozenset[str] = frozenset()
    meter: Meter = field(default_factory=Meter)
    # The values of the secure parameters read so far, which no message may show.
    secrets: set[str] = field(default_factory=set)

    def evaluate(self, node: Node) -> Any:
        self.meter.steps += 1
        if self.meter.steps > MOST_STEPS:
            raise ExpressionError(
                f"takes the template past {MOST_STEPS:,} steps of evaluation in all, "
                "the most one import may take"
            )
        match node:
            case Literal(value=value):
                return value
            case Member(target=target, name=name):
                return _member(self.evaluate(target), name)
            case Index(target=target, position=position):
                return _item(self.evaluate(target), self.evaluate(position))
            case Call(name=name, arguments=arguments):
                return self._call(node, name, arguments)
        raise ExpressionError("is not an expression")  # pragma: no cover (every node matched)

    def _call(self, node: Call, name: str, arguments: tuple[Node, ...]) -> Any:
        folded = name.casefold()
        if folded in self.azure_only:
            return self._supplied(node)
        if folded == "if":  # only the branch taken is evaluated, as in ARM
            if len(arguments) != 3:
                raise ExpressionError("if() takes a condition and two values")
            condition = self.evaluate(arguments[0])
            if not isinstance(condition, bool):
                raise ExpressionError(f"if() needs a boolean condition, not {kind(condition)}")
            return self.evaluate(arguments[1] if condition else arguments[2])
        function = self.functions.get(folded)
        if function is None:
            raise ExpressionError(f"uses the function '{name}', which is not supported here")
        made = function(self, [self.evaluate(argument) for argument in arguments])
        if isinstance(made, str | list | dict):
            if len(made) > LARGEST_VALUE:
                raise ExpressionError(
                    f"makes a value of more than {LARGEST_VALUE} characters or items"
                )
            self.meter.made += len(made)
            if self.meter.made > MOST_MADE:
                raise ExpressionError(
                    f"takes the template past {MOST_MADE:,} characters or items made in all, "
                    "the most one import may make"
                )
        return made

    def _supplied(self, node: Call) -> Any:
        wanted = canonical(node)
        if wanted in self.supplied:
            return self.supplied[wanted]
        raise NeedsAzure(source(node))


def by_call(supplied: Mapping[str, Any], meter: Meter) -> dict[str, Any]:
    """Values the caller supplies by a call's text, keyed by the call's canonical spelling:
    each text parsed once, however many calls look it up. A text that is not an expression
    raises ExpressionError."""
    return {
        source(meter.parse(_call_text(spelled))).casefold(): value
        for spelled, value in supplied.items()
    }


def _call_text(spelled: str) -> str:
    return spelled.strip().removeprefix("[").removesuffix("]")


class NeedsAzure(ExpressionError):
    """A call only Azure can answer (`reference()`, `listKeys()`), for which no value was given."""

    def __init__(self, call: str) -> None:
        super().__init__(
            f'needs Azure to answer {call}: give its value in expressionValues under "{call}", '
            "or the property's value in propertyValues"
        )
        self.call = call


def canonical(call: str | Node) -> str:
    """A call's canonical spelling, whatever its spacing and quotes: how supplied values match."""
    node = parse(_call_text(call)) if isinstance(call, str) else call
    return source(node).casefold()


def _member(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        for key, found in value.items():
            if str(key).casefold() == name.casefold():
                return found
        raise ExpressionError(f"reads '{name}', which the object does not have")
    raise ExpressionError(f"reads '{name}' of {kind(value)}, which has no properties")


def _item(value: Any, position: Any) -> Any:
    if isinstance(value, list) and isinstance(position, int) and not isinstance(position, bool):
        if 0 <= position < len(value):
            return value[position]
        raise ExpressionError(f"reads item {position} of an array of {len(value)}")
    if isinstance(value, Mapping) and isinstance(position, str):
        return _member(value, position)
    raise ExpressionError(f"reads [{position!r}] of {kind(value)}")
