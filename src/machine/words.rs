//! The limits worded for a reader, one line each, as `parbench devices --probe` prints them:
//! "f32 FMA peak: 187.3 GFLOP/s per core, 374.1 GFLOP/s on 2 cores (AVX-512)".

use crate::units::{human_bytes, human_gbytes_per_s, human_gflops, human_ghz, human_time};

use super::limits::Limits;
use super::memory::{Bandwidth, StreamRate};
use super::probe::Probe;

impl Limits {
    /// One line per limit; a limit not measured says why.
    pub fn lines(&self) -> Vec<String> {
        vec![
            line("f32 FMA peak", &self.fma, |f| {
                format!(
                    "{} per core, {} on {} ({})",
                    human_gflops(f.per_core_gflops),
                    human_gflops(f.all_cores_gflops),
                    crate::units::count(f.cores, "core"),
                    f.unit.as_str()
                )
            }),
            line("clock", &self.clock, |c| {
                format!("{} (dependent imul chain)", human_ghz(c.ghz))
            }),
            line("memory copy", &self.memory, |m| stream(m, &m.copy)),
            line("memory triad", &self.memory, |m| stream(m, &m.triad)),
            line("cache line between cores", &self.line, |l| {
                format!("{} one way", human_time(l.one_way_s))
            }),
            line("closure handed to a thread", &self.channel, |c| {
                format!(
                    "{} each (through a channel, no engine)",
                    human_time(c.per_op_s)
                )
            }),
        ]
    }
}

/// "what: figures", or "what: not measured (reason)".
fn line<T>(what: &str, probe: &Probe<T>, words: impl Fn(&T) -> String) -> String {
    match probe {
        Probe::Measured(v) => format!("{what}: {}", words(v)),
        Probe::NotMeasured(why) => format!("{what}: not measured ({why})"),
    }
}

/// "11.2 GB/s on 1 thread, 14.9 GB/s on 2", and a warning when the arrays may sit in cache.
fn stream(m: &Bandwidth, rate: &StreamRate) -> String {
    let mut out = format!(
        "{} on 1 thread, {} on {}",
        human_gbytes_per_s(rate.one_thread_gbytes_per_s),
        human_gbytes_per_s(rate.all_threads_gbytes_per_s),
        m.threads
    );
    if !m.past_cache() {
        let cache = match m.llc_bytes {
            Some(llc) => format!("4× the {} last-level cache", human_bytes(llc)),
            None => "4× the last-level cache (its size unknown)".into(),
        };
        out += &format!(
            " ({} arrays, under {cache}: part may come from the cache)",
            human_bytes(m.array_bytes)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{ChannelHandoff, Clock, FmaPeak, LineLatency};

    fn measured() -> Limits {
        let rate = |one, all| StreamRate {
            one_thread_gbytes_per_s: one,
            all_threads_gbytes_per_s: all,
        };
        Limits {
            fma: Probe::Measured(FmaPeak::of_two_cores(187.34, 374.1)),
            clock: Probe::Measured(Clock {
                ghz: 3.1,
                method: String::new(),
            }),
            memory: Probe::Measured(Bandwidth {
                copy: rate(11.2, 14.9),
                triad: rate(12.0, 15.5),
                threads: 2,
                array_bytes: 64 << 20,
                llc_bytes: Some(16 << 20),
                pinned: true,
                method: String::new(),
            }),
            line: Probe::Measured(LineLatency {
                one_way_s: 41e-9,
                method: String::new(),
            }),
            channel: Probe::Measured(ChannelHandoff {
                per_op_s: 182e-9,
                method: String::new(),
            }),
            probe_s: 0.3,
        }
    }

    #[test]
    fn each_limit_is_one_line_in_its_unit() {
        assert_eq!(
            measured().lines(),
            [
                "f32 FMA peak: 187.3 GFLOP/s per core, 374.1 GFLOP/s on 2 cores (AVX-512)",
                "clock: 3.10 GHz (dependent imul chain)",
                "memory copy: 11.2 GB/s on 1 thread, 14.9 GB/s on 2",
                "memory triad: 12.0 GB/s on 1 thread, 15.5 GB/s on 2",
                "cache line between cores: 41.00 ns one way",
                "closure handed to a thread: 182.0 ns each (through a channel, no engine)",
            ]
        );
    }

    #[test]
    fn arrays_within_the_cache_and_missing_probes_say_so() {
        let mut limits = measured();
        if let Probe::Measured(m) = &mut limits.memory {
            m.llc_bytes = Some(480 << 20);
        }
        limits.clock = Probe::NotMeasured("this is aarch64".into());
        let lines = limits.lines();
        assert_eq!(lines[1], "clock: not measured (this is aarch64)");
        assert_eq!(
            lines[2],
            "memory copy: 11.2 GB/s on 1 thread, 14.9 GB/s on 2 (64.0 MiB arrays, under 4× the \
             480.0 MiB last-level cache: part may come from the cache)"
        );
        let none = Limits::not_measured("debug build").lines();
        assert_eq!(none.len(), 6);
        assert!(none
            .iter()
            .all(|l| l.ends_with(": not measured (debug build)")));
    }
}
