"""The tool-agent task family: multi-step ReAct-style episodes with deterministic tools.

Modules, one job each: ``tools`` (calculator, unit converter, facts lookup), ``env`` (the tools of one
episode), ``parse`` (a tool call or final answer out of a reply), ``tasks`` (task record, answer checking,
JSONL), ``generator`` (generation at a difficulty and by exploration), ``reward`` (rule rewards, step credit),
``trajectory`` (records, JSONL, SFT loss mask), ``rollout`` (batched multi-step episodes) and ``family``
(all of it behind one object).

Wiring that remains (the loops still expect single-turn families): a domain-neutral ``TaskFamily`` should
let a family own its rollout, so the evaluator calls ``family.rollout(llm, prompts, tasks)`` and reads a
total reward and a meta score per episode from the trajectories, instead of ``build_messages`` +
``reward(output, task)``; the archive should store trajectories (``Trajectory.to_dict``) and their
``first_wrong_step``; the self-evolution core should train on :func:`loss_mask` output.
"""

from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.family import SCORER_VERSION, ToolAgent
from evotrainer.tasks.tool_agent.generator import DIFFICULTY_BOUNDS, explore_tasks, generate_tasks
from evotrainer.tasks.tool_agent.parse import ParsedReply, parse_reply
from evotrainer.tasks.tool_agent.reward import (
    DEFAULT_WEIGHTS,
    REWARD_COMPONENTS,
    EpisodeScore,
    score_episode,
)
from evotrainer.tasks.tool_agent.rollout import Episode, ToolRolloutConfig, build_messages, run_episodes
from evotrainer.tasks.tool_agent.tasks import (
    ANSWER_REL_TOL,
    PlanStep,
    ToolTask,
    check_answer,
    load_tasks,
    task_from_dict,
    task_to_dict,
)
from evotrainer.tasks.tool_agent.tools import TOOLS, Fact, Observation, Tool, calculator, convert, lookup
from evotrainer.tasks.tool_agent.trajectory import (
    STOP_REASONS,
    Step,
    TokenMask,
    Trajectory,
    load_jsonl,
    loss_mask,
    save_jsonl,
)

__all__ = [
    "ANSWER_REL_TOL",
    "DEFAULT_WEIGHTS",
    "DIFFICULTY_BOUNDS",
    "REWARD_COMPONENTS",
    "SCORER_VERSION",
    "STOP_REASONS",
    "TOOLS",
    "Episode",
    "EpisodeScore",
    "Fact",
    "Observation",
    "ParsedReply",
    "PlanStep",
    "Step",
    "TokenMask",
    "Tool",
    "ToolAgent",
    "ToolEnv",
    "ToolRolloutConfig",
    "ToolTask",
    "Trajectory",
    "build_messages",
    "calculator",
    "check_answer",
    "convert",
    "explore_tasks",
    "generate_tasks",
    "load_jsonl",
    "load_tasks",
    "lookup",
    "loss_mask",
    "parse_reply",
    "run_episodes",
    "save_jsonl",
    "score_episode",
    "task_from_dict",
    "task_to_dict",
]
