// @kafkajs/confluent-schema-registry (the registry client kafkajs users
// take) against AeroStream's built-in schema registry: Avro, JSON Schema
// and Protobuf schemas registered, records encoded with the registry's
// wire format, produced with kafkajs, consumed and decoded; an
// incompatible Avro evolution refused under BACKWARD.
const test = require('node:test');
const assert = require('node:assert');
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const { startBroker } = require('./broker');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

let broker;
let kafka;
let registry;

test.before(async () => {
  broker = await startBroker();
  kafka = new Kafka({ brokers: [broker.bootstrap], clientId: 'registry-test', logLevel: logLevel.NOTHING });
  registry = new SchemaRegistry({ host: broker.registry });
});

test.after(async () => {
  assert.strictEqual(await broker.stop(), 0, 'aerostream exits 0 on SIGTERM');
});

const unique = (p) => `${p}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;

async function roundTrip(topic, encoded) {
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: encoded.map((value) => ({ value })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: unique('g'), sessionTimeout: 10000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${got.length}/${encoded.length} records`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(await registry.decode(message.value));
        if (got.length === encoded.length) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  return got;
}

test('Avro: register, encode, produce, consume, decode; BACKWARD refuses a field without a default', async () => {
  const topic = unique('avro');
  const ns = `com.example.t${Date.now()}`;
  const v1 = { type: 'record', name: 'User', namespace: ns, fields: [{ name: 'name', type: 'string' }, { name: 'age', type: 'int' }] };
  const { id } = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(v1) }, { subject: `${topic}-value` });
  assert.ok(id > 0);
  const users = [{ name: 'ada', age: 36 }, { name: 'alan', age: 41 }];
  const encoded = await Promise.all(users.map((u) => registry.encode(id, u)));
  assert.deepStrictEqual((await roundTrip(topic, encoded)).map((u) => ({ ...u })), users);
  assert.strictEqual(await registry.getLatestSchemaId(`${topic}-value`), id);
  const bad = { ...v1, fields: [...v1.fields, { name: 'email', type: 'string' }] };
  await assert.rejects(
    registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(bad) }, { subject: `${topic}-value` }),
    (e) => e.status === 409 || /409|incompatible/i.test(String(e.message)),
  );
  const good = { ...v1, fields: [...v1.fields, { name: 'email', type: 'string', default: '' }] };
  const second = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(good) }, { subject: `${topic}-value` });
  assert.notStrictEqual(second.id, id);
});

test('JSON Schema: register, encode, produce, consume, decode', async () => {
  const topic = unique('json');
  const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: `Order${Date.now()}`, type: 'object', properties: { id: { type: 'integer' }, item: { type: 'string' } }, required: ['id'] };
  const { id } = await registry.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject: `${topic}-value` });
  const orders = [{ id: 1, item: 'book' }, { id: 2, item: 'pen' }];
  const encoded = await Promise.all(orders.map((o) => registry.encode(id, o)));
  assert.deepStrictEqual(await roundTrip(topic, encoded), orders);
});

test('Protobuf: a .proto registered as text, encode, produce, consume, decode', async () => {
  const topic = unique('proto');
  const pkg = `test${Date.now()}`;
  const schema = `syntax = "proto3";\npackage ${pkg};\nmessage Order {\n  int64 id = 1;\n  string item = 2;\n}\n`;
  const { id } = await registry.register({ type: SchemaType.PROTOBUF, schema }, { subject: `${topic}-value` });
  const orders = [{ id: 7, item: 'lamp' }, { id: 8, item: 'desk' }];
  const encoded = await Promise.all(orders.map((o) => registry.encode(id, o)));
  const got = await roundTrip(topic, encoded);
  assert.deepStrictEqual(got.map((o) => ({ id: Number(o.id), item: o.item })), orders);
});
