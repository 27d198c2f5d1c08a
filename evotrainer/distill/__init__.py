"""``mode=distill``: an elite prompt's outputs on training items become SFT data for a LoRA adapter used under a
short prompt; the adapter is then compared with the teacher prompt and the plain prompt (``run``; the pure parts,
``report``)."""

from evotrainer.distill.run import DistillOutcome, run_distill

__all__ = ["DistillOutcome", "run_distill"]
