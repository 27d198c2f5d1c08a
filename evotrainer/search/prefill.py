"""The answer-prefill gene: add, change or drop the text that starts a policy's answer.

A policy may carry a :data:`~evotrainer.genome.PREFILL_SECTION`; the backend puts it at the start
of the assistant turn and the model continues it. For a small model this decides whether it writes the
output or continues its input: on 10 meta-validation items of the default family SmolLM2-135M's S_val
rose from 0.1017 to 0.1299 (``inline_example``) and 0.0804 to 0.1003 (``secretary_markdown``) with a
prefill of the first heading. Candidates are read off the policy's own instructions (its first headings
or labels, e.g. ``## Summary`` or ``Steps:``), so a prefill agrees with the layout the prompt asks
for; ``fallbacks`` (the family's ``FamilyTexts.prefills``) serve prompts without headings.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from evotrainer.genome import PREFILL_SECTION, Policy, instruction_sections
from evotrainer.tasks.base import NEUTRAL_TEXTS

__all__ = ["MAX_PREFILL_HEADINGS", "MAX_PREFILL_WORDS", "mut_prefill", "prefill_candidates"]

MAX_PREFILL_HEADINGS = 4
"""How many of a prompt's headings may start the answer (each section it names, in order, up to this)."""

MAX_PREFILL_WORDS = 12
"""A longer prefill is not a start of the answer but an answer written for the model (invalid genome)."""

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s*([A-Za-z][\w /&'-]{0,40}?)\s*(?:[-–—:(].*)?$")
_LABEL = re.compile(r"^\s*(?:\d{1,2}[.)]\s*)?([A-Z][A-Za-z /&'-]{1,30}):\s*$")
_BULLET_STYLE = re.compile(r"^\s*([-*•]|\d{1,2}[.)])\s+\S", re.MULTILINE)


def _headings(text: str) -> list[str]:
    """Heading lines of ``text`` in order: ``## Name`` (descriptions after ``-``/``:`` cut) or ``Name:``."""
    out: list[str] = []
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            out.append(f"{m.group(1)} {m.group(2).strip()}")
            continue
        m = _LABEL.match(line)
        if m:
            out.append(f"{m.group(1).strip()}:")
    return list(dict.fromkeys(out))


def prefill_candidates(policy: Policy, fallbacks: Sequence[str] = NEUTRAL_TEXTS.prefills) -> list[str]:
    """Prefills that fit ``policy``'s instructions, most likely first.

    The first :data:`MAX_PREFILL_HEADINGS` headings or labels of its instruction sections, each followed by
    a newline and the bullet marker the prompt uses (``-`` by default), and the first heading alone;
    ``fallbacks`` when the prompt names no heading. A later heading is offered too: starting the answer at
    a section other than the first was the one prefill whose gain held on held-out
    items in the default job (seed 2, README "Seeds"). Deterministic (no RNG).
    """
    text = "\n".join(t for _, t in instruction_sections(policy.sections))
    heads = _headings(text)[:MAX_PREFILL_HEADINGS]
    if not heads:
        return list(dict.fromkeys(fallbacks))
    bullet = _BULLET_STYLE.search(text)
    marker = bullet.group(1) if bullet and not bullet.group(1)[0].isdigit() else "-"
    options = [f"{h}\n{marker}" for h in heads] + [f"{heads[0]}\n"]
    return list(dict.fromkeys(options))


def mut_prefill(
    parent: Policy, rng: random.Random, generation: int, *, fallbacks: Sequence[str] = NEUTRAL_TEXTS.prefills,
) -> Policy:
    """Add, swap or drop the answer prefill (no model needed).

    Without a prefill the child gets one of :func:`prefill_candidates`. With one, it is dropped with
    probability 1/4 (selection can learn that no prefill is better), otherwise swapped for a different
    candidate (dropped when there is none). The prefill section goes last; instruction sections are
    untouched.

    Args:
        parent: the policy (not modified).
        rng: random source.
        generation: generation number stamped on the child.
        fallbacks: prefills for prompts that name no heading.

    Returns:
        The child, operator ``mut_prefill/<add|swap|drop>``; ``mut_prefill/none`` (the parent's genome,
        rejected by the loop as a duplicate) when there is nothing to add.
    """
    current = dict(parent.sections).get(PREFILL_SECTION)
    others = [(n, t) for n, t in parent.sections if n != PREFILL_SECTION]
    options = [c for c in prefill_candidates(parent, fallbacks) if c != current]
    if current is not None and (not options or rng.random() < 0.25):
        return parent.child(others, operator="mut_prefill/drop", generation=generation)
    if not options:
        return parent.child(parent.sections, operator="mut_prefill/none", generation=generation)
    kind = "add" if current is None else "swap"
    return parent.child([*others, (PREFILL_SECTION, rng.choice(options))], operator=f"mut_prefill/{kind}",
                        generation=generation)
