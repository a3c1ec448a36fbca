"""The capacity page: the plan rmq-capacity wrote to capacityReportDir (capacity.json's summary,
its charts, report.html), its files served from that directory only; with none configured or
written yet, how to make one."""

from __future__ import annotations

import json
from pathlib import Path

from flask import Blueprint, abort, render_template, send_file
from werkzeug.security import safe_join
from werkzeug.wrappers import Response

from rmq.dashboard.session import state

blueprint = Blueprint("capacity", __name__)

REPORT = "report.html"
SUMMARY = "capacity.json"
# what rmq-capacity writes (rmq.perf.capacity.report): nothing else of the directory is served
SERVED_SUFFIXES = frozenset({".html", ".png", ".json"})


def report_dir() -> Path | None:
    configured = state().config.capacity_report_dir
    return Path(configured) if configured else None


def confined(root: Path, name: str) -> Path | None:
    """The file ``name`` names inside ``root``, or None when it is not one rmq-capacity writes, or
    leads out of ``root`` (``..``, an absolute path, a symbolic link pointing elsewhere)."""
    joined = safe_join(str(root), name)
    if joined is None:
        return None
    path = Path(joined)
    try:
        resolved = path.resolve(strict=True)
    except OSError:
        return None
    if not resolved.is_relative_to(root.resolve()) or not resolved.is_file() or path.suffix not in SERVED_SUFFIXES:
        return None
    return resolved


# capacity.json's plan.recommended, as the page states it: (what, key, how it is shown)
PLAN_FACTS = (
    ("Mode", "mode", str),
    ("Broker sets", "broker_sets", str),
    ("Masters", "masters", str),
    ("Slaves", "slaves", str),
    ("Machines", "machines", str),
    ("Bound by", "binding", str),
    ("Network in, MB/s", "network_in_mb_per_s", lambda v: f"{v:,.1f}"),
    ("Disk per master", "disk_per_master_bytes", lambda v: f"{v / 2**30:,.1f} GiB"),
    ("Disk of the cluster", "disk_cluster_bytes", lambda v: f"{v / 2**30:,.1f} GiB"),
)


def _plan_summary(root: Path) -> list[tuple[str, str]]:
    """The recommendation of capacity.json's plan, a fact a row (none when the file does not read)."""
    try:
        plan = json.loads((root / SUMMARY).read_text())["plan"]
        recommended, workload = plan["recommended"], plan["workload"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    rows = []
    if isinstance(workload, dict) and {"peak_rate", "size", "slo_p99_ms"} <= workload.keys():
        peak, size, slo = workload["peak_rate"], workload["size"], workload["slo_p99_ms"]
        rows.append(("Workload", f"{peak:,.0f} msgs/s at peak, {size:,} B messages, p99 at most {slo} ms"))
    for what, key, shown in PLAN_FACTS:
        value = recommended.get(key) if isinstance(recommended, dict) else None
        if value is not None:
            try:
                rows.append((what, shown(value)))
            except (TypeError, ValueError):
                rows.append((what, str(value)))
    return rows


@blueprint.route("/capacity")
def page() -> str:
    root = report_dir()
    if root is None or not (root / REPORT).is_file():
        return render_template("capacity.html", root=root, report=False, charts=[], summary=[])
    charts = sorted(p.name for p in root.iterdir() if p.suffix == ".png" and p.is_file())
    return render_template("capacity.html", root=root, report=True, charts=charts, summary=_plan_summary(root))


@blueprint.route("/capacity/files/<path:name>")
def file(name: str) -> Response:
    root = report_dir()
    path = confined(root, name) if root is not None else None
    if path is None:
        abort(404, f"no file {name!r} in the capacity report directory")
    return send_file(path)
