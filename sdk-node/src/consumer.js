// Consumers (sections 9.6 and 9.7): of assigned partitions, or as a member
// of a consumer group; records come out of an async iterator.
import { OPS } from './codec.js';
import { AeroStreamError, ConnectionError, ErrorCode, isRetriable } from './errors.js';
import { decodeBatches } from './records.js';
import { sleep } from './client.js';

const DEFAULTS = {
  group: '', from: 'latest', isolation: 'read_uncommitted', maxWaitMs: 500, minBytes: 1,
  maxBytes: 50 * 1024 * 1024, partitionMaxBytes: 1024 * 1024, sessionTimeoutMs: 10000,
  rebalanceTimeoutMs: 30000, autoCommit: true, autoCommitIntervalMs: 5000,
};

const pkey = (topic, partition) => `${topic}:${partition}`;

export class Consumer {
  constructor(client, config = {}) {
    this.client = client;
    this.config = { ...DEFAULTS, ...config };
    if (!['earliest', 'latest'].includes(this.config.from)) throw new AeroStreamError(0, `from ${this.config.from} is not earliest or latest`);
    if (!['read_uncommitted', 'read_committed'].includes(this.config.isolation)) throw new AeroStreamError(0, `isolation ${this.config.isolation} is not read_uncommitted or read_committed`);
    this.assigned = new Map(); // key -> {topic, partition, fetch: bigint, consumed: bigint}
    this.buffer = [];
    this.bufferPos = 0;
    this.closed = false;
    this.member = null; // {memberId, generation, topics, conn}
    this.rejoin = false;
    this.lastCommit = Date.now();
    this.committed = new Map();
  }

  /**
   * Reads partitions of topic (every partition when partitions is
   * undefined), from 'earliest', 'latest' or an offset (bigint/number).
   */
  async assign(topic, partitions, from = this.config.from) {
    if (this.config.group && this.member) throw new AeroStreamError(0, 'a group member is assigned its partitions by the group');
    const parts = partitions ?? (await this.client.waitForTopic(topic)).map((p) => p.index);
    let offsets;
    if (from === 'earliest' || from === 'latest') offsets = await this.client.listOffsets(topic, parts, from);
    else offsets = new Map(parts.map((p) => [p, BigInt(from)]));
    for (const p of parts) this.assigned.set(pkey(topic, p), { topic, partition: p, fetch: offsets.get(p), consumed: offsets.get(p) });
  }

  /** Joins the consumer group (config.group) reading topics. */
  async subscribe(topics) {
    if (!this.config.group) throw new AeroStreamError(ErrorCode.INVALID_GROUP, 'subscribe needs a group (config.group)');
    this.topics = Array.isArray(topics) ? topics : [topics];
    await this.#join('');
  }

  /** The partitions read now: [{topic, partition}]. */
  assignment() {
    return [...this.assigned.values()].map(({ topic, partition }) => ({ topic, partition }));
  }

  /** The member's generation and id (for transactional offset commits). */
  groupMetadata() {
    return this.member ? { group: this.config.group, generation: this.member.generation, memberId: this.member.memberId } : null;
  }

