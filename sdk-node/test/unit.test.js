// Unit tests: bootstrap URLs, SCRAM, CRC-32C, decompression, hostile frames
// on a connection, record-batch refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import zlib from 'node:zlib';
import { parseBootstrap, crc32c, encodeBatch, decodeBatches, RecordsError, ScramClient, encodeFrame, OPS } from '../index.js';
import { Connection } from '../src/conn.js';
import { snappyRaw, snappyUncompress } from '../src/snappy.js';
import { lz4FrameUncompress } from '../src/lz4.js';

test('bootstrap URLs', () => {
  assert.deepEqual(parseBootstrap('aero://127.0.0.1:9091'), [{ host: '127.0.0.1', port: 9091 }]);
  assert.deepEqual(parseBootstrap('aero://a:1,b:2'), [{ host: 'a', port: 1 }, { host: 'b', port: 2 }]);
  assert.deepEqual(parseBootstrap('aero://h'), [{ host: 'h', port: 9091 }]);
  assert.deepEqual(parseBootstrap('aero://[::1]:7'), [{ host: '::1', port: 7 }]);
  assert.throws(() => parseBootstrap('aero+quic://h:1'), /TCP only/);
  assert.throws(() => parseBootstrap('kafka://h:1'), /aero:\/\//);
  assert.throws(() => parseBootstrap('aero://h:99999'), /HOST:PORT/);
});

test('SCRAM-SHA-256 follows RFC 7677\'s example', () => {
  const c = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
  assert.equal(c.first().toString(), 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
  const fin = c.final(Buffer.from('r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096'));
  assert.equal(fin.toString(), 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=');
  c.verify(Buffer.from('v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4='));
  assert.throws(() => c.verify(Buffer.from('v=AAAA')), /signature is wrong/);
  const bad = new ScramClient('SCRAM-SHA-512', 'u', 'p', 'abc');
  bad.first();
  assert.throws(() => bad.final(Buffer.from('r=other,s=AA==,i=1')), /not a valid server-first/);
});

test('CRC-32C', () => {
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(Buffer.alloc(0)), 0);
});

test('gzip batches round trip; a damaged batch is refused', () => {
  const records = Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: `value-${i}`, timestamp: 1700000000000 + i }));
  const b = encodeBatch(records, { compression: 'gzip' });
  const [d] = decodeBatches(b);
  assert.equal(d.compression, 1);
  assert.deepEqual(d.records.map((r) => r.value.toString()), records.map((r) => r.value));
  const damaged = Buffer.from(b);
  damaged[damaged.length - 1] ^= 1;
  assert.throws(() => decodeBatches(damaged), /CRC-32C/);
  assert.throws(() => encodeBatch(records, { compression: 'zstd' }), RecordsError);
  // a batch cut at the end of a fetch's size limit is left for the next fetch
  assert.equal(decodeBatches(b.subarray(0, b.length - 3)).length, 0);
});

test('hostile record counts and lengths are refused, not trusted', () => {
  const b = Buffer.from(encodeBatch([{ value: 'x', timestamp: 1 }]));
  b.writeInt32BE(1_000_000, 57); // recordsCount
  b.writeUInt32BE(crc32c(b.subarray(21)), 17);
  assert.throws(() => decodeBatches(b), RecordsError);
});

test('snappy: raw blocks and xerial framing', () => {
  // "abcabcabcabc": literal "abc" then a copy of 9 at offset 3
  const raw = Buffer.from([12, 0x08, 0x61, 0x62, 0x63, (1 | ((9 - 4) << 2)), 3]);
  assert.equal(snappyRaw(raw).toString(), 'abcabcabcabc');
  const framed = Buffer.concat([Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0, 0, 0, 0, 1, 0, 0, 0, 1]),
    Buffer.from([0, 0, 0, raw.length]), raw]);
  assert.equal(snappyUncompress(framed).toString(), 'abcabcabcabc');
  assert.throws(() => snappyRaw(Buffer.from([12, 0x08, 0x61, 0x62, 0x63, (1 | (5 << 2)), 9])), /copy out of range/);
});

