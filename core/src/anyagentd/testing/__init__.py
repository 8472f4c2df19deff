"""Testing support for anyagentd and third-party adapters.

- :mod:`anyagentd.testing.model_server`: a scripted model endpoint (Anthropic Messages + OpenAI Responses)
  on loopback that the real agent CLIs are pointed at; script format in :mod:`anyagentd.testing.model_script`.
- :mod:`anyagentd.testing.agents`: where the pinned real CLIs are, and the environment/flags aiming them
  at the server.
- :mod:`anyagentd.testing.events`: reading a session's events with bounded waits (``EventStream``) and checking
  that an agent's process group is gone, for adapter tests.
- :mod:`anyagentd.testing.pytest_plugin`: the ``model_server`` and ``work`` fixtures (registered as a ``pytest11``
  entry point).

Nothing is imported here, so importing the package stays cheap.
"""
