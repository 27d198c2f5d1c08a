"""Tool-agent task generation: from templates at a difficulty, and by exploring the environment.

Two generators, both deterministic given the ``random.Random`` passed in:

- :func:`generate_tasks` writes questions from templates of 1-4 tool steps (look up, convert, scale,
  add, subtract, compare) over a facts table of invented entities with distractor facts.
- :func:`explore_tasks` walks the environment at random (look up a fact, then apply random applicable
  tools to the running value) and turns each walk into a question that retraces it. The idea of letting
  the environment propose tasks follows self-questioning / asymmetric self-play (Chen et al. 2025,
  "Self-Questioning Language Models", arXiv:2508.03682) and relabelling exploration trajectories as
  instructions (Murty et al. 2024, "BAGEL: Bootstrapping Agents by Guiding Exploration with Language",
  arXiv:2403.08140); here the proposer is a procedural walk, not a model, and the answer is verified by
  construction (every gold value is a tool output).

In both, the gold plan is made by running the real tools (:class:`~evotrainer.tasks.tool_agent.env.ToolEnv`),
so its intermediate values are exactly what a model calling the same tools would observe.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evotrainer.errors import ConfigError
from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.tasks import PlanStep, ToolTask
from evotrainer.tasks.tool_agent.tools import Fact, format_number

__all__ = ["DIFFICULTY_BOUNDS", "explore_tasks", "generate_tasks"]

DIFFICULTY_BOUNDS: Mapping[str, tuple[float, float]] = {
    "steps": (1.0, 4.0),        # tool calls the gold plan needs (rounded)
    "distractors": (0.0, 12.0),  # facts in the table that the question does not need (rounded)
    "magnitude": (1.0, 5.0),     # facts' values lie in [10**(m-1), 10**m)
}
"""Each difficulty knob's (low, high), in its natural unit."""

_POOLS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # (onsets, codas) of invented city names; "validation" shares no syllable with "train"
    "train": (("vel", "bra", "tor", "mi", "ka", "lun", "sor", "de", "ar", "quin"),
              ("mora", "sk", "ven", "dell", "ith", "ora", "gard", "nes", "bury", "lo")),
    "validation": (("pe", "zan", "ol", "ru", "fen", "ty", "gho", "wex", "ib", "cal"),
                   ("tra", "mund", "eux", "pur", "vik", "ane", "holt", "zia", "rin", "ep")),
}
_ADJECTIVES = {"train": ("copper", "blue", "folding", "antique", "steel", "small", "round", "heavy"),
               "validation": ("brass", "green", "oak", "glass", "striped", "tall", "square", "silver")}
_NOUNS = {"train": ("kettle", "lamp", "chair", "crate", "drum", "bench"),
          "validation": ("anvil", "barrel", "cabinet", "trunk", "statue", "wagon")}


@dataclass(frozen=True)
class _Attr:
    kind: str  # "city", "item" or "tank": which entities have it
    name: str
    unit: str
    targets: tuple[str, ...] = ()  # units it converts to
    additive: bool = True  # sums make sense
    fixed_range: tuple[float, float] | None = None  # ignores magnitude
    whole: bool = False  # whole numbers only (a count)


_ATTRS: tuple[_Attr, ...] = (
    _Attr("city", "population", "people", whole=True),
    _Attr("city", "distance to the capital", "mile", ("km",)),
    _Attr("city", "average July temperature", "degC", ("degF",), additive=False, fixed_range=(5.0, 35.0)),
    _Attr("item", "price", "dollars"),
    _Attr("item", "weight", "kg", ("lb", "g")),
    _Attr("tank", "capacity", "liter", ("gallon",)),
)


# --- difficulty -----------------------------------------------------------------------------------


def _knobs(difficulty: Mapping[str, float], where: str) -> tuple[int, int, float]:
    """(steps, distractors, magnitude) from ``difficulty``; defaults are each knob's low bound.

    Raises:
        ConfigError: unknown knob, non-number, or a value outside its bounds (names the key).
    """
    for key, value in difficulty.items():
        if key not in DIFFICULTY_BOUNDS:
            raise ConfigError(f"{where}.{key}: unknown difficulty knob; expected one of {sorted(DIFFICULTY_BOUNDS)}")
        lo, hi = DIFFICULTY_BOUNDS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise ConfigError(f"{where}.{key}: must be a number in [{lo:g}, {hi:g}], got {value!r}")
    get = {k: float(difficulty.get(k, lo)) for k, (lo, _) in DIFFICULTY_BOUNDS.items()}
    return int(round(get["steps"])), int(round(get["distractors"])), get["magnitude"]


# --- the world of one task ------------------------------------------------------------------------


