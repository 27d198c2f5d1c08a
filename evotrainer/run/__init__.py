"""What every run mode shares: the real components built from the config (``runtime``), the stop decisions at
generation boundaries (``control``), resuming a killed run (``resume``), the fixed splits of the validation set
(``validation_split``) and the check that the policy's backend honours every gene (``gene_support``)."""
