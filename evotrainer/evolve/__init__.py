"""``mode=evolve``: the two loops together (``coevolution``, top to bottom), the outer loop and each candidate's
outcome and promotion (``outer_loop``), the named parts of one harness candidate's run (``llm_objective``:
``screening``, ``lead``, ``style_evolution``), with the run's checks and printed lines (``budget_check``,
``console_view``, ``report``). The pieces every mode shares (splits of the validation set, the backend's gene
check) live in :mod:`evotrainer.run`."""
