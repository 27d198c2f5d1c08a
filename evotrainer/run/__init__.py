"""What every run mode shares: the real components built from the config (``runtime``), the stop decisions at
generation boundaries (``control``) and resuming a killed run (``resume``)."""
