"""The signature of a signed request, as RocketMQ 4.x's AclClientRPCHook and AclUtils compute it."""

from __future__ import annotations

import pytest

from rmq.protocol.acl import SessionCredentials, calc_signature, signature_content

# A SEND_MESSAGE_V2's extFields as a Java producer with SessionCredentials("RocketMQ", "12345678",
# "tok\u00e9n") sends them; the signature was computed by this Java program (JDK 17), which copies
# AclClientRPCHook.doBeforeRequest and AclUtils.combineRequestContent / AclSigner.calSignature:
#
#     SortedMap<String,String> m = new TreeMap<>(); m.put(...each field below...);
#     StringBuilder sb = new StringBuilder();
#     for (Map.Entry<String,String> e : m.entrySet()) if (!"Signature".equals(e.getKey())) sb.append(e.getValue());
#     byte[] total = concat(sb.toString().getBytes(UTF_8), "Hello RocketMQ \u4f60\u597d".getBytes(UTF_8));
#     Mac mac = Mac.getInstance("HmacSHA1"); mac.init(new SecretKeySpec("12345678".getBytes(UTF_8), "HmacSHA1"));
#     Base64.getEncoder().encodeToString(mac.doFinal(total))
JAVA_FIELDS = {
    "a": "please_rename_unique_group_name",
    "b": "TopicTest",
    "c": "TBW102",
    "d": "4",
    "e": "0",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "TAGS\x01TagA\x02WAIT\x01true\x02",
    "j": "0",
    "k": "false",
    "m": "false",
}
JAVA_BODY = "Hello RocketMQ \u4f60\u597d".encode()
JAVA_SIGNATURE = "nefFEDJzpMzuA+xQi1Grew/Q6o0="


def test_signing_matches_javas_signature_of_the_same_request():
    ext = dict(JAVA_FIELDS)
    SessionCredentials("RocketMQ", "12345678", "tok\u00e9n").sign(ext, JAVA_BODY)
    assert ext["AccessKey"] == "RocketMQ" and ext["SecurityToken"] == "tok\u00e9n"
    assert ext["Signature"] == JAVA_SIGNATURE


def test_the_content_is_the_values_in_key_order_then_the_body_without_signature_or_unique_key_query():
    ext = {"b": "2", "AccessKey": "ak", "a": "1", "Signature": "x", "_UNIQUE_KEY_QUERY": "true", "Z": "0"}
    # Java's TreeMap: upper case sorts before lower case
    assert signature_content(ext, b"body") == b"ak0" + b"12" + b"body"


def test_a_body_in_parts_signs_as_the_joined_body():
    ext = {"topic": "T"}
    joined = calc_signature(signature_content(ext, b"abcdef"), "secret-key")
    assert calc_signature(signature_content(ext, [b"ab", memoryview(b"cd"), bytearray(b"ef")]), "secret-key") == joined


def test_a_verifier_recomputes_the_same_signature_over_what_it_received():
    ext = {"topic": "T", "queueId": "3"}
    SessionCredentials("access-key", "secret-key").sign(ext, b"payload")
    assert calc_signature(signature_content(ext, b"payload"), "secret-key") == ext["Signature"]
    assert calc_signature(signature_content(ext, b"payload"), "other-secret") != ext["Signature"]
    assert calc_signature(signature_content(ext, b"changed"), "secret-key") != ext["Signature"]


def test_credentials_never_show_their_secret_and_refuse_bad_values():
    credentials = SessionCredentials.of(("access-key", "very-secret-value"))
    assert credentials is not None and "very-secret-value" not in repr(credentials)
    assert SessionCredentials.of(None) is None and SessionCredentials.of(credentials) is credentials
    for bad in (("only-one",), ("ak", ""), ("ak", 12345678), "ak:sk"):
        with pytest.raises(ValueError, match="credentials|non-empty"):
            SessionCredentials.of(bad)  # type: ignore[arg-type]
