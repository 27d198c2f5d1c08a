"""The deterministic tools of the tool-agent environment: calculator, unit converter, fact lookup.

Every tool takes one input string written by the policy model (untrusted) and returns an
:class:`Observation`: a deterministic text for the model plus, when the call succeeded, the number it
produced (what the reward compares with the gold plan). A bad input never raises: the error comes back as
the observation text, so the model can read what went wrong and try again.

- ``calculator``: arithmetic on numbers only, evaluated by ``simpleeval`` (a maintained safe-expression
  library; nothing is passed to ``eval``/``exec``) with every AST node but number literals, unary and
  binary operators removed, and all arithmetic done in floats, so a huge power overflows at once instead
  of building a giant integer.
- ``convert``: unit conversion with ``pint`` (pure Python, one registry built once per process; chosen
  over a hand-written table because it carries exact factors and the offset units of temperature). A unit must be one plain name (letters, ``_`` or ``°``, at most 32
  characters), so no expression reaches pint's parser.
- ``lookup``: the task's own facts table (``attribute of entity`` -> value and unit).

Numbers are written with :func:`format_number` (at most 10 significant digits), the same way in every
output, so the gold plan built by running these tools matches what the model sees.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import simpleeval

__all__ = ["CALCULATOR", "CONVERT", "LOOKUP", "TOOLS", "Fact", "Observation", "Tool", "calculator", "convert",
           "format_number", "lookup", "normalise_key"]

MAX_INPUT_CHARS = 200
"""Longest tool input accepted, characters; longer inputs get an error observation (bounds parse depth)."""

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class Observation:
    """What a tool call returns.

    Attributes:
        text: the observation shown to the model (deterministic given the input and the facts).
        ok: True when the call succeeded; False for an error observation.
        value: the number the call produced (a lookup's or conversion's value, a calculation's
            result); None on error.
    """

    text: str
    ok: bool
    value: float | None = None


@dataclass(frozen=True)
class Fact:
    """One row of a task's lookup table.

    Attributes:
        entity: the thing described, e.g. "Velmora" or "copper kettle".
        attribute: what is measured, e.g. "population", "weight".
        value: the number, finite.
        unit: its unit as written in observations ("kg", "mile", "dollars", "people"); "" for none.
    """

    entity: str
    attribute: str
    value: float
    unit: str = ""

    @property
    def key(self) -> str:
        """The lookup key, ``"<attribute> of <entity>"``."""
        return f"{self.attribute} of {self.entity}"

    @property
    def text(self) -> str:
        """The lookup's observation text, e.g. ``"4.5 kg"``."""
        return f"{format_number(self.value)} {self.unit}".strip()


@dataclass(frozen=True)
class Tool:
    """A tool as offered to the model.

    Attributes:
        name: what the model writes in ``Action: name[input]``.
        description: one line for the prompt.
        input_schema: the input's shape in words, with an example (shown in the prompt).
    """

    name: str
    description: str
    input_schema: str


CALCULATOR = Tool("calculator", "evaluates arithmetic on numbers: + - * / ** and parentheses.",
                  "an expression, e.g. calculator[(12.5 + 3) * 4]")
CONVERT = Tool("convert", "converts a quantity between units of the same kind (mass, length, volume, temperature).",
               "'<number> <unit> to <unit>', e.g. convert[12 mile to km]")
LOOKUP = Tool("lookup", "returns a stored fact about a named thing.",
              "'<attribute> of <name>', e.g. lookup[population of Velmora]")
TOOLS: tuple[Tool, ...] = (CALCULATOR, CONVERT, LOOKUP)
"""The tools of the environment, in prompt order."""


