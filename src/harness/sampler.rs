//! The sampler: warm-up, then rounds of every variant until a minimum count and a minimum time
//! are both reached (or a cap is hit).
//!
//! Variants are interleaved, one sample of each per round and the starting variant rotated
//! every round, so slow drift of the machine (frequency, the other core's load, page cache)
//! hits all variants alike instead of whichever ran last.

use std::time::{Duration, Instant};

use super::stats::Summary;

/// How many samples to take.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Untimed rounds before measuring (caches, allocator, thread wake-up).
    pub warmup: usize,
    /// Rounds to measure at least...
    pub min_samples: usize,
    /// ...and at most.
    pub max_samples: usize,
    /// Keep measuring until this much time went into measured rounds (after `min_samples`).
    pub min_time: Duration,
    /// Stop after this much measuring time even below `min_samples` (but never below 3
    /// samples, the fewest a median and spread mean anything with).
    pub max_time: Duration,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            warmup: 1,
            min_samples: 10,
            max_samples: 200,
            min_time: Duration::from_secs(1),
            max_time: Duration::from_secs(60),
        }
    }
}

/// Sampling bounds that cannot be met; each names the offending option.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    #[error("--min-samples must be at least 1")]
    NoSamples,
    #[error("--max-samples ({max}) must be at least --min-samples ({min})")]
    MaxBelowMinSamples { max: usize, min: usize },
    #[error("--max-time ({max:?}) must be at least --min-time ({min:?})")]
    MaxBelowMinTime { max: Duration, min: Duration },
    #[error("seconds must be from 0 to 86400, got {0}")]
    Seconds(f64),
}

impl SamplerConfig {
    /// Check the bounds make sense; the error names the offending option.
    pub fn validate(&self) -> Result<(), SamplingError> {
        if self.min_samples == 0 {
            return Err(SamplingError::NoSamples);
        }
        if self.max_samples < self.min_samples {
            return Err(SamplingError::MaxBelowMinSamples {
                max: self.max_samples,
                min: self.min_samples,
            });
        }
        if self.max_time < self.min_time {
            return Err(SamplingError::MaxBelowMinTime {
                max: self.max_time,
                min: self.min_time,
            });
        }
        Ok(())
    }
}

/// A time option in seconds (`--min-time`, a suite's `min_time`): finite, 0 to a day.
pub fn seconds(v: f64) -> Result<Duration, SamplingError> {
    if v.is_finite() && (0.0..=86_400.0).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(SamplingError::Seconds(v))
    }
}

/// One variant of an experiment: a name and a closure that runs it once and returns the time
/// that counts (usually the whole run, synchronized; for `push-only`, deliberately not).
pub struct Variant<'a, E> {
    pub name: String,
    run: Box<dyn FnMut() -> Result<Duration, E> + 'a>,
}

impl<'a, E> Variant<'a, E> {
    pub fn new(name: impl Into<String>, run: impl FnMut() -> Result<Duration, E> + 'a) -> Self {
        Variant {
            name: name.into(),
            run: Box::new(run),
        }
    }

    /// Run once outside sampling (e.g. a traced repeat); returns the time it reports.
    pub fn run_once(&mut self) -> Result<Duration, E> {
        (self.run)()
    }
}

/// Where sampling stands, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub rounds_done: usize,
    /// Best guess of the rounds the stopping rule will allow.
    pub rounds_expected: usize,
}

/// Runs variants by the rules of a [`SamplerConfig`].
pub struct Sampler<'p> {
    config: SamplerConfig,
    progress: Option<&'p dyn Fn(Progress)>,
}

impl<'p> Sampler<'p> {
    pub fn new(config: SamplerConfig) -> Self {
        Sampler {
            config,
            progress: None,
        }
    }

    /// Report progress after every round.
    pub fn with_progress(mut self, f: &'p dyn Fn(Progress)) -> Self {
        self.progress = Some(f);
        self
    }

