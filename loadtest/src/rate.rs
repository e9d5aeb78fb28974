//! Pacing: when each message is due, and (for `rate: max`) what rate to
//! offer next. Both are pure: the caller passes the time in.

/// Spreads one producer's messages evenly in time.
///
/// Message `k` is due at `base_ns + (k - base_count) / rate`. A producer
/// that falls behind sends the overdue messages back to back (the rate is
/// an offered rate; the lateness shows up as publish delay, as in the
/// OpenMessaging Benchmark), so the offered load does not silently drop
/// when the client stalls.
#[derive(Debug, Clone)]
pub struct Pacer {
    base_ns: u64,
    base_count: u64,
    rate: f64,
}

impl Pacer {
    /// A pacer whose first message is due at `start_ns`; `rate` in msg/s.
    pub fn new(start_ns: u64, rate: f64) -> Pacer {
        Pacer {
            base_ns: start_ns,
            base_count: 0,
            rate: rate.max(f64::MIN_POSITIVE),
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// How many messages (counted from the first) are due at `now_ns`.
    pub fn due(&self, now_ns: u64) -> u64 {
        if now_ns < self.base_ns {
            return self.base_count;
        }
        let elapsed = (now_ns - self.base_ns) as f64 / 1e9;
        self.base_count + (elapsed * self.rate).floor() as u64 + 1
    }

    /// When message `k` is due (the time it should have been sent).
    pub fn intended_ns(&self, k: u64) -> u64 {
        let steps = k.saturating_sub(self.base_count) as f64;
        self.base_ns + (steps * 1e9 / self.rate) as u64
    }

    /// Changes the rate from `now_ns` on: message `next` becomes due now.
    /// Any backlog of overdue messages is forgiven; the new rate applies to
    /// what follows.
    pub fn set_rate(&mut self, now_ns: u64, next: u64, rate: f64) {
        self.base_ns = now_ns;
        self.base_count = next;
        self.rate = rate.max(f64::MIN_POSITIVE);
    }
}

/// What happened during one control window, summed over all clients.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    /// Length of the window in seconds.
    pub window_s: f64,
    /// Messages handed to the client in the window.
    pub sent: u64,
    /// Messages acknowledged in the window.
    pub acked: u64,
    /// Distinct messages consumed in the window.
    pub received: u64,
    /// Sent but not yet acknowledged (or failed), averaged over the window.
    pub unacked: u64,
    /// Acknowledged but not yet consumed, averaged over the window. (An
    /// average, not a point sample: a broker whose fetches answer in cycles
    /// has a backlog that saw-tooths within each cycle.)
    pub backlog: u64,
    /// Sends the client refused in the window because its queue was full.
    pub refused: u64,
}

/// Finds the highest rate a broker sustains with consumers keeping up.
///
/// "Keeping up" is judged by the queues in front of the broker (sent but
/// unacknowledged) and behind it (acknowledged but unconsumed): a window is
/// congested when either queue *grew* by more than a tenth of the window's
/// traffic while holding more than a tenth of a second of it, or when
/// either holds more than a second of traffic, or when the client refused
/// sends because its own queue was full. Growth rather than level is
/// what matters: a broker whose consumers lag a steady half second (say,
/// fetches that always wait out their long poll) still keeps up. A full
/// client queue is congestion whatever the levels: its bound hides the
/// growth, and every message then waits in it, so the run would measure
/// the client's queue rather than the broker.
///
/// Multiplicative increase while healthy, a drop to 80% of the offer on
/// congestion. The first climb doubles its step each healthy window (up to
/// +50%); after the first congestion steps are capped at +10%, so the rate
/// settles in a band just under capacity.
#[derive(Debug, Clone)]
pub struct RateController {
    rate: f64,
    ramp: f64,
    max_ramp: f64,
    floor: f64,
    ceiling: f64,
    /// Previous window's (unacked, backlog) in seconds of traffic.
    last: Option<(f64, f64)>,
}

const FIRST_RAMP: f64 = 0.25;
const SETTLED_RAMP: f64 = 0.02;
const SETTLED_MAX_RAMP: f64 = 0.1;

impl RateController {
    pub fn new(start: f64, floor: f64, ceiling: f64) -> RateController {
        RateController {
            rate: start.clamp(floor, ceiling),
            ramp: FIRST_RAMP,
            max_ramp: 0.5,
            floor,
            ceiling,
            last: None,
        }
    }

