// The client: bootstrap, one connection per server, metadata and routing,
// topic admin, offsets (sections 9.1 and 9.3).
import { Connection } from './conn.js';
import { OPS } from './codec.js';
import { AeroStreamError, ConnectionError, ErrorCode, isRetriable } from './errors.js';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Parses aero://host:port[,host:port…] into [{host, port}]. */
export function parseBootstrap(url) {
  if (typeof url !== 'string' || url === '') throw new AeroStreamError(0, 'a bootstrap URL is needed, e.g. aero://127.0.0.1:9091');
  if (url.startsWith('aero+quic://')) {
    throw new AeroStreamError(0, 'aero+quic:// is not supported: the Node SDK speaks the native protocol over TCP only (Node has no QUIC); use aero://HOST:PORT');
  }
  const m = /^aero:\/\/(.+)$/.exec(url);
  if (!m) throw new AeroStreamError(0, `bootstrap ${url} is not aero://HOST:PORT[,HOST:PORT…]`);
  return m[1].split(',').map((hp) => {
    hp = hp.trim().replace(/\/+$/, '');
    let host; let port = 9091;
    const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(hp);
    if (v6) { host = v6[1]; if (v6[2]) port = Number(v6[2]); } else {
      const i = hp.lastIndexOf(':');
      if (i >= 0) { host = hp.slice(0, i); port = Number(hp.slice(i + 1)); } else host = hp;
    }
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) throw new AeroStreamError(0, `bootstrap address ${hp} is not HOST:PORT`);
    return { host, port };
  });
}

export class Client {
  /** Connects to the first bootstrap server that answers the hello, then reads the metadata. */
  static async connect(bootstrap, config = {}) {
    const c = new Client(bootstrap, config);
    await c.#bootstrap();
    return c;
  }

  constructor(bootstrap, config) {
    this.seeds = parseBootstrap(bootstrap);
    this.config = { clientId: 'aerostream-node', requestTimeoutMs: 30000, connectTimeoutMs: 10000, ...config };
    this.nodes = new Map(); // id -> {host, port}
    this.conns = new Map(); // id -> Promise<Connection>
    this.topics = new Map(); // name -> [{index, leader}]
    this.closed = false;
  }

