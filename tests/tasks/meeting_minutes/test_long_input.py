"""Long transcripts (issue 29): windows at speaker turns with overlap, the merge call, the handling code of
each generation, and the per-item warning when words are cut."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from evotrainer.backends.base import Generation, GenerationRequest, SamplingParams
from evotrainer.errors import ConfigError
from evotrainer.genome import MERGE_SECTION, render_system_prompt
from evotrainer.input_handling import InputHandling, handling_summary
from evotrainer.tasks.base import RolloutRequest
from evotrainer.tasks.meeting_minutes import MeetingMinutes
from evotrainer.tasks.meeting_minutes.long_input import (
    DEFAULT_MERGE_INSTRUCTION,
    MIN_WINDOW_TOKENS,
    LongInput,
    merge_messages,
    window_tokens,
)
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.windows import plan_windows, split_long_turns, transcript_windows


def words(text: str) -> int:
    return len(text.split())


def meeting(n_turns: int = 40, words_per_turn: int = 10, task_id: str = "long-1") -> MeetingTask:
    speakers = ("Ana", "Ben", "Cy")
    lines = [f"{speakers[i % 3]}: " + " ".join(f"w{i}x{j}" for j in range(words_per_turn - 1)) for i in range(n_turns)]
    return MeetingTask(task_id, "\n".join(lines), reference_minutes="## Topics\n- budget", source="test")


class WordTokenizer:
    """One token per whitespace-separated word."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[str]]:
        return {"input_ids": text.split()}


class FakeLLM:
    """A backend with a word tokenizer and a context window that cuts like the HF backend (and says how many
    words it dropped); answers name the call and the request."""

    name = "fake"

    def __init__(self, context: int) -> None:
        self.context_length = context
        self.tokenizer = WordTokenizer()
        self.calls: list[list[GenerationRequest]] = []

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        return "\n".join(m["content"] for m in messages)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.calls.append(list(requests))
        out = []
        for i, r in enumerate(requests):
            n = words(self.render(r.messages))
            budget = self.context_length - r.params.max_new_tokens
            cut = max(0, n - budget)
            out.append(Generation(f"- Ana: item {len(self.calls)}.{i}", min(n, budget), 5, "stop", cut > 0, cut))
        return out


POLICY = (("role", "You write minutes."), ("format", "## Topics"), ("rules", "Only facts."))


def requests_for(family: MeetingMinutes, tasks: Sequence[MeetingTask], sections=POLICY,
                 max_new: int = 20, decoding: tuple[tuple[str, float], ...] = ()) -> list[RolloutRequest]:
    params = SamplingParams(max_new_tokens=max_new)
    return [RolloutRequest(family.build_messages(sections, t), params, None, tuple(sections), t, "p", decoding)
            for t in tasks]


def test_windows_cut_at_speaker_turns_with_overlap() -> None:
    task = meeting(n_turns=40, words_per_turn=10)
    windows = transcript_windows(task.transcript, words, size=100, overlap=25)
    lines = task.transcript.splitlines()
    assert len(windows) >= 4
    for w in windows:
        assert w.tokens <= 100
        assert all(line in lines for line in w.text.splitlines())  # whole turns only, never a cut turn
    for a, b in zip(windows, windows[1:], strict=False):
        shared = a.end - b.start
        assert shared >= 1 and shared * 10 <= 25  # whole turns repeated, at most the overlap
    assert windows[0].start == 0 and windows[-1].end == len(lines)
    covered = {line for w in windows for line in w.text.splitlines()}
    assert covered == set(lines)


def test_plan_windows_edges() -> None:
    assert plan_windows([], 10, 0) == []
    assert plan_windows([3, 3, 3], 10, 2) == [(0, 3)]
    assert plan_windows([6, 6, 6], 10, 0) == [(0, 1), (1, 2), (2, 3)]
    assert plan_windows([4, 4, 4, 4], 8, 4) == [(0, 2), (1, 3), (2, 4)]
    with pytest.raises(ValueError, match="overlap"):
        plan_windows([1], 10, 10)


