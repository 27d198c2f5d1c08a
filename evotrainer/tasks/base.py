"""The domain-neutral core: the task-family protocol and the records tasks, rollouts and rewards travel in.

The loops, the archive and the operators see a task only through :class:`Task` (an id, a source, a group,
an identity, a size) and a family only through :class:`TaskFamily` (eight members) and the capability
protocols checked with ``isinstance`` (:class:`Datasets`, :class:`SelfEvolving`, :class:`Exemplars`,
:class:`Probes`, :class:`EmbeddingMeta`); everything a domain knows (how a task is
generated, how a policy is rolled out on it: one turn or several with tools, how the output is rewarded
and scored, how a file of items is read) lives in its family. Families are found by
:func:`evotrainer.tasks.get_task_family` (a registered name or a dotted class path); the template a user copies
to add one is ``docs/adding_a_task_family.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evotrainer.backends.base import LLM, Generation, GenerationRequest, Message, SamplingParams

__all__ = ["NEUTRAL_TEXTS", "Datasets", "EmbeddingMeta", "Exemplars", "FamilySpec", "FamilyTexts",
           "MetaScore", "Probes", "RewardBreakdown", "RolloutRequest", "SelfEvolving", "Task", "TaskFamily",
           "content_hash", "single_turn_roll_out"]


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
    def group(self) -> str | None:
        """Items that must stay together (e.g. windows of one long document): the held-out split keeps a group on
        one side, and training or transfer items may not share a group with validation items; None: its own."""
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

    The generic rooms read these and name no domain themselves; an
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
"""The texts of a family that gives none (domain-neutral; the default of :attr:`FamilySpec.texts`)."""


def single_turn_roll_out(llm: LLM, requests: Sequence[RolloutRequest]) -> list[Generation]:
    """The single-turn rollout: one batched ``llm.generate`` call over the opening chats, in order.

    The answer is the model's one reply; its text is what ``reward`` and ``meta_score`` read.
    """
    return llm.generate([GenerationRequest(r.messages, r.params, r.adapter) for r in requests])


@dataclass(frozen=True)
class FamilySpec:
    """What the loops read of a family before any task: its scorer version, rollout style, texts, difficulty
    knobs and reward weights.

    Attributes:
        scorer_version: changes whenever reward or metric code changes scores (part of the fitness-cache key).
        difficulty_bounds: each difficulty knob's (low, high), in the knob's natural unit; ``task.difficulty``
            values outside them, or knobs not named here, are refused at start (ConfigError names the key).
        difficulty: each knob's default, inside ``difficulty_bounds`` (``task.difficulty`` overrides it).
        reward_weights: each reward component's default weight, >= 0, in the components' fixed order (its keys are
            the reward components; ``task.reward_weights`` overrides them).
        space: the harness' bounds and scaling per knob (``outer.space`` overrides them; fields of
            :class:`~evotrainer.config.KnobSpec`); empty: the harness searches no difficulty knob.
        multi_step: False: the output is the model's one reply; True: the output is an episode serialised by the
            family, and a run archives each as a ``trajectories`` event.
        texts: what the search and the judge show a model about the domain; an ``inner.*`` key overrides one.
        report_parts: ``(part, column title)`` of the meta score's parts the evaluation table shows (a column
            appears when some policy's score has that part).
    """

    scorer_version: str
    difficulty_bounds: Mapping[str, tuple[float, float]]
    difficulty: Mapping[str, float]
    reward_weights: Mapping[str, float]
    space: Mapping[str, Mapping[str, float | bool]] = field(default_factory=dict)
    multi_step: bool = False
    texts: FamilyTexts = NEUTRAL_TEXTS
    report_parts: tuple[tuple[str, str], ...] = ()


class TaskFamily(Protocol):
    """What every family implements: the core the loops call (template in ``docs/adding_a_task_family.md``).

    Extra powers are the capability protocols below (:class:`Datasets`, :class:`SelfEvolving`,
    :class:`Exemplars`, :class:`Probes`, :class:`EmbeddingMeta`); the loops check them with ``isinstance`` and
    run without them.

    Attributes:
        name: the family's registry name (``task.name``).
        spec: knobs, reward weights, scorer version, rollout style and texts (:class:`FamilySpec`).
    """

    name: str
    spec: FamilySpec

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
        """Harness reward of ``output`` on ``task`` under reward ``weights`` (on the simplex); never raises for
        any output text."""
        ...

    def meta_score(self, output: str, task: Any) -> MetaScore:
        """Fixed meta-validation score of ``output`` on ``task``; no harness parameter touches it; never raises
        for any output text."""
        ...

    def load_validation(self, path: str | Path, limit: int | None = None,
                        field_map: Mapping[str, str] | None = None) -> list[Any]:
        """The first ``limit`` items (all when None) of a JSONL file; DataError names ``file:line``."""
        ...


@runtime_checkable
class Datasets(Protocol):
    """A family that reads data shapes beyond its validation files, for ``mode=evaluate`` (without it:
    :meth:`TaskFamily.load_validation`, items grouped by source only)."""

    def load_dataset(self, path: str | Path, *, fmt: str = "auto", field_map: Mapping[str, str] | None = None,
                     limit: int | None = None, field_map_key: str = "task.field_map") -> tuple[list[Any], str]:
        """Items of any data shape the family reads and the shape read; ConfigError names ``evaluate.format`` or
        ``field_map_key``, DataError ``file:line``."""
        ...

    def strata(self, task: Any) -> Mapping[str, str]:
        """Labels an evaluation groups items by: ``source``, ``domain``, ``length`` (any text; "" = none)."""
        ...

    def describe_items(self, items: Sequence[Any]) -> tuple[list[str], dict[str, Any]]:
        """Lines to print about how a dataset was read, and JSON-ready facts for the results file."""
        ...


@runtime_checkable
class SelfEvolving(Protocol):
    """A family whose outputs can train the policy model: ``mode=selfevolve`` and adapter genes need it."""

    def training_chats(self, sections: Sequence[tuple[str, str]], task: Any,
                       output: str) -> list[tuple[Message, ...]]:
        """The chats a supervised fine-tune learns ``output`` from under the prompt ``sections``: in each,
        the last (assistant) message is learnt and everything before it is masked context (one chat for a
        single reply; one per model reply of an episode)."""
        ...

    def reference_answer(self, task: Any) -> str | None:
        """A written reference output of ``task`` (replayed in self-evolution, shown in reflections), or None."""
        ...

    def ground_truth(self, task: Any) -> Mapping[str, Any]:
        """The JSON-ready truth of ``task`` that the self-evolution pool archives."""
        ...


@runtime_checkable
class Exemplars(Protocol):
    """A family that writes worked examples for prompts (the few-shot gene and experience retrieval)."""

    def exemplar(self, task: Any, max_items: int = 2) -> str | None:
        """A short worked example of a good output built from a *generated* task's ground truth, or None."""
        ...

    def experience(self, task: Any, output: str) -> str | None:
        """An exemplar text of ``output`` when it solved the *generated* ``task`` (offered to prompts of similar
        later tasks), else None."""
        ...


