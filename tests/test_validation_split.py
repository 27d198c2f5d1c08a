"""The fixed selection / held-out split of the meta-validation set."""

from __future__ import annotations

import pytest

from evotrainer.config import Config
from evotrainer.errors import ConfigError
from evotrainer.runtime import build_family, load_validation
from evotrainer.validation_split import screening_subset, split_validation


def test_split_is_deterministic_disjoint_and_stratified() -> None:
    cfg = Config()
    items = load_validation(cfg, build_family(cfg))
    sel, held = split_validation(items, 0.25)
    sel2, held2 = split_validation(list(reversed(items)), 0.25)
    assert {t.task_id for t in held} == {t.task_id for t in held2}
    assert {t.task_id for t in sel} == {t.task_id for t in sel2}
    assert len(held) == round(0.25 * len(items)) and len(sel) + len(held) == len(items)
    assert not {t.task_id for t in sel} & {t.task_id for t in held}
    words = sorted(len(t.transcript.split()) for t in held)
    all_words = sorted(len(t.transcript.split()) for t in items)
    assert words[0] < all_words[len(all_words) // 4] and words[-1] > all_words[3 * len(all_words) // 4]
    screen = screening_subset(sel, 8)
    assert {t.task_id for t in screen} <= {t.task_id for t in sel}
    assert split_validation(items, 0.0) == (list(items), [])
    with pytest.raises(ConfigError, match=r"outer\.heldout_share"):
        split_validation(items[:1], 0.9)
