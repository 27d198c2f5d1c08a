"""Hydra's config dir, shipped as package data (``config_path="conf"`` in :mod:`evotrainer.__main__`).

This file makes it a regular package: Hydra looks a ``pkg://`` config source up with importlib.resources
and accepts it only when it holds an ``__init__.py``; the console script ``evotrainer`` (module
``evotrainer.__main__``, not ``__main__``) makes Hydra resolve ``conf`` as ``pkg://evotrainer.conf``.
"""
