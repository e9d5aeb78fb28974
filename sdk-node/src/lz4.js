// LZ4 frame decompression (the LZ4 frame format Kafka batches use).

function fail(why) {
  const e = new Error(`lz4: ${why}`);
  e.name = 'RecordsError';
  return e;
}

function block(src, start, end, out) {
  let pos = start;
  while (pos < end) {
    const token = src[pos++];
    let lit = token >>> 4;
    if (lit === 15) {
      let b;
      do { if (pos >= end) throw fail('truncated literal length'); b = src[pos++]; lit += b; } while (b === 255);
    }
    if (pos + lit > end) throw fail('literals overrun the block');
    out.push(src.subarray(pos, pos + lit));
    pos += lit;
    if (pos >= end) break; // the last sequence has literals only
    if (pos + 2 > end) throw fail('truncated match offset');
    const off = src[pos] | (src[pos + 1] << 8);
    pos += 2;
    let len = token & 15;
    if (len === 15) {
      let b;
      do { if (pos >= end) throw fail('truncated match length'); b = src[pos++]; len += b; } while (b === 255);
    }
    len += 4;
    out.copyMatch(off, len);
  }
}

class Out {
  constructor() { this.buf = Buffer.allocUnsafe(64 * 1024); this.n = 0; }
  room(k) {
    if (this.n + k <= this.buf.length) return;
    if (this.n + k > 256 * 1024 * 1024) throw fail('uncompressed data over 256 MiB');
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
    const b = Buffer.allocUnsafe(size);
    this.buf.copy(b, 0, 0, this.n);
    this.buf = b;
  }
  push(bytes) { this.room(bytes.length); bytes.copy(this.buf, this.n); this.n += bytes.length; }
  copyMatch(off, len) {
    if (off === 0 || off > this.n) throw fail('match offset out of range');
    this.room(len);
    const b = this.buf;
    for (let i = 0; i < len; i++, this.n++) b[this.n] = b[this.n - off];
  }
}

/** Decompresses an LZ4 frame. */
export function lz4FrameUncompress(src) {
  if (src.length < 7 || src.readUInt32LE(0) !== 0x184d2204) throw fail('not an LZ4 frame');
  const flg = src[4];
  let pos = 6 + (flg & 0x08 ? 8 : 0) + (flg & 0x01 ? 4 : 0) + 1; // FLG BD [size] [dict] HC
  const blockChecksum = (flg & 0x10) !== 0;
  const out = new Out();
  for (;;) {
    if (pos + 4 > src.length) throw fail('truncated block size');
    const word = src.readUInt32LE(pos);
    pos += 4;
    if (word === 0) break;
    const size = word & 0x7fffffff;
    if (pos + size > src.length) throw fail('block overruns the frame');
    if (word & 0x80000000) out.push(src.subarray(pos, pos + size));
    else block(src, pos, pos + size, out);
    pos += size + (blockChecksum ? 4 : 0);
  }
  return out.buf.subarray(0, out.n);
}
