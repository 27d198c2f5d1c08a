"""ROUGE on any script, and the documented ROUGE-Lsum sentence splitting (issue 8, metric robustness)."""

import math

import pytest
from rouge_score import rouge_scorer, tokenizers

from evotrainer.tasks.meeting_minutes.matching import content_stems, topic_coverage
from evotrainer.tasks.meeting_minutes.metric import meta_score, rouge_l, rouge_lsum
from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask
from evotrainer.tasks.meeting_minutes.text_units import (
    UnicodeTokenizer,
    sentence_lines,
    split_sentences,
    tokenize,
)

from ._fixtures import GOOD, TASK

ZH_REFERENCE = "会议决定下周发布新版本。张伟负责测试，李娜准备发布说明。"
IDENTICAL = {
    "chinese": ZH_REFERENCE,
    "japanese": "金曜日までにリリースノートを書きます。",
    "hindi": "पूर्व प्रधानमन्त्री शिंजो आबेको हत्याले जापान स्तब्ध छ।",
    "thai": "ทีมจะส่งรายงานภายในวันศุกร์",
    "russian": "я иду на работу. я пришел на работу.",
    "spanish": "Cristóbal está ayudando a su abuela.",
    "korean": "회의는 금요일입니다. 민수가 보고서를 씁니다.",
}


@pytest.mark.parametrize("lang", sorted(IDENTICAL))
def test_identical_text_in_any_script_scores_one(lang):
    text = IDENTICAL[lang]
    assert rouge_l(text, text) == pytest.approx(1.0)
    assert rouge_lsum(text, text) == pytest.approx(1.0)


def test_chinese_identity_scores_one_where_the_default_tokenizer_scored_zero():
    default = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert default.score(ZH_REFERENCE, ZH_REFERENCE)["rougeL"].fmeasure == 0.0  # the bug being fixed
    task = MeetingTask(task_id="zh", transcript="张伟：我来测试。\n李娜：好的。", reference_minutes=ZH_REFERENCE)
    score = meta_score(ZH_REFERENCE, task)
    assert score.parts["rouge_lsum"] == pytest.approx(1.0) and score.parts["rouge_l"] == pytest.approx(1.0)
    assert score.value == pytest.approx(1.0)


def test_chinese_partial_and_unrelated_text_score_between():
    partial = "会议决定下周发布新版本。"  # the first of two sentences
    assert 0.3 < rouge_lsum(partial, ZH_REFERENCE) < 1.0
    assert rouge_lsum("天气很好，我们去公园吧。", ZH_REFERENCE) < 0.2


def test_tokens_per_script():
    assert tokenize("张伟负责测试") == ["张", "伟", "负", "责", "测", "试"]  # one token per ideograph
    assert tokenize("ミーティング") == ["ミ", "ー", "テ", "ィ", "ン", "グ"]
    assert tokenize("प्रधानमन्त्री शिंजो") == ["प्रधानमन्त्री", "शिंजो"]  # combining marks stay inside words
    assert tokenize("회의는 금요일입니다") == ["회의는", "금요일입니다"]  # Hangul is written with spaces
    assert tokenize("ＡＢＣ １２３ Está") == ["abc", "123", "está"]  # NFKC + case folding
    assert tokenize("café meetings", stem=True) == ["café", "meet"]  # only ASCII words are stemmed
    assert tokenize("  -- ### ") == []


@pytest.mark.parametrize(
    "text",
    [
        "The meetings were scheduled, don't worry! 12.5k budgets -- e.g. A_B",
        "## Action items\n- Baptiste: ask the supplier for a revised quote (Friday)",
        GOOD,
        "RUNNING runners ran; it's 3:45pm & the U.S. office's quarterly reviews...",
    ],
)
def test_ascii_tokens_equal_rouge_score_default(text):
    for stem in (True, False):
        assert UnicodeTokenizer(stem).tokenize(text) == tokenizers.DefaultTokenizer(stem).tokenize(text)


def test_content_stems_and_topics_see_non_ascii_words():
    assert content_stems("发布说明") == {"发", "布", "说", "明"}
    assert content_stems("Sending the reports") == {"send", "report"}  # unchanged on English
    # Before mm-3 a Chinese topic had no content stems and counted as covered by any output.
    assert topic_coverage(("发布说明",), "The weather was nice.") == 0.0
    assert topic_coverage(("发布说明",), ZH_REFERENCE) == 1.0


