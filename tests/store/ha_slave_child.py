"""Child of test_sync_state_set.py: a slave store in a process of its own (so that a test can
SIGSTOP it), replicating from the master at HA address argv[2] and naming broker id argv[3].

argv: store_dir master_ha_address broker_id [trusted_certificate]. With a certificate it replicates
over TLS (the master's HA loop serves it, not the compiled stream). Writes "started\\n" once it
replicates; SIGTERM shuts the store down.
"""

import os
import signal
import ssl
import sys
import threading

from rmq.store import MessageStore, MessageStoreConfig
from rmq.store.ha import HASecurity

store_dir, master, broker_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = MessageStore(
    MessageStoreConfig(
        store_path_root_dir=store_dir,
        broker_role="SLAVE",
        ha_master_address=master,
        ha_send_heartbeat_interval=200,
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=40 * 20,
        max_hash_slot_num=512,
        max_index_num=4096,
    )
).start()
security = None
if len(sys.argv) > 4:
    context = ssl.create_default_context(cafile=sys.argv[4])
    context.check_hostname = False
    security = HASecurity(client_tls=context)
store.start_ha(security=security, slave_id=broker_id)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
os.write(1, b"started\n")
stop.wait()
store.shutdown()
