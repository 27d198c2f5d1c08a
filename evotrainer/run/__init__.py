"""What every run mode shares: the real components built from the config (``runtime``), the stop decisions at
generation boundaries (``control``), resuming a killed run (``resume``), the fixed splits of the validation set
(``validation_split``), the check that the policy's backend honours every gene (``gene_support``) and policy
references: a seed name, an archived policy or an exported folder (``policy_refs``), and the outer loop over a
harness with the race of its candidates (``outer_loop``, ``screening``, ``console_text``), run by ``mode=evolve``
and by ``mode=selfevolve`` with ``selfevolve.outer_loop``."""
