"""Variation and selection operators on :class:`~evotrainer.genome.Policy` genomes.

Every operator is a pure function named by kind, as in DEAP (``sel*``, ``cx*``, ``mut*``): it takes
its inputs and an injected ``random.Random``, never mutates its arguments, never reads globals, and
returns new policies made with :meth:`Policy.child` (parent ids, operator name and generation set).
Operator names are ``kind`` or ``kind/detail`` (e.g. ``mut_structural/drop``,
``mut_llm_rewrite/stricter``); ``operator.split("/")[0]`` gives the kind.

LLM operators run in two phases so that a whole generation's model calls go out in one batch: ``*_plan`` picks
what to change and builds the :class:`~evotrainer.backends.base.GenerationRequest`; the loop sends all plans'
requests in one ``mutator.generate`` call; :func:`judge_rewrite` turns each returned text into a child, or into
the reason it was rejected.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.genome import PREFILL_SECTION, REQUIRED_SECTIONS, Policy, instruction_sections
from evotrainer.search.cleaning import (
    bullet_prefix,
    clean_mutator_text,
    join_sentences,
    normalize_sentence,
    on_topic_fraction,
    split_sentences,
    word_count,
)
from evotrainer.search.leakage import LeakGuard
from evotrainer.search.mutation_prompts import (
    NEUTRAL_STYLES,
    MutationStyle,
    build_merge_messages,
    build_rewrite_messages,
    styles_for,
)
from evotrainer.search.prefill import MAX_PREFILL_WORDS
from evotrainer.tasks.base import NEUTRAL_TEXTS

__all__ = ["MUTATOR_PARAMS", "MutationPlan", "align_sections", "cx_llm_merge_plan", "cx_sections", "is_valid",
           "judge_rewrite", "mut_llm_rewrite_plan", "mut_structural", "seeded", "sel_tournament",
           "validity_problem"]

MUTATOR_PARAMS = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=96, no_repeat_ngram_size=4)
"""Default mutator decoding: sampled (diverse rewrites), each plan with its own seed drawn from the
loop's rng, so a rewrite depends only on the request and not on the rest of the batch."""


def validity_problem(
    policy: object,
    required_sections: Sequence[str] = REQUIRED_SECTIONS,
    max_words: int = 160,
    may_be_empty: Sequence[str] | None = None,
) -> str | None:
    """Why ``policy`` is not a valid genome, or None when it is.

    Args:
        policy: the candidate (anything; non-policies are invalid).
        required_sections: section names that must be present.
        max_words: word budget of the whole prompt (all sections together), >= 1.
        may_be_empty: required sections allowed to hold empty text; None: every one (a prompt of one role line
            and nothing else is a genome), as long as one required section holds text.

    Returns:
        A short reason ("missing section 'rules'", "142 words > 120", ...) or None.
    """
    if not isinstance(policy, Policy):
        return f"not a Policy but {type(policy).__name__}"
    names = [name for name, _ in policy.sections]
    if len(set(names)) != len(names):
        return "duplicate section names"
    if any(not isinstance(name, str) or not name for name in names):
        return "empty section name"
    if any(not isinstance(text, str) for _, text in policy.sections):
        return "section text is not a string"
    texts = dict(policy.sections)
    for name in required_sections:
        if name not in texts:
            return f"missing section {name!r}"
        if not texts[name].strip() and may_be_empty is not None and name not in may_be_empty:
            return f"section {name!r} is empty"
    if required_sections and not any(texts[name].strip() for name in required_sections):
        return "every section is empty"
    total = sum(word_count(text) for text in texts.values())
    if total > max_words:
        return f"{total} words > {max_words}"
    if PREFILL_SECTION in texts and word_count(texts[PREFILL_SECTION]) > MAX_PREFILL_WORDS:
        return f"prefill of {word_count(texts[PREFILL_SECTION])} words > {MAX_PREFILL_WORDS}"
    for name, value in policy.decoding:
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"decoding gene {name!r} is not a finite number"
    return None


def is_valid(
    policy: object,
    required_sections: Sequence[str] = REQUIRED_SECTIONS,
    max_words: int = 160,
    may_be_empty: Sequence[str] | None = None,
) -> bool:
    """True when ``policy`` is a Policy with the required sections, at least one of them holding text (each one,
    ``may_be_empty`` excepted, when that is given), within ``max_words`` words in total: a prompt of one role line and its children are
    genomes. See :func:`validity_problem`."""
    return validity_problem(policy, required_sections, max_words, may_be_empty) is None


