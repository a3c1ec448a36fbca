"""The Python mirror of the store layouts equals the compiled core's constants."""

from rmq import _store
from rmq.store import layout


def test_every_compiled_constant_is_mirrored():
    for name, value in _store.LAYOUT.items():
        assert getattr(layout, name) == value, name


def test_record_head_struct_covers_the_fixed_fields():
    assert layout.RECORD_HEAD.size == layout.REC_BODY
    assert layout.CQ_ENTRY.size == layout.CQ_STORE_UNIT_SIZE
    assert layout.REC_FIXED_OVERHEAD == layout.REC_BODY + 1 + 2


def test_body_crc_is_computed_in_c():
    # the put rate depends on it; a different isal build falls back to a Python call
    assert _store.CRC_NATIVE
