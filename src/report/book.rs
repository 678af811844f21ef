//! The book's own figures, quoted with their sources: what the chapter printed for the
//! experiment a scenario reproduces, so a run can set the reader's figure beside it. A figure
//! that states the work it timed also carries the rate it implies, and a rate no device reaches
//! says the book stopped its clock without waiting.
//!
//! A scenario declares its figures once, as `const`s beside it; their text fields are
//! `Cow<'static, str>` so the declaration is a constant and a report read back owns its text.

use std::borrow::Cow;

use serde::ser::Error;
use serde::{Deserialize, Serialize, Serializer};

use crate::units::{grouped, significant};

/// Above this many floating-point operations per second no device computes a dense f32 (or
/// TF32) matrix product: 2,000 TFLOP/s. An H100 SXM peaks at about 67 TFLOP/s in f32 and 495
/// in dense TF32 (989 only with 2:4 sparsity); the B200 generation at about 1,100 dense TF32.
/// The bound sits well above all of them, so a figure beyond it is a clock that stopped before
/// the work was done, never a fast machine.
pub const IMPOSSIBLE_FLOPS: f64 = 2.0e15;

/// Above this rate a dense product needs tensor cores (TF32 or lower precision): 100 TFLOP/s,
/// above the plain f32 peak of every GPU (an H100 SXM about 67, a B200 about 80). A figure
/// between this and [`IMPOSSIBLE_FLOPS`] is possible only on such hardware.
pub const BEYOND_F32_FLOPS: f64 = 1.0e14;

/// Which edition of the chapter a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edition {
    /// *Dive into Deep Learning* in TensorFlow 2 (the Chinese community edition).
    Tf2,
    /// The original MXNet edition.
    Mxnet,
    Pytorch,
    /// A TensorFlow 1 text on devices and data-parallel training.
    Tf1,
}

impl Edition {
    /// How a sentence names it.
    pub fn title(self) -> &'static str {
        match self {
            Edition::Tf2 => "TF 2 edition",
            Edition::Mxnet => "MXNet edition",
            Edition::Pytorch => "PyTorch edition",
            Edition::Tf1 => "TF 1 text",
        }
    }
}

/// Where a figure is printed: the edition, the section, and the source text in
/// `shared/seeds/` it was read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub edition: Edition,
    /// `§8.2`, or the section's title where the edition numbers none.
    pub section: Cow<'static, str>,
    pub seed: Cow<'static, str>,
}

impl Source {
    /// `TF 2 edition, §8.2`.
    pub fn cite(&self) -> String {
        format!("{}, {}", self.edition.title(), self.section)
    }
}

/// The unit the book printed a figure in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BookUnit {
    Seconds,
}

/// Whether the rate a figure implies is one a device can reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Plausibility {
    /// Within what a device computes, or a figure that states no work.
    Plausible,
    /// Above every GPU's plain f32 peak ([`BEYOND_F32_FLOPS`]): only tensor cores reach it.
    BeyondF32,
    /// Above every device ([`IMPOSSIBLE_FLOPS`]): the clock stopped before the work was done.
    Impossible,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct BookFigure {
    /// What was timed, as the book's code did it (`synchronous: 1000 × y = x + 1`).
    pub what: Cow<'static, str>,
    pub value: f64,
    pub unit: BookUnit,
    pub source: Source,
    /// The hardware, as far as the text states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<Cow<'static, str>>,
    /// How many ops the figure covers, for a time per op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<u64>,
    /// The floating-point operations of the matrix products it timed, for a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flop: Option<f64>,
}

impl BookFigure {
    /// A time the book printed, with its source and the hardware as far as the text states it;
    /// ops and work are added with the builders below.
    pub const fn seconds(
        what: &'static str,
        value: f64,
        source: Source,
        hardware: Option<&'static str>,
    ) -> BookFigure {
        BookFigure {
            what: Cow::Borrowed(what),
            value,
            unit: BookUnit::Seconds,
            source,
            hardware: match hardware {
                Some(h) => Some(Cow::Borrowed(h)),
                None => None,
            },
            ops: None,
            flop: None,
        }
    }

    pub const fn per(mut self, ops: u64) -> BookFigure {
        self.ops = Some(ops);
        self
    }

    /// `count` square products of `size`²: 2·size³ floating-point operations each.
    pub const fn products(mut self, count: u64, size: u64) -> BookFigure {
        self.flop = Some(2.0 * count as f64 * (size * size * size) as f64);
        self
    }

    /// The time per op, where the figure states its ops.
    pub fn per_op_s(&self) -> Option<f64> {
        self.ops.map(|n| self.value / n as f64)
    }

    /// The rate its work and time imply, in floating-point operations per second.
    pub fn implied_flops(&self) -> Option<f64> {
        self.flop
            .filter(|_| self.value > 0.0)
            .map(|f| f / self.value)
    }

    pub fn plausibility(&self) -> Plausibility {
        match self.implied_flops() {
            Some(r) if r > IMPOSSIBLE_FLOPS => Plausibility::Impossible,
            Some(r) if r > BEYOND_F32_FLOPS => Plausibility::BeyondF32,
            _ => Plausibility::Plausible,
        }
    }

    /// The figure as the book printed it: `3.5589 s`.
    pub fn printed(&self) -> String {
        match self.unit {
            // The book prints four decimals (`0.0010 sec`): so does the quotation.
            BookUnit::Seconds => format!("{:.4} s", self.value),
        }
    }

