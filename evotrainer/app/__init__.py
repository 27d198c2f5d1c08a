"""The Hydra app's parts around ``python -m evotrainer`` (``evotrainer/__main__.py``): the sweep index and study
callbacks (``sweep_callback``, ``study_callback``) and how the command ends on an error (``cli_errors``).
Nothing here decides a run; see ``docs/layout.md``."""
