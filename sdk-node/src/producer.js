// A batching, idempotent producer (section 9.5): records gathered per
// partition, one Produce per leader, at most one batch in flight per
// partition, retriable failures resent byte for byte.
import { OPS } from './codec.js';
import { AeroStreamError, ConnectionError, ErrorCode, isRetriable } from './errors.js';
import { encodeBatch } from './records.js';
import { partitionForKey } from './partitioner.js';
import { sleep } from './client.js';

const DEFAULTS = {
  acks: -1, lingerMs: 5, batchBytes: 128 * 1024, bufferBytes: 32 * 1024 * 1024,
  compression: 'none', requestTimeoutMs: 30000, deliveryTimeoutMs: 120000, idempotent: undefined,
  transactionalId: '', transactionTimeoutMs: 60000,
};

function size(v) {
  if (v === null || v === undefined) return 0;
  return typeof v === 'string' ? Buffer.byteLength(v) : v.length;
}

export class Producer {
  constructor(client, config = {}) {
    this.client = client;
    this.config = { ...DEFAULTS, ...config };
    if (![0, 1, -1].includes(this.config.acks)) throw new AeroStreamError(ErrorCode.INVALID_ACKS, 'acks must be 0, 1 or -1');
    this.transactionalId = this.config.transactionalId || '';
    if (this.transactionalId && this.config.acks !== -1) throw new AeroStreamError(0, 'a transactional producer needs acks -1');
    this.idempotent = this.transactionalId ? true : (this.config.idempotent ?? this.config.acks === -1);
    this.txn = null; // {added: Set, failed: Error|null, offsets: bool} while a transaction is open
    if (this.idempotent && this.config.acks !== -1) throw new AeroStreamError(0, 'an idempotent producer needs acks -1');
    this.parts = new Map(); // "topic:partition" -> partition state
    this.buffered = 0;
    this.roomWaiters = [];
    this.waitingForRoom = [];
    this.sticky = new Map(); // topic -> sticky partition for keyless records
    this.stickyBytes = new Map(); // topic -> bytes sent to it since it was picked
    this.producerId = -1n;
    this.producerEpoch = -1;
    this.pidPromise = null;
    this.closed = false;
    this.timer = null;
    this.inFlight = 0;
    this.flushWaiters = [];
  }

