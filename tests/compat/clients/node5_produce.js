// Send COUNT messages with Apache's 5.x Node client (npm rocketmq-client-nodejs@1.0.8); one JSON line
// per send. Its startup() waits for the server's Settings on the Telemetry stream.
// usage: node node5_produce.js ENDPOINT TOPIC COUNT [PREFIX]
'use strict';
const { Producer } = require('rocketmq-client-nodejs');

const silent = { info() {}, warn() {}, debug() {}, error: (...args) => console.error(...args) };

async function main() {
  const [ endpoints, topic, countText, prefix = 'node5' ] = process.argv.slice(2);
  const producer = new Producer({ endpoints, namespace: '', topics: [ topic ], logger: silent, requestTimeout: 5000 });
  await producer.startup();
  try {
    for (let i = 0; i < Number(countText); i++) {
      const receipt = await producer.send({
        topic, tag: 'TagA', keys: [ `${prefix}-key-${i}` ], body: Buffer.from(`${prefix}-body-${i}`),
      });
      console.log(JSON.stringify({ i, body: `${prefix}-body-${i}`, msgId: receipt.messageId }));
    }
  } finally {
    await producer.shutdown();
  }
}

main().catch(err => {
  console.error(`node5_produce failed: ${err.stack || err}`);
  process.exit(3);
});
