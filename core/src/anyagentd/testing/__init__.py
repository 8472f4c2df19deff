"""Testing support for anyagentd and third-party adapters.

- :mod:`anyagentd.testing.model_server`: a scripted model endpoint (Anthropic Messages + OpenAI Responses)
  on loopback that the real agent CLIs are pointed at; script format in :mod:`anyagentd.testing.model_script`.
- :mod:`anyagentd.testing.agents`: where the pinned real CLIs are, and the environment/flags aiming them
  at the server.
- :mod:`anyagentd.testing.pytest_plugin`: the ``model_server`` fixture (registered as a ``pytest11``
  entry point).

Nothing is imported here, so importing the package stays cheap.
"""
