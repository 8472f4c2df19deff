"""anyagentd's opencode adapter: ``opencode serve`` driven over HTTP and server-sent events.

- :mod:`.adapter`: the catalog profile, ``probe`` and ``connect``;
- :mod:`.connection`: one live session (the server's process, the event stream, turns, answers, cancel, close);
- :mod:`.mapping`: opencode's events → normalized events;
- :mod:`.plugin`: the ``register_adapters`` hook.
"""