@runtime_checkable
class Probes(Protocol):
    """A family that checks its meta metric: every evolve run scores these texts at start and checks their
    order (``harness/yardstick.py``; without it the check is skipped)."""

    def probe_outputs(self, items: Sequence[Any]) -> list[dict[str, str]]:
        """Per item, probe name -> text, names from :data:`~evotrainer.harness.yardstick.PROBES`: ``reference``
        (the item's own answer), ``baseline`` (a lazy answer a policy must beat), ``skeleton`` (the output
        format with no content), ``wrong_item`` (another item's answer of the same source); a subset is fine."""
        ...


@runtime_checkable
class EmbeddingMeta(Protocol):
    """A family whose meta metric embeds text: batch work done once, and the run's embedder shared."""

    def prepare_meta(self, outputs: Sequence[str], tasks: Sequence[Any]) -> None:
        """Called before a batch is meta-scored (e.g. to embed every sentence in one call)."""
        ...

    def with_embedder(self, items: Sequence[Any], load: Callable[[], Any]) -> TaskFamily | None:
        """This family with its meta metric reading with the run's embedder ``load()`` (its ``spec.scorer_version``
        says so), or None when ``items`` need none (then ``load`` is not called); ``mode=evaluate`` asks it when
        ``inner.use_embedder`` is on."""
        ...
