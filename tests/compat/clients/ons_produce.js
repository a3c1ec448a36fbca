// Send COUNT messages with ali-ons (npm, pure JavaScript RocketMQ 4.x client); one JSON line per send.
// usage: node ons_produce.js NAMESRV TOPIC GROUP COUNT TAGS_CSV [PREFIX] [PROPERTIES_JSON] [BIG_BODY_BYTES]
// Message i carries tag TAGS[i % n], key "<PREFIX>-key-<i>" and body "<PREFIX>-body-<i>".
// PROPERTIES_JSON: user properties put on every message. BIG_BODY_BYTES: the bodies of odd i are padded
// with "." to this many bytes (ali-ons deflates bodies from 4 KiB on).
'use strict';
const { Producer, Message } = require('ali-ons');

// ACL_ACCESS_KEY / ACL_SECRET_KEY in the environment: sign every request (ali-ons' Channel.beforeRequest).
const credentials = () => (process.env.ACL_ACCESS_KEY ?
  { accessKey: process.env.ACL_ACCESS_KEY, secretKey: process.env.ACL_SECRET_KEY } : {});

async function main() {
  const [nameSrv, topic, group, countText, tagsCsv, prefix = 'ons', propsJson = '{}', bigText = '0'] =
    process.argv.slice(2);
  const properties = JSON.parse(propsJson);
  const bigBytes = Number(bigText);
  const tags = tagsCsv.split(',');
  // httpclient is only used to look up name servers over HTTP, which nameSrv makes unnecessary.
  const producer = new Producer({ nameSrv, httpclient: {}, producerGroup: group, instanceName: `p${process.pid}`,
                                  ...credentials() });
  producer.on('error', err => console.error(`producer error: ${err.message}`));
  await producer.ready();
  for (let i = 0; i < Number(countText); i++) {
    let body = `${prefix}-body-${i}`;
    if (bigBytes > 0 && i % 2 === 1) {
      body = body.padEnd(bigBytes, '.');
    }
    const msg = new Message(topic, tags[i % tags.length], body);
    msg.keys = [`${prefix}-key-${i}`];
    Object.assign(msg.properties, properties);
    const r = await producer.send(msg);
    console.log(JSON.stringify({ i, status: r.sendStatus, msgId: r.msgId, queueId: Number(r.messageQueue.queueId),
                                 queueOffset: Number(r.queueOffset), bodyLength: body.length }));
  }
  await producer.close();
}

// Writes to a pipe are asynchronous in Node and process.exit() drops what is still queued: drain first.
const exit = code => process.stdout.write('', () => process.exit(code));
main().then(() => exit(0), err => { console.error(err.stack || err); exit(1); });