    /// The rate currently offered, msg/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Queue levels in seconds of traffic at the current offer.
    fn lags(&self, o: &Observation) -> (f64, f64) {
        let rate = self.rate.max(1.0);
        (o.unacked as f64 / rate, o.backlog as f64 / rate)
    }

    /// Whether a window with these figures counts as congested, given the
    /// previous window's queue levels (the first window only has levels).
    pub fn congested(&self, o: &Observation) -> bool {
        let now = self.lags(o);
        let prev = self.last.unwrap_or(now);
        let growth_limit = 0.1 * o.window_s;
        let queue = |level: u64, lag: f64, prev_lag: f64| {
            let deep = lag > 1.0 && level > 2000;
            let building = lag > 0.1 && level > 1000 && lag - prev_lag > growth_limit;
            deep || building
        };
        o.refused > 0 || queue(o.unacked, now.0, prev.0) || queue(o.backlog, now.1, prev.1)
    }

    /// Feeds one window; returns the rate to offer next.
    pub fn observe(&mut self, o: &Observation) -> f64 {
        if o.window_s <= 0.0 {
            return self.rate;
        }
        let sent_rate = o.sent as f64 / o.window_s;
        let congested = self.congested(o);
        self.last = Some(self.lags(o));
        if congested {
            // Multiplicative decrease from the current offer. Not from what
            // the window delivered: one stall (a segment roll, a GC pause)
            // would then cut the rate by far more than the broker's real
            // shortfall. Persistent congestion still backs off fast
            // (0.8 per window).
            self.rate = (self.rate * 0.8).clamp(self.floor, self.ceiling);
            self.ramp = SETTLED_RAMP;
            self.max_ramp = SETTLED_MAX_RAMP;
        } else if sent_rate >= 0.9 * self.rate {
            self.rate = (self.rate * (1.0 + self.ramp)).clamp(self.floor, self.ceiling);
            self.ramp = (self.ramp * 2.0).min(self.max_ramp);
        }
        // Otherwise the producers could not offer the target at all (the
        // load generator itself is short of CPU): hold, do not ramp further.
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn pacer_spreads_messages_evenly() {
        let p = Pacer::new(SEC, 1000.0);
        assert_eq!(p.due(0), 0, "nothing is due before the start");
        assert_eq!(p.due(SEC), 1, "the first message is due at the start");
        assert_eq!(p.due(SEC + SEC / 2), 501);
        assert_eq!(p.due(2 * SEC), 1001);
        assert_eq!(p.intended_ns(0), SEC);
        assert_eq!(p.intended_ns(500), SEC + SEC / 2);
    }

    #[test]
    fn pacer_rate_change_forgives_backlog_and_applies_forward() {
        let mut p = Pacer::new(0, 100.0);
        // 10 s in, only 50 of ~1000 due messages were sent.
        p.set_rate(10 * SEC, 50, 10.0);
        assert_eq!(p.due(10 * SEC), 51);
        assert_eq!(p.due(11 * SEC), 61);
        assert_eq!(p.intended_ns(60), 11 * SEC);
    }

    /// A broker that acknowledges and delivers at most `capacity` msg/s;
    /// whatever is offered beyond that piles up.
    fn simulate(capacity: f64, windows: usize) -> Vec<f64> {
        let mut c = RateController::new(5_000.0, 1_000.0, 10_000_000.0);
        let mut queued = 0.0f64;
        let mut rates = Vec::new();
        for _ in 0..windows {
            let offered = c.rate();
            let total = queued + offered;
            let done = total.min(capacity);
            queued = total - done;
            let o = Observation {
                window_s: 1.0,
                sent: offered as u64,
                acked: done as u64,
                received: done as u64,
                unacked: queued as u64,
                backlog: 0,
                refused: 0,
            };
            // A congested window lets the queue drain at the lower rate.
            rates.push(c.observe(&o));
        }
        rates
    }

    #[test]
    fn controller_settles_just_under_the_brokers_capacity() {
        for capacity in [20_000.0, 150_000.0, 400_000.0] {
            let rates = simulate(capacity, 60);
            let tail = &rates[40..];
            let avg = tail.iter().sum::<f64>() / tail.len() as f64;
            assert!(
                avg > 0.7 * capacity && avg < 1.1 * capacity,
                "capacity {capacity}: settled at {avg} ({tail:?})"
            );
        }
    }

    #[test]
    fn controller_backs_off_when_consumers_fall_behind() {
        let mut c = RateController::new(100_000.0, 1_000.0, 1e9);
        let calm = Observation {
            window_s: 1.0,
            sent: 100_000,
            acked: 100_000,
            received: 100_000,
            unacked: 10,
            backlog: 100,
            refused: 0,
        };
        let up = c.observe(&calm);
        assert!(up > 100_000.0);
        // Consumers fall 40k behind in one window: back off.
        let behind = Observation {
            received: 60_000,
            backlog: 40_100,
            ..calm
        };
        assert!((c.observe(&behind) - up * 0.8).abs() < 1.0);
        // The backlog keeps growing: keep backing off.
        let worse = Observation {
            backlog: 80_000,
            ..behind
        };
        assert!((c.observe(&worse) - up * 0.64).abs() < 1.0);
    }

    #[test]
    fn a_steady_consumer_lag_is_not_congestion() {
        // Consumers half a second behind, every window, at 20k msg/s.
        let mut c = RateController::new(20_000.0, 1_000.0, 1e9);
        let mut rate = c.rate();
        for _ in 0..5 {
            let o = Observation {
                window_s: 1.0,
                sent: rate as u64,
                acked: rate as u64,
                received: rate as u64,
                unacked: (rate * 0.05) as u64,
                backlog: (rate * 0.5) as u64,
                refused: 0,
            };
            let next = c.observe(&o);
            assert!(
                next > rate,
                "lag alone must not stop the climb: {rate} -> {next}"
            );
            rate = next;
        }
    }

    #[test]
    fn a_second_of_queued_traffic_is_congestion_even_if_steady() {
        let mut c = RateController::new(10_000.0, 1_000.0, 1e9);
        let o = Observation {
            window_s: 1.0,
            sent: 10_000,
            acked: 10_000,
            received: 10_000,
            unacked: 12_000,
            backlog: 0,
            refused: 0,
        };
        c.observe(&o);
        assert!((c.observe(&o) - 6_400.0).abs() < 1.0);
    }

    /// A client whose queue holds at most `bound` unacknowledged messages
    /// in front of a broker that takes `capacity` msg/s: what does not fit
    /// is refused, so the queue never grows past the bound.
    fn simulate_bounded(capacity: f64, bound: f64, windows: usize) -> Vec<f64> {
        let mut c = RateController::new(5_000.0, 1_000.0, 10_000_000.0);
        let mut queued = 0.0f64;
        let mut rates = Vec::new();
        for _ in 0..windows {
            let offered = c.rate();
            let fits = (bound - queued).max(0.0) + capacity;
            let sent = offered.min(fits);
            let done = (queued + sent).min(capacity);
            queued = queued + sent - done;
            let o = Observation {
                window_s: 1.0,
                sent: sent as u64,
                acked: done as u64,
                received: done as u64,
                unacked: queued as u64,
                backlog: 0,
                refused: (offered - sent).max(0.0) as u64,
            };
            rates.push(c.observe(&o));
        }
        rates
    }

    #[test]
    fn a_full_client_queue_stops_the_climb_near_the_brokers_capacity() {
        // librdkafka's default queue: 100k messages per producer, two producers.
        for capacity in [150_000.0, 300_000.0] {
            let rates = simulate_bounded(capacity, 200_000.0, 60);
            let tail = &rates[40..];
            let avg = tail.iter().sum::<f64>() / tail.len() as f64;
            assert!(
                avg > 0.7 * capacity && avg < 1.1 * capacity,
                "capacity {capacity}: settled at {avg} ({tail:?})"
            );
        }
    }

    #[test]
    fn controller_holds_when_the_generator_cannot_offer_the_target() {
        let mut c = RateController::new(100_000.0, 1_000.0, 1e9);
        let o = Observation {
            window_s: 1.0,
            sent: 40_000,
            acked: 40_000,
            received: 40_000,
            ..Observation::default()
        };
        assert_eq!(c.observe(&o), 100_000.0);
    }
}