def sel_tournament(
    population: Sequence[Policy], fitness: Sequence[float], k: int, rng: random.Random, tournsize: int
) -> list[Policy]:
    """Tournament selection (as DEAP's ``selTournament``, but with an injected rng).

    Each of the ``k`` winners is the fittest of ``tournsize`` aspirants drawn uniformly *with*
    replacement (DEAP's ``selRandom`` semantics); ties go to the first aspirant drawn.

    Args:
        population: individuals, length n >= 1.
        fitness: shape (n,), finite, higher is better; ``fitness[i]`` belongs to ``population[i]``.
        k: number of winners, >= 0.
        rng: random source.
        tournsize: aspirants per tournament, >= 1.

    Returns:
        ``k`` policies (the same objects as in ``population``; repeats possible).
    """
    n = len(population)
    chosen: list[Policy] = []
    for _ in range(k):
        aspirants = [rng.randrange(n) for _ in range(tournsize)]
        best = max(aspirants, key=lambda i: fitness[i])  # max keeps the first of equal keys
        chosen.append(population[best])
    return chosen


def align_sections(
    p1: Policy, p2: Policy, similarity: Callable[[str, str], float] | None = None, *, min_similarity: float = 0.5
) -> list[tuple[str, str]]:
    """Pairs ``(name in p1, name in p2)`` of corresponding sections: by name, then by embedding similarity.

    Sections carried under the same name pair first. The remaining ones (e.g. ``format`` in one parent,
    ``output_format`` in the other) are paired greedily by decreasing ``similarity(text1, text2)``,
    each section at most once, only when the similarity is at least ``min_similarity``.

    Args:
        p1, p2: the parents.
        similarity: ``(text_a, text_b) -> cosine in [-1, 1]`` (e.g. mean-embedding cosine); None pairs by
            name only.
        min_similarity: lowest cosine at which two differently named sections count as corresponding.

    Returns:
        The pairs, named pairs first in ``p1`` order, then similarity pairs best first.
    """
    t2 = dict(p2.sections)
    pairs = [(name, name) for name, _ in p1.sections if name in t2]
    if similarity is None:
        return pairs
    left = [(n, t) for n, t in p1.sections if n not in t2 and t.strip()]
    right = [(n, t) for n, t in p2.sections if n not in dict(p1.sections) and t.strip()]
    scored = sorted(((similarity(a, b), i, j) for i, (_, a) in enumerate(left) for j, (_, b) in enumerate(right)),
                    key=lambda x: (-x[0], x[1], x[2]))
    used_l: set[int] = set()
    used_r: set[int] = set()
    for sim, i, j in scored:
        if sim < min_similarity:
            break
        if i in used_l or j in used_r:
            continue
        used_l.add(i)
        used_r.add(j)
        pairs.append((left[i][0], right[j][0]))
    return pairs


def cx_sections(
    p1: Policy, p2: Policy, rng: random.Random, generation: int, *,
    section_similarity: Callable[[str, str], float] | None = None, min_section_similarity: float = 0.5,
) -> tuple[Policy, Policy]:
    """Section-aligned uniform crossover: sections matched by name, then by embedding similarity.

    Corresponding sections (:func:`align_sections`) swap texts between the children with probability
    1/2; a child keeps its own section names and order. When the parents differ in at least two
    corresponding sections, at least one is swapped and at least one is not (so a child is never a
    plain copy of a parent). A section without a counterpart stays with the child of its parent.
    Decoding genes recombine by name over the union of both parents' genes (a gene a parent lacks
    stands for the run default, so a swap may move a gene to the other child or drop it); each child
    keeps its first parent's adapter. Children contain only section texts of the parents.

    Args:
        p1: first parent (first parent of child 1, co-parent of child 2).
        p2: second parent.
        rng: random source.
        generation: generation number stamped on the children.
        section_similarity: ``(text_a, text_b) -> cosine`` used to pair differently named sections;
            None pairs by name only.
        min_section_similarity: lowest cosine for such a pair.

    Returns:
        ``(child1, child2)``, operator ``"cx_sections"``.
    """
    t1, t2 = dict(p1.sections), dict(p2.sections)
    pairs = align_sections(p1, p2, section_similarity, min_similarity=min_section_similarity)
    differing = [k for k, (a, b) in enumerate(pairs) if t1[a] != t2[b]]
    swap = [rng.random() < 0.5 for _ in pairs]
    if len(differing) >= 2:
        n_swapped = sum(swap[k] for k in differing)
        if n_swapped == 0:
            swap[rng.choice(differing)] = True
        elif n_swapped == len(differing):
            swap[rng.choice(differing)] = False
    take1 = {a: t2[b] for (a, b), s in zip(pairs, swap, strict=True) if s}
    take2 = {b: t1[a] for (a, b), s in zip(pairs, swap, strict=True) if s}
    sections1 = [(name, take1.get(name, text)) for name, text in p1.sections]
    sections2 = [(name, take2.get(name, text)) for name, text in p2.sections]

    decoding1, decoding2 = _cross_decoding(p1.decoding, p2.decoding, rng)

    child1 = p1.child(sections1, operator="cx_sections", generation=generation, parents=(p2,), decoding=decoding1)
    child2 = p2.child(sections2, operator="cx_sections", generation=generation, parents=(p1,), decoding=decoding2)
    return child1, child2


