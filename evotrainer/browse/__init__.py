"""Browsing what the archive holds: the ``evotrainer-archive`` CLI (``cli``, with its ``cli_*`` command
modules), what it and the report show as plain data (``views`` and the ``*_view`` modules), the HTML reports
(``report``, ``live_report``, ``selfevolve_report``) and the text helpers every view shares (``textsafe``).
It reads through :mod:`evotrainer.archive` (storage: store, schema, queries) and writes nothing there but
``checkpoint``'s WAL fold; the storage room never imports this one (``docs/layout.md``)."""
