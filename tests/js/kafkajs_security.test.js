// kafkajs against the real aerostream binary with TLS and SASL on the Kafka
// listener (SASL_SSL): SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN with the user
// --admin-user creates produce and consume; a wrong password is refused
// with kafkajs's authentication error. With mutual TLS a client
// certificate's name is its principal: without an ACL kafkajs gets
// TOPIC_AUTHORIZATION_FAILED, and an ACL made with kafkajs's createAcls lets
// it write. Certificates come from openssl.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Kafka, logLevel } = require('kafkajs');
const { startBroker } = require('./broker');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

const PASSWORD = 'admin-secret';
let dir;
let broker;

function openssl(...args) {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

test.before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aerostream-js-tls-'));
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=test-ca');
  openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(path.join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'server.pem', '-days', '2', '-extfile', 'ext');
  // extensions make a v3 certificate, the only kind WebPKI accepts
  fs.writeFileSync(path.join(dir, 'client-ext'), 'extendedKeyUsage=clientAuth\n');
  for (const name of ['ops', 'client']) {
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key',
      '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', 'client-ext');
  }
  broker = await startBroker([
    '--kafka-tls-cert', path.join(dir, 'server.pem'),
    '--kafka-tls-key', path.join(dir, 'server.key'),
    '--sasl-mechanisms', 'SCRAM-SHA-512,SCRAM-SHA-256,PLAIN',
    '--admin-user', `admin:${PASSWORD}`,
  ]);
});

test.after(async () => {
  if (broker) assert.strictEqual(await broker.stop(), 0, 'aerostream exits 0 on SIGTERM');
  fs.rmSync(dir, { recursive: true, force: true });
});

function kafka(mechanism, password) {
  return new Kafka({
    brokers: [broker.bootstrap],
    clientId: 'kafkajs-security-test',
    logLevel: logLevel.NOTHING,
    ssl: { ca: [fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8')] },
    sasl: { mechanism, username: 'admin', password },
    retry: { retries: 2 },
  });
}

for (const mechanism of ['scram-sha-512', 'scram-sha-256', 'plain']) {
  test(`kafkajs produces and consumes over SASL_SSL with ${mechanism}`, async () => {
    const k = kafka(mechanism, PASSWORD);
    const topic = `js-sasl-${mechanism}-${Date.now()}`;
    const admin = k.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    await admin.disconnect();
    const producer = k.producer();
    await producer.connect();
    await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ value: `m${i}` })) });
    await producer.disconnect();
    const consumer = k.consumer({ groupId: `${topic}-g`, sessionTimeout: 10000, heartbeatInterval: 500 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const got = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${got.length}/10 messages`)), 30000);
      consumer.run({
        eachMessage: async ({ message }) => {
          got.push(message.value.toString());
          if (got.length === 10) { clearTimeout(timer); resolve(); }
        },
      });
    });
    await consumer.disconnect();
    assert.deepStrictEqual(got, Array.from({ length: 10 }, (_, i) => `m${i}`));
  });
}

test('kafkajs with a wrong password gets its SASL authentication error', async () => {
  const admin = kafka('scram-sha-512', 'wrong').admin();
  await assert.rejects(admin.connect(), (e) => {
    assert.strictEqual(e.name, 'KafkaJSSASLAuthenticationError', `${e.name}: ${e.message}`);
    assert.match(e.message, /Authentication failed/);
    return true;
  });
});

test('with mutual TLS the certificate names the principal that ACLs grant', async () => {
  const mtls = await startBroker([
    '--kafka-tls-cert', path.join(dir, 'server.pem'),
    '--kafka-tls-key', path.join(dir, 'server.key'),
    '--kafka-tls-client-ca', path.join(dir, 'ca.pem'),
    '--superusers', 'User:CN=ops',
  ]);
  const as = (name) => new Kafka({
    brokers: [mtls.bootstrap],
    clientId: `kafkajs-${name}`,
    logLevel: logLevel.NOTHING,
    ssl: {
      ca: [fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8')],
      cert: fs.readFileSync(path.join(dir, `${name}.pem`), 'utf8'),
      key: fs.readFileSync(path.join(dir, `${name}.key`), 'utf8'),
    },
    retry: { retries: 1 },
  });
  try {
    const topic = `js-acl-${Date.now()}`;
    const ops = as('ops').admin();
    await ops.connect();
    await ops.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const producer = as('client').producer();
    await producer.connect();
    await assert.rejects(
      producer.send({ topic, messages: [{ value: 'refused' }] }),
      (e) => e.type === 'TOPIC_AUTHORIZATION_FAILED' || e.cause?.type === 'TOPIC_AUTHORIZATION_FAILED',
    );
    await ops.createAcls({
      acl: [{
        resourceType: 2, resourceName: topic, resourcePatternType: 3,
        principal: 'User:CN=client', host: '*', operation: 4, permissionType: 3,
      }],
    });
    const sent = await producer.send({ topic, messages: [{ value: 'allowed' }] });
    assert.strictEqual(sent[0].errorCode, 0);
    await producer.disconnect();
    await ops.disconnect();
  } finally {
    assert.strictEqual(await mtls.stop(), 0, 'aerostream exits 0 on SIGTERM');
  }
});
