"""The domain-neutral core: the task-family protocol and the records tasks, rollouts and rewards travel in.

The loops, the archive and the operators see a task only through :class:`Task` (an id, a source, an
identity, a size) and a family only through :class:`TaskFamily`; everything a domain knows (how a task is
generated, how a policy is rolled out on it: one turn or several with tools, how the output is rewarded
and scored, how a file of items is read) lives in its family. Families are found by
:func:`evotrainer.tasks.get_task_family` (a registered name or a dotted class path); the template a user copies
to add one is ``docs/adding_a_task_family.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evotrainer.backends.base import LLM, Generation, GenerationRequest, Message, SamplingParams

__all__ = [
    "NEUTRAL_TEXTS",
    "FamilyTexts",
    "MetaScore",
    "RewardBreakdown",
    "RolloutRequest",
    "Task",
    "TaskFamily",
    "content_hash",
    "family_texts",
    "single_turn_roll_out",
]


def content_hash(text: str) -> str:
    """sha256 hex of whitespace-normalised, lower-cased text: the identity of a task input."""
    norm = " ".join(text.split()).lower()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


class Task(Protocol):
    """What the domain-neutral layers read of a task (any family's task record satisfies it).

    Attributes:
        task_id: unique within its source.
        source: "generated", a dataset name or a file name; held-out splits and race orders are
            stratified by it.
        meta: free-form extra fields; not part of identity.
    """

    task_id: str
    source: str
    meta: Mapping[str, Any]

    @property
    def content_hash(self) -> str:
        """sha256 hex of the task's content: two items with equal hashes are the same task (leak checks)."""
        ...

    @property
    def text(self) -> str:
        """The task's input as the policy reads it (a document to summarise, a question with its facts); leak guards
        check that prompts do not copy what only training inputs say."""
        ...

    @property
    def size(self) -> int:
        """How large the item is, >= 0, in the family's unit (e.g. input words, or plan steps). Validation splits are stratified by it and run-time estimates scale with it."""
        ...

    def identity(self) -> list[Any]:
        """JSON-ready content that a batch id hashes (equal identities: interchangeable for caching)."""
        ...


@dataclass(frozen=True)
class RewardBreakdown:
    """A harness reward for one output.

    Attributes:
        total: sum_i w_i * R_i in [0, 1] (weights on the simplex), higher is better; 0.0 when the
            degenerate-output guard fired.
        components: each reward component in [0, 1], by name (reported even when guarded).
        degenerate: None, or the guard's reason (a short family-defined label, e.g. "empty" or "repetition").
    """

    total: float
    components: Mapping[str, float]
    degenerate: str | None = None


@dataclass(frozen=True)
class MetaScore:
    """The fixed meta-validation score of one output against one item.

    Attributes:
        value: in [0, 1], higher is better.
        parts: the metric's parts by name (e.g. "rouge_l", "exact_match"), each in [0, 1].
    """

    value: float
    parts: Mapping[str, float]


@dataclass(frozen=True)
class RolloutRequest:
    """One policy on one task, as the evaluator hands it to :meth:`TaskFamily.roll_out`.

    Attributes:
        messages: the opening chat (``family.build_messages(sections, task)``).
        params: the policy's decoding (its decoding genes applied to the run's default).
        adapter: the policy's LoRA adapter folder, or None (base model).
        sections: the policy's genome sections (a multi-step family renders later turns from them).
        task: the task.
        policy_id: the policy's id (recorded in trajectories).
        decoding: the policy's decoding genes, ``(name, value)`` pairs (``Policy.decoding``); a family reads its
            reading genes here (:data:`~evotrainer.genome.READING_GENES`: ``window_tokens``, which a family that
            reads long inputs in windows uses as its window size); empty: none, the family's settings.
    """

    messages: tuple[Message, ...]
    params: SamplingParams
    adapter: str | None
    sections: tuple[tuple[str, str], ...]
    task: Any
    policy_id: str = ""
    decoding: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class FamilyTexts:
    """Every domain text the search and judge show a model, owned by the family (like GEPA's adapter,
    which owns what its reflective proposer shows the model; Agrawal et al. 2025, arXiv:2507.19457).

    The generic rooms (``search/``, ``selfevolve/``) read these and name no domain themselves; an
    ``inner.*`` key set in config replaces the matching field for a run
    (:meth:`evotrainer.search.inner_config.InnerConfig.with_texts`).

    Attributes:
        task_hint: what the policy does, completing "an AI that ..." in mutator chats (``inner.task_hint``).
        output_name: the policy's output as a reflective chat names it after "The AI wrote", determiner
            included ("this answer", "these replies"; ``inner.output_name``).
        rule_phrases: rule sentences the structural edit may add and the phrase bank starts from, non-empty
            (``inner.rule_phrases``).
        mutation_styles: the LLM rewrite's style library at the start, one ``"name: instruction"`` or
            ``"name (section, ...): instruction"`` per style (``inner.mutation_styles``).
        domain_words: words a rewrite may use beyond its parent's and still be on topic (and that the leak
            guard allows), space-separated (``inner.domain_words``).
        prefills: answer prefills offered to a prompt that names no heading, non-empty
            (``inner.prefill_fallbacks``).
        reflection_hints: reward component -> what it asks of the output in plain words, shown to the
            mutator when that component was low (a missing name is shown with ``_`` as spaces;
            ``inner.reflection_hints``).
        judge_prompt: ``(system, user)`` of the self-evolution model judge; the user text has the fields
            ``{task_input}`` (``Task.text``) and ``{output}``; None: the family's outputs are judged by its
            rule rewards only (``selfevolve.model_judge_weight`` must be 0).
        size_name: what ``Task.size`` measures, as the evaluation report's per-length table names it.
    """

    task_hint: str
    output_name: str
    rule_phrases: tuple[str, ...]
    mutation_styles: tuple[str, ...]
    domain_words: str
    prefills: tuple[str, ...]
    reflection_hints: Mapping[str, str] = field(default_factory=dict)
    judge_prompt: tuple[str, str] | None = None
    size_name: str = "size"


NEUTRAL_TEXTS = FamilyTexts(
    task_hint="completes the task it is given",
    output_name="this answer",
    rule_phrases=("Follow the required output format exactly.", "Answer only what the task asks.",
                  "Check the answer before you give it.", "Keep the answer short."),
    mutation_styles=(
        "stricter: Make it stricter: state each requirement as a firm rule.",
        "simplify: Make it simpler: use short, plain sentences.",
        "reorder: Put the most important point first.",
        "persona (role): Describe a different expert persona suited to the task.",
        "concise: Make it more concise: remove words that add nothing.",
        "specific: Make it more specific and concrete.",
    ),
    domain_words="answer answers output outputs format rule rules step steps task tasks question questions example "
                 "examples exact exactly short clear clearly correct correctly check list each every first then only "
                 "always never",
    prefills=("Answer:",),
    judge_prompt=(
        "You grade the answer an AI gave to a task. Is it correct, complete and well organised? "
        "Reply with one integer from 0 (useless) to 10 (perfect) and nothing else.",
        "Task:\n\n{task_input}\n\nAnswer:\n\n{output}\n\nGrade (0-10):",
    ),
)
"""The texts of a family that gives none (domain-neutral; what ``task=custom`` runs get unless the family has ``texts``)."""


def family_texts(family: Any) -> FamilyTexts:
    """``family.texts`` when it is a :class:`FamilyTexts`, else :data:`NEUTRAL_TEXTS`."""
    texts = getattr(family, "texts", None)
    return texts if isinstance(texts, FamilyTexts) else NEUTRAL_TEXTS


def single_turn_roll_out(llm: LLM, requests: Sequence[RolloutRequest]) -> list[Generation]:
    """The single-turn rollout: one batched ``llm.generate`` call over the opening chats, in order.

    The answer is the model's one reply; its text is what ``reward`` and ``meta_score`` read.
    """
    return llm.generate([GenerationRequest(r.messages, r.params, r.adapter) for r in requests])


class TaskFamily(Protocol):
    """What the loops need from a task domain (module docstring; template in ``docs/adding_a_task_family.md``).

    Everything the mutator and the judge model read about the domain (the task hint, the name of the
    output, rule phrases, styles, vocabulary, prefills, reward hints, the judge prompt) is the family's
    optional ``texts`` attribute, a :class:`FamilyTexts` (:func:`family_texts`; a family without one gets
    :data:`NEUTRAL_TEXTS`); an ``inner.*`` key set in config overrides one of them for a run.

    Optional methods, looked up with ``getattr`` (a family without them works): ``ground_truth(task) ->
    Mapping`` gives the JSON-ready truth the self-evolution pool archives (default: the task's identity);
    ``probe_outputs(items) -> list[dict[str, str]]`` gives the yardstick's probe texts per item
    (named texts such as ``reference`` and ``skeleton``; ``harness/yardstick.py``), which every
    evolve run scores at start to check that ``meta_score`` rewards the task, not a template; and
    ``prepare_meta(outputs, tasks)`` is called before a batch is meta-scored (e.g. to embed every sentence
    in one call); and when ``meta_score`` takes an ``embedder=`` keyword, ``mode=evaluate`` passes the run's
    embedder unless ``wants_embedder(items)`` says these items need none.

    Attributes:
        name: the family's registry name (``task.name``).
        scorer_version: changes whenever reward or metric code changes scores (part of the fitness-cache key).
        rollout_style: ``"single_turn"`` (the output is the model's reply) or ``"multi_step"`` (the output
            is an episode serialised by the family; the run archives each one as a ``trajectories`` event).
    """

    name: str
    scorer_version: str
    rollout_style: str

    @property
    def difficulty_bounds(self) -> Mapping[str, tuple[float, float]]:
        """Each difficulty knob's (low, high), in the knob's natural unit."""
        ...

    @property
    def default_difficulty(self) -> Mapping[str, float]:
        """Each difficulty knob's default, inside :attr:`difficulty_bounds`."""
        ...

    @property
    def reward_components(self) -> tuple[str, ...]:
        """Names of the reward components, in a fixed order."""
        ...

    @property
    def default_reward_weights(self) -> Mapping[str, float]:
        """Default reward weights by component (on the simplex)."""
        ...

    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[Any]:
        """Generate ``n`` tasks at ``difficulty`` from ``rng`` (deterministic given the rng state)."""
        ...

    def build_messages(self, sections: Sequence[tuple[str, str]], task: Any) -> tuple[Message, ...]:
        """The opening chat a policy with these prompt sections sends for ``task``."""
        ...

    def roll_out(self, llm: LLM, requests: Sequence[RolloutRequest]) -> list[Generation]:
        """One :class:`~evotrainer.backends.base.Generation` per request, in order: the single-turn answer
        (:func:`single_turn_roll_out`), or for a multi-step family the whole episode serialised in ``text``
        (what ``reward``/``meta_score`` read back) with ``generated_tokens`` summed over its turns. May raise
        when the backend fails (the evaluator then fails the batch's evaluations, never the run)."""
        ...

    def reward(self, output: str, task: Any, weights: Mapping[str, float]) -> RewardBreakdown:
        """Harness reward of ``output`` on ``task`` under reward ``weights`` (on the simplex)."""
        ...

    def meta_score(self, output: str, task: Any) -> MetaScore:
        """Fixed meta-validation score of ``output`` on ``task``; no harness parameter touches it."""
        ...

    def load_validation(self, path: str | Path, limit: int | None = None,
                        field_map: Mapping[str, str] | None = None) -> list[Any]:
        """The first ``limit`` items (all when None) of a data file; DataError names ``file:line``."""
        ...

    def load_dataset(self, path: str | Path, *, fmt: str = "auto", field_map: Mapping[str, str] | None = None,
                     limit: int | None = None, field_map_key: str = "task.field_map") -> tuple[list[Any], str]:
        """Items of any data shape the family reads (``mode=evaluate``) and the shape read; ConfigError names
        ``evaluate.format`` or ``field_map_key``, DataError ``file:line``."""
        ...

    def strata(self, task: Any) -> Mapping[str, str]:
        """Labels an evaluation groups items by: ``source``, ``domain``, ``length`` (any text; "" = none)."""
        ...

    def describe_items(self, items: Sequence[Any]) -> tuple[list[str], dict[str, Any]]:
        """Lines to print about how a dataset was read, and JSON-ready facts for the results file."""
        ...

    def training_chats(self, sections: Sequence[tuple[str, str]], task: Any,
                       output: str) -> list[tuple[Message, ...]]:
        """The chats a supervised fine-tune learns ``output`` from under the prompt ``sections``: in each,
        the last (assistant) message is learnt and everything before it is masked context (one chat for a
        single reply; one per model reply of an episode)."""
        ...

    def reference_answer(self, task: Any) -> str | None:
        """A written reference output of ``task`` to replay in self-evolution (e.g. a human-written one), or None."""
        ...

    def experience(self, task: Any, output: str) -> str | None:
        """Optional: an exemplar text of ``output`` when it solved the *generated* ``task`` (experience
        retrieval offers it to prompts of similar later tasks), else None. A family without it offers none."""
        ...

    def exemplar(self, task: Any, max_items: int = 2) -> str | None:
        """A short worked example of a good output built from a *generated* task's ground truth (a few-shot
        gene for prompts), or None when the family offers none."""
        ...
