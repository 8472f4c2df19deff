"""The scripted agent (catalog id ``mock``): the embedded default, with no process and no network."""
