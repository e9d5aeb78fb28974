// Snappy decompression for Kafka batches: raw Snappy, or the xerial framing
// Kafka's Java client writes (magic, version, then length-prefixed blocks).

const XERIAL = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);

function fail(why) {
  const e = new Error(`snappy: ${why}`);
  e.name = 'RecordsError';
  return e;
}

/** Decompresses one raw Snappy block. */
export function snappyRaw(src) {
  let pos = 0;
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    if (pos >= src.length || shift > 28) throw fail('bad length varint');
    const b = src[pos++];
    length += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) break;
  }
  if (length > 256 * 1024 * 1024) throw fail(`an uncompressed length of ${length} bytes is too large`);
  const out = Buffer.allocUnsafe(length);
  let o = 0;
  while (pos < src.length) {
    const tag = src[pos++];
    let len;
    let off;
    switch (tag & 3) {
      case 0: {
        len = tag >>> 2;
        if (len >= 60) {
          const n = len - 59;
          if (pos + n > src.length) throw fail('truncated literal length');
          len = 0;
          for (let i = 0; i < n; i++) len |= src[pos + i] << (8 * i);
          len >>>= 0;
          pos += n;
        }
        len += 1;
        if (pos + len > src.length || o + len > length) throw fail('literal overruns');
        src.copy(out, o, pos, pos + len);
        pos += len;
        o += len;
        continue;
      }
      case 1:
        if (pos + 1 > src.length) throw fail('truncated copy');
        len = 4 + ((tag >>> 2) & 7);
        off = ((tag >>> 5) << 8) | src[pos++];
        break;
      case 2:
        if (pos + 2 > src.length) throw fail('truncated copy');
        len = (tag >>> 2) + 1;
        off = src[pos] | (src[pos + 1] << 8);
        pos += 2;
        break;
      default:
        if (pos + 4 > src.length) throw fail('truncated copy');
        len = (tag >>> 2) + 1;
        off = src.readUInt32LE(pos);
        pos += 4;
    }
    if (off === 0 || off > o || o + len > length) throw fail('copy out of range');
    for (let i = 0; i < len; i++, o++) out[o] = out[o - off];
  }
  if (o !== length) throw fail(`${o} bytes decoded, ${length} announced`);
  return out;
}

/** Decompresses a Kafka snappy payload (xerial-framed or raw). */
export function snappyUncompress(src) {
  if (src.length >= 16 && src.subarray(0, 8).equals(XERIAL)) {
    const parts = [];
    let pos = 16;
    while (pos < src.length) {
      if (pos + 4 > src.length) throw fail('truncated xerial block length');
      const n = src.readUInt32BE(pos);
      pos += 4;
      if (pos + n > src.length) throw fail('xerial block overruns');
      parts.push(snappyRaw(src.subarray(pos, pos + n)));
      pos += n;
    }
    return Buffer.concat(parts);
  }
  return snappyRaw(src);
}