def format_number(x: float) -> str:
    """``x`` as observations write it: an integer without a decimal point when it is one (|x| < 1e15),
    else at most 10 significant digits (``format(x, ".10g")``)."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return format(x, ".10g")


# --- calculator -----------------------------------------------------------------------------------


def _num(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError("only numbers are allowed")
    return float(x)


def _binary(fn: Callable[[float, float], float]) -> Callable[[Any, Any], float]:
    return lambda a, b: fn(_num(a), _num(b))


def _unary(fn: Callable[[float], float]) -> Callable[[Any], float]:
    return lambda a: fn(_num(a))


class _NumbersOnly(simpleeval.SimpleEval):
    """simpleeval with every node but number literals and arithmetic removed, floats throughout."""

    def __init__(self) -> None:
        ops = {
            ast.Add: _binary(operator.add), ast.Sub: _binary(operator.sub), ast.Mult: _binary(operator.mul),
            ast.Div: _binary(operator.truediv), ast.Pow: _binary(math.pow),
            ast.USub: _unary(operator.neg), ast.UAdd: _unary(operator.pos),
        }
        super().__init__(operators=ops, functions={}, names={})
        keep = {ast.Expr, ast.UnaryOp, ast.BinOp, ast.Constant}
        self.nodes = {k: v for k, v in self.nodes.items() if k in keep}

    @staticmethod
    def _eval_constant(node: ast.Constant) -> float:
        return _num(node.value)


_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def calculator(expression: str) -> Observation:
    """Evaluate an arithmetic expression on numbers.

    Accepts numbers, ``+ - * / **``, unary signs and parentheses; also ``^`` (read as ``**``), ``×``
    and ``÷``, and thousands separators (``1,234``). Anything else (names, calls, strings, comparisons)
    is an error observation.

    Args:
        expression: untrusted text, at most :data:`MAX_INPUT_CHARS` characters.

    Returns:
        The result written with :func:`format_number`, or an ``Error: ...`` observation (empty input,
        too long, not arithmetic, division by zero, overflow or a non-finite result).
    """
    expr = expression.strip()
    if not expr:
        return Observation("Error: calculator needs an expression, e.g. calculator[2 * (3 + 4)]", False)
    if len(expr) > MAX_INPUT_CHARS:
        return Observation(f"Error: expression longer than {MAX_INPUT_CHARS} characters", False)
    expr = _THOUSANDS.sub("", expr.replace("^", "**").replace("×", "*").replace("÷", "/"))
    if ";" in expr or "\n" in expr:  # one expression only (simpleeval would evaluate each statement)
        return Observation("Error: one expression only, e.g. calculator[2 * (3 + 4)]", False)
    try:
        value = _NumbersOnly().eval(expr)
        value = _num(value)
    except ZeroDivisionError:
        return Observation("Error: division by zero", False)
    except OverflowError:
        return Observation("Error: the result is too large", False)
    except (SyntaxError, TypeError, KeyError, ValueError, MemoryError, RecursionError,
            simpleeval.InvalidExpression):
        return Observation(
            "Error: not an arithmetic expression; use numbers, + - * / ** and parentheses only", False)
    if not math.isfinite(value):
        return Observation("Error: the result is too large", False)
    return Observation(format_number(value), True, value)


# --- unit converter -------------------------------------------------------------------------------

_UNIT_NAME = re.compile(r"[A-Za-z_°]{1,32}")
_CONVERT = re.compile(rf"^\s*({_NUMBER})\s*([^\s\d].*?)\s+(?:to|in|into|->|→)\s+(.+?)\s*\.?\s*$", re.IGNORECASE)
_UNIT_ALIASES = {"°c": "degC", "°f": "degF", "celsius": "degC", "fahrenheit": "degF", "miles": "mile",
                 "pounds": "lb", "lbs": "lb", "kilograms": "kg", "kilometers": "km", "kilometres": "km",
                 "liters": "liter", "litres": "liter", "gallons": "gallon", "grams": "g", "meters": "m",
                 "metres": "m", "feet": "ft", "ounces": "oz"}


@functools.cache
def _registry() -> Any:
    import pint

    return pint.UnitRegistry(cache_folder=None)


def _unit(text: str) -> str | None:
    """The pint name of one plain unit word, or None when it is not one."""
    word = text.strip().rstrip(".")
    word = _UNIT_ALIASES.get(word.casefold(), word)
    return word if _UNIT_NAME.fullmatch(word) else None


def convert(query: str) -> Observation:
    """Convert ``'<number> <unit> to <unit>'`` (also ``in``, ``into``, ``->``).

    Units are pint unit names or symbols (``kg``, ``lb``, ``km``, ``mile``, ``liter``, ``gallon`` (US),
    ``degC``, ``degF``, ...) plus a few plural and symbol aliases (``miles``, ``°C``).

    Args:
        query: untrusted text, at most :data:`MAX_INPUT_CHARS` characters.

    Returns:
        ``"<value> <target unit as written>"`` with :func:`format_number`, or an ``Error: ...``
        observation (unparsable query, unknown unit, units of different kinds).
    """
    if len(query) > MAX_INPUT_CHARS:
        return Observation(f"Error: input longer than {MAX_INPUT_CHARS} characters", False)
    m = _CONVERT.match(query)
    if not m:
        return Observation("Error: write '<number> <unit> to <unit>', e.g. convert[12 mile to km]", False)
    number, src_text, dst_text = float(m.group(1)), m.group(2), m.group(3)
    src, dst = _unit(src_text), _unit(dst_text)
    if src is None or dst is None:
        bad = src_text if src is None else dst_text
        return Observation(f"Error: {bad.strip()[:40]!r} is not a unit name", False)
    ureg = _registry()
    try:
        value = float(ureg.Quantity(number, src).to(dst).magnitude)
    except Exception as exc:  # pint raises its own UndefinedUnitError / DimensionalityError types
        name = type(exc).__name__
        if "Dimensionality" in name:
            return Observation(f"Error: cannot convert {src} to {dst} (different kinds of quantity)", False)
        if "Undefined" in name:
            return Observation(f"Error: unknown unit in {src!r} or {dst!r}", False)
        return Observation(f"Error: cannot convert ({name})", False)
    if not math.isfinite(value):
        return Observation("Error: the result is too large", False)
    return Observation(f"{format_number(value)} {dst_text.strip().rstrip('.')}", True, value)


# --- lookup ---------------------------------------------------------------------------------------

_FILLER = {"the", "a", "an", "what", "is", "whats", "of", "for", "s"}


def normalise_key(text: str) -> str:
    """Casefolded NFKC text with punctuation dropped and whitespace collapsed (how keys are compared)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def _words(text: str) -> list[str]:
    return [w for w in normalise_key(text).split() if w not in _FILLER]


