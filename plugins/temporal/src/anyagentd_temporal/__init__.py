"""The ``temporal`` workflow engine of the anyagentd A2A daemon (``docs/scaling-out.md``)."""
