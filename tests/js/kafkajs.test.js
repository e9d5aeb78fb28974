// kafkajs 2.2.4 scenarios against the real aerostream binary.
const test = require('node:test');
const assert = require('node:assert');
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const { startBroker } = require('./broker');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

let broker;
let kafka;

test.before(async () => {
  broker = await startBroker();
  kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'kafkajs-test', logLevel: logLevel.NOTHING });
});

test.after(async () => {
  const code = await broker.stop();
  assert.strictEqual(code, 0, 'aerostream exits 0 on SIGTERM');
});

const unique = (p) => `${p}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;

async function consumeN(topic, groupId, n, timeoutMs = 30000) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length}/${n} messages`)), timeoutMs);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push({ partition, offset: message.offset, key: message.key.toString(), value: message.value.toString(), headers: message.headers });
        if (got.length === n) { clearTimeout(timer); resolve(); }
      },
    });
  });
  return { consumer, got };
}

for (const [name, codec] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
  test(`kafkajs round-trips keys, values and headers in order with ${name}`, async () => {
    const topic = unique(`js-${name}`);
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
    const producer = kafka.producer();
    await producer.connect();
    const messages = Array.from({ length: 100 }, (_, i) => ({ key: `k${i}`, value: `v${i}-`.repeat(1 + (i % 5)), headers: { idx: `${i}` } }));
    await producer.send({ topic, compression: codec, acks: -1, messages });
    await producer.disconnect();
    const { consumer, got } = await consumeN(topic, unique('g'), messages.length);
    await consumer.disconnect();
    assert.deepStrictEqual(got.map((m) => [m.key, m.value, m.headers.idx.toString()]), messages.map((m) => [m.key, m.value, m.headers.idx]));
    assert.deepStrictEqual(got.map((m) => Number(m.offset)), messages.map((_, i) => i));
    await admin.disconnect();
  });
}

test('kafkajs idempotent producer and group offsets survive reconnects', async () => {
  const topic = unique('js-idem');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let i = 0; i < 5; i++) {
    await producer.send({ topic, messages: Array.from({ length: 20 }, (_, j) => ({ key: `k${j}`, value: `b${i}-${j}` })) });
  }
  await producer.disconnect();
  const groupId = unique('js-group');
  const { consumer, got } = await consumeN(topic, groupId, 100);
  await consumer.disconnect();
  assert.strictEqual(new Set(got.map((m) => m.value)).size, 100, 'each message exactly once');
  const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
  const total = offsets[0].partitions.reduce((s, p) => s + Number(p.offset), 0);
  assert.strictEqual(total, 100, 'committed offsets cover every message');
  await admin.disconnect();
});

test('kafkajs group splits partitions between two members', async () => {
  const topic = unique('js-rebalance');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] });
  const groupId = unique('js-rg');
  const assigned = new Map();
  const members = [];
  for (let i = 0; i < 2; i++) {
    const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 });
    c.on(c.events.GROUP_JOIN, (e) => assigned.set(i, e.payload.memberAssignment[topic] || []));
    await c.connect();
    await c.subscribe({ topic });
    await c.run({ eachMessage: async () => {} });
    members.push(c);
  }
  const deadline = Date.now() + 40000;
  const balanced = () => assigned.size === 2 && [...assigned.values()].every((p) => p.length === 2)
    && new Set([...assigned.values()].flat()).size === 4;
  while (!balanced() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  assert.ok(balanced(), `two members own two partitions each: ${JSON.stringify([...assigned])}`);
  const described = await admin.describeGroups([groupId]);
  assert.strictEqual(described.groups[0].members.length, 2);
  for (const c of members) await c.disconnect();
  await admin.disconnect();
});

test('kafkajs admin describes and alters configs, deletes topics', async () => {
  const topic = unique('js-admin');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '60000' }] }] });
  let d = await admin.describeConfigs({ resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }], includeSynonyms: false });
  assert.strictEqual(d.resources[0].configEntries[0].configValue, '60000');
  await admin.alterConfigs({ resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '120000' }] }] });
  d = await admin.describeConfigs({ resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }], includeSynonyms: false });
  assert.strictEqual(d.resources[0].configEntries[0].configValue, '120000');
  await admin.deleteTopics({ topics: [topic] });
  const topics = await admin.listTopics();
  assert.ok(!topics.includes(topic), 'deleted topic is gone');
  await admin.disconnect();
});
