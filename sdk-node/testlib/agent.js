// Starts an AeroStream agent for tests: $AEROSTREAM_BIN on free ports of
// 127.0.0.1 with a data folder of its own, stopped when the test ends.
import { spawn } from 'node:child_process';
import net from 'node:net';
import dgram from 'node:dgram';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BIN = process.env.AEROSTREAM_BIN || '';
export const SKIP = BIN ? false : 'AEROSTREAM_BIN is unset: set it to an aerostream binary (cargo build -p agent --bin aerostream) to run the tests against a real agent';

async function tcpFree() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}
async function udpFree(port) {
  return new Promise((resolve) => {
    const u = dgram.createSocket('udp4');
    u.once('error', () => { u.close(); resolve(false); });
    u.bind(port, '127.0.0.1', () => u.close(() => resolve(true)));
  });
}

/** n ports free for TCP and UDP (the native listener uses both). */
export async function freePorts(n) {
  const out = new Set();
  for (let tries = 0; out.size < n && tries < 1000; tries++) {
    const p = await tcpFree();
    if (await udpFree(p)) out.add(p);
  }
  if (out.size < n) throw new Error('no free ports');
  return [...out];
}

/**
 * Starts an agent with extra serve arguments; t is the node:test context
 * (the agent stops when it ends). Resolves with {native, bootstrap, kafka, dataDir, log()}.
 */
export async function startAgent(t, args = []) {
  const [nativePort, kafkaPort, httpPort] = await freePorts(3);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aerostream-node-test-'));
  const a = {
    native: `127.0.0.1:${nativePort}`, kafka: `127.0.0.1:${kafkaPort}`, http: `127.0.0.1:${httpPort}`,
    dataDir: path.join(dir, 'data'), logText: '',
  };
  a.bootstrap = `aero://${a.native}`;
  const proc = spawn(BIN, ['serve',
    '--data-dir', a.dataDir, '--native-addr', a.native, '--kafka-addr', a.kafka, '--http-addr', a.http,
    '--shards', '2', '--group-initial-rebalance-delay-ms', '200',
    '--schema-registry-addr', 'off', '--connect-addr', 'off', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const onLog = (d) => { a.logText = (a.logText + d.toString()).slice(-200_000); };
  proc.stdout.on('data', onLog);
  proc.stderr.on('data', onLog);
  let exited = null;
  // never outlive the test process, even when it is killed mid-test
  const killOnExit = () => { if (!exited) proc.kill('SIGKILL'); };
  process.once('exit', killOnExit);
  const exit = new Promise((resolve) => proc.once('exit', (code, sig) => { exited = `code ${code}, signal ${sig}`; resolve(); }));
  const tail = () => a.logText.split('\n').slice(-40).join('\n');
  a.log = tail;
  t.after(async () => {
    if (!exited) {
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15000);
      await exit;
      clearTimeout(timer);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (exited) throw new Error(`the agent exited (${exited}); its log:\n${tail()}`);
    try {
      const res = await fetch(`http://${a.http}/health`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200 && a.logText.includes('aerostream listening')) return a;
    } catch { /* not yet */ }
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error(`the agent does not serve after 90 s; its log:\n${tail()}`); }
    await new Promise((r) => setTimeout(r, 100));
  }
}
