//! Memory bandwidth, STREAM-style: copy (`c = a`) and triad (`a = b + s·c`) over f32 arrays,
//! on one thread and on one thread per CPU at once, with bytes counted as STREAM counts them
//! (copy reads one array and writes one: 8 bytes an element; triad 12), so the figures compare
//! with STREAM's own.
//!
//! STREAM wants each array at least 4× the last-level cache, so that no pass finds the last
//! one's data there. The probe's budget (all limits in half a second) caps each array at
//! [`ARRAY_BYTES`]: three arrays of 64 MiB fault in and stream a few times in about 150 ms. On
//! a core whose last-level cache is above 16 MiB the arrays are under 4× it and the record
//! says so ([`Bandwidth::past_cache`]); on this project's 2-CPU VM, whose sysfs reports a
//! 480 MiB cache shared by the whole host, 64 MiB arrays read the same as 1 GiB ones.

use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cache::last_level_cache_bytes;
use super::probe::Probe;
use super::team::{run_team, TeamRun};

/// Bytes of each of the three arrays.
pub const ARRAY_BYTES: u64 = 64 << 20;
/// Bytes STREAM counts per element of a copy (one read, one write) and of a triad (two reads,
/// one write).
pub const COPY_BYTES_PER_ELEMENT: u64 = 8;
pub const TRIAD_BYTES_PER_ELEMENT: u64 = 12;
/// The triad's scalar (STREAM's).
const SCALAR: f32 = 3.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRate {
    /// GB/s (10^9 bytes per second) of one thread over the whole arrays.
    pub one_thread_gbytes_per_s: f64,
    /// GB/s of all the probe's threads at once, each over its share of the arrays.
    pub all_threads_gbytes_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// `c = a`.
    pub copy: StreamRate,
    /// `a = b + 3·c`.
    pub triad: StreamRate,
    /// Threads of the all-thread figures: the CPUs this process may use.
    pub threads: usize,
    /// Bytes of each of the three arrays.
    pub array_bytes: u64,
    /// The last-level cache, in bytes; absent where sysfs does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_bytes: Option<u64>,
    /// True when each of the all-thread threads ran pinned to a CPU of its own.
    pub pinned: bool,
    pub method: String,
}

impl Bandwidth {
    /// True when the arrays are at least 4× the last-level cache (STREAM's rule), so the
    /// figures are the memory's; false when they are smaller or the cache's size is unknown.
    pub fn past_cache(&self) -> bool {
        self.llc_bytes
            .is_some_and(|llc| self.array_bytes >= llc.saturating_mul(4))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Copy,
    Triad,
}

impl Kernel {
    /// One pass over the arrays (or a thread's share of them).
    fn pass(self, a: &mut [f32], b: &[f32], c: &mut [f32]) {
        match self {
            // The C library's memcpy, as the copy loop of STREAM's C source usually becomes.
            Kernel::Copy => c.copy_from_slice(a),
            Kernel::Triad => {
                for ((a, b), c) in a.iter_mut().zip(b).zip(c.iter()) {
                    *a = b + SCALAR * c;
                }
            }
        }
    }
}

/// GB/s of a pass of `kernel` over arrays of `elements` that took `seconds`.
fn gbytes_per_s(kernel: Kernel, elements: usize, seconds: f64) -> f64 {
    let bytes_per_element = match kernel {
        Kernel::Copy => COPY_BYTES_PER_ELEMENT,
        Kernel::Triad => TRIAD_BYTES_PER_ELEMENT,
    };
    (elements as u64 * bytes_per_element) as f64 / seconds.max(1e-12) / 1e9
}

/// The bandwidth over three arrays of `elements` f32 ([`ARRAY_BYTES`] in every process),
/// best of `passes` timed passes per kernel and thread count, on `threads` threads for the
/// all-thread figures. Fails only if the OS refuses a thread.
pub fn measure(elements: usize, passes: usize, threads: usize) -> Probe<Bandwidth> {
    Probe::from_result(
        "the memory probe",
        measure_over(elements, passes, threads, last_level_cache_bytes()),
    )
}

fn measure_over(
    elements: usize,
    passes: usize,
    threads: usize,
    llc_bytes: Option<u64>,
) -> std::io::Result<Bandwidth> {
    let (elements, threads, passes) = (elements.max(1), threads.max(1), passes.max(1));
    // Zeroed allocations of this size are fresh pages the OS maps on first write: the team
    // writes them, so each thread's share faults in on its own CPU (and NUMA node) and no
    // timed pass pays for a fault or reads the shared zero page.
    let [mut a, mut b, mut c] = [(); 3].map(|()| vec![0f32; elements]);
    let chunk = elements.div_ceil(threads).max(1);
    let mut pinned = {
        let split = shares(&mut a, &mut b, &mut c, chunk);
        team_pass(&split, |a, b, c| {
            a.fill(1.0);
            b.fill(2.0);
            c.fill(0.5);
        })?
        .pinned
    };
    let mut rate = |kernel: Kernel| -> std::io::Result<StreamRate> {
        let mut one = 0.0f64;
        for _ in 0..passes {
            let t = Instant::now();
            kernel.pass(&mut a, &b, &mut c);
            one = one.max(gbytes_per_s(kernel, elements, t.elapsed().as_secs_f64()));
        }
        let mut all = one;
        if threads > 1 {
            all = 0.0;
            let split = shares(&mut a, &mut b, &mut c, chunk);
            for _ in 0..passes {
                let team = team_pass(&split, |a, b, c| kernel.pass(a, b, c))?;
                pinned &= team.pinned;
                all = all.max(gbytes_per_s(kernel, elements, team.wall_s));
            }
        }
        Ok(StreamRate {
            one_thread_gbytes_per_s: one,
            all_threads_gbytes_per_s: all,
        })
    };
    let copy = rate(Kernel::Copy)?;
    let triad = rate(Kernel::Triad)?;
    std::hint::black_box((&a, &c));
    let pinned = pinned && threads > 1;
    let array_bytes = elements as u64 * 4;
    Ok(Bandwidth {
        copy,
        triad,
        threads,
        array_bytes,
        llc_bytes,
        pinned,
        method: format!(
            "STREAM copy (memcpy) and triad over three arrays of {} f32 ({} each{}), bytes \
             counted as STREAM does (copy {COPY_BYTES_PER_ELEMENT}, triad \
             {TRIAD_BYTES_PER_ELEMENT} per element), best of {passes} passes; all threads: one \
             per CPU{}, each over its share",
            crate::units::grouped(elements as u64),
            crate::units::human_bytes(array_bytes),
            match llc_bytes {
                Some(llc) => format!("; last-level cache {}", crate::units::human_bytes(llc)),
                None => String::new(),
            },
            if pinned { ", each pinned" } else { "" },
        ),
    })
}

/// A thread's share of the three arrays.
type Share<'a> = Mutex<(&'a mut [f32], &'a mut [f32], &'a mut [f32])>;

