// Send COUNT messages with ali-ons (npm, pure JavaScript RocketMQ 4.x client); one JSON line per send.
// usage: node ons_produce.js NAMESRV TOPIC GROUP COUNT TAGS_CSV [PREFIX]
// Message i carries tag TAGS[i % n], key "<PREFIX>-key-<i>" and body "<PREFIX>-body-<i>".
'use strict';
const { Producer, Message } = require('ali-ons');

async function main() {
  const [nameSrv, topic, group, countText, tagsCsv, prefix = 'ons'] = process.argv.slice(2);
  const tags = tagsCsv.split(',');
  // httpclient is only used to look up name servers over HTTP, which nameSrv makes unnecessary.
  const producer = new Producer({ nameSrv, httpclient: {}, producerGroup: group, instanceName: `p${process.pid}` });
  producer.on('error', err => console.error(`producer error: ${err.message}`));
  await producer.ready();
  for (let i = 0; i < Number(countText); i++) {
    const msg = new Message(topic, tags[i % tags.length], `${prefix}-body-${i}`);
    msg.keys = [`${prefix}-key-${i}`];
    const r = await producer.send(msg);
    console.log(JSON.stringify({ i, status: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId,
                                 queueOffset: Number(r.queueOffset) }));
  }
  await producer.close();
}

// Writes to a pipe are asynchronous in Node and process.exit() drops what is still queued: drain first.
const exit = code => process.stdout.write('', () => process.exit(code));
main().then(() => exit(0), err => { console.error(err.stack || err); exit(1); });
