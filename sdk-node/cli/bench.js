// bench: the load generator's "small" workload against a running agent,
// written as one JSON report (the benchmark contract shared by the SDKs).
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { CONN_FLAGS, parseFlags, connectFromFlags, main } from './common.js';

const HELP = `Usage: bench --bootstrap aero://HOST:PORT --topic T [--partitions 8] [--size 1024]
             [--producers 2] [--consumers 2] [--rate 20000|max] [--warmup 5]
             [--duration 30] [--json FILE] [--sasl-mechanism M --user U --password P]

Creates the topic if needed (replication factor: the agent's default), then
runs --producers producers (each its own connection; acks all, linger 1 ms,
batches of 128 KiB, no key, no compression) sending --size-byte values at
--rate messages/s in total (open loop; "max": as fast as the producers'
bounded buffers take them), and --consumers consumers sharing the
partitions round-robin from the latest offsets taken before the producers
start. All producers and consumers run in this one Node process (one event
loop). Warm-up seconds are not counted; then --duration seconds are
measured; then the consumers get up to 30 s to drain. Writes the JSON
report to --json (and stdout) and a one-line summary to stderr. Exits
non-zero if a send failed or the consumers did not drain. TCP only.
`;

const nowMs = () => performance.timeOrigin + performance.now();

function percentiles(values) {
  const a = Float64Array.from(values).sort();
  const at = (q) => (a.length === 0 ? 0 : a[Math.min(a.length - 1, Math.ceil(q * a.length) - 1)]);
  const r = (x) => Math.round(x * 1000) / 1000;
  return { p50_ms: r(at(0.5)), p99_ms: r(at(0.99)), p999_ms: r(at(0.999)), max_ms: r(a.length ? a[a.length - 1] : 0) };
}

