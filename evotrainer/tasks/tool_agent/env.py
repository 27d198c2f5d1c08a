"""The tool-agent environment: the tools bound to one task's facts, run by name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evotrainer.tasks.tool_agent.tools import TOOLS, Fact, Observation, Tool, calculator, convert, lookup

__all__ = ["ToolEnv"]


@dataclass(frozen=True)
class ToolEnv:
    """The tools of one episode. Stateless and deterministic: the same call always gives the same
    observation, so a trajectory can be replayed and the gold plan recomputed.

    Attributes:
        facts: the task's lookup table (gold and distractor facts).
        tools: the tools offered, in prompt order.
    """

    facts: tuple[Fact, ...] = ()
    tools: tuple[Tool, ...] = TOOLS

    @classmethod
    def of(cls, facts: Sequence[Fact]) -> ToolEnv:
        """The environment over ``facts`` with every tool."""
        return cls(tuple(facts))

    def describe(self) -> str:
        """One line per tool for the prompt: ``- name[input]: description Input: schema``."""
        return "\n".join(f"- {t.name}: {t.description} Input: {t.input_schema}" for t in self.tools)

    def run(self, tool: str, tool_input: str) -> Observation:
        """Run ``tool`` on ``tool_input`` (both untrusted model text).

        Returns:
            The tool's observation; an unknown tool name gives an ``Error: ...`` observation naming the
            tools. Never raises.
        """
        name = tool.strip().casefold()
        if name == "calculator" and self._offers(name):
            return calculator(tool_input)
        if name == "convert" and self._offers(name):
            return convert(tool_input)
        if name == "lookup" and self._offers(name):
            return lookup(tool_input, self.facts)
        names = ", ".join(t.name for t in self.tools)
        return Observation(f"Error: unknown tool {tool.strip()[:40]!r}; the tools are {names}", False)

    def _offers(self, name: str) -> bool:
        return any(t.name == name for t in self.tools)
