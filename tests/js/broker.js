// Starts the real aerostream binary on free ports for kafkajs tests.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');

function binary() {
  if (process.env.AEROSTREAM_BIN) return process.env.AEROSTREAM_BIN;
  const target = process.env.CARGO_TARGET_DIR || path.join(__dirname, '..', '..', 'target');
  return path.join(target, 'debug', 'aerostream');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function healthy(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => { req.destroy(); resolve(false); });
  });
}

// Five distinct ports free a moment ago.
async function freePorts() {
  const ports = new Set();
  while (ports.size < 5) ports.add(await freePort());
  return [...ports];
}

// `extra`: more `serve` flags (TLS, SASL). Ports picked here were free a
// moment ago, but the kernel may hand one to another process's outgoing
// connection before the agent binds it: then it is started again on ports
// picked afresh (three tries).
async function startBroker(extra = []) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(extra);
    } catch (e) {
      if (attempt === 3 || !/Address already in use/.test(e.message)) throw e;
      console.log('aerostream could not bind a port picked for it; starting it again on other ports');
    }
  }
}

async function startOnce(extra) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aerostream-js-'));
  // the native listener takes TCP and UDP on one port: free ones, so two
  // brokers can run at once
  const [port, httpPort, nativePort, registryPort, connectPort] = await freePorts();
  const log = fs.openSync(path.join(dir, 'broker.log'), 'a');
  const proc = spawn(binary(), [
    'serve', '--data-dir', path.join(dir, 'data'),
    '--kafka-addr', `127.0.0.1:${port}`, '--http-addr', `127.0.0.1:${httpPort}`,
    '--native-addr', `127.0.0.1:${nativePort}`,
    '--schema-registry-addr', `127.0.0.1:${registryPort}`,
    '--connect-addr', `127.0.0.1:${connectPort}`,
    '--shards', '2', '--group-initial-rebalance-delay-ms', '500',
    ...extra,
  ], { stdio: ['ignore', log, log] });
  let exited = null;
  proc.on('exit', (code) => { exited = code; });
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (exited !== null) throw new Error(`aerostream exited with ${exited}: ${fs.readFileSync(path.join(dir, 'broker.log'), 'utf8')}`);
    if (await healthy(httpPort)) {
      return {
        bootstrap: `127.0.0.1:${port}`,
        http: `http://127.0.0.1:${httpPort}`,
        registry: `http://127.0.0.1:${registryPort}`,
        connect: `http://127.0.0.1:${connectPort}`,
        stop: () => new Promise((resolve) => {
          if (exited !== null) return resolve(exited);
          proc.on('exit', (code) => resolve(code));
          proc.kill('SIGTERM');
        }),
      };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGKILL');
  throw new Error('aerostream did not become ready');
}

module.exports = { startBroker, binary, freePort };
