"""``python -m evotrainer +experiment=<name> [key=value ...]`` — the Hydra app.

Modes: ``mode=evaluate`` scores the seed population on the meta-validation set and prints a
ranked table; ``mode=evolve`` (the default mode) runs the co-evolution
and writes a lineage archive under the Hydra run dir; ``mode=selfevolve`` runs LoRA self-evolution
rounds (``selfevolve.*``) and archives each; ``mode=distill`` distils a teacher prompt into a LoRA adapter used under a
short prompt and compares the two (``distill.*``). Errors print one line naming the key or
file and exit with status 2; ``debug=true`` shows the full traceback.

``resume=<run dir>`` (or ``resume=true``: the newest unfinished run of the same config under
``archive/runs``) continues a killed ``mode=evolve`` or ``mode=selfevolve`` run in its own folder (``evotrainer/run/resume.py``);
``resume_force=true`` accepts a changed config. A ``STOP`` file in the run folder ends a run at the next
generation boundary with its summary (``evotrainer/run/control.py``).

In a Hydra multirun (``-m``) a failing job raises instead of exiting: ``sys.exit`` inside a job ends
the whole sweep (hydra#2551), while an exception is recorded by Hydra's launcher as that job's failure,
the other jobs run, and the sweep exits non-zero at the end (Hydra's basic sweeper re-raises the first
failure after its batch). The error line is also logged to the failing job's own log file (with the
traceback when it was not an ``EvoTrainerError``). The sweep then ends with one line per failed job and
the exit status 1, and a bad key or value (Hydra's own composition errors included) with one line and
status 2, not Hydra's multi-line report (:mod:`evotrainer.app.cli_errors`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from datetime import datetime
from pathlib import Path

import hydra
from omegaconf import DictConfig

from evotrainer.app.cli_errors import hidden_job_banner, is_multirun, report, wants_traceback
from evotrainer.config import CONF_DIR, Config, register_configs, to_config
from evotrainer.errors import ConfigError, EvoTrainerError
from evotrainer.flat_keys import migrate_overrides
from evotrainer.run.resume import (
    RESUMABLE_MODES,
    RESUMABLE_TEXT,
    find_resumable,
    plan_resume,
    resume_threads,
    resume_warnings,
    run_config,
    wants_resume,
)

register_configs()
log = logging.getLogger("evotrainer")


def _run(dcfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    cfg = to_config(dcfg)
    run_dir = HydraConfig.get().runtime.output_dir
    if _multirun():
        from evotrainer.backends.executor import refuse_parallel_local_ray
        from evotrainer.backends.threads import parallel_jobs

        refuse_parallel_local_ray(cfg.executor, parallel_jobs(os.cpu_count() or 1))
    plan = None
    if wants_resume(cfg.resume):
        if cfg.mode not in RESUMABLE_MODES:
            raise ConfigError(f"resume: only {RESUMABLE_TEXT} runs can be resumed, not mode={cfg.mode}")
        if _multirun():
            raise ConfigError("resume: not in a multirun (-m); resume each job with resume=<its folder>")
        plan = plan_resume(cfg.resume, run_config(_plain(dcfg, cfg)), force=cfg.resume_force,
                           archive_name=cfg.archive.path)
        if plan.changed:
            log.warning("resume_force: resuming despite config changes in %s", ", ".join(plan.changed))
        for line in resume_threads(cfg, plan):  # the recorded thread count where model.threads is null
            log.warning("%s", line)
        for line in resume_warnings(plan):  # backends whose text may change with what runs beside a request
            log.warning("%s", line)
        run_dir = str(plan.run_dir)
    if cfg.mode == "evaluate":
        from evotrainer.evaluate.run import run_evaluate

        run_evaluate(cfg)
    elif cfg.mode == "selfevolve":
        from evotrainer.selfevolve.run import run_selfevolve

        run_selfevolve(cfg, run_dir=run_dir, config_dict=run_config(_plain(dcfg, cfg)), resume=plan)
    elif cfg.mode == "distill":
        from evotrainer.distill.run import run_distill

        run_distill(cfg, run_dir=run_dir, config_dict=_plain(dcfg, cfg))
    else:
        from evotrainer.evolve.coevolution import run_evolve

        run_evolve(cfg, run_dir=run_dir, config_dict=run_config(_plain(dcfg, cfg)), resume=plan)


def _multirun() -> bool:
    """Whether this job runs inside a Hydra multirun (``-m``): ``HydraConfig.get().mode == RunMode.MULTIRUN``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _plain(dcfg: DictConfig, cfg: Config | None = None) -> dict:
    """The composed config as plain data; with ``cfg``, its model roles as they run (``dtype=auto`` resolved,
    the mutator's followed keys filled in: :func:`~evotrainer.config.resolve_roles`), so the archive records
    them and a resume compares them."""
    from dataclasses import asdict

    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(dcfg, resolve=True)
    if cfg is not None and isinstance(plain, dict):
        plain["model"], plain["mutator"] = asdict(cfg.model), asdict(cfg.mutator)
    return plain  # type: ignore[return-value]


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")  # absolute: checkout or wheel
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
    except Exception as exc:
        if not debug and _multirun():  # the sweep's report gives one line; the job's log keeps the traceback
            log.exception("error: %s: %s", type(exc).__name__, exc)
        raise
    except KeyboardInterrupt:
        print("interrupted; the archive keeps everything written so far", file=sys.stderr)
        sys.exit(130)