class _World:
    """Invented entities and their facts, drawn from ``rng``; hands out unused entities."""

    def __init__(self, rng: random.Random, magnitude: float, pool: str) -> None:
        self.rng, self.magnitude, self.pool = rng, magnitude, pool
        self.used: set[str] = set()

    def entity(self, kind: str) -> str:
        for attempt in range(1000):
            if kind == "city":
                onsets, codas = _POOLS[self.pool]
                name = (self.rng.choice(onsets) + self.rng.choice(codas)).capitalize()
            else:
                noun = self.rng.choice(_NOUNS[self.pool]) if kind == "item" else "tank"
                name = f"{self.rng.choice(_ADJECTIVES[self.pool])} {noun}"
            if attempt >= 100:  # a small pool ran out: number the name
                name = f"{name} {len(self.used) + 1}"
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("entity pool exhausted")  # unreachable at the sizes used (<= 20 entities)

    def value(self, attr: _Attr) -> float:
        if attr.fixed_range is not None:
            return round(self.rng.uniform(*attr.fixed_range), 1)
        hi = 10.0 ** self.magnitude
        lo = 10.0 ** max(self.magnitude - 1.0, 0.0)
        v = self.rng.uniform(lo, hi)
        return round(v, 1) if hi <= 100 and not attr.whole else float(math.floor(v))

    def fact(self, attr: _Attr, entity: str | None = None) -> Fact:
        return Fact(entity or self.entity(attr.kind), attr.name, self.value(attr), attr.unit)


def _distract(world: _World, needed: Sequence[Fact], n: int) -> tuple[Fact, ...]:
    """``needed`` plus ``n`` distractors (other attributes of the same entities, then new entities), shuffled."""
    have = {(f.entity, f.attribute) for f in needed}
    extra: list[Fact] = []
    for f in needed:
        kind = next(a.kind for a in _ATTRS if a.name == f.attribute)
        extra += [world.fact(a, f.entity) for a in _ATTRS if a.kind == kind and (f.entity, a.name) not in have]
    world.rng.shuffle(extra)
    extra = extra[:n]
    while len(extra) < n:
        extra.append(world.fact(world.rng.choice(_ATTRS)))
    facts = [*needed, *extra]
    world.rng.shuffle(facts)
    return tuple(facts)


def _run(env: ToolEnv, tool: str, tool_input: str) -> PlanStep:
    obs = env.run(tool, tool_input)
    if not obs.ok or obs.value is None:  # a template bug, not a model error
        raise RuntimeError(f"gold step {tool}[{tool_input}] failed: {obs.text}")
    return PlanStep(tool, tool_input, obs.text, obs.value)


# --- template tasks -------------------------------------------------------------------------------


