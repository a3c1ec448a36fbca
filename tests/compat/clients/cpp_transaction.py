"""A transactional producer of the C++ RocketMQ client (PyPI rocketmq==0.4.4's librocketmq.so,
reached through cpp_transaction_shim.cpp); one JSON line per event.

usage: python cpp_transaction.py SHIM NAMESRV TOPIC GROUP BODY=EXECUTE[/CHECK] ...
EXECUTE and CHECK are COMMIT, ROLLBACK or UNKNOWN: what the local transaction answers when the
message was sent, and when the broker checks it back (default UNKNOWN). It sends each body in a
transaction, prints {"sent": body} / {"execute": ...} / {"check": ...}, then answers checks until
its standard input closes (at most 120 s).
"""

import ctypes
import json
import select
import sys
import threading

STATES = {"COMMIT": 0, "ROLLBACK": 1, "UNKNOWN": 2}  # the C++ client's LocalTransactionState
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p)
lock = threading.Lock()


def emit(**event) -> None:
    with lock:
        print(json.dumps(event), flush=True)


def main() -> None:
    shim_path, namesrv, topic, group, *plan = sys.argv[1:]
    execute_states, check_states = {}, {}
    for item in plan:
        body, _, states = item.partition("=")
        execute, _, check = states.partition("/")
        execute_states[body], check_states[body] = execute, check or "UNKNOWN"

    def answer(kind, table):
        def callback(body, length, uniq_key):
            text = ctypes.string_at(body, length).decode()
            state = table.get(text, "UNKNOWN")
            emit(**{kind: text, "state": state, "uniqKey": uniq_key.decode()})
            return STATES[state]

        return CALLBACK(callback)

    execute_cb, check_cb = answer("execute", execute_states), answer("check", check_states)
    shim = ctypes.CDLL(shim_path)
    shim.tx_producer_new.restype = ctypes.c_void_p
    shim.tx_producer_new.argtypes = [ctypes.c_char_p] * 3 + [CALLBACK, CALLBACK]
    shim.tx_producer_start.argtypes = [ctypes.c_void_p]
    shim.tx_producer_shutdown.argtypes = [ctypes.c_void_p]
    shim.tx_producer_heartbeat.argtypes = [ctypes.c_void_p]
    shim.tx_producer_send.argtypes = [ctypes.c_void_p] + [ctypes.c_char_p] * 4
    producer = shim.tx_producer_new(group.encode(), namesrv.encode(), b"cpp-tx", execute_cb, check_cb)
    shim.tx_producer_start(producer)
    try:
        for body in execute_states:
            code = shim.tx_producer_send(producer, topic.encode(), b"cpp", f"key-{body}".encode(), body.encode())
            emit(sent=body, ok=code == 0)
        shim.tx_producer_heartbeat(producer)  # the routes are known now: the broker learns the group
        select.select([sys.stdin], [], [], 120)
    finally:
        shim.tx_producer_shutdown(producer)
    emit(done=True)


if __name__ == "__main__":
    main()