def _cross_decoding(
    g1: Sequence[tuple[str, float]], g2: Sequence[tuple[str, float]], rng: random.Random
) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """Uniform crossover of decoding genes by name over the union; children sorted by name."""
    d1, d2 = dict(g1), dict(g2)
    if not d1 and not d2:
        return (), ()
    out1, out2 = dict(d1), dict(d2)
    for name in sorted(set(d1) | set(d2)):
        if rng.random() < 0.5:
            for src, dst in ((d2, out1), (d1, out2)):
                if name in src:
                    dst[name] = src[name]
                else:
                    dst.pop(name, None)
    return tuple(sorted(out1.items())), tuple(sorted(out2.items()))

def mut_structural(
    parent: Policy,
    rng: random.Random,
    generation: int,
    *,
    phrase_bank: Sequence[str] = NEUTRAL_TEXTS.rule_phrases,
    section: str = "rules",
    max_words: int = 160,
) -> Policy:
    """Add, drop, swap or move one rule sentence of one section (no model needed).

    The edit kind is drawn uniformly among those that apply: ``add`` (a bank phrase not already
    present, if the prompt stays within ``max_words``), ``drop`` (needs >= 2 sentences), ``swap``
    (two sentences change places; needs >= 2), ``move`` (one sentence moves to another position, the
    others keep their order; needs >= 3, since with 2 it is a swap). In a bulleted section an added phrase gets the
    section's bullet marker. When no kind applies the child has the parent's genome (operator
    ``mut_structural/none``; the loop rejects it as a duplicate).

    Args:
        parent: the policy to edit (not modified).
        rng: random source.
        generation: generation number stamped on the child.
        phrase_bank: candidate sentences for ``add``.
        section: section to edit; when absent or empty, a random non-empty section is edited.
        max_words: word budget of the whole prompt.

    Returns:
        The child, operator ``mut_structural/<add|drop|swap|move|none>``.
    """
    texts = dict(parent.sections)
    if section == PREFILL_SECTION or not texts.get(section, "").strip():
        candidates = [name for name, text in instruction_sections(parent.sections) if text.strip()]
        if not candidates:
            return parent.child(parent.sections, operator="mut_structural/none", generation=generation)
        section = rng.choice(candidates)
    text = texts[section]
    sentences = split_sentences(text)
    present = {normalize_sentence(s) for s in sentences}
    fresh = [p for p in phrase_bank if normalize_sentence(p) not in present]
    total_words = sum(word_count(t) for t in texts.values())
    kinds = []
    if fresh and any(total_words + word_count(p) <= max_words for p in fresh):
        kinds.append("add")
    if len(sentences) >= 2:
        kinds += ["drop", "swap"]
    if len(sentences) >= 3:
        kinds.append("move")
    if not kinds:
        return parent.child(parent.sections, operator="mut_structural/none", generation=generation)
    kind = rng.choice(kinds)
    new = list(sentences)
    if kind == "add":
        phrase = rng.choice([p for p in fresh if total_words + word_count(p) <= max_words])
        bullet = bullet_prefix(sentences[-1]) if sentences else ""
        if bullet and all(bullet_prefix(s) for s in sentences):
            phrase = bullet.lstrip() + phrase
        new.insert(rng.randrange(len(new) + 1), phrase)
    elif kind == "drop":
        del new[rng.randrange(len(new))]
    elif kind == "swap":
        i, j = rng.sample(range(len(new)), 2)
        new[i], new[j] = new[j], new[i]
    else:
        i, j = rng.sample(range(len(new)), 2)
        new.insert(j, new.pop(i))
    new_text = join_sentences(new, text)
    sections = [(name, new_text if name == section else t) for name, t in parent.sections]
    return parent.child(sections, operator=f"mut_structural/{kind}", generation=generation)


