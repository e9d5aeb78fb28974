//! Which partition a record goes to: Kafka's default partitioner.
//!
//! A keyed record goes where the Java Kafka client's default partitioner
//! puts it, `murmur2(key) & 0x7fffffff` modulo the partition count, so
//! producers of both protocols agree on a key's partition. (librdkafka's
//! default, `consistent_random`, hashes with CRC-32 and disagrees; its
//! `murmur2_random` agrees.)
//!
//! Keyless records stick to one partition until about a batch's worth of
//! bytes went there, then move to the next partition (Kafka's "uniform
//! sticky" partitioner, KIP-794): batches fill up instead of every record
//! opening a batch of its own.

use std::collections::HashMap;

/// Kafka's `Utils.murmur2`: MurmurHash2, 32 bits, seed `0x9747b28c`,
/// reading the key in little-endian 4-byte words.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java's int arithmetic wraps; so does this.
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record among `partitions` partitions, as the
/// Java client computes it.
///
/// ```
/// // murmur2("foobar") = -790332482, & 0x7fffffff = 1357151166
/// assert_eq!(sdk::partitioner::partition_for_key(b"foobar", 12), 1_357_151_166 % 12);
/// ```
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as u32;
    positive % partitions.max(1)
}

/// Chooses partitions for keyless records: sticky for about `batch_bytes`
/// bytes per topic, then the next partition.
#[derive(Debug)]
pub(crate) struct StickyPartitioner {
    batch_bytes: usize,
    /// Looked up once per keyless record: a fast hasher.
    topics: HashMap<String, Sticky, foldhash::fast::RandomState>,
}

#[derive(Debug, Clone, Copy)]
struct Sticky {
    partition: u32,
    bytes: usize,
}

impl StickyPartitioner {
    pub(crate) fn new(batch_bytes: usize) -> StickyPartitioner {
        StickyPartitioner {
            batch_bytes: batch_bytes.max(1),
            topics: HashMap::default(),
        }
    }

    /// The partition for a keyless record of `size` bytes. `available`
    /// says whether a partition has a leader now; partitions without one
    /// are passed over while any has one. `start` is where a topic's first
    /// choice begins (random, so that producers spread out).
    pub(crate) fn partition(
        &mut self,
        topic: &str,
        partitions: u32,
        size: usize,
        available: impl Fn(u32) -> bool,
        start: impl FnOnce() -> u32,
    ) -> u32 {
        let partitions = partitions.max(1);
        let next_available = |from: u32| {
            (0..partitions)
                .map(|i| (from + i) % partitions)
                .find(|&p| available(p))
                .unwrap_or(from % partitions)
        };
        let sticky = match self.topics.get_mut(topic) {
            Some(s) => s,
            None => self.topics.entry(topic.to_owned()).or_insert(Sticky {
                partition: next_available(start() % partitions),
                bytes: 0,
            }),
        };
        if sticky.bytes >= self.batch_bytes
            || sticky.partition >= partitions
            || !available(sticky.partition)
        {
            let moved_on = sticky.bytes >= self.batch_bytes;
            let from = if moved_on {
                sticky.partition + 1
            } else {
                sticky.partition
            };
            sticky.partition = next_available(from % partitions);
            sticky.bytes = 0;
        }
        sticky.bytes += size;
        sticky.partition
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_utils_test_vectors() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), *want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn murmur2_of_the_empty_key_is_the_java_value() {
        // Java: h = seed ^ 0, no words, no tail; then the final mix.
        let mut h: u32 = 0x9747_b28c;
        h ^= h >> 13;
        h = h.wrapping_mul(0x5bd1_e995);
        h ^= h >> 15;
        assert_eq!(murmur2(b""), h as i32);
        assert_eq!(murmur2(b""), 275_646_681);
    }

    #[test]
    fn a_key_lands_where_the_java_client_puts_it() {
        // toPositive(murmur2("foobar")) = -790332482 & 0x7fffffff = 1357151166
        assert_eq!(partition_for_key(b"foobar", 12), 1_357_151_166 % 12);
        assert_eq!(partition_for_key(b"abc", 7), 479_470_107 % 7);
        // toPositive of a negative hash: -58897971 & 0x7fffffff = 2088585677
        assert_eq!(
            partition_for_key(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 100),
            77
        );
        assert_eq!(partition_for_key(b"anything", 1), 0);
    }

    #[test]
    fn keyless_records_stick_for_a_batch_then_move_to_the_next_partition() {
        let mut p = StickyPartitioner::new(100);
        let picks: Vec<u32> = (0..7)
            .map(|_| p.partition("t", 3, 40, |_| true, || 1))
            .collect();
        // 40 + 40 + 40 reaches 100 after the third record.
        assert_eq!(picks, vec![1, 1, 1, 2, 2, 2, 0]);
    }

    #[test]
    fn keyless_records_pass_over_partitions_without_a_leader() {
        let mut p = StickyPartitioner::new(10);
        let first = p.partition("t", 4, 1, |q| q != 2, || 2);
        assert_eq!(first, 3);
        assert_eq!(p.partition("t", 4, 1, |q| q != 3, || 0), 0);
        // With no leader anywhere, records still get a partition.
        assert_eq!(p.partition("u", 2, 1, |_| false, || 5), 1);
    }
}
