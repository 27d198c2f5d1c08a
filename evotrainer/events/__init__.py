"""Typed, frozen archive events, read and written by every layer (so this package imports none of them).

``base`` (the :class:`~evotrainer.events.base.Event` base and its payload codec), ``kinds`` (one class per
co-evolution event kind, the kind registry and :func:`~evotrainer.events.kinds.from_payload`), ``evaluation``,
``transfer`` and ``selfevolve`` (one evaluation's kinds, the transfer report's kind and a self-evolution run's
variants, registered by ``kinds``).
"""
