"""rmq: a RocketMQ-compatible message broker, name server and client SDK.

Layout (one package per role, the compiled core underneath):
    rmq._store / rmq._index   Cython: mapped files, CommitLog, ConsumeQueue, IndexFile
    rmq.store                 the MessageStore facade (flush, recovery, retention)
    rmq.net                   remoting frames, the epoll server, the remoting client
    rmq.namesrv               the name server
    rmq.broker                the broker
    rmq.client                the producer / consumer SDK
    rmq.cli                   the command-line entry points
"""

__version__ = "0.1.0"
