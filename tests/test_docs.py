"""The project's reference under docs/ against the code, and every citation of a document against the
files the repository has.

- A citation (``docs/protocol.md``, ``replication.md#epochs-and-truncation``, a ``docs/...`` path)
  names a file the checkout holds, and a heading of it when it names one: a comment that points at a
  document nobody can open sends its reader nowhere.
- The tables of docs/protocol.md, docs/store-format.md and docs/replication.md state codes, offsets and
  sizes the code defines: each is read back and compared with its definition.
- docs/defaults.md is generated from the settings' declarations (the broker's and the name server's),
  the SDK's config classes and the fixed timers: ``PYTHONPATH=src python -m tests.test_docs --write`` rewrites it.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# -- citations ---------------------------------------------------------------------------------------

TEXT_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".md", ".toml", ".txt", ".cfg", ".properties", ".js", ".java",
                 ".cpp", ".c", ".sh", ".yml", ".yaml", ".json", ""}  # fmt: skip
# a document named by its file name, optionally with a heading (anchor)
MD_REFERENCE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)(#[\w-]+)?\b")
DOCS_PATH = re.compile(r"(?<![\w/.-])(docs/[\w./-]*[\w-])")
# the contract that used to sit beside the checkout; spelt in two halves so this file does not cite it
RETIRED_SPEC = "SPEC" + ".md"


def checkout_files() -> list[Path]:
    """Text files of the checkout that people read: tracked ones and new ones git does not ignore."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):  # an export without .git: walk it
        listed = [
            str(Path(d, f).relative_to(ROOT))
            for d, dirs, files in os.walk(ROOT)
            for f in files
            if not any(part.startswith((".", "build", "__pycache__")) for part in Path(d, f).relative_to(ROOT).parts)
        ]
    files = []
    for name in listed:
        path = ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file() and not name.startswith(".cache/"):
            files.append(path)
    return files


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def resolve_document(name: str, citing: Path) -> Path | None:
    """The file a citation means: beside the citing file, from the checkout's root, or under docs/."""
    for base in (citing.parent, ROOT, DOCS):
        candidate = (base / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def broken_citations() -> list[str]:
    broken = []
    for path in checkout_files():
        if path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        where = path.relative_to(ROOT)
        for lineno, line in enumerate(text.splitlines(), 1):
            if RETIRED_SPEC in line:
                broken.append(f"{where}:{lineno}: cites {RETIRED_SPEC}, which is not in the repository: cite docs/")
                continue
            for match in MD_REFERENCE.finditer(line):
                name, anchor = match.group(1), match.group(2)
                target = resolve_document(name, path)
                if target is None:
                    broken.append(f"{where}:{lineno}: cites {name}, which the checkout does not have")
                elif anchor and anchor[1:] not in heading_anchors(target):
                    broken.append(f"{where}:{lineno}: cites {name}{anchor}, a heading {name} does not have")
            for match in DOCS_PATH.finditer(line):
                if not (ROOT / match.group(1)).exists():
                    broken.append(f"{where}:{lineno}: cites {match.group(1)}, which the checkout does not have")
    return broken


def test_every_cited_document_is_in_the_repository():
    broken = broken_citations()
    assert not broken, "\n".join(broken)


def test_the_docs_index_lists_every_document():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and f"({p.name}" not in index]
    assert missing == [], f"docs/README.md does not link {missing}"


# -- tables of the reference against the code ------------------------------------------------------


