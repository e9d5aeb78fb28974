// The native protocol's codec (docs/native-protocol.md sections 2, 3 and 7):
// frames, primitive types and every request, response and push, described
// once as layouts that both the encoder and the strict decoder walk.
//
// In-memory values follow the conformance corpus (sdk/vectors/): objects
// with the snake_case field names of the protocol, `bytes` as Buffers, 64-bit
// integers as BigInts, booleans for u8 flags, tuples as arrays in wire order.

export const MAGIC = 0xae;
export const FRAMING_VERSION = 1;
export const HEADER_BYTES = 7;
export const PROTOCOL_VERSION = 1;

/**
 * A frame the decoder refuses. `kind` is the class of the refusal, one of
 * short_header, bad_magic, bad_version, too_large, unknown_op, truncated,
 * trailing, count, not_utf8, invalid.
 */
export class ProtocolError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'ProtocolError';
    this.kind = kind;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// ---- layouts ---------------------------------------------------------------

const arr = (of) => ({ arr: of });
const tuple = (...of) => ({ tuple: of });
const struct = (...fields) => ({ struct: fields });

const Node = struct(['id', 'u32'], ['host', 'string'], ['port', 'u16'], ['rack', 'string']);
const PartitionMetadata = struct(
  ['index', 'u32'], ['leader', 'i32'], ['leader_epoch', 'i32'],
  ['replicas', arr('u32')], ['in_sync', arr('u32')]);
const TopicMetadata = struct(['name', 'string'], ['error', 'u16'], ['partitions', arr(PartitionMetadata)]);
const ProduceTopic = struct(['name', 'string'],
  ['partitions', arr(struct(['partition', 'u32'], ['batch', 'bytes']))]);
const ProducedPartition = struct(
  ['partition', 'u32'], ['error', 'u16'], ['base_offset', 'i64'],
  ['log_append_time_ms', 'i64'], ['log_start_offset', 'i64'], ['message', 'string']);
const TopicProduced = struct(['name', 'string'], ['partitions', arr(ProducedPartition)]);
const FetchTopic = struct(['name', 'string'],
  ['partitions', arr(struct(['partition', 'u32'], ['offset', 'i64'], ['max_bytes', 'u32']))]);
const PartitionFetched = struct(
  ['partition', 'u32'], ['error', 'u16'], ['high_watermark', 'i64'],
  ['log_start_offset', 'i64'], ['records', 'bytes']);
const IsolatedPartition = struct(
  ['partition', 'u32'], ['error', 'u16'], ['high_watermark', 'i64'],
  ['last_stable_offset', 'i64'], ['log_start_offset', 'i64'],
  ['aborted', arr(struct(['producer_id', 'i64'], ['first_offset', 'i64']))],
  ['records', 'bytes']);
const Producer = struct(['transactional_id', 'string'], ['producer_id', 'i64'], ['producer_epoch', 'i16']);
const TxnResponse = [['correlation', 'u32'], ['error', 'u16'], ['message', 'string']];
const CoordinatorResponse = [['correlation', 'u32'], ['error', 'u16'], ['node_id', 'u32'], ['host', 'string'], ['port', 'u16']];
const ProduceFields = [['acks', 'i8'], ['timeout_ms', 'u32'], ['topics', arr(ProduceTopic)]];
const FetchFields = [['max_wait_ms', 'u32'], ['min_bytes', 'u32'], ['max_bytes', 'u32'], ['topics', arr(FetchTopic)]];