test('lz4 frames: compressed and stored blocks', () => {
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
  // one block: token literals 3 + match 9 (token low nibble 5), offset 3
  const block = Buffer.from([0x35, 0x61, 0x62, 0x63, 3, 0, 0x10, 0x21]);
  const size = Buffer.alloc(4); size.writeUInt32LE(block.length);
  const frame = Buffer.concat([header, size, block, Buffer.alloc(4)]);
  assert.equal(lz4FrameUncompress(frame).toString(), 'abcabcabcabc!');
  const stored = Buffer.alloc(4); stored.writeUInt32LE(0x80000002);
  assert.equal(lz4FrameUncompress(Buffer.concat([header, stored, Buffer.from('hi'), Buffer.alloc(4)])).toString(), 'hi');
  assert.throws(() => lz4FrameUncompress(Buffer.from('nope nope')), /not an LZ4 frame/);
});

// a fake server: answers the hello, then writes what the test gives it
async function fakeServer(onRequest) {
  const sockets = new Set();
  const server = net.createServer((s) => {
    sockets.add(s);
    let buf = Buffer.alloc(0);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 7 && buf.length >= 7 + buf.readUInt32BE(3)) {
        const n = 7 + buf.readUInt32BE(3);
        const frame = buf.subarray(0, n);
        buf = buf.subarray(n);
        const op = frame[2];
        const correlation = frame.readUInt32BE(7);
        if (op === OPS.Hello) {
          s.write(encodeFrame(0x81, { correlation, error: 0, version: 1, node_id: 1, max_frame_bytes: 1 << 20, server: 'fake' }));
        } else onRequest(s, op, correlation);
      }
    });
    s.on('error', () => {});
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const close = server.close.bind(server);
  server.close = () => { for (const s of sockets) s.destroy(); close(); };
  return server;
}

test('a connection refuses a response header over its limit, and fails its requests', async () => {
  const server = await fakeServer((s, op, correlation) => {
    const h = Buffer.from([0xae, 1, 0x82, 0, 0, 0, 0]);
    h.writeUInt32BE(0xfffffff0, 3); // a lying length: nothing is allocated for it
    s.write(h);
    void correlation;
  });
  const conn = await Connection.open({ host: '127.0.0.1', port: server.address().port });
  await assert.rejects(conn.request(OPS.Ping, { nonce: 1n }), /over the limit/);
  server.close();
});

test('a connection refuses an undecodable body and an error frame fails the request it names', async () => {
  let n = 0;
  const server = await fakeServer((s, op, correlation) => {
    if (n++ === 0) {
      s.write(encodeFrame(0x7f, { correlation, error: 30, message: 'not for you' }));
    } else {
      // a pong whose body lies: a u64 cut short
      s.write(Buffer.from([0xae, 1, 0x82, 0, 0, 0, 6, 0, 0, 0, correlation, 0, 0]));
    }
  });
  const conn = await Connection.open({ host: '127.0.0.1', port: server.address().port });
  await assert.rejects(conn.request(OPS.Ping, { nonce: 1n }), (e) => e.codeName === 'UNAUTHORIZED' && /not for you/.test(e.message));
  const conn2 = await Connection.open({ host: '127.0.0.1', port: server.address().port });
  await assert.rejects(conn2.request(OPS.Ping, { nonce: 1n }), /refusing a frame/);
  assert.ok(conn.closed && conn2.closed, 'both connections are closed');
  server.close();
});

test('a request without an answer times out with an unknown outcome', async () => {
  const server = await fakeServer(() => {});
  const conn = await Connection.open({ host: '127.0.0.1', port: server.address().port, requestTimeoutMs: 200 });
  await assert.rejects(conn.request(OPS.Ping, { nonce: 1n }), /within 200 ms/);
  conn.close();
  server.close();
});
void zlib;

test('index.d.ts declares every export of index.js', async () => {
  const fs = await import('node:fs');
  const dts = fs.readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8');
  const declared = new Set([...dts.matchAll(/^export (?:declare )?(?:function|class|const|interface|type) (\w+)/gm)].map((m) => m[1]));
  const mod = await import('../index.js');
  const missing = Object.keys(mod).filter((k) => !declared.has(k));
  assert.deepEqual(missing, []);
});
