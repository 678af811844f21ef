//! The environment block of the JSON report.
//!
//! Why: a timing means nothing without the machine, compiler and engine that produced it, so
//! every report carries them. Capturing must never fail or panic — a benchmark on a machine
//! without `/proc` (or with an odd one) still produces a report, with "unknown" or 0 in the
//! fields that could not be read.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use crate::device::cuda_env::CudaEnv;
pub use crate::device::discovery::{GpuDevice, GpuInfo, LibraryInfo};
use crate::device::gpu_limits::GpuLimits;
use crate::device::memory::proc_bytes;
use crate::engine::Mode;
use crate::machine::{Limits, Probe};

/// `rustc --version` of the compiler that built this binary (set by `build.rs`).
pub const RUSTC: &str = env!("PARBENCH_RUSTC");
/// Short git commit the binary was built from, `-dirty` if the tree had changes, or "unknown"
/// when built outside a git checkout (set by `build.rs`).
pub const GIT_COMMIT: &str = env!("PARBENCH_GIT_COMMIT");

/// Where and how a benchmark ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name, or "unknown".
    pub host: String,
    /// The machine's name as the user gave it (`--machine`), part of its identity
    /// ([`super::identity::Identity`]): `None` when not given, and in reports written before
    /// the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// e.g. "linux x86_64 6.1.0-18-amd64" (OS and architecture this binary was built for, plus
    /// the running kernel's release when known).
    pub os: String,
    /// CPU model name from `/proc/cpuinfo`, or "unknown".
    pub cpu_model: String,
    /// CPUs this process may use (`std::thread::available_parallelism`, which honours affinity
    /// masks and cgroup quotas — what a thread pool actually gets, not the socket's core count);
    /// 0 when unknown.
    pub cores: usize,
    /// Total physical memory (`MemTotal` of `/proc/meminfo`); 0 when unknown.
    pub memory_bytes: u64,
    pub gpu: GpuInfo,
    /// Every GPU the driver lists, the one opened marked `selected`: empty without a driver,
    /// and in reports written before the field existed.
    #[serde(default)]
    pub gpus: Vec<GpuDevice>,
    /// The GPU ordinal opened and the CUDA environment variables set: `None` in reports
    /// written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_env: Option<CudaEnv>,
    /// Compiler that built the binary ([`RUSTC`]).
    pub rustc: String,
    pub engine: String,
    /// Command line of this run, so it can be repeated.
    pub argv: Vec<String>,
    /// When capture ran: RFC 3339 UTC, whole seconds, e.g. "2023-11-14T22:13:20Z".
    pub started_at: String,
    /// What the machine can do (FMA peak, clock, memory bandwidth, cache-line latency, channel
    /// hand-off), measured by parbench once per process, before any run: `None` in reports
    /// written before the field existed and in `parbench devices` without `--probe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// What the GPU can do (the driver's floor, pinned copy bandwidth, cuBLAS's fp32 rate),
    /// measured once per process where a GPU is usable, beside `limits`: in a report of runs,
    /// after the first run that used the GPU. `None` without a usable GPU or such a run, in
    /// reports written before the field existed and without `--probe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_limits: Option<Probe<GpuLimits>>,
}

impl Environment {
    /// Captures the environment of this process now, with the machine's limits
    /// ([`crate::machine::limits()`]: measured on the first call in a process, about 0.3 s in a
    /// release build, so call this before any timed run). Never panics; unreadable facts become
    /// "unknown" or 0.
    pub fn capture(engine: Mode, gpu: GpuInfo) -> Environment {
        Environment {
            limits: Some(crate::machine::limits().clone()),
            gpu_limits: crate::device::gpu_limits::gpu_limits().cloned(),
            ..Environment::capture_without_limits(engine, gpu)
        }
    }

    /// A run of this report used the GPU: record the GPU's limits, measured now if this
    /// process has not measured them yet (after the run, so they never disturb its timings).
    pub fn note_gpu_run(&mut self) {
        if self.gpu_limits.is_none() {
            self.gpu_limits = crate::device::gpu_limits::gpu_limits().cloned();
        }
    }

    /// [`Environment::capture`] without the limits, for a quick look at the machine (`parbench
    /// devices`). `argv` comes from `std::env::args_os` (non-UTF-8 arguments are converted
    /// lossily rather than panicking as `std::env::args` would).
    pub fn capture_without_limits(engine: Mode, gpu: GpuInfo) -> Environment {
        let unknown = || "unknown".to_string();
        Environment {
            host: host(),
            machine: None,
            os: os_description(read_trimmed("/proc/sys/kernel/osrelease").as_deref()),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|s| parse_cpu_model(&s))
                .unwrap_or_else(unknown),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_bytes: std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|s| proc_bytes(&s, "MemTotal:"))
                .unwrap_or(0),
            gpu,
            gpus: crate::device::discovery::list_gpus(),
            cuda_env: Some(CudaEnv::capture()),
            rustc: RUSTC.to_string(),
            engine: engine.as_str().to_string(),
            argv: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            started_at: rfc3339_utc(SystemTime::now()),
            limits: None,
            gpu_limits: None,
        }
    }
}

/// `t` as an RFC 3339 UTC timestamp with whole seconds (truncated toward the past), e.g.
/// "2023-11-14T22:13:20Z". Times before 1970 are handled too, so a wrong clock cannot panic.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    };
    rfc3339_from_unix(secs)
}

