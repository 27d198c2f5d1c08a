"""Speaker-line transcripts: plain and timestamped lines, continuations, errors naming file:line."""

import pytest

from evotrainer.errors import DataError
from evotrainer.tasks.meeting_minutes.datasets import Turn, parse_speaker_lines, parse_timestamp, render_turns


def test_plain_lines_and_continuations() -> None:
    text = "Aiko: Let's start.\n\nBao Tran: The quote is high,\n   which hurts.\nAnna van der Berg: Agreed."
    turns = parse_speaker_lines(text, source="m.txt")
    assert [(t.speaker, t.text, t.line) for t in turns] == [
        ("Aiko", "Let's start.", 1), ("Bao Tran", "The quote is high, which hurts.", 3),
        ("Anna van der Berg", "Agreed.", 5)]
    assert render_turns(turns) == "Aiko: Let's start.\nBao Tran: The quote is high, which hurts.\nAnna van der Berg: Agreed."


def test_sentence_with_colon_is_a_continuation_not_a_speaker() -> None:
    turns = parse_speaker_lines("Aiko: Here is the plan.\nSo the plan is: we ship.", source="m.txt")
    assert len(turns) == 1 and turns[0].text.endswith("So the plan is: we ship.")


def test_long_labels_with_parentheses() -> None:
    text = "The Chair (Hon. Anthony Rota (Nipissing, Lib.)): Order.\nGrad B: Yes."
    assert [t.speaker for t in parse_speaker_lines(text, source="q")] == [
        "The Chair (Hon. Anthony Rota (Nipissing, Lib.))", "Grad B"]


def test_timestamps_hh_mm_ss_and_mm_ss() -> None:
    text = "[00:00:05] Aiko: Hi.\n[01:10] Bao: Hello.\n[1:02:03.5] Aiko: Bye."
    turns = parse_speaker_lines(text, source="m.txt")
    assert [t.start for t in turns] == [5.0, 70.0, 3723.5]
    assert render_turns(turns).splitlines()[1] == "Bao: Hello."
    with pytest.raises(DataError, match="m:1"):  # "[laughter]" is text, not a time, and no speaker came yet
        parse_speaker_lines("[laughter] is text\nAiko: x", source="m")
    assert parse_speaker_lines("Aiko: x\n[laughter]", source="m") == [Turn("Aiko", "x [laughter]", None, 1)]


@pytest.mark.parametrize(("text", "line", "pattern"), [
    ("Aiko: ok\n[00:61] Bao: no", 2, r"bad timestamp \[00:61\]; expected \[hh:mm:ss\] or \[mm:ss\]"),
    ("Aiko: ok\n[00:75:00] Bao: no", 2, "bad timestamp"),
    ("[00:00:10] Aiko: ok\n[00:00:05] Bao: back", 2, r"timestamp \[00:00:05\] is earlier than \[00:00:10\]"),
    ("[00:00:10] just words", 1, "expected 'Speaker: text' after the timestamp"),
    ("\nthis line has no speaker\nAiko: hi", 2, r"expected a 'Speaker: text' or '\[hh:mm:ss\] Speaker: text' line"),
])
def test_malformed_lines_name_file_and_line(text: str, line: int, pattern: str) -> None:
    with pytest.raises(DataError, match=rf"^m\.txt:{line}: {pattern}"):
        parse_speaker_lines(text, source="m.txt")


def test_no_turns_and_embedded_line_labels() -> None:
    with pytest.raises(DataError, match="no speaker turns"):
        parse_speaker_lines("Aiko:\n\n", source="m.txt")
    with pytest.raises(DataError, match=r"^d\.jsonl:7 \(transcript line 2\): bad timestamp"):
        parse_speaker_lines("[00:01] A: x\n[00:99] B: y", source="d.jsonl", first_line=7, line_label="transcript")
    with pytest.raises(DataError, match="bad timestamp"):
        parse_timestamp("1:2:3:4", "x")
