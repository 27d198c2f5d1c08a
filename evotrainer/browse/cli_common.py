"""What every ``evotrainer-archive`` command shares: the Typer app's making (:func:`new_app`), the argument
types, the one-line error handling (:func:`friendly`), and the table and JSON output helpers. Each command
module offers a ``register(app)``; :mod:`evotrainer.browse.cli` makes the app and calls them, so importing a
command module registers nothing.
"""

from __future__ import annotations

import contextvars
import functools
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evotrainer.archive.locate import resolve_archive
from evotrainer.archive.store import ArchiveStore, open_archive
from evotrainer.browse.textsafe import dumps, fmt, terminal_safe
from evotrainer.errors import EvoTrainerError

__all__ = ["ArchiveArg", "JsonOpt", "PolicyArg", "RunOpt", "emit_json", "friendly", "kv_table", "make_console",
           "new_app", "open_store"]

F = TypeVar("F", bound=Callable[..., Any])

ArchiveArg = Annotated[Path, typer.Argument(help="archive.db file, or a run folder holding one", show_default=False)]
RunOpt = Annotated[str | None, typer.Option("--run", "-r", help="run id (default: the last run in the file)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for scripts instead of tables")]
PolicyArg = Annotated[str | None, typer.Argument(help="policy id or unique prefix (default: best by S_val)")]

_PIPE_WIDTH = 160
_DEBUG: contextvars.ContextVar[bool] = contextvars.ContextVar("evotrainer_archive_debug", default=False)
_EXPECTED = (EvoTrainerError, sqlite3.Error, OSError, json.JSONDecodeError)


def make_console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # piped to a file or pager: wide tables rather than 80 columns
        console.width = max(console.width, _PIPE_WIDTH)
    return console


def friendly(func: F) -> F:
    """Turn expected failures (bad archive, unknown id, unwritable folder) into one line and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except _EXPECTED as exc:
            if _DEBUG.get():
                raise
            msg = " ".join(terminal_safe(str(exc) or type(exc).__name__).split())
            print(f"error: {msg}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show full tracebacks on errors")] = False,
) -> None:
    _DEBUG.set(debug)


def new_app() -> typer.Typer:
    """The ``evotrainer-archive`` Typer app with its ``--debug`` option and no command yet."""
    app = typer.Typer(
        name="evotrainer-archive",
        help="Browse an EvoTrainer lineage archive (read-only): runs, policies, lineage, diffs, report; "
        "`checkpoint` folds a killed run's archive.db-wal into archive.db.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_show_locals=False,
    )
    app.callback()(_root)
    return app


def open_store(archive: Path) -> ArchiveStore:
    return open_archive(resolve_archive(archive), read_only=True)


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def kv_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for k, v in rows:
        t.add_row(Text(k), Text(fmt(v)))
    return t
