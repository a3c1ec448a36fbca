"""Child of test_crash.py: puts with SYNC_FLUSH until killed, acknowledging each durable message.

argv: store_dir round. Each completion writes "queue_id queue_offset key\\n" to stdout (one
os.write, atomic for a pipe) from the flush thread, only after the group commit reported PUT_OK.
"""

import os
import random
import sys
import threading

from rmq.store import MessageStore, MessageStoreConfig, PutMessageStatus

store_dir, round_no = sys.argv[1], int(sys.argv[2])
store = MessageStore(
    MessageStoreConfig(
        store_path_root_dir=store_dir,
        flush_disk_type="SYNC_FLUSH",
        mapped_file_size_commit_log=32 * 1024,
        mapped_file_size_consume_queue=40 * 20,
        max_hash_slot_num=512,
        max_index_num=4096,
    )
)
store.start()
in_flight = threading.Semaphore(64)
rng = random.Random(round_no)
os.write(1, b"started\n")


def acknowledge(result, key):
    if result.status is PutMessageStatus.PUT_OK:
        queue_id = key.rsplit("-", 1)[1]
        os.write(1, f"{queue_id} {result.queue_offset} {key}\n".encode())
    in_flight.release()


i = 0
while True:
    in_flight.acquire()
    queue_id = i % 3
    key = f"r{round_no}-{i}-{queue_id}"
    body = key.encode() + b"|" + bytes([65 + i % 26]) * rng.randrange(0, 3000)
    store.put_message(
        "CrashTopic", queue_id, body, f"KEYS\x01{key}\x02".encode(), callback=lambda r, k=key: acknowledge(r, k)
    )
    i += 1
