// The compatibility matrix's scenarios (tests/compat/scenarios.py) with
// kafkajs 2.2.4 against one running broker:
//
//   node tests/compat/kafkajs_scenarios.js BOOTSTRAP SCENARIO
//
// Exit 0: passed (a note, if any, on stdout); 1: failed (why on stdout);
// 3: kafkajs has no such feature.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');

const [bootstrap, scenario] = process.argv.slice(2);
// retries past kafkajs's default five: right after a topic is created a
// loaded broker (Apache Kafka's KRaft propagation too) may answer
// UNKNOWN_TOPIC_OR_PARTITION for a few seconds
const kafka = new Kafka({ brokers: bootstrap.split(','), clientId: 'compat-matrix', logLevel: logLevel.NOTHING, retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 5000 } });
const PATIENCE_MS = 30000;
// replication factor of the topics made here (3 on a cluster)
const RF = Number(process.env.COMPAT_REPLICATION_FACTOR || '1');
const unique = (p) => `${p}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;

class Unsupported extends Error {}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function topic(prefix, numPartitions = 1, configEntries = []) {
  const name = unique(prefix);
  const admin = kafka.admin();
  await admin.connect();
  try {
    // kafkajs's own wait for leaders (on by default) fails on the first
    // UNKNOWN_TOPIC_OR_PARTITION: leadersOf below waits instead
    await admin.createTopics({ topics: [{ topic: name, numPartitions, replicationFactor: RF, configEntries }], waitForLeaders: false });
    await leadersOf(admin, name, numPartitions);
  } finally {
    await admin.disconnect();
  }
  return name;
}

// kafkajs's own `waitForLeaders` gives up on the first UNKNOWN_TOPIC_OR_PARTITION,
// which Apache Kafka answers while its metadata cache has not yet caught up
// with the controller's record of a new topic; this waits through it, and
// until every partition's leader answers ListOffsets for it.
async function leadersOf(admin, name, numPartitions) {
  const deadline = Date.now() + PATIENCE_MS;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [name] });
      const parts = (topics[0] && topics[0].partitions) || [];
      if (parts.length === numPartitions && parts.every((p) => p.leader >= 0)) {
        // a leader in the metadata does not yet mean the leader hosts the
        // partition (Apache Kafka answers NOT_LEADER / UNKNOWN_TOPIC_OR_PARTITION
        // to a produce for a moment longer); ListOffsets asks the leader itself
        const offsets = await admin.fetchTopicOffsets(name);
        if (offsets.length === numPartitions) return;
        last = `offsets of ${offsets.length} of ${numPartitions} partitions`;
      } else {
        last = `${parts.length} of ${numPartitions} partitions with a leader`;
      }
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`topic ${name} has no leaders after ${PATIENCE_MS} ms: ${last}`);
}

function records(n, prefix = 'v') {
  return Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `${prefix}${i}`.repeat(1 + (i % 5)), headers: { idx: `${i}` } }));
}

async function produce(name, messages, opts = {}, producerOpts = {}) {
  const p = kafka.producer(producerOpts);
  await p.connect();
  try {
    return await p.send({ topic: name, acks: -1, messages, ...opts });
  } finally {
    await p.disconnect();
  }
}

// Reads until n records arrived, and a second more to see nothing extra.
async function read(name, n, consumerOpts = {}) {
  const c = kafka.consumer({ groupId: unique('g'), ...consumerOpts });
  await c.connect();
  await c.subscribe({ topic: name, fromBeginning: true });
  const got = [];
  let done;
  const enough = new Promise((resolve) => { done = resolve; });
  await c.run({
    eachMessage: async ({ message }) => {
      got.push({ key: message.key && message.key.toString(), value: message.value.toString(), idx: message.headers.idx && message.headers.idx.toString() });
      if (got.length >= n) done();
    },
  });
  await Promise.race([enough, new Promise((r) => setTimeout(r, PATIENCE_MS))]);
  await new Promise((r) => setTimeout(r, 1000));
  await c.disconnect();
  return got;
}

const scenarios = {
  'produce-consume': async () => {
    const t = await topic('pc');
    const msgs = records(20);
    const acks = await produce(t, msgs);
    check(acks.length === 1 && acks[0].baseOffset === '0', `acknowledged ${JSON.stringify(acks)}`);
    const got = await read(t, 20);
    check(JSON.stringify(got) === JSON.stringify(msgs.map((m) => ({ key: m.key, value: m.value, idx: m.headers.idx }))), 'records read back as written, in order');
  },
  compression: async () => {
    // kafkajs itself compresses with gzip only; the other codecs need
    // third-party packages
    const t = await topic('c-gzip');
    const msgs = records(20, 'gzip');
    await produce(t, msgs, { compression: CompressionTypes.GZIP });
    const got = await read(t, 20);
    check(JSON.stringify(got.map((m) => m.value)) === JSON.stringify(msgs.map((m) => m.value)), 'gzip records read back');
    return 'gzip only: kafkajs needs extra packages for the others';
  },
  idempotence: async () => {
    const t = await topic('idem');
    await produce(t, records(50), {}, { idempotent: true, maxInFlightRequests: 1 });
    const got = await read(t, 50);
    check(got.length === 50, `read ${got.length} records, 50 expected once each`);
  },
  'group-classic': async () => {
    const t = await topic('grp', 4);
    const groupId = unique('g');
    const assigned = [0, 0];
    const seen = new Set();
    const members = [kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 }), kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })];
    for (const [i, c] of members.entries()) {
      c.on(c.events.GROUP_JOIN, (e) => { assigned[i] = (e.payload.memberAssignment[t] || []).length; });
      await c.connect();
      await c.subscribe({ topic: t, fromBeginning: true });
      await c.run({ autoCommit: true, autoCommitInterval: 100, eachMessage: async ({ message }) => { seen.add(message.value.toString()); } });
    }
    const deadline = Date.now() + 2 * PATIENCE_MS;
    while (Date.now() < deadline && !(assigned[0] === 2 && assigned[1] === 2)) await new Promise((r) => setTimeout(r, 100));
    check(assigned[0] === 2 && assigned[1] === 2, `assignments ${assigned}`);
    await produce(t, Array.from({ length: 40 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })));
    const readDeadline = Date.now() + PATIENCE_MS;
    while (Date.now() < readDeadline && seen.size < 40) await new Promise((r) => setTimeout(r, 100));
    check(seen.size === 40, `read ${seen.size} of 40 records`);
    for (const c of members) await c.disconnect();
    const admin = kafka.admin();
    await admin.connect();
    const offsets = await admin.fetchOffsets({ groupId, topics: [t] });
    await admin.disconnect();
    const total = offsets[0].partitions.reduce((s, p) => s + Number(p.offset), 0);
    check(total === 40, `committed offsets add up to ${total}, 40 expected`);
  },
  'group-kip848': async () => { throw new Unsupported('kafkajs speaks only the classic group protocol'); },
  transactions: async () => {
    const t = await topic('txn');
    const p = kafka.producer({ transactionalId: unique('tx'), idempotent: true, maxInFlightRequests: 1 });
    await p.connect();
    try {
      const t1 = await p.transaction();
      await t1.send({ topic: t, messages: Array.from({ length: 5 }, (_, i) => ({ key: 'k', value: `committed${i}` })) });
      await t1.commit();
      const t2 = await p.transaction();
      await t2.send({ topic: t, messages: Array.from({ length: 5 }, (_, i) => ({ key: 'k', value: `aborted${i}` })) });
      await t2.abort();
    } finally {
      await p.disconnect();
    }
    const got = await read(t, 5, { readUncommitted: false });
    check(JSON.stringify(got.map((m) => m.value)) === JSON.stringify([0, 1, 2, 3, 4].map((i) => `committed${i}`)), `read_committed saw ${got.map((m) => m.value)}`);
  },
  admin: async () => {
    const t = await topic('adm', 2, [{ name: 'retention.ms', value: '3600000' }]);
    const admin = kafka.admin();
    await admin.connect();
    try {
      const d = await admin.describeConfigs({ resources: [{ type: 2, name: t }], includeSynonyms: false });
      const entry = d.resources[0].configEntries.find((e) => e.configName === 'retention.ms');
      check(entry && entry.configValue === '3600000', `retention.ms is ${entry && entry.configValue}`);
      await admin.deleteTopics({ topics: [t] });
      const deadline = Date.now() + PATIENCE_MS;
      while ((await admin.listTopics()).includes(t)) {
        check(Date.now() < deadline, 'the topic is gone after delete');
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await admin.disconnect();
    }
  },
};

(async () => {
  const fn = scenarios[scenario];
  if (!fn) {
    console.log(`unknown scenario ${scenario}`);
    process.exit(1);
  }
  try {
    const note = await fn();
    if (note) console.log(note);
    process.exit(0);
  } catch (e) {
    console.log(String(e && e.message ? e.message : e));
    process.exit(e instanceof Unsupported ? 3 : 1);
  }
})();
