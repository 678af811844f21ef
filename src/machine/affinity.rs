//! Which CPUs this process may run on, and pinning a thread to one of them: the probes that
//! run one thread per CPU (the line between two cores, the FMA peak and the bandwidth on every
//! core) pin them, since two new threads left to the scheduler often share a CPU for a while
//! and the figure then reads a time slice instead of the hardware.

/// The cores this process may use (its affinity mask and cgroup quota, as the standard
/// library reads them), at least 1: what its threads share.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many CPUs are online on this host (`/sys/devices/system/cpu/online`: `0-15`,
/// `0,2-3`), whatever this process's mask allows; `None` if the OS does not say.
pub fn online() -> Option<usize> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    list.trim().split(',').try_fold(0usize, |n, part| {
        let count = match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().ok()? + 1 - a.parse::<usize>().ok()?,
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
        Some(n + count)
    })
}

/// The CPUs in this thread's affinity mask, in order; empty if the OS does not say.
#[cfg(target_os = "linux")]
pub fn allowed() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data, all zeros is an empty set, and the call writes at
    // most `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to `cpu`; nothing when `None` or when the OS refuses (the thread
/// then runs unpinned). True when the thread is pinned.
#[cfg(target_os = "linux")]
pub fn pin(cpu: Option<usize>) -> bool {
    let Some(cpu) = cpu.filter(|&c| c < libc::CPU_SETSIZE as usize) else {
        return false;
    };
    // SAFETY: as above; `cpu` is below `CPU_SETSIZE`, so `CPU_SET` stays inside the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Elsewhere threads run where the OS puts them: no CPU list, no pinning.
#[cfg(not(target_os = "linux"))]
pub fn allowed() -> Vec<usize> {
    Vec::new()
}

/// Elsewhere threads run where the OS puts them: no CPU list, no pinning.
#[cfg(not(target_os = "linux"))]
pub fn pin(_cpu: Option<usize>) -> bool {
    false
}

/// The CPU for the `i`-th of `threads` threads: the `i`-th allowed CPU when the mask lists at
/// least one CPU per thread, else `None` (unpinned: pinning two threads to one CPU would be
/// worse than letting the scheduler spread them).
pub fn cpu_for(allowed: &[usize], i: usize, threads: usize) -> Option<usize> {
    (allowed.len() >= threads)
        .then(|| allowed.get(i).copied())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_distinct_cpus_only_when_there_are_enough() {
        assert_eq!(cpu_for(&[3, 5], 1, 2), Some(5));
        assert_eq!(cpu_for(&[3, 5], 0, 3), None);
        assert_eq!(cpu_for(&[], 0, 1), None);
        if cfg!(target_os = "linux") {
            assert!(!allowed().is_empty());
            // This process may run on no more CPUs than the host has online.
            assert!(
                online().is_some_and(|n| n >= allowed().len()),
                "{:?}",
                online()
            );
        }
    }
}