/** Every operation of version 1: op → [message name, fields]. */
export const MESSAGES = {
  0x01: ['Hello', [['correlation', 'u32'], ['min_version', 'u16'], ['max_version', 'u16'],
    ['client_id', 'string'], ['auth_mechanism', 'string'], ['auth_bytes', 'bytes']]],
  0x81: ['HelloResponse', [['correlation', 'u32'], ['error', 'u16'], ['version', 'u16'],
    ['node_id', 'u32'], ['max_frame_bytes', 'u32'], ['server', 'string']]],
  0x02: ['Ping', [['correlation', 'u32'], ['nonce', 'u64']]],
  0x82: ['Pong', [['correlation', 'u32'], ['nonce', 'u64']]],
  0x03: ['Metadata', [['correlation', 'u32'], ['topics', arr('string')]]],
  0x83: ['MetadataResponse', [['correlation', 'u32'], ['nodes', arr(Node)], ['topics', arr(TopicMetadata)]]],
  0x04: ['CreateTopic', [['correlation', 'u32'], ['name', 'string'], ['partitions', 'i32'],
    ['replication_factor', 'i16'], ['configs', arr(tuple('string', 'string'))]]],
  0x84: ['CreateTopicResponse', [['correlation', 'u32'], ['error', 'u16'], ['message', 'string']]],
  0x05: ['DeleteTopic', [['correlation', 'u32'], ['name', 'string']]],
  0x85: ['DeleteTopicResponse', [['correlation', 'u32'], ['error', 'u16'], ['message', 'string']]],
  0x06: ['InitProducer', [['correlation', 'u32']]],
  0x86: ['InitProducerResponse', [['correlation', 'u32'], ['error', 'u16'], ['producer_id', 'i64'], ['producer_epoch', 'i16']]],
  0x07: ['Produce', [['correlation', 'u32'], ...ProduceFields]],
  0x87: ['ProduceResponse', [['correlation', 'u32'], ['topics', arr(TopicProduced)]]],
  0x08: ['Fetch', [['correlation', 'u32'], ...FetchFields]],
  0x88: ['FetchResponse', [['correlation', 'u32'],
    ['topics', arr(struct(['name', 'string'], ['partitions', arr(PartitionFetched)]))]]],
  0x09: ['ListOffsets', [['correlation', 'u32'], ['partitions', arr(tuple('string', 'u32', 'i64'))]]],
  0x89: ['ListOffsetsResponse', [['correlation', 'u32'], ['partitions', arr(struct(
    ['topic', 'string'], ['partition', 'u32'], ['error', 'u16'], ['offset', 'i64'], ['timestamp', 'i64']))]]],
  0x0a: ['CommitOffsets', [['correlation', 'u32'], ['group', 'string'], ['offsets', arr(struct(
    ['topic', 'string'], ['partition', 'u32'], ['offset', 'i64'], ['metadata', 'string']))],
  ['generation', 'i32'], ['member_id', 'string']]],
  0x8a: ['CommitOffsetsResponse', [['correlation', 'u32'], ['partitions', arr(tuple('string', 'u32', 'u16'))]]],
  0x0b: ['FetchOffsets', [['correlation', 'u32'], ['group', 'string'], ['partitions', arr(tuple('string', 'u32'))]]],
  // on the wire: topic, partition, error, offset, metadata; in memory
  // [{topic, partition, offset, metadata}, error] (the corpus' form)
  0x8b: ['FetchOffsetsResponse', [['correlation', 'u32'], ['offsets', arr('offsetCommitted')]]],
  0x10: ['FindCoordinator', [['correlation', 'u32'], ['group', 'string']]],
  0x90: ['FindCoordinatorResponse', CoordinatorResponse],
  0x11: ['JoinGroup', [['correlation', 'u32'], ['group', 'string'], ['member_id', 'string'],
    ['topics', arr('string')], ['session_timeout_ms', 'u32'], ['rebalance_timeout_ms', 'u32']]],
  0x91: ['JoinGroupResponse', [['correlation', 'u32'], ['error', 'u16'], ['generation', 'i32'],
    ['member_id', 'string'], ['assignment', arr(struct(['topic', 'string'], ['partitions', arr('u32')]))]]],
  0x12: ['Heartbeat', [['correlation', 'u32'], ['group', 'string'], ['member_id', 'string'], ['generation', 'i32']]],
  0x92: ['HeartbeatResponse', [['correlation', 'u32'], ['error', 'u16']]],
  0x13: ['LeaveGroup', [['correlation', 'u32'], ['group', 'string'], ['member_id', 'string']]],
  0x93: ['LeaveGroupResponse', [['correlation', 'u32'], ['error', 'u16']]],
  0x14: ['Authenticate', [['correlation', 'u32'], ['mechanism', 'string'], ['auth_bytes', 'bytes']]],
  0x94: ['AuthenticateResponse', [['correlation', 'u32'], ['error', 'u16'], ['auth_bytes', 'bytes'],
    ['complete', 'bool'], ['session_lifetime_ms', 'u64']]],
  0x7f: ['ErrorFrame', [['correlation', 'u32'], ['error', 'u16'], ['message', 'string']]],
  0x0c: ['Subscribe', [['correlation', 'u32'], ['subscription', 'u32'], ['topic', 'string'], ['partition', 'u32'],
    ['start_kind', 'u8'], ['start_value', 'i64'], ['credit', 'u32']]],
  0x8c: ['SubscribeResponse', [['correlation', 'u32'], ['error', 'u16'], ['subscription', 'u32'],
    ['offset', 'i64'], ['high_watermark', 'i64'], ['message', 'string']]],
  0x8d: ['Push', [['subscription', 'u32'], ['error', 'u16'], ['high_watermark', 'i64'],
    ['log_start_offset', 'i64'], ['next_offset', 'i64'], ['records', 'bytes']]],
  0x0e: ['Credit', [['subscription', 'u32'], ['bytes', 'u32']]],
  0x0f: ['Unsubscribe', [['correlation', 'u32'], ['subscription', 'u32']]],
  0x8f: ['UnsubscribeResponse', [['correlation', 'u32'], ['error', 'u16']]],
  0x15: ['FindTxnCoordinator', [['correlation', 'u32'], ['transactional_id', 'string']]],
  0x95: ['FindTxnCoordinatorResponse', CoordinatorResponse],
  0x16: ['InitTxn', [['correlation', 'u32'], ['transactional_id', 'string'], ['timeout_ms', 'u32']]],
  0x96: ['InitTxnResponse', [['correlation', 'u32'], ['error', 'u16'], ['producer_id', 'i64'],
    ['producer_epoch', 'i16'], ['message', 'string']]],
  0x17: ['AddTxnPartitions', [['correlation', 'u32'], ['producer', Producer],
    ['topics', arr(tuple('string', arr('u32')))]]],
  0x97: ['AddTxnPartitionsResponse', TxnResponse],
  0x18: ['AddTxnOffsets', [['correlation', 'u32'], ['producer', Producer], ['group', 'string']]],
  0x98: ['AddTxnOffsetsResponse', TxnResponse],
  0x19: ['TxnOffsetCommit', [['correlation', 'u32'], ['producer', Producer], ['group', 'string'],
    ['generation', 'i32'], ['member_id', 'string'], ['offsets', arr(tuple('string', 'u32', 'i64'))]]],
  0x99: ['TxnOffsetCommitResponse', TxnResponse],
  0x1a: ['EndTxn', [['correlation', 'u32'], ['producer', Producer], ['commit', 'bool']]],
  0x9a: ['EndTxnResponse', TxnResponse],
  // on the wire: correlation, transactional_id, then Produce's fields; in
  // memory {transactional_id, produce: {Produce}}
  0x1b: ['TxnProduce', [['correlation', 'u32'], ['transactional_id', 'string'], ...ProduceFields]],
  0x9b: ['TxnProduceResponse', [['correlation', 'u32'], ['topics', arr(TopicProduced)]]],
  0x1c: ['FetchIsolated', [['correlation', 'u32'], ['isolation', 'isolation'], ...FetchFields]],
  0x9c: ['FetchIsolatedResponse', [['correlation', 'u32'],
    ['topics', arr(struct(['name', 'string'], ['partitions', arr(IsolatedPartition)]))]]],
};

