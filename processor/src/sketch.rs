//! Approximate aggregates that merge across panes and go into checkpoints:
//! distinct counts (HyperLogLog++, `hyperloglogplus`) and quantiles
//! (DDSketch, `sketches-ddsketch`).
//!
//! Distinct values are counted by a stable 64-bit hash of their text
//! (xxHash64), so a checkpoint taken by one build counts on in the next.

use std::hash::{BuildHasher, Hasher};

use hyperloglogplus::{HyperLogLog, HyperLogLogPlus};
use serde::{Deserialize, Serialize};
use sketches_ddsketch::{Config, DDSketch};

/// Registers 2^12: about 1.6% standard error, at most 3 KiB a sketch
/// (much less while few values have been seen).
const PRECISION: u8 = 12;

/// The hash a distinct value is counted by.
pub fn hash(text: &str) -> u64 {
    twox_hash::XxHash64::oneshot(0, text.as_bytes())
}

/// Hands the already-hashed value to the sketch as it is.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PassThrough;

/// The hasher [`PassThrough`] builds.
pub struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // only u64 values are inserted; anything else is folded in
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
}

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;

    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

/// An approximate distinct count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Distinct(HyperLogLogPlus<u64, PassThrough>);

impl Default for Distinct {
    fn default() -> Distinct {
        Distinct(
            HyperLogLogPlus::new(PRECISION, PassThrough)
                .expect("12 is within HyperLogLog++'s precisions (4 to 18)"),
        )
    }
}

impl Distinct {
    pub fn insert(&mut self, hash: u64) {
        self.0.insert(&hash);
    }

    pub fn merge(&mut self, other: &Distinct) {
        // both sketches have PRECISION: merging cannot fail
        if let Err(e) = self.0.merge(&other.0) {
            tracing::error!("cannot merge distinct counts: {e}");
        }
    }

    /// The estimated number of distinct values.
    pub fn estimate(&self) -> i64 {
        // counting caches in the sketch; a copy keeps this read-only
        self.0.clone().count().round() as i64
    }
}

impl PartialEq for Distinct {
    fn eq(&self, other: &Distinct) -> bool {
        self.estimate() == other.estimate()
    }
}

/// Approximate quantiles of a numeric field.
#[derive(Clone, Serialize, Deserialize)]
pub struct Quantiles(DDSketch);

impl Default for Quantiles {
    fn default() -> Quantiles {
        // 1% relative accuracy, up to 2048 bins
        Quantiles(DDSketch::new(Config::defaults()))
    }
}

impl Quantiles {
    pub fn add(&mut self, v: f64) {
        if v.is_finite() {
            self.0.add(v);
        }
    }

    pub fn merge(&mut self, other: &Quantiles) {
        // both sketches have the default configuration: merging cannot fail
        if let Err(e) = self.0.merge(&other.0) {
            tracing::error!("cannot merge quantile sketches: {e}");
        }
    }

    /// The `q`-quantile; none without values.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.0.quantile(q).ok().flatten()
    }

    pub fn count(&self) -> usize {
        self.0.count()
    }
}

impl std::fmt::Debug for Quantiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quantiles")
            .field("count", &self.0.count())
            .field("median", &self.quantile(0.5))
            .finish()
    }
}

impl PartialEq for Quantiles {
    fn eq(&self, other: &Quantiles) -> bool {
        self.count() == other.count()
            && [0.0, 0.5, 0.99, 1.0]
                .iter()
                .all(|q| self.quantile(*q) == other.quantile(*q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_counts_are_close_and_merge_like_a_union() {
        let mut a = Distinct::default();
        let mut b = Distinct::default();
        for i in 0..20_000 {
            a.insert(hash(&format!("user-{i}")));
            // b: 10,000 to 29,999: half of it overlaps a
            b.insert(hash(&format!("user-{}", i + 10_000)));
        }
        let near = |got: i64, want: f64| (got as f64 - want).abs() / want < 0.05;
        assert!(near(a.estimate(), 20_000.0), "{}", a.estimate());
        a.merge(&b);
        assert!(near(a.estimate(), 30_000.0), "{}", a.estimate());
        // a checkpoint round trip keeps the count
        let back: Distinct = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back.estimate(), a.estimate());
        let mut small = Distinct::default();
        for v in ["a", "b", "a", "c"] {
            small.insert(hash(v));
        }
        assert_eq!(small.estimate(), 3, "small counts are exact");
    }

    #[test]
    fn quantiles_are_within_one_percent_and_merge() {
        let mut a = Quantiles::default();
        let mut b = Quantiles::default();
        for i in 1..=10_000 {
            let v = f64::from(i);
            if i % 2 == 0 {
                a.add(v);
            } else {
                b.add(v);
            }
        }
        a.merge(&b);
        assert_eq!(a.count(), 10_000);
        for (q, want) in [(0.5, 5_000.0), (0.99, 9_900.0)] {
            let got = a.quantile(q).unwrap();
            assert!((got - want).abs() / want <= 0.011, "q{q}: {got}");
        }
        let back: Quantiles = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        assert_eq!(Quantiles::default().quantile(0.5), None);
    }
}
