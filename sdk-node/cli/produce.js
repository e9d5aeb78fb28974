// produce: one record per line of stdin.
//   produce --bootstrap aero://127.0.0.1:9091 --topic t [--key-sep :]
import readline from 'node:readline';
import { CONN_FLAGS, CONN_HELP, parseFlags, connectFromFlags, main } from './common.js';

const HELP = `Usage: produce --bootstrap aero://HOST:PORT --topic T [flags] < lines

Sends each line of stdin as one record (acks all, idempotent), then waits
for every acknowledgement. Exits non-zero if any record failed.

  --topic T               topic to produce to
  --key-sep SEP           split each line at the first SEP into key and value
  --compression C         none or gzip (snappy, lz4 and zstd are not written by the Node SDK)
  --transactional-id ID   send all of stdin in one transaction of this id, committed at the
                          end of stdin (fences earlier producers of the id)
  --abort                 with --transactional-id: abort the transaction instead
${CONN_HELP}
`;

main(async () => {
  const f = parseFlags(process.argv.slice(2), { ...CONN_FLAGS, topic: 'string', 'key-sep': 'string', compression: 'string', 'transactional-id': 'string', abort: 'bool' }, HELP);
  if (f.abort && !f['transactional-id']) throw new Error('--abort goes with --transactional-id');
  if (!f.topic) throw new Error('--topic is required');
  const compression = f.compression ?? 'none';
  if (!['none', 'gzip'].includes(compression)) throw new Error(`--compression ${compression}: the Node SDK writes none or gzip`);
  const client = await connectFromFlags(f, 'aerostream-node-produce');
  let failed = 0;
  try {
    const txn = f['transactional-id'];
    const producer = client.producer({ compression, transactionalId: txn });
    if (txn) await producer.beginTransaction();
    const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    const sep = f['key-sep'];
    for await (const line of lines) {
      let key = null;
      let value = line;
      if (sep) {
        const i = line.indexOf(sep);
        if (i >= 0) { key = line.slice(0, i); value = line.slice(i + sep.length); }
      }
      if (producer.bufferFull) await producer.waitForRoom();
      producer.send({ topic: f.topic, key, value }).catch((e) => {
        if (++failed <= 10) process.stderr.write(`produce failed: ${e.message}\n`);
      });
    }
    if (txn) {
      await producer.flush();
      if (f.abort || failed > 0) await producer.abortTransaction();
      else await producer.commitTransaction();
    }
    await producer.close();
  } finally {
    await client.close();
  }
  if (failed > 0) throw new Error(`${failed} records failed`);
  return 0;
});
