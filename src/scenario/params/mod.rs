//! Scenario parameters: declared once per scenario, parsed the same way from the command line,
//! suite files and sweep axes, and written to the JSON report under their names.

use serde_json::{Map, Value};

mod declare;
pub use super::super::__params as params;
pub use declare::FromParam;

/// The type and bounds of a parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    /// A whole number in `min..=max`.
    Int { min: u64, max: u64 },
    /// A tensor shape: 1 to `max_dims` positive dimensions, written `1,2`, `1x2` or `(1, 2)`.
    Shape { max_dims: usize },
    /// A real number in `min..=max`.
    Float { min: f64, max: f64 },
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A list of 1 to `max_items` byte counts in `1..=max`, each `4096`, `4K`, `4KiB` or `1MB`
    /// (K, M and G are binary, as in nccl-tests), or `8..1GiB`: the powers of two from one to
    /// the other.
    Sizes { max: u64, max_items: usize },
}

#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    /// Name in reports and suites (`cpu_size`); the option is `--cpu-size`.
    pub name: &'static str,
    pub help: &'static str,
    pub kind: ParamKind,
    pub default: &'static str,
}

impl ParamSpec {
    /// The command-line flag, without dashes.
    pub fn flag(&self) -> String {
        self.name.replace('_', "-")
    }

    /// The largest value this parameter allows, as the command line writes it (a shape: each
    /// dimension at 100,000); `None` for a choice.
    pub fn largest(&self) -> Option<String> {
        match self.kind {
            ParamKind::Int { max, .. } | ParamKind::Sizes { max, .. } => Some(max.to_string()),
            ParamKind::Float { max, .. } => Some(max.to_string()),
            ParamKind::Shape { max_dims } => Some(vec!["100000"; max_dims].join("x")),
            ParamKind::Choice(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Int(u64),
    Shape(Vec<usize>),
    Float(f64),
    Text(String),
    Sizes(Vec<u64>),
}

impl ParamValue {
    fn to_json(&self) -> Value {
        match self {
            ParamValue::Int(v) => Value::from(*v),
            ParamValue::Shape(s) => Value::from(s.clone()),
            ParamValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            ParamValue::Text(t) => Value::from(t.clone()),
            ParamValue::Sizes(s) => Value::from(s.clone()),
        }
    }
}

/// A parameter value that does not parse or is out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("invalid value '{value}' for --{flag}: {reason}")]
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    #[error("unknown parameter '{name}' for scenario '{scenario}' (it takes: {known})")]
    Unknown {
        scenario: String,
        name: String,
        known: String,
    },
    /// A scenario read a parameter it does not declare, or as another kind than it declares:
    /// a programming error, caught by the test that configures every scenario from its
    /// defaults.
    #[error("parameter '{name}' is not declared as {wanted}")]
    Undeclared { name: String, wanted: &'static str },
}

/// A parameter whose value is one of a fixed set of words, read as an enum of its own
/// ([`Params::choice`]); declared with `choice!`.
pub trait Choice: Sized + Copy + 'static {
    /// Every word, as the command line takes it: the parameter's [`ParamKind::Choice`].
    const WORDS: &'static [&'static str];
    /// The value a word names.
    fn from_word(word: &str) -> Option<Self>;
    /// The word that names this value.
    fn word(self) -> &'static str;
}

/// An enum of the words a [`ParamKind::Choice`] parameter takes, implementing [`Choice`]:
/// `choice! { pub enum Backend { Engine = "engine", Mpi = "mpi" } }`.
macro_rules! choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $crate::scenario::Choice for $name {
            const WORDS: &'static [&'static str] = &[$($word),+];
            fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some(Self::$variant),)+
                    _ => None,
                }
            }
            fn word(self) -> &'static str {
                match self {
                    $(Self::$variant => $word),+
                }
            }
        }
    };
}
pub(crate) use choice;

choice! {
    /// Where a scenario with a `--device` parameter runs: a CPU device, or the GPU (an error
    /// without a usable one unless `--fallback` accepts a CPU device).
    pub enum DeviceChoice {
        Cpu = "cpu",
        Cuda = "cuda",
    }
}

/// The `--device` parameter every scenario that offers one declares (default `cpu`).
pub const DEVICE_PARAM: &str = "device";

