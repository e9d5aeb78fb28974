//! Which requests get a trace span.
//!
//! Spans are made only for sampled requests: with tracing export off (the
//! default) the ratio is zero and [`sampled`] is one relaxed load and a
//! branch, so the hot path creates, allocates and records nothing. When on,
//! each thread draws from its own xorshift generator (no shared state, no
//! syscall), and a request is sampled with the configured probability.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A request is sampled when its draw is at most this; 0 means never.
static THRESHOLD: AtomicU64 = AtomicU64::new(0);

/// The `tracing` target of every span meant for export; the exporter's
/// layer listens to this target alone.
pub const SPAN_TARGET: &str = "aerostream_otel";

/// Samples `ratio` of requests from now on (clamped to 0..=1; 0 turns span
/// creation off).
pub fn set_sample_ratio(ratio: f64) {
    let r = if ratio.is_nan() {
        0.0
    } else {
        ratio.clamp(0.0, 1.0)
    };
    let t = if r >= 1.0 {
        u64::MAX
    } else {
        // the float product is below 2^64, so the cast does not saturate
        (r * u64::MAX as f64) as u64
    };
    THRESHOLD.store(t, Ordering::Relaxed);
}

/// Whether the request being served now gets a span.
#[inline]
pub fn sampled() -> bool {
    let t = THRESHOLD.load(Ordering::Relaxed);
    t != 0 && draw() <= t
}

fn draw() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().build_hasher().finish() | 1,
        );
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test, since the ratio is process-wide.
    #[test]
    fn the_ratio_decides_how_many_requests_get_a_span() {
        set_sample_ratio(0.0);
        assert!((0..10_000).all(|_| !sampled()));
        set_sample_ratio(1.0);
        assert!((0..10_000).all(|_| sampled()));
        set_sample_ratio(0.1);
        let n = (0..100_000).filter(|_| sampled()).count();
        assert!((8_000..12_000).contains(&n), "{n} of 100000 sampled at 0.1");
        set_sample_ratio(0.0);
    }
}
