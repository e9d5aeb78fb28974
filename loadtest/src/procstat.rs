//! CPU time and resident memory of a process, read from `/proc`, so a run
//! can report what the broker (and the load generator itself) spent.

use serde::{Deserialize, Serialize};

use crate::error::LoadError;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcSample {
    /// Milliseconds since the run's clock origin.
    pub t_ms: u64,
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    /// Resident set size in KiB.
    pub rss_kib: u64,
}

/// User + system ticks from the text of `/proc/PID/stat`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may itself contain
    // spaces or parentheses, so count fields from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14, stime 15.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` in KiB from the text of `/proc/PID/status`.
pub fn parse_status_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Clock ticks per second for `/proc` CPU times.
pub fn ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions and only reads a constant.
    #[expect(unsafe_code, reason = "libc::sysconf is an FFI call")]
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Reads one sample of process `pid` (`None` = this process).
pub fn sample(pid: Option<u32>, t_ms: u64) -> Result<ProcSample, LoadError> {
    let base = match pid {
        Some(p) => format!("/proc/{p}"),
        None => "/proc/self".to_string(),
    };
    let read = |name: &str| {
        let path = format!("{base}/{name}");
        std::fs::read_to_string(&path).map_err(|e| LoadError::Proc {
            path,
            reason: e.to_string(),
        })
    };
    let stat = read("stat")?;
    let status = read("status")?;
    let bad = |what: &str| LoadError::Proc {
        path: format!("{base}/{what}"),
        reason: "unexpected format".into(),
    };
    Ok(ProcSample {
        t_ms,
        cpu_ticks: parse_stat_cpu_ticks(&stat).ok_or_else(|| bad("stat"))?,
        rss_kib: parse_status_rss_kib(&status).ok_or_else(|| bad("status"))?,
    })
}

/// Resource use of one process over a phase of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    /// Average CPU over the window, 100 = one core fully busy.
    pub cpu_percent: f64,
    pub rss_start_mib: f64,
    pub rss_end_mib: f64,
    pub rss_max_mib: f64,
    /// End minus start: how much resident memory grew while data piled up.
    pub rss_growth_mib: f64,
}

/// Summarises the samples taken between `from_ms` and `to_ms` (inclusive).
pub fn summarize(
    samples: &[ProcSample],
    from_ms: u64,
    to_ms: u64,
    ticks_per_sec: u64,
) -> Option<ResourceSummary> {
    let window: Vec<&ProcSample> = samples
        .iter()
        .filter(|s| s.t_ms >= from_ms && s.t_ms <= to_ms)
        .collect();
    let (first, last) = (window.first()?, window.last()?);
    let mib = |kib: u64| kib as f64 / 1024.0;
    let secs = last.t_ms.saturating_sub(first.t_ms) as f64 / 1000.0;
    let cpu_percent = if secs > 0.0 && ticks_per_sec > 0 {
        last.cpu_ticks.saturating_sub(first.cpu_ticks) as f64 / ticks_per_sec as f64 / secs * 100.0
    } else {
        0.0
    };
    let max = window.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    Some(ResourceSummary {
        cpu_percent,
        rss_start_mib: mib(first.rss_kib),
        rss_end_mib: mib(last.rss_kib),
        rss_max_mib: mib(max),
        rss_growth_mib: mib(last.rss_kib) - mib(first.rss_kib),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_spaces_and_parens_in_the_command_name() {
        let stat = "4242 (tokio (shard) 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 1234 100000 2000 18446744073709551615";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_from_the_status_file() {
        let status = "Name:\taerostream\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nThreads:\t4\n";
        assert_eq!(parse_status_rss_kib(status), Some(51200));
        assert_eq!(parse_status_rss_kib("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(None, 0).unwrap();
        assert!(s.rss_kib > 0);
    }

    #[test]
    fn summary_reports_cpu_share_and_rss_growth_within_the_window() {
        let samples = [
            ProcSample {
                t_ms: 0,
                cpu_ticks: 0,
                rss_kib: 1024,
            },
            ProcSample {
                t_ms: 1000,
                cpu_ticks: 10,
                rss_kib: 2048,
            },
            ProcSample {
                t_ms: 3000,
                cpu_ticks: 110,
                rss_kib: 10240,
            },
            ProcSample {
                t_ms: 5000,
                cpu_ticks: 210,
                rss_kib: 4096,
            },
        ];
        let s = summarize(&samples, 1000, 5000, 100).unwrap();
        assert!((s.cpu_percent - 50.0).abs() < 1e-9, "{s:?}");
        assert_eq!(
            (s.rss_start_mib, s.rss_end_mib, s.rss_max_mib),
            (2.0, 4.0, 10.0)
        );
        assert_eq!(s.rss_growth_mib, 2.0);
        assert!(summarize(&samples, 6000, 7000, 100).is_none());
    }
}