@dataclass(frozen=True)
class MutationPlan:
    """A pending LLM variation: what to change and the request that asks the mutator to change it.

    Attributes:
        parent: first parent (the child is built from it).
        section: name of the section being rewritten or merged.
        operator: operator name the child will carry (``mut_llm_rewrite/<style>`` or ``cx_llm_merge``).
        instruction: the change requested (echoes of it in the answer are rejected).
        request: the mutator chat; send ``plan.request`` for every plan in one ``generate`` call.
        generation: generation number the child will carry.
        co_parent: second parent of a merge; None for a rewrite.
        shown: training material the request showed the mutator (a reflection's failed output on a
            training task); terms copied from it count as leaks (:mod:`evotrainer.search.leakage`).
    """

    parent: Policy
    section: str
    operator: str
    instruction: str
    request: GenerationRequest
    generation: int
    co_parent: Policy | None = None
    shown: tuple[str, ...] = ()


def seeded(params: SamplingParams, rng: random.Random) -> SamplingParams:
    """``params`` with a seed drawn from ``rng`` when it samples (so a rewrite depends only on its request)."""
    return replace(params, seed=rng.randrange(2**31)) if params.temperature > 0 else params


def mut_llm_rewrite_plan(
    parent: Policy,
    rng: random.Random,
    generation: int,
    *,
    params: SamplingParams = MUTATOR_PARAMS,
    styles: tuple[MutationStyle, ...] = NEUTRAL_STYLES,
    task_hint: str = NEUTRAL_TEXTS.task_hint,
) -> MutationPlan:
    """Plan a semantic mutation: the mutator rewrites one section following one mutation style.

    The section is drawn uniformly among the parent's non-empty sections, the style among
    :func:`~evotrainer.search.mutation_prompts.styles_for` that section; a sampling seed is drawn from
    ``rng`` when ``params`` samples. Style source: EvoPrompt / PromptBreeder mutation prompts.

    Args:
        parent: the policy to mutate (not modified).
        rng: random source.
        generation: generation number the child will carry.
        params: mutator decoding settings (their ``seed`` is replaced by a drawn one when sampling).
        styles: the mutation style library.
        task_hint: what the policy does ("an AI that ...") for the mutator's system message.

    Returns:
        The plan; turn the mutator's answer into a child with :func:`judge_rewrite`.
    """
    editable = instruction_sections(parent.sections) or list(parent.sections)
    candidates = [name for name, text in editable if text.strip()] or [n for n, _ in editable]
    section = rng.choice(candidates)
    style = rng.choice(styles_for(section, styles))
    messages = build_rewrite_messages(parent.section(section), style.instruction, task_hint=task_hint,
                                      section=section)
    request = GenerationRequest(messages=messages, params=seeded(params, rng))
    return MutationPlan(parent, section, f"mut_llm_rewrite/{style.name}", style.instruction, request, generation)


def cx_llm_merge_plan(
    p1: Policy,
    p2: Policy,
    rng: random.Random,
    generation: int,
    *,
    params: SamplingParams = MUTATOR_PARAMS,
    task_hint: str = NEUTRAL_TEXTS.task_hint,
) -> MutationPlan | None:
    """Plan a semantic crossover: the mutator merges both parents' versions of one section.

    The section is drawn among those both parents carry with different, non-empty texts.

    Args:
        p1: first parent (the child is built from it).
        p2: co-parent.
        rng: random source.
        generation: generation number the child will carry.
        params: mutator decoding settings (seed drawn from ``rng`` when sampling).
        task_hint: what the policy does, for the mutator's system message.

    Returns:
        The plan (operator ``cx_llm_merge``), or None when no section differs.
    """
    t2 = dict(p2.sections)
    candidates = [n for n, t in instruction_sections(p1.sections) if t.strip() and t2.get(n, "").strip() and t2[n] != t]
    if not candidates:
        return None
    section = rng.choice(candidates)
    messages = build_merge_messages(p1.section(section), t2[section], task_hint=task_hint, section=section)
    request = GenerationRequest(messages=messages, params=seeded(params, rng))
    return MutationPlan(p1, section, "cx_llm_merge", "Combine A and B", request, generation, co_parent=p2)


