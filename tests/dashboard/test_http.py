"""The dashboard over plain HTTP: the capacity report's files served from its directory only, and
name servers that do not answer at start (a page says so, and works once they do)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from rmq.cli.dashboard import main
from rmq.dashboard.app import create_app
from rmq.dashboard.capacity import confined
from rmq.dashboard.config import DashboardSettings
from rmq.perf.procs import LOOPBACK, free_port, wait_listening
from tests.helpers import wait_until
from tests.helpers.dashboard import start_dashboard
from tests.helpers.tls import start_tls_cluster


@pytest.fixture
def report(tmp_path):
    """A capacity report directory as rmq-capacity writes one, beside a file that is not in it."""
    root = tmp_path / "plan"
    root.mkdir()
    (root / "report.html").write_text("<h1>the plan</h1>")
    plan = {
        "workload": {"peak_rate": 50000, "size": 1024, "slo_p99_ms": 2},
        "recommended": {"mode": "ASYNC_FLUSH async_master", "machines": 4, "disk_per_master_bytes": 3 << 30},
    }
    (root / "capacity.json").write_text(json.dumps({"plan": plan}))
    (root / "mode_cost.png").write_bytes(b"\x89PNG chart")
    (root / "notes.txt").write_text("not rmq-capacity's")
    (tmp_path / "secret.png").write_bytes(b"outside")
    os.symlink(tmp_path / "secret.png", root / "linked.png")
    return root


def test_the_capacity_page_serves_the_reports_files_and_nothing_outside_its_directory(report):
    client = create_app(DashboardSettings(capacity_report_dir=str(report))).test_client()
    page = client.get("/capacity")
    assert page.status_code == 200
    for shown in ("ASYNC_FLUSH async_master", "50,000 msgs/s at peak", "3.0 GiB", "/capacity/files/mode_cost.png"):
        assert shown.encode() in page.data, shown
    assert client.get("/capacity/files/mode_cost.png").data == b"\x89PNG chart"
    assert client.get("/capacity/files/report.html").data == b"<h1>the plan</h1>"
    for escape in (
        "../secret.png",
        "%2e%2e/secret.png",
        "..%2fsecret.png",
        f"{report.parent}/secret.png",
        "/etc/passwd",
        "linked.png",  # a link inside that points out
        "notes.txt",  # not a file rmq-capacity writes
        "missing.png",
    ):
        answer = client.get(f"/capacity/files/{escape}", follow_redirects=True)
        assert answer.status_code == 404, escape
        assert b"outside" not in answer.data
    # what a client could send that no browser normalises away, to the check itself
    for escape in ("../secret.png", "sub/../../secret.png", str(report.parent / "secret.png"), "linked.png", "."):
        assert confined(report, escape) is None, escape
    assert confined(report, "./mode_cost.png") == report / "mode_cost.png"


def test_name_servers_down_at_start_are_a_502_page_until_they_answer(spawn):
    port = free_port()
    namesrv = f"{LOOPBACK}:{port}"
    _, url = start_dashboard(spawn, namesrv)
    with pytest.raises(urllib.error.HTTPError) as down:
        urllib.request.urlopen(f"{url}/topics", timeout=10)
    assert down.value.code == 502 and f"cannot reach the cluster at {namesrv}".encode() in down.value.read()
    wait_listening(spawn("-m", "rmq.cli.namesrv", "--host", LOOPBACK, "--port", str(port)), port, "rmq-namesrv")

    def topics_page() -> bytes | None:
        try:
            with urllib.request.urlopen(f"{url}/", timeout=10) as answer:
                return answer.read()
        except urllib.error.HTTPError:
            return None

    assert b"No broker is registered" in wait_until(topics_page, 15, "the cluster page once the name server answers")


def test_rmq_dashboard_reads_its_settings_strictly_and_prints_them_with_the_secret_masked():
    printed = CliRunner().invoke(
        main, ["-p", "--set", "sessionSecret=s3cret", "--read-only"], env={"NAMESRV_ADDR": "10.0.0.1:9876"}
    )
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert "listenPort=8080" in lines[0] and "readOnly=true" in printed.output and "s3cret" not in printed.output
    assert any(line.startswith("namesrvAddr=10.0.0.1:9876 ") for line in lines)
    refused = CliRunner().invoke(main, ["--set", "listenPrt=1"])
    assert refused.exit_code == 2
    assert "listenPrt is not a setting (from --set): did you mean listenPort?" in refused.output
    no_ca = CliRunner().invoke(main, ["--set", "tlsTrustCertPath=/nonexistent/ca.pem"])
    assert no_ca.exit_code == 2 and "tlsTrustCertPath '/nonexistent/ca.pem' cannot be used" in no_ca.output


def test_the_dashboard_reaches_a_cluster_that_serves_tls_only(spawn, tmp_path):
    namesrv, broker, certificate = start_tls_cluster(spawn, tmp_path)
    _, url = start_dashboard(spawn, namesrv, "--tls-ca", str(certificate.cert))
    with urllib.request.urlopen(f"{url}/", timeout=10) as answer:
        page = answer.read()
    assert broker.encode() in page and b"ASYNC_MASTER" in page and b"not answering" not in page
    _, plain = start_dashboard(spawn, namesrv)
    with urllib.request.urlopen(f"{plain}/", timeout=20) as answer:
        assert b"not answering" in answer.read()  # the broker turns plain connections away
