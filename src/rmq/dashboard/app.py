"""The dashboard's Flask application: ``create_app(settings)``; its pages are ``rmq.dashboard.pages``
(cluster, topics, consumers, producers), ``rmq.dashboard.messages`` and ``rmq.dashboard.capacity``.

Errors from the cluster become a message on the page, never a traceback: a refusal for want of
permission (NO_PERMISSION) is 403, something that does not exist (TOPIC_NOT_EXIST, no such message)
404, nobody answering or anything else the cluster answered 502, a form the page cannot read 400.
"""

from __future__ import annotations

import datetime
import secrets
from typing import Any

from flask import Flask, redirect, render_template, request, session, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from rmq.dashboard import capacity, messages, pages
from rmq.dashboard.config import DashboardSettings
from rmq.dashboard.forms import BadInput
from rmq.dashboard.session import (
    CSRF_FIELD,
    LOGIN_KEY,
    DashboardState,
    LoginRefused,
    csrf_token,
    current_login,
    login_gate,
    state,
    writes_allowed,
)
from rmq.errors import AdminError, NotFound, RemotingError, ResponseError
from rmq.protocol.codes import ResponseCode

NOT_FOUND_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.QUERY_NOT_FOUND,
        ResponseCode.CONSUMER_NOT_ONLINE,
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    }
)


def format_ms(ms: Any) -> str:
    """A time in ms since the epoch as the dashboard's local time (``-`` for none)."""
    try:
        value = int(ms)
    except (TypeError, ValueError):
        return "-"
    if value <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(value / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def create_app(config: DashboardSettings) -> Flask:
    app = Flask("rmq.dashboard")
    app.secret_key = config.session_secret or secrets.token_urlsafe(32)
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax")
    app.extensions["rmq-dashboard"] = DashboardState(config)
    app.jinja_env.filters["ms"] = format_ms
    app.before_request(login_gate)

    @app.context_processor
    def common() -> dict[str, Any]:
        login = current_login()
        return {
            "login": login,
            "login_required": config.login_required,
            "read_only": config.read_only,
            "can_write": writes_allowed(),
            "csrf_field": CSRF_FIELD,
            "csrf_token": csrf_token,
            "namesrv_addr": config.namesrv_addr,
        }

    @app.route("/login", methods=["GET", "POST"])
    def login() -> Any:
        target = request.values.get("next") or url_for("pages.cluster")
        # "//host" and "/\\host" both leave the site in a browser
        if not target.startswith("/") or target.startswith(("//", "/\\")):
            target = url_for("pages.cluster")  # never off this site
        if request.method == "GET":
            return render_template("login.html", next=target, refused=None)
        access_key = request.form.get("access_key", "").strip()
        secret_key = request.form.get("secret_key", "")
        if not access_key or not secret_key:
            return render_template("login.html", next=target, refused="give the access key and its secret key"), 400
        try:
            token = state().log_in(access_key, secret_key)
        except LoginRefused as e:
            return render_template("login.html", next=target, refused=str(e)), 403
        state().log_out(session.get(LOGIN_KEY))
        session.clear()
        session[LOGIN_KEY] = token
        return redirect(target)

    @app.route("/logout", methods=["POST"])
    def logout() -> Response:
        state().log_out(session.get(LOGIN_KEY))
        session.clear()
        return redirect(url_for("login") if config.login_required else url_for("pages.cluster"))

    @app.errorhandler(ResponseError)
    def refused(e: ResponseError) -> tuple[str, int]:
        try:
            name = ResponseCode(e.code).name
        except ValueError:
            name = f"code {e.code}"
        status = 403 if e.code == ResponseCode.NO_PERMISSION else 404 if e.code in NOT_FOUND_CODES else 502
        message = f"{e.address or 'the cluster'} answered {name}: {e.remark or 'no remark'}"
        return render_template("error.html", status=status, title=name, message=message), status

    @app.errorhandler(RemotingError)
    def unreachable(e: RemotingError) -> tuple[str, int]:
        message = f"cannot reach the cluster at {config.namesrv_addr}: {e}"
        return render_template("error.html", status=502, title="No answer", message=message), 502

    @app.errorhandler(AdminError)
    def admin_error(e: AdminError) -> tuple[str, int]:
        status = 404 if isinstance(e, NotFound) else 502
        return render_template("error.html", status=status, title="Not done", message=str(e)), status

    @app.errorhandler(BadInput)
    def bad_input(e: BadInput) -> tuple[str, int]:
        return render_template("error.html", status=400, title="Bad request", message=str(e)), 400

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> tuple[str, int]:
        status = e.code or 500
        return render_template("error.html", status=status, title=e.name, message=e.description), status

    app.register_blueprint(pages.blueprint)
    app.register_blueprint(messages.blueprint)
    app.register_blueprint(capacity.blueprint)
    return app
