"""A broker process with aclEnable, and its plain_acl.yml rewritten under it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.processes import Cluster


def write_acl_rules(store: Path, text: str) -> None:
    """Replace ``<store>/conf/plain_acl.yml`` (the default aclConfigFile) in one step, as an editor
    that saves through a temporary file does."""
    path = store / "conf" / "plain_acl.yml"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def start_acl_cluster(spawn, tmp_path: Path, rules: str, credentials: tuple[str, str]) -> Cluster:
    """An rmq-namesrv and an rmq-broker with aclEnable and ``rules`` (topics are created, not
    auto-created); the cluster's ``client`` signs with ``credentials``. Close it when done."""
    store = tmp_path / "broker-store"
    store.mkdir()
    write_acl_rules(store, rules)
    cluster = Cluster(spawn, store, credentials=credentials)
    cluster.settings.update(aclEnable="true", autoCreateTopicEnable="false")
    try:
        return cluster.start()
    except BaseException:
        cluster.close()
        raise
