//! Exponential backoff between attempts: reconnects, retried batches,
//! fetches of a failing partition.

use std::time::Duration;

use rand::Rng;

/// Delays that double from `initial` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The delay before attempt `failures + 1`, after `failures` failures
    /// in a row: `initial`, twice that, … up to `max`; zero after none.
    pub(crate) fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (failures - 1).min(31);
        self.initial
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// [`Backoff::delay`] spread by ±20%, so that clients that failed
    /// together do not all come back in the same instant.
    pub(crate) fn jittered(&self, failures: u32) -> Duration {
        self.delay(failures)
            .mul_f64(rand::thread_rng().gen_range(0.8..1.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_initial_one_up_to_the_cap() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        };
        let ms: Vec<u128> = (0..9).map(|f| b.delay(f).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(5));
        for f in 1..10 {
            let d = b.jittered(f);
            assert!(d >= b.delay(f).mul_f64(0.8) && d <= b.delay(f).mul_f64(1.2));
        }
    }
}