  #open(host, port) {
    return Connection.open({
      host, port, clientId: this.config.clientId, sasl: this.config.sasl,
      connectTimeoutMs: this.config.connectTimeoutMs, requestTimeoutMs: this.config.requestTimeoutMs,
    });
  }

  async #bootstrap() {
    const errors = [];
    for (const { host, port } of this.seeds) {
      try {
        const conn = await this.#open(host, port);
        this.#adopt(conn.nodeId, conn);
        this.bootstrapNode = conn.nodeId;
        await this.refreshMetadata([]);
        return;
      } catch (e) {
        if (e instanceof AeroStreamError && e.code !== 0) throw e; // refused login: no point trying others
        errors.push(e.message);
      }
    }
    throw new ConnectionError(`no bootstrap server answered: ${errors.join('; ')}`);
  }

  #adopt(id, conn) {
    conn.onClose = () => { if (this.conns.get(id)?.conn === conn) this.conns.delete(id); };
    const p = Promise.resolve(conn);
    p.conn = conn;
    this.conns.set(id, p);
  }

  /** The connection to node id (connecting on demand). */
  async connection(id) {
    if (this.closed) throw new AeroStreamError(0, 'the client is closed');
    let p = this.conns.get(id);
    if (p) return p;
    const node = this.nodes.get(id);
    if (!node) throw new AeroStreamError(ErrorCode.NOT_AVAILABLE, `node ${id} is not among the servers the metadata lists`);
    p = this.#open(node.host, node.port).then((conn) => { p.conn = conn; conn.onClose = () => { if (this.conns.get(id) === p) this.conns.delete(id); }; return conn; });
    this.conns.set(id, p);
    p.catch(() => { if (this.conns.get(id) === p) this.conns.delete(id); });
    return p;
  }

  /** Any live connection, the bootstrap one first. */
  async anyConnection() {
    for (const id of [this.bootstrapNode, ...this.nodes.keys()]) {
      try {
        return await this.connection(id);
      } catch { /* next */ }
    }
    // every known server failed: start again from the seeds
    await this.#bootstrap();
    return this.connection(this.bootstrapNode);
  }

  /** Sends a request to any server. */
  async request(op, value, opts) {
    const conn = await this.anyConnection();
    return conn.request(op, value, opts);
  }

  /** Metadata of topics ([] = every topic); updates the routing tables. */
  async refreshMetadata(topics = []) {
    const conn = await (this.conns.get(this.bootstrapNode) ?? this.anyConnection());
    const md = await conn.request(OPS.Metadata, { topics });
    for (const n of md.nodes) this.nodes.set(n.id, { host: n.host, port: n.port, rack: n.rack });
    for (const t of md.topics) {
      if (t.error === 0) this.topics.set(t.name, t.partitions.map((p) => ({ index: p.index, leader: p.leader })).sort((a, b) => a.index - b.index));
      else this.topics.delete(t.name);
    }
    return md;
  }

  /** Partitions of a topic [{index, leader}], from the cache or the servers. */
  async partitions(topic, { refresh = false } = {}) {
    if (refresh || !this.topics.has(topic)) {
      const md = await this.refreshMetadata([topic]);
      const t = md.topics.find((x) => x.name === topic);
      if (t && t.error !== 0) throw new AeroStreamError(t.error, `topic ${topic}`);
    }
    return this.topics.get(topic);
  }

  /** The leader of a partition; refreshes metadata while it has none (up to timeoutMs). */
  async leaderOf(topic, partition, timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    for (let refresh = false; ; refresh = true) {
      const parts = await this.partitions(topic, { refresh });
      const p = parts?.[partition];
      if (!p) throw new AeroStreamError(ErrorCode.UNKNOWN_PARTITION, `${topic} has no partition ${partition}`);
      if (p.leader >= 0 && this.nodes.has(p.leader)) return p.leader;
      if (Date.now() > deadline) throw new AeroStreamError(ErrorCode.NOT_AVAILABLE, `${topic}-${partition} has no reachable leader`);
      await sleep(100);
    }
  }

  /** Creates a topic. partitions and replicationFactor -1: the server's defaults. */
  async createTopic(name, { partitions = -1, replicationFactor = -1, configs = {} } = {}) {
    const r = await this.request(OPS.CreateTopic, {
      name, partitions, replication_factor: replicationFactor, configs: Object.entries(configs).map(([k, v]) => [k, String(v)]),
    });
    if (r.error !== 0) throw new AeroStreamError(r.error, r.message || `creating topic ${name}`);
  }

  /** Deletes a topic and its data. */
  async deleteTopic(name) {
    const r = await this.request(OPS.DeleteTopic, { name });
    if (r.error !== 0) throw new AeroStreamError(r.error, r.message || `deleting topic ${name}`);
    this.topics.delete(name);
  }

  /** Names of every topic. */
  async listTopics() {
    const md = await this.refreshMetadata([]);
    return md.topics.filter((t) => t.error === 0).map((t) => t.name).sort();
  }

  /** Waits until every partition of topic has a leader. */
  async waitForTopic(topic, timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const parts = await this.partitions(topic, { refresh: true });
        if (parts && parts.length > 0 && parts.every((p) => p.leader >= 0 && this.nodes.has(p.leader))) return parts;
      } catch (e) {
        if (!(e instanceof AeroStreamError) || !(e.retriable)) throw e;
      }
      if (Date.now() > deadline) throw new AeroStreamError(ErrorCode.TIMED_OUT, `topic ${topic} is not usable after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /**
   * Offsets of partitions: spec 'earliest' | 'latest' | a timestamp (ms).
   * Returns Map partition -> bigint offset.
   */
  async listOffsets(topic, partitions, spec) {
    const s = spec === 'earliest' ? -2n : spec === 'latest' ? -1n : BigInt(spec);
    const out = new Map();
    for (let attempt = 0; ; attempt++) {
      const byLeader = new Map();
      for (const p of partitions) {
        if (out.has(p)) continue;
        const leader = await this.leaderOf(topic, p);
        if (!byLeader.has(leader)) byLeader.set(leader, []);
        byLeader.get(leader).push(p);
      }
      if (byLeader.size === 0) return out;
      let retry = null;
      await Promise.all([...byLeader].map(async ([leader, ps]) => {
        try {
          const conn = await this.connection(leader);
          const r = await conn.request(OPS.ListOffsets, { partitions: ps.map((p) => [topic, p, s]) });
          for (const e of r.partitions) {
            if (e.error === 0) out.set(e.partition, e.offset);
            else if (isRetriable(e.error) || e.error === ErrorCode.NOT_LEADER) retry = new AeroStreamError(e.error, `listing offsets of ${topic}-${e.partition}`);
            else throw new AeroStreamError(e.error, `listing offsets of ${topic}-${e.partition}`);
          }
        } catch (e) {
          if (e instanceof ConnectionError) retry = e; else throw e;
        }
      }));
      if (retry) {
        if (attempt >= 20) throw retry;
        await sleep(Math.min(100 * 2 ** attempt, 1000));
        await this.refreshMetadata([topic]).catch(() => {});
      }
    }
  }

  /** The coordinator connection of a group (or of a transactional id with txn true). */
  async coordinator(key, { txn = false, timeoutMs = 30000 } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const r = txn
        ? await this.request(OPS.FindTxnCoordinator, { transactional_id: key })
        : await this.request(OPS.FindCoordinator, { group: key });
      if (r.error === 0) {
        if (!this.nodes.has(r.node_id)) this.nodes.set(r.node_id, { host: r.host, port: r.port });
        return this.connection(r.node_id);
      }
      if (!isRetriable(r.error) || Date.now() > deadline) throw new AeroStreamError(r.error, `finding the coordinator of ${key}`);
      await sleep(Math.min(100 * 2 ** attempt, 1000));
    }
  }

  /**
   * Commits offsets outside group membership (or as a member with
   * generation and memberId). offsets: [{topic, partition, offset, metadata}].
   */
  async commitOffsets(group, offsets, { generation = -1, memberId = '' } = {}) {
    const conn = await this.coordinator(group);
    const r = await conn.request(OPS.CommitOffsets, {
      group, generation, member_id: memberId,
      offsets: offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: BigInt(o.offset), metadata: o.metadata ?? '' })),
    });
    for (const [topic, partition, error] of r.partitions) {
      if (error !== 0) throw new AeroStreamError(error, `committing ${topic}-${partition} for group ${group}`);
    }
  }

  /** A group's committed offsets: Map "topic:partition" -> bigint (-1n: none). */
  async fetchOffsets(group, partitions) {
    const conn = await this.coordinator(group);
    const r = await conn.request(OPS.FetchOffsets, { group, partitions: partitions.map(({ topic, partition }) => [topic, partition]) });
    const out = new Map();
    for (const [o, error] of r.offsets) {
      if (error !== 0) throw new AeroStreamError(error, `fetching the offsets of group ${group}`);
      out.set(`${o.topic}:${o.partition}`, o.offset);
    }
    return out;
  }

  /** Round trip to a server, in ms. */
  async ping() {
    const t = process.hrtime.bigint();
    await this.request(OPS.Ping, { nonce: 1n });
    return Number(process.hrtime.bigint() - t) / 1e6;
  }

  /** Closes every connection. */
  async close() {
    this.closed = true;
    for (const p of this.conns.values()) p.then((c) => c.close(), () => {});
    this.conns.clear();
  }
}
