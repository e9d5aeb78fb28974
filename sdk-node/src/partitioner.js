// Kafka's murmur2 partitioner (docs/native-protocol.md section 9.5): a key
// lands on the partition a Kafka Java client would pick.

/** Kafka's murmur2 of key, as a signed 32-bit integer. */
export function murmur2(key) {
  const data = key instanceof Uint8Array ? key : Buffer.from(key);
  const m = 0x5bd1e995;
  const len = data.length;
  let h = (0x9747b28c ^ len) >>> 0;
  const whole = len & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const rest = len & 3;
  if (rest >= 3) h ^= data[whole + 2] << 16;
  if (rest >= 2) h ^= data[whole + 1] << 8;
  if (rest >= 1) {
    h ^= data[whole];
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition of a key among count partitions. */
export function partitionForKey(key, count) {
  return (murmur2(key) & 0x7fffffff) % count;
}
