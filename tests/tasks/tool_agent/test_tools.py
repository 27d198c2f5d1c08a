"""Each tool of the tool-agent environment: results, formatting, and errors as observations."""

from __future__ import annotations

import pytest

from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.tools import Fact, calculator, convert, format_number, lookup

FACTS = (Fact("Velmora", "population", 48210, "people"), Fact("copper kettle", "weight", 1.25, "kg"),
         Fact("Brask", "population", 9120, "people"))


@pytest.mark.parametrize(("expr", "text"), [
    ("1 + 2", "3"), ("(12.5 + 3) * 4", "62"), ("7 / 2", "3.5"), ("2 ** 10", "1024"), ("2^3", "8"),
    ("-4 + +1", "-3"), ("1,234 * 2", "2468"), ("3 × 4 ÷ 6", "2"), ("1/3", "0.3333333333"), ("1e3 + 1", "1001"),
])
def test_calculator_arithmetic(expr: str, text: str) -> None:
    obs = calculator(expr)
    assert obs.ok and obs.text == text and obs.value == pytest.approx(float(text))


@pytest.mark.parametrize("expr", [
    "", "   ", "x + 1", "abs(-1)", "__import__('os').system('true')", "'a' + 'b'", "[1, 2]", "1 if 1 else 2",
    "1 < 2", "(1).real", "lambda: 1", "True + 1", "1 +", "((((1))", "a" * 300, "1/0", "10 ** 10 ** 10",
    "9 ** 999999", "1e308 * 10", "(" * 150 + "1" + ")" * 150,
])
def test_calculator_rejects_everything_but_arithmetic(expr: str) -> None:
    obs = calculator(expr)
    assert not obs.ok and obs.value is None and obs.text.startswith("Error:")


def test_calculator_huge_power_is_fast() -> None:
    import time

    t0 = time.perf_counter()
    assert not calculator("9**9**9**9").ok
    assert time.perf_counter() - t0 < 1.0  # floats overflow at once; no giant integer is built


@pytest.mark.parametrize(("query", "value", "unit"), [
    ("12 mile to km", 19.312128, "km"), ("1.25 kg in lb", 2.755778479, "lb"), ("100 degC to degF", 212, "degF"),
    ("3 gallons -> liter", 11.35623531, "liter"), ("5 km to m.", 5000, "m"), ("2 miles into feet", 10560, "feet"),
])
def test_convert(query: str, value: float, unit: str) -> None:
    obs = convert(query)
    assert obs.ok, obs.text
    assert obs.value == pytest.approx(value, rel=1e-6) and obs.text.endswith(" " + unit)


@pytest.mark.parametrize("query", [
    "", "kg to lb", "12 kg to km", "12 blorps to kg", "12 kg to __import__", "12 kg*2 to lb", "x" * 300,
    "12 kg to lb; 3 m to ft",
])
def test_convert_errors_are_observations(query: str) -> None:
    obs = convert(query)
    assert not obs.ok and obs.text.startswith("Error:")


@pytest.mark.parametrize("query", ["population of Velmora", "Population of velmora.", "Velmora population",
                                   "the population of the Velmora"])
def test_lookup_forms(query: str) -> None:
    obs = lookup(query, FACTS)
    assert obs.ok and obs.text == "48210 people" and obs.value == 48210


def test_lookup_errors() -> None:
    missing = lookup("height of Velmora", FACTS)
    assert not missing.ok and "Keys look like" in missing.text and "population of Velmora" in missing.text
    assert lookup("the weight", FACTS).value == 1.25  # no entity named, one fact has the attribute
    assert not lookup("population", FACTS).ok  # two facts have it
    assert not lookup("weight of Velmora", FACTS).ok  # an entity is named: no guess
    assert not lookup("weight of Tova", FACTS).ok
    twins = (*FACTS, Fact("Velmora North", "population", 5, "people"))
    several = lookup("North Velmora population", twins)
    assert not several.ok and "several" in several.text
    assert lookup("population of Velmora North", twins).value == 5
    assert not lookup("", FACTS).ok and not lookup("x" * 500, FACTS).ok


def test_env_runs_tools_by_name_and_reports_unknown_ones() -> None:
    env = ToolEnv.of(FACTS)
    assert env.run("Calculator ", "2*3").text == "6"
    assert env.run("lookup", "weight of copper kettle").text == "1.25 kg"
    bad = env.run("search", "anything")
    assert not bad.ok and "calculator, convert, lookup" in bad.text
    assert env.describe().count("\n") == 2


def test_format_number() -> None:
    assert format_number(3.0) == "3" and format_number(-2.5) == "-2.5" and format_number(1e20) == "1e+20"
    assert format_number(2 / 3) == "0.6666666667"


def test_calculator_takes_one_expression_only() -> None:
    for expr in ("1;2", "2*3\n4"):
        obs = calculator(expr)
        assert not obs.ok and "one expression" in obs.text
