"""The meeting-minutes task family: generator, prompts, rewards, meta metric and loader in one object."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from evotrainer.backends.base import LLM, Generation, Message, with_answer
from evotrainer.errors import ConfigError
from evotrainer.tasks.base import FamilySpec, MetaScore, RewardBreakdown, RolloutRequest
from evotrainer.tasks.meeting_minutes import generator, probes, rewards
from evotrainer.tasks.meeting_minutes.data import load_tasks
from evotrainer.tasks.meeting_minutes.datasets import detect_format, load_dataset
from evotrainer.tasks.meeting_minutes.datasets.action_items import owner_source_counts, owner_sources_line
from evotrainer.tasks.meeting_minutes.datasets.jsonl import resolve_field_map
from evotrainer.tasks.meeting_minutes.datasets.strata import strata_of
from evotrainer.tasks.meeting_minutes.exemplars import exemplar_text
from evotrainer.tasks.meeting_minutes.long_input import LongInput, WindowCache, long_roll_out
from evotrainer.tasks.meeting_minutes.metric import SCORER_VERSION
from evotrainer.tasks.meeting_minutes.metric import meta_score as _meta_score
from evotrainer.tasks.meeting_minutes.metric import prefetch as _prefetch
from evotrainer.tasks.meeting_minutes.prompts import PROMPT_LAYOUTS
from evotrainer.tasks.meeting_minutes.prompts import build_messages as _build_messages
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

__all__ = ["OPTIONS", "MeetingMinutes"]

OPTIONS = ("action_band", "prompt_layout", "long")
"""The family's ``task.options`` keys (:meth:`MeetingMinutes.from_config`); ``long`` holds the
:class:`~evotrainer.tasks.meeting_minutes.long_input.LongInput` fields."""


class MeetingMinutes:
    """Meeting transcripts in; minutes with topics, decisions and owned action items out.

    Implements :class:`evotrainer.tasks.base.TaskFamily` and every capability protocol of
    :mod:`evotrainer.tasks.base` (datasets, self-evolution, exemplars, probes, an embedding meta metric).

    Args:
        action_band: ``(lo, hi)`` number of action-item bullets that earns a full ``action_count``
            reward; integers with ``0 <= lo <= hi``.
        prompt_layout: where the policy's text goes in the chat, one of
            :data:`~evotrainer.tasks.meeting_minutes.prompts.PROMPT_LAYOUTS` (``task.options.prompt_layout``).
        long: what to do with a transcript whose prompt does not fit the context (``task.options.long``; windowed
            and merged by default, :mod:`~evotrainer.tasks.meeting_minutes.long_input`).

    These are the family's own options, the ``task.options`` keys of a run (:data:`OPTIONS`; :meth:`from_config`).

    Raises:
        ConfigError: a bad ``action_band`` (names ``task.options.action_band``) or ``prompt_layout``.
    """

    name = "meeting_minutes"
    spec = FamilySpec(
        scorer_version=SCORER_VERSION, difficulty_bounds=generator.DIFFICULTY_BOUNDS,
        difficulty=generator.DEFAULT_DIFFICULTY, reward_weights=rewards.DEFAULT_REWARD_WEIGHTS,
        space=generator.DEFAULT_SPACE, texts=MEETING_TEXTS,
        report_parts=(("rouge_lsum", "ROUGE-Lsum"), ("rouge_l", "ROUGE-L"), ("action_f1", "action F1")))
    """Knobs (:mod:`~evotrainer.tasks.meeting_minutes.generator`), reward weights, and what the mutator and the judge
    read about minutes (:mod:`evotrainer.tasks.meeting_minutes.texts`)."""

    def __init__(
        self, action_band: tuple[int, int] = rewards.DEFAULT_ACTION_BAND, prompt_layout: str = "transcript_first",
        long: LongInput | None = None,
    ) -> None:
        self.action_band = rewards.validate_action_band(tuple(action_band))
        if prompt_layout not in PROMPT_LAYOUTS:
            raise ConfigError(f"task.options.prompt_layout: expected one of {list(PROMPT_LAYOUTS)}, got {prompt_layout!r}")
        self.prompt_layout = prompt_layout
        self.long = long if long is not None else LongInput()
        self._windows = WindowCache()
        self._embedder: Any = None  # the meta metric's (with_embedder); None: the metric's own, lexical action items

    def __repr__(self) -> str:
        return (f"MeetingMinutes(action_band={self.action_band}, prompt_layout={self.prompt_layout!r}, "
                f"long={self.long!r})")

    @classmethod
    def from_config(cls, task: Any) -> MeetingMinutes:
        """The family from its options, ``task.options`` (:data:`OPTIONS`: ``action_band``, ``prompt_layout``,
        ``long.*``); a missing key takes the constructor's default (``conf/task/meeting_minutes.yaml`` lists them).

        Raises:
            ConfigError: an unknown option or a bad value (names ``task.options.<key>``).
        """
        options = dict(task.options or {})
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ConfigError(f"task.options.{unknown[0]}: unknown meeting_minutes option; expected one of "
                              f"{list(OPTIONS)}")
        long = options.get("long") or {}
        names = [f.name for f in fields(LongInput)]
        if not isinstance(long, Mapping) or set(long) - set(names):
            bad = sorted(set(long) - set(names)) if isinstance(long, Mapping) else long
            raise ConfigError(f"task.options.long: expected keys from {names}, got {bad!r}")
        return cls(action_band=tuple(options.get("action_band", rewards.DEFAULT_ACTION_BAND)),
                   prompt_layout=options.get("prompt_layout", "transcript_first"), long=LongInput(**long))

    def generate(self, rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[MeetingTask]:
        """See :func:`evotrainer.tasks.meeting_minutes.generator.generate`."""
        return generator.generate(rng, difficulty, n)

    def build_messages(self, sections: Sequence[tuple[str, str]], task: MeetingTask) -> tuple[Message, ...]:
        """See :func:`evotrainer.tasks.meeting_minutes.prompts.build_messages`."""
        return _build_messages(sections, task, self.prompt_layout)

    def roll_out(self, llm: LLM, requests: Sequence[RolloutRequest]) -> list[Generation]:
        """The minutes are the model's one reply, or for a transcript longer than the context the merge of
        its windows' minutes; each generation says how its item was read
        (:func:`~evotrainer.tasks.meeting_minutes.long_input.long_roll_out`)."""
        return long_roll_out(llm, requests, self.build_messages, self.long, self._windows)

    def load_dataset(
        self, path: str | Path, *, fmt: str = "auto", field_map: Mapping[str, str] | None = None,
        limit: int | None = None, field_map_key: str = "task.field_map",
    ) -> tuple[list[MeetingTask], str]:
        """Items of a JSONL file (our schema or QMSum's; ``field_map`` renames fields) or a folder of
        ``<name>.txt`` + ``<name>.md``, and the shape read (``"jsonl"`` | ``"folder"``).

        Raises:
            ConfigError: bad ``fmt`` or field map (names ``evaluate.format`` / ``field_map_key``).
            DataError: a missing path or a malformed item (``file:line``).
        """
        fields = dict(field_map or {})
        resolve_field_map(fields, field_map_key)
        shape = detect_format(path, fmt)
        return load_dataset(path, fmt=shape, field_map=fields if shape == "jsonl" else None, limit=limit), shape

    def strata(self, task: MeetingTask) -> dict[str, str]:
        """Source, domain and transcript-length labels (:func:`~evotrainer.tasks.meeting_minutes.datasets.strata.strata_of`)."""
        return strata_of(task)

    def describe_items(self, items: Sequence[MeetingTask]) -> tuple[list[str], dict[str, Any]]:
        """How ground-truth owners were read off free-text action items: lines to print and the counts
        (``action_item_owners``) for the results file, with how long inputs are read (``long_input``)."""
        line = owner_sources_line(items)
        return ([line] if line else []), {"action_item_owners": owner_source_counts(items),
                                          "long_input": asdict(self.long)}

    def training_chats(self, sections: Sequence[tuple[str, str]], task: MeetingTask,
                       output: str) -> list[tuple[Message, ...]]:
        """One chat: the opening messages under ``sections`` and ``output`` as the assistant answer (the
        part a supervised step learns; a prefill counts as part of it)."""
        return [with_answer(self.build_messages(sections, task), output)]

    def reference_answer(self, task: MeetingTask) -> str | None:
        """The task's reference minutes, or None when it has none."""
        return task.reference_minutes if task.reference_minutes.strip() else None

    def ground_truth(self, task: MeetingTask) -> dict[str, Any]:
        """What the self-evolution pool archives as the task's truth: topics, decisions and action items
        (``[owner, task, due]``)."""
        return {"topics": list(task.topics), "decisions": list(task.decisions),
                "action_items": [[a.owner, a.task, a.due] for a in task.action_items]}

    def exemplar(self, task: MeetingTask, max_items: int = 2) -> str | None:
        """See :func:`evotrainer.tasks.meeting_minutes.exemplars.exemplar_text`."""
        return exemplar_text(task, max_items=max_items)

    def experience(self, task: MeetingTask, output: str) -> None:
        """None: minutes that scored well are not offered as exemplars (only :meth:`exemplar`'s are)."""
        return None

    def reward(self, output: str, task: MeetingTask, weights: Mapping[str, float]) -> RewardBreakdown:
        """See :func:`evotrainer.tasks.meeting_minutes.rewards.reward` (uses this family's band)."""
        return rewards.reward(output, task, weights, self.action_band)

    def meta_score(self, output: str, task: MeetingTask) -> MetaScore:
        """See :func:`evotrainer.tasks.meeting_minutes.metric.meta_score` (with this family's embedder, when
        :meth:`with_embedder` gave one: it also matches action items)."""
        return _meta_score(output, task, embedder=self._embedder)

    def with_embedder(self, items: Sequence[MeetingTask], load: Callable[[], Any]) -> MeetingMinutes | None:
        """This family with ``load()`` as its metric's embedder, which then matches action items by embedding
        cosine instead of word overlap (scorer version ``+embedder``); None when no item has action items
        (QMSum-like sets need none)."""
        if not any(t.action_items for t in items):
            return None
        out = copy.copy(self)
        out._embedder = load()
        out.spec = replace(self.spec, scorer_version=f"{self.spec.scorer_version}+embedder")
        return out

    def prepare_meta(self, outputs: Sequence[str], tasks: Sequence[MeetingTask]) -> None:
        """Embed the sentences of a batch of outputs and references at once before ``meta_score`` reads
        them one by one (:func:`evotrainer.tasks.meeting_minutes.metric.prefetch`)."""
        _prefetch([*outputs, *(t.reference_minutes for t in tasks)], self._embedder)

    def probe_outputs(self, items: Sequence[MeetingTask]) -> list[dict[str, str]]:
        """The yardstick's probe texts per item (:func:`evotrainer.tasks.meeting_minutes.probes.probe_outputs`)."""
        return probes.probe_outputs(items)

    def load_validation(
        self, path: str | Path, limit: int | None = None, field_map: Mapping[str, str] | None = None
    ) -> list[MeetingTask]:
        """See :func:`evotrainer.tasks.meeting_minutes.data.load_tasks`."""
        return load_tasks(path, limit=limit, field_map=field_map)