def section(doc: str, heading: str) -> str:
    """The text of ``doc`` under ``heading`` up to the next heading of the same or a higher level."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, start + len(heading))
    return text[start : end.start() if end else len(text)]


def prose(doc: str, heading: str) -> str:
    """``section`` with its line breaks and runs of spaces as single spaces, for sentences."""
    return " ".join(section(doc, heading).split())


def code_rows(text: str) -> dict[str, int]:
    """``| 310 | `SEND_MESSAGE_V2` | ...`` rows as {name: code}."""
    return {name: int(code) for code, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", text, re.M)}


def test_request_and_response_codes_are_the_codes_of_rmq_protocol():
    from rmq.protocol.codes import DEGRADED_SEND_CODES, RequestCode, ResponseCode

    assert code_rows(section("protocol.md", "## Request codes")) == {c.name: c.value for c in RequestCode}
    assert code_rows(section("protocol.md", "## Response codes")) == {c.name: c.value for c in ResponseCode}
    responses = prose("protocol.md", "## Response codes")
    degraded = re.search(r"treats ([\d, and]+) as \*\*stored, but degraded", responses)
    assert degraded and {int(n) for n in re.findall(r"\d+", degraded.group(1))} == set(DEGRADED_SEND_CODES)


def test_pop_page_states_the_codes_records_and_settings_of_the_code():
    import json

    from rmq.protocol import pop
    from rmq.protocol.codes import RequestCode
    from rmq.settings import SETTINGS

    requests = section("pop.md", "## Requests")
    assert code_rows(requests) == {
        name: RequestCode[name].value for name in ("POP_MESSAGE", "ACK_MESSAGE", "CHANGE_MESSAGE_INVISIBLETIME")
    }
    header = re.search(r"^\| 200050 \| `POP_MESSAGE` \| `([^`]+)`", requests, re.M)
    assert header and {f.rstrip("?") for f in header.group(1).split(", ")} == set(
        pop.PopRequest("g", "t", 0, 1, 1, 0, 0, exp_type="", exp="", attempt_id="").fields()
    )
    records = section("pop.md", "## Checkpoints and acks in the revive topic")
    stated = {
        tag: set(re.findall(r'"(\w+)":', body))
        for tag, body in re.findall(r"^\| `(\w+)` \| .*? \| `(.*)` \|$", records, re.M)
    }
    ck = pop.PopCheckPoint(0, 0, 0, 0, 1, 0, "t", "c", broker_name="b")
    assert stated == {
        pop.CK_TAG: set(json.loads(ck.encode())),
        pop.ACK_TAG: set(json.loads(pop.AckMsg(0, 0, "c", "t", 0, 0).encode())),
    }
    assert pop.REVIVE_TOPIC_PREFIX + "<brokerClusterName>" in records
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \|", section("pop.md", "## Settings"), re.M)
    assert rows and all(SETTINGS[key].default == int(default) for key, default in rows)


def test_send_header_letters_are_send_message_v2s():
    from rmq.protocol.send_header import FIELDS

    rows = re.findall(r"^\| `(\w)` \| `(\w+)` \|", section("protocol.md", "## Sends"), re.M)
    assert [(long, short) for short, long in rows if short != "n"] == list(FIELDS)


def test_frame_and_pull_flags_are_the_codes():
    from rmq.net.frame import FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_SIZE_DEFAULT
    from rmq.protocol.request_flags import PullSysFlag

    frame = prose("protocol.md", "## Frame")
    assert f"bit 0 (`{FLAG_RESPONSE:#x}`): this frame is a response" in frame
    assert f"bit 1 (`{FLAG_ONEWAY:#x}`): a oneway request" in frame
    assert f"larger than {MAX_FRAME_SIZE_DEFAULT >> 20} MiB" in frame
    pull_bits = re.findall(r"^\| `(0x\d)` \|", section("protocol.md", "## Pulls"), re.M)
    flags = [PullSysFlag.COMMIT_OFFSET, PullSysFlag.SUSPEND, PullSysFlag.SUBSCRIPTION, PullSysFlag.CLASS_FILTER]
    assert [int(b, 16) for b in pull_bits] == flags


def test_commit_log_record_offsets_are_the_codecs():
    from rmq.protocol import layout

    record = section("store-format.md", "## CommitLog record")
    rows = re.findall(r"^\| ([\dBT +]+?) \| (\d+) \| (\w+) \|", record, re.M)
    assert [int(n) for _, n, _ in rows] == list(range(1, 18)), "fields 1 to 17, in order"
    for offset, _, field in rows[:15]:  # those after the body move with its length
        assert int(offset) == getattr(layout, f"REC_{field}"), field
    assert f"The fixed part is {layout.REC_FIXED_OVERHEAD} bytes" in prose("store-format.md", "## CommitLog record")
    magic = re.search(r"^\| \d+ \| 2 \| MAGIC \| int32 \| `(0x[0-9A-F]+)`", record, re.M)
    assert magic and int(magic.group(1), 16) == layout.MESSAGE_MAGIC_CODE
    blank = re.search(r"\[int32 bytes left\]\[int32 (0x[0-9A-F]+)\]", record)
    assert blank and int(blank.group(1), 16) == layout.BLANK_MAGIC_CODE
    marker = f"the writer puts an {layout.END_FILE_MIN_BLANK_LENGTH}-byte marker"
    assert marker in prose("store-format.md", "## CommitLog record")
    ids = prose("store-format.md", "### Message ids")
    assert f"{layout.MSGID_BYTES} bytes written as {2 * layout.MSGID_BYTES} uppercase hex" in ids


def test_consume_queue_checkpoint_and_index_layouts_are_the_stores():
    from rmq.settings import SETTINGS
    from rmq.store import index, layout

    queue = prose("store-format.md", "## ConsumeQueue entry")
    assert f"an array of {layout.CQ_STORE_UNIT_SIZE}-byte entries" in queue
    blank = re.search(r"A size of `(0x[0-9A-F]+)` marks a blank entry", queue)
    assert blank and int(blank.group(1), 16) == layout.CQ_BLANK_SIZE
    entries = SETTINGS["mappedFileSizeConsumeQueue"].default // layout.CQ_STORE_UNIT_SIZE
    assert f"A file holds {entries:,} entries" in queue
    checkpoint = prose("store-format.md", "## Checkpoint, abort, lock")
    for field, offset in (
        ("physicMsgTimestamp", layout.CHECKPOINT_PHYSIC_TIMESTAMP),
        ("logicsMsgTimestamp", layout.CHECKPOINT_LOGICS_TIMESTAMP),
        ("indexMsgTimestamp", layout.CHECKPOINT_INDEX_TIMESTAMP),
    ):
        assert f"`{field}` at {offset} " in checkpoint
    assert f"one {layout.CHECKPOINT_FILE_SIZE >> 10} KiB page" in checkpoint
    drawing = section("store-format.md", "## IndexFile")
    header = dict(re.findall(r"^ (\d+) +\d+  (\w+)", drawing, re.M))
    assert header == {
        str(index.HEADER_BEGIN_TIMESTAMP): "beginTimestamp",
        str(index.HEADER_END_TIMESTAMP): "endTimestamp",
        str(index.HEADER_BEGIN_PHY_OFFSET): "beginPhyOffset",
        str(index.HEADER_END_PHY_OFFSET): "endPhyOffset",
        str(index.HEADER_HASH_SLOT_COUNT): "hashSlotCount",
        str(index.HEADER_INDEX_COUNT): "indexCount",
    }
    entry = dict(re.findall(r"^ +\+ (\d+) +\d+  (\w+)", drawing, re.M))
    assert entry == {
        str(index.ENTRY_PHY_OFFSET): "phyOffset",
        str(index.ENTRY_TIME_DIFF): "timeDiff",
        str(index.ENTRY_PREV_INDEX): "prevIndex",
    }
    size = index.index_file_size(index.DEFAULT_MAX_HASH_SLOT_NUM, index.DEFAULT_MAX_INDEX_NUM)
    assert f"{index.INDEX_HEADER_SIZE} + {index.HASH_SLOT_SIZE} S + {index.INDEX_ENTRY_SIZE} N = {size:,}" in drawing


def test_ha_wire_sizes_are_rmq_protocol_has():
    from rmq.protocol import ha

    stream = section("replication.md", "## The stream")
    assert "| int64 maxPhyOffset    |" in stream and f"{ha.REPORT_SIZE}                 0" in stream
    assert f"{ha.FRAME_HEADER_SIZE}          {ha.FRAME_HEADER_SIZE} + size" in stream
    auth = prose("replication.md", "## Cluster authentication")
    assert f'AUTH_MAGIC "\\xff{ha.AUTH_MAGIC[1:].decode()}" ({len(ha.AUTH_MAGIC)})' in auth
    assert f"{ha.HELLO_SIZE} bytes" in auth and f"{ha.CHALLENGE_SIZE} bytes" in auth
    assert f"at most {ha.MAX_ACCESS_KEY:,} bytes" in auth


# -- docs/defaults.md, generated -------------------------------------------------------------------

GENERATED_START = "<!-- generated by tests/test_docs.py: do not edit below by hand -->"
GENERATED_END = "<!-- end of generated tables -->"

# Fixed timers and limits: (what, module, constant, unit). Only what has no setting of its own.
FIXED = (
    ("broker: a client silent this long is forgotten", "rmq.broker.client_channel", "CHANNEL_EXPIRED_MS", "ms"),
    ("broker: scan for silent clients every", "rmq.broker.controller", "CLIENT_SCAN_INTERVAL", "s"),
    ("broker: disk space check every", "rmq.broker.controller", "DISK_CHECK_INTERVAL", "s"),
    ("broker: SYNC_FLUSH / SYNC_MASTER deadlines checked every", "rmq.broker.controller",
     "COMMIT_DEADLINE_SCAN", "s"),
    ("slave: parked pulls re-checked every", "rmq.broker.controller", "SLAVE_PARKED_PULL_SCAN", "s"),
    ("frames larger than this close the connection", "rmq.net.frame", "MAX_FRAME_SIZE_DEFAULT", "bytes"),
    ("one connection stops being read past unsent answers of", "rmq.net.channel", "MAX_PENDING_OUTPUT_DEFAULT",
     "bytes"),
    ("PULL_MESSAGE's maxMsgNums when absent", "rmq.protocol.headers", "DEFAULT_PULL_MAX_MSG_NUMS", ""),
    ("SEND_MESSAGE's defaultTopicQueueNums when absent", "rmq.protocol.headers", "DEFAULT_TOPIC_QUEUE_NUMS", ""),
    ("QUERY_MESSAGE's maxNum when absent", "rmq.protocol.headers", "DEFAULT_QUERY_MAX_NUM", ""),
    ("HA master: looks for new CommitLog bytes at least every", "rmq.store.ha", "NEW_DATA_POLL", "s"),
    ("HA master (ASYNC_MASTER): polls while bytes keep coming, every", "rmq.store.ha", "ASYNC_NEW_DATA_POLL", "s"),
    ("HA slave: reconnect backoff from", "rmq.store.ha", "RECONNECT_MIN", "s"),
    ("HA slave: reconnect backoff up to", "rmq.store.ha", "RECONNECT_MAX", "s"),
    ("controller: a change not committed within this is answered SYSTEM_ERROR", "rmq.controller.processor",
     "COMMIT_TIMEOUT", "s"),
    ("controller: a heartbeat without heartbeatTimeoutMills lasts", "rmq.protocol.controller",
     "HEARTBEAT_TIMEOUT_MILLIS_DEFAULT", "ms"),
    ("controller Raft: a follower stands for election after silence of at least", "rmq.controller.raft",
     "RAFT_MIN_TIMEOUT", "s"),
    ("controller Raft: ... and at most", "rmq.controller.raft", "RAFT_MAX_TIMEOUT", "s"),
    ("controller Raft: the leader pings every", "rmq.controller.raft", "APPEND_ENTRIES_PERIOD", "s"),
    ("controller Raft: a leader cut off from the majority steps down after", "rmq.controller.raft",
     "LEADER_FALLBACK_TIMEOUT", "s"),
    ("controller Raft: a lost member is dialled again every", "rmq.controller.raft", "CONNECTION_RETRY_TIME", "s"),
)  # fmt: skip

CLIENT_CONFIGS = (
    ("rmq.client.instance", "ClientConfig", "every producer and consumer"),
    ("rmq.client.producer", "ProducerConfig", "Producer (and TransactionProducer)"),
    ("rmq.client.consumer", "ConsumerConfig", "every consumer"),
    ("rmq.client.push_consumer", "PushConsumerConfig", "PushConsumer"),
    ("rmq.client.pull_consumer", "PullConsumerConfig", "PullConsumer"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "\\<").replace("\n", " ")


def _plain_default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        return f"`{value.name}`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"`{value:_}`".replace("_", ",")
    return f"`{value}`"


def _settings_table(section_name: str) -> list[str]:
    from rmq.settings import CONTROLLER_SETTINGS, DASHBOARD_SETTINGS, NAMESRV_SETTINGS, SETTINGS

    home = os.path.expanduser("~")
    lines = ["| key | default | value | what |", "|---|---|---|---|"]
    tables = {"namesrv": NAMESRV_SETTINGS, "controller": CONTROLLER_SETTINGS, "dashboard": DASHBOARD_SETTINGS}
    table = tables.get(section_name, SETTINGS)
    for s in table.values():
        if s.section != section_name:
            continue
        if s.default is None:
            default = "unset"
        else:
            text = s.format(s.default)
            if text.startswith(home + os.sep):
                text = "~" + text[len(home) :]
            default = f"`{text}`"
        live = " (*changes live*: `rmq-admin broker config update`)" if s.live else ""
        lines.append(f"| `{s.key}` | {default} | {_cell(s.kind.expected)} | {_cell(s.help)}{live} |")
    return lines


def _config_table(module: str, name: str) -> list[str]:
    cls = getattr(importlib.import_module(module), name)
    own = cls.__dict__.get("__annotations__", {})
    lines = ["| option | default |", "|---|---|"]
    for f in dataclasses.fields(cls):
        if f.name not in own:
            continue
        if f.default is not dataclasses.MISSING:
            default = _plain_default(f.default)
            if not isinstance(f.default, (str, int, float, bool, enum.Enum, type(None))):
                default = "see the class"
        else:
            default = "computed at start"
        lines.append(f"| `{f.name}` | {default} |")
    return lines


def render_defaults() -> str:
    out = ["", "## Broker", "", *_settings_table("broker"), "", "## Store", "", *_settings_table("store")]
    out += ["", "## Name server", "", "`rmq-namesrv -c namesrv.conf --set key=value` (`-p` prints them):", ""]
    out += _settings_table("namesrv")
    out += ["", "## Controller", "", "`rmq-controller -c controller.conf --set key=value` (`-p` prints them):", ""]
    out += _settings_table("controller")
    out += ["", "## Dashboard", "", "`rmq-dashboard -c dashboard.conf --set key=value` (`-p` prints them):", ""]
    out += _settings_table("dashboard")
    out += ["", "## Client SDK", "", "Keyword options of `rmq.client`'s classes (seconds, not ms).", ""]
    for module, name, who in CLIENT_CONFIGS:
        out += [f"### {name}: {who}", "", *_config_table(module, name), ""]
    out += ["## Fixed timers and limits", "", "Constants of the code, with no setting:", ""]
    out += ["| what | value | defined in |", "|---|---|---|"]
    for what, module, constant, unit in FIXED:
        value = getattr(importlib.import_module(module), constant)
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        out.append(f"| {what} | {shown}{' ' + unit if unit else ''} | `{module}.{constant}` |")
    return "\n".join(out).rstrip("\n") + "\n"


def defaults_document(current: str) -> str:
    head, _, rest = current.partition(GENERATED_START)
    _, _, tail = rest.partition(GENERATED_END)
    return f"{head}{GENERATED_START}\n{render_defaults()}{GENERATED_END}{tail}"


def test_defaults_document_is_generated_from_the_code():
    path = DOCS / "defaults.md"
    current = path.read_text(encoding="utf-8")
    assert GENERATED_START in current and GENERATED_END in current
    assert current == defaults_document(current), (
        "docs/defaults.md differs from the code: run `PYTHONPATH=src python -m tests.test_docs --write`"
    )


@pytest.mark.parametrize(
    "key, stated",
    [("listenPort", "10911"), ("namesrvListenPort", "9876"), ("mappedFileSizeCommitLog", "1073741824")],
)
def test_key_defaults_read_in_the_table_are_the_settings(key, stated):
    from rmq.settings import SETTINGS

    row = re.search(rf"^\| `{key}` \| `([^`]+)` \|", (DOCS / "defaults.md").read_text(encoding="utf-8"), re.M)
    assert row and row.group(1) == stated == SETTINGS[key].format(SETTINGS[key].default)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=src python -m tests.test_docs --write   (rewrites docs/defaults.md)")
    target = DOCS / "defaults.md"
    target.write_text(defaults_document(target.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {target}")
