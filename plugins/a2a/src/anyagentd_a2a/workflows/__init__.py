"""Durable workflows whose steps drive agents: definitions (:mod:`.definition`), templates (:mod:`.template`), the
run and step state rules (:mod:`.state`), the store (:mod:`.store`) and the runner (:mod:`.runner`)."""