/** Operation codes by message name. */
export const OPS = Object.fromEntries(Object.entries(MESSAGES).map(([op, [name]]) => [name, Number(op)]));

const FIXED = { u8: 1, i8: 1, bool: 1, isolation: 1, u16: 2, i16: 2, u32: 4, i32: 4, u64: 8, i64: 8, string: 2, bytes: 4 };

/** The smallest encoded size of a value of type t (section 3). */
function minSize(t) {
  if (typeof t === 'string') return t === 'offsetCommitted' ? 2 + 4 + 2 + 8 + 2 : FIXED[t];
  if (t.arr) return 4;
  if (t.tuple) return t.tuple.reduce((n, x) => n + minSize(x), 0);
  if (t.struct) return t.struct.reduce((n, [, x]) => n + minSize(x), 0);
  throw new Error(`unknown type ${JSON.stringify(t)}`);
}
const minCache = new WeakMap();
function minSizeOf(t) {
  if (typeof t === 'string') return minSize(t);
  let n = minCache.get(t);
  if (n === undefined) { n = minSize(t); minCache.set(t, n); }
  return n;
}

// ---- decoding --------------------------------------------------------------

class Reader {
  constructor(buf) { this.buf = buf; this.pos = 0; }
  need(n, what) {
    if (this.buf.length - this.pos < n) throw new ProtocolError('truncated', `body ends inside ${what}`);
  }
  read(t, what) {
    const b = this.buf;
    switch (t) {
      case 'u8': this.need(1, what); return b[this.pos++];
      case 'i8': this.need(1, what); return b.readInt8(this.pos++);
      case 'bool': {
        this.need(1, what);
        const v = b[this.pos++];
        if (v > 1) throw new ProtocolError('invalid', `${what} is ${v}, not 0 or 1`);
        return v === 1;
      }
      case 'isolation': {
        this.need(1, what);
        const v = b[this.pos++];
        if (v === 0) return 'read_uncommitted';
        if (v === 1) return 'read_committed';
        throw new ProtocolError('invalid', `isolation level ${v} is not 0 or 1`);
      }
      case 'u16': this.need(2, what); this.pos += 2; return b.readUInt16BE(this.pos - 2);
      case 'i16': this.need(2, what); this.pos += 2; return b.readInt16BE(this.pos - 2);
      case 'u32': this.need(4, what); this.pos += 4; return b.readUInt32BE(this.pos - 4);
      case 'i32': this.need(4, what); this.pos += 4; return b.readInt32BE(this.pos - 4);
      case 'u64': this.need(8, what); this.pos += 8; return b.readBigUInt64BE(this.pos - 8);
      case 'i64': this.need(8, what); this.pos += 8; return b.readBigInt64BE(this.pos - 8);
      case 'string': {
        this.need(2, what);
        const n = b.readUInt16BE(this.pos);
        this.pos += 2;
        this.need(n, what);
        const raw = b.subarray(this.pos, this.pos + n);
        this.pos += n;
        let ascii = true;
        for (let i = 0; i < raw.length; i++) if (raw[i] > 0x7f) { ascii = false; break; }
        if (ascii) return raw.toString('latin1');
        try {
          return utf8.decode(raw);
        } catch {
          throw new ProtocolError('not_utf8', `${what} is not UTF-8`);
        }
      }
      case 'bytes': {
        this.need(4, what);
        const n = b.readUInt32BE(this.pos);
        this.pos += 4;
        this.need(n, what);
        this.pos += n;
        return b.subarray(this.pos - n, this.pos);
      }
      case 'offsetCommitted': {
        const topic = this.read('string', 'topic');
        const partition = this.read('u32', 'partition');
        const error = this.read('u16', 'error');
        const offset = this.read('i64', 'offset');
        const metadata = this.read('string', 'metadata');
        return [{ topic, partition, offset, metadata }, error];
      }
    }
    if (t.arr) {
      this.need(4, `${what} count`);
      const count = b.readUInt32BE(this.pos);
      this.pos += 4;
      const min = minSizeOf(t.arr);
      if (count * min > b.length - this.pos) {
        throw new ProtocolError('count', `${what}: ${count} entries cannot fit in ${b.length - this.pos} bytes`);
      }
      const out = new Array(count);
      for (let i = 0; i < count; i++) out[i] = this.read(t.arr, what);
      return out;
    }
    if (t.tuple) return t.tuple.map((x) => this.read(x, what));
    if (t.struct) return this.fields(t.struct);
    throw new Error(`unknown type ${JSON.stringify(t)}`);
  }
  fields(fields) {
    const out = {};
    for (const [name, t] of fields) out[name] = this.read(t, name);
    return out;
  }
}

