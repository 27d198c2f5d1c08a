"""Small deterministic stand-ins for the mutator model and seed policies (test helpers)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from evotrainer.backends.base import Generation, GenerationRequest, request_hash
from evotrainer.genome import Policy, render_system_prompt

KEYWORDS = ("owner", "decision", "due date", "facts", "bullet")
KEYWORD_SENTENCES = (
    "Name the owner of each action item.",
    "List every decision made.",
    "Give the due date when one is said.",
    "Write only facts from the meeting.",
    "Use one bullet per point.",
    "Keep it short and clear.",
)


class FakeMutator:
    """Answers rewrite/merge chats with chatter-wrapped text derived from the request (and its seed)."""

    name = "fake-mutator"

    def __init__(self) -> None:
        self.calls = 0
        self.requests = 0

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.calls += 1
        self.requests += len(requests)
        return [self._answer(r) for r in requests]

    def _answer(self, request: GenerationRequest) -> Generation:
        user = request.messages[-1]["content"]
        pick = int(request_hash(request)[:8], 16)
        extra = KEYWORD_SENTENCES[pick % len(KEYWORD_SENTENCES)]
        merge = re.search(r"Version A:\n<<<\n(.*?)\n>>>\n\nVersion B:\n<<<\n(.*?)\n>>>", user, re.DOTALL)
        if merge:
            first_a = merge.group(1).split(".")[0].strip()
            first_b = merge.group(2).split(".")[0].strip()
            body = f"{first_a}. {first_b}."
        else:
            text = re.search(r"Current instruction[^\n]*:\n<<<\n(.*?)\n>>>", user, re.DOTALL).group(1)
            body = f"{text.strip()} {extra}" if pick % 3 else extra
        wrappers = (
            'Sure! Here is the rewritten text:\n"{}"\nI hope this helps.',
            "```\n{}\n```",
            "New prompt: {}",
        )
        text = wrappers[pick % len(wrappers)].format(body)
        return Generation(text=text, prompt_tokens=len(user.split()), generated_tokens=len(text.split()),
                          finish_reason="stop")


class FailingMutator:
    name = "failing-mutator"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        raise RuntimeError("mutator is down")


def seed_population() -> list[Policy]:
    return [
        Policy.seed("s0", {"role": "You are a meeting assistant.", "format": "Write a short summary.",
                           "rules": "Be clear. Be brief."}),
        Policy.seed("s1", {"role": "", "format": "Use a list of points.",
                           "rules": "Mention the topics. Avoid small talk."}),
        Policy.seed("s2", {"role": "You write minutes.", "format": "Write plain sentences.",
                           "rules": "Stay neutral. Cover every speaker."}),
        Policy.seed("s3", {"role": "You are a secretary.", "format": "Write three short paragraphs.",
                           "rules": "Keep the order of the meeting."}),
    ]


def keyword_fitness(policy: Policy) -> float:
    """Toy fitness: fraction of KEYWORDS in the rendered prompt, in [0, 1], higher is better."""
    text = render_system_prompt(policy.sections).lower()
    return sum(k in text for k in KEYWORDS) / len(KEYWORDS)


def stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class FakeEmbedder:
    """Bag-of-words hashing embedder: sentences sharing words get a high cosine (rows L2-normalised)."""

    name = "fake-embedder"
    dim = 256

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    def encode(self, texts: Sequence[str]):
        import numpy as np

        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                word = word[:-1] if len(word) > 3 and word.endswith("s") else word
                h = stable_hash(word)
                out[i, h % self.dim] += 1.0 if (h >> 9) % 2 else -1.0
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
        return out


class TableEmbedder:
    """Embeds sentences by a fixed table of vectors (exact control of cosines); unknown text -> a unit
    vector on its own hashed axis (nearly orthogonal to everything)."""

    name = "table-embedder"

    def __init__(self, table: dict, dim: int = 64) -> None:
        self.table = table
        self.dim = dim

    def encode(self, texts: Sequence[str]):
        import numpy as np

        rows = []
        for text in texts:
            if text in self.table:
                v = np.asarray(self.table[text], dtype=np.float32)
                v = np.pad(v, (0, self.dim - len(v)))
            else:
                v = np.zeros(self.dim, dtype=np.float32)
                v[8 + stable_hash(text) % (self.dim - 8)] = 1.0
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


def apply_rewrite(plan, text: str, **checks):
    """The child ``judge_rewrite`` makes of ``text``, or None when it rejects it."""
    from evotrainer.search.operators import judge_rewrite

    verdict = judge_rewrite(plan, text, **checks)
    return verdict if isinstance(verdict, Policy) else None