    /// Measure every variant; summaries come back in the variants' order.
    pub fn run<E>(&self, variants: &mut [Variant<'_, E>]) -> Result<Vec<Summary>, E> {
        let c = &self.config;
        let n = variants.len();
        for _ in 0..c.warmup {
            for v in variants.iter_mut() {
                (v.run)()?;
            }
        }
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
        let start = Instant::now();
        let mut rounds = 0usize;
        while n > 0 && !self.done(rounds, start.elapsed()) {
            for k in 0..n {
                let i = (rounds + k) % n;
                let t = (variants[i].run)()?;
                samples[i].push(t.as_secs_f64());
            }
            rounds += 1;
            if let Some(report) = self.progress {
                report(Progress {
                    rounds_done: rounds,
                    rounds_expected: self.expected_rounds(rounds, start.elapsed()),
                });
            }
        }
        Ok(samples
            .iter()
            .map(|s| Summary::from_samples(s).expect("durations are finite and rounds >= 1"))
            .collect())
    }

    fn done(&self, rounds: usize, elapsed: Duration) -> bool {
        let c = &self.config;
        rounds >= c.max_samples.max(1)
            || (rounds >= c.min_samples && elapsed >= c.min_time)
            || (rounds >= c.min_samples.min(3) && elapsed >= c.max_time)
    }

    fn expected_rounds(&self, rounds: usize, elapsed: Duration) -> usize {
        let c = &self.config;
        let per_round = elapsed.as_secs_f64() / rounds.max(1) as f64;
        // The rounds that fit in `time`, or `otherwise` before a round has taken any.
        let fit = |time: Duration, otherwise| match per_round > 0.0 {
            true => (time.as_secs_f64() / per_round).ceil() as usize,
            false => otherwise,
        };
        fit(c.min_time, c.min_samples)
            .max(c.min_samples)
            .min(c.max_samples)
            .min(fit(c.max_time, c.max_samples).max(3))
            .max(rounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn quick(min: usize, max: usize) -> SamplerConfig {
        SamplerConfig {
            warmup: 2,
            min_samples: min,
            max_samples: max,
            min_time: Duration::ZERO,
            max_time: Duration::from_secs(60),
        }
    }

    #[test]
    fn takes_min_samples_after_warmup_and_interleaves() {
        let order = RefCell::new(Vec::new());
        let mut vs: Vec<Variant<'_, ()>> = ["a", "b", "c"]
            .iter()
            .map(|&name| {
                let order = &order;
                Variant::new(name, move || {
                    order.borrow_mut().push(name);
                    Ok(Duration::from_millis(1))
                })
            })
            .collect();
        let s = Sampler::new(quick(4, 100)).run(&mut vs).unwrap();
        drop(vs);
        assert_eq!(s.len(), 3);
        assert!(s.iter().all(|x| x.samples_s.len() == 4));
        let order = order.into_inner();
        assert_eq!(order.len(), 3 * (2 + 4), "2 warm-up rounds + 4 measured");
        // Measured rounds rotate the starting variant.
        assert_eq!(&order[6..9], ["a", "b", "c"]);
        assert_eq!(&order[9..12], ["b", "c", "a"]);
        assert_eq!(&order[12..15], ["c", "a", "b"]);
    }

    #[test]
    fn min_time_extends_max_samples_caps_and_max_time_keeps_three_samples() {
        let long = SamplerConfig {
            min_time: Duration::from_secs(3600),
            ..quick(2, 7)
        };
        let short = SamplerConfig {
            max_time: Duration::ZERO,
            ..quick(50, 100)
        };
        for (cfg, samples) in [(long, 7), (short, 3)] {
            let mut vs = vec![Variant::new("x", || Ok::<_, ()>(Duration::from_micros(1)))];
            let s = Sampler::new(cfg).run(&mut vs).unwrap();
            assert_eq!(s[0].samples_s.len(), samples);
        }
    }

    #[test]
    fn errors_stop_sampling() {
        let mut calls = 0;
        let mut vs = vec![Variant::new("x", || {
            calls += 1;
            if calls == 3 {
                Err("broken")
            } else {
                Ok(Duration::ZERO)
            }
        })];
        assert_eq!(
            Sampler::new(quick(5, 5)).run(&mut vs).unwrap_err(),
            "broken"
        );
    }

    #[test]
    fn validation_names_the_option() {
        for (config, option) in [
            (quick(5, 4), "--max-samples"),
            (quick(0, 4), "--min-samples"),
        ] {
            let e = config.validate().unwrap_err().to_string();
            assert!(e.contains(option), "{e}");
        }
    }
}
