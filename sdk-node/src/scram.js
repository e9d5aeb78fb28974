// SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802), as Kafka's SASL carries it.
import crypto from 'node:crypto';

const HASH = { 'SCRAM-SHA-256': ['sha256', 32], 'SCRAM-SHA-512': ['sha512', 64] };

function saslName(s) {
  return s.replace(/=/g, '=3D').replace(/,/g, '=2C');
}

function xor(a, b) {
  const out = Buffer.allocUnsafe(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] ^ b[i];
  return out;
}

/** One SCRAM exchange: first() → client-first; final(serverFirst) → client-final; verify(serverFinal). */
export class ScramClient {
  constructor(mechanism, user, password, nonce = crypto.randomBytes(18).toString('base64')) {
    const h = HASH[mechanism];
    if (!h) throw new Error(`${mechanism} is not SCRAM-SHA-256 or SCRAM-SHA-512`);
    [this.hash, this.keyLen] = h;
    this.user = user;
    this.password = password;
    this.nonce = nonce;
  }

  first() {
    this.firstBare = `n=${saslName(this.user)},r=${this.nonce}`;
    return Buffer.from(`n,,${this.firstBare}`);
  }

  final(serverFirst) {
    const text = Buffer.from(serverFirst).toString('utf8');
    const attrs = Object.fromEntries(text.split(',').map((kv) => [kv[0], kv.slice(2)]));
    if (attrs.e) throw new Error(`the server refused the login: ${attrs.e}`);
    if (!attrs.r || !attrs.r.startsWith(this.nonce) || !attrs.s || !attrs.i) {
      throw new Error('the server\'s SCRAM message is not a valid server-first message');
    }
    const iterations = Number(attrs.i);
    if (!Number.isInteger(iterations) || iterations < 1 || iterations > 10_000_000) {
      throw new Error(`the server asks for ${attrs.i} SCRAM iterations`);
    }
    const salted = crypto.pbkdf2Sync(this.password, Buffer.from(attrs.s, 'base64'), iterations, this.keyLen, this.hash);
    const clientKey = crypto.createHmac(this.hash, salted).update('Client Key').digest();
    const storedKey = crypto.createHash(this.hash).update(clientKey).digest();
    const finalNoProof = `c=biws,r=${attrs.r}`;
    const authMessage = `${this.firstBare},${text},${finalNoProof}`;
    const clientSig = crypto.createHmac(this.hash, storedKey).update(authMessage).digest();
    const serverKey = crypto.createHmac(this.hash, salted).update('Server Key').digest();
    this.expectedServerSig = crypto.createHmac(this.hash, serverKey).update(authMessage).digest('base64');
    return Buffer.from(`${finalNoProof},p=${xor(clientKey, clientSig).toString('base64')}`);
  }

  verify(serverFinal) {
    const text = Buffer.from(serverFinal).toString('utf8');
    if (text.startsWith('e=')) throw new Error(`the server refused the login: ${text.slice(2)}`);
    if (!text.startsWith('v=') || text.slice(2) !== this.expectedServerSig) {
      throw new Error('the server\'s SCRAM signature is wrong: it does not know the password (or is not the server)');
    }
  }
}
