"""The Python mirrors of the store layouts equal the compiled core's constants."""

from rmq.protocol import _record
from rmq.protocol import layout as record_layout
from rmq.store import _consume_queue, _store, layout


def test_every_compiled_constant_is_mirrored_once():
    for name, value in _store.LAYOUT.items():
        homes = [m for m in (layout, record_layout) if hasattr(m, name)]
        assert len(homes) == 1, f"{name} is mirrored in {homes}"
        assert getattr(homes[0], name) == value, name


def test_each_room_is_mirrored_in_its_layer():
    # the store's own files in rmq.store.layout; the record, which clients read too, in rmq.protocol's
    for name, value in _consume_queue.LAYOUT.items():
        assert getattr(layout, name) == value, name
    assert _store.LAYOUT == {**_record.LAYOUT, **_consume_queue.LAYOUT}


def test_entry_structs_cover_the_fixed_fields():
    assert record_layout.RECORD_HEAD.size == record_layout.REC_BODY
    assert layout.CQ_ENTRY.size == layout.CQ_STORE_UNIT_SIZE
    assert record_layout.REC_FIXED_OVERHEAD == record_layout.REC_BODY + 1 + 2


def test_body_crc_is_computed_in_c():
    # the put rate depends on it; a different isal build falls back to a Python call
    assert _store.CRC_NATIVE
