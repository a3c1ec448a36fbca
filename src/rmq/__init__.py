"""rmq: a RocketMQ-compatible message broker, name server and client SDK.

Layout (README.md's architecture section draws it; tests/test_imports.py enforces who imports whom):
    rmq.errors, rmq._service, rmq._clock, rmq._files   neutral plumbing: errors, services and timers, files
    rmq.protocol              what roles share: codes, message properties and limits, record and
                              batch codecs, heartbeats, routes, admin bodies, header fields
    rmq.net                   remoting frames, the epoll event loop and server, the remoting client
    rmq.store                 the MessageStore facade over its compiled core rmq.store._store / rmq.store._index
    rmq.namesrv               the name server
    rmq.broker                the broker (may use the store)
    rmq.client                the producer / consumer SDK and the admin client
    rmq.cli                   the command-line entry points (may put any roles together)
"""

__version__ = "0.1.0"
