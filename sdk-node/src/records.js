// Kafka RecordBatch v2 (docs/native-protocol.md section 9.2): encoding for
// producers, decoding (with CRC-32C check and decompression) for consumers.
import zlib from 'node:zlib';
import { snappyUncompress } from './snappy.js';
import { lz4FrameUncompress } from './lz4.js';

export const BATCH_HEADER_BYTES = 61;
export const Compression = Object.freeze({ none: 0, gzip: 1, snappy: 2, lz4: 3, zstd: 4 });
const CODEC_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];

/** A batch or record the decoder refuses. */
export class RecordsError extends Error {
  constructor(message) { super(message); this.name = 'RecordsError'; }
}

// ---- CRC-32C (Castagnoli), slicing by 8 ----------------------------------

const CRC_TABLES = (() => {
  const t = Array.from({ length: 8 }, () => new Uint32Array(256));
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[0][i] = c >>> 0;
  }
  for (let i = 0; i < 256; i++) {
    for (let s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >>> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
})();

/** CRC-32C of data. */
export function crc32c(data) {
  const [t0, t1, t2, t3, t4, t5, t6, t7] = CRC_TABLES;
  let crc = 0xffffffff;
  let i = 0;
  const n = data.length;
  for (; i + 8 <= n; i += 8) {
    crc ^= data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    crc = t7[crc & 0xff] ^ t6[(crc >>> 8) & 0xff] ^ t5[(crc >>> 16) & 0xff] ^ t4[crc >>> 24] ^
      t3[data[i + 4]] ^ t2[data[i + 5]] ^ t1[data[i + 6]] ^ t0[data[i + 7]];
  }
  for (; i < n; i++) crc = t0[(crc ^ data[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// ---- varints (zig-zag) ----------------------------------------------------

function varintSize(v) {
  let z = (v << 1) ^ (v >> 31);
  z >>>= 0;
  let n = 1;
  while (z >= 0x80) { z >>>= 7; n++; }
  return n;
}
function writeVarint(buf, pos, v) {
  let z = ((v << 1) ^ (v >> 31)) >>> 0;
  while (z >= 0x80) { buf[pos++] = (z & 0x7f) | 0x80; z >>>= 7; }
  buf[pos++] = z;
  return pos;
}
// varlong for timestamp deltas, through Number while it is safe
function zigzag64(v) { return v >= 0 ? v * 2 : -v * 2 - 1; }
function varlongSize(v) {
  let z = zigzag64(v);
  let n = 1;
  while (z >= 128) { z = Math.floor(z / 128); n++; }
  return n;
}
function writeVarlong(buf, pos, v) {
  let z = zigzag64(v);
  while (z >= 128) { buf[pos++] = (z % 128) | 0x80; z = Math.floor(z / 128); }
  buf[pos++] = z;
  return pos;
}

class Cursor {
  constructor(buf, pos = 0, end = buf.length) { this.buf = buf; this.pos = pos; this.end = end; }
  varlong(what) {
    let result = 0;
    let mul = 1;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.end) throw new RecordsError(`record ends inside ${what}`);
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * mul;
      mul *= 128;
      if (!(b & 0x80)) {
        // zig-zag decode
        return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
      }
    }
    throw new RecordsError(`${what} is not a varint`);
  }
  varint(what) {
    const v = this.varlong(what);
    if (v > 0x7fffffff || v < -0x80000000) throw new RecordsError(`${what} overflows 32 bits`);
    return v;
  }
  take(n, what) {
    if (n < 0 || this.end - this.pos < n) throw new RecordsError(`${what} of ${n} bytes overruns the record`);
    this.pos += n;
    return this.buf.subarray(this.pos - n, this.pos);
  }
}

// ---- encoding -------------------------------------------------------------

function toBytes(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  return v;
}

/**
 * Encodes records into one RecordBatch v2 with base offset 0.
 * records: [{key, value, headers: [[name, value]] or {name: value}, timestamp}]
 * opts: {producerId, producerEpoch, baseSequence, transactional, compression}
 */
export function encodeBatch(records, opts = {}) {
  const {
    producerId = -1n, producerEpoch = -1, baseSequence = -1,
    transactional = false, compression = 'none',
  } = opts;
  const codec = typeof compression === 'number' ? compression : Compression[compression];
  if (codec === undefined) throw new TypeError(`compression ${compression} is not none, gzip, snappy, lz4 or zstd`);
  if (codec !== 0 && codec !== 1) {
    throw new RecordsError(`compression ${CODEC_NAMES[codec]} is not supported by the Node SDK's producer (gzip is)`);
  }
  if (records.length === 0) throw new RangeError('a batch holds at least one record');
  const now = Date.now();
  // the base is the smallest timestamp, so that every delta is >= 0
  let baseTimestamp = Infinity;
  for (const r of records) baseTimestamp = Math.min(baseTimestamp, r.timestamp ?? now);
  let maxTimestamp = baseTimestamp;
  // sizes first, then one buffer
  const prepared = new Array(records.length);
  let bodySize = 0;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    const ts = r.timestamp ?? now;
    if (ts > maxTimestamp) maxTimestamp = ts;
    const key = toBytes(r.key);
    const value = toBytes(r.value);
    let hs = r.headers ?? [];
    if (!Array.isArray(hs)) hs = Object.entries(hs);
    const headers = hs.map(([k, v]) => [Buffer.from(k, 'utf8'), toBytes(v)]);
    const delta = ts - baseTimestamp;
    let size = 1 + varlongSize(delta) + varintSize(i);
    size += key ? varintSize(key.length) + key.length : 1;
    size += value ? varintSize(value.length) + value.length : 1;
    size += varintSize(headers.length);
    for (const [k, v] of headers) {
      size += varintSize(k.length) + k.length + (v ? varintSize(v.length) + v.length : 1);
    }
    prepared[i] = { size, delta, key, value, headers };
    bodySize += varintSize(size) + size;
  }
  let body = Buffer.allocUnsafe(bodySize);
  let p = 0;
  for (let i = 0; i < prepared.length; i++) {
    const { size, delta, key, value, headers } = prepared[i];
    p = writeVarint(body, p, size);
    body[p++] = 0;
    p = writeVarlong(body, p, delta);
    p = writeVarint(body, p, i);
    if (key) { p = writeVarint(body, p, key.length); body.set(key, p); p += key.length; } else p = writeVarint(body, p, -1);
    if (value) { p = writeVarint(body, p, value.length); body.set(value, p); p += value.length; } else p = writeVarint(body, p, -1);
    p = writeVarint(body, p, headers.length);
    for (const [k, v] of headers) {
      p = writeVarint(body, p, k.length); body.set(k, p); p += k.length;
      if (v) { p = writeVarint(body, p, v.length); body.set(v, p); p += v.length; } else p = writeVarint(body, p, -1);
    }
  }
  if (codec === 1) body = zlib.gzipSync(body);
  const batch = Buffer.allocUnsafe(BATCH_HEADER_BYTES + body.length);
  batch.writeBigInt64BE(0n, 0);
  batch.writeInt32BE(batch.length - 12, 8);
  batch.writeInt32BE(-1, 12);
  batch.writeInt8(2, 16);
  batch.writeInt16BE(codec | (transactional ? 0x10 : 0), 21);
  batch.writeInt32BE(records.length - 1, 23);
  batch.writeBigInt64BE(BigInt(baseTimestamp), 27);
  batch.writeBigInt64BE(BigInt(maxTimestamp), 35);
  batch.writeBigInt64BE(BigInt(producerId), 43);
  batch.writeInt16BE(producerEpoch, 51);
  batch.writeInt32BE(baseSequence, 53);
  batch.writeInt32BE(records.length, 57);
  body.copy(batch, BATCH_HEADER_BYTES);
  batch.writeUInt32BE(crc32c(batch.subarray(21)), 17);
  return batch;
}

// ---- decoding -------------------------------------------------------------

function uncompress(codec, data) {
  switch (codec) {
    case 0: return data;
    case 1: return zlib.gunzipSync(data);
    case 2: return snappyUncompress(data);
    case 3: return lz4FrameUncompress(data);
    case 4:
      if (typeof zlib.zstdDecompressSync === 'function') return zlib.zstdDecompressSync(data);
      throw new RecordsError('compression zstd is not supported by the Node SDK on Node < 22.15 (its zlib has no zstd)');
    default: throw new RecordsError(`compression codec ${codec} is not one of Kafka's`);
  }
}

/**
 * Decodes the record batches back to back in data (a Fetch's or Push's
 * records, or a Produce's batch). Returns [{baseOffset, lastOffsetDelta,
 * nextOffset, producerId, producerEpoch, baseSequence, transactional,
 * control, compression, records: [{offset, timestamp, key, value, headers}]}].
 * A batch cut short at the end of data (a fetch's size limit) is left out.
 */
export function decodeBatches(data, { verifyCrc = true } = {}) {
  const out = [];
  let pos = 0;
  while (data.length - pos >= 12) {
    const batchLength = data.readInt32BE(pos + 8);
    if (batchLength < BATCH_HEADER_BYTES - 12) throw new RecordsError(`batch length ${batchLength} is shorter than a batch header`);
    const end = pos + 12 + batchLength;
    if (end > data.length) break; // partial batch at the end
    const b = data.subarray(pos, end);
    pos = end;
    const magic = b.readInt8(16);
    if (magic !== 2) throw new RecordsError(`batch magic ${magic} is not 2`);
    if (verifyCrc) {
      const want = b.readUInt32BE(17);
      const got = crc32c(b.subarray(21));
      if (want !== got) throw new RecordsError(`batch CRC-32C is ${got.toString(16)}, its header says ${want.toString(16)}`);
    }
    const attributes = b.readInt16BE(21);
    const baseOffset = b.readBigInt64BE(0);
    const lastOffsetDelta = b.readInt32BE(23);
    const baseTimestamp = Number(b.readBigInt64BE(27));
    const maxTimestamp = Number(b.readBigInt64BE(35));
    const count = b.readInt32BE(57);
    const batch = {
      baseOffset,
      lastOffsetDelta,
      nextOffset: baseOffset + BigInt(lastOffsetDelta) + 1n,
      producerId: b.readBigInt64BE(43),
      producerEpoch: b.readInt16BE(51),
      baseSequence: b.readInt32BE(53),
      compression: attributes & 7,
      logAppendTime: (attributes & 8) !== 0,
      transactional: (attributes & 0x10) !== 0,
      control: (attributes & 0x20) !== 0,
      maxTimestamp,
      records: [],
    };
    const body = uncompress(batch.compression, b.subarray(BATCH_HEADER_BYTES));
    if (count < 0 || count > body.length) throw new RecordsError(`record count ${count} cannot fit in ${body.length} bytes`);
    const c = new Cursor(body);
    for (let i = 0; i < count; i++) {
      const len = c.varint('record length');
      const rec = new Cursor(body, c.pos, c.pos + len);
      c.take(len, 'record');
      rec.take(1, 'attributes');
      const tsDelta = rec.varlong('timestamp delta');
      const offDelta = rec.varint('offset delta');
      const kl = rec.varint('key length');
      const key = kl < 0 ? null : rec.take(kl, 'key');
      const vl = rec.varint('value length');
      const value = vl < 0 ? null : rec.take(vl, 'value');
      const hc = rec.varint('header count');
      if (hc < 0 || hc > len) throw new RecordsError(`header count ${hc} cannot fit in the record`);
      const headers = [];
      for (let h = 0; h < hc; h++) {
        const hk = rec.take(rec.varint('header key length'), 'header key').toString('utf8');
        const hvl = rec.varint('header value length');
        headers.push([hk, hvl < 0 ? null : rec.take(hvl, 'header value')]);
      }
      if (rec.pos !== rec.end) throw new RecordsError('bytes left after a record\'s last field');
      batch.records.push({
        offset: baseOffset + BigInt(offDelta),
        timestamp: batch.logAppendTime ? maxTimestamp : baseTimestamp + tsDelta,
        key, value, headers,
      });
    }
    out.push(batch);
  }
  return out;
}
