"""What ``rmq-dashboard`` runs with: ``DashboardSettings``, read strictly from
``rmq.settings.DASHBOARD_SETTINGS`` (``-c dashboard.conf``, ``--set key=value``, the options)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from rmq.settings import DASHBOARD_SETTINGS, SettingsTable, SettingsView, setting


def _setting(key: str) -> Any:
    return setting(key, DASHBOARD_SETTINGS)


@dataclasses.dataclass
class DashboardSettings(SettingsView):
    """The dashboard's settings; the defaults are DASHBOARD_SETTINGS'."""

    settings_table: ClassVar[SettingsTable] = DASHBOARD_SETTINGS

    listen_port: int = _setting("listenPort")
    bind_address: str = _setting("bindAddress")
    namesrv_addr: str = _setting("namesrvAddr")
    login_required: bool = _setting("loginRequired")
    read_only: bool = _setting("readOnly")
    session_secret: str | None = _setting("sessionSecret")
    capacity_report_dir: str | None = _setting("capacityReportDir")
    admin_timeout_millis: int = _setting("adminTimeoutMillis")
