"""The capacity page: the plan rmq-capacity wrote to capacityReportDir (capacity.json's summary,
its charts, report.html), its files served from that directory only; with none configured or
written yet, how to make one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def _plan_summary(root: Path) -> list[tuple[str, Any]]:
    """The plan's one-line facts (capacity.json's ``plan``: its numbers and words, not its tables)."""
    try:
        plan = json.loads((root / SUMMARY).read_text()).get("plan") or {}
    except (OSError, ValueError, AttributeError):
        return []
    rows: list[tuple[str, Any]] = []
    for key, value in plan.items():
        if isinstance(value, (str, int, float)):
            rows.append((key, value))
        elif isinstance(value, dict):
            rows += [(f"{key}.{k}", v) for k, v in value.items() if isinstance(v, (str, int, float))]
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
