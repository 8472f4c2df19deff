"""What an operator's tooling reads of a running daemon: the health probes (:mod:`.health`, ``/healthz`` and
``/readyz``), the observation of each request (:mod:`.requests`) and its sinks — the access log (:mod:`.access`)
and the Prometheus metrics (:mod:`.metrics`, ``/metrics``, imported only when ``[a2a.metrics] enabled``: the
Prometheus client is never loaded otherwise, and never by ``anyagentd serve``) —, and the audit log
(:mod:`.audit`). The daemon's app assembles them (:func:`..app.build_app`), giving each what it reads.
"""