def _template(world: _World, steps: int) -> tuple[str, list[Fact], Any]:
    """(template name, needed facts, builder(env) -> (question, plan, answer, value, wrong options))."""
    rng = world.rng
    convertible = [a for a in _ATTRS if a.targets]
    additive = [a for a in _ATTRS if a.additive]
    if steps == 1:
        name = rng.choice(("lookup", "calculate", "convert"))
        if name == "lookup":
            attr = rng.choice(_ATTRS)
            f = world.fact(attr)
            return name, [f], lambda env: (f"What is the {attr.name} of {f.entity}?",
                                           [_run(env, "lookup", f.key)], None)
        if name == "calculate":
            a, b = world.value(_ATTRS[0]), world.value(_ATTRS[0])
            op = rng.choice(("+", "-", "*"))
            return name, [], lambda env: (f"What is {format_number(a)} {op} {format_number(b)}?",
                                          [_run(env, "calculator", f"{format_number(a)} {op} {format_number(b)}")], None)
        attr = rng.choice(convertible)
        x, dst = world.value(attr), rng.choice(attr.targets)
        q = f"{format_number(x)} {attr.unit} to {dst}"
        return name, [], lambda env: (f"How much is {format_number(x)} {attr.unit} in {dst}?",
                                      [_run(env, "convert", q)], None)
    if steps == 2:
        name = rng.choice(("lookup_convert", "lookup_scale", "compare"))
        if name == "lookup_convert":
            attr = rng.choice(convertible)
            f, dst = world.fact(attr), rng.choice(attr.targets)

            def build(env: ToolEnv) -> tuple:
                s1 = _run(env, "lookup", f.key)
                return (f"What is the {attr.name} of {f.entity} in {dst}?",
                        [s1, _run(env, "convert", f"{s1.output.split()[0]} {attr.unit} to {dst}")], None)
            return name, [f], build
        if name == "lookup_scale":
            attr, k = rng.choice(additive), rng.randint(2, 9)
            f = world.fact(attr)

            def build(env: ToolEnv) -> tuple:
                s1 = _run(env, "lookup", f.key)
                return (f"What is {k} times the {attr.name} of {f.entity}?",
                        [s1, _run(env, "calculator", f"{format_number(s1.value)} * {k}")], None)
            return name, [f], build
        attr = rng.choice(_ATTRS)
        f1, f2 = world.fact(attr), world.fact(attr)
        while f2.value == f1.value:
            f2 = Fact(f2.entity, f2.attribute, world.value(attr), f2.unit)

        def build(env: ToolEnv) -> tuple:
            s = [_run(env, "lookup", f1.key), _run(env, "lookup", f2.key)]
            win, lose = (f1, f2) if f1.value > f2.value else (f2, f1)
            return (f"Which has the larger {attr.name}, {f1.entity} or {f2.entity}?", s, (win.entity, (lose.entity,)))
        return name, [f1, f2], build
    if steps == 3:
        name = rng.choice(("sum", "difference", "scale_convert"))
        if name in ("sum", "difference"):
            attr = rng.choice(additive)
            f1, f2 = world.fact(attr), world.fact(attr)

            def build(env: ToolEnv) -> tuple:
                s1, s2 = _run(env, "lookup", f1.key), _run(env, "lookup", f2.key)
                if name == "sum":
                    q = f"What is the {attr.name} of {f1.entity} and {f2.entity} added together?"
                    expr = f"{format_number(s1.value)} + {format_number(s2.value)}"
                else:
                    q = f"What is the {attr.name} of {f1.entity} minus the {attr.name} of {f2.entity}?"
                    expr = f"{format_number(s1.value)} - {format_number(s2.value)}"
                return q, [s1, s2, _run(env, "calculator", expr)], None
            return name, [f1, f2], build
        attr = rng.choice([a for a in convertible if a.additive])
        f, k, dst = world.fact(attr), rng.randint(2, 9), rng.choice(attr.targets)

        def build(env: ToolEnv) -> tuple:
            s1 = _run(env, "lookup", f.key)
            s2 = _run(env, "calculator", f"{format_number(s1.value)} * {k}")
            return (f"What is {k} times the {attr.name} of {f.entity}, in {dst}?",
                    [s1, s2, _run(env, "convert", f"{s2.output} {attr.unit} to {dst}")], None)
        return name, [f], build
    name = rng.choice(("sum_convert", "sum_of_three"))
    if name == "sum_convert":
        attr = rng.choice([a for a in convertible if a.additive])
        f1, f2, dst = world.fact(attr), world.fact(attr), rng.choice(attr.targets)

        def build(env: ToolEnv) -> tuple:
            s1, s2 = _run(env, "lookup", f1.key), _run(env, "lookup", f2.key)
            s3 = _run(env, "calculator", f"{format_number(s1.value)} + {format_number(s2.value)}")
            return (f"What is the {attr.name} of {f1.entity} and {f2.entity} added together, in {dst}?",
                    [s1, s2, s3, _run(env, "convert", f"{s3.output} {attr.unit} to {dst}")], None)
        return name, [f1, f2], build
    attr = rng.choice(additive)
    fs = [world.fact(attr) for _ in range(3)]

    def build(env: ToolEnv) -> tuple:
        s = [_run(env, "lookup", f.key) for f in fs]
        expr = " + ".join(format_number(x.value) for x in s)
        names = f"{fs[0].entity}, {fs[1].entity} and {fs[2].entity}"
        return f"What is the total {attr.name} of {names}?", [*s, _run(env, "calculator", expr)], None
    return name, fs, build


def _finish(task_id: str, question: str, plan: Sequence[PlanStep], facts: tuple[Fact, ...], named: Any,
            difficulty: Mapping[str, float], source: str, meta: Mapping[str, Any]) -> ToolTask:
    if named is not None:
        answer, wrong = named
        return ToolTask(task_id, question, answer, None, tuple(plan), facts, dict(difficulty), tuple(wrong),
                        source, dict(meta))
    last = plan[-1]
    unit = last.output.split(" ", 1)[1] if " " in last.output else ""
    answer = f"{format_number(last.value)} {unit}".strip()
    return ToolTask(task_id, question, answer, last.value, tuple(plan), facts, dict(difficulty), (), source,
                    dict(meta))


