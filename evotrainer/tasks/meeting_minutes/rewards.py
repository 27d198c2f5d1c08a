"""Harness reward components for meeting minutes, each in [0, 1], higher is better.

- ``completeness``: share of ground-truth topics covered by the output (content-stem overlap, see
  :func:`evotrainer.tasks.meeting_minutes.matching.topic_coverage`); 1.0 when the task lists none.
- ``format``: mean of four checks: a topics header, a decisions header, an action-items header (or
  equivalent labels, see :mod:`~evotrainer.tasks.meeting_minutes.minutes_format`), and at least two
  bullet lines.
- ``content``: the meta-validation yardstick itself (:func:`~evotrainer.tasks.meeting_minutes.metric.meta_score`:
  content units against the task's reference minutes, grounded, averaged with ``action_f1`` where the task has
  action items), so that a batch of real meetings with human references trains on what selects. Computed only
  when its weight is above 0 (it reads the sentence embedder); reported as 0.0 otherwise.
- ``action_count``: with ``n`` parsed action items and band ``(lo, hi)``: 1.0 when ``lo <= n <= hi``;
  ``n / lo`` below the band; ``max(0, 1 - (n - hi) / max(hi, 1))`` above it (so ``2 * hi`` items
  score 0).
- ``action_f1``: F1 of parsed action items against the ground truth (owner and task-word match, see
  :func:`evotrainer.tasks.meeting_minutes.matching.action_f1`); when the task has no action items,
  1.0 if the output lists none, else 0.0.

``total = sum_i w_i * R_i`` with the (checked) weights renormalised onto the simplex, except that the
*form* components (:data:`FORM_COMPONENTS`: ``format``, ``action_count``) are multiplied by the
output's content gate (:func:`content_gate`): the share of :data:`FORM_GATE_WORDS` content words the
output takes from the transcript, capped at 1. The harness may weight form, but form alone earns
nothing: the bare skeleton ``## Topics / - The meeting / ... / - Owner: task (due: date)`` has no
content word and scores 0 under any weights, so it cannot win a batch. The total is 0.0 (components still reported) when the degenerate-output
guard fires.
"""

from __future__ import annotations

from collections.abc import Mapping

from evotrainer.errors import ConfigError
from evotrainer.tasks.base import RewardBreakdown
from evotrainer.tasks.meeting_minutes.content import content_units, transcript_words
from evotrainer.tasks.meeting_minutes.guard import degenerate_reason
from evotrainer.tasks.meeting_minutes.matching import action_f1, topic_coverage
from evotrainer.tasks.meeting_minutes.metric import meta_score
from evotrainer.tasks.meeting_minutes.minutes_format import parse_minutes
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.reward_weights import on_simplex

__all__ = ["DEFAULT_ACTION_BAND", "DEFAULT_REWARD_WEIGHTS", "FORM_COMPONENTS", "FORM_GATE_WORDS",
           "REWARD_COMPONENTS", "action_count_score", "content_gate", "reward", "reward_components",
           "validate_action_band"]

REWARD_COMPONENTS: tuple[str, ...] = ("completeness", "format", "action_count", "action_f1", "content")
DEFAULT_REWARD_WEIGHTS: dict[str, float] = {
    "completeness": 0.5,
    "format": 0.2,
    "action_count": 0.3,
    "action_f1": 0.0,
    "content": 0.0,
}
DEFAULT_ACTION_BAND: tuple[int, int] = (2, 5)
FORM_COMPONENTS: tuple[str, ...] = ("format", "action_count")
"""Components that reward the minutes' shape, not their content: gated by :func:`content_gate`."""
FORM_GATE_WORDS = 12
"""Content words from the transcript that open the form components fully (about two short bullets)."""