/** Decodes the body of a frame of operation `op`; throws ProtocolError. */
export function decodeBody(op, body) {
  const m = MESSAGES[op];
  if (!m) throw new ProtocolError('unknown_op', `operation 0x${op.toString(16).padStart(2, '0')} is not one of the protocol's`);
  const r = new Reader(body);
  let value = r.fields(m[1]);
  if (r.pos !== body.length) {
    throw new ProtocolError('trailing', `${body.length - r.pos} bytes after the last field of ${m[0]}`);
  }
  if (op === 0x1b) {
    const { transactional_id, ...produce } = value;
    value = { transactional_id, produce };
  }
  return value;
}

/**
 * Reads a frame header: {op, length}. Throws ProtocolError for a short,
 * foreign or over-long header (a body above maxBody is refused unread).
 */
export function decodeHeader(buf, maxBody) {
  if (buf.length < HEADER_BYTES) throw new ProtocolError('short_header', `a frame header is 7 bytes, got ${buf.length}`);
  if (buf[0] !== MAGIC) throw new ProtocolError('bad_magic', `magic 0x${buf[0].toString(16)} is not 0xae`);
  if (buf[1] !== FRAMING_VERSION) throw new ProtocolError('bad_version', `framing version ${buf[1]} is not 1`);
  const length = buf.readUInt32BE(3);
  if (length > maxBody) throw new ProtocolError('too_large', `a body of ${length} bytes is over the limit of ${maxBody}`);
  return { op: buf[2], length };
}

