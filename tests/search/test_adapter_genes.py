"""Adapter genes in the DEAP population: operators, loop wiring, passing samples, mixed-adapter batches."""

from __future__ import annotations

import random
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from evotrainer.backends.adapter_files import read_adapter
from evotrainer.backends.base import GenerationRequest, SamplingParams
from evotrainer.backends.hf import HFBackend
from evotrainer.config import Config, LoraSettings
from evotrainer.errors import ConfigError, DataError
from evotrainer.evolve.llm_objective import lora_workshop
from evotrainer.genome import Policy, render_system_prompt
from evotrainer.model_schema import ModelConfig
from evotrainer.rollout import PassingSampleRecorder, PolicyEvaluation, RolloutEvaluator, batch_id_for
from evotrainer.search.adapter_ops import AdapterWorkshop, cx_adapter_pair, mut_adapter
from evotrainer.search.inner_config import InnerConfig
from evotrainer.search.inner_loop import run_inner_loop
from evotrainer.search.operators import cx_sections
from evotrainer.search.toolbox import build_toolbox
from evotrainer.tasks.base import FamilySpec, MetaScore, RewardBreakdown, single_turn_roll_out
from evotrainer.tasks.meeting_minutes.exemplars import exemplar_text
from evotrainer.tasks.meeting_minutes.task import MeetingTask

TASKS = [
    MeetingTask("t1", "Ann: I send the budget by Friday.\nBob: ok", topics=("budget",)),
    MeetingTask("t2", "Cy: Dana books the room.\nDana: fine", topics=("room",)),
]


class TopicFamily:
    """Fake task family: reward 1.0 when the output names the task's topic, else 0.0."""

    name = "fake"
    spec = FamilySpec("v1", {}, {}, {"topic": 1.0})

    def build_messages(self, sections, task):
        return ({"role": "system", "content": render_system_prompt(sections)},
                {"role": "user", "content": f"Minutes please:\n{task.transcript}"})

    def roll_out(self, llm, requests):
        return single_turn_roll_out(llm, requests)

    def training_chats(self, sections, task, output):
        return [(*self.build_messages(sections, task), {"role": "assistant", "content": output})]

    def exemplar(self, task, max_items=2):
        return exemplar_text(task, max_items=max_items)

    def experience(self, task, output):
        return None

    def reference_answer(self, task):
        return None

    def ground_truth(self, task):
        return {}

    def reward(self, output: str, task: MeetingTask, weights: Mapping[str, float]) -> RewardBreakdown:
        value = float(any(t in output.lower() for t in task.topics))
        return RewardBreakdown(value, {"topic": value})

    def meta_score(self, output: str, task: MeetingTask) -> MetaScore:
        return MetaScore(0.0, {})


def _policy(name: str, rules: str = "Name every owner.") -> Policy:
    return Policy.seed(name, {"role": "You take minutes.", "format": "Bullets.", "rules": rules})