_FILLER = frozenset({"the", "a", "an", "of", "what", "is", "its"})
"""Words a lookup by attribute alone may hold besides the attribute's."""


def lookup(query: str, facts: Sequence[Fact]) -> Observation:
    """Find the fact ``query`` asks for.

    Matches, in order: the exact key ``"<attribute> of <entity>"`` (normalised, see
    :func:`normalise_key`); else the one fact whose entity words and attribute words all occur in the
    query (``"Velmora population"`` works too); else, when the query is the attribute alone (give or take
    "the", "of", ...), the one fact with that attribute if only one has it.

    Args:
        query: untrusted text, at most :data:`MAX_INPUT_CHARS` characters.
        facts: the task's table.

    Returns:
        ``"<value> <unit>"`` of the fact, or an ``Error: ...`` observation (no match: names a few valid
        keys; several matches: names them).
    """
    if len(query) > MAX_INPUT_CHARS:
        return Observation(f"Error: input longer than {MAX_INPUT_CHARS} characters", False)
    q = normalise_key(query)
    for fact in facts:
        if normalise_key(fact.key) == q:
            return Observation(fact.text, True, fact.value)
    qwords = set(_words(query))
    hits = [f for f in facts if qwords and set(_words(f.entity)) <= qwords and set(_words(f.attribute)) <= qwords]
    if not hits:  # the attribute alone ("the weight"), when only one fact has it
        by_attribute = [f for f in facts if qwords and not qwords - set(_words(f.attribute)) - _FILLER]
        hits = by_attribute if len(by_attribute) == 1 else []
    if len(hits) == 1:
        return Observation(hits[0].text, True, hits[0].value)
    if len(hits) > 1:
        return Observation("Error: several facts match: " + "; ".join(f.key for f in hits[:4]), False)
    examples = "; ".join(f.key for f in facts[:3])
    return Observation(f"Error: no fact matches {query.strip()[:60]!r}. Keys look like: {examples}", False)
