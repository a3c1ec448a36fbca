// Receive and ack with Apache's 5.x Node SimpleConsumer (npm rocketmq-client-nodejs@1.0.8) until COUNT
// messages were acked or IDLE_MS passed without one; one JSON line per acked message. The client reads
// queue 0 only: the broker pops from every queue of the topic whatever queue a receive names.
// usage: node node5_simple_consume.js ENDPOINT TOPIC GROUP COUNT IDLE_MS
'use strict';
const { SimpleConsumer } = require('rocketmq-client-nodejs');

const silent = { info() {}, warn() {}, debug() {}, error: (...args) => console.error(...args) };

async function main() {
  const [ endpoints, topic, consumerGroup, countText, idleText ] = process.argv.slice(2);
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup, subscriptions: new Map().set(topic, '*'),
    awaitDuration: 2000, logger: silent, requestTimeout: 5000,
  });
  await consumer.startup();
  const acked = new Set();
  let last = Date.now();
  try {
    while (acked.size < Number(countText) && Date.now() - last < Number(idleText)) {
      const messages = await consumer.receive(16, 15000);
      for (const message of messages) {
        last = Date.now();
        await consumer.ack(message);
        const body = message.body.toString();
        acked.add(body);
        console.log(JSON.stringify({
          body, msgId: message.messageId, tag: message.tag, keys: message.keys,
          attempt: message.deliveryAttempt, topic: message.topic,
        }));
      }
    }
  } finally {
    await consumer.shutdown();
  }
}

main().catch(err => {
  console.error(`node5_simple_consume failed: ${err.stack || err}`);
  process.exit(3);
});
