// Send with ali-ons (npm, pure JavaScript RocketMQ 4.x client) one message after another until standard
// input closes, each failure included: one JSON line per send, then {"done": <sends>}.
// usage: node ons_send_steadily.js NAMESRV TOPIC GROUP PREFIX PAUSE_MS [OPTIONS_JSON]
// Send i carries key "<PREFIX>-key-<i>" and body "<PREFIX>-body-<i>" and is never sent again: a failed
// send is reported ({"i", "ok": false, "error"}) and the next one goes on. "at" is Date.now() when the
// answer came. OPTIONS_JSON: more Producer options (pollNameServerInteval: how often routes are asked).
'use strict';
const { Producer, Message } = require('ali-ons');

async function main() {
  const [nameSrv, topic, group, prefix, pauseText, optionsText = '{}'] = process.argv.slice(2);
  const pauseMs = Number(pauseText);
  // httpclient is only used to look up name servers over HTTP, which nameSrv makes unnecessary.
  const producer = new Producer({ nameSrv, httpclient: {}, producerGroup: group, instanceName: `p${process.pid}`,
                                  ...JSON.parse(optionsText) });
  producer.on('error', err => console.error(`producer error: ${err.message}`));
  await producer.ready();
  let open = true;
  process.stdin.on('end', () => { open = false; });
  process.stdin.resume();
  let i = 0;
  for (; open; i++) {
    const msg = new Message(topic, 'TagA', `${prefix}-body-${i}`);
    const key = `${prefix}-key-${i}`;
    msg.keys = [key];
    try {
      const r = await producer.send(msg);
      console.log(JSON.stringify({ i, key, ok: true, at: Date.now(), status: r.sendStatus,
                                   queueId: Number(r.messageQueue.queueId), queueOffset: Number(r.queueOffset) }));
    } catch (err) {
      console.log(JSON.stringify({ i, key, ok: false, at: Date.now(), error: String(err.message).slice(0, 200) }));
    }
    await new Promise(resolve => setTimeout(resolve, pauseMs));
  }
  console.log(JSON.stringify({ done: i }));
  await producer.close();
}

// Writes to a pipe are asynchronous in Node and process.exit() drops what is still queued: drain first.
const exit = code => process.stdout.write('', () => process.exit(code));
main().then(() => exit(0), err => { console.error(err.stack || err); exit(1); });
