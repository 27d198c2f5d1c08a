"""``mode=evaluate``: score policies on a dataset (``run``), from references to seeds, archived or exported
policies (:mod:`evotrainer.run.policy_refs`), into per-policy and per-group tables and files (``report``)."""
