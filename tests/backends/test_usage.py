"""One meter per role counts a run's tokens: the budget's generated tokens, the events' ``generated_tokens`` and
the usage lines' completion tokens are one number."""

from __future__ import annotations

from evotrainer.backends.base import Generation, GenerationRequest
from evotrainer.backends.usage import RunUsage, UsageMeter, unwrap

_ASK = GenerationRequest(({"role": "user", "content": "a"},))


class _Fixed:
    name = "fixed"

    def __init__(self, generated: int) -> None:
        self.generated_each = generated

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation("x", 10, self.generated_each, "stop") for _ in requests]


def test_generated_tokens_of_every_role_are_counted_once_by_one_meter() -> None:
    usage = RunUsage()
    policy = usage.wrap(_Fixed(7), "model")
    mutator = policy  # mutator == model: the roles share one meter, as coevolution wires them
    judge = usage.wrap(_Fixed(3), "selfevolve.judge")
    policy.generate([_ASK] * 2)
    mutator.generate([_ASK])
    judge.generate([_ASK] * 4)
    assert len(usage.meters) == 2 and all(isinstance(m, UsageMeter) for m in usage.meters)
    assert usage.completion_tokens() == 3 * 7 + 4 * 3 == usage.as_dict()["completion_tokens"]
    assert usage.prompt_tokens() == 7 * 10 == usage.as_dict()["prompt_tokens"]
    assert isinstance(unwrap(policy), _Fixed)  # nothing else wraps a role's backend
