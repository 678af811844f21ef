//! The machine's counters at one instant: CPU time by kind (`/proc/stat`), this process's CPU
//! time (`/proc/self/stat`), the CPUs' clocks (`cpufreq`), and the cgroup's CPU quota. A run's
//! state is the difference of two snapshots ([`Shares::between`]).
//!
//! `/proc` text is parsed by `procfs-core`, the parsing half of the `procfs` crate: it reads no
//! files (this module does, with `std::fs`), so the same parser reads the synthetic snapshots of
//! the tests. A fact that cannot be read (not Linux, no cpufreq, a container that hides it) is
//! `None`, never an error: the state describes the run, it never stops one.

use std::io::Cursor;
use std::path::Path;

use procfs_core::process::Stat;
use procfs_core::{ExplicitSystemInfo, FromRead, FromReadSI, KernelStats};

/// The system facts `procfs-core` asks for to parse `/proc/stat`. Only the tick rate is used
/// there, to convert ticks into milliseconds, which this module never does: it divides ticks
/// by ticks (both files count in the same `USER_HZ`), so the value does not matter.
const SYSTEM: ExplicitSystemInfo = ExplicitSystemInfo {
    boot_time_secs: 0,
    ticks_per_second: 100,
    page_size: 4096,
    is_little_endian: cfg!(target_endian = "little"),
};

/// What `/proc/stat` says, as this module uses it. The CPU times are the machine's since boot,
/// in ticks, summed over its CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounters {
    /// Time running anything: user, nice, system, irq and softirq (guest time is inside user).
    pub busy: u64,
    /// Time a hypervisor gave this machine's CPUs to someone else.
    pub steal: u64,
    /// All of it, idle and iowait included: the CPU time the machine had.
    pub total: u64,
    /// The CPUs listed (`cpuN` lines): the online CPUs.
    pub cpus: usize,
    /// Tasks runnable right now, machine-wide (the reader's own thread among them).
    pub procs_running: Option<u32>,
}

pub fn kernel_counters(text: &str) -> Option<KernelCounters> {
    let stats = KernelStats::from_read(Cursor::new(text.as_bytes()), &SYSTEM).ok()?;
    let t = &stats.total;
    let extra = |x: Option<u64>| x.unwrap_or(0);
    let busy = t.user + t.nice + t.system + extra(t.irq) + extra(t.softirq);
    let steal = extra(t.steal);
    let total = busy + t.idle + extra(t.iowait) + steal;
    Some(KernelCounters {
        busy,
        steal,
        total,
        cpus: stats.cpu_time.len(),
        procs_running: stats.procs_running,
    })
}

/// A process's or thread's `stat` line: its CPU time in ticks (user + system, all its threads
/// for a process, and its children's that it waited for: a suite's commands are its own work)
/// and its scheduler state (`R` for runnable).
pub fn task_stat(text: &str) -> Option<(u64, char)> {
    let stat = Stat::from_read(Cursor::new(text.as_bytes())).ok()?;
    let children = (stat.cutime + stat.cstime).max(0) as u64;
    Some((stat.utime + stat.stime + children, stat.state))
}

/// The mean clock of the CPUs, in MHz, from `scaling_cur_freq` values (kHz); `None` for none.
pub fn mean_mhz(khz: &[u64]) -> Option<f64> {
    let mean = || khz.iter().map(|&k| k as f64 / 1000.0).sum::<f64>() / khz.len() as f64;
    (!khz.is_empty()).then(mean)
}

/// The CPUs a cgroup v2 `cpu.max` allows (`"200000 100000"` is 2); `None` for `max` (no
/// quota) or text that is not a quota.
pub fn cgroup_v2_cpus(text: &str) -> Option<f64> {
    let mut words = text.split_whitespace();
    let quota: f64 = words.next()?.parse().ok()?;
    let period: f64 = words.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// The CPUs a cgroup v1 quota and period allow; `None` for `-1` (no quota).
pub fn cgroup_v1_cpus(quota: &str, period: &str) -> Option<f64> {
    cgroup_v2_cpus(&format!("{} {}", quota.trim(), period.trim()))
}

/// The machine's counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    pub kernel: Option<KernelCounters>,
    /// This process's CPU time, all threads, in ticks.
    pub own_ticks: Option<u64>,
    pub mean_mhz: Option<f64>,
}