pub fn parse_value(spec: &ParamSpec, raw: &str) -> Result<ParamValue, ParamError> {
    let invalid = |reason: String| ParamError::Invalid {
        flag: spec.flag(),
        value: raw.to_string(),
        reason,
    };
    let text = raw.trim();
    match spec.kind {
        ParamKind::Int { min, max } => {
            let v: u64 = text
                .replace('_', "")
                .parse()
                .map_err(|_| invalid(format!("expected a whole number from {min} to {max}")))?;
            if v < min || v > max {
                return Err(invalid(format!("must be from {min} to {max}")));
            }
            Ok(ParamValue::Int(v))
        }
        ParamKind::Float { min, max } => {
            let v: f64 = text
                .parse()
                .map_err(|_| invalid(format!("expected a number from {min} to {max}")))?;
            if !v.is_finite() || v < min || v > max {
                return Err(invalid(format!("must be from {min} to {max}")));
            }
            Ok(ParamValue::Float(v))
        }
        ParamKind::Choice(words) => {
            let lower = text.to_ascii_lowercase();
            match words.iter().find(|w| **w == lower) {
                Some(w) => Ok(ParamValue::Text(w.to_string())),
                None => Err(invalid(format!("expected one of: {}", words.join(", ")))),
            }
        }
        ParamKind::Shape { max_dims } => {
            let inner = text
                .trim_start_matches(['(', '['])
                .trim_end_matches([')', ']']);
            let dims: Vec<&str> = inner
                .split([',', 'x', 'X'])
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .collect();
            let shape_reason =
                format!("expected 1 to {max_dims} positive dimensions such as 1,2 or 1000x1000");
            if dims.is_empty() || dims.len() > max_dims {
                return Err(invalid(shape_reason));
            }
            let shape: Vec<usize> = dims
                .iter()
                .map(|d| d.parse().ok().filter(|&v| v > 0))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid(shape_reason))?;
            if shape
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .is_none()
            {
                return Err(invalid("the number of elements overflows".into()));
            }
            Ok(ParamValue::Shape(shape))
        }
        ParamKind::Sizes { max, max_items } => {
            let reason = || {
                format!(
                    "expected up to {max_items} sizes from 1 to {max} bytes such as 8,4K,1MiB \
                     or a range of powers of two such as 8..64MiB"
                )
            };
            let mut sizes = Vec::new();
            for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                match item.split_once("..") {
                    Some((from, to)) => {
                        let (from, to) = (
                            byte_size(from).ok_or_else(|| invalid(reason()))?,
                            byte_size(to).ok_or_else(|| invalid(reason()))?,
                        );
                        if from == 0 || from > to {
                            return Err(invalid(reason()));
                        }
                        let mut s = from;
                        while s <= to && sizes.len() <= max_items {
                            sizes.push(s);
                            s = s.saturating_mul(2);
                            if s == u64::MAX {
                                break;
                            }
                        }
                    }
                    None => sizes.push(byte_size(item).ok_or_else(|| invalid(reason()))?),
                }
                if sizes.len() > max_items {
                    return Err(invalid(reason()));
                }
            }
            if sizes.is_empty() || sizes.iter().any(|&s| s == 0 || s > max) {
                return Err(invalid(reason()));
            }
            Ok(ParamValue::Sizes(sizes))
        }
    }
}

/// A byte count: digits and an optional unit, `B`, `K`/`KB`/`KiB`, `M`..., `G`... (binary).
pub fn byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.replace('_', "").parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

fn undeclared(name: &str, wanted: &'static str) -> ParamError {
    ParamError::Undeclared {
        name: name.into(),
        wanted,
    }
}