def test_a_turn_longer_than_a_window_is_split_and_keeps_its_speaker() -> None:
    turn = "Ana: " + " ".join(f"w{i}" for i in range(50))
    pieces = split_long_turns([turn], words, 12)
    assert len(pieces) >= 5 and all(p.startswith("Ana: ") and words(p) <= 12 for p in pieces)
    assert " ".join(p.removeprefix("Ana: ") for p in pieces) == turn.removeprefix("Ana: ")


def test_long_meeting_is_windowed_then_merged_in_two_batched_calls() -> None:
    family = MeetingMinutes(long=LongInput(window_tokens=120, overlap_tokens=20, reserve_tokens=40))
    llm = FakeLLM(context=300)
    long_task, short_task = meeting(60, 10, "long-1"), meeting(5, 10, "short-1")
    merge = "Join the parts; keep owners."
    sections = (*POLICY, (MERGE_SECTION, merge))
    gens = family.roll_out(llm, requests_for(family, [long_task, short_task], sections))
    assert len(llm.calls) == 2  # every window and the short item in one call, then the merges
    first, merges = llm.calls
    n = InputHandling.parse(gens[0].handling).windows
    assert gens[0].handling == f"windowed:{n}" and n >= 5 and len(first) == n + 1
    assert gens[1].handling == "whole" and gens[1].text == f"- Ana: item 1.{n}"
    assert len(merges) == 1
    user = merges[0].messages[1]["content"]
    assert merge in user and DEFAULT_MERGE_INSTRUCTION not in user
    assert all(f"- Ana: item 1.{k}" in user for k in range(n))  # every partial minutes, in order
    assert gens[0].text == "- Ana: item 2.0"  # the answer is the merge's
    assert gens[0].generated_tokens == 5 * (n + 1)
    assert "[Part 1 of" in first[0].messages[1]["content"]
    assert not any(g.prompt_truncated for g in gens)


def test_merge_section_is_not_part_of_the_minutes_prompt_and_has_a_default() -> None:
    sections = (*POLICY, (MERGE_SECTION, "MERGE-TEXT"))
    assert "MERGE-TEXT" not in render_system_prompt(sections)
    chat = merge_messages(POLICY, ["- a", ""])
    assert DEFAULT_MERGE_INSTRUCTION in chat[1]["content"] and "(no minutes)" in chat[1]["content"]
    assert "You write minutes." in chat[1]["content"]


def test_cut_mode_records_the_share_seen_and_warns_naming_the_item(caplog: pytest.LogCaptureFixture) -> None:
    family = MeetingMinutes(long=LongInput(mode="cut"))
    llm = FakeLLM(context=300)
    task = meeting(60, 10, "long-cut-7")
    with caplog.at_level(logging.WARNING):
        gens = family.roll_out(llm, requests_for(family, [task]))
    how = InputHandling.parse(gens[0].handling)
    assert how.how == "cut" and 0.3 < how.share_seen < 0.5  # ~280 of 600 words fit
    assert len(llm.calls) == 1
    warned = [r.getMessage() for r in caplog.records if "long-cut-7" in r.getMessage()]
    assert len(warned) == 1 and "% of words seen" in warned[0]


def test_a_backend_without_a_tokenizer_sends_whole_and_still_reports_a_cut() -> None:
    class Plain(FakeLLM):
        tokenizer = None

    llm = Plain(context=300)
    family = MeetingMinutes()
    gens = family.roll_out(llm, requests_for(family, [meeting(60, 10)]))
    assert InputHandling.parse(gens[0].handling).how == "cut"


