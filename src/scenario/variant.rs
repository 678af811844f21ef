//! The variants a scenario times, as an enum of its own: each variant's name in the report is
//! written once, and everything that needs a variant (building its closure, labelling it,
//! looking its median up) matches on the enum, so a variant cannot be added in one place and
//! forgotten in another.

/// Declares a scenario's variants: `variants! { enum Timed { Sync = "sync", Async = "async" } }`
/// gives the enum (a [`Choice`](super::Choice) of its names), `Timed::ALL` in the order they are timed and reported, `name()` (the name in
/// the report), `names()` (all of them) and `add_to` (their summaries added to a run, labelled).
macro_rules! variants {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?
    }) => {
        $crate::scenario::params::choice! {
            $(#[$meta])* $vis enum $name { $($(#[$vmeta])* $variant = $word),+ }
        }

        #[allow(dead_code)]
        impl $name {
            /// Every variant, in the order they are timed and reported.
            $vis const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The variant's name in the report.
            $vis fn name(self) -> &'static str {
                <Self as $crate::scenario::Choice>::word(self)
            }

            /// What `each` gives for every variant, in the order of [`ALL`](Self::ALL): the
            /// variants a scenario samples.
            $vis fn each<'a, E>(
                each: impl FnMut(Self) -> $crate::harness::Variant<'a, E>,
            ) -> Vec<$crate::harness::Variant<'a, E>> {
                Self::ALL.iter().copied().map(each).collect()
            }

            /// Every variant's name, in the order of [`ALL`](Self::ALL).
            $vis fn names() -> Vec<String> {
                Self::ALL.iter().map(|v| v.name().to_string()).collect()
            }

            /// Add every variant's summary to `run`, in the order of [`ALL`](Self::ALL), each
            /// with its label.
            $vis fn add_to(
                run: &mut $crate::report::RunRecord,
                summaries: Vec<$crate::harness::Summary>,
                label: impl Fn(Self) -> Option<String>,
            ) {
                run.add_variants(Self::names(), summaries, Self::ALL.iter().map(|&v| label(v)));
            }
        }
    };
}
pub(crate) use variants;

#[cfg(test)]
mod tests {
    super::variants! {
        enum Timed {
            First = "first",
            Second = "second-one",
        }
    }

    #[test]
    fn names_follow_the_declaration() {
        assert_eq!(Timed::ALL, [Timed::First, Timed::Second]);
        assert_eq!(Timed::Second.name(), "second-one");
        assert_eq!(Timed::names(), ["first", "second-one"]);
    }
}
