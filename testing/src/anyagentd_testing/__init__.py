"""Testing support for anyagentd and third-party adapters.

- :mod:`anyagentd_testing.model_server`: a scripted model endpoint (Anthropic Messages + OpenAI Responses)
  on loopback that the real agent CLIs are pointed at; script format in :mod:`anyagentd_testing.model_script`.
- :mod:`anyagentd_testing.agents`: where the pinned real CLIs are, and the environment/flags aiming them
  at the server.
- :mod:`anyagentd_testing.events`: reading a session's events with bounded waits (``EventStream``) and checking
  that an agent's process group is gone, for adapter tests.
- :mod:`anyagentd_testing.pytest_plugin`: the ``model_server`` and ``work`` fixtures (registered as a ``pytest11``
  entry point).

Nothing is imported here, so importing the package stays cheap.
"""