  async #ensureProducerId() {
    if (!this.idempotent || this.producerId >= 0n) return;
    if (this.transactionalId) return this.initTransactions();
    if (!this.pidPromise) {
      this.pidPromise = (async () => {
        for (let attempt = 0; ; attempt++) {
          const r = await this.client.request(OPS.InitProducer, {});
          if (r.error === 0) {
            this.producerId = r.producer_id;
            this.producerEpoch = r.producer_epoch;
            return;
          }
          if (!isRetriable(r.error) || attempt > 10) throw new AeroStreamError(r.error, 'getting a producer id');
          await sleep(100 * 2 ** Math.min(attempt, 4));
        }
      })().finally(() => { this.pidPromise = null; });
    }
    return this.pidPromise;
  }

  /**
   * Takes the transactional id's producer id and a new epoch (fencing older
   * producers of the id); aborts or completes what a previous one left open.
   */
  async initTransactions() {
    if (!this.transactionalId) throw new AeroStreamError(0, 'initTransactions needs a transactionalId');
    if (this.pidPromise) return this.pidPromise;
    this.pidPromise = (async () => {
      for (let attempt = 0; ; attempt++) {
        const conn = await this.client.coordinator(this.transactionalId, { txn: true });
        const r = await conn.request(OPS.InitTxn, { transactional_id: this.transactionalId, timeout_ms: this.config.transactionTimeoutMs });
        if (r.error === 0) {
          this.producerId = r.producer_id;
          this.producerEpoch = r.producer_epoch;
          for (const st of this.parts.values()) st.sequence = 0;
          return;
        }
        if (!isRetriable(r.error) || attempt > 20) throw new AeroStreamError(r.error, r.message || `initialising transactional id ${this.transactionalId}`);
        await sleep(100 * 2 ** Math.min(attempt, 4));
      }
    })().finally(() => { this.pidPromise = null; });
    return this.pidPromise;
  }

  #txnProducer() {
    return { transactional_id: this.transactionalId, producer_id: this.producerId, producer_epoch: this.producerEpoch };
  }

  async #txnRequest(op, value, what) {
    for (let attempt = 0; ; attempt++) {
      const conn = await this.client.coordinator(this.transactionalId, { txn: true });
      const r = await conn.request(op, { producer: this.#txnProducer(), ...value });
      if (r.error === 0) return;
      if (!isRetriable(r.error) || attempt > 30) throw new AeroStreamError(r.error, r.message || what);
      await sleep(Math.min(50 * 2 ** attempt, 1000));
    }
  }

  /** Opens a transaction: the records sent until commit or abort belong to it. */
  async beginTransaction() {
    if (!this.transactionalId) throw new AeroStreamError(0, 'beginTransaction needs a transactionalId');
    if (this.txn) throw new AeroStreamError(ErrorCode.INVALID_TXN_STATE, 'a transaction is open already');
    if (this.producerId < 0n) await this.initTransactions();
    this.txn = { added: new Set(), failed: null, offsets: false };
  }

  /**
   * Adds a group's offsets to the transaction: offsets [{topic, partition,
   * offset}] (the next offset to read), group: a group id or a consumer's
   * groupMetadata() (a group with members takes them from a member only).
   */
  async sendOffsetsToTransaction(offsets, group) {
    if (!this.txn) throw new AeroStreamError(ErrorCode.INVALID_TXN_STATE, 'no transaction is open');
    const meta = typeof group === 'string' ? { group, generation: -1, memberId: '' } : group;
    await this.#txnRequest(OPS.AddTxnOffsets, { group: meta.group }, `adding group ${meta.group} to the transaction`);
    this.txn.offsets = true;
    for (let attempt = 0; ; attempt++) {
      const conn = await this.client.coordinator(meta.group);
      const r = await conn.request(OPS.TxnOffsetCommit, {
        producer: this.#txnProducer(), group: meta.group, generation: meta.generation, member_id: meta.memberId,
        offsets: offsets.map((o) => [o.topic, o.partition, BigInt(o.offset)]),
      });
      if (r.error === 0) return;
      if (!isRetriable(r.error) || attempt > 20) throw new AeroStreamError(r.error, r.message || 'committing offsets in the transaction');
      await sleep(100);
    }
  }

  /** Sends what is buffered, then commits the transaction; throws (and aborts) if a record of it failed. */
  async commitTransaction() { return this.#endTxn(true); }

  /** Sends what is buffered, then aborts the transaction: none of its records or offsets count. */
  async abortTransaction() { return this.#endTxn(false); }

  async #endTxn(commit) {
    if (!this.txn) throw new AeroStreamError(ErrorCode.INVALID_TXN_STATE, 'no transaction is open');
    await this.flush();
    const txn = this.txn;
    const doCommit = commit && !txn.failed;
    try {
      if (txn.added.size > 0 || txn.offsets) {
        await this.#txnRequest(OPS.EndTxn, { commit: doCommit }, doCommit ? 'committing the transaction' : 'aborting the transaction');
      }
    } finally {
      this.txn = null;
    }
    if (commit && txn.failed) {
      // a batch failed for good: the transaction was aborted; a new epoch restarts the sequences
      this.producerId = -1n;
      throw new AeroStreamError(txn.failed.code ?? 0, `the transaction was aborted: a record failed (${txn.failed.message})`);
    }
  }

  /** True while the buffer holds bufferBytes or more; see waitForRoom(). */
  get bufferFull() { return this.buffered >= this.config.bufferBytes; }

  /** Resolves once the buffer has room for more records. */
  waitForRoom() {
    if (!this.bufferFull && this.waitingForRoom.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /**
   * Sends a record {topic, key, value, headers, partition, timestamp}.
   * Resolves with {topic, partition, offset} once acknowledged (offset -1n
   * with acks 0); rejects with the error when it fails for good. While the
   * buffer is full the record waits for room, in order, before it is batched.
   */
  send(record) {
    if (this.closed) return Promise.reject(new AeroStreamError(0, 'the producer is closed'));
    if (!record || typeof record.topic !== 'string') return Promise.reject(new TypeError('a record needs a topic'));
    if (this.transactionalId && !this.txn) return Promise.reject(new AeroStreamError(ErrorCode.INVALID_TXN_STATE, 'a transactional producer sends within beginTransaction() and commitTransaction()'));
    return new Promise((resolve, reject) => {
      const entry = { record, resolve, reject, bytes: size(record.key) + size(record.value) + 32, start: Date.now() };
      if (this.bufferFull || this.waitingForRoom.length > 0) this.waitingForRoom.push(entry);
      else this.#accept(entry);
    });
  }

  #accept(entry) {
    this.buffered += entry.bytes;
    const { record } = entry;
    const parts = this.client.topics.get(record.topic);
    if (!parts) {
      // metadata first; then batch
      this.client.partitions(record.topic).then(() => this.#place(entry), (e) => this.#drop(entry, e));
      return;
    }
    this.#place(entry);
  }

  #place(entry) {
    const { record } = entry;
    const parts = this.client.topics.get(record.topic);
    if (!parts || parts.length === 0) return this.#drop(entry, new AeroStreamError(ErrorCode.UNKNOWN_TOPIC, `topic ${record.topic}`));
    let p = record.partition;
    if (p === undefined || p === null) {
      if (record.key !== null && record.key !== undefined) {
        p = partitionForKey(typeof record.key === 'string' ? Buffer.from(record.key) : record.key, parts.length);
      } else {
        p = this.sticky.get(record.topic);
        if (p === undefined || p >= parts.length) {
          p = Math.floor(Math.random() * parts.length);
          this.sticky.set(record.topic, p);
        }
      }
    }
    if (p < 0 || p >= parts.length) return this.#drop(entry, new AeroStreamError(ErrorCode.UNKNOWN_PARTITION, `${record.topic} has no partition ${p}`));
    const key = `${record.topic}:${p}`;
    let st = this.parts.get(key);
    if (!st) {
      st = { topic: record.topic, partition: p, batches: [], inFlight: false, sequence: 0 };
      this.parts.set(key, st);
    }
    let b = st.batches[st.batches.length - 1];
    if (!b || b.sealed || (b.bytes + entry.bytes > this.config.batchBytes && b.entries.length > 0)) {
      if (b) b.sealed = true;
      b = { entries: [], bytes: 0, created: Date.now(), sealed: false, encoded: null, attempts: 0 };
      st.batches.push(b);
    }
    b.entries.push(entry);
    b.bytes += entry.bytes;
    if ((record.partition === undefined || record.partition === null) && (record.key === null || record.key === undefined)) {
      // keyless records move on to the next partition after a batch's worth of bytes
      const n = (this.stickyBytes.get(record.topic) ?? 0) + entry.bytes;
      if (n >= this.config.batchBytes) {
        this.sticky.set(record.topic, (p + 1) % parts.length);
        this.stickyBytes.set(record.topic, 0);
      } else this.stickyBytes.set(record.topic, n);
    }
    if (b.bytes >= this.config.batchBytes) {
      b.sealed = true;
      this.#drain();
    } else this.#schedule();
  }

  #drop(entry, err) {
    this.#free(entry.bytes);
    entry.reject(err);
  }

  #free(bytes) {
    this.buffered -= bytes;
    while (this.waitingForRoom.length > 0 && !this.bufferFull) this.#accept(this.waitingForRoom.shift());
    if (!this.bufferFull && this.waitingForRoom.length === 0) for (const w of this.roomWaiters.splice(0)) w();
    this.#checkFlushed();
  }

  #schedule() {
    if (this.timer) return;
    this.timer = setTimeout(() => { this.timer = null; this.#drain(); }, this.config.lingerMs);
  }

  /** Sends every ready batch: one Produce per leader. */
  #drain(force = this.flushing) {
    if (this.draining) { this.drainAgain = true; return; }
    this.draining = true;
    this.#drainAsync(force).catch((e) => this.#failQueued(e)).finally(() => {
      this.draining = false;
      if (this.drainAgain) { this.drainAgain = false; this.#drain(); }
    });
  }

  async #drainAsync(force) {
    await this.#ensureProducerId();
    const now = Date.now();
    const byLeader = new Map();
    let waiting = false;
    for (const st of this.parts.values()) {
      if (st.inFlight || st.batches.length === 0) continue;
      const b = st.batches[0];
      if (!(b.sealed || force || this.flushing || now - b.created >= this.config.lingerMs)) { waiting = true; continue; }
      if (b.retryAt && b.retryAt > now) { waiting = true; continue; }
      let leader;
      const parts = this.client.topics.get(st.topic);
      leader = parts?.[st.partition]?.leader ?? -1;
      if (leader < 0) {
        b.retryAt = now + 100;
        this.client.refreshMetadata([st.topic]).catch(() => {});
        waiting = true;
        continue;
      }
      b.sealed = true;
      if (!b.encoded) {
        const seq = this.idempotent ? st.sequence : -1;
        b.encoded = encodeBatch(b.entries.map((e) => ({
          key: e.record.key, value: e.record.value, headers: e.record.headers, timestamp: e.record.timestamp ?? e.start,
        })), {
          producerId: this.producerId, producerEpoch: this.producerEpoch, baseSequence: seq, compression: this.config.compression,
          transactional: !!this.transactionalId,
        });
        b.pid = this.producerId;
      }
      st.inFlight = true;
      if (!byLeader.has(leader)) byLeader.set(leader, []);
      byLeader.get(leader).push(st);
    }
    if (this.transactionalId && this.txn && byLeader.size > 0) {
      // every partition joins the transaction before its first TxnProduce
      const add = new Map();
      for (const sts of byLeader.values()) {
        for (const st of sts) {
          const k = `${st.topic}:${st.partition}`;
          if (this.txn.added.has(k)) continue;
          if (!add.has(st.topic)) add.set(st.topic, []);
          add.get(st.topic).push(st.partition);
        }
      }
      if (add.size > 0) {
        try {
          await this.#txnRequest(OPS.AddTxnPartitions, { topics: [...add] }, 'adding partitions to the transaction');
          for (const [t, ps] of add) for (const p of ps) this.txn.added.add(`${t}:${p}`);
        } catch (e) {
          for (const sts of byLeader.values()) for (const st of sts) st.inFlight = false;
          throw e;
        }
      }
    }
    for (const [leader, sts] of byLeader) this.#sendTo(leader, sts);
    if (waiting) this.#schedule();
  }

  async #sendTo(leader, sts) {
    const topics = new Map();
    for (const st of sts) {
      if (!topics.has(st.topic)) topics.set(st.topic, []);
      topics.get(st.topic).push({ partition: st.partition, batch: st.batches[0].encoded });
    }
    this.inFlight++;
    let resp;
    let failure = null;
    try {
      const conn = await this.client.connection(leader);
      const produce = {
        acks: this.config.acks, timeout_ms: this.config.requestTimeoutMs,
        topics: [...topics].map(([name, partitions]) => ({ name, partitions })),
      };
      const opts = { noResponse: this.config.acks === 0, timeoutMs: this.config.requestTimeoutMs + 5000 };
      resp = this.transactionalId
        ? await conn.request(OPS.TxnProduce, { transactional_id: this.transactionalId, produce }, opts)
        : await conn.request(OPS.Produce, produce, opts);
    } catch (e) {
      failure = e;
    }
    this.inFlight--;
    const results = new Map();
    if (resp) for (const t of resp.topics) for (const p of t.partitions) results.set(`${t.name}:${p.partition}`, p);
    for (const st of sts) {
      const b = st.batches[0];
      const r = this.config.acks === 0 && !failure ? { error: 0, base_offset: -1n } : results.get(`${st.topic}:${st.partition}`);
      if (r && (r.error === 0 || r.error === ErrorCode.DUPLICATE_SEQUENCE)) {
        st.batches.shift();
        st.inFlight = false;
        if (this.idempotent) st.sequence = (st.sequence + b.entries.length) % 0x80000000;
        b.entries.forEach((e, i) => {
          e.resolve({ topic: st.topic, partition: st.partition, offset: r.base_offset < 0n ? -1n : r.base_offset + BigInt(i) });
        });
        this.#free(b.bytes);
        continue;
      }
      const err = r ? new AeroStreamError(r.error, r.message || `producing to ${st.topic}-${st.partition}`)
        : failure ?? new AeroStreamError(ErrorCode.UNKNOWN_SERVER_ERROR, `no answer for ${st.topic}-${st.partition}`);
      const retriable = err instanceof ConnectionError || err.retriable;
      const expired = Date.now() - b.entries[0].start > this.config.deliveryTimeoutMs;
      if (retriable && !expired && !this.closed) {
        b.attempts++;
        b.retryAt = Date.now() + Math.min(100 * 2 ** Math.min(b.attempts, 6), 5000);
        st.inFlight = false;
        this.client.refreshMetadata([st.topic]).catch(() => {});
        continue;
      }
      // failed for good: whether it was written is unknown, so an
      // idempotent producer restarts its sequences with a new id
      st.batches.shift();
      st.inFlight = false;
      for (const e of b.entries) e.reject(err);
      this.#free(b.bytes);
      if (this.txn) this.txn.failed ??= err;
      else if (this.idempotent && b.pid === this.producerId) this.#resetProducerId();
    }
    this.#drain();
  }

  // no producer id could be had: every batch not in flight fails
  #failQueued(err) {
    if (this.txn) this.txn.failed ??= err;
    for (const st of this.parts.values()) {
      const keep = st.inFlight ? st.batches.slice(0, 1) : [];
      for (const b of st.batches.slice(keep.length)) {
        for (const e of b.entries) e.reject(err);
        this.#free(b.bytes);
      }
      st.batches = keep;
    }
  }

  #resetProducerId() {
    this.producerId = -1n;
    for (const st of this.parts.values()) {
      st.sequence = 0;
      for (const b of st.batches) if (!st.inFlight || b !== st.batches[0]) b.encoded = null;
    }
  }

  #checkFlushed() {
    if (this.buffered === 0 && this.waitingForRoom.length === 0) {
      for (const w of this.flushWaiters.splice(0)) w();
    }
  }

  /** Sends everything buffered now and resolves when all of it is acknowledged or failed. */
  async flush() {
    if (this.buffered === 0 && this.waitingForRoom.length === 0) return;
    this.flushing = true;
    try {
      const done = new Promise((resolve) => this.flushWaiters.push(resolve));
      this.#drain(true);
      await done;
    } finally {
      this.flushing = this.flushWaiters.length > 0;
    }
  }

  /** Flushes, then refuses further sends. */
  async close() {
    await this.flush();
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
