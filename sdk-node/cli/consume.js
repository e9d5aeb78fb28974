// consume: prints the values of a topic's records, one per line.
//   consume --bootstrap aero://127.0.0.1:9091 --topic t --from earliest --count 10
//   consume --bootstrap aero://127.0.0.1:9091 --topic t --group readers
import { CONN_FLAGS, CONN_HELP, parseFlags, connectFromFlags, main } from './common.js';

const NEWLINE = Buffer.from('\n');
const HELP = `Usage: consume --bootstrap aero://HOST:PORT --topic T [flags]

Prints the value of each record, one per line.

  --topic T               topic to read
  --from F                earliest, latest or an offset (with --group: where partitions
                          without a committed offset start; earliest or latest) [earliest]
  --count N               stop after N records (default: run until interrupted)
  --group G               read as a member of consumer group G, committing what was read
  --isolation I           read-uncommitted, or read-committed [read-uncommitted]
${CONN_HELP}
`;

main(async () => {
  const f = parseFlags(process.argv.slice(2), { ...CONN_FLAGS, topic: 'string', from: 'string', count: 'string', group: 'string', isolation: 'string' }, HELP);
  if (!f.topic) throw new Error('--topic is required');
  const from = f.from ?? 'earliest';
  let start = from;
  if (from !== 'earliest' && from !== 'latest') {
    if (!/^\d+$/.test(from)) throw new Error(`--from ${JSON.stringify(from)} is not earliest, latest or an offset`);
    if (f.group) throw new Error('--from with --group: use earliest or latest');
    start = BigInt(from);
  }
  const count = f.count === undefined ? -1 : Number(f.count);
  if (!Number.isInteger(count) || count < -1) throw new Error(`--count ${f.count} is not a count`);
  const iso = (f.isolation ?? 'read-uncommitted').replace('-', '_');
  if (!['read_uncommitted', 'read_committed'].includes(iso)) throw new Error(`--isolation ${f.isolation} is not read-committed or read-uncommitted`);
  const client = await connectFromFlags(f, 'aerostream-node-consume');
  const consumer = client.consumer({ group: f.group ?? '', from: typeof start === 'bigint' ? 'earliest' : start, isolation: iso });
  let stop = false;
  const onSignal = () => { stop = true; consumer.close().catch(() => {}); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let readErr = null;
  try {
    if (f.group) await consumer.subscribe(f.topic);
    else await consumer.assign(f.topic, undefined, start);
    let out = [];
    for (let seen = 0; count < 0 || seen < count; seen++) {
      const rec = await consumer.next();
      if (!rec || stop) break;
      out.push(rec.value ?? Buffer.alloc(0), NEWLINE);
      if (consumer.bufferPos >= consumer.buffer.length || out.length > 2048) {
        if (!process.stdout.write(Buffer.concat(out))) await new Promise((r) => process.stdout.once('drain', r));
        out = [];
      }
    }
    if (out.length) process.stdout.write(Buffer.concat(out));
  } catch (e) {
    readErr = e;
  }
  try {
    await consumer.close();
  } catch (e) {
    readErr ??= new Error(`committing the positions reached: ${e.message}`);
  }
  await client.close();
  if (readErr) throw readErr;
  return 0;
});
