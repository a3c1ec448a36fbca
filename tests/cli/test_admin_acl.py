"""rmq-admin signing its requests for a broker with aclEnable (--access-key / --secret-key)."""

from __future__ import annotations

from click.testing import CliRunner

from rmq.cli.admin import main
from tests.helpers import wait_until
from tests.helpers.acl import start_acl_cluster
from tests.helpers.processes import Cluster

RULES = """\
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
  - accessKey: reader-key
    secretKey: reader-secret
    defaultTopicPerm: SUB
"""


def test_rmq_admin_signs_with_its_keys_and_only_an_admin_account_creates_topics(spawn, tmp_path):
    cluster = start_acl_cluster(spawn, tmp_path, RULES, ("admin-key", "admin-secret"))
    try:

        def admin(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
            result = CliRunner().invoke(main, [*args, "-n", cluster.namesrv_addr], env=env)
            return result.exit_code, result.output

        code, output = admin("topic", "create", "Unsigned")
        assert code != 0 and "NO_PERMISSION" in output and "No accessKey is configured" in output

        code, output = admin(
            "topic", "create", "ByReader", "--access-key", "reader-key", "--secret-key", "reader-secret"
        )
        assert code != 0 and "Need admin permission" in output and "accessKey=reader-key" in output

        code, output = admin("topic", "create", "Wrong", "--access-key", "admin-key", "--secret-key", "guessed")
        assert code != 0 and "Check signature failed for accessKey=admin-key" in output

        code, output = admin("topic", "create", "Orders", "--access-key", "admin-key", "--secret-key", "admin-secret")
        assert code == 0, output
        # the secret may come from the environment, out of sight of ps
        code, output = admin(
            "topic", "status", "Orders", env={"RMQ_ACCESS_KEY": "admin-key", "RMQ_SECRET_KEY": "admin-secret"}
        )
        assert code == 0, output
        assert cluster.max_offsets("Orders") != {}, "the topic exists on the broker"

        code, output = admin("topic", "create", "Half", "--access-key", "admin-key")
        assert code == 2 and "--access-key and --secret-key go together" in output
    finally:
        cluster.close()


def test_rmq_admin_signs_name_server_writes_with_the_cluster_account(spawn, tmp_path):
    """A name server with cluster credentials takes rmq-admin's topic deletion only signed by the
    cluster account, given as --access-key / --secret-key."""
    store = tmp_path / "store"
    store.mkdir()
    cluster = Cluster(spawn, store)
    cluster.settings.update(clusterAccessKey="rmq-cluster", clusterSecretKey="cluster-secret")
    cluster.start("--cluster-access-key", "rmq-cluster", env={"RMQ_CLUSTER_SECRET_KEY": "cluster-secret"})
    try:
        cluster.create_topic("Doomed")
        wait_until(lambda: "Doomed" in admin_output(cluster, "topic", "list")[1], 5, "the topic routed")
        code, output = admin_output(cluster, "topic", "delete", "Doomed")
        assert code != 0 and "NO_PERMISSION" in output and "must be signed by the cluster account" in output
        code, output = admin_output(
            cluster, "topic", "delete", "Doomed", "--access-key", "rmq-cluster", "--secret-key", "cluster-secret"
        )
        assert code == 0, output
        assert "Doomed" not in admin_output(cluster, "topic", "list")[1]
    finally:
        cluster.close()


def admin_output(cluster: Cluster, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "-n", cluster.namesrv_addr])
    return result.exit_code, result.output
