// A strict JSON parser that keeps integers exact: an integer beyond
// Number.MAX_SAFE_INTEGER becomes a BigInt (the corpus' u64 values).
import { layoutOf } from '../src/codec.js';

export function parseExact(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const o = {};
      ws();
      if (text[i] === '}') { i++; return o; }
      for (;;) {
        ws();
        const k = value();
        ws();
        if (text[i++] !== ':') throw new SyntaxError(`expected : at ${i}`);
        o[k] = value();
        ws();
        const d = text[i++];
        if (d === '}') return o;
        if (d !== ',') throw new SyntaxError(`expected , or } at ${i}`);
      }
    }
    if (c === '[') {
      i++;
      const a = [];
      ws();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value());
        ws();
        const d = text[i++];
        if (d === ']') return a;
        if (d !== ',') throw new SyntaxError(`expected , or ] at ${i}`);
      }
    }
    if (c === '"') {
      const start = i;
      i++;
      while (text[i] !== '"') { if (text[i] === '\\') i++; i++; }
      i++;
      return JSON.parse(text.slice(start, i));
    }
    const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?|^true|^false|^null/.exec(text.slice(i, i + 400));
    if (!m) throw new SyntaxError(`unexpected ${c} at ${i}`);
    i += m[0].length;
    if (m[0] === 'true') return true;
    if (m[0] === 'false') return false;
    if (m[0] === 'null') return null;
    if (m[1] || m[2]) return Number(m[0]);
    const n = Number(m[0]);
    return Number.isSafeInteger(n) ? n : BigInt(m[0]);
  };
  const v = value();
  ws();
  if (i !== text.length) throw new SyntaxError('trailing characters');
  return v;
}

// corpus JSON value <-> codec value, walking the operation's layout
function fromJson(t, v) {
  if (typeof t === 'string') {
    if (t === 'u64' || t === 'i64') return BigInt(v);
    if (t === 'bytes') return Buffer.from(v, 'hex');
    if (t === 'offsetCommitted') return [{ ...v[0], offset: BigInt(v[0].offset) }, v[1]];
    return v;
  }
  if (t.arr) return v.map((x) => fromJson(t.arr, x));
  if (t.tuple) return t.tuple.map((x, i) => fromJson(x, v[i]));
  if (t.struct) return fieldsFromJson(t.struct, v);
  throw new Error('unknown type');
}
function fieldsFromJson(fields, v) {
  const o = {};
  for (const [name, t] of fields) o[name] = fromJson(t, v[name]);
  return o;
}

export function valueFromJson(op, v) {
  if (op === 0x1b) {
    const flat = fieldsFromJson(layoutOf(op), { transactional_id: v.transactional_id, ...v.produce });
    const { transactional_id, ...produce } = flat;
    return { transactional_id, produce };
  }
  return fieldsFromJson(layoutOf(op), v);
}

/** A decoded value in the corpus' JSON form (hex bytes, exact integers). */
export function toJsonForm(v) {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) && BigInt(Number(v)) === v ? Number(v) : v;
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(toJsonForm);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toJsonForm(x)]));
  return v;
}
