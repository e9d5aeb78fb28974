// One TCP connection to a server: the hello, the login, then pipelined
// requests matched to their responses by correlation id (section 9.1).
import net from 'node:net';
import { encodeFrame, decodeHeader, decodeBody, HEADER_BYTES, OPS, PROTOCOL_VERSION, ProtocolError } from './codec.js';
import { AeroStreamError, ConnectionError, ErrorCode } from './errors.js';
import { ScramClient } from './scram.js';

export const MAX_IN_FLIGHT = 64;
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export class Connection {
  constructor(socket, { host, port, maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES, requestTimeoutMs = 30000 }) {
    this.socket = socket;
    this.host = host;
    this.port = port;
    this.address = `${host}:${port}`;
    this.maxResponseBytes = maxResponseBytes;
    this.requestTimeoutMs = requestTimeoutMs;
    this.pending = new Map();
    this.nextCorrelation = 1;
    this.waiters = []; // requests waiting for a slot among the 64 in flight
    this.closed = false;
    this.closeError = null;
    this.onClose = null;
    this.chunks = [];
    this.buffered = 0;
    this.header = null;
    this.nodeId = -1;
    this.maxFrameBytes = 65536;
    this.lastSent = Date.now();
    // a Ping on a connection quiet for 5 minutes keeps the server (idle
    // timeout 10 minutes by default) from closing it
    this.keepAlive = setInterval(() => {
      if (!this.closed && Date.now() - this.lastSent > 300_000) this.request(OPS.Ping, { nonce: 0n }).catch(() => {});
    }, 60_000);
    this.keepAlive.unref();
    socket.on('data', (d) => this.#onData(d));
    socket.on('error', (e) => this.#fail(new ConnectionError(`connection to ${this.address}: ${e.message}`, e)));
    socket.on('close', () => this.#fail(new ConnectionError(`connection to ${this.address} closed`)));
  }

  /** Connects, says hello and logs in. sasl: {mechanism, user, password} or undefined. */
  static async open({ host, port, clientId = 'aerostream-node', sasl, connectTimeoutMs = 10000, ...opts }) {
    const socket = await new Promise((resolve, reject) => {
      const s = net.connect({ host, port });
      const timer = setTimeout(() => { s.destroy(); reject(new ConnectionError(`connecting to ${host}:${port} timed out after ${connectTimeoutMs} ms`)); }, connectTimeoutMs);
      s.once('connect', () => { clearTimeout(timer); s.setNoDelay(true); resolve(s); });
      s.once('error', (e) => { clearTimeout(timer); reject(new ConnectionError(`connecting to ${host}:${port}: ${e.message}`, e)); });
    });
    const conn = new Connection(socket, { host, port, ...opts });
    try {
      await conn.#login(clientId, sasl, connectTimeoutMs);
    } catch (e) {
      conn.close();
      throw e;
    }
    return conn;
  }

  async #login(clientId, sasl, timeoutMs) {
    const mechanism = sasl?.mechanism ? sasl.mechanism.toUpperCase() : '';
    if (mechanism && !['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'].includes(mechanism)) {
      throw new AeroStreamError(0, `SASL mechanism ${sasl.mechanism} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`);
    }
    const plain = mechanism === 'PLAIN';
    const hello = await this.request(OPS.Hello, {
      min_version: PROTOCOL_VERSION, max_version: PROTOCOL_VERSION, client_id: clientId,
      auth_mechanism: plain ? 'PLAIN' : '',
      auth_bytes: plain ? Buffer.from(`\0${sasl.user ?? ''}\0${sasl.password ?? ''}`) : Buffer.alloc(0),
    }, { timeoutMs });
    if (hello.error !== 0) throw new AeroStreamError(hello.error, 'the server refused the hello');
    this.version = hello.version;
    this.nodeId = hello.node_id;
    this.maxFrameBytes = hello.max_frame_bytes;
    this.server = hello.server;
    if (mechanism.startsWith('SCRAM')) {
      const scram = new ScramClient(mechanism, sasl.user ?? '', sasl.password ?? '');
      const first = await this.request(OPS.Authenticate, { mechanism, auth_bytes: scram.first() }, { timeoutMs });
      const fin = await this.request(OPS.Authenticate, { mechanism, auth_bytes: scram.final(first.auth_bytes) }, { timeoutMs });
      scram.verify(fin.auth_bytes);
      if (!fin.complete) throw new AeroStreamError(ErrorCode.AUTHENTICATION_FAILED, 'the server did not complete the SCRAM exchange');
      this.sessionLifetimeMs = Number(fin.session_lifetime_ms);
    }
  }

  /**
   * Sends a request (op and value without correlation) and resolves with its
   * response's value. Rejects with AeroStreamError on an error frame, with
   * ConnectionError when the connection is lost or the request times out.
   * noResponse: resolve once written (Produce with acks 0).
   */
  async request(op, value, { timeoutMs = this.requestTimeoutMs, noResponse = false } = {}) {
    if (this.closed) throw this.closeError;
    if (this.pending.size >= MAX_IN_FLIGHT) {
      await new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
    }
    let correlation = this.nextCorrelation;
    this.nextCorrelation = this.nextCorrelation >= 0xffffffff ? 1 : this.nextCorrelation + 1;
    while (this.pending.has(correlation) || correlation === 0) correlation = (correlation % 0xffffffff) + 1;
    const frame = op === OPS.TxnProduce
      ? encodeFrame(op, { ...value, produce: { ...value.produce, correlation } })
      : encodeFrame(op, { ...value, correlation });
    if (frame.length - HEADER_BYTES > this.maxFrameBytes && op !== OPS.Hello) {
      this.#release();
      throw new AeroStreamError(ErrorCode.FRAME_TOO_LARGE, `a request of ${frame.length - HEADER_BYTES} bytes is over the server's limit of ${this.maxFrameBytes}`);
    }
    if (noResponse) {
      await new Promise((resolve, reject) => this.socket.write(frame, (e) => (e ? reject(new ConnectionError(e.message, e)) : resolve())));
      this.#release();
      return undefined;
    }
    return new Promise((resolve, reject) => {
      const timer = timeoutMs > 0 ? setTimeout(() => {
        this.pending.delete(correlation);
        this.#release();
        reject(new ConnectionError(`no answer from ${this.address} within ${timeoutMs} ms (op 0x${op.toString(16)}); the outcome is unknown`));
      }, timeoutMs) : null;
      this.pending.set(correlation, { op, resolve, reject, timer });
      this.lastSent = Date.now();
      this.socket.write(frame);
    });
  }

  #release() {
    const w = this.waiters.shift();
    if (w) w.resolve();
  }

  #onData(d) {
    this.chunks.push(d);
    this.buffered += d.length;
    for (;;) {
      if (!this.header) {
        if (this.buffered < HEADER_BYTES) return;
        const head = this.#take(HEADER_BYTES);
        try {
          this.header = decodeHeader(head, this.maxResponseBytes);
        } catch (e) {
          this.#fail(new ConnectionError(`refusing a frame from ${this.address}: ${e.message}`, e));
          return;
        }
      }
      if (this.buffered < this.header.length) return;
      const { op } = this.header;
      const body = this.#take(this.header.length);
      this.header = null;
      let value;
      try {
        value = decodeBody(op, body);
      } catch (e) {
        const why = e instanceof ProtocolError ? e.message : String(e);
        this.#fail(new ConnectionError(`refusing a frame (op 0x${op.toString(16)}) from ${this.address}: ${why}`, e));
        return;
      }
      if (op === OPS.ErrorFrame) {
        const err = new AeroStreamError(value.error, value.message);
        if (value.correlation !== 0) this.#settle(value.correlation, null, err);
        // the server closes the connection after an error frame: every other
        // request on it has an unknown outcome
        this.#fail(value.correlation === 0 ? err
          : new ConnectionError(`the connection to ${this.address} was closed after an error frame (${err.message})`));
        return;
      }
      if (op === OPS.Push) {
        this.onPush?.(value);
        continue;
      }
      const p = this.pending.get(value.correlation);
      if (p && p.op !== (op & 0x7f)) {
        this.#fail(new ConnectionError(`${this.address} answered op 0x${p.op.toString(16)} with op 0x${op.toString(16)}`));
        return;
      }
      this.#settle(value.correlation, value, null);
    }
  }

  #take(n) {
    if (this.chunks[0].length === n) { this.buffered -= n; return this.chunks.shift(); }
    if (this.chunks[0].length > n) {
      const c = this.chunks[0];
      this.chunks[0] = c.subarray(n);
      this.buffered -= n;
      return c.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let o = 0;
    while (o < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - o);
      c.copy(out, o, 0, k);
      o += k;
      if (k === c.length) this.chunks.shift(); else this.chunks[0] = c.subarray(k);
    }
    this.buffered -= n;
    return out;
  }

  #settle(correlation, value, err) {
    const p = this.pending.get(correlation);
    if (!p) return; // timed out already
    this.pending.delete(correlation);
    if (p.timer) clearTimeout(p.timer);
    this.#release();
    if (err) p.reject(err); else p.resolve(value);
  }

  #fail(err) {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    if (!this.closeError) this.closeError = err;
    const e = this.closeError;
    this.socket.destroy();
    for (const [, p] of this.pending) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(e);
    }
    this.pending.clear();
    for (const w of this.waiters.splice(0)) w.reject(e);
    this.onClose?.(e);
  }

  close() {
    this.#fail(new ConnectionError(`connection to ${this.address} closed by the client`));
  }
}
