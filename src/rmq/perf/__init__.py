"""rmq-perf: the benchmark harness over flush x replication modes, and the perf logs it writes.

``rmq.perf.histogram`` is the mergeable latency histogram every perf-log record carries, and
``rmq.perf.log`` the perf-log schema; the Spark capacity pipeline in ``spark/`` reads both.
"""