def content_gate(output: str, task: MeetingTask) -> float:
    """How much of the form reward ``output`` may earn: its content words found in the transcript
    (template and stop words excluded, :mod:`~evotrainer.tasks.meeting_minutes.content`) over
    :data:`FORM_GATE_WORDS`, capped at 1; in [0, 1], 0.0 for a bare template. Never raises."""
    words = transcript_words(task.transcript)
    found = sum(1 for unit in content_units(output) for w in unit.words if w in words)
    return min(1.0, found / FORM_GATE_WORDS)


def validate_action_band(band: tuple[int, int]) -> tuple[int, int]:
    """Check an action-count band ``(lo, hi)``: integers with ``0 <= lo <= hi``.

    Raises:
        ConfigError: naming ``task.options.action_band`` and what was expected.
    """
    try:
        lo, hi = band
    except (TypeError, ValueError):
        raise ConfigError(f"task.options.action_band: expected a pair (lo, hi), got {band!r}") from None
    def whole(v: object) -> bool:
        if isinstance(v, bool):
            return False
        return isinstance(v, int) or (isinstance(v, float) and v.is_integer())

    if not (whole(lo) and whole(hi)) or not 0 <= lo <= hi:
        raise ConfigError(f"task.options.action_band: expected integers 0 <= lo <= hi, got {band!r}")
    return int(lo), int(hi)


def action_count_score(n: int, band: tuple[int, int]) -> float:
    """1.0 inside ``band``, linear decay outside (see the module docstring), in [0, 1]."""
    lo, hi = band
    if n < lo:
        return n / lo
    if n > hi:
        return max(0.0, 1.0 - (n - hi) / max(hi, 1))
    return 1.0


def reward_components(output: str, task: MeetingTask, band: tuple[int, int] = DEFAULT_ACTION_BAND,
                      *, content: bool = True) -> dict[str, float]:
    """Every reward component of ``output`` on ``task``, each in [0, 1] (no guard, no weights); ``content=False``
    reports ``content`` as 0.0 without reading the embedder.

    Raises:
        ModelError: ``content`` is asked for and the embedded sentence embedder cannot be loaded.
    """
    parsed = parse_minutes(output)
    checks = [kind in parsed.sections for kind in ("topics", "decisions", "actions")]
    checks.append(parsed.n_bullets >= 2)
    return {
        "completeness": topic_coverage(task.topics, output),
        "format": sum(checks) / len(checks),
        "action_count": action_count_score(len(parsed.action_items), band),
        "action_f1": action_f1(parsed.action_items, task.action_items),
        "content": float(meta_score(output, task).value) if content and task.reference_minutes.strip() else 0.0,
    }


def reward(
    output: str,
    task: MeetingTask,
    weights: Mapping[str, float] | None = None,
    band: tuple[int, int] = DEFAULT_ACTION_BAND,
) -> RewardBreakdown:
    """Harness reward of ``output`` on ``task``.

    Args:
        output: model minutes (untrusted text).
        task: the meeting with its ground truth.
        weights: reward weights by component, checked once by the run
            (:func:`~evotrainer.tasks.reward_weights.check_reward_weights`) and renormalised onto the simplex
            here; None uses :data:`DEFAULT_REWARD_WEIGHTS`.
        band: action-count band ``(lo, hi)``.

    Returns:
        total in [0, 1] (0.0 when the guard fires; form components gated by :func:`content_gate`), the
        components (ungated), and the guard's reason.
    """
    norm = on_simplex(DEFAULT_REWARD_WEIGHTS if weights is None else weights, REWARD_COMPONENTS)
    components = reward_components(output, task, band, content=norm["content"] > 0)
    reason = degenerate_reason(output, task.transcript)
    gate = content_gate(output, task) if any(norm[k] for k in FORM_COMPONENTS) else 1.0
    total = 0.0 if reason else sum(norm[k] * components[k] * (gate if k in FORM_COMPONENTS else 1.0)
                                   for k in REWARD_COMPONENTS)
    return RewardBreakdown(total=min(1.0, max(0.0, total)), components=components, degenerate=reason)