main(async () => {
  const f = parseFlags(process.argv.slice(2), {
    ...CONN_FLAGS, topic: 'string', partitions: 'string', size: 'string', producers: 'string', consumers: 'string',
    rate: 'string', warmup: 'string', duration: 'string', json: 'string',
  }, HELP);
  if (!f.topic) throw new Error('--topic is required');
  const int = (name, def, min) => {
    const v = f[name] === undefined ? def : Number(f[name]);
    if (!Number.isFinite(v) || v < min) throw new Error(`--${name} ${f[name]} is not a number ≥ ${min}`);
    return v;
  };
  const partitions = int('partitions', 8, 1);
  const size = int('size', 1024, 8);
  const nProducers = int('producers', 2, 1);
  const nConsumers = int('consumers', 2, 0);
  const warmup = int('warmup', 5, 0);
  const duration = int('duration', 30, 0.1);
  const rate = (f.rate ?? '20000') === 'max' ? 'max' : int('rate', 20000, 1);

  const admin = await connectFromFlags(f, 'aerostream-node-bench');
  try {
    await admin.createTopic(f.topic, { partitions, replicationFactor: -1 });
  } catch (e) {
    if (e.codeName !== 'TOPIC_ALREADY_EXISTS') throw e;
  }
  const parts = await admin.waitForTopic(f.topic, 60000);
  const indexes = parts.map((p) => p.index);
  const latest = await admin.listOffsets(f.topic, indexes, 'latest');

  const clients = [];
  const producers = [];
  for (let i = 0; i < nProducers; i++) {
    const c = await connectFromFlags(f, `aerostream-node-bench-p${i}`);
    clients.push(c);
    await c.waitForTopic(f.topic);
    producers.push(c.producer({ acks: -1, lingerMs: 1, batchBytes: 128 * 1024, compression: 'none' }));
  }
  const consumers = [];
  for (let i = 0; i < nConsumers; i++) {
    const mine = indexes.filter((_, j) => j % nConsumers === i);
    if (mine.length === 0) continue;
    const c = await connectFromFlags(f, `aerostream-node-bench-c${i}`);
    clients.push(c);
    await c.waitForTopic(f.topic);
    const cons = c.consumer({ maxWaitMs: 100 });
    for (const p of mine) cons.assigned.set(`${f.topic}:${p}`, { topic: f.topic, partition: p, fetch: latest.get(p), consumed: latest.get(p) });
    consumers.push(cons);
  }

  const start = nowMs();
  const t0 = start + warmup * 1000;
  const t1 = t0 + duration * 1000;
  let sent = 0; let acked = 0; let failed = 0; let failedTotal = 0; let received = 0;
  let pubCount = 0; let conCount = 0;
  const pubLat = [];
  const e2eLat = [];
  let firstError = null;
  let cpu0 = null; let cpu1 = null; let wall0 = 0; let wall1 = 0;
  const filler = Buffer.alloc(size - 8, 0x61);

  const sendOne = (producer) => {
    const t = nowMs();
    const value = Buffer.allocUnsafe(size);
    value.writeBigInt64BE(BigInt(Math.round(t * 1e6)), 0);
    filler.copy(value, 8);
    const counted = t >= t0 && t < t1;
    sent++;
    producer.send({ topic: f.topic, value }).then(() => {
      acked++;
      if (counted) { pubCount++; pubLat.push(nowMs() - t); }
    }, (e) => {
      failedTotal++;
      if (counted) failed++;
      firstError ??= e;
    });
  };

  // consumers: read until told to stop
  let consuming = true;
  const consumerLoops = consumers.map(async (cons) => {
    while (consuming) {
      const rec = await cons.next();
      if (!rec) break;
      received++;
      const tSent = Number(rec.value.readBigInt64BE(0)) / 1e6;
      if (tSent >= t0 && tSent < t1) {
        conCount++;
        e2eLat.push(nowMs() - tSent);
      }
    }
  });

  // producers: an open-loop schedule each (or as fast as the buffer takes)
  const perProducer = rate === 'max' ? 0 : rate / nProducers;
  const producerLoops = producers.map(async (producer) => {
    let n = 0;
    while (nowMs() < t1) {
      if (rate === 'max') {
        if (producer.bufferFull) await producer.waitForRoom();
        sendOne(producer);
        if (++n % 256 === 0) await new Promise((r) => setImmediate(r));
        continue;
      }
      const due = Math.floor(((nowMs() - start) / 1000) * perProducer);
      while (n < due && nowMs() < t1) {
        if (producer.bufferFull) await producer.waitForRoom();
        sendOne(producer);
        n++;
      }
      await new Promise((r) => setTimeout(r, 1));
    }
  });
  const marks = setInterval(() => {
    const t = nowMs();
    if (!cpu0 && t >= t0) { cpu0 = process.cpuUsage(); wall0 = t; }
    if (cpu0 && !cpu1 && t >= t1) { cpu1 = process.cpuUsage(cpu0); wall1 = t; }
  }, 5);
  await Promise.all(producerLoops);
  await Promise.all(producers.map((p) => p.flush()));
  while (!cpu1) await new Promise((r) => setTimeout(r, 5));
  clearInterval(marks);
  const drainDeadline = nowMs() + 30000;
  while (nConsumers > 0 && received < acked && nowMs() < drainDeadline) await new Promise((r) => setTimeout(r, 20));
  const drained = nConsumers === 0 || received >= acked;
  consuming = false;
  for (const c of consumers) c.closed = true;
  await Promise.race([Promise.all(consumerLoops), new Promise((r) => setTimeout(r, 2000))]);
  for (const p of producers) await p.close();
  for (const c of clients) await c.close();
  await admin.close();

  const cpuMicros = cpu1.user + cpu1.system;
  const report = {
    sdk: 'node', transport: 'tcp', rate, size, partitions, producers: nProducers, consumers: nConsumers,
    measured_secs: duration,
    publish: { messages: pubCount, msgs_per_sec: Math.round((pubCount / duration) * 10) / 10, failed },
    consume: { messages: conCount, msgs_per_sec: Math.round((conCount / duration) * 10) / 10 },
    publish_latency: percentiles(pubLat),
    end_to_end_latency: percentiles(e2eLat),
    cpu_percent: Math.round((cpuMicros / 1000 / (wall1 - wall0)) * 100 * 10) / 10,
    rss_max_mib: Math.round((process.resourceUsage().maxRSS / 1024) * 10) / 10,
  };
  const text = JSON.stringify(report);
  if (f.json) fs.writeFileSync(f.json, `${text}\n`);
  process.stdout.write(`${text}\n`);
  process.stderr.write(`node/tcp rate=${rate}: published ${pubCount} (${report.publish.msgs_per_sec}/s, ${failed} failed), consumed ${conCount} (${report.consume.msgs_per_sec}/s); publish p50 ${report.publish_latency.p50_ms} ms p99 ${report.publish_latency.p99_ms} ms; e2e p50 ${report.end_to_end_latency.p50_ms} ms p99 ${report.end_to_end_latency.p99_ms} ms; cpu ${report.cpu_percent}%, rss ${report.rss_max_mib} MiB${drained ? '' : '; consumers did NOT drain'}\n`);
  if (firstError) process.stderr.write(`bench: ${failedTotal} sends failed, the first: ${firstError.message}\n`);
  return failedTotal > 0 || !drained ? 1 : 0;
});