/// Unix time (seconds) as an RFC 3339 UTC timestamp, e.g. `0` → "1970-01-01T00:00:00Z".
/// (Years outside 0..=9999 print with more digits or a sign, which RFC 3339 cannot express.)
pub fn rfc3339_from_unix(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Proleptic Gregorian (year, month 1..=12, day 1..=31) of the day `days` after 1970-01-01.
///
/// Howard Hinnant's `civil_from_days`: shift to a calendar starting on 0000-03-01, so the leap
/// day is the last day of the year, then split into 400-year eras of 146 097 days.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of March-based year, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// "linux x86_64" from the build target, plus the kernel release when known.
fn os_description(kernel_release: Option<&str>) -> String {
    let base = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    match kernel_release {
        Some(release) if !release.is_empty() => format!("{base} {release}"),
        _ => base,
    }
}

/// This machine's host name (`unknown` where it cannot be read).
pub fn host() -> String {
    read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".to_string())
}

/// Contents of a small text file, trimmed; `None` if unreadable or blank.
fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The first "model name" of `/proc/cpuinfo` (all cores of a host normally share it).
fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        (key.trim() == "model name" && !value.is_empty()).then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_known_dates_and_system_times() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_from_unix(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(rfc3339_from_unix(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339_from_unix(4_107_542_400), "2100-03-01T00:00:00Z"); // 2100: no leap day
        assert_eq!(rfc3339_from_unix(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_from_unix(-86_400 * 365), "1969-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(253_402_300_799), "9999-12-31T23:59:59Z");
        // From a system time: truncated toward the past, before 1970 too.
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_999);
        assert_eq!(rfc3339_utc(t), "2023-11-14T22:13:20Z");
        let before = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(rfc3339_utc(before), "1969-12-31T23:59:59Z");
    }

    /// Walks day by day over 1600-03-01 .. 2873-07-04 (so 400- and 100-year rules are crossed)
    /// and checks each date follows the previous one under the Gregorian rules, computed
    /// independently of `civil_from_days`.
    #[test]
    fn civil_from_days_is_consecutive_gregorian_calendar() {
        fn days_in_month(y: i64, m: u32) -> u32 {
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            }
        }
        let start = -135_080; // 1600-03-01
        let mut prev = civil_from_days(start);
        assert_eq!(prev, (1600, 3, 1));
        for days in start + 1..330_000 {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = prev;
            let expected = if pd < days_in_month(py, pm) {
                (py, pm, pd + 1)
            } else if pm < 12 {
                (py, pm + 1, 1)
            } else {
                (py + 1, 1, 1)
            };
            assert_eq!((y, m, d), expected, "day {days}");
            prev = (y, m, d);
        }
    }

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) \
                       CPU @ 2.20GHz\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        assert_eq!(parse_cpu_model("processor : 0\nmodel name :   \n"), None);
        assert_eq!(parse_cpu_model(""), None);

        let parse_mem_total = |s| proc_bytes(s, "MemTotal:");
        let meminfo = "MemTotal:       16318588 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(16_318_588 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 18446744073709551615 kB\n"), None);
    }

    #[test]
    fn os_description_shape() {
        let os = os_description(Some("6.1.0-18-amd64"));
        assert!(os.starts_with(std::env::consts::OS), "{os}");
        assert!(os.ends_with(" 6.1.0-18-amd64"), "{os}");
        assert_eq!(os.split(' ').count(), 3, "{os}");
        assert_eq!(os_description(None).split(' ').count(), 2);
    }

    #[test]
    fn capture_fills_every_field() {
        let env = Environment::capture(Mode::Naive, GpuInfo::unavailable("test"));
        assert_eq!(env.engine, "naive");
        assert_eq!(env.rustc, RUSTC);
        assert!(!env.argv.is_empty());
        assert_eq!(env.started_at.len(), "2023-11-14T22:13:20Z".len());
        assert!(env.started_at.ends_with('Z') && env.started_at.as_bytes()[10] == b'T');
        assert!(env.started_at.as_str() >= "2024", "{}", env.started_at);
        assert!(!env.host.is_empty() && !env.cpu_model.is_empty() && !env.os.is_empty());
        if cfg!(target_os = "linux") && Path::new("/proc/meminfo").exists() {
            assert!(env.cores > 0);
            assert!(env.memory_bytes > 0);
            assert_ne!(env.host, "unknown");
        }
        assert!(env.limits.is_some());
        let cuda_env = env
            .cuda_env
            .as_ref()
            .expect("the CUDA environment is recorded");
        assert_eq!(cuda_env.ordinal, crate::device::gpu_ordinal::selected());
        let json = serde_json::to_string(&env).expect("serialize");
        let back: Environment = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, env);
        let quick = Environment::capture_without_limits(Mode::Naive, GpuInfo::unavailable("test"));
        assert_eq!(quick.limits, None);
        let json = serde_json::to_value(&quick).expect("serialize");
        assert!(json.get("limits").is_none(), "{json}");
    }

    /// A report written before `limits` existed reads back, without them.
    #[test]
    fn an_environment_without_limits_reads_back() {
        let old = r#"{"host": "vm", "os": "linux x86_64", "cpu_model": "Intel(R) Xeon(R)",
            "cores": 2, "memory_bytes": 25276063744,
            "gpu": {"available": false, "reason": "no driver"},
            "rustc": "rustc 1.95.0", "engine": "threaded", "argv": ["parbench", "async"],
            "started_at": "2026-11-25T07:12:34Z"}"#;
        let env: Environment = serde_json::from_str(old).expect("an old environment reads");
        assert_eq!(env.limits, None);
        assert_eq!(env.cores, 2);
        assert!(env.gpus.is_empty() && env.cuda_env.is_none());
    }

    #[test]
    fn build_metadata_is_set() {
        assert!(
            RUSTC == "unknown" || RUSTC.starts_with("rustc "),
            "RUSTC = {RUSTC:?}"
        );
        assert!(!GIT_COMMIT.is_empty() && !GIT_COMMIT.contains(char::is_whitespace));
    }
}
