// Consume with ali-ons until COUNT messages arrived or IDLE_MS passed without one; one JSON line each,
// with every stored property (UNIQ_KEY, user properties...) under "properties". msgId is what ali-ons
// calls a message's id: the broker's (store host + commit-log offset), never UNIQ_KEY.
// usage: node ons_consume.js NAMESRV TOPIC GROUP SUB_EXPRESSION COUNT IDLE_MS [FAIL_FIRST_N] [MAX_RECONSUME_TIMES]
//        [OPTIONS_JSON]
// FAIL_FIRST_N: fail the first N deliveries (retry tests), by throwing: ali-ons 3.12.0 loses an
// ACTION_RETRY returned for a message delivered from %RETRY%<group> (its retry-topic wrapper drops the
// handler's return value, so the retry counts as consumed), while a thrown error is sent back either way.
// MAX_RECONSUME_TIMES: the consumer's maxReconsumeTimes (default 16), sent with each send-back.
// OPTIONS_JSON: more Consumer options, over these (pullBatchSize, pullInterval, pollNameServerInteval...),
// and "distinct": true to count each body once (a redelivery then does not end the run early).
// SUB_EXPRESSION "SQL92:<sql>" subscribes by SQL92 (ali-ons takes {expressionType, subString}).
'use strict';
const { Consumer } = require('ali-ons');

// ACL_ACCESS_KEY / ACL_SECRET_KEY in the environment: sign every request (ali-ons' Channel.beforeRequest).
const credentials = () => (process.env.ACL_ACCESS_KEY ?
  { accessKey: process.env.ACL_ACCESS_KEY, secretKey: process.env.ACL_SECRET_KEY } : {});

async function main() {
  const [nameSrv, topic, group, expression, countText, idleText, failText = '0', maxText = '16', optionsText = '{}'] =
    process.argv.slice(2);
  const count = Number(countText);
  const idleMs = Number(idleText);
  let toFail = Number(failText);
  const { distinct = false, ...options } = JSON.parse(optionsText);
  const consumer = new Consumer({
    nameSrv, httpclient: {}, consumerGroup: group, instanceName: `c${process.pid}`,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    // offsets are committed to the broker every 5 s by default; restart tests want it prompt
    persistConsumerOffsetInterval: 1000,
    maxReconsumeTimes: Number(maxText),
    ...credentials(),
    ...options,
  });
  consumer.on('error', err => console.error(`consumer error: ${err.message}`));
  let received = 0;
  const bodies = new Set();
  let last = Date.now();
  const selector = expression.startsWith('SQL92:')
    ? { expressionType: 'SQL92', subString: expression.slice('SQL92:'.length) }
    : expression;
  consumer.subscribe(topic, selector, async msg => {
    last = Date.now();
    if (toFail > 0) {
      toFail--;
      console.log(JSON.stringify({ retried: msg.body.toString(), reconsumeTimes: msg.reconsumeTimes }));
      throw new Error(`failing delivery of ${msg.msgId} on purpose`);
    }
    const body = msg.body.toString();
    if (!distinct || !bodies.has(body)) received++;
    bodies.add(body);
    console.log(JSON.stringify({
      body, tags: msg.tags, keys: msg.keys, msgId: msg.msgId, topic: msg.topic,
      queueId: msg.queueId, queueOffset: Number(msg.queueOffset), reconsumeTimes: msg.reconsumeTimes,
      sysFlag: msg.sysFlag, properties: msg.properties,
    }));
  });
  await consumer.ready();
  while (received < count && Date.now() - last < idleMs) {
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  // let the last consumed offsets reach the broker before leaving
  await new Promise(resolve => setTimeout(resolve, 1500));
  await consumer.close();
}

// Writes to a pipe are asynchronous in Node and process.exit() drops what is still queued: drain first.
const exit = code => process.stdout.write('', () => process.exit(code));
main().then(() => exit(0), err => { console.error(err.stack || err); exit(1); });
