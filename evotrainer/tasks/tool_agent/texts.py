"""What the search shows the mutator model about tool-agent policies (:class:`~evotrainer.tasks.base.FamilyTexts`).

No judge prompt: an episode is judged by the rule rewards (``selfevolve.model_judge_weight`` 0).
"""

from __future__ import annotations

from evotrainer.tasks.base import FamilyTexts

__all__ = ["TOOL_AGENT_TEXTS"]

TOOL_AGENT_TEXTS = FamilyTexts(
    task_hint="answers questions by calling tools (calculator, unit converter, facts lookup) step by step",
    output_name="these replies",
    rule_phrases=(
        "Look up every fact before you use it.",
        "Use the calculator for all arithmetic.",
        "Use convert for every change of unit.",
        "Call one tool per reply.",
        "Copy numbers exactly from the Observations.",
        "Give the unit with the final answer.",
        "Stop as soon as you know the answer.",
        "Never guess a number.",
    ),
    mutation_styles=(
        "stricter: Make it stricter: state each requirement as a firm rule.",
        "simplify: Make it simpler: use short, plain sentences.",
        "reorder: Put the most important point first.",
        "persona (role): Describe a different expert persona, such as a careful accountant.",
        "lookup_first (format, rules): Stress that every fact must be looked up before it is used.",
        "finish (format, rules): Stress that the Final Answer comes as soon as an Observation gives the result.",
        "one_tool (format, rules): Stress that each reply calls exactly one tool.",
        "concise: Make it more concise: remove words that add nothing.",
        "specific: Make it more specific and concrete.",
    ),
    domain_words=(
        "tool tools lookup look calculator calculate compute convert conversion unit units fact facts number numbers"
        " value values answer answers final question questions step steps observation observations action actions"
        " thought think reply replies check exact exactly copy result results first then next once never always"
        " one each every use guess table arithmetic"
    ),
    prefills=("Thought:",),
    reflection_hints={
        "correct": "the Final Answer must be the right number, with its unit",
        "efficiency": "the answer must come in as few tool calls as the question needs",
        "format": "every reply must be a Thought and one Action, or the Final Answer, in the required layout",
    },
    judge_prompt=None,
    size_name="plan length (steps)",
)
"""The tool-agent family's texts (``ToolAgent.texts``)."""
