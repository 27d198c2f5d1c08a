"""What every run mode shares: the real components built from the config (``runtime``), the stop decisions at
generation boundaries (``control``), resuming a killed run (``resume``), the fixed splits of the validation set
(``validation_split``), the check that the policy's backend honours every gene (``gene_support``) and policy
references: a seed name, an archived policy or an exported folder (``policy_refs``)."""