def _resume_argv(argv: list[str]) -> list[str]:
    """Command-line overrides with ``resume=`` pointed at the run folder Hydra must write into.

    ``resume=<run dir>`` adds ``hydra.run.dir=<run dir>`` (the archive and call log are there; the log file
    is appended to) and ``hydra.output_subdir=.hydra/resume_<time>`` (the run's own ``.hydra/`` config is
    kept). ``resume=true`` is first replaced by the newest resumable run of the composed config
    (:func:`evotrainer.run.resume.find_resumable`); when there is none, the folder does not exist, in a
    multirun, or with an explicit ``hydra.run.dir``, ``argv`` is returned as is and ``_run`` reports what
    is wrong.
    """
    given = [a for a in argv if a.startswith("resume=")]
    if (not given or not wants_resume(given[-1].partition("=")[2]) or {"-m", "--multirun"} & set(argv)
            or any(a.startswith("hydra.run.dir=") for a in argv)):
        return argv
    value = given[-1].partition("=")[2].strip().strip("'\"")
    if value.lower() == "true":
        try:
            found = _find_resumable_for(argv)
        except Exception:  # noqa: BLE001 - a bad override or flag: Hydra itself reports it next, in one line
            return argv
        if found is None:
            return argv
        value = str(found)
        argv = [a for a in argv if not a.startswith("resume=")] + [f"resume='{value}'"]
    path = Path(value).expanduser()
    run_dir = path.parent if path.is_file() else path
    if not run_dir.is_dir():  # never create a mistyped folder: _run reports it
        return argv
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return [*argv, f"hydra.run.dir='{run_dir}'", f"hydra.output_subdir=.hydra/resume_{stamp}"]


def _find_resumable_for(argv: list[str]) -> Path | None:
    """The newest resumable run folder of the config these overrides compose (Hydra's compose API)."""
    from hydra import compose, initialize_config_dir

    overrides = [a for a in argv if not a.startswith(("-", "hydra.", "resume="))]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        dcfg = compose(config_name="config", overrides=overrides)
    archive = str(dcfg.get("archive", {}).get("path", "archive.db"))
    return find_resumable(run_config(_plain(dcfg, to_config(dcfg))), archive_name=archive)


def _warn(line: str) -> None:
    """One warning line on stderr (Hydra has not set up logging yet)."""
    print(f"warning: {line}", file=sys.stderr)


def main() -> None:
    """Console entry point (``evotrainer ...``), same as ``python -m evotrainer``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    # moved keys (task.long.* -> task.options.long.*, ...): respelt with a warning (evotrainer/flat_keys.py)
    sys.argv[1:] = argv = _resume_argv(migrate_overrides(sys.argv[1:], _warn))
    if wants_traceback(argv):  # debug=true or the user's HYDRA_FULL_ERROR=1: Python's full traceback
        os.environ["HYDRA_FULL_ERROR"] = "1"
        _app()
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing: reported below in one line
    multirun = is_multirun(argv)
    try:
        with hidden_job_banner() if multirun else contextlib.nullcontext():
            _app()
    except Exception as exc:  # noqa: BLE001 - every error ends here, reported once (evotrainer/app/cli_errors.py)
        from evotrainer.app.sweep_callback import launched_sweep

        sys.exit(report(exc, multirun=multirun, sweep_dir=launched_sweep()))
    finally:
        os.environ.pop("HYDRA_FULL_ERROR", None)


if __name__ == "__main__":
    main()
