"""The built-in op families, each a plugin module registered through core's ``register_ops`` hook by its own
entry point (``a2a-status``, ``a2a-config``, ``a2a-inspect``, ``a2a-admin``), exactly as a third-party family is:
disabling one (``ANYAGENTD_DISABLE_PLUGINS=a2a-admin``) makes its ops answer UNKNOWN_OP and leave the card."""
