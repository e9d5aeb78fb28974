// One kafkajs 2.2.4 client step against a bootstrap address, for the
// load-balancer scenario driven by tests/clients/test_load_balancer.py:
//   node lb_client.js produce BOOTSTRAP TOPIC PREFIX COUNT
//     sends COUNT keyed records (acks=all, idempotent), one at a time, and
//     prints the values the cluster acknowledged as a JSON array;
//   node lb_client.js consume BOOTSTRAP TOPIC GROUP COUNT
//     reads in consumer group GROUP until COUNT distinct records arrived (or 60 s
//     passed), committing as it goes, and prints the values as a JSON array.
const { Kafka, logLevel } = require('kafkajs');

async function produce(kafka, topic, prefix, count) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = [];
  for (let i = 0; i < count; i++) {
    const value = `${prefix}-${i}`;
    // kafkajs retries retriable errors itself; a record whose send still
    // fails is not acknowledged and not expected back
    try {
      await producer.send({ topic, acks: -1, messages: [{ key: `k${i % 16}`, value }] });
      acked.push(value);
    } catch (e) {
      process.stderr.write(`send ${value} failed: ${e.message}\n`);
    }
  }
  await producer.disconnect();
  return acked;
}

async function consume(kafka, topic, group, count) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  // distinct values: a rebalance may deliver a record again, and a
  // repeat must not stand for a record not read yet
  const distinct = new Set();
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        distinct.add(message.value.toString());
        if (distinct.size >= count) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return seen;
}

async function main() {
  const [op, bootstrap, topic, name, countArg] = process.argv.slice(2);
  const count = Number(countArg);
  const kafka = new Kafka({
    brokers: [bootstrap],
    clientId: 'kafkajs-lb',
    logLevel: logLevel.NOTHING,
    retry: { retries: 15, initialRetryTime: 200, maxRetryTime: 2000 },
  });
  const out = op === 'produce'
    ? await produce(kafka, topic, name, count)
    : await consume(kafka, topic, name, count);
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`);
  process.exit(1);
});
