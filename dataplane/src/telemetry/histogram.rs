//! A latency histogram cheap enough for the shard hot path.
//!
//! Recording is two relaxed atomic adds and one increment, into one of
//! several stripes picked per thread, so shards recording at the same time
//! do not fight over one cache line. Nothing is locked or allocated per
//! record. A scrape sums the stripes: a scrape racing a record may see the
//! count before the sum moved (or the other way round), which Prometheus
//! tolerates as it does for any counter pair read at slightly different
//! moments.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds: 50µs to 10s, so sub-millisecond
/// appends and long-poll fetches that wait seconds both land in a bucket of
/// their own.
pub const BOUNDS_MICROS: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

const BUCKETS: usize = BOUNDS_MICROS.len() + 1;
const STRIPES: usize = 8;

#[repr(align(128))]
#[derive(Default)]
struct Stripe {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
}

/// A Prometheus histogram of durations, in seconds.
pub struct LatencyHistogram {
    stripes: [Stripe; STRIPES],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            stripes: std::array::from_fn(|_| Stripe::default()),
        }
    }
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.snapshot();
        f.debug_struct("LatencyHistogram")
            .field("count", &s.count())
            .finish()
    }
}

/// The stripe of the calling thread, handed out round-robin on first use.
fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|m| {
        let i = m.get();
        if i != usize::MAX {
            return i;
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        m.set(i);
        i
    })
}

/// The stripes summed at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    pub buckets: [u64; BUCKETS],
    pub sum_micros: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

impl LatencyHistogram {
    /// Counts one duration.
    pub fn record(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_MICROS.partition_point(|&b| b < micros);
        let s = &self.stripes[stripe_index()];
        s.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        s.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut out = HistogramSnapshot::default();
        for s in &self.stripes {
            for (o, b) in out.buckets.iter_mut().zip(&s.buckets) {
                *o += b.load(Ordering::Relaxed);
            }
            out.sum_micros += s.sum_micros.load(Ordering::Relaxed);
        }
        out
    }

    /// Appends the histogram in Prometheus text (`NAME_bucket`, `NAME_sum`,
    /// `NAME_count`).
    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        let s = self.snapshot();
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} histogram\n");
        let mut cumulative = 0;
        for (i, n) in s.buckets.iter().enumerate() {
            cumulative += n;
            match BOUNDS_MICROS.get(i) {
                Some(b) => {
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{le=\"{}\"}} {cumulative}",
                        *b as f64 / 1e6
                    );
                }
                None => {
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
                }
            }
        }
        let _ = writeln!(out, "{name}_sum {}", s.sum_micros as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_whose_bound_holds_them() {
        let h = LatencyHistogram::default();
        h.record(Duration::from_micros(50));
        h.record(Duration::from_micros(51));
        h.record(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!(s.buckets[0], 1);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[BUCKETS - 1], 1);
        assert_eq!(s.count(), 3);
    }

    #[test]
    fn rendered_buckets_are_cumulative_and_end_at_the_count() {
        let h = LatencyHistogram::default();
        for ms in [0, 1, 3, 30, 3000] {
            h.record(Duration::from_millis(ms));
        }
        let mut text = String::new();
        h.render(&mut text, "x_seconds", "help");
        assert!(text.contains("# TYPE x_seconds histogram\n"));
        assert!(
            text.contains("x_seconds_bucket{le=\"0.001\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("x_seconds_bucket{le=\"0.05\"} 4\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{le=\"+Inf\"} 5\n"), "{text}");
        assert!(text.contains("x_seconds_count 5\n"), "{text}");
        assert!(text.contains("x_seconds_sum 3.034\n"), "{text}");
    }

    #[test]
    fn records_from_many_threads_all_count() {
        let h = std::sync::Arc::new(LatencyHistogram::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        h.record(Duration::from_micros(300));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(h.snapshot().count(), 4000);
    }
}
