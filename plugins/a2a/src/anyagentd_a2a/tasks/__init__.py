"""A2A tasks: the rules of their states (:mod:`.state`), kept apart from what produces and stores them."""
