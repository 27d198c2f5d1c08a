"""Synthetic meeting generator: transcripts with ground-truth topics, decisions and owned action items.

A meeting is assembled from *blocks* (lists of ``(speaker, text)`` turns that must stay together):
an opening, per topic an introduction, discussion blocks (plain turns, question/answer pairs,
interruptions), a decision (sometimes reversed later in the meeting; the ground truth keeps the
final one) and its action items (explicit "X will ..." or implied: "I'll take that", "can you handle
it, X?" answered "Sure", volunteering, or a decline followed by someone else taking it), then a
closing. Discussion blocks are added until the on-topic content reaches ``length * (1 - noise)``
words; off-topic small-talk blocks are then inserted between blocks so that they make up the
``noise`` share of turns. ``length`` is a target, not a cap (many topics, speakers and action items
need more words than a short target allows).

Every random choice is drawn from the injected ``numpy.random.Generator`` in a fixed order, so the
same generator state gives identical tasks. ``task_id`` is ``"mm-"`` + the first 12 hex digits of
:func:`evotrainer.tasks.base.content_hash` of the transcript.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import content_hash
from evotrainer.tasks.meeting_minutes import phrases as P
from evotrainer.tasks.meeting_minutes.minutes_format import format_minutes
from evotrainer.tasks.meeting_minutes.scenarios import DOMAINS, Domain, Topic
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

__all__ = ["DEFAULT_DIFFICULTY", "DEFAULT_SPACE", "DIFFICULTY_BOUNDS", "PART_WORDS", "generate", "join_meetings",
           "resolve_difficulty"]

DIFFICULTY_BOUNDS: dict[str, tuple[float, float]] = {
    "length": (80.0, 12000.0),
    "speakers": (2.0, 8.0),
    "topics": (1.0, 6.0),
    "noise": (0.0, 0.6),
    "action_items": (0.0, 8.0),
    "implicit_owner": (0.0, 1.0),
}
"""Each knob's (low, high) in its natural unit: ``length`` target transcript words; ``speakers``,
``topics``, ``action_items`` counts; ``noise`` share of off-topic turns; ``implicit_owner`` share of
action items whose owner is only implied. Higher is harder for every knob. A ``length`` above
:data:`PART_WORDS` gives a whole meeting made of several segments (see :func:`generate`); the harness'
default space (:data:`DEFAULT_SPACE`) stops at one segment."""

PART_WORDS = 900.0
"""The longest meeting built in one piece (words). A longer ``length`` is built as
``ceil(length / PART_WORDS)`` segments of ``length / segments`` words each, joined in order."""

DEFAULT_DIFFICULTY: dict[str, float] = {
    "length": 220.0,
    "speakers": 3.0,
    "topics": 2.0,
    "noise": 0.1,
    "action_items": 3.0,
    "implicit_owner": 0.2,
}

DEFAULT_SPACE: dict[str, dict[str, float | bool]] = {
    "length": {"low": 80.0, "high": 900.0, "log": True, "integer": True},  # words; log: a ratio of 11
    "speakers": {"low": 2.0, "high": 8.0, "integer": True},
    "topics": {"low": 1.0, "high": 6.0, "integer": True},
    "noise": {"low": 0.0, "high": 0.6},
    "action_items": {"low": 0.0, "high": 8.0, "integer": True},
    "implicit_owner": {"low": 0.0, "high": 1.0},
}
"""The harness' bounds and scaling per knob (``outer.space``), inside :data:`DIFFICULTY_BOUNDS`."""

_INTEGER_KNOBS = frozenset({"length", "speakers", "topics", "action_items"})
_P_DECISION = 0.85  # chance that a topic ends in a decision
_P_REVERSAL = 0.3  # chance that a decision is reversed later in the meeting
_P_DUE = 0.7  # chance that an action item has a deadline
_P_DUE_FIX = 0.15  # chance that a stated deadline is corrected ("sorry, I meant Thursday")
_P_OWNER_FIX = 0.15  # chance that an explicit owner is corrected
_P_FILLER = 0.25  # chance that a free-speech turn starts with a filler
_P_FULL_NAMES = 0.25  # chance that a meeting labels speakers with full names

