"""``mode=evolve``: the two loops together (``coevolution``, top to bottom) and the named parts of one harness
candidate's run (``llm_objective``: ``screening``, ``lead``, ``style_evolution``; its outcome and promotion in
``candidate_outcome``), with the run's checks and printed lines (``gene_support``, ``validation_split``,
``budget_check``, ``console_view``, ``report``)."""
