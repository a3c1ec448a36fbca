"""What the twin tests of the broker's compiled lanes (tests/broker/test_send_lane.py,
test_pull_lane.py) draw their request headers from: JSON objects with a request code and its
extFields, written as clients write them, and cut, spliced or flipped."""

from __future__ import annotations

import json

import orjson
from hypothesis import strategies as st


def header_bytes(codes: st.SearchStrategy[int], ext_fields: st.SearchStrategy[dict]) -> st.SearchStrategy[bytes]:
    """Headers of a code from ``codes`` with extFields from ``ext_fields`` and a few of the other
    top-level fields, written by orjson, by json with ASCII escapes, or spaced with raw UTF-8."""
    headers = st.fixed_dictionaries(
        {"code": codes, "extFields": ext_fields},
        optional={
            "opaque": st.integers(-(2**31), 2**31 - 1),
            "flag": st.sampled_from([0, 0, 0, 1, 2]),
            "language": st.sampled_from(["JAVA", "CPP", "PYTHON"]),
            "version": st.sampled_from([399, 317]),
            "remark": st.one_of(st.none(), st.text(max_size=5)),
            "serializeTypeCurrentRPC": st.just("JSON"),
        },
    )
    styles = {
        "orjson": orjson.dumps,
        "ascii": lambda header: json.dumps(header).encode(),
        "spaced": lambda header: json.dumps(header, ensure_ascii=False, indent=1).encode(),
    }
    return st.builds(lambda header, style: styles[style](header), headers, st.sampled_from(sorted(styles)))


def header_mutations(header: bytes, data: st.DataObject) -> tuple[bytes, ...]:
    """``header`` cut, with junk spliced in, junk alone, cut with junk after."""
    cut = data.draw(st.integers(0, len(header)))
    junk = data.draw(st.binary(max_size=8))
    return header[:cut], header[:cut] + junk + header[cut:], junk, header[:cut] + junk