def test_split_sentences_documented_rules():
    text = """## Topics
- Budget was discussed. Dr. Smith agreed, e.g. the boiler stays.
1. Call J. Smith at 3 p.m. tomorrow. Then go!
---
Paragraph one. "Quoted two." (Three?) Four
会议开始。张伟发言！李娜同意？好的
पहला वाक्य। दूसरा वाक्य।"""
    assert split_sentences(text) == [
        "Topics",
        "Budget was discussed.",
        "Dr. Smith agreed, e.g. the boiler stays.",
        "Call J. Smith at 3 p.m. tomorrow.",
        "Then go!",
        "Paragraph one.",
        '"Quoted two."',
        "(Three?)",
        "Four",
        "会议开始。",
        "张伟发言！",
        "李娜同意？",
        "好的",
        "पहला वाक्य।",
        "दूसरा वाक्य।",
    ]
    assert split_sentences("") == [] and split_sentences("\n - \n***\n") == []
    assert "\n" not in "".join(split_sentences(text))
    assert sentence_lines("One. Two.") == "One.\nTwo."


PARAGRAPH = (
    "The team agreed to phase the boiler replacement over two years. "
    "Baptiste will ask the supplier for a revised quote by Friday. "
    "Rosalind will print the seed swap posters before the April event."
)
SENTENCES = [s.strip() for s in PARAGRAPH.split(". ")]
REORDERED_LINES = "\n".join([SENTENCES[2], SENTENCES[0], SENTENCES[1]])
REORDERED_PARAGRAPH = ". ".join([SENTENCES[2], SENTENCES[0], SENTENCES[1]])


def test_rouge_lsum_ignores_sentence_order_and_plain_rouge_l_does_not():
    """The documented behaviour (metric module docstring).

    With sentence splitting, ROUGE-Lsum of the same three sentences in another order is 1.0 against
    the reference paragraph, whether they come one per line or as one paragraph; plain ROUGE-L (one
    LCS over the whole text) is lower. Without our splitting, rouge-score's rougeLsum reads each
    paragraph as one sentence and equals plain ROUGE-L.
    """
    assert rouge_lsum(REORDERED_LINES, PARAGRAPH) == pytest.approx(1.0)
    assert rouge_lsum(REORDERED_PARAGRAPH, PARAGRAPH) == pytest.approx(1.0)
    assert rouge_lsum(PARAGRAPH, REORDERED_LINES) == pytest.approx(1.0)
    plain = rouge_l(REORDERED_PARAGRAPH, PARAGRAPH)
    assert plain < 0.75
    assert rouge_l(REORDERED_LINES, PARAGRAPH) == pytest.approx(plain)  # newlines mean nothing to it
    unsplit = rouge_scorer.RougeScorer(["rougeLsum"], tokenizer=UnicodeTokenizer())
    assert unsplit.score(PARAGRAPH, REORDERED_PARAGRAPH)["rougeLsum"].fmeasure == pytest.approx(plain)
    # Word order inside a sentence still counts.
    scrambled = " ".join(reversed(SENTENCES[0].split()))
    assert rouge_lsum(scrambled, SENTENCES[0]) < 0.5


def test_meta_score_uses_rouge_lsum_on_reordered_minutes():
    sections = TASK.reference_minutes.split("\n\n")
    reordered = "\n\n".join(reversed(sections))
    score = meta_score(reordered, TASK)
    assert score.parts["rouge_lsum"] == pytest.approx(1.0)
    assert score.parts["rouge_l"] < 0.8
    assert score.value == pytest.approx(1.0)  # rouge_lsum and action_f1 both 1.0


@pytest.mark.parametrize(
    "text",
    ["🙂🙂🙂", "\u0301\u0301", "مرحبا بالعالم؟ نعم۔", "ＡＢＣ。。。", "\u200b\u200d", "ｶﾀｶﾅ", "x\u0000y"],
)
def test_meta_score_is_finite_on_any_unicode(text):
    task = MeetingTask(
        task_id="u", transcript="A: hi", reference_minutes=ZH_REFERENCE,
        action_items=(ActionItem("张伟", "测试新版本"),),
    )
    for t in (task, TASK):
        score = meta_score(text, t)
        assert math.isfinite(score.value) and 0.0 <= score.value <= 1.0