/** Decodes exactly one whole frame: {op, message, value}. */
export function decodeFrame(buf, maxBody = 64 * 1024 * 1024) {
  const { op, length } = decodeHeader(buf, maxBody);
  if (!MESSAGES[op]) throw new ProtocolError('unknown_op', `operation 0x${op.toString(16).padStart(2, '0')} is not one of the protocol's`);
  if (buf.length - HEADER_BYTES < length) throw new ProtocolError('truncated', `the input ends before the ${length}-byte body does`);
  if (buf.length - HEADER_BYTES > length) throw new ProtocolError('trailing', `${buf.length - HEADER_BYTES - length} bytes after the body`);
  return { op, message: MESSAGES[op][0], value: decodeBody(op, buf.subarray(HEADER_BYTES)) };
}

// ---- encoding --------------------------------------------------------------

class Writer {
  constructor(size = 256) { this.buf = Buffer.allocUnsafe(size); this.pos = 0; }
  room(n) {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  write(t, v, what) {
    const b = this;
    switch (t) {
      case 'u8': b.room(1); b.buf.writeUInt8(v, b.pos); b.pos += 1; return;
      case 'i8': b.room(1); b.buf.writeInt8(v, b.pos); b.pos += 1; return;
      case 'bool': b.room(1); b.buf[b.pos++] = v ? 1 : 0; return;
      case 'isolation': {
        b.room(1);
        if (v === 'read_uncommitted' || v === 0) b.buf[b.pos++] = 0;
        else if (v === 'read_committed' || v === 1) b.buf[b.pos++] = 1;
        else throw new TypeError(`isolation ${v} is not read_uncommitted or read_committed`);
        return;
      }
      case 'u16': b.room(2); b.buf.writeUInt16BE(v, b.pos); b.pos += 2; return;
      case 'i16': b.room(2); b.buf.writeInt16BE(v, b.pos); b.pos += 2; return;
      case 'u32': b.room(4); b.buf.writeUInt32BE(v, b.pos); b.pos += 4; return;
      case 'i32': b.room(4); b.buf.writeInt32BE(v, b.pos); b.pos += 4; return;
      case 'u64': b.room(8); b.buf.writeBigUInt64BE(BigInt(v), b.pos); b.pos += 8; return;
      case 'i64': b.room(8); b.buf.writeBigInt64BE(BigInt(v), b.pos); b.pos += 8; return;
      case 'string': {
        let raw = Buffer.from(v ?? '', 'utf8');
        if (raw.length > 0xffff) raw = cutUtf8(raw, 0xffff);
        b.room(2 + raw.length);
        b.buf.writeUInt16BE(raw.length, b.pos);
        raw.copy(b.buf, b.pos + 2);
        b.pos += 2 + raw.length;
        return;
      }
      case 'bytes': {
        const raw = v ?? Buffer.alloc(0);
        b.room(4 + raw.length);
        b.buf.writeUInt32BE(raw.length, b.pos);
        b.buf.set(raw, b.pos + 4);
        b.pos += 4 + raw.length;
        return;
      }
      case 'offsetCommitted': {
        const [o, error] = v;
        b.write('string', o.topic); b.write('u32', o.partition); b.write('u16', error);
        b.write('i64', o.offset); b.write('string', o.metadata);
        return;
      }
    }
    if (t.arr) {
      const list = v ?? [];
      b.write('u32', list.length);
      for (const x of list) b.write(t.arr, x, what);
      return;
    }
    if (t.tuple) { t.tuple.forEach((x, i) => b.write(x, v[i], what)); return; }
    if (t.struct) { b.fields(t.struct, v); return; }
    throw new Error(`unknown type ${JSON.stringify(t)}`);
  }
  fields(fields, v) {
    for (const [name, t] of fields) this.write(t, v[name], name);
  }
}

function cutUtf8(raw, max) {
  let n = max;
  while (n > 0 && (raw[n] & 0xc0) === 0x80) n--;
  return raw.subarray(0, n);
}

/** Encodes a whole frame (header and body) of operation op. */
export function encodeFrame(op, value) {
  const m = MESSAGES[op];
  if (!m) throw new TypeError(`operation 0x${op.toString(16)} is not one of the protocol's`);
  if (op === 0x1b) value = { transactional_id: value.transactional_id, ...value.produce };
  const w = new Writer(256);
  w.pos = HEADER_BYTES;
  w.fields(m[1], value);
  const frame = w.buf.subarray(0, w.pos);
  frame[0] = MAGIC;
  frame[1] = FRAMING_VERSION;
  frame[2] = op;
  frame.writeUInt32BE(w.pos - HEADER_BYTES, 3);
  return frame;
}

/** The layout of an op, for tools that convert values (the corpus tests). */
export function layoutOf(op) {
  return MESSAGES[op]?.[1];
}
