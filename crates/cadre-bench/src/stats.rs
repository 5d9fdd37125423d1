//! Small statistics (median, mean, percentiles) and process facts read from `/proc`.

use std::time::Duration;

/// Summary of a set of timings, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Arithmetic mean.
    pub mean_ms: f64,
    /// Median (mean of the two middle values for an even count).
    pub median_ms: f64,
    /// 95th percentile (nearest rank).
    pub p95_ms: f64,
    /// Smallest.
    pub min_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// Milliseconds of a duration.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Summarise samples in milliseconds (all zero when empty).
pub fn summarize(samples: &[f64]) -> Summary {
    let mut v: Vec<f64> = samples.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return Summary {
            mean_ms: 0.0,
            median_ms: 0.0,
            p95_ms: 0.0,
            min_ms: 0.0,
            max_ms: 0.0,
        };
    }
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n);
    Summary {
        mean_ms: v.iter().sum::<f64>() / n as f64,
        median_ms: median,
        p95_ms: v[rank - 1],
        min_ms: v[0],
        max_ms: v[n - 1],
    }
}

/// CPU time (user + system) of the whole process so far: all threads, so the mock server's
/// and the client's work alike. Less disturbed than wall time by other load on the machine.
pub fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |u| {
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().max(0) as u64)
                + Duration::from_micros(t.tv_usec().max(0) as u64)
        };
        tv(u.user_time()) + tv(u.system_time())
    })
}

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Raise the open-file limit (N = 10 000 needs about 2 N sockets in this one process).
pub fn raise_nofile(wanted: u64) -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    if soft >= wanted {
        return soft;
    }
    if setrlimit(Resource::RLIMIT_NOFILE, wanted, wanted.max(hard)).is_ok() {
        return wanted;
    }
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    getrlimit(Resource::RLIMIT_NOFILE).map_or(soft, |(s, _)| s)
}

/// The multi-thread tokio runtime a benchmark process runs on, with the open-file limit
/// raised first (N = 10 000 needs about 2 N sockets in one process).
pub fn bench_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    raise_nofile(65_536);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the tokio runtime: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p95() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(s.median_ms, 3.0);
        assert_eq!(s.p95_ms, 5.0);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(summarize(&[1.0, 2.0]).median_ms, 1.5);
        assert!(status_kib("VmHWM").is_some_and(|v| v > 0));
    }
}
