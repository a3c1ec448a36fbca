"""Reading what a page's form or URL carries: a wrong value is ``BadInput``, answered 400 with what
was wrong and what was expected."""

from __future__ import annotations

import datetime

from flask import request

from rmq.protocol.message import group_error, topic_error


class BadInput(ValueError):
    """A form field or query parameter the page cannot use."""


def text_field(name: str, default: str | None = None) -> str:
    value = request.values.get(name, "").strip()
    if value:
        return value
    if default is not None:
        return default
    raise BadInput(f"{name} is missing: expected a value")


def int_field(name: str, default: int | None = None, minimum: int | None = None, maximum: int | None = None) -> int:
    text = request.values.get(name, "").strip()
    if not text and default is not None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{name} must be an integer, got {text!r}") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise BadInput(f"{name} must be from {minimum} to {maximum}, got {value}")
    return value


def topic_field(name: str = "topic") -> str:
    topic = text_field(name)
    reason = topic_error(topic)
    if reason is not None:
        raise BadInput(reason)
    return topic


def group_field(name: str = "group") -> str:
    return checked_group(text_field(name))


def checked_group(group: str) -> str:
    """``group`` (of a form or the URL) when it is a legal group name."""
    reason = group_error(group)
    if reason is not None:
        raise BadInput(reason)
    return group


def time_field(name: str, default: int | None = None) -> int | None:
    """A datetime-local input (``2024-05-01T12:00`` or with seconds, the dashboard's local time) or ms
    since the epoch, as ms; ``default`` when left empty."""
    text = request.values.get(name, "").strip()
    if not text:
        return default
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise BadInput(
            f"{name} must be a date and time like 2024-05-01T12:00:00 or ms since 1970, got {text!r}"
        ) from None


def datetime_input(ms: int) -> str:
    """``ms`` as a datetime-local input's value (local time, to the second)."""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%dT%H:%M:%S")