def judge_rewrite(
    plan: MutationPlan,
    text: str,
    *,
    required_sections: Sequence[str] = REQUIRED_SECTIONS,
    max_words: int = 160,
    similarity: Callable[[str, str], float] | None = None,
    similarity_band: tuple[float, float] = (0.0, 1.0),
    min_on_topic: float = 0.0,
    vocabulary: frozenset[str] = frozenset(),
    max_growth: float | None = None,
    leak_guard: LeakGuard | None = None,
) -> Policy | str:
    """Turn the mutator's answer to ``plan`` into a child, or say why the answer is rejected.

    The answer is cleaned (:func:`~evotrainer.search.cleaning.clean_mutator_text`); it is rejected
    when nothing valid remains, when it equals the section it replaces, when it has more than
    ``max(max_growth * old words, 30)`` words, when fewer than ``min_on_topic`` of its content words
    occur in the parent section(s) or ``vocabulary``
    (:func:`~evotrainer.search.cleaning.on_topic_fraction`), when ``leak_guard`` finds names, numbers or
    phrases of the training inputs (or of ``plan.shown``) that neither parent's prompt nor the
    instruction holds (:mod:`evotrainer.search.leakage`), when ``similarity`` to the parent's section (for a
    merge: the higher of the two parents') falls outside ``similarity_band`` (inclusive; e.g. embedding
    cosine, to drop off-topic or unchanged rewrites), or when the child is not a valid genome
    (:func:`validity_problem`).

    Args:
        plan: the plan the answer belongs to.
        text: the mutator's raw answer (untrusted).
        required_sections: sections the child must carry.
        max_words: word budget of the whole prompt.
        similarity: optional ``(old, new) -> float`` score, higher means more similar.
        similarity_band: ``(low, high)`` accepted similarity.
        min_on_topic: lowest accepted on-topic share of content words, in [0, 1] (0 disables).
        vocabulary: domain words that count as on topic.
        max_growth: largest accepted length ratio new/old section (None disables).
        leak_guard: the training batch's leak guard (None disables the leak check).

    Returns:
        The child (operator ``plan.operator``), or a short reason: ``"unusable answer"``, ``"unchanged"``,
        ``"grew to N words"``, ``"off topic (0.30)"``, ``"leak: names 'Priya'; numbers 'Q3'"``,
        ``"similarity 0.12 outside [0.3, 0.95]"`` or ``"invalid: <validity problem>"``.
    """
    old = plan.parent.section(plan.section)
    cleaned = clean_mutator_text(text, max_words=max_words, echo_of=(plan.instruction,))
    if cleaned is None:
        return "unusable answer"
    if normalize_sentence(cleaned) == normalize_sentence(old):
        return "unchanged"
    olds = [old] + ([plan.co_parent.section(plan.section)] if plan.co_parent is not None else [])
    if max_growth is not None and word_count(cleaned) > max(max_growth * max(map(word_count, olds)), 30):
        return f"grew to {word_count(cleaned)} words"
    if min_on_topic > 0 and (share := on_topic_fraction(" ".join(olds), cleaned, vocabulary)) < min_on_topic:
        return f"off topic ({share:.2f})"
    parents = (plan.co_parent,) if plan.co_parent is not None else ()
    if leak_guard is not None:
        allowed = [t for p in (plan.parent, *parents) for _, t in p.sections] + [plan.instruction]
        leaks = leak_guard(cleaned, allowed=allowed, shown=plan.shown)
        if leaks:
            return leaks.reason()
    if similarity is not None:
        score = max(similarity(o, cleaned) for o in olds)
        if not (similarity_band[0] <= score <= similarity_band[1]):
            return f"similarity {score:.2f} outside [{similarity_band[0]:g}, {similarity_band[1]:g}]"
    sections = [(name, cleaned if name == plan.section else t) for name, t in plan.parent.sections]
    child = plan.parent.child(sections, operator=plan.operator, generation=plan.generation, parents=parents)
    problem = validity_problem(child, required_sections, max_words)
    return child if problem is None else f"invalid: {problem}"
