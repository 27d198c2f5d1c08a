"""EvoTrainer: co-evolution of LLM prompts (DEAP) and their training harness (CMA-ES).

Importing the package asks the OpenMP runtime to sleep instead of spin-waiting
(``OMP_WAIT_POLICY=PASSIVE`` unless set; see :mod:`evotrainer.threads`). This must happen before torch is
first imported, so it is the first thing the package does.
"""

from evotrainer.threads import prefer_passive_openmp

prefer_passive_openmp()