/// `Params`' typed getters: each reads one `ParamValue` variant; a parameter of another type
/// is as undeclared as a missing one, and the error says what was wanted.
macro_rules! getters {
    ($($(#[$doc:meta])* $get:ident -> $ty:ty = $variant:ident($v:ident) => $out:expr, $wanted:literal;)*) => {$(
        $(#[$doc])*
        pub fn $get(&self, name: &str) -> Result<$ty, ParamError> {
            match self.get(name, $wanted)? {
                ParamValue::$variant($v) => Ok($out),
                _ => Err(undeclared(name, $wanted)),
            }
        }
    )*};
}

/// The values of every parameter of a scenario, in declaration order. A scenario reads them
/// once, into a configuration struct of its own (`Config::of`), through the typed getters
/// below; everything after that reads the struct.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    values: Vec<(&'static str, ParamValue)>,
}

impl Params {
    /// The parameters of a scenario that declares none (a suite's commands).
    pub fn none() -> Params {
        Params { values: Vec::new() }
    }

    /// Start from the defaults and apply `given` (name, raw value) pairs in order.
    pub fn parse(
        scenario: &str,
        specs: &[ParamSpec],
        given: &[(String, String)],
    ) -> Result<Params, ParamError> {
        let mut values = specs
            .iter()
            .map(|spec| Ok((spec.name, parse_value(spec, spec.default)?)))
            .collect::<Result<Vec<_>, ParamError>>()?;
        for (name, raw) in given {
            let key = name.replace('-', "_");
            let Some(i) = specs.iter().position(|s| s.name == key) else {
                return Err(ParamError::Unknown {
                    scenario: scenario.into(),
                    name: name.clone(),
                    known: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
                });
            };
            values[i].1 = parse_value(&specs[i], raw)?;
        }
        Ok(Params { values })
    }

    fn get(&self, name: &str, wanted: &'static str) -> Result<&ParamValue, ParamError> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .ok_or_else(|| undeclared(name, wanted))
    }

    /// The product of the sizes and counts (whole numbers above 0, shapes' elements, size
    /// lists' totals): the generic guess at a point's work that [`super::Scenario::work`]
    /// starts from.
    pub fn size_product(&self) -> f64 {
        self.values
            .iter()
            .map(|(_, v)| match v {
                ParamValue::Int(n) if *n > 0 => *n as f64,
                ParamValue::Shape(dims) => dims.iter().map(|&d| d as f64).product(),
                ParamValue::Sizes(sizes) => sizes.iter().map(|&b| b as f64).sum(),
                _ => 1.0,
            })
            .product()
    }

    getters! {
        int -> u64 = Int(v) => *v, "a whole number";
        /// A `Sizes` parameter, in bytes.
        sizes -> &[u64] = Sizes(v) => v, "a list of sizes";
        shape -> &[usize] = Shape(v) => v, "a shape";
        float -> f64 = Float(v) => *v, "a number";
    }

    /// An `Int` parameter as a count or size in memory (`usize`).
    pub fn count(&self, name: &str) -> Result<usize, ParamError> {
        let v = self.int(name)?;
        usize::try_from(v).map_err(|_| ParamError::Invalid {
            flag: name.replace('_', "-"),
            value: v.to_string(),
            reason: "too large for this machine's address space".into(),
        })
    }

    /// A `Choice` parameter, as the enum of its words.
    pub fn choice<C: Choice>(&self, name: &str) -> Result<C, ParamError> {
        match self.get(name, "a choice")? {
            ParamValue::Text(word) => {
                C::from_word(word).ok_or_else(|| undeclared(name, "a choice"))
            }
            _ => Err(undeclared(name, "a choice")),
        }
    }

    /// The `--device` a scenario that declares one asks for; `None` for a scenario without
    /// it (for code shared by all scenarios, such as the GPU check before a plan runs).
    pub fn device(&self) -> Result<Option<DeviceChoice>, ParamError> {
        match self.values.iter().any(|(n, _)| *n == DEVICE_PARAM) {
            true => self.choice(DEVICE_PARAM).map(Some),
            false => Ok(None),
        }
    }

    /// The values as the report's `parameters` object.
    pub fn to_json(&self) -> Map<String, Value> {
        self.values
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_json()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parameter without help.
    const fn spec(name: &'static str, kind: ParamKind, default: &'static str) -> ParamSpec {
        ParamSpec {
            name,
            help: "",
            kind,
            default,
        }
    }

    const SPECS: &[ParamSpec] = &[
        spec("iterations", ParamKind::Int { min: 1, max: 100 }, "10"),
        spec("shape", ParamKind::Shape { max_dims: 3 }, "1,2"),
        spec("lr", ParamKind::Float { min: 0.0, max: 1.0 }, "0.1"),
        spec("device", ParamKind::Choice(DeviceChoice::WORDS), "cpu"),
    ];

    fn parse(given: &[(&str, &str)]) -> Result<Params, ParamError> {
        let given: Vec<(String, String)> = given
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Params::parse("t", SPECS, &given)
    }

    #[test]
    fn defaults_and_overrides() {
        // The size product multiplies counts and shapes only.
        let p = parse(&[("iterations", "42"), ("shape", "(3, 4)"), ("lr", "0.5")]).unwrap();
        assert_eq!(p.size_product(), 42.0 * 12.0);
        let p = parse(&[("iterations", "42"), ("shape", "(3, 4)")]).unwrap();
        assert_eq!(p.int("iterations"), Ok(42));
        assert_eq!(p.count("iterations"), Ok(42));
        assert_eq!(p.shape("shape"), Ok(&[3, 4][..]));
        assert_eq!(p.float("lr"), Ok(0.1));
        assert_eq!(p.choice::<DeviceChoice>("device"), Ok(DeviceChoice::Cpu));
        assert_eq!(p.device(), Ok(Some(DeviceChoice::Cpu)));
        assert_eq!(
            parse(&[("shape", "1000x1000")]).unwrap().shape("shape"),
            Ok(&[1000, 1000][..])
        );
        let json = serde_json::to_string(&p.to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"iterations":42,"shape":[3,4],"lr":0.1,"device":"cpu"}"#
        );
    }

    /// A bad value names its flag, an unknown parameter the known ones.
    #[test]
    fn bad_values_name_the_flag() {
        for (given, want) in [
            (("iterations", "0"), "invalid value '0' for --iterations: must be from 1 to 100"),
            (("device", "tpu"), "invalid value 'tpu' for --device: expected one of: cpu, cuda"),
            (("iters", "3"), "unknown parameter 'iters' for scenario 't' (it takes: iterations, shape, lr, device)"),
        ] {
            assert_eq!(parse(&[given]).unwrap_err().to_string(), want);
        }
        for bad in [
            ("iterations", "-3"),
            ("iterations", "abc"),
            ("lr", "NaN"),
            ("lr", "2"),
        ] {
            assert!(parse(&[bad]).is_err(), "{bad:?}");
        }
        for bad in ["-3", "abc", "0,2", "", "1,2,3,4", "99999999999x99999999999"] {
            let e = parse(&[("shape", bad)]).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("invalid value '{bad}' for --shape")),
                "{e}"
            );
        }
        assert_eq!(
            parse(&[("device", "CUDA")]).unwrap().device(),
            Ok(Some(DeviceChoice::Cuda))
        );
    }

    #[test]
    fn a_lookup_of_an_undeclared_or_mistyped_parameter_is_an_error_not_a_panic() {
        let p = parse(&[]).unwrap();
        assert_eq!(
            p.int("iteration"),
            Err(undeclared("iteration", "a whole number"))
        );
        assert_eq!(
            p.float("iterations"),
            Err(undeclared("iterations", "a number"))
        );
        assert_eq!(p.shape("lr"), Err(undeclared("lr", "a shape")));
        assert_eq!(
            p.choice::<DeviceChoice>("shape"),
            Err(undeclared("shape", "a choice"))
        );
        let without_device = Params::parse("t", &SPECS[..3], &[]).unwrap();
        assert_eq!(without_device.device(), Ok(None));
    }

    choice! {
        enum Colour {
            Red = "red",
            Blue = "blue",
        }
    }

    #[test]
    fn a_choice_reads_back_the_words_it_declares() {
        assert_eq!(Colour::WORDS, ["red", "blue"]);
        for word in Colour::WORDS {
            assert_eq!(Colour::from_word(word).map(Colour::word), Some(*word));
        }
        assert_eq!(Colour::from_word("green"), None);
        // A Choice spec whose words the enum does not know is a programming error, reported.
        let specs = [spec(
            "colour",
            ParamKind::Choice(&["red", "green"]),
            "green",
        )];
        let p = Params::parse("t", &specs, &[]).unwrap();
        assert!(p.choice::<Colour>("colour").is_err());
        assert_eq!(
            Params::parse("t", &specs, &[("colour".into(), "red".into())])
                .unwrap()
                .choice::<Colour>("colour"),
            Ok(Colour::Red)
        );
    }
}
