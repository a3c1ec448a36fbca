"""The message pages: rocketmq-dashboard's three searches (by topic and key, by message id, by topic
and store-time range), a message with its body, properties and trace (where it went for each group:
consumed or not, its retries, its dead letter), and a resend."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from rmq.client.admin_client import message_body
from rmq.dashboard.forms import BadInput, text_field, time_field, topic_field
from rmq.dashboard.session import admin, check_write
from rmq.errors import AdminError, NotFound
from rmq.protocol.message import MessageProperty
from rmq.protocol.record import StoredMessage

blueprint = Blueprint("messages", __name__)

# The most messages one search shows (rocketmq-dashboard caps its time-range search too)
MAX_RESULTS = 64
# How much of a body the message page shows
BODY_SHOWN_BYTES = 64 * 1024
SEARCHES = ("key", "id", "time")


@blueprint.route("/messages")
def search() -> str:
    mode = request.args.get("mode", "key")
    if mode not in SEARCHES:
        raise BadInput(f"mode must be one of {', '.join(SEARCHES)}, got {mode!r}")
    form = {name: request.args.get(name, "").strip() for name in ("topic", "key", "id", "begin", "end")}
    found: list[StoredMessage] | None = None
    capped = False
    missing = None
    if any(form[name] for name in ("key", "id", "begin", "end")) or (mode == "time" and form["topic"]):
        client = admin()
        if mode == "key":
            found = client.query_by_key(topic_field(), text_field("key"), max_num=MAX_RESULTS)
        elif mode == "id":
            try:
                found = [client.find_message(text_field("id"), form["topic"] or None)]
            except NotFound as e:
                missing = str(e)
            except AdminError as e:
                if "no message" not in str(e):
                    raise
                missing = str(e)
        else:
            begin, end = time_field("begin"), time_field("end")
            if begin is not None and end is not None and end <= begin:
                raise BadInput("end must be after begin")
            found = client.print_messages(topic_field(), begin, end, limit=MAX_RESULTS + 1)
            capped = len(found) > MAX_RESULTS
            found = found[:MAX_RESULTS]
        if found is not None:
            found.sort(key=lambda m: (m.store_timestamp, m.msg_id))
            if not found and missing is None:
                missing = "no message found"
    return render_template(
        "messages.html", mode=mode, form=form, found=found, capped=capped, missing=missing, max_results=MAX_RESULTS
    )


def _body_view(message: StoredMessage) -> dict[str, Any]:
    body = message_body(message)
    shown = body[:BODY_SHOWN_BYTES]
    try:
        text, encoding = shown.decode("utf-8"), "UTF-8 text"
    except UnicodeDecodeError:
        text, encoding = shown.hex(" "), "hex (not UTF-8)"
    return {"text": text, "encoding": encoding, "size": len(body), "cut": len(body) - len(shown)}


@blueprint.route("/messages/<msg_id>")
def message(msg_id: str) -> str:
    client = admin()
    topic = request.args.get("topic", "").strip() or None
    try:
        found = client.find_message(msg_id, topic)
    except AdminError as e:
        if isinstance(e, NotFound) or "no message" in str(e) or "not a broker message id" in str(e):
            raise NotFound(str(e)) from None
        raise
    tracks = client.message_track(found)
    origin_topic = found.properties.get(MessageProperty.RETRY_TOPIC)
    return render_template(
        "message.html",
        m=found,
        body=_body_view(found),
        properties=sorted(found.properties.items()),
        tracks=tracks,
        origin_topic=origin_topic,
        origin_id=found.properties.get(MessageProperty.ORIGIN_MESSAGE_ID),
        uniq_key=found.properties.get(MessageProperty.UNIQ_KEY),
    )


@blueprint.route("/messages/<msg_id>/resend", methods=["POST"])
def resend(msg_id: str) -> Response:
    check_write()
    topic = topic_field()
    result = admin().resend_message(topic, msg_id)
    flash(f"resent to {topic}: new message {result.msg_id} ({result.status.name})", "done")
    return redirect(url_for("messages.message", msg_id=msg_id, topic=topic))
