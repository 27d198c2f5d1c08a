"""The tool-agent task family: multi-step ReAct-style episodes with deterministic tools.

Modules, one job each: ``tools`` (calculator, unit converter, facts lookup), ``env`` (the tools of one
episode), ``parse`` (a tool call or final answer out of a reply), ``tasks`` (task record, answer checking,
JSONL), ``generator`` (generation at a difficulty and by exploration), ``reward`` (rule rewards, step credit),
``trajectory`` (the episode record and its JSON form), ``rollout`` (batched multi-step episodes) and ``family``
(all of it behind one object).
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
from evotrainer.tasks.tool_agent.trajectory import STOP_REASONS, Step, Trajectory

__all__ = ["ANSWER_REL_TOL", "DEFAULT_WEIGHTS", "DIFFICULTY_BOUNDS", "REWARD_COMPONENTS", "SCORER_VERSION",
           "STOP_REASONS", "TOOLS", "Episode", "EpisodeScore", "Fact", "Observation", "ParsedReply",
           "PlanStep", "Step", "Tool", "ToolAgent", "ToolEnv", "ToolRolloutConfig", "ToolTask", "Trajectory",
           "build_messages", "calculator", "check_answer", "convert", "explore_tasks", "generate_tasks",
           "load_tasks", "lookup", "parse_reply", "run_episodes", "score_episode", "task_from_dict",
           "task_to_dict"]
