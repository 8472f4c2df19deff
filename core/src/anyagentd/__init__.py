"""anyagentd: drive the coding agents installed on a machine behind one normalized event model.

The public Python API lives in :mod:`anyagentd.runtime` (``Runtime``, ``Session``); the event model in
:mod:`anyagentd.model`; the plugin hook specs in :mod:`anyagentd.hookspecs`.
"""

__version__ = "0.1.0"
PROTOCOL = 1
"""The wire protocol version written in the hello line (``anyagent-wire.schema.json`` ``Hello.protocol``)."""
