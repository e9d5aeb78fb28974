// The Node commands and Kafka's own tooling (kcat, librdkafka) read each
// other's records: the native and Kafka listeners share one log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, partitionForKey } from '../index.js';
import { startAgent, SKIP } from '../testlib/agent.js';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin');
const hasKcat = spawnSync('kcat', ['-V']).status === 0;

const lines = (n, prefix) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`);

function run(cmd, args, stdin = '') {
  const r = spawnSync(cmd, args, { input: stdin, timeout: 60000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${args.join(' ')}: exit ${r.status} ${r.signal ?? ''}\n${r.stderr}`);
  const text = r.stdout.toString().replace(/\n$/, '');
  return text === '' ? [] : text.split('\n');
}

const sorted = (a) => [...a].sort();

test('the Node commands and kcat share records', { skip: SKIP || (!hasKcat && 'kcat is not installed'), timeout: 180000 }, async (t) => {
  const agent = await startAgent(t);
  const client = await connect(agent.bootstrap);
  t.after(() => client.close());
  for (const topic of ['from-node', 'from-kcat']) await client.createTopic(topic, { partitions: 3 });
  await client.waitForTopic('from-node');
  await client.waitForTopic('from-kcat');

  // bin/produce writes 1,000 lines; kcat reads them from the Kafka port
  const sent = lines(1000, 'node');
  run(path.join(BIN, 'produce'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node'], `${sent.join('\n')}\n`);
  const got = run('kcat', ['-C', '-b', agent.kafka, '-t', 'from-node', '-o', 'beginning', '-e', '-q', '-f', '%s\n']);
  assert.deepEqual(sorted(got), sorted(sent), 'kcat reads what bin/produce wrote');

  // kcat writes 1,000 lines to one partition; bin/consume reads them in order
  const written = lines(1000, 'kcat');
  run('kcat', ['-P', '-b', agent.kafka, '-t', 'from-kcat', '-p', '0'], `${written.join('\n')}\n`);
  const read = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', 'from-kcat', '--count', '1000', '--from', 'earliest']);
  assert.deepEqual(read, written, 'bin/consume reads what kcat wrote, equal and in order');

  // kcat's compressed batches: gzip, snappy and lz4 are read; zstd needs Node >= 22.15
  for (const codec of ['gzip', 'snappy', 'lz4']) {
    const topic = `kcat-${codec}`;
    await client.createTopic(topic, { partitions: 1 });
    await client.waitForTopic(topic);
    const some = lines(300, topic);
    run('kcat', ['-P', '-b', agent.kafka, '-t', topic, '-z', codec], `${some.join('\n')}\n`);
    const back = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', topic, '--count', '300', '--from', 'earliest']);
    assert.deepEqual(back, some, `bin/consume reads kcat's ${codec} batches`);
  }

  // as a group member, from the offsets it committed
  const first = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', 'from-kcat', '--group', 'g', '--count', '600']);
  const rest = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', 'from-kcat', '--group', 'g', '--count', '400']);
  assert.deepEqual([...first, ...rest], written, 'two group members in turn read everything once');

  // gzip batches of bin/produce, read by kcat
  const zipped = lines(300, 'node-gzip');
  run(path.join(BIN, 'produce'), ['--bootstrap', agent.bootstrap, '--topic', 'node-gzip', '--compression', 'gzip'], `${zipped.join('\n')}\n`);
  assert.deepEqual(sorted(run('kcat', ['-C', '-b', agent.kafka, '-t', 'node-gzip', '-o', 'beginning', '-e', '-q', '-f', '%s\n'])), sorted(zipped));

  // a transaction of bin/produce, committed then aborted: kcat in
  // read_committed sees the first only; bin/consume likewise
  run(path.join(BIN, 'produce'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node-txn', '--transactional-id', 'cmd'], 't1\nt2\n');
  run(path.join(BIN, 'produce'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node-txn', '--transactional-id', 'cmd', '--abort'], 't3\n');
  const committed = run('kcat', ['-C', '-b', agent.kafka, '-t', 'from-node-txn', '-o', 'beginning', '-e', '-q', '-f', '%s\n', '-X', 'isolation.level=read_committed']);
  assert.deepEqual(sorted(committed), ['t1', 't2'], 'kcat read_committed sees the committed transaction only');
  const all = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node-txn', '--count', '3', '--isolation', 'read-uncommitted']);
  assert.deepEqual(sorted(all), ['t1', 't2', 't3']);
  const onlyCommitted = run(path.join(BIN, 'consume'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node-txn', '--count', '2', '--isolation', 'read-committed']);
  assert.deepEqual(sorted(onlyCommitted), ['t1', 't2']);

  // a key goes to the partition a Kafka client with murmur2 picks
  run(path.join(BIN, 'produce'), ['--bootstrap', agent.bootstrap, '--topic', 'from-node', '--key-sep', ':'], 'user-42:hello\n');
  const placed = run('kcat', ['-C', '-b', agent.kafka, '-t', 'from-node', '-o', 'beginning', '-e', '-q', '-f', '%k %p\n']);
  assert.ok(placed.includes(`user-42 ${partitionForKey(Buffer.from('user-42'), 3)}`), 'the keyed record is on its murmur2 partition');

  // aero+quic:// is refused plainly
  const r = spawnSync(path.join(BIN, 'consume'), ['--bootstrap', `aero+quic://${agent.native}`, '--topic', 'x']);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr.toString(), /TCP only/);
  void execFileSync;
});
