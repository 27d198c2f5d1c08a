"""The browser CLI's commands are registered explicitly: each command module offers ``register(app)`` and
``evotrainer.browse.cli`` calls them; importing a module registers nothing."""

from __future__ import annotations

import importlib
import pkgutil

import typer

import evotrainer.browse
from evotrainer.browse import cli, cli_common, cli_sweep


def _names(app: typer.Typer) -> list[str]:
    return list(typer.main.get_command(app).commands)


def test_the_app_holds_every_command_module_s_commands_in_order() -> None:
    expected = [c.__name__ for c in (*cli.COMMANDS, *cli_sweep.COMMANDS)]
    assert _names(cli.app) == expected
    assert expected[-2:] == ["sweep", "sensitivity"]  # --help lists the sweep commands last, as before


def test_register_adds_a_module_s_commands_to_a_fresh_app() -> None:
    app = cli_common.new_app()
    assert _names(app) == []
    cli_sweep.register(app)
    assert _names(app) == ["sweep", "sensitivity"]


def test_no_module_but_cli_holds_a_typer_app() -> None:
    """A shared app in a common module is what registration by import side effect needs; only ``cli`` has one."""
    holders = []
    for info in pkgutil.iter_modules(evotrainer.browse.__path__):
        module = importlib.import_module(f"evotrainer.browse.{info.name}")
        if any(isinstance(v, typer.Typer) for v in vars(module).values()):
            holders.append(info.name)
    assert holders == ["cli"]
