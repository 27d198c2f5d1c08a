"""The answer-prefill gene: operator, validity, chat building, backend rendering and decoding."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evotrainer.backends.base import GenerationRequest, SamplingParams, split_prefill, with_answer
from evotrainer.backends.hf import HFBackend
from evotrainer.config import PACKAGE_DATA
from evotrainer.genome import PREFILL_SECTION, Policy, load_population, render_system_prompt
from evotrainer.model_schema import ModelConfig
from evotrainer.search.operators import cx_sections, is_valid, mut_llm_rewrite_plan, mut_structural
from evotrainer.search.prefill import MAX_PREFILL_HEADINGS, mut_prefill, prefill_candidates
from evotrainer.tasks.meeting_minutes.prompts import build_messages
from evotrainer.tasks.meeting_minutes.task import MeetingTask
from evotrainer.tasks.meeting_minutes.texts import MEETING_TEXTS

SEEDS = PACKAGE_DATA / "populations" / "meeting_minutes.yaml"


def _seed(name: str) -> Policy:
    return next(p for p in load_population(SEEDS) if p.id == name)


def _task() -> MeetingTask:
    return MeetingTask(task_id="t", transcript="Ana: I'll send the budget by Friday.\nBo: Fine.",
                       reference_minutes="## Action items\n- Ana: send the budget (due: Friday)")


def test_candidates_follow_the_prompts_own_headings() -> None:
    assert prefill_candidates(_seed("project_manager_actions_first"))[0] == "## Action items\n-"
    assert prefill_candidates(_seed("plain_labels"))[0] == "Topics:\n-"
    bare = Policy.seed("bare", {"role": "", "format": "Write short minutes.", "rules": "Be brief."})
    assert prefill_candidates(bare) == ["Answer:"]  # the neutral fallback
    assert prefill_candidates(bare, MEETING_TEXTS.prefills) == list(MEETING_TEXTS.prefills)


def test_candidates_include_later_sections() -> None:
    """The answer may start at any section the prompt names, not only the first (up to the cap)."""
    options = prefill_candidates(_seed("no_role"))
    assert options[:4] == ["Minutes:\n-", "## Topics\n-", "## Decisions\n-", "## Action items\n-"]
    many = Policy.seed("many", {"role": "", "format": "\n".join(f"## Part {c}" for c in "ABCDEF"), "rules": "Short."})
    assert len([o for o in prefill_candidates(many) if o.endswith("-")]) == MAX_PREFILL_HEADINGS


@pytest.mark.parametrize("seed", range(20))
def test_mut_prefill_adds_swaps_drops_valid_children(seed: int) -> None:
    rng = random.Random(seed)
    parent = _seed("secretary_markdown")
    child = mut_prefill(parent, rng, 1)
    assert child.operator == "mut_prefill/add" and child.parent_ids == (parent.id,)
    assert child.section(PREFILL_SECTION) in prefill_candidates(parent)
    assert is_valid(child) and child.genome_hash != parent.genome_hash
    assert [n for n, _ in child.sections] == ["role", "format", "rules", PREFILL_SECTION]
    grand = mut_prefill(child, rng, 2)
    assert grand.operator in ("mut_prefill/swap", "mut_prefill/drop")
    if grand.operator.endswith("drop"):
        assert PREFILL_SECTION not in grand.section_dict
    else:
        assert grand.section(PREFILL_SECTION) != child.section(PREFILL_SECTION)


def test_prefill_stays_out_of_the_system_prompt_and_starts_the_answer() -> None:
    child = mut_prefill(_seed("terse"), random.Random(0), 1)
    prefill = child.section(PREFILL_SECTION)
    assert render_system_prompt(child.sections) == render_system_prompt(_seed("terse").sections)
    messages = build_messages(child.sections, _task())
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert split_prefill(messages) == (list(messages[:2]), prefill)
    assert [m["role"] for m in build_messages(_seed("terse").sections, _task())] == ["system", "user"]
    # a training chat replaces the prefill by the whole answer
    chat = with_answer(messages, prefill + " Ana: send the budget")
    assert [m["role"] for m in chat] == ["system", "user", "assistant"]
    assert chat[-1]["content"].startswith(prefill)


def test_text_operators_leave_the_prefill_alone() -> None:
    child = mut_prefill(_seed("secretary_markdown"), random.Random(3), 1)
    for seed in range(30):
        rng = random.Random(seed)
        assert mut_structural(child, rng, 2).section(PREFILL_SECTION) == child.section(PREFILL_SECTION)
        assert mut_llm_rewrite_plan(child, rng, 2).section != PREFILL_SECTION
    kid, other = cx_sections(child, _seed("terse"), random.Random(0), 2)
    assert kid.section(PREFILL_SECTION) == child.section(PREFILL_SECTION)  # inherited from its parent
    assert PREFILL_SECTION not in other.section_dict


def test_a_long_prefill_is_not_a_valid_genome() -> None:
    long = _seed("terse").child([*_seed("terse").sections, (PREFILL_SECTION, "word " * 13)],
                                operator="test", generation=1)
    assert not is_valid(long)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=4))


def test_backend_continues_the_prefill(tiny: HFBackend) -> None:
    chat = ({"role": "system", "content": ""}, {"role": "user", "content": "Minutes please."})
    prefilled = (*chat, {"role": "assistant", "content": "## Topics\n-"})
    rendered = tiny.render(prefilled)
    assert rendered == tiny.render(chat) + "## Topics\n-"
    assert rendered.count("<|im_start|>assistant") == 1 and not rendered.endswith("<|im_end|>\n")
    params = SamplingParams(max_new_tokens=8)
    plain, pre = tiny.generate([GenerationRequest(chat, params), GenerationRequest(prefilled, params)])
    assert pre.text.startswith("## Topics\n-") or pre.text == ""
    assert pre.prompt_tokens > plain.prompt_tokens


@pytest.mark.real_model
def test_real_model_writes_minutes_after_a_prefill() -> None:
    real = HFBackend(ModelConfig(path="smollm2-135m", dtype="float32", batch_size=2))
    task = _task()
    child = _seed("secretary_markdown").child([*_seed("secretary_markdown").sections,
                                                (PREFILL_SECTION, "## Action items\n-")], operator="t", generation=1)
    out = real.generate([GenerationRequest(build_messages(child.sections, task), SamplingParams(max_new_tokens=24))])
    assert out[0].text.startswith("## Action items\n-") and len(out[0].text) > len("## Action items\n-")


def test_export_keeps_the_prefill_and_evaluate_reads_it_back(tmp_path: Path) -> None:
    from evotrainer.archive.store import ArchiveStore
    from evotrainer.browse.policy_export import export_policy
    from evotrainer.run.policy_refs import load_exported_policy

    child = mut_prefill(_seed("terse"), random.Random(0), 1)
    with ArchiveStore(tmp_path / "archive.db") as store:
        store.create_run("r", seed=0, config={}, code_version="test")
        store.add_policies("r", [_seed("terse"), child])
        res = export_policy(store, "r", child, tmp_path / "out")
    assert (tmp_path / "out" / "prefill.txt").read_text(encoding="utf-8") == child.section(PREFILL_SECTION)
    # the prompt file is the parent's system prompt: the prefill is not part of it
    assert (tmp_path / "out" / "prompt.md").read_text(encoding="utf-8").strip() == \
        render_system_prompt(_seed("terse").sections).strip()
    assert str(tmp_path / "out" / "prefill.txt") in res["files"]
    assert load_exported_policy(tmp_path / "out").section_dict == child.section_dict
