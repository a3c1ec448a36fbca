"""What ``rmq-dashboard`` runs with: ``DashboardSettings``, read strictly from
``rmq.settings.DASHBOARD_SETTINGS`` (``-c dashboard.conf``, ``--set key=value``, the options)."""

from __future__ import annotations

import dataclasses
import ssl
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
    tls_enable: bool = _setting("tlsEnable")
    tls_trust_cert_path: str | None = _setting("tlsTrustCertPath")

    def tls(self) -> bool | ssl.SSLContext:
        """What the AdminClients connect with: plain, TLS against the system's CAs, or against
        tlsTrustCertPath (host names unchecked: brokers and name servers are addressed by IP, as
        rmq-admin --tls-ca does)."""
        if self.tls_trust_cert_path:
            context = ssl.create_default_context(cafile=self.tls_trust_cert_path)
            context.check_hostname = False
            return context
        return self.tls_enable
