"""Who is using the dashboard, and the admin client each request reads and writes through.

Every cluster read and write goes through ``rmq.client.admin_client.AdminClient``, the one rmq-admin
uses. A session that logged in (an account of the brokers' plain_acl.yml) has an AdminClient of its
own, which signs every request with that account, so the brokers' ACL decides what the operator may
do; the others share one unsigned client. The secret key stays in this process: the browser's cookie
(Flask's, signed with sessionSecret) holds only a random token naming the login, and the session's
CSRF token.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from flask import abort, current_app, g, redirect, request, session, url_for

from rmq.client.admin_client import AdminClient
from rmq.dashboard.config import DashboardSettings
from rmq.errors import AdminError, RemotingError, ResponseError

# Logins kept at once; the least recently used one is logged out past this (its AdminClient closed).
MAX_LOGINS = 64
LOGIN_KEY = "login"
CSRF_KEY = "csrf"
CSRF_FIELD = "csrf_token"

_View = TypeVar("_View", bound=Callable[..., Any])


class LoginRefused(Exception):
    """The brokers refused the account (a wrong secret, an unknown access key), or none could be asked."""


@dataclasses.dataclass
class Login:
    access_key: str
    admin: AdminClient
    last_used: float


class DashboardState:
    """What the app keeps between requests: its settings, the shared unsigned AdminClient (started
    at its first use, so that name servers down at start are not fatal) and the logins."""

    def __init__(self, config: DashboardSettings):
        self.config = config
        self._lock = threading.Lock()
        self._anonymous: AdminClient | None = None
        self._logins: dict[str, Login] = {}
        # one context for every client, its CA file read once, at start
        self._tls = config.tls()

    def _client(self, credentials: tuple[str, str] | None) -> AdminClient:
        timeout = self.config.admin_timeout_millis / 1000
        admin = AdminClient(self.config.namesrv_addr, timeout, credentials=credentials, tls=self._tls)
        admin.client.start()
        return admin

    def anonymous(self) -> AdminClient:
        with self._lock:
            if self._anonymous is None:
                self._anonymous = self._client(None)
            return self._anonymous

    def log_in(self, access_key: str, secret_key: str) -> str:
        """Check the account by one signed read of a master's runtime info (the broker's validator
        checks the signature of every request); the login's token. LoginRefused with the broker's
        remark when it is refused."""
        admin = self._client((access_key, secret_key))
        try:
            masters = admin.master_addrs()
            if not masters:
                raise LoginRefused("no broker is registered with the name servers to check the account against")
            admin.broker_runtime_info(next(iter(masters.values())))
        except ResponseError as e:
            admin.client.shutdown()
            raise LoginRefused(f"{e.address} refused it: {e.remark or 'no remark'}") from None
        except (RemotingError, AdminError, LoginRefused) as e:
            admin.client.shutdown()
            raise LoginRefused(str(e)) from None
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._logins[token] = Login(access_key, admin, time.monotonic())
            while len(self._logins) > MAX_LOGINS:
                oldest = min(self._logins, key=lambda t: self._logins[t].last_used)
                self._logins.pop(oldest).admin.client.shutdown()
        return token

    def login(self, token: str | None) -> Login | None:
        with self._lock:
            found = self._logins.get(token) if token else None
            if found is not None:
                found.last_used = time.monotonic()
            return found

    def log_out(self, token: str | None) -> None:
        with self._lock:
            found = self._logins.pop(token, None) if token else None
        if found is not None:
            found.admin.client.shutdown()

    def close(self) -> None:
        with self._lock:
            clients = [login.admin for login in self._logins.values()]
            if self._anonymous is not None:
                clients.append(self._anonymous)
            self._logins.clear()
            self._anonymous = None
        for admin in clients:
            admin.client.shutdown()


def state() -> DashboardState:
    found: DashboardState = current_app.extensions["rmq-dashboard"]
    return found


def current_login() -> Login | None:
    if "rmq_login" not in g:
        g.rmq_login = state().login(session.get(LOGIN_KEY))
    login: Login | None = g.rmq_login
    return login


def admin() -> AdminClient:
    """The AdminClient of this request: the login's (signing), else the shared unsigned one."""
    login = current_login()
    return login.admin if login is not None else state().anonymous()


def writes_allowed() -> bool:
    """Whether this session may change the cluster: never with readOnly; with loginRequired only
    once logged in (the pages ask for it first); otherwise the cluster itself is open."""
    config = state().config
    if config.read_only:
        return False
    return current_login() is not None or not config.login_required


def csrf_token() -> str:
    token: str | None = session.get(CSRF_KEY)
    if token is None:
        token = session[CSRF_KEY] = secrets.token_urlsafe(24)
    return token


def check_write() -> None:
    """What every POST that changes the cluster runs first: refused (403) unless this session may
    write, and unless the form carries the session's CSRF token."""
    if not writes_allowed():
        abort(
            403,
            "writes are not allowed: " + ("the dashboard is read-only" if state().config.read_only else "log in first"),
        )
    sent = request.form.get(CSRF_FIELD, "")
    if not hmac.compare_digest(sent, session.get(CSRF_KEY) or "\0"):
        abort(403, "the form's CSRF token is missing or not this session's: reload the page and send it again")


def login_gate() -> Any:
    """Before every request: with loginRequired, anything but the login page and the stylesheet
    sends a session without a login to the login page (a POST is refused outright)."""
    if not state().config.login_required or request.endpoint in ("login", "static"):
        return None
    if current_login() is not None:
        return None
    if request.method != "GET":
        abort(403, "log in first: this dashboard requires a login")
    return redirect(url_for("login", next=request.full_path.rstrip("?")))
