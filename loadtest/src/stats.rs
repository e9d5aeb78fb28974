//! Latency histograms (HDR, microsecond resolution) and the percentile
//! summary that goes into reports.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency tracked exactly: one hour. Larger values are clamped.
const HIGHEST_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits.
#[derive(Debug, Clone)]
pub struct LatencyHist(Histogram<u64>);

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist::new()
    }
}

impl LatencyHist {
    pub fn new() -> LatencyHist {
        // Bounds are constants that HdrHistogram accepts (1 <= low,
        // high >= 2 * low, sigfig <= 5), so creation cannot fail.
        #[allow(clippy::expect_used)]
        let h = Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("constant histogram bounds");
        LatencyHist(h)
    }

    pub fn record_us(&mut self, us: u64) {
        self.0.saturating_record(us.max(1));
    }

    /// Adds every sample of `other`. Both share bounds, so this cannot fail.
    pub fn merge(&mut self, other: &LatencyHist) {
        let _ = self.0.add(&other.0);
    }

    /// Returns the samples so far and leaves this histogram empty.
    pub fn take(&mut self) -> LatencyHist {
        let out = self.clone();
        self.0.reset();
        out
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn ms_at(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    /// The 99th percentile in milliseconds (0 when empty).
    pub fn p99_ms(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.ms_at(0.99)
        }
    }

    pub fn summary(&self) -> Percentiles {
        if self.0.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: self.0.len(),
            mean_ms: self.0.mean() / 1000.0,
            p50_ms: self.ms_at(0.50),
            p75_ms: self.ms_at(0.75),
            p95_ms: self.ms_at(0.95),
            p99_ms: self.ms_at(0.99),
            p999_ms: self.ms_at(0.999),
            p9999_ms: self.ms_at(0.9999),
            max_ms: self.0.max() as f64 / 1000.0,
        }
    }
}

/// A latency distribution as reported (milliseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_recorded_distribution() {
        let mut h = LatencyHist::new();
        for us in 1..=10_000u64 {
            h.record_us(us);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert!((s.p50_ms - 5.0).abs() < 0.01, "{s:?}");
        assert!((s.p99_ms - 9.9).abs() < 0.01, "{s:?}");
        assert!((s.max_ms - 10.0).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn merging_windows_equals_recording_into_one() {
        let mut a = LatencyHist::new();
        let mut b = LatencyHist::new();
        let mut all = LatencyHist::new();
        for us in 0..5000u64 {
            let v = us * 37 % 20_000;
            if us % 2 == 0 {
                a.record_us(v)
            } else {
                b.record_us(v)
            }
            all.record_us(v);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
    }

    #[test]
    fn take_hands_over_the_window_and_starts_empty() {
        let mut h = LatencyHist::new();
        h.record_us(1500);
        let w = h.take();
        assert_eq!(w.len(), 1);
        assert!(h.is_empty());
        assert_eq!(h.summary(), Percentiles::default());
    }

    #[test]
    fn latencies_beyond_an_hour_are_clamped_not_dropped() {
        let mut h = LatencyHist::new();
        h.record_us(u64::MAX);
        assert_eq!(h.len(), 1);
        assert!(h.summary().max_ms >= 3_599_000.0);
    }
}
