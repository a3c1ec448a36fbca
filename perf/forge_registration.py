"""Issue 22's acceptance 2, literally: an unauthenticated client holds a forged REGISTER_BROKER (the
real master's name, id 0, a made-up address, epoch 2147483647) open for 40 s against a real
rmq-namesrv + rmq-broker while a producer sends to the real master; reports send refusals and
route changes. Run once without cluster credentials and once with them (the forgery refused
NO_PERMISSION, logged once).

    PYTHONPATH=src python perf/forge_registration.py [--seconds 40] [--period 30000] [--mode both|open|credentials]

``--period`` is the broker's registerNameServerPeriod (ms): with RocketMQ's 30 s the master
registers once or more while the forgery is held. Exit status 1 when a send was refused or the
route moved.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from harness import (
    hold_forged_registration,
    update_topic_request,
)

from rmq.net import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.perf.procs import Processes, broker_settings, start_broker_process, start_namesrv, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode

TOPIC = "ForgeryTopic"
AK, SK = "rmq-cluster", "forge-bench-secret"


def run(seconds: float, period: int, credentials: bool, root: Path) -> bool:
    processes = Processes()
    log = root / "namesrv.log"
    try:
        namesrv_args = ("--cluster-access-key", AK) if credentials else ()
        env = {"RMQ_CLUSTER_SECRET_KEY": SK} if credentials else {}
        with open(log, "wb") as stderr:
            _, namesrv = start_namesrv(processes.spawn, *namesrv_args, env=env, stderr=stderr)
        settings = broker_settings(root / "store", registerNameServerPeriod=str(period))
        del settings["namesrvListenPort"]
        if credentials:
            settings.update(clusterAccessKey=AK, clusterSecretKey=SK)
        _, broker = start_broker_process(processes.spawn, settings, namesrv, extra_args=("--log-level", "WARNING"))
        with RemotingClient() as client:
            assert client.invoke_sync(broker, update_topic_request(TOPIC), 5).code == ResponseCode.SUCCESS
            route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
            wait_until(lambda: client.invoke_sync(namesrv, route, 5).code == ResponseCode.SUCCESS, 10, "routed")
        report = hold_forged_registration(namesrv, broker, "broker-a", TOPIC, seconds)
    finally:
        processes.stop_all()
    refused_lines = log.read_text(errors="replace").count("refused a write from")
    label = "with cluster credentials" if credentials else "without credentials"
    forged = ", ".join(f"{ResponseCode(code).name} x{count}" for code, count in sorted(report.forged.items()))
    print(f"{label}: forged registration held {report.seconds} s (registerNameServerPeriod {period} ms)")
    print(f"  forged registrations answered: {forged}")
    print(f"  sends stored: {report.sends_ok}, refused: {len(report.send_refusals)}")
    for refusal in report.send_refusals[:3]:
        print(f"    {refusal}")
    print(f"  route changes: {len(report.routes) - 1} (routes seen: {report.routes})")
    if credentials:
        print(f"  name server log lines about refused writes: {refused_lines}")
    return not report.send_refusals and len(report.routes) == 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--period", type=int, default=30_000, help="registerNameServerPeriod of the broker (ms)")
    parser.add_argument("--mode", choices=["both", "open", "credentials"], default="both")
    args = parser.parse_args()
    ok = True
    for credentials in {"both": (False, True), "open": (False,), "credentials": (True,)}[args.mode]:
        with tempfile.TemporaryDirectory(prefix="rmq-forge-") as root:
            os.makedirs(Path(root) / "store")
            ok = run(args.seconds, args.period, credentials, Path(root)) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
