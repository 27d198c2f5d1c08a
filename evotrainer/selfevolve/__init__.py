"""LoRA self-evolution (expert iteration): task pool, rollouts, fixed judge, filter, LoRA SFT, dev gate.

:func:`run_round` is one round (the co-evolution calls it per policy); :func:`run_selfevolve` is
``mode=selfevolve``.
"""

from evotrainer.selfevolve.curriculum import CurriculumDecision, curriculum_step
from evotrainer.selfevolve.examples import TrainItem, reference_items
from evotrainer.selfevolve.judge import JudgeSettings, Verdict, grade_counts, judge_samples, parse_grade
from evotrainer.selfevolve.pool import (
    PoolTask,
    PoolUpdate,
    add_to_pool,
    check_disjoint,
    draw_real,
    real_count,
    split_dev,
)
from evotrainer.selfevolve.round import (
    RoundModels,
    RoundOutcome,
    RoundSetup,
    Sample,
    SelfEvolveState,
    run_round,
    score_policy,
)
from evotrainer.selfevolve.run import SelfEvolveSummary, run_selfevolve
from evotrainer.selfevolve.transfer import AdapterTransfer, compare_adapter, score_transfer

__all__ = ["AdapterTransfer", "CurriculumDecision", "JudgeSettings", "PoolTask", "PoolUpdate", "RoundModels",
           "RoundOutcome", "RoundSetup", "Sample", "SelfEvolveState", "SelfEvolveSummary", "TrainItem", "Verdict",
           "add_to_pool", "check_disjoint", "compare_adapter", "curriculum_step", "draw_real", "grade_counts",
           "judge_samples", "parse_grade", "real_count", "reference_items", "run_round", "run_selfevolve",
           "score_policy", "score_transfer", "split_dev"]
