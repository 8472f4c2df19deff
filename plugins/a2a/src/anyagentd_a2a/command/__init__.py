"""The A2A command extension (``https://agentd.dev/a2a/ext/command``): recognising, refusing and answering
commands. The ops themselves are plugins (:mod:`anyagentd_a2a.ops`), registered through core's ``register_ops``."""
