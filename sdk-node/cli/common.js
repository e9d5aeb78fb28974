// What the commands share: flag parsing and the connection flags.
import { connect } from '../index.js';

export const CONN_HELP = `Connection:
  --bootstrap URL         aero://HOST:PORT (or aero://h1:9091,h2:9091); the Node SDK speaks TCP only
  --sasl-mechanism M      log in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
  --user NAME             user name of the login
  --password P            password of the login (default $AEROSTREAM_PASSWORD)`;

/** Parses --flag value / --flag=value / --bool; spec: {name: 'string'|'bool'}. */
export function parseFlags(argv, spec, help) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (a === '-h' || a === '--help') { process.stdout.write(help); process.exit(0); }
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    a = a.slice(2);
    let value;
    const eq = a.indexOf('=');
    if (eq >= 0) { value = a.slice(eq + 1); a = a.slice(0, eq); }
    const kind = spec[a];
    if (!kind) throw new Error(`unknown flag --${a} (see --help)`);
    if (kind === 'bool') { out[a] = value === undefined ? true : value !== 'false'; continue; }
    if (value === undefined) {
      if (i + 1 >= argv.length) throw new Error(`--${a} needs a value`);
      value = argv[++i];
    }
    out[a] = value;
  }
  return out;
}

export const CONN_FLAGS = { bootstrap: 'string', 'sasl-mechanism': 'string', user: 'string', password: 'string', 'tls-ca': 'string', insecure: 'bool' };

export async function connectFromFlags(f, clientId) {
  if (!f.bootstrap) throw new Error('--bootstrap is required, e.g. --bootstrap aero://127.0.0.1:9091');
  if (f.bootstrap.startsWith('aero+quic://')) {
    throw new Error('aero+quic:// is not supported: the Node SDK speaks the native protocol over TCP only (Node has no QUIC); use aero://HOST:PORT');
  }
  if (f['tls-ca'] || f.insecure) throw new Error('--tls-ca and --insecure apply to aero+quic://, which the Node SDK does not speak: aero:// is plain TCP');
  const password = f.password ?? process.env.AEROSTREAM_PASSWORD ?? '';
  const sasl = f['sasl-mechanism'] ? { mechanism: f['sasl-mechanism'], user: f.user ?? '', password } : undefined;
  return connect(f.bootstrap, { clientId, sasl });
}

export function main(fn) {
  fn().then((code) => { process.exitCode = code ?? 0; }, (e) => {
    process.stderr.write(`${process.argv[1].split('/').pop().replace(/\.js$/, '')}: ${e.message}\n`);
    process.exitCode = 1;
  });
}