Turn = tuple[str, str]
Block = list[Turn]


def resolve_difficulty(difficulty: Mapping[str, float]) -> dict[str, float]:
    """Validate knobs, fill defaults and round the integer knobs.

    Args:
        difficulty: knob name -> value in natural units (see :data:`DIFFICULTY_BOUNDS`); floats are
            accepted for every knob (CMA-ES proposes continuous values). Missing knobs take
            :data:`DEFAULT_DIFFICULTY`.

    Returns:
        Every knob with a float value; ``length``, ``speakers``, ``topics``, ``action_items``
        rounded to whole numbers.

    Raises:
        ConfigError: unknown knob, non-numeric or non-finite value, or a value outside its bounds;
            the message names ``task.difficulty.<knob>`` and the allowed range.
    """
    out = dict(DEFAULT_DIFFICULTY)
    for key, raw in difficulty.items():
        if key not in DIFFICULTY_BOUNDS:
            raise ConfigError(
                f"task.difficulty.{key}: unknown knob; expected one of {sorted(DIFFICULTY_BOUNDS)}"
            )
        low, high = DIFFICULTY_BOUNDS[key]
        if isinstance(raw, bool) or not isinstance(raw, (int, float, np.integer, np.floating)):
            raise ConfigError(f"task.difficulty.{key}: expected a number in [{low:g}, {high:g}], got {raw!r}")
        value = float(raw)
        tol = 1e-9 * max(1.0, abs(high))
        if not math.isfinite(value) or value < low - tol or value > high + tol:
            raise ConfigError(f"task.difficulty.{key}: {raw!r} is outside the allowed range [{low:g}, {high:g}]")
        value = min(max(value, low), high)
        out[key] = float(math.floor(value + 0.5)) if key in _INTEGER_KNOBS else value
    return out


