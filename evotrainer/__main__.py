"""``python -m evotrainer +experiment=meeting_minutes [key=value ...]`` — the Hydra app.

Modes: ``mode=evaluate`` scores the seed population on the meta-validation set and prints a
ranked table; ``mode=evolve`` (the default of ``+experiment=meeting_minutes``) runs the co-evolution
and writes a lineage archive under the Hydra run dir; ``mode=selfevolve`` runs LoRA self-evolution
rounds (``selfevolve.*``) and archives each. Errors print one line naming the key or
file and exit with status 2; ``debug=true`` shows the full traceback.

In a Hydra multirun (``-m``) a failing job raises instead of exiting: ``sys.exit`` inside a job ends
the whole sweep (hydra#2551), while an exception is recorded by Hydra's launcher as that job's failure,
the other jobs run, and the sweep exits non-zero at the end (Hydra's basic sweeper re-raises the first
failure after its batch). The error line is also logged to the failing job's own log file.
"""

from __future__ import annotations

import logging
import os
import sys

import hydra
from omegaconf import DictConfig

from evotrainer.config import register_configs, to_config
from evotrainer.errors import EvoTrainerError

register_configs()
log = logging.getLogger("evotrainer")


def _run(dcfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    cfg = to_config(dcfg)
    run_dir = HydraConfig.get().runtime.output_dir
    if cfg.mode == "evaluate":
        from evotrainer.evaluate import run_evaluate

        run_evaluate(cfg)
    elif cfg.mode == "selfevolve":
        from evotrainer.selfevolve.run import run_selfevolve

        run_selfevolve(cfg, run_dir=run_dir, config_dict=_plain(dcfg))
    else:
        from evotrainer.coevolution import run_evolve

        run_evolve(cfg, run_dir=run_dir, config_dict=_plain(dcfg))


def _multirun() -> bool:
    """Whether this job runs inside a Hydra multirun (``-m``): ``HydraConfig.get().mode == RunMode.MULTIRUN``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _plain(dcfg: DictConfig) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(dcfg, resolve=True)  # type: ignore[return-value]


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _app(dcfg: DictConfig) -> None:
    debug = bool(dcfg.get("debug", False))
    try:
        _run(dcfg)
    except EvoTrainerError as exc:
        if debug:
            raise
        if _multirun():  # let Hydra record this job's failure and run the others (hydra#2551)
            log.error("error: %s", exc)
            raise
        print(f"error: {exc}", file=sys.stderr)
        print("(run with debug=true for the full traceback)", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; the archive keeps everything written so far", file=sys.stderr)
        sys.exit(130)


def main() -> None:
    """Console entry point (``evotrainer ...``), same as ``python -m evotrainer``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    _app()


if __name__ == "__main__":
    main()
