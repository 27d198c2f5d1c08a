"""EvoTrainer's benchmark suite (issue 14, item 4): ``make bench`` or ``python -m benchmarks.run --help``.

Modules: :mod:`benchmarks.report` (pure helpers: medians, targets, table, JSON), :mod:`benchmarks.workloads`
(the model, the seed population, the validation transcripts and the requests built from them), one
``fig_*`` module per group of figures, and :mod:`benchmarks.run` (the command line).
"""