def generate(rng: np.random.Generator, difficulty: Mapping[str, float], n: int) -> list[MeetingTask]:
    """Generate ``n`` synthetic meetings at ``difficulty``.

    Args:
        rng: source of every random choice; the same state gives identical tasks.
        difficulty: knobs (see :func:`resolve_difficulty`); higher values give longer transcripts,
            more speakers, topics, off-topic turns, action items and implied owners.
        n: number of tasks, >= 0.

    A ``length`` up to :data:`PART_WORDS` gives one meeting built in one piece; a longer one gives
    ``k = ceil(length / PART_WORDS)`` segments, each built at ``length / k`` words with the other knobs as
    given, joined by :func:`join_meetings` (docs/long_meetings.md).

    Returns:
        ``n`` tasks with ``source="generated"``, ground-truth topics, final decisions, action items
        with owners (speaker labels) and Markdown reference minutes; ``meta`` holds the domain, the
        resolved difficulty and counts (``n_words``, ``n_turns``, ``n_noise_turns``, ...); a joined
        meeting's ``meta`` holds ``parts``, ``part_words``, ``n_words``, the domains and the difficulty.

    Raises:
        ConfigError: a bad knob (see :func:`resolve_difficulty`) or a negative ``n``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"task generator: n must be an integer >= 0, got {n!r}")
    knobs = resolve_difficulty(difficulty)
    return [_build(rng, knobs) for _ in range(int(n))]


def _build(rng: np.random.Generator, knobs: dict[str, float]) -> MeetingTask:
    """One meeting at resolved ``knobs``: in one piece, or in segments past :data:`PART_WORDS`."""
    parts = math.ceil(knobs["length"] / PART_WORDS)
    if parts <= 1:
        return _Meeting(rng, knobs).build()
    part_knobs = {**knobs, "length": float(math.floor(knobs["length"] / parts + 0.5))}
    segments = [_Meeting(rng, part_knobs).build() for _ in range(parts)]
    return join_meetings(segments, source="generated", meta={
        "difficulty": dict(knobs), "domains": [str(p.meta["domain"]) for p in segments]})


def join_meetings(parts: Sequence[MeetingTask], task_id: str | None = None, source: str = "generated_long",
                  meta: Mapping[str, object] | None = None) -> MeetingTask:
    """One meeting made of ``parts`` in order: transcripts joined, and the topics, decisions and action items
    of every part in order as its ground truth and reference minutes.

    Args:
        parts: meetings, >= 1.
        task_id: the id (default ``mml-<hash of the transcript>``).
        source: the item's source label.
        meta: more ``meta`` entries (beside ``parts``, ``n_words`` and ``part_words``).

    Raises:
        ValueError: no parts.
    """
    if not parts:
        raise ValueError("join_meetings: no meetings to join")
    transcript = "\n".join(p.transcript.strip() for p in parts)
    topics = tuple(t for p in parts for t in p.topics)
    decisions = tuple(d for p in parts for d in p.decisions)
    items = tuple(a for p in parts for a in p.action_items)
    info = {"parts": len(parts), "n_words": len(transcript.split()),
            "part_words": [len(p.transcript.split()) for p in parts], **(meta or {})}
    return MeetingTask(task_id or f"mml-{content_hash(transcript)[:12]}", transcript,
                       reference_minutes=format_minutes(topics, decisions, items), topics=topics,
                       decisions=decisions, action_items=items, source=source, meta=info)


def _pick(rng: np.random.Generator, seq: Sequence[str]) -> str:
    return seq[int(rng.integers(len(seq)))]


_KEEP_CASE = frozenset({"I", "I'm", "I'll", "I'd", "I've"})


def _lower_first(text: str) -> str:
    """Lower-case the first letter unless the first word is "I..." or an acronym ("QA")."""
    first = text.split(maxsplit=1)[0] if text.strip() else ""
    if first.strip(",.?!") in _KEEP_CASE or first[1:2].isupper():
        return text
    return text[:1].lower() + text[1:]


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _words(block: Block) -> int:
    return sum(len(text.split()) + len(who.split()) for who, text in block)


@dataclass
class _TopicPlan:
    topic: Topic
    intro: Block
    discussion: list[Block] = field(default_factory=list)
    decision: Block = field(default_factory=list)
    actions: list[Block] = field(default_factory=list)
    items: list[ActionItem] = field(default_factory=list)
    unused_points: list[str] = field(default_factory=list)


class _Meeting:
    """Builds one meeting; all state lives here so ``generate`` stays a pure function of the rng."""

    def __init__(self, rng: np.random.Generator, knobs: Mapping[str, float]) -> None:
        self.rng = rng
        self.knobs = knobs
        self.domain: Domain = DOMAINS[int(rng.integers(len(DOMAINS)))]
        n_speakers = int(knobs["speakers"])
        firsts = [P.FIRST_NAMES[i] for i in rng.choice(len(P.FIRST_NAMES), n_speakers, replace=False)]
        if rng.random() < _P_FULL_NAMES:
            lasts = [P.SURNAMES[i] for i in rng.choice(len(P.SURNAMES), n_speakers, replace=False)]
            self.labels = [f"{f} {s}" for f, s in zip(firsts, lasts, strict=True)]
        else:
            self.labels = list(firsts)
        self.first = {label: label.split()[0] for label in self.labels}
        self.chair = self.labels[0]
        self.used = dict.fromkeys(self.labels, 0)
        self.decks: dict[str, list[int]] = {}
        self.counts = {"n_reversals": 0, "n_implicit_owners": 0, "n_corrections": 0, "n_interruptions": 0}

    # -- speakers and speech ----------------------------------------------------------------------

    def speaker(self, exclude: Sequence[str] = ()) -> str:
        """A least-used speaker not in ``exclude`` (random tie-break), so everyone gets to talk."""
        pool = [s for s in self.labels if s not in exclude] or list(self.labels)
        low = min(self.used[s] for s in pool)
        choice = _pick(self.rng, [s for s in pool if self.used[s] == low])
        self.used[choice] += 1
        return choice

    def chair_says(self, text: str) -> Turn:
        self.used[self.chair] += 1
        return (self.chair, text)

    def say(self, who: str, text: str, filler: bool = False) -> Turn:
        if filler and self.rng.random() < _P_FILLER:
            first_word = text.split()[0].strip(",.?!") if text.split() else ""
            keep = first_word in self.first.values()
            text = f"{_pick(self.rng, P.FILLERS)} {text if keep else _lower_first(text)}"
        return (who, text)

    def due(self) -> str:
        return _pick(self.rng, P.DUE_DATES) if self.rng.random() < _P_DUE else ""

    # -- blocks -----------------------------------------------------------------------------------

    def draw(self, key: str, seq: Sequence[str]) -> str:
        """Draw from ``seq`` without replacement (per ``key``), reshuffling once it runs out."""
        deck = self.decks.get(key)
        if not deck:
            deck = self.decks[key] = [int(i) for i in self.rng.permutation(len(seq))]
        return seq[deck.pop()]

    def statement(self, plan: _TopicPlan) -> str:
        """A statement about the topic: one of its points, or a generic remark (least repeated)."""
        rng, title = self.rng, plan.topic.title
        if plan.unused_points and rng.random() < 0.6:
            point = plan.unused_points.pop(int(rng.integers(len(plan.unused_points))))
            return _pick(rng, P.DISCUSS).format(topic=title, point=point, point_lc=_lower_first(point))
        body = self.draw(f"generic:{title}", P.DISCUSS_GENERIC).format(topic=title)
        return f"{self.draw('stance', P.STANCE)} {body}" if rng.random() < 0.7 else _upper_first(body)

    def discussion_block(self, plan: _TopicPlan) -> Block:
        """One free-speech block about ``plan.topic``: a turn, a Q/A pair or an interruption."""
        rng, title = self.rng, plan.topic.title
        kind = rng.random()
        if kind < 0.2:
            asker = self.speaker()
            answerer = self.speaker(exclude=[asker])
            question = _pick(rng, P.QUESTION).format(topic=title, name=self.first[answerer])
            if plan.unused_points:
                answer = plan.unused_points.pop(int(rng.integers(len(plan.unused_points))))
            else:
                answer = _pick(rng, P.ANSWER)
            return [self.say(asker, question), self.say(answerer, answer, filler=True)]
        statement = self.statement(plan)
        words = statement.split()
        if kind < 0.3 and len(words) >= 8:
            self.counts["n_interruptions"] += 1
            a = self.speaker()
            b = self.speaker(exclude=[a])
            cut = int(rng.integers(3, len(words) - 3))
            other = self.draw(f"points:{title}", plan.topic.points)
            interjection = _pick(rng, P.INTERRUPT).format(point=other, point_lc=_lower_first(other))
            rest = _pick(rng, P.RESUME).format(rest=" ".join(words[cut:]))
            return [(a, " ".join(words[:cut]) + " —"), (b, interjection), (a, rest)]
        return [self.say(self.speaker(), statement, filler=True)]

    def decision_blocks(self, plan: _TopicPlan) -> tuple[Block, Block | None, str]:
        """The decision block, an optional later reversal block, and the final decision text."""
        rng = self.rng
        options = list(plan.topic.options)
        if rng.random() < 0.5:
            options.reverse()
        first, other = options[0], options[1]
        proposer = self.speaker(exclude=[self.chair])
        block = [self.say(proposer, _pick(rng, P.PROPOSE).format(opt=first), filler=True)]
        if len(self.labels) > 2 and rng.random() < 0.7:
            agree = self.speaker(exclude=[self.chair, proposer])
            block.append(self.say(agree, _pick(rng, P.AGREE), filler=True))
        block.append(self.chair_says(_pick(rng, P.DECIDE).format(opt=first)))
        if rng.random() >= _P_REVERSAL:
            return block, None, first
        self.counts["n_reversals"] += 1
        a = self.speaker()
        b = self.speaker(exclude=[a])
        reversal = [
            (a, _pick(rng, P.REVERSE).format(topic=plan.topic.title, old=first, opt=other)),
            (b, _pick(rng, P.REVERSE_AGREE).format(opt=other)),
        ]
        return block, reversal, other

    def action_block(self, task: str, implicit: bool) -> tuple[Block, ActionItem]:
        """Turns that assign ``task`` to someone, and the resulting ground-truth item."""
        rng = self.rng
        due = self.due()
        said_due = due
        fix_due = bool(due) and rng.random() < _P_DUE_FIX
        if fix_due:
            said_due = _pick(rng, [d for d in P.DUE_DATES if d != due])
        due_txt = f" by {said_due}" if said_due else ""
        owner = _pick(rng, self.labels)  # uniform: owners do not follow the turn-taking balance
        self.used[owner] += 1
        asker = self.speaker(exclude=[owner])
        if implicit:
            self.counts["n_implicit_owners"] += 1
            form = rng.random()
            if form < 0.3:
                block = [
                    self.say(asker, _pick(rng, P.IMPLICIT_OPEN).format(task=task, due=due_txt), filler=True),
                    (owner, _pick(rng, P.IMPLICIT_TAKE)),
                ]
            elif form < 0.55:
                ask = _pick(rng, P.IMPLICIT_ASK).format(task=task, due=due_txt, name=self.first[owner])
                block = [(asker, ask), (owner, _pick(rng, P.ACCEPT_ASSIGNED))]
            elif form < 0.8 or len(self.labels) < 3:
                block = [
                    self.say(owner, _pick(rng, P.VOLUNTEER).format(task=task, due=due_txt), filler=True),
                    (asker, _pick(rng, P.VOLUNTEER_ACK)),
                ]
            else:
                decliner = self.speaker(exclude=[owner, asker])
                ask = _pick(rng, P.IMPLICIT_ASK).format(task=task, due=due_txt, name=self.first[decliner])
                block = [(asker, ask), (decliner, _pick(rng, P.DECLINE)), (owner, _pick(rng, P.IMPLICIT_TAKE))]
        else:
            others = [s for s in self.labels if s != owner]
            if rng.random() < _P_OWNER_FIX and others:
                self.counts["n_corrections"] += 1
                wrong = _pick(rng, others)
                said = _pick(rng, P.EXPLICIT_ACTION).format(name=self.first[wrong], task=task, due=due_txt)
                fix = _pick(rng, P.OWNER_FIX).format(name=self.first[owner], old=self.first[wrong])
                block = [(asker, said), (asker, fix)]
            else:
                block = [(asker, _pick(rng, P.EXPLICIT_ACTION).format(name=self.first[owner], task=task, due=due_txt))]
            if rng.random() < 0.6:
                block.append((owner, _pick(rng, P.ACCEPT_ASSIGNED)))
        if fix_due:
            self.counts["n_corrections"] += 1
            block.append((block[0][0], _pick(rng, P.DUE_FIX).format(due=due, old=said_due)))
        return block, ActionItem(owner=owner, task=task, due=due)

    def noise_blocks(self, n_turns: int) -> list[Block]:
        """Off-topic blocks holding exactly ``n_turns`` turns."""
        rng = self.rng
        lines = list(P.SMALL_TALK) + list(self.domain.small_talk)
        blocks: list[Block] = []
        left = n_turns
        while left > 0:
            a = self.speaker()
            block = [self.say(a, self.draw("small_talk", lines), filler=True)]
            if left >= 2 and rng.random() < 0.6:
                block.append((self.speaker(exclude=[a]), _pick(rng, P.SMALL_TALK_REPLY)))
            blocks.append(block)
            left -= len(block)
        return blocks

    # -- assembly ---------------------------------------------------------------------------------

    def build(self) -> MeetingTask:
        rng, knobs = self.rng, self.knobs
        n_topics, n_items = int(knobs["topics"]), int(knobs["action_items"])
        chosen = [self.domain.topics[i] for i in rng.choice(len(self.domain.topics), n_topics, replace=False)]
        opening: Block = [self.chair_says(_pick(rng, P.OPEN).format(meeting=self.domain.meeting))]
        plans: list[_TopicPlan] = []
        for topic in chosen:
            intro_name = self.first[self.labels[int(rng.integers(1, len(self.labels)))]]
            intro = [self.chair_says(_pick(rng, P.INTRO).format(topic=topic.title, name=intro_name))]
            plans.append(_TopicPlan(topic, intro, unused_points=list(topic.points)))
        for plan in plans:
            plan.discussion.append(self.discussion_block(plan))

        decisions: list[str] = []
        reversals: list[tuple[int, Block]] = []
        for i, plan in enumerate(plans):
            if rng.random() < _P_DECISION:
                block, reversal, final = self.decision_blocks(plan)
                plan.decision = block
                decisions.append(_upper_first(final))
                if reversal is not None:
                    reversals.append((i, reversal))

        n_implicit = math.floor(knobs["implicit_owner"] * n_items + 0.5)
        implicit = set(rng.permutation(n_items)[:n_implicit].tolist()) if n_items else set()
        order = rng.permutation(n_topics)
        task_pools = [list(plan.topic.tasks) for plan in plans]
        generic_pools = [[g.format(topic=plan.topic.title) for g in P.GENERIC_TASKS] for plan in plans]
        for k in range(n_items):
            t = int(order[k % n_topics])
            pool = task_pools[t] or generic_pools[t]
            task = pool.pop(int(rng.integers(len(pool))))
            block, item = self.action_block(task, k in implicit)
            plans[t].actions.append(block)
            plans[t].items.append(item)

        closing: Block = [(self.chair, _pick(rng, P.CLOSE))]
        noise = knobs["noise"]
        content_target = knobs["length"] * (1.0 - noise)

        def content_blocks() -> list[Block]:
            return [opening, closing] + [b for p in plans for b in (p.intro, *p.discussion, p.decision, *p.actions)] + [
                r for _, r in reversals
            ]

        for _ in range(400):
            if sum(_words(b) for b in content_blocks()) >= content_target:
                break
            plan = plans[int(rng.integers(n_topics))]
            plan.discussion.insert(int(rng.integers(len(plan.discussion) + 1)), self.discussion_block(plan))
        spoken = {who for block in content_blocks() for who, _ in block}
        for label in self.labels:
            if label not in spoken:
                opening.append((label, _pick(rng, ("Hi all.", "Morning.", "Hello, everyone.", "Hi."))))

        sequence: list[Block] = [opening]
        for plan in plans:
            sequence += [plan.intro, *plan.discussion]
            sequence += [plan.decision] if plan.decision else []
            sequence += plan.actions
        for i, reversal in reversals:
            after = next(j for j, b in enumerate(sequence) if b is plans[i].decision) + 1
            sequence.insert(int(rng.integers(after, len(sequence) + 1)), reversal)
        sequence.append(closing)

        n_content_turns = sum(len(b) for b in sequence)
        n_noise = math.floor(noise / (1.0 - noise) * n_content_turns + 0.5)
        for block in self.noise_blocks(n_noise):
            sequence.insert(int(rng.integers(1, len(sequence))), block)

        transcript = "\n".join(f"{who}: {text}" for block in sequence for who, text in block)
        topics = tuple(_topic_label(plan.topic.title) for plan in plans)
        items = [item for plan in plans for item in plan.items]
        reference = format_minutes(topics, decisions, items)
        meta = {
            "domain": self.domain.name,
            "difficulty": dict(knobs),
            "n_words": len(transcript.split()),
            "n_turns": n_content_turns + n_noise,
            "n_noise_turns": n_noise,
            "n_speakers": len(self.labels),
            **self.counts,
        }
        return MeetingTask(
            task_id=f"mm-{content_hash(transcript)[:12]}",
            transcript=transcript,
            reference_minutes=reference,
            topics=topics,
            decisions=tuple(decisions),
            action_items=tuple(items),
            source="generated",
            meta=meta,
        )


def _topic_label(title: str) -> str:
    """"the mobile release" -> "Mobile release" (the ground-truth topic phrase)."""
    words = title.split()
    if words and words[0].lower() in {"the", "a", "an"}:
        words = words[1:]
    return _upper_first(" ".join(words))