    /// The sentence that says the book's own figure cannot be the work's time, or `None` for
    /// a plausible one.
    pub fn doubt(&self) -> Option<String> {
        let tflops = |rate: f64| grouped((rate / 1e12).round() as u64);
        let why = match self.plausibility() {
            Plausibility::Plausible => return None,
            Plausibility::Impossible => format!(
                "beyond any device (no dense f32 or TF32 product reaches {} TFLOP/s): it timed \
                 the push, not the work — the pitfall `parbench async` shows as push-only.",
                tflops(IMPOSSIBLE_FLOPS)
            ),
            Plausibility::BeyondF32 => format!(
                "above every GPU's f32 peak ({} TFLOP/s at most): only tensor cores reach it, \
                 and a clock stopped before the work was done reads the same.",
                tflops(BEYOND_F32_FLOPS)
            ),
        };
        Some(format!(
            "the book's {} for {} ({}) would be {} TFLOP/s, {why}",
            self.printed(),
            self.what,
            self.source.cite(),
            tflops(self.implied_flops()?)
        ))
    }
}

impl Serialize for BookFigure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Its fields (`remote = "Self"`), then what they imply.
        let implied = [
            ("per_op_s", self.per_op_s()),
            ("implied_gflops", self.implied_flops().map(|r| r / 1e9)),
        ];
        let implied = implied
            .into_iter()
            .filter_map(|(k, v)| Some((k.into(), v?.into())));
        let plausibility = serde_json::to_value(self.plausibility()).map_err(Error::custom)?;
        let extra = implied.chain([("plausibility".into(), plausibility)]);
        let json = BookFigure::serialize(self, serde_json::value::Serializer);
        super::with_fields(json, None, extra, serializer)
    }
}

impl<'de> Deserialize<'de> for BookFigure {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BookFigure::deserialize(deserializer)
    }
}

/// `figures` as printed, each group cited by its own edition and section, in the order they
/// come: `3.5589 s, 1.0457 s (TF 2 edition, §8.2); 0.2660 s (75.2 GFLOP/s) (PyTorch edition,
/// asynchronous computation)`. A run may quote two editions; no figure is credited to
/// another's.
pub fn cited(figures: &[BookFigure]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for f in figures {
        let cite = f.source.cite();
        let group =
            super::find_or_push(&mut groups, |(c, _)| *c == cite, || (cite.clone(), vec![]));
        group.1.push(describe(f));
    }
    let cited: Vec<String> = groups
        .into_iter()
        .map(|(cite, printed)| format!("{} ({cite})", printed.join(", ")))
        .collect();
    cited.join("; ")
}

/// A figure worded for a reader: `0.0005 s (8,640 TFLOP/s: impossible)`.
pub fn describe(f: &BookFigure) -> String {
    let rate = f.implied_flops().map(|r| {
        if r >= 1e12 {
            format!("{} TFLOP/s", grouped((r / 1e12).round() as u64))
        } else {
            format!("{} GFLOP/s", significant(r / 1e9))
        }
    });
    match (rate, f.plausibility()) {
        (Some(r), Plausibility::Impossible) => format!("{} ({r}: impossible)", f.printed()),
        (Some(r), Plausibility::BeyondF32) => format!("{} ({r}: beyond f32)", f.printed()),
        (Some(r), Plausibility::Plausible) => format!("{} ({r})", f.printed()),
        (None, _) => f.printed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TF2_83: Source = Source {
        edition: Edition::Tf2,
        section: Cow::Borrowed("§8.3.1"),
        seed: Cow::Borrowed("000_48c684e6be24c8a6.txt"),
    };

    #[test]
    fn the_tf_editions_gpu_figure_is_impossible_and_its_cpu_figure_is_not() {
        let gpu = BookFigure::seconds("10 products of 6000² on the GPU", 0.0005, TF2_83, None)
            .products(10, 6000);
        assert_eq!(gpu.plausibility(), Plausibility::Impossible);
        let rate = gpu.implied_flops().expect("a rate");
        assert!((rate / 1e12 - 8640.0).abs() < 1.0, "{rate}");
        let doubt = gpu.doubt().expect("flagged");
        assert!(doubt.contains("8,640 TFLOP/s"), "{doubt}");
        assert!(doubt.contains("timed the push, not the work"), "{doubt}");

        let cpu = BookFigure::seconds("10 products of 2000² on the CPU", 1.2657, TF2_83, None)
            .products(10, 2000);
        assert_eq!(cpu.plausibility(), Plausibility::Plausible);
        assert!(cpu.doubt().is_none());
        assert!(describe(&cpu).contains("126 GFLOP/s"), "{}", describe(&cpu));

        let run = BookFigure::seconds("GPU run", 0.0047, TF2_83, None).products(10, 6000);
        assert_eq!(run.plausibility(), Plausibility::BeyondF32);
    }

    #[test]
    fn a_figure_reads_back_from_its_json() {
        let f = BookFigure::seconds("sync", 3.5589, TF2_83, Some("a GPU")).per(1000);
        let json = serde_json::to_value(&f).expect("serializes");
        assert_eq!(json["source"]["edition"], "tf2");
        assert_eq!(json["plausibility"], "plausible");
        assert!((json["per_op_s"].as_f64().expect("per op") - 3.5589e-3).abs() < 1e-12);
        let back: BookFigure = serde_json::from_value(json).expect("reads");
        assert_eq!(back, f);
    }
}