impl Snapshot {
    /// Read the counters now.
    pub fn take() -> Snapshot {
        Snapshot {
            kernel: read("/proc/stat").as_deref().and_then(kernel_counters),
            own_ticks: read("/proc/self/stat")
                .as_deref()
                .and_then(task_stat)
                .map(|(ticks, _)| ticks),
            mean_mhz: mean_mhz(&cpu_khz()),
        }
    }
}

/// The shares of the machine's CPU time over an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    /// Used by every process but this one.
    pub other: f64,
    /// Used by this process.
    pub own: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
    /// The machine's CPU time between the snapshots, in the kernel's ticks: the shares'
    /// resolution (one tick of it is 1 / ticks).
    pub ticks: u64,
}

impl Shares {
    /// The shares between two snapshots; `None` when either lacks a counter or no tick passed.
    ///
    /// The kernel charges a process and a CPU their ticks by separate bookkeeping, so the
    /// process's share can exceed the busy share by a tick or two: the other share is then
    /// zero, not negative.
    pub fn between(before: &Snapshot, after: &Snapshot) -> Option<Shares> {
        let (b, a) = (before.kernel?, after.kernel?);
        let ticks = a.total.checked_sub(b.total).filter(|&t| t > 0)?;
        let total = ticks as f64;
        let busy = a.busy.saturating_sub(b.busy) as f64;
        let own = after.own_ticks?.saturating_sub(before.own_ticks?) as f64;
        Some(Shares {
            other: ((busy - own).max(0.0) / total).min(1.0),
            own: (own / total).min(1.0),
            steal: (a.steal.saturating_sub(b.steal) as f64 / total).min(1.0),
            ticks,
        })
    }
}

/// The runnable tasks now: those that are not this process's (machine-wide runnable tasks less
/// this process's threads in state `R`, the caller's among them, as it reads), and this
/// process's own but the caller's. `None` where `/proc` cannot be read.
pub fn runnable_now() -> Option<(u32, u32)> {
    let running = read("/proc/stat")
        .as_deref()
        .and_then(kernel_counters)?
        .procs_running?;
    let ours = own_running_threads()?;
    Some((running.saturating_sub(ours), ours.saturating_sub(1)))
}

fn own_running_threads() -> Option<u32> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let running = tasks
        .flatten()
        .filter_map(|task| read(task.path().join("stat")))
        .filter_map(|text| task_stat(&text))
        .filter(|&(_, state)| state == 'R')
        .count();
    u32::try_from(running).ok()
}

/// Each CPU's current clock in kHz, where cpufreq exposes it.
fn cpu_khz() -> Vec<u64> {
    let Ok(cpus) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return Vec::new();
    };
    cpus.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("cpu")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| read(e.path().join("cpufreq/scaling_cur_freq")))
        .filter_map(|text| text.trim().parse().ok())
        .collect()
}