def _random_adapter(backend: HFBackend, folder: Path, seed: int, rank: int = 4) -> str:
    """A genuine PEFT save on the backend's model with random non-zero factors."""
    from peft import LoraConfig, get_peft_model

    backend.unload_adapters()
    flags = [p.requires_grad for p in backend.model.parameters()]
    peft_model = get_peft_model(backend.model, LoraConfig(r=rank, lora_alpha=2 * rank,
                                                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    try:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        peft_model.save_pretrained(str(folder))
    finally:
        peft_model.unload()
        for p, flag in zip(backend.model.parameters(), flags, strict=True):
            p.requires_grad_(flag)
    return str(folder)


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(ModelConfig(path=str(tiny_model_dir), dtype="float32", batch_size=8))


@pytest.fixture(scope="module")
def adapters(backend: HFBackend, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("parents")
    return _random_adapter(backend, root / "a", seed=1), _random_adapter(backend, root / "b", seed=2)


def _cfg() -> Config:
    cfg = Config()
    cfg.inner.adapter_lora = LoraSettings(rank=4, alpha=8, lr=1e-2, steps=2, batch_size=2, max_length=128,
                                          replay_ratio=0.0)
    return cfg


def _samples(policy: Policy) -> list:
    from evotrainer.adapters import SFTExample

    return [SFTExample((*TopicFamily().build_messages(policy.sections, t), {"role": "assistant", "content": a}))
            for t, a in zip(TASKS, ("- Ann: send the budget", "- Dana: book the room"), strict=True)]


def _workshop(backend, root: Path, samples=_samples) -> AdapterWorkshop:
    return lora_workshop(backend, root, _cfg(), samples)


def _check_child(child: Policy, parent: Policy, operator: str, root: Path) -> None:
    assert isinstance(child, Policy) and child.operator == operator
    assert child.id != parent.id and child.parent_ids[0] == parent.id
    assert child.adapter is not None and child.adapter != parent.adapter
    assert Path(child.adapter) == (root / child.id).resolve() and (Path(child.adapter) / "adapter_config.json").is_file()
    assert child.sections == parent.sections and child.root_id == (parent.root_id or parent.id)


# --- operators ------------------------------------------------------------------------------------


def test_finetune_starts_a_fresh_adapter_then_continues_it(backend, tmp_path: Path) -> None:
    ws, parent = _workshop(backend, tmp_path), _policy("seed")
    child = mut_adapter(parent, random.Random(0), 1, workshop=ws, noise_share=0.0)
    _check_child(child, parent, "mut_adapter/finetune", tmp_path)
    first = read_adapter(child.adapter)
    assert all(torch.any(b != 0) for _, b in first.modules.values())  # PEFT starts B at 0: training moved it

    grandchild = mut_adapter(child, random.Random(1), 2, workshop=ws, noise_share=0.0)
    _check_child(grandchild, child, "mut_adapter/finetune", tmp_path)
    second = read_adapter(grandchild.adapter)
    assert second.modules.keys() == first.modules.keys()
    assert any(not torch.equal(second.modules[m][1], first.modules[m][1]) for m in first.modules)  # lora_B changed
    siblings = {mut_adapter(parent, random.Random(s), 1, workshop=ws, noise_share=0.0).id for s in (5, 6)}
    assert len(siblings) == 2  # same parent, operator and generation: the recipe keeps ids apart


def test_noise_when_there_is_no_passing_sample(backend, adapters, tmp_path: Path) -> None:
    ws = _workshop(backend, tmp_path, samples=lambda p: [])
    parent = replace(_policy("with-adapter"), adapter=adapters[0])
    child = mut_adapter(parent, random.Random(0), 3, workshop=ws)
    _check_child(child, parent, "mut_adapter/noise", tmp_path)
    a, b = read_adapter(parent.adapter), read_adapter(child.adapter)
    assert any(not torch.equal(a.modules[m][0], b.modules[m][0]) for m in a.modules)
    assert mut_adapter(_policy("bare"), random.Random(0), 3, workshop=ws) is None  # nothing to learn or perturb


def test_noise_share_one_perturbs_even_with_samples(backend, adapters, tmp_path: Path) -> None:
    parent = replace(_policy("with-adapter"), adapter=adapters[0])
    child = mut_adapter(parent, random.Random(0), 1, workshop=_workshop(backend, tmp_path), noise_share=1.0)
    _check_child(child, parent, "mut_adapter/noise", tmp_path)


def test_crossover_merges_two_adapters(backend, adapters, tmp_path: Path) -> None:
    ws = _workshop(backend, tmp_path)
    p1 = replace(_policy("one"), adapter=adapters[0])
    p2 = replace(_policy("two", "Keep every date."), adapter=adapters[1])
    c1, c2 = cx_adapter_pair(p1, p2, random.Random(0), 4, mate=cx_sections, workshop=ws)
    for child, first, other in ((c1, p1, p2), (c2, p2, p1)):
        assert child.operator == "cx_adapter" and child.parent_ids == (first.id, other.id)
        assert Path(child.adapter) == (tmp_path / child.id).resolve() and child.adapter not in adapters
    da, db, dc = (read_adapter(x) for x in (*adapters, c1.adapter))
    for m in da.modules:  # rank 4 + 4 cut to 4: the best rank-4 approximation of the average
        want = 0.5 * da.delta(m) + 0.5 * db.delta(m)
        u, s, vh = torch.linalg.svd(want, full_matrices=False)
        torch.testing.assert_close(dc.delta(m), u[:, :4] @ torch.diag(s[:4]) @ vh[:4], rtol=1e-4, atol=1e-5)


def test_crossover_with_itself_gives_the_parent_update(backend, adapters, tmp_path: Path) -> None:
    ws = _workshop(backend, tmp_path)
    twin = shutil.copytree(adapters[0], tmp_path / "twin")  # same update, another folder: merged
    p1 = replace(_policy("one"), adapter=adapters[0])
    p2 = replace(_policy("two", "Keep every date."), adapter=str(twin))
    c1, _ = cx_adapter_pair(p1, p2, random.Random(0), 1, mate=cx_sections, workshop=ws)
    parent, merged = read_adapter(adapters[0]), read_adapter(c1.adapter)
    for m in parent.modules:
        torch.testing.assert_close(merged.delta(m), parent.delta(m), rtol=1e-4, atol=1e-5)
    same = replace(p2, adapter=adapters[0])  # the very same folder: nothing to merge, children keep it
    assert {c.adapter for c in cx_adapter_pair(p1, same, random.Random(0), 1, mate=cx_sections, workshop=ws)} == {
        adapters[0]}


def test_crossover_with_one_adapter_keeps_first_parents(backend, adapters, tmp_path: Path) -> None:
    p1 = replace(_policy("one"), adapter=adapters[0])
    p2 = _policy("two", "Keep every date.")
    c1, c2 = cx_adapter_pair(p1, p2, random.Random(0), 1, mate=cx_sections, workshop=_workshop(backend, tmp_path))
    assert (c1.adapter, c2.adapter) == (adapters[0], None) and c1.operator == c2.operator == "cx_sections"
    assert not any(tmp_path.iterdir())


# --- the inner loop -------------------------------------------------------------------------------


def _fake_workshop(root: Path, calls: list[str], samples=lambda p: ["example"]) -> AdapterWorkshop:
    def write(kind: str, out: Path) -> str:
        calls.append(kind)
        out.mkdir(parents=True)
        (out / "adapter_config.json").write_text("{}")
        return str(out)

    return AdapterWorkshop(root=root, samples=samples, finetune=lambda parent, ex, out, rng: write("finetune", out),
                           perturb=lambda parent, out, rng: write("noise", out),
                           merge=lambda a, b, out: write("merge", out))


def _score(policies: Sequence[Policy]) -> list[float]:
    return [len(render_system_prompt(p.sections)) % 7 / 7 + (0.05 if p.adapter else 0.0) for p in policies]


def _loop(cfg: InnerConfig, seed: int = 3, adapters: AdapterWorkshop | None = None):
    pop = [_policy(f"s{i}", r) for i, r in enumerate(("Name every owner.", "Keep dates.", "Be brief.", "No chat."))]
    cfg = replace(cfg, generations=3)
    return run_inner_loop(pop, build_toolbox(cfg, adapters=adapters, seed_prompts=pop), _score, cfg,
                          random.Random(seed))


def test_share_zero_keeps_the_prompt_only_search(tmp_path: Path) -> None:
    cfg = InnerConfig(population_size=4, elites=1, tournament_size=2)
    calls: list[str] = []
    plain, wired = _loop(cfg), _loop(cfg, adapters=_fake_workshop(tmp_path, calls))
    assert [p.id for p in wired.population] == [p.id for p in plain.population]
    assert dict(wired.fitness) == dict(plain.fitness) and calls == []
    assert all(p.adapter is None for p in wired.population)


def test_adapter_mutations_in_the_loop(tmp_path: Path) -> None:
    cfg = InnerConfig(population_size=4, elites=1, tournament_size=2, cx_prob=0.5, mut_prob=1.0,
                          adapter_mutation_share=1.0, adapter_noise_share=0.5)
    calls: list[str] = []
    seen: list[Policy] = []

    def evaluate(policies):
        seen.extend(policies)
        return _score(policies)

    pop = [_policy(f"s{i}", r) for i, r in enumerate(("Name every owner.", "Keep dates.", "Be brief.", "No chat."))]
    toolbox = build_toolbox(cfg, adapters=_fake_workshop(tmp_path, calls), seed_prompts=pop)
    result = run_inner_loop(pop, toolbox, evaluate, replace(cfg, generations=3), random.Random(0))
    made = [p for p in seen if p.adapter is not None]
    assert made and {"finetune", "noise"} <= set(calls)
    assert all(Path(p.adapter) == tmp_path / p.id for p in made)
    assert {p.operator.split("/")[0] for p in made} <= {"mut_adapter", "cx_adapter", "cx_sections", "mut_structural"}
    assert result.operator_stats.counts.get("mut_adapter", (0, 0))[0] > 0


def test_no_passing_sample_falls_back_to_a_structural_mutation(tmp_path: Path) -> None:
    cfg = InnerConfig(population_size=4, elites=1, tournament_size=2, cx_prob=0.0, mut_prob=1.0,
                          adapter_mutation_share=1.0)
    calls: list[str] = []
    result = _loop(cfg, adapters=_fake_workshop(tmp_path, calls, samples=lambda p: []))
    assert calls == [] and all(p.adapter is None for p in result.population)
    assert {p.operator.split("/")[0] for p in result.population if p.operator != "seed"} <= {"mut_structural"}


@pytest.mark.parametrize("key", ["adapter_mutation_share", "adapter_noise_share"])
def test_bad_adapter_shares_name_the_key(key: str) -> None:
    with pytest.raises(ConfigError, match=f"inner.{key}"):
        InnerConfig(**{key: 1.5}).validate()


def test_run_config_validates_the_adapter_keys() -> None:
    from evotrainer.config import validate

    cfg = _cfg()
    cfg.inner.adapter_pass_threshold = -0.1
    with pytest.raises(ConfigError, match="inner.adapter_pass_threshold"):
        validate(cfg)
    cfg = _cfg()
    cfg.inner.adapter_lora.steps = 0
    with pytest.raises(ConfigError, match="inner.adapter_lora.steps"):
        validate(cfg)


def test_workshop_needs_the_transformers_backend(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model.backend=hf"):
        lora_workshop(object(), tmp_path, _cfg(), lambda p: [])


# --- passing samples and mixed-adapter batches ----------------------------------------------------


def _evaluation(policy: Policy, per_task, outputs, degenerate=None) -> PolicyEvaluation:
    n = len(per_task)
    return PolicyEvaluation(policy.id, policy.genome_hash, batch_id_for(TASKS), 0.5, {}, tuple(per_task),
                            tuple(outputs), tuple(degenerate or (None,) * n), 0, 0.0, False)


def test_passing_samples_are_the_policys_own_passing_outputs() -> None:
    family, policy = TopicFamily(), _policy("p")
    rec = PassingSampleRecorder(TASKS, family, threshold=0.5)
    rec.record([_evaluation(policy, (0.9, 0.2), ("- budget: Ann", "- nothing"))])
    rec.record([_evaluation(_policy("q", "Other."), (1.0, 1.0), ("x", " "), degenerate=("loop", None))])
    chats = rec(policy)
    assert chats == [(*family.build_messages(policy.sections, TASKS[0]), {"role": "assistant", "content": "- budget: Ann"})]
    assert rec(_policy("q", "Other.")) == [] and rec(_policy("never", "Unseen rules.")) == []  # degenerate / blank / unseen


def test_validation_items_never_become_sft_samples() -> None:
    forbidden = {TASKS[1].content_hash}
    with pytest.raises(DataError, match="meta-validation"):
        PassingSampleRecorder(TASKS, TopicFamily(), threshold=0.5, forbidden=forbidden)
    rec = PassingSampleRecorder(TASKS[:1], TopicFamily(), threshold=0.5, forbidden=forbidden)
    other_batch = _evaluation(_policy("p"), (1.0, 1.0), ("a", "b"))  # made on the two-task batch
    rec.record([other_batch])
    assert rec(_policy("p")) == [] and other_batch.batch_id != rec.batch_id


class CountingLLM:
    """Passes requests to the backend and counts ``generate`` calls."""

    def __init__(self, llm: HFBackend) -> None:
        self.llm, self.calls, self.name = llm, 0, llm.name

    def generate(self, requests):
        self.calls += 1
        return self.llm.generate(requests)


def test_mixed_adapter_population_is_scored_in_one_generate_call(backend, adapters) -> None:
    counting = CountingLLM(backend)
    evaluator = RolloutEvaluator(counting, TopicFamily(), sampling=SamplingParams(max_new_tokens=6))
    base = _policy("base")
    pop = [base, replace(base, id="with-a", adapter=adapters[0]), replace(base, id="with-b", adapter=adapters[1])]
    results = evaluator.evaluate(pop, TASKS, {"topic": 1.0})
    assert counting.calls == 1 and evaluator.rollouts == 3 * len(TASKS)
    assert len({r.genome_hash for r in results}) == 3 and all(r.fitness is not None for r in results)
    alone = backend.generate([GenerationRequest(tuple(TopicFamily().build_messages(base.sections, TASKS[0])),
                                                SamplingParams(max_new_tokens=6), adapters[1])])
    assert results[2].outputs[0] == alone[0].text  # greedy: the same text alone and in the mixed batch
    assert len({r.outputs for r in results}) > 1  # the adapters change what the model says
    backend.unload_adapters()


class AnyOutputFamily(TopicFamily):
    """Every non-blank output passes (so the tiny model's text becomes Lamarckian training data)."""

    def reward(self, output: str, task: MeetingTask, weights: Mapping[str, float]) -> RewardBreakdown:
        value = float(bool(output.strip()))
        return RewardBreakdown(value, {"topic": value})


def test_objective_wires_adapter_genes_into_the_inner_loop(backend, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from evotrainer.archive import ArchiveStore
    from evotrainer.archive.recorder import RunRecorder
    from evotrainer.backends.call_log import CallLog, LoggedLLM, model_identity
    from evotrainer.backends.usage import RunUsage
    from evotrainer.config import ModelConfig
    from evotrainer.evolve.llm_objective import LLMObjective
    from evotrainer.harness.space import Harness
    from evotrainer.seeding import Seeds

    cfg = _cfg()
    cfg.inner.population_size, cfg.inner.generations, cfg.inner.elites, cfg.inner.tournament_size = 4, 1, 1, 2
    cfg.inner.cx_prob, cfg.inner.mut_prob, cfg.inner.adapter_mutation_share = 0.0, 1.0, 1.0
    usage = RunUsage()
    log = CallLog(tmp_path / "llm_calls.db")  # as a run opens it: adapter-free calls only
    llm = usage.wrap(LoggedLLM(backend, log, model_identity(ModelConfig(path="tiny")), log_adapters=False), "model")
    family = AnyOutputFamily()
    store = ArchiveStore(tmp_path / "archive.db")
    rec = RunRecorder(store, "run-a")
    rec.start(0, {"seed": 0})
    objective = LLMObjective(
        evaluator=RolloutEvaluator(llm, family, sampling=SamplingParams(max_new_tokens=6)), mutator=None,
        usage=usage, family=family, rec=rec, console=Console(file=io.StringIO()), timings={}, cfg=cfg,
        seeds=Seeds(0), selection=[], screen=[], forbidden={"not-a-task"})
    pop = [_policy(f"s{i}", r) for i, r in enumerate(("Name every owner.", "Keep dates.", "Be brief.", "No chat."))]
    harness = Harness({}, {}, {"topic": 1.0}, {}, ())
    result = objective._inner(pop, TASKS, harness, "h1", 1)
    children = [p for p in result.population if p.operator.startswith("mut_adapter")]
    assert children and all(Path(p.adapter) == (tmp_path / "adapters" / p.id).resolve() for p in children)
    archived = {p.id: p for p in store.policies("run-a")}
    assert all(archived[c.id].adapter == c.adapter for c in children)
    assert len(log) == len(pop) * len(TASKS)  # the seeds' rollouts; the adapter children's answers are not logged
    backend.unload_adapters()
    store.close()
    log.close()
