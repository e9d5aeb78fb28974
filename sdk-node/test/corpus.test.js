// The conformance corpus (sdk/vectors/): every message vector decoded and
// encoded byte for byte, every malformed frame refused with its class, the
// error-code table, the murmur2 partitioner and the record batches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeFrame, encodeFrame, ProtocolError, MESSAGES } from '../src/codec.js';
import { ERROR_CODES, isRetriable, errorName } from '../src/errors.js';
import { murmur2, partitionForKey } from '../src/partitioner.js';
import { encodeBatch, decodeBatches } from '../src/records.js';
import { parseExact, valueFromJson, toJsonForm } from '../testlib/json.js';

const VECTORS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'sdk', 'vectors');
const load = (f) => parseExact(fs.readFileSync(path.join(VECTORS, f), 'utf8'));

function checkMessage(t, v) {
  const frame = Buffer.from(v.frame, 'hex');
  const decoded = decodeFrame(frame, 100 * 1024 * 1024);
  assert.equal(decoded.op, v.op ?? decoded.op);
  assert.equal(decoded.message, v.message, `op 0x${decoded.op.toString(16)} decodes as ${decoded.message}`);
  assert.deepEqual(toJsonForm(decoded.value), v.value);
  const encoded = encodeFrame(decoded.op, valueFromJson(decoded.op, v.value));
  assert.equal(encoded.toString('hex'), v.frame);
}

const MESSAGE_FILES = ['connection.json', 'metadata.json', 'produce.json', 'fetch.json', 'groups.json',
  'subscribe.json', 'txn.json', 'errors.json'];

for (const file of MESSAGE_FILES) {
  test(`corpus ${file}`, async (t) => {
    const { vectors } = load(file);
    assert.ok(vectors.length > 0);
    for (const v of vectors) await t.test(v.name, () => checkMessage(t, v));
  });
}

test('corpus covers every operation of the protocol', () => {
  const seen = new Set();
  for (const file of MESSAGE_FILES) for (const v of load(file).vectors) seen.add(v.op);
  for (const op of Object.keys(MESSAGES)) assert.ok(seen.has(Number(op)), `op 0x${Number(op).toString(16)} has a vector`);
});

test('corpus conversations.json', async (t) => {
  const { conversations } = load('conversations.json');
  for (const c of conversations) {
    await t.test(c.name, () => {
      for (const step of c.steps) {
        const frame = Buffer.from(step.frame, 'hex');
        const op = frame[2];
        assert.equal(op & 0x80 ? 'server' : (op === 0x7f ? 'server' : 'client'), step.from);
        checkMessage(t, { ...step, op });
      }
    });
  }
});

test('corpus malformed.json', async (t) => {
  const { vectors } = load('malformed.json');
  for (const v of vectors) {
    await t.test(v.name, () => {
      assert.throws(() => decodeFrame(Buffer.from(v.frame, 'hex'), Number(v.max_body)), (e) => {
        assert.ok(e instanceof ProtocolError, `a ProtocolError, not ${e}`);
        assert.equal(e.kind, v.error, e.message);
        return true;
      });
    });
  }
});

test('corpus error_codes.json', async (t) => {
  const { error_codes: codes } = load('error_codes.json');
  assert.equal(codes.length, ERROR_CODES.length);
  for (const c of codes) {
    await t.test(`${c.code} ${c.name}`, () => {
      assert.equal(errorName(c.code), c.name);
      assert.equal(isRetriable(c.code), c.retriable);
    });
  }
  assert.equal(isRetriable(9999), false, 'unknown codes are not retriable');
});

test('corpus partitioner.json', async (t) => {
  const { keys } = load('partitioner.json');
  for (const k of keys) {
    await t.test(`key ${k.key || '(empty)'}`, () => {
      const key = Buffer.from(k.key, 'hex');
      assert.equal(murmur2(key), k.murmur2);
      for (const [count, partition] of Object.entries(k.partitions)) {
        assert.equal(partitionForKey(key, Number(count)), partition, `${count} partitions`);
      }
    });
  }
});

test('corpus record_batches.json', async (t) => {
  const { batches } = load('record_batches.json');
  for (const b of batches) {
    await t.test(b.name, () => {
      const records = b.records.map((r) => ({
        key: r.key === null ? null : Buffer.from(r.key, 'hex'),
        value: r.value === null ? null : Buffer.from(r.value, 'hex'),
        headers: r.headers.map(([k, v]) => [k, v === null ? null : Buffer.from(v, 'hex')]),
        timestamp: r.timestamp,
      }));
      const opts = b.producer
        ? { producerId: BigInt(b.producer.producer_id), producerEpoch: b.producer.producer_epoch,
          baseSequence: b.producer.base_sequence, transactional: b.transactional }
        : {};
      assert.equal(encodeBatch(records, opts).toString('hex'), b.batch);
      const [decoded, ...more] = decodeBatches(Buffer.from(b.batch, 'hex'));
      assert.equal(more.length, 0);
      assert.equal(decoded.transactional, b.transactional);
      assert.equal(decoded.producerId, b.producer ? BigInt(b.producer.producer_id) : -1n);
      assert.equal(decoded.records.length, records.length);
      decoded.records.forEach((r, i) => {
        assert.equal(r.offset, BigInt(i));
        assert.equal(r.timestamp, records[i].timestamp);
        assert.deepEqual(r.key && Buffer.from(r.key), records[i].key);
        assert.deepEqual(r.value && Buffer.from(r.value), records[i].value);
        assert.deepEqual(r.headers.map(([k, v]) => [k, v && Buffer.from(v)]), records[i].headers);
      });
    });
  }
});