/// The arrays cut into shares of `chunk` elements, one per thread.
fn shares<'a>(
    a: &'a mut [f32],
    b: &'a mut [f32],
    c: &'a mut [f32],
    chunk: usize,
) -> Vec<Share<'a>> {
    a.chunks_mut(chunk)
        .zip(b.chunks_mut(chunk))
        .zip(c.chunks_mut(chunk))
        .map(|((a, b), c)| Mutex::new((a, b, c)))
        .collect()
}

/// `work` on every share at once, a thread each. Each thread locks its own share only, so no
/// lock is ever contended.
fn team_pass(
    shares: &[Share<'_>],
    work: impl Fn(&mut [f32], &mut [f32], &mut [f32]) + Sync,
) -> std::io::Result<TeamRun> {
    run_team(shares.len(), |i| {
        let mut share = shares[i].lock().unwrap_or_else(|e| e.into_inner());
        let (a, b, c) = &mut *share;
        work(a, b, c);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_counted_as_stream_counts_them() {
        // 1000 elements copied in 1 µs: 8,000 bytes, 8 GB/s; a triad moves 12,000.
        assert!((gbytes_per_s(Kernel::Copy, 1000, 1e-6) - 8.0).abs() < 1e-9);
        assert!((gbytes_per_s(Kernel::Triad, 1000, 1e-6) - 12.0).abs() < 1e-9);
    }

    #[test]
    fn the_kernels_compute_what_stream_does() {
        let (mut a, b, mut c) = (vec![1.0f32; 5], vec![2.0f32; 5], vec![0.5f32; 5]);
        Kernel::Triad.pass(&mut a, &b, &mut c);
        assert_eq!(a, [3.5; 5]);
        Kernel::Copy.pass(&mut a, &b, &mut c);
        assert_eq!(c, [3.5; 5]);
    }

    #[test]
    fn a_tiny_run_gives_positive_finite_figures_and_states_its_arrays() {
        let bw = measure_over(4099, 2, 3, Some(1 << 20)).unwrap();
        for v in [
            bw.copy.one_thread_gbytes_per_s,
            bw.copy.all_threads_gbytes_per_s,
            bw.triad.one_thread_gbytes_per_s,
            bw.triad.all_threads_gbytes_per_s,
        ] {
            assert!(v.is_finite() && v > 0.0, "{bw:?}");
        }
        assert_eq!((bw.threads, bw.array_bytes), (3, 4099 * 4));
        assert!(!bw.past_cache());
        assert!(Bandwidth {
            array_bytes: 4 << 20,
            ..bw.clone()
        }
        .past_cache());
        assert!(!Bandwidth {
            llc_bytes: None,
            ..bw
        }
        .past_cache());
    }
}
