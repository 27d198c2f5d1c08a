"""Multi-step ReAct rollouts (Yao et al. 2022, arXiv:2210.03629) of many episodes at once.

Each turn sends every unfinished episode's chat so far to the backend in one ``llm.generate`` call (the
backends batch), parses each reply (:func:`~evotrainer.tasks.tool_agent.parse.parse_reply`), runs the
tool in the episode's :class:`~evotrainer.tasks.tool_agent.env.ToolEnv`, and appends the reply and an
``Observation: ...`` user turn. An episode stops at a final answer, after ``max_steps`` model calls, or
(``stop_on_repeat``, greedy decoding only) when a reply repeats the previous reply word for word: the
model then sees the same chat tail again and, decoding greedily, almost always loops until the step limit,
so the remaining calls would only cost time.
Malformed replies get the parser's error as their observation and the episode goes on. A backend
failure ends the unfinished episodes with stop reason "error" (never raises).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from evotrainer import progress
from evotrainer.backends.base import LLM, GenerationRequest, Message, SamplingParams
from evotrainer.errors import ConfigError, ServerError
from evotrainer.tasks.reward_weights import check_reward_weights
from evotrainer.tasks.tool_agent.env import ToolEnv
from evotrainer.tasks.tool_agent.parse import parse_reply
from evotrainer.tasks.tool_agent.reward import DEFAULT_WEIGHTS, REWARD_COMPONENTS, score_episode
from evotrainer.tasks.tool_agent.tasks import ToolTask
from evotrainer.tasks.tool_agent.trajectory import Step, Trajectory

__all__ = ["Episode", "ToolRolloutConfig", "build_messages", "run_episodes"]

_FORMAT = ("Answer in steps. Each reply is either\n"
           "Thought: <your reasoning>\nAction: <tool>[<input>]\n"
           "and then wait for the Observation, or, once you know the answer,\n"
           "Final Answer: <the answer>")
_EXAMPLE = ("Example:\nQuestion: What is the weight of blue crate in lb?\n"
            "Thought: I need the weight of blue crate.\nAction: lookup[weight of blue crate]\n"
            "Observation: 12 kg\nThought: Now I convert it to lb.\nAction: convert[12 kg to lb]\n"
            "Observation: 26.4554715 lb\nThought: I know the answer.\nFinal Answer: 26.4554715 lb")


@dataclass(frozen=True)
class ToolRolloutConfig:
    """Settings of a multi-step rollout.

    Attributes:
        max_steps: model calls per episode, >= 1 (default 8).
        max_new_tokens: generated tokens per model call, >= 1.
        observation_chars: longest observation sent back, characters, >= 20 (longer ones are clipped).
        prefill: text that starts every assistant reply (sent as a trailing assistant message, see
            :func:`~evotrainer.backends.base.split_prefill`); it is part of the reply the model is
            scored and trained on. "" for none.
        weights: reward weights by component, on the simplex (checked here, once:
            :func:`~evotrainer.tasks.reward_weights.check_reward_weights`).
        stop_on_repeat: end a greedy episode (stop reason "repeated") after a reply equal to the previous
            one (after parsing; the repeated step is kept and scored). Sampled episodes never stop for it.
    """

    max_steps: int = 8
    max_new_tokens: int = 128
    observation_chars: int = 400
    prefill: str = "Thought:"
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    stop_on_repeat: bool = True

    def __post_init__(self) -> None:
        for key, low in (("max_steps", 1), ("max_new_tokens", 1), ("observation_chars", 20)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"rollout.{key}: must be an integer >= {low}, got {value!r}")
        if not isinstance(self.stop_on_repeat, bool):
            raise ConfigError(f"rollout.stop_on_repeat: must be true or false, got {self.stop_on_repeat!r}")
        check_reward_weights(self.weights, REWARD_COMPONENTS, "rollout.weights", simplex=True)


@dataclass(frozen=True)
class Episode:
    """One policy on one task.

    Attributes:
        policy_id: the policy's id (recorded in the trajectory).
        system_prompt: the policy's rendered system prompt ("" for none).
        task: the task.
        sampling: this episode's decoding (e.g. the policy's decoding genes applied); None uses the
            rollout's ``sampling``.
        adapter: the policy's LoRA adapter folder, or None (base model).
    """

    policy_id: str
    system_prompt: str
    task: ToolTask
    sampling: SamplingParams | None = None
    adapter: str | None = None


def build_messages(system_prompt: str, task: ToolTask, env: ToolEnv | None = None) -> tuple[Message, ...]:
    """The opening chat of an episode: the policy's system prompt, then a user turn listing the tools,
    the reply format, one worked example (ReAct prompts its model with solved examples; Yao et al. 2022)
    and the question. Tools, format and example are part of the task, not of the policy, so an evolved
    prompt cannot lose them."""
    env = env or ToolEnv.of(task.facts)
    user = f"Tools:\n{env.describe()}\n\n{_FORMAT}\n\n{_EXAMPLE}\n\nQuestion: {task.question}"
    return ({"role": "system", "content": system_prompt}, {"role": "user", "content": user})


def _params(sampling: SamplingParams, cfg: ToolRolloutConfig, episode: Episode, step: int) -> SamplingParams:
    """Decoding of one call: ``cfg.max_new_tokens``; when sampling, a seed derived from (seed, policy id, task
    content, step), never from the episode's place in the batch, so an episode samples the same text alone
    or in any batch (the fitness cache relies on it)."""
    params = replace(sampling, max_new_tokens=cfg.max_new_tokens)
    if sampling.temperature > 0:
        key = f"{sampling.seed}:{episode.policy_id}:{episode.task.content_hash}:{step}"
        digest = hashlib.sha256(key.encode()).digest()
        params = replace(params, seed=int.from_bytes(digest[:4], "big"))
    return params


@dataclass
class _Live:
    episode: Episode
    env: ToolEnv
    messages: list[Message]
    steps: list[Step] = field(default_factory=list)
    stop: str | None = None
    error: str | None = None


_GREEDY = SamplingParams()


def run_episodes(llm: LLM, episodes: Sequence[Episode], cfg: ToolRolloutConfig | None = None, *,
                 sampling: SamplingParams = _GREEDY) -> list[Trajectory]:
    """Roll out every episode to a final answer or ``cfg.max_steps`` model calls.

    Args:
        llm: the policy model backend (one ``generate`` call per turn, over all unfinished episodes).
        episodes: the (policy, task) pairs; any number, duplicates allowed.
        cfg: step limit, token budget, observation clipping, reward weights (defaults when None).
        sampling: decoding of episodes without their own (greedy by default); its ``max_new_tokens`` is
            replaced by ``cfg``'s, and when it samples each call gets its own seed from (``sampling.seed``,
            episode index, step).

    Returns:
        One :class:`Trajectory` per episode, in order, scored (:func:`~evotrainer.tasks.tool_agent.reward.score_episode`).
        Never raises for model output or a backend failure.
    """
    cfg = cfg if cfg is not None else ToolRolloutConfig()
    live = [_Live(e, env := ToolEnv.of(e.task.facts), list(build_messages(e.system_prompt, e.task, env)))
            for e in episodes]
    tool_names = [t.name for t in ToolEnv().tools]
    for step in range(cfg.max_steps):
        todo = [(k, ep) for k, ep in enumerate(live) if ep.stop is None]
        if not todo:
            break
        tail: tuple[Message, ...] = ({"role": "assistant", "content": cfg.prefill},) if cfg.prefill else ()
        requests = [GenerationRequest((*ep.messages, *tail), _params(ep.episode.sampling or sampling, cfg, ep.episode, step),
                                      ep.episode.adapter)
                    for k, ep in todo]
        try:
            with progress.muted():  # the phase counts episodes, not model calls
                generations = llm.generate(requests)
            if len(generations) != len(requests):
                raise RuntimeError(f"backend returned {len(generations)} results for {len(requests)} requests")
        except ServerError:  # a server gone for good ends the run (its one line), not only these episodes
            raise
        except Exception as exc:  # a failing backend ends these episodes, never the caller
            for _, ep in todo:
                ep.stop, ep.error = "error", f"{type(exc).__name__}: {exc}"
            progress.advance(len(todo))
            break
        for (_, ep), gen, req in zip(todo, generations, requests, strict=True):
            parsed = parse_reply(gen.text, tool_names)
            text = parsed.text
            repeated = (cfg.stop_on_repeat and req.params.temperature <= 0 and bool(ep.steps)
                        and ep.steps[-1].text == text)
            ep.messages.append({"role": "assistant", "content": text})
            if parsed.kind == "final":
                ep.steps.append(Step(step, gen.text, text, "final", answer=parsed.answer,
                                     generated_tokens=gen.generated_tokens))
                ep.stop = "final_answer"
                continue
            if parsed.kind == "action":
                obs = ep.env.run(parsed.tool, parsed.tool_input)
                shown, value = obs.text, obs.value
            else:
                shown, value = parsed.error, None
            shown = shown if len(shown) <= cfg.observation_chars else shown[:cfg.observation_chars] + " ..."
            ep.steps.append(Step(step, gen.text, text, parsed.kind, parsed.tool, parsed.tool_input, shown, value,
                                 generated_tokens=gen.generated_tokens))
            ep.messages.append({"role": "user", "content": f"Observation: {shown}"})
            if repeated:
                ep.stop = "repeated"
        progress.advance(sum(ep.stop is not None for _, ep in todo))
    progress.advance(sum(ep.stop is None for ep in live))  # ran out of steps
    out = []
    for ep in live:
        score = score_episode(ep.steps, ep.episode.task, weights=cfg.weights)
        final = next((s.answer for s in ep.steps if s.kind == "final"), None)
        out.append(Trajectory(
            task_id=ep.episode.task.task_id, policy_id=ep.episode.policy_id, messages=tuple(ep.messages),
            steps=score.steps, final_answer=final, stop_reason=ep.stop or "max_steps",
            reward=score.breakdown.total, components=dict(score.breakdown.components),
            first_wrong_step=score.first_wrong_step, error=ep.error,
        ))
    return out