def generate_tasks(rng: random.Random, difficulty: Mapping[str, float], n: int, *,
                   id_prefix: str = "ta", pool: str = "train") -> list[ToolTask]:
    """Generate ``n`` template tasks at ``difficulty`` from ``rng``.

    Args:
        rng: the only source of randomness (same state -> same tasks).
        difficulty: knobs of :data:`DIFFICULTY_BOUNDS` (missing ones take their low bound): ``steps``
            (tool calls of the gold plan, 1-4), ``distractors`` (unneeded facts in the table),
            ``magnitude`` (facts' values in ``[10**(m-1), 10**m)``).
        n: number of tasks, >= 0.
        id_prefix: task ids are ``f"{id_prefix}-{i:04d}"``.
        pool: name pool, "train" or "validation" (disjoint syllables, adjectives and nouns).

    Returns:
        ``n`` tasks, each with a plan of exactly ``steps`` tool calls.

    Raises:
        ConfigError: a bad difficulty knob (names ``difficulty.<key>``), ``n < 0`` or an unknown pool.
    """
    steps, distractors, magnitude = _knobs(difficulty, "difficulty")
    if n < 0 or pool not in _POOLS:
        raise ConfigError(f"generate_tasks: n must be >= 0 and pool one of {sorted(_POOLS)}, got {n}, {pool!r}")
    out: list[ToolTask] = []
    for i in range(n):
        world = _World(rng, magnitude, pool)
        name, needed, build = _template(world, steps)
        facts = _distract(world, needed, distractors)
        question, plan, named = build(ToolEnv.of(facts))
        out.append(_finish(f"{id_prefix}-{i:04d}", question, plan, facts, named,
                           {"steps": steps, "distractors": distractors, "magnitude": magnitude},
                           "generated", {"template": name}))
    return out


# --- exploration tasks ----------------------------------------------------------------------------


def _walk(world: _World, env_facts: list[Fact], steps: int) -> tuple[list[tuple[str, str]], str] | None:
    """A random walk of ``steps`` tool calls as (tool, input) pairs with a phrase per move; None if stuck."""
    rng = world.rng
    attr = rng.choice(_ATTRS)
    start = world.fact(attr)
    env_facts.append(start)
    env = ToolEnv.of(env_facts)
    calls = [("lookup", start.key)]
    value = env.run("lookup", start.key).value
    unit, phrases = attr.unit, [f"Look up the {attr.name} of {start.entity}"]
    assert value is not None
    while len(calls) < steps:
        moves = ["scale", "divide"]
        if unit == attr.unit and attr.targets and len(calls) < steps:
            moves.append("convert")
        if unit == attr.unit and attr.additive and len(calls) + 2 <= steps:
            moves.append("add")
        move = rng.choice(moves)
        if move == "add":
            other = world.fact(attr)
            env_facts.append(other)
            env = ToolEnv.of(env_facts)
            calls.append(("lookup", other.key))
            expr = f"{format_number(value)} + {format_number(other.value)}"
            phrases.append(f"add the {attr.name} of {other.entity}")
        elif move == "convert":
            dst = rng.choice(attr.targets)
            calls.append(("convert", f"{format_number(value)} {unit} to {dst}"))
            obs = env.run(*calls[-1])
            if obs.value is None:
                return None
            value, unit = obs.value, dst
            phrases.append(f"convert it to {dst}")
            continue
        else:
            k = rng.randint(2, 9)
            expr = f"{format_number(value)} {'*' if move == 'scale' else '/'} {k}"
            phrases.append(f"{'multiply' if move == 'scale' else 'divide'} it by {k}")
        calls.append(("calculator", expr))
        obs = env.run(*calls[-1])
        if obs.value is None or not math.isfinite(obs.value):
            return None
        value = obs.value
    text = ", then ".join(phrases)
    return calls, f"{text[0].upper()}{text[1:]}. What is the result" + (f" in {unit}?" if attr.targets else "?")


def explore_tasks(rng: random.Random, difficulty: Mapping[str, float], n: int, *,
                  id_prefix: str = "tx", pool: str = "train") -> list[ToolTask]:
    """Generate ``n`` tasks by random walks in the environment, each walk retold as a question.

    A walk looks up a random fact, then applies ``steps - 1`` more random applicable tool calls to the
    running value (multiply or divide by 2-9, convert to another unit of its kind, add the same attribute
    of another entity: a lookup then a sum). Every call runs in the real environment; the question names
    the moves in order ("Look up the weight of copper kettle, then multiply it by 3, then convert it to
    lb. What is the result in lb?") and the gold plan is the walk. Walks that hit a tool error are
    redrawn. Same arguments as :func:`generate_tasks`.

    Raises:
        ConfigError: as :func:`generate_tasks`.
    """
    steps, distractors, magnitude = _knobs(difficulty, "difficulty")
    if n < 0 or pool not in _POOLS:
        raise ConfigError(f"explore_tasks: n must be >= 0 and pool one of {sorted(_POOLS)}, got {n}, {pool!r}")
    out: list[ToolTask] = []
    while len(out) < n:
        world = _World(rng, magnitude, pool)
        needed: list[Fact] = []
        walked = _walk(world, needed, steps)
        if walked is None:
            continue
        calls, question = walked
        facts = _distract(world, needed, distractors)
        env = ToolEnv.of(facts)
        plan = [_run(env, tool, arg) for tool, arg in calls]
        out.append(_finish(f"{id_prefix}-{len(out):04d}", question, plan, facts, None,
                           {"steps": steps, "distractors": distractors, "magnitude": magnitude},
                           "explored", {"template": "walk"}))
    return out
