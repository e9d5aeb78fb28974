// The client, producer, consumers, groups and logins against a real agent
// ($AEROSTREAM_BIN, started on free ports; skipped when it is unset).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, partitionForKey, AeroStreamError } from '../index.js';
import { startAgent, SKIP } from '../testlib/agent.js';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/', import.meta.url));

const withTimeout = (p, ms, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: nothing after ${ms} ms`)), ms).unref())]);

async function readN(consumer, n, ms = 30000) {
  const out = [];
  await withTimeout((async () => { while (out.length < n) out.push(await consumer.next()); })(), ms, `reading ${n} records (got ${out.length})`);
  return out;
}

test('against one agent', { skip: SKIP, timeout: 240000 }, async (t) => {
  const agent = await startAgent(t);
  const client = await connect(agent.bootstrap, { clientId: 'node-test' });
  t.after(() => client.close());

  await t.test('topic admin: create, list, delete; a second create is refused', async () => {
    await client.createTopic('admin-t', { partitions: 2 });
    assert.ok((await client.listTopics()).includes('admin-t'));
    await assert.rejects(client.createTopic('admin-t', { partitions: 2 }), (e) => e.codeName === 'TOPIC_ALREADY_EXISTS');
    await client.deleteTopic('admin-t');
    assert.ok(!(await client.listTopics()).includes('admin-t'));
  });

  await t.test('produce then consume back exactly, in order per partition', async () => {
    await client.createTopic('order', { partitions: 4 });
    await client.waitForTopic('order');
    const producer = client.producer({ lingerMs: 2 });
    const acks = await Promise.all(Array.from({ length: 2000 }, (_, i) => producer.send({
      topic: 'order', value: `v-${i}`, headers: { n: String(i) },
    })));
    await producer.close();
    const consumer = client.consumer({ from: 'earliest' });
    await consumer.assign('order');
    const recs = await readN(consumer, 2000);
    const last = new Map();
    const seen = new Set();
    for (const r of recs) {
      const i = Number(r.headers[0][1].toString());
      assert.equal(r.value.toString(), `v-${i}`);
      const prev = last.get(r.partition);
      if (prev !== undefined) assert.ok(i > prev, `partition ${r.partition}: record ${i} after ${prev}`);
      last.set(r.partition, i);
      seen.add(i);
      const ack = acks[i];
      assert.equal(ack.partition, r.partition);
      assert.equal(ack.offset, r.offset, 'the acknowledged offset is where the record is');
    }
    assert.equal(seen.size, 2000);
  });

  await t.test('keyed records land on the murmur2 partition', async () => {
    await client.createTopic('keyed', { partitions: 5 });
    await client.waitForTopic('keyed');
    const producer = client.producer();
    const keys = Array.from({ length: 50 }, (_, i) => `user-${i}`);
    const acks = await Promise.all(keys.map((key) => producer.send({ topic: 'keyed', key, value: key })));
    await producer.close();
    keys.forEach((k, i) => assert.equal(acks[i].partition, partitionForKey(Buffer.from(k), 5), k));
    const consumer = client.consumer({ from: 'earliest' });
    await consumer.assign('keyed');
    for (const r of await readN(consumer, 50)) {
      assert.equal(r.partition, partitionForKey(r.key, 5));
      assert.equal(r.key.toString(), r.value.toString());
    }
  });

  await t.test('latest starts after what is there', async () => {
    await client.createTopic('latest-t', { partitions: 1 });
    await client.waitForTopic('latest-t');
    const producer = client.producer();
    await producer.send({ topic: 'latest-t', value: 'old' });
    const consumer = client.consumer({ from: 'latest' });
    await consumer.assign('latest-t');
    await producer.send({ topic: 'latest-t', value: 'new' });
    await producer.close();
    const [r] = await readN(consumer, 1);
    assert.equal(r.value.toString(), 'new');
    assert.equal(r.offset, 1n);
  });

  await t.test('a group of two splits the partitions; a leaving member\'s go to the other', async () => {
    await client.createTopic('grouped', { partitions: 4 });
    await client.waitForTopic('grouped');
    const cfg = { group: 'g-split', from: 'earliest', sessionTimeoutMs: 6000, rebalanceTimeoutMs: 10000 };
    const a = client.consumer(cfg);
    await a.subscribe('grouped');
    assert.equal(a.assignment().length, 4);
    const b = client.consumer(cfg);
    // b's join completes once a rejoins, which a does from next()
    const bJoined = b.subscribe('grouped');
    const aReading = (async () => { while (a.assignment().length === 4) await withTimeout(a.next().catch(() => null), 30000, 'a'); })();
    const producer = client.producer();
    let tick = 0;
    // a record on every partition in turn, so that every member has something to read
    const send = () => producer.send({ topic: 'grouped', partition: tick++ % 4, value: 'tick' }).catch(() => {});
    const ticker = setInterval(send, 50);
    try {
      await withTimeout(Promise.all([bJoined, aReading]), 60000, 'rebalance to two members');
    } finally {
      clearInterval(ticker);
    }
    const pa = a.assignment().map((x) => x.partition).sort();
    const pb = b.assignment().map((x) => x.partition).sort();
    assert.equal(pa.length, 2);
    assert.equal(pb.length, 2);
    assert.deepEqual([...pa, ...pb].sort(), [0, 1, 2, 3]);
    await b.close();
    const ticker2 = setInterval(send, 50);
    try {
      await withTimeout((async () => { while (a.assignment().length !== 4) await a.next(); })(), 60000, 'taking over the leaver\'s partitions');
    } finally {
      clearInterval(ticker2);
    }
    assert.deepEqual(a.assignment().map((x) => x.partition).sort(), [0, 1, 2, 3]);
    await a.close();
    await producer.close();
  });

  await t.test('commit and resume from the committed offsets', async () => {
    await client.createTopic('resume', { partitions: 2 });
    await client.waitForTopic('resume');
    const producer = client.producer();
    await Promise.all(Array.from({ length: 100 }, (_, i) => producer.send({ topic: 'resume', key: `k${i}`, value: `r-${i}` })));
    await producer.close();
    const cfg = { group: 'g-resume', from: 'earliest', sessionTimeoutMs: 6000 };
    const first = client.consumer(cfg);
    await first.subscribe('resume');
    const got = await readN(first, 60);
    await first.close(); // commits what it returned, then leaves
    const committed = await client.fetchOffsets('g-resume', [{ topic: 'resume', partition: 0 }, { topic: 'resume', partition: 1 }]);
    const total = [...committed.values()].reduce((s, o) => s + o, 0n);
    assert.equal(total, 60n, 'the offsets committed add up to the records read');
    const second = client.consumer(cfg);
    await second.subscribe('resume');
    const rest = await readN(second, 40);
    await second.close();
    const all = [...got, ...rest].map((r) => r.value.toString()).sort();
    assert.deepEqual(all, Array.from({ length: 100 }, (_, i) => `r-${i}`).sort(), 'nothing lost, nothing read twice');
  });

  await t.test('transactions: read_committed skips an aborted one and sees a committed one', async () => {
    await client.createTopic('txn-t', { partitions: 2 });
    await client.waitForTopic('txn-t');
    const producer = client.producer({ transactionalId: 'node-txn' });
    await producer.initTransactions();
    await producer.beginTransaction();
    await Promise.all(['a1', 'a2', 'a3'].map((v, i) => producer.send({ topic: 'txn-t', partition: i % 2, value: v })));
    await producer.abortTransaction();
    await producer.beginTransaction();
    producer.send({ topic: 'txn-t', partition: 0, value: 'c1' });
    producer.send({ topic: 'txn-t', partition: 1, value: 'c2' });
    await producer.commitTransaction();
    await assert.rejects(producer.send({ topic: 'txn-t', value: 'outside' }), /beginTransaction/);
    await producer.close();
    const committed = client.consumer({ from: 'earliest', isolation: 'read_committed' });
    await committed.assign('txn-t');
    const got = (await readN(committed, 2)).map((r) => r.value.toString()).sort();
    assert.deepEqual(got, ['c1', 'c2']);
    const uncommitted = client.consumer({ from: 'earliest' });
    await uncommitted.assign('txn-t');
    const all = (await readN(uncommitted, 5)).map((r) => r.value.toString()).sort();
    assert.deepEqual(all, ['a1', 'a2', 'a3', 'c1', 'c2'], 'read_uncommitted sees the aborted records too');
  });

  await t.test('an aero+quic:// bootstrap gets a clear error', async () => {
    await assert.rejects(connect('aero+quic://127.0.0.1:9091'), /TCP only/);
  });

  await t.test('a record to an unknown topic fails clearly', async () => {
    const c = await connect(agent.bootstrap);
    const producer = c.producer();
    await assert.rejects(producer.send({ topic: 'bad topic name!', value: 'x' }), AeroStreamError);
    await c.close();
  });
});

test('logins against an agent requiring SASL', { skip: SKIP, timeout: 120000 }, async (t) => {
  const agent = await startAgent(t, ['--sasl-mechanisms', 'SCRAM-SHA-512,SCRAM-SHA-256,PLAIN', '--admin-user', 'admin:admin-secret']);
  for (const mechanism of ['SCRAM-SHA-512', 'SCRAM-SHA-256', 'PLAIN']) {
    await t.test(`${mechanism}: the right password works`, async () => {
      const c = await connect(agent.bootstrap, { sasl: { mechanism, user: 'admin', password: 'admin-secret' } });
      await c.createTopic(`sasl-${mechanism.toLowerCase()}`, { partitions: 1 });
      await c.waitForTopic(`sasl-${mechanism.toLowerCase()}`);
      const p = c.producer();
      const ack = await p.send({ topic: `sasl-${mechanism.toLowerCase()}`, value: 'hi' });
      assert.equal(ack.offset, 0n);
      await p.close();
      await c.close();
    });
    await t.test(`${mechanism}: a wrong password is refused with a clear error`, async () => {
      await assert.rejects(connect(agent.bootstrap, { sasl: { mechanism, user: 'admin', password: 'wrong' } }), (e) => {
        assert.equal(e.codeName, 'AUTHENTICATION_FAILED', e.message);
        return true;
      });
    });
  }
  await t.test('the commands log in with --sasl-mechanism, --user and $AEROSTREAM_PASSWORD', () => {
    const env = { ...process.env, AEROSTREAM_PASSWORD: 'admin-secret' };
    const login = ['--bootstrap', agent.bootstrap, '--sasl-mechanism', 'SCRAM-SHA-256', '--user', 'admin', '--topic', 'sasl-cli'];
    const p = spawnSync(`${BIN}produce`, login, { input: 'one\ntwo\n', env, timeout: 60000 });
    assert.equal(p.status, 0, p.stderr.toString());
    const c = spawnSync(`${BIN}consume`, [...login, '--from', 'earliest', '--count', '2'], { env, timeout: 60000 });
    assert.equal(c.status, 0, c.stderr.toString());
    assert.equal(c.stdout.toString(), 'one\ntwo\n');
    const bad = spawnSync(`${BIN}consume`, [...login, '--password', 'wrong', '--count', '1'], { env, timeout: 60000 });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr.toString(), /AUTHENTICATION_FAILED/);
  });

  await t.test('no login: refused', async () => {
    await assert.rejects(async () => {
      const c = await connect(agent.bootstrap);
      await c.listTopics();
    }, (e) => e.codeName === 'AUTHENTICATION_REQUIRED' || e.codeName === 'AUTHENTICATION_FAILED' || /closed/.test(e.message));
  });
});