  async #join(memberId) {
    const { group, sessionTimeoutMs, rebalanceTimeoutMs } = this.config;
    for (let attempt = 0; ; attempt++) {
      if (this.closed) return;
      let r;
      let conn;
      try {
        conn = await this.client.coordinator(group);
        r = await conn.request(OPS.JoinGroup, {
          group, member_id: memberId, topics: this.topics,
          session_timeout_ms: sessionTimeoutMs, rebalance_timeout_ms: rebalanceTimeoutMs,
        }, { timeoutMs: 2 * rebalanceTimeoutMs + 10000 });
      } catch (e) {
        if (!(e instanceof ConnectionError) || attempt > 10) throw e;
        await sleep(200);
        continue;
      }
      if (r.error === ErrorCode.UNKNOWN_MEMBER) { memberId = ''; continue; }
      if (r.error === ErrorCode.REBALANCE_IN_PROGRESS || (isRetriable(r.error) && attempt < 20)) {
        if (r.member_id) memberId = r.member_id;
        await sleep(200);
        continue;
      }
      if (r.error !== 0) throw new AeroStreamError(r.error, `joining group ${group}`);
      this.member = { memberId: r.member_id, generation: r.generation, conn };
      this.rejoin = false;
      this.assigned.clear();
      this.buffer = [];
      this.bufferPos = 0;
      const parts = [];
      for (const a of r.assignment) for (const p of a.partitions) parts.push({ topic: a.topic, partition: p });
      if (parts.length > 0) {
        const committed = await this.client.fetchOffsets(group, parts);
        const missing = new Map();
        for (const { topic, partition } of parts) {
          const o = committed.get(pkey(topic, partition)) ?? -1n;
          if (o >= 0n) this.assigned.set(pkey(topic, partition), { topic, partition, fetch: o, consumed: o });
          else {
            if (!missing.has(topic)) missing.set(topic, []);
            missing.get(topic).push(partition);
          }
          this.committed.set(pkey(topic, partition), o);
        }
        for (const [topic, ps] of missing) {
          const offs = await this.client.listOffsets(topic, ps, this.config.from);
          for (const p of ps) this.assigned.set(pkey(topic, p), { topic, partition: p, fetch: offs.get(p), consumed: offs.get(p) });
        }
      }
      this.#startHeartbeat();
      return;
    }
  }

  #startHeartbeat() {
    clearInterval(this.heartbeat);
    const { group } = this.config;
    const member = this.member;
    let lastOk = Date.now();
    this.heartbeat = setInterval(async () => {
      if (this.member !== member || this.rejoin || this.closed) return;
      try {
        const conn = member.conn && !member.conn.closed ? member.conn : (member.conn = await this.client.coordinator(group));
        const r = await conn.request(OPS.Heartbeat, { group, member_id: member.memberId, generation: member.generation }, { timeoutMs: this.config.sessionTimeoutMs });
        if (this.member !== member) return;
        if (r.error === 0) { lastOk = Date.now(); return; }
        if (r.error === ErrorCode.REBALANCE_IN_PROGRESS) this.rejoin = 'commit';
        else if (r.error === ErrorCode.ILLEGAL_GENERATION) this.rejoin = 'keep-id';
        else if (r.error === ErrorCode.UNKNOWN_MEMBER) this.rejoin = 'new-id';
        else if (r.error === ErrorCode.NOT_COORDINATOR || r.error === ErrorCode.NOT_AVAILABLE) member.conn = null;
      } catch { member.conn = null; /* found again at the next beat */ }
      if (!this.rejoin && Date.now() - lastOk > this.config.sessionTimeoutMs) this.rejoin = 'new-id';
    }, Math.max(100, Math.floor(this.config.sessionTimeoutMs / 3)));
    this.heartbeat.unref?.();
  }

  async #rebalance() {
    const how = this.rejoin;
    clearInterval(this.heartbeat);
    if (how === 'commit') await this.commit().catch(() => {});
    const memberId = how === 'new-id' ? '' : this.member.memberId;
    this.member = null;
    this.assigned.clear();
    this.buffer = [];
    this.bufferPos = 0;
    await this.#join(memberId);
  }

  /** Commits the positions reached (offset after the last record returned). */
  async commit() {
    if (!this.config.group) throw new AeroStreamError(ErrorCode.INVALID_GROUP, 'commit needs a group (config.group)');
    const offsets = [];
    for (const [k, a] of this.assigned) {
      if (this.committed.get(k) !== a.consumed) offsets.push({ topic: a.topic, partition: a.partition, offset: a.consumed, metadata: '' });
    }
    if (offsets.length === 0) return;
    await this.client.commitOffsets(this.config.group, offsets,
      this.member ? { generation: this.member.generation, memberId: this.member.memberId } : {});
    for (const o of offsets) this.committed.set(pkey(o.topic, o.partition), o.offset);
    this.lastCommit = Date.now();
  }

  /** The next record; waits for one. Returns null once the consumer is closed. */
  async next() {
    for (;;) {
      if (this.closed) return null;
      if (this.rejoin && this.member) { await this.#rebalance(); continue; }
      if (this.bufferPos < this.buffer.length) {
        const rec = this.buffer[this.bufferPos++];
        const a = this.assigned.get(pkey(rec.topic, rec.partition));
        if (!a) continue; // given up meanwhile
        a.consumed = rec.offset + 1n;
        return rec;
      }
      if (this.config.group && this.member && this.config.autoCommit && Date.now() - this.lastCommit > this.config.autoCommitIntervalMs) {
        await this.commit().catch(() => {});
      }
      this.buffer = await this.#fetchRound();
      this.bufferPos = 0;
    }
  }

  [Symbol.asyncIterator]() {
    return {
      next: async () => {
        const value = await this.next();
        return value === null ? { done: true, value: undefined } : { done: false, value };
      },
      return: async () => { await this.close(); return { done: true, value: undefined }; },
    };
  }

  async #fetchRound() {
    if (this.assigned.size === 0) { await sleep(this.config.maxWaitMs); return []; }
    const byLeader = new Map();
    for (const a of this.assigned.values()) {
      const leader = this.client.topics.get(a.topic)?.[a.partition]?.leader ?? -1;
      if (leader < 0) { this.client.refreshMetadata([a.topic]).catch(() => {}); continue; }
      if (!byLeader.has(leader)) byLeader.set(leader, new Map());
      const t = byLeader.get(leader);
      if (!t.has(a.topic)) t.set(a.topic, []);
      t.get(a.topic).push({ partition: a.partition, offset: a.fetch, max_bytes: this.config.partitionMaxBytes });
    }
    if (byLeader.size === 0) { await sleep(100); return []; }
    const committed = this.config.isolation === 'read_committed';
    const out = [];
    let refresh = false;
    await Promise.all([...byLeader].map(async ([leader, topics]) => {
      let r;
      try {
        const conn = await this.client.connection(leader);
        const body = {
          max_wait_ms: this.config.maxWaitMs, min_bytes: this.config.minBytes, max_bytes: this.config.maxBytes,
          topics: [...topics].map(([name, partitions]) => ({ name, partitions })),
        };
        r = committed
          ? await conn.request(OPS.FetchIsolated, { isolation: 'read_committed', ...body }, { timeoutMs: this.config.maxWaitMs + 30000 })
          : await conn.request(OPS.Fetch, body, { timeoutMs: this.config.maxWaitMs + 30000 });
      } catch (e) {
        if (e instanceof ConnectionError) { refresh = true; await sleep(100); return; }
        throw e;
      }
      for (const t of r.topics) {
        for (const p of t.partitions) {
          const a = this.assigned.get(pkey(t.name, p.partition));
          if (!a) continue;
          if (p.error === ErrorCode.OFFSET_OUT_OF_RANGE) {
            a.fetch = this.config.from === 'earliest' ? p.log_start_offset : p.high_watermark;
            a.consumed = a.fetch;
            continue;
          }
          if (p.error !== 0) {
            if (isRetriable(p.error) || p.error === ErrorCode.NOT_LEADER) { refresh = true; continue; }
            throw new AeroStreamError(p.error, `fetching ${t.name}-${p.partition}`);
          }
          if (p.records.length === 0) continue;
          const aborting = new Set();
          const aborted = committed ? [...p.aborted].sort((x, y) => (x.first_offset < y.first_offset ? -1 : 1)) : [];
          for (const batch of decodeBatches(p.records)) {
            if (committed) {
              const last = batch.baseOffset + BigInt(batch.lastOffsetDelta);
              while (aborted.length > 0 && aborted[0].first_offset <= last) aborting.add(aborted.shift().producer_id);
            }
            if (batch.control) {
              aborting.delete(batch.producerId);
            } else if (!(batch.transactional && aborting.has(batch.producerId))) {
              for (const rec of batch.records) {
                if (rec.offset < a.fetch) continue;
                out.push({ topic: t.name, partition: p.partition, offset: rec.offset, timestamp: rec.timestamp, key: rec.key, value: rec.value, headers: rec.headers });
              }
            }
            if (batch.nextOffset > a.fetch) a.fetch = batch.nextOffset;
          }
        }
      }
    }));
    if (refresh) {
      await this.client.refreshMetadata([...new Set([...this.assigned.values()].map((a) => a.topic))]).catch(() => {});
      if (out.length === 0) await sleep(100);
    }
    return out;
  }

  /** Commits (group members with autoCommit), leaves the group, stops. */
  async close() {
    if (this.closed) return;
    clearInterval(this.heartbeat);
    let err = null;
    if (this.member) {
      if (this.config.autoCommit) await this.commit().catch((e) => { err = e; });
      try {
        const conn = await this.client.coordinator(this.config.group);
        await conn.request(OPS.LeaveGroup, { group: this.config.group, member_id: this.member.memberId }, { timeoutMs: 10000 });
      } catch { /* the session expires instead */ }
    }
    this.closed = true;
    this.member = null;
    if (err) throw err;
  }
}
