//! `params!`: a scenario's parameters declared once, as the table of their
//! [`ParamSpec`](super::ParamSpec)s and the struct they are read into, each field through the
//! getter its type calls for.

use super::{Choice, ParamError, Params};

/// A type a parameter is read as: the getter ([`Params::int`], `count`, `float`, `shape`,
/// `sizes`, `choice`) follows from it, so `params!` reads each field once.
pub trait FromParam: Sized {
    /// The value of the parameter `name`.
    fn from_param(params: &Params, name: &str) -> Result<Self, ParamError>;
}

/// `FromParam` for a type read by one of [`Params`]' getters (and converted by `map`).
macro_rules! from_param {
    ($($ty:ty => $get:ident $(.map($convert:expr))?;)+) => {$(
        impl FromParam for $ty {
            fn from_param(params: &Params, name: &str) -> Result<Self, ParamError> {
                params.$get(name)$(.map($convert))?
            }
        }
    )+};
}

from_param! {
    u64 => int;
    usize => count;
    f64 => float;
    Vec<usize> => shape.map(<[usize]>::to_vec);
    Vec<u64> => sizes.map(<[u64]>::to_vec);
}

impl<C: Choice> FromParam for C {
    fn from_param(params: &Params, name: &str) -> Result<Self, ParamError> {
        params.choice(name)
    }
}

/// Declares a scenario's parameters once: the `PARAMS` table of their [`ParamSpec`]s and the
/// struct they are read into, with `of(&Params)` reading each field by its name and as its
/// type ([`FromParam`]).
///
/// ```text
/// params! {
///     /// The parameters, read once.
///     struct Config {
///         /// products per run(x)                       <- the help
///         ops: u64 = Int { min: 1, max: 1000 }, "10";  // a ParamKind, the default
///         backend: Backend = BACKEND_PARAM;             // a ParamSpec shared by scenarios
///         timeout: Duration = TIMEOUT_PARAM => Duration::from_secs_f64;
///         #[name = "bucket_mb"]
///         bucket_bytes: f64 = Float { min: 0.0, max: 1e6 }, "25" => |mb: f64| mb * MIB;
///     }
/// }
/// ```
///
/// A field's doc comment is its help; its name is the parameter's unless `#[name]` says
/// otherwise; `#[cfg_attr]` passes to the field. `=> f` converts the value read (as `f`'s argument type); `f` may use the fields
/// declared before it.
#[macro_export]
#[doc(hidden)]
macro_rules! __params {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $(
            $(#[doc = $doc:literal])*
            $(#[cfg_attr $cfg:tt])*
            $(#[name = $pname:literal])?
            $field:ident: $ty:ty = $spec:expr $(, $default:literal)? $(=> $convert:expr)?;
        )+
    }) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[doc = $doc])* $(#[cfg_attr $cfg])* $field: $ty,)+
        }

        /// The parameters, in the order the help and the report list them.
        const PARAMS: &[$crate::scenario::ParamSpec] = {
            #[allow(unused_imports)]
            use $crate::scenario::ParamKind::*;
            &[$($crate::scenario::params::params!(@spec $field [$($pname)?] [$($doc)*] $spec $(, $default)?)),+]
        };

        impl $name {
            /// Every parameter, read once.
            $vis fn of(
                params: &$crate::scenario::Params,
            ) -> Result<$name, $crate::scenario::ParamError> {
                $(
                    let $field = <_ as $crate::scenario::params::FromParam>::from_param(
                        params,
                        $crate::scenario::params::params!(@name $field $($pname)?),
                    )$(.map($convert))??;
                )+
                Ok($name { $($field),+ })
            }
        }
    };
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $pname:literal) => { $pname };
    (@spec $field:ident [$($pname:literal)?] [$($doc:literal)*] $kind:expr, $default:literal) => {
        $crate::scenario::ParamSpec {
            name: $crate::scenario::params::params!(@name $field $($pname)?),
            help: concat!($($doc),*).trim_ascii_start(),
            kind: $kind,
            default: $default,
        }
    };
    (@spec $field:ident [] [] $spec:expr) => { $spec };
}

#[cfg(test)]
mod tests {
    use super::super::{params, undeclared, DeviceChoice, ParamKind, ParamSpec};
    use super::*;

    /// A parameter whose declaration is shared by scenarios.
    const SHARED: ParamSpec = ParamSpec {
        name: "lr",
        help: "rate",
        kind: ParamKind::Float { min: 0.0, max: 1.0 },
        default: "0.1",
    };

    params! {
        struct Declared {
            /// ops per loop,
            /// on two lines
            iterations: u64 = Int { min: 1, max: 100 }, "10";
            /// shape of x
            #[name = "shape"]
            elements: usize = Shape { max_dims: 3 }, "1,2" => |s: Vec<usize>| s.iter().product();
            lr: f64 = SHARED;
            /// where it runs
            device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
            /// after `elements`
            more: u64 = Int { min: 0, max: 9 }, "1" => |m: u64| m + elements as u64;
        }
    }

    #[test]
    fn params_declares_the_table_and_reads_each_field_as_its_type() {
        let table: Vec<_> = PARAMS.iter().map(|p| (p.name, p.help, p.default)).collect();
        assert_eq!(
            table,
            [
                ("iterations", "ops per loop, on two lines", "10"),
                ("shape", "shape of x", "1,2"),
                ("lr", "rate", "0.1"),
                ("device", "where it runs", "cpu"),
                ("more", "after `elements`", "1"),
            ]
        );
        assert_eq!(PARAMS[0].kind, ParamKind::Int { min: 1, max: 100 });
        assert_eq!(PARAMS[1].kind, ParamKind::Shape { max_dims: 3 });
        let given = [("shape", "3x4"), ("device", "cuda"), ("iterations", "7")]
            .map(|(n, v)| (n.to_string(), v.to_string()));
        let d = Declared::of(&Params::parse("t", PARAMS, &given).unwrap()).unwrap();
        assert_eq!(
            (d.iterations, d.elements, d.lr, d.device, d.more),
            (7, 12, 0.1, DeviceChoice::Cuda, 13)
        );
    }

    mod mistyped {
        use super::*;

        params! {
            struct Mistyped {
                /// declared a whole number, read as a real one
                iterations: f64 = Int { min: 1, max: 100 }, "10";
            }
        }

        #[test]
        fn a_field_read_as_another_kind_than_declared_is_an_error() {
            let p = Params::parse("t", PARAMS, &[]).unwrap();
            assert_eq!(
                Mistyped::of(&p).map(|m| m.iterations),
                Err(undeclared("iterations", "a number"))
            );
        }
    }
}
