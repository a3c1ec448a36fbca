"""Apache's 5.x RocketMQ clients, which speak only the gRPC protocol (``apache.rocketmq.v2``), found
where ``.ci/install-peers`` put them, and a runner of their scripts (``tests/compat/clients``):

- PyPI ``rocketmq-python-client==5.1.2`` (peer ``rocketmq-python-5``), in a virtual environment of
  its own: it installs a top-level package named ``rocketmq``, as the 4.x C++ wrapper does. Its
  scripts are ``py5_*.py`` (sharing ``py5_client.py``); it writes logs under ``$HOME/logs``.
- npm ``rocketmq-client-nodejs@1.0.8`` (peer ``rocketmq-nodejs-5``): ``node5_*.js``. It blocks its
  ``startup()`` until the server's Settings arrive on the Telemetry stream, and sends and receives on
  queue 0 only.

Both talk to a broker's gRPC endpoint (``grpcServerPort``), never to the name server: ``with_grpc``
gives a broker's settings a free port for it, ``endpoint`` names it. The scripts print JSON lines;
``ClientRunner`` (tests.helpers.compat) runs them with a bounded wait.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from rmq.protocol.codes import ResponseCode
from rmq.protocol.topic_attributes import MESSAGE_TYPE_ATTRIBUTE, format_attribute_changes
from tests.helpers import LOOPBACK, free_port, wait_for_port
from tests.helpers.compat import ClientRunner, peer
from tests.helpers.processes import Cluster
from tests.helpers.requests import update_topic_request

PYTHON_PEER = "rocketmq-python-5"
NODE_PEER = "rocketmq-nodejs-5"
#: the broker setting of the gRPC endpoint's port (RocketMQ's proxy key)
GRPC_PORT_KEY = "grpcServerPort"
#: what a README snippet of the 5.x Python client (not of our SDK) begins with
PYTHON_CLIENT_SNIPPET = "from rocketmq import"
#: the gRPC endpoint the README's snippets name
README_ENDPOINT = "127.0.0.1:8081"
#: CreateTopicRequestHeader's field of topic attributes ("+key=value,...")
TOPIC_ATTRIBUTES_FIELD = "attributes"
#: seconds a broker's gRPC endpoint may take to listen once its remoting port does
GRPC_START_TIMEOUT = 10.0


def install_python_client() -> Path:
    """The python executable of a virtual environment holding rocketmq-python-client==5.1.2."""
    return Path(peer(PYTHON_PEER)["python"])


def install_node_client() -> Path:
    """A directory whose node_modules holds rocketmq-client-nodejs (NODE_PATH of the node scripts)."""
    return Path(peer(NODE_PEER)["node_path"])


#: tests wait seconds, not the proxy's defaults: a receive may ask for 1 s of invisibility (10 s by
#: default) and an empty one long-polls 1 s at least (5 s)
FAST_RECEIVES = {"minInvisibleTimeMillsForRecv": "1000", "grpcClientConsumerMinLongPollingTimeoutMillis": "1000"}


def with_grpc(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` of a broker with its gRPC endpoint on a free port (kept when it has one), and
    FAST_RECEIVES."""
    settings.setdefault(GRPC_PORT_KEY, str(free_port()))
    settings.update(FAST_RECEIVES, enableGrpc="true")
    return settings


def endpoint(settings: dict[str, str]) -> str:
    """The gRPC endpoint (host:port) of the broker started with ``settings``."""
    return f"{LOOPBACK}:{settings[GRPC_PORT_KEY]}"


class GrpcCluster(Cluster):
    """A Cluster whose broker serves gRPC on a port of its own (kept across restarts): ``endpoint``."""

    def __init__(self, spawn, store: Path, credentials: tuple[str, str] | None = None):
        super().__init__(spawn, store, credentials)
        with_grpc(self.settings)

    @property
    def endpoint(self) -> str:
        return endpoint(self.settings)

    def create_typed_topic(self, topic: str, message_type: str, queues: int = 4) -> str:
        """``topic`` with the 5.x attribute ``+message.type`` (NORMAL, FIFO, DELAY, TRANSACTION), as
        ``rmq-admin topic create --type`` sends it: the 5.x clients send only the types a route accepts."""
        request = update_topic_request(topic, queues)
        request.ext_fields[TOPIC_ATTRIBUTES_FIELD] = format_attribute_changes({MESSAGE_TYPE_ATTRIBUTE: message_type})
        answer = self.call(request)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return topic

    def start_broker(self) -> None:
        super().start_broker()
        wait_for_port(
            int(self.settings[GRPC_PORT_KEY]), self.broker_proc, "rmq-broker's gRPC endpoint", GRPC_START_TIMEOUT
        )


class Grpc5Clients:
    """The 5.x clients' scenario scripts through one ClientRunner (python ones with the 5.x venv,
    node ones with the Node client on NODE_PATH)."""

    def __init__(self, runner: ClientRunner):
        self.runner = runner

    def produce(self, endpoint: str, topic: str, count: int, timeout: float = 60, **options) -> list[dict]:
        """``count`` messages by the Python client: bodies <prefix>-body-<i> (py5_produce.py's options)."""
        return self.runner.run("py5_produce.py", endpoint, topic, count, json.dumps(options), timeout=timeout)

    def simple_consume(
        self, endpoint: str, topic: str, group: str, count: int, idle: float, timeout: float = 60, **options
    ) -> list[dict]:
        """Receive (and ack) with the Python SimpleConsumer until ``count`` or ``idle`` seconds of nothing."""
        return self.runner.run(
            "py5_simple_consume.py", endpoint, topic, group, count, idle, json.dumps(options), timeout=timeout
        )

    def start_simple_consumer(
        self, endpoint: str, topic: str, group: str, count: int, idle: float, **options
    ) -> subprocess.Popen:
        """``simple_consume`` started, for ClientRunner.wait_all."""
        return self.runner.start("py5_simple_consume.py", endpoint, topic, group, count, idle, json.dumps(options))

    def push_consume(
        self, endpoint: str, topic: str, group: str, expression: str, count: int, idle: float, timeout: float = 60
    ) -> list[dict]:
        return self.runner.run("py5_push_consume.py", endpoint, topic, group, expression, count, idle, timeout=timeout)


def readme_python_client_snippets(readme: Path) -> list[str]:
    """The README's ```python snippets of the 5.x Python client."""
    return [
        s for s in re.findall(r"^```python\n(.*?)^```$", readme.read_text(), re.S | re.M) if PYTHON_CLIENT_SNIPPET in s
    ]


def python_client_log(home: Path) -> str:
    """What the 5.x Python client logged (it logs under ``$HOME/logs/rocketmq_python`` only)."""
    return "".join(log.read_text() for log in sorted((home / "logs" / "rocketmq_python").glob("*.log*")))


def acked_bodies(lines: list[dict]) -> list[str]:
    """The bodies a SimpleConsumer script acked (with success), in order."""
    return [line["body"] for line in lines if "acked" in line]


def delivered(lines: list[dict]) -> list[dict]:
    """The deliveries a SimpleConsumer script printed, in order."""
    return [line for line in lines if "delivered" in line]
