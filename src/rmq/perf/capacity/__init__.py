"""rmq-capacity: the Spark pipeline that turns perf logs into a capacity plan.

    perf logs (*.perf.jsonl)  ──read──▶  records  ──model──▶  curves, saturation, size fit
    (rmq.perf.log's schema)    explicit    (Spark)   merged      ──plan──▶  brokers, disk, network
                               StructType            histograms             ──report──▶ capacity.json,
                                                                                    report.html, *.png

``read``    the Spark session, the perf log's StructType, bad lines counted (never fatal)
``model``   per cell family, the throughput-latency curve from histograms merged in Spark; the
            saturation point under an SLO; run-to-run spread; throughput fitted against size
``plan``    a workload (YAML or flags) against the model: broker sets, disk, network, the cheapest
            mode that meets the SLO, each number with the measurements it came from
``report``  capacity.json, report.html and the charts as PNG
``cli``     the ``rmq-capacity`` command (``spark/capacity.py`` launches it under spark-submit)
``spark_cluster``  ``rmq-capacity cluster up|down|status``: a Spark standalone master and workers
            on this machine, to run the pipeline on executors instead of in local mode

From brokers' stores instead of benchmarks (``--from-store``, ``rmq-traffic``)::

    STORE_DIR/commitlog  ──commitlog_source──▶  records  ──from_store──▶  rates, sizes, fan-out
    (CommitLog files)      rmq-commitlog:        (Spark,   aggregates     ──▶ a workload for ``plan``
                           a Python data source  Arrow)                   ──traffic──▶ traffic.html

``commitlog_source``  ``spark.read.format("rmq-commitlog")``: partitions, record boundaries, corrupt rows
``from_store``        the aggregates of stores' traffic and the workload they give
``traffic``           the ``rmq-traffic`` command and its report

Only ``read`` and ``model`` touch Spark; ``plan`` and ``report`` work on the small collected results.
On a cluster the records are read, exploded and summed in the executors; only aggregates reach the
driver: a row per repeat with its histograms summed (streamed: the driver keeps one histogram a
measured point), a header per run, a row per broker and topic and per group, the bad lines' counts per
file and at most a few of them as examples. No ``collect()`` of records: a pipeline over a thousand
runs' logs needs no more driver memory than one.
"""
