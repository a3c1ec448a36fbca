"""Every constant of a compiled module (a ``cdef enum`` member of a ``.pxd`` or ``.pyx``) against the one
Python definition it mirrors, read from the source text so that no module has to export it.

- A compiled constant whose name a Python module of rmq also defines has that module listed as its
  mirror below, and both hold the same value: a layout offset, a status, a separator cannot drift.
- A constant that two compiled modules define (the frame prefix's sizes, the property separator) has
  one value.
- The counts of the lanes' field tables are the lengths of the key tuples they are built from.
Compiled constants that mirror nothing (chunk sizes, slot counts of the C code) are the C code's own.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

# compiled source (under src/) -> the Python definitions it mirrors ("module" or "module:Class")
MIRRORS = {
    "rmq/protocol/_record.pxd": ("rmq.protocol.layout",),
    "rmq/protocol/_record.pyx": ("rmq.protocol.message",),
    "rmq/store/_consume_queue.pxd": ("rmq.store.layout",),
    "rmq/store/_index.pxd": ("rmq.store.index",),
    "rmq/store/_commit_log.pxd": ("rmq.store.status:PutMessageStatus",),
    "rmq/store/_store.pxd": ("rmq.store.status:GetMessageStatus",),
    "rmq/store/_ha_stream.pxd": ("rmq.protocol.ha", "rmq.store.ha"),
    "rmq/net/_codec.pxd": ("rmq.net.codec_py",),
    "rmq/client/_send_wire.pyx": ("rmq.net.codec_py",),
    "rmq/perf/_loadgen.pxd": ("rmq.net.codec_py", "rmq.perf.histogram", "rmq.perf.remoting"),
    "rmq/broker/_send_lane.pyx": ("rmq.protocol.message",),
}
# compiled constants whose Python definition has another name: (source, name) -> "module:attribute"
ALIASES = {
    ("rmq/protocol/_record.pxd", "TOPIC_MAX_BYTES"): "rmq.protocol.layout:TOPIC_MAX_LENGTH",
    ("rmq/protocol/_record.pxd", "PROPERTIES_MAX_BYTES"): "rmq.protocol.layout:PROPERTIES_MAX_LENGTH",
    ("rmq/perf/_loadgen.pxd", "FRAME_PREFIX_SIZE"): "rmq.net.codec_py:PREFIX_SIZE",
    ("rmq/perf/_loadgen.pxd", "MAX_ANSWER_FRAME"): "rmq.net.frame:MAX_FRAME_SIZE_DEFAULT",
    ("rmq/broker/_send_lane.pyx", "BATCH_BODY"): "rmq.protocol.batch:RECORD_HEAD.size",
    ("rmq/broker/_send_lane.pyx", "BATCH_PROPS_LEN_SIZE"): "rmq.protocol.batch:PROPS_LEN.size",
}
# a lane's count of header fields -> the keys its table is built from
TABLE_LENGTHS = {
    ("rmq/broker/_pull_lane.pyx", "N_PULL_FIELDS"): "rmq.protocol.headers:PULL_KEYS",
    ("rmq/broker/_send_lane.pyx", "N_FIELDS"): "rmq.protocol.send_header:LONG_KEYS",
}

_ENUM = re.compile(r"^cdef enum[^:\n]*:\n((?:[ \t]+.*\n|[ \t]*\n)*)", re.M)
_MEMBER = re.compile(r"^[ \t]+([A-Z][A-Z0-9_]*)[ \t]*=[ \t]*([^#\n]+?)[ \t]*(?:#.*)?$", re.M)


def compiled_constants() -> dict[str, dict[str, int]]:
    """{source under src/: {name: value}} of every enum member with a value, in every .pxd and .pyx."""
    found: dict[str, dict[str, int]] = {}
    for path in sorted([*SRC.rglob("*.pxd"), *SRC.rglob("*.pyx")]):
        members: dict[str, int] = {}
        for block in _ENUM.finditer(path.read_text(encoding="utf-8")):
            for name, expression in _MEMBER.findall(block.group(1)):
                # the values are integer expressions over literals and earlier members (1 << 20, 31 * 31)
                members[name] = eval(expression, {"__builtins__": {}}, dict(members))
        if members:
            found[path.relative_to(SRC).as_posix()] = members
    return found


def python_constant_names() -> set[str]:
    """Upper-case names assigned at module or class level anywhere in src/rmq's Python modules."""
    names = set()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bodies = [tree.body] + [node.body for node in tree.body if isinstance(node, ast.ClassDef)]
        for body in bodies:
            for node in body:
                if isinstance(node, ast.Assign):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper())
    return names


def resolve(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


def python_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) == 1:  # a separator character: C compares its byte
        return ord(value)
    return getattr(value, "value", value)


COMPILED = compiled_constants()


def test_the_scan_reads_the_compiled_sources():
    assert COMPILED["rmq/protocol/_record.pxd"]["REC_BODY"] == 88
    assert COMPILED["rmq/store/_mapped_file.pxd"]["PREFAULT_CHUNK"] == 1 << 20
    assert set(MIRRORS) <= set(COMPILED), "a mirrored source has no constants: renamed or moved?"


@pytest.mark.parametrize("source", sorted(MIRRORS))
def test_compiled_constants_equal_the_python_definitions(source):
    mirrors = [resolve(reference) for reference in MIRRORS[source]]
    compared = []
    for name, value in COMPILED[source].items():
        alias = ALIASES.get((source, name))
        if alias is not None:
            expected = resolve(alias)
        else:
            homes = [m for m in mirrors if hasattr(m, name)]
            if not homes:
                continue
            assert len(homes) == 1, f"{source} {name} is defined in several of {MIRRORS[source]}"
            expected = getattr(homes[0], name)
        assert value == python_value(expected), f"{source}: {name} = {value}, its Python definition says {expected!r}"
        compared.append(name)
    assert compared, f"{source} mirrors none of {MIRRORS[source]}"


def test_every_compiled_constant_named_as_a_python_one_has_its_mirror_listed():
    python_names = python_constant_names()
    unlisted = sorted(
        f"{source}: {name}"
        for source, members in COMPILED.items()
        for name in members
        if name in python_names and source not in MIRRORS
    )
    assert unlisted == [], "compiled constants named as Python ones, with no mirror in MIRRORS"


def test_a_constant_of_several_compiled_modules_has_one_value():
    values: dict[str, set[int]] = {}
    for members in COMPILED.values():
        for name, value in members.items():
            values.setdefault(name, set()).add(value)
    assert {name: v for name, v in values.items() if len(v) > 1} == {}


@pytest.mark.parametrize("key", sorted(TABLE_LENGTHS), ids=lambda key: key[1])
def test_a_lanes_field_count_is_its_key_tables_length(key):
    source, name = key
    assert COMPILED[source][name] == len(resolve(TABLE_LENGTHS[key]))