/// The CPUs this process's cgroup may use, where a quota is set: cgroup v2's `cpu.max`, else
/// v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us`. Read at the root of the cgroup mount,
/// which inside a container is the container's own cgroup.
pub fn cgroup_cpus() -> Option<f64> {
    if let Some(text) = read("/sys/fs/cgroup/cpu.max") {
        return cgroup_v2_cpus(&text);
    }
    ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
        .iter()
        .find_map(|dir| {
            let dir = Path::new(dir);
            let quota = read(dir.join("cpu.cfs_quota_us"))?;
            let period = read(dir.join("cpu.cfs_period_us"))?;
            Some(cgroup_v1_cpus(&quota, &period))
        })
        .flatten()
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/stat` of two CPUs, with the fields the parser requires.
    fn proc_stat(user: u64, system: u64, idle: u64, steal: u64, running: u32) -> String {
        format!(
            "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\n\
             cpu0 {} 0 {} {} 0 0 0 {} 0 0\n\
             cpu1 {} 0 {} {} 0 0 0 {} 0 0\n\
             intr 1 0 0\nctxt 100\nbtime 1700000000\nprocesses 50\n\
             procs_running {running}\nprocs_blocked 0\n",
            user / 2,
            system / 2,
            idle / 2,
            steal / 2,
            user - user / 2,
            system - system / 2,
            idle - idle / 2,
            steal - steal / 2,
        )
    }

    /// A `/proc/self/stat` line with this user and system time and state.
    fn self_stat(utime: u64, stime: u64, state: char) -> String {
        format!(
            "4242 (parbench run) {state} 1 4242 4242 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 \
             5 0 12345 100000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
        )
    }

    #[test]
    fn proc_stat_reads_as_busy_steal_and_total_ticks() {
        let k = kernel_counters(&proc_stat(300, 100, 500, 20, 3)).expect("parses");
        assert_eq!((k.busy, k.steal, k.total), (400, 20, 920));
        assert_eq!((k.cpus, k.procs_running), (2, Some(3)));
        assert_eq!(kernel_counters("not /proc/stat"), None);
    }

    #[test]
    fn a_stat_line_reads_as_cpu_ticks_and_state() {
        assert_eq!(task_stat(&self_stat(70, 5, 'R')), Some((75, 'R')));
        // The children it waited for (a suite's commands) count as its own time.
        let waited = self_stat(70, 5, 'R').replace(" 70 5 0 0 ", " 70 5 8 2 ");
        assert_eq!(task_stat(&waited), Some((85, 'R')));
        // A command name with spaces and parentheses does not shift the fields.
        let odd = self_stat(1, 2, 'S').replace("(parbench run)", "(a (b) c)");
        assert_eq!(task_stat(&odd), Some((3, 'S')));
        assert_eq!(task_stat(""), None);
    }

    #[test]
    fn shares_are_deltas_over_the_machines_cpu_time() {
        let snap = |user, idle, steal, own| Snapshot {
            kernel: kernel_counters(&proc_stat(user, 0, idle, steal, 1)),
            own_ticks: Some(own),
            mean_mhz: None,
        };
        // Over 200 ticks: 150 busy, 50 of them ours, 10 stolen.
        let s =
            Shares::between(&snap(1000, 1000, 0, 500), &snap(1150, 1040, 10, 550)).expect("shares");
        assert!((s.other - 0.5).abs() < 1e-12, "{s:?}");
        assert!((s.own - 0.25).abs() < 1e-12, "{s:?}");
        assert!((s.steal - 0.05).abs() < 1e-12, "{s:?}");
        // Our ticks charged ahead of the CPUs' own: no negative share.
        let s =
            Shares::between(&snap(1000, 1000, 0, 500), &snap(1010, 1090, 0, 530)).expect("shares");
        assert_eq!(s.other, 0.0);
        // No tick passed, or a counter missing: nothing to say.
        assert_eq!(Shares::between(&snap(1, 1, 0, 1), &snap(1, 1, 0, 1)), None);
        let blind = Snapshot {
            own_ticks: None,
            ..snap(1000, 1000, 0, 0)
        };
        assert_eq!(Shares::between(&blind, &snap(1100, 1100, 0, 0)), None);
    }

    #[test]
    fn quotas_and_clocks_read_or_are_none() {
        assert_eq!(cgroup_v2_cpus("200000 100000\n"), Some(2.0));
        assert_eq!(cgroup_v2_cpus("max 100000\n"), None);
        assert_eq!(cgroup_v1_cpus("50000\n", "100000\n"), Some(0.5));
        assert_eq!(cgroup_v1_cpus("-1\n", "100000\n"), None);
        assert_eq!(mean_mhz(&[2_000_000, 3_000_000]), Some(2500.0));
        assert_eq!(mean_mhz(&[]), None);
    }

    #[test]
    fn the_live_readers_never_fail_loudly() {
        // Whatever this machine exposes, reading it returns values or None.
        let snap = Snapshot::take();
        if cfg!(target_os = "linux") {
            assert!(
                snap.kernel.is_some() && snap.own_ticks.is_some(),
                "{snap:?}"
            );
        }
        let _ = (runnable_now(), cgroup_cpus());
    }
}
