"""A broker's settings while it runs (``rmq-admin broker config``, mqadmin's getBrokerConfig and
updateBrokerConfig), with 4.x's request codes and bodies:

    GET_BROKER_CONFIG (26)     -> body: every setting of the broker and its store as Properties text
                                  (``key=value`` lines; secrets masked), extField ``version``: the
                                  config's DataVersion JSON, which each accepted update advances
    UPDATE_BROKER_CONFIG (25)  body: Properties text of the settings to change

4.x sets any key it knows, whether the broker reads it again or not; here only the settings the
broker reads where it uses them (``Setting.live`` in ``rmq.settings``, docs/defaults.md) change
live. An update is checked whole before anything changes: an unknown key (with a "did you mean")
or a wrong value is refused INVALID_PARAMETER, a setting read only at start NO_PERMISSION (4.x's
code for a key it will not change), each remark naming the key and what was expected. What is
taken is written into the broker's config file (brokerConfigPath, else the -c file), its other
lines kept, so that a restart keeps it. A changed brokerPermission is registered with the name
servers at once (the routes carry it), as 4.x does, and the update answered once they took it.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from rmq._files import write_file_atomically
from rmq.broker.config_manager import DataVersion
from rmq.broker.processor.base import Handler, Processor, answer_once_registered, success
from rmq.broker.services import BrokerConfigServices
from rmq.errors import ConfigError, RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.settings import SETTINGS, Setting, parse_properties, update_properties_text

log = logging.getLogger("rmq.broker")

SECRET_MASK = "******"
BROKER_PERMISSION = "brokerPermission"


class BrokerConfigProcessor(Processor[BrokerConfigServices]):
    def __init__(self, controller: BrokerConfigServices):
        super().__init__(controller)
        self.version = DataVersion.new()
        # updates are checked and applied whole, one at a time (4.x's is synchronized)
        self._update_lock = threading.Lock()

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
        }

    def _configs(self) -> tuple[Any, ...]:
        return (self.controller.config, self.controller.store_config)

    def get_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        properties: dict[str, str] = {}
        for config in self._configs():
            properties.update(config.to_properties())
        for key in properties:
            declared = SETTINGS.get(key)
            if declared is not None and declared.secret and properties[key]:
                properties[key] = SECRET_MASK
        text = "".join(f"{key}={value}\n" for key, value in sorted(properties.items()))
        return success(request, ext_fields={"version": json.dumps(self.version.to_json())}, body=text.encode())

    def update_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        try:
            text = body_bytes(request.body).decode("utf-8")
        except UnicodeDecodeError:
            raise RequestRefused(ResponseCode.INVALID_PARAMETER, "the body must be Properties text in UTF-8") from None
        changes = parse_properties(text)
        if not changes:
            raise RequestRefused(ResponseCode.INVALID_PARAMETER, "no setting in the body: expected key=value lines")
        with self._update_lock:
            checked = {self._live_setting(key): value for key, value in changes.items()}
            values = {}
            for setting, value in checked.items():
                try:
                    values[setting] = setting.check(value, "UPDATE_BROKER_CONFIG")
                except ConfigError as e:
                    raise RequestRefused(ResponseCode.INVALID_PARAMETER, str(e)) from None
            for setting, value in values.items():
                for config in self._configs():
                    if hasattr(config, setting.attr):
                        setattr(config, setting.attr, value)
            self.version.next_version()
            remark = self._persist({s.key: s.format(v) for s, v in values.items()})
        log.info(
            "settings changed live by %s: %s",
            getattr(channel, "remote_address", "?"),
            ", ".join(f"{s.key}={s.format(v)}" for s, v in values.items()),
        )
        if any(s.key == BROKER_PERMISSION for s in values):
            self.controller.topic_config_manager.routes_changed()
            return answer_once_registered(
                channel, success(request, remark=remark), self.controller.register_broker_all()
            )
        return success(request, remark=remark)

    def _live_setting(self, key: str) -> Setting:
        try:
            setting = SETTINGS.lookup(key, "UPDATE_BROKER_CONFIG")
        except ConfigError as e:
            raise RequestRefused(ResponseCode.INVALID_PARAMETER, str(e)) from None
        if not setting.live:
            live = ", ".join(sorted(s.key for s in SETTINGS.values() if s.live))
            raise RequestRefused(
                ResponseCode.NO_PERMISSION,
                f"{setting.key} cannot change while the broker runs: set it in the broker's config file and "
                f"restart it (settings that change live: {live})",
            )
        return setting

    def _persist(self, changes: dict[str, str]) -> str | None:
        """Write ``changes`` into the config file; a remark when there is none or it cannot be written."""
        path = self.controller.config.broker_config_path
        if not path:
            return "changed until the broker stops: it has no config file (brokerConfigPath, or rmq-broker -c)"
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8") if file.exists() else ""
            write_file_atomically(file, update_properties_text(text, changes))
        except (OSError, UnicodeDecodeError) as e:
            log.error("live settings not written to %s: %s", path, e)
            return f"changed until the broker stops: {path} could not be written ({e})"
        return None
