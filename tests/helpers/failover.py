"""Two broker processes of one brokerName that swap roles by failover: a SYNC_MASTER SIGKILLed while
sends are in flight, its slave promoted (PROMOTE_TO_MASTER), the old master restarted as a SLAVE of
it. Each keeps its store and ports across restarts; ``stderr`` of every broker run goes to a file of
its own, so a test can read what a rejoining slave logged it dropped.

    pair = FailoverPair(spawn, tmp_path).start()
    report = pair.round()        # kill, check, promote, rejoin, converge; roles swapped after it
"""

from __future__ import annotations

from tests.helpers import harness

BROKER_NAME = harness.BROKER_NAME
TOPIC = harness.TOPIC
QUEUES = harness.QUEUES
FailoverPair = harness.FailoverPair
RoundReport = harness.RoundReport