def test_handling_codes_round_trip_and_bad_settings_name_the_key() -> None:
    for h in (InputHandling(), InputHandling("windowed", 4), InputHandling("cut", 1, 0.25),
              InputHandling("windowed", 3, 0.9), InputHandling("cut", 1, None)):
        assert InputHandling.parse(h.code()) == h
    assert handling_summary(["whole", "windowed:3", "cut:0.500", "whole"]) == "2 whole, 1 windowed, 1 cut"
    with pytest.raises(ValueError, match="handling code"):
        InputHandling.parse("sliced:2")
    with pytest.raises(ConfigError, match="task.options.long.overlap_tokens"):
        LongInput(window_tokens=100, overlap_tokens=100)
    with pytest.raises(ConfigError, match="task.options.long.mode"):
        LongInput(mode="drop")


def test_a_policy_with_long_instructions_gets_shorter_windows_not_cut_ones() -> None:
    family = MeetingMinutes(long=LongInput(window_tokens=200, overlap_tokens=20, reserve_tokens=40))
    llm = FakeLLM(context=300)
    wordy = (("role", "You write minutes."), ("format", "## Topics"), ("rules", " ".join(["Be exact."] * 50)))
    gens = family.roll_out(llm, requests_for(family, [meeting(60, 10)], wordy))
    how = InputHandling.parse(gens[0].handling)
    assert how.how == "windowed" and not how.lost_words  # no window and no merge prompt was cut
    assert len(llm.calls[0]) > 600 // 150  # windows of at most ~150 words: 300 - 20 new - ~130 instructions


def test_windowed_reading_reports_its_windows_and_merges_as_a_nested_progress_line() -> None:
    """A phase counts items; while long items are read in windows, a nested line counts windows and merges, in
    the phase's own log, and the phase still advances by items."""
    import io

    from evotrainer import progress

    family = MeetingMinutes(long=LongInput(window_tokens=120, overlap_tokens=20, reserve_tokens=40))
    llm = FakeLLM(context=300)
    log = io.StringIO()
    with progress.task("phase", 2, stream=log, heartbeat=False) as phase:
        family.roll_out(llm, requests_for(family, [meeting(60, 10, "long-1"), meeting(5, 10, "short-1")]))
    n_first, n_merges = len(llm.calls[0]), len(llm.calls[1])
    text = log.getvalue()
    assert f"long inputs: {n_first} windows and whole prompts, then {n_merges} merges: started" in text
    assert phase.done == 2


def test_a_policys_window_gene_sets_its_window_size_within_the_context_budget() -> None:
    """``window_tokens`` among a policy's decoding genes replaces the option's window size for that policy; the
    context budget caps it as it caps the option; a policy without it reads the option's windows."""
    settings = LongInput(window_tokens=120, overlap_tokens=20, reserve_tokens=40)
    family = MeetingMinutes(long=settings)
    task = meeting(120, 10)  # 1,200 words: windowed in a 600-token context

    def windows(*genes: tuple[str, float]) -> int:
        llm = FakeLLM(context=600)
        gens = family.roll_out(llm, requests_for(family, [task], decoding=genes))
        how = InputHandling.parse(gens[0].handling)
        assert how.how == "windowed" and not how.lost_words and len(llm.calls[0]) == how.windows
        assert all(words(r.messages[-1]["content"]) <= 600 - 20 for r in llm.calls[0])  # every window fits
        return how.windows

    default = windows()
    assert default == len(transcript_windows(task.transcript, words, 120, 20))  # the option's windows
    assert windows(("window_tokens", 60)) == len(transcript_windows(task.transcript, words, 60, 20)) > default
    assert windows(("max_new_tokens", 20), ("window_tokens", 240.0)) == len(
        transcript_windows(task.transcript, words, 240, 20)) < default
    capped = windows(("window_tokens", 5000))  # above the budget: windows of the budget, ~520 words
    assert capped == windows(("window_tokens", 9000)) < len(transcript_windows(task.transcript, words, 240, 20))
    assert capped >= 1200 // 520
    request = requests_for(family, [task], decoding=(("window_tokens", 3),))[0]
    assert window_tokens(request, settings) == MIN_WINDOW_TOKENS  # under the floor: the floor, never a cut
    assert window_tokens(requests_for(family, [task])[0], settings) == 120
