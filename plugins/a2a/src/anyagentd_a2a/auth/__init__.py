"""Sign-in without shared secrets: the device authorization grant (:mod:`.device`), the signed-in sessions it
issues (:mod:`.sessions`) and their HTTP endpoints (:mod:`.routes`)."""
