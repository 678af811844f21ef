//! Which GPU parbench opens: the ordinal `--gpu N` selects (default 0), set once per process
//! before the probe, and the check of an ordinal against the devices the driver lists.

use std::sync::OnceLock;

static SELECTED: OnceLock<usize> = OnceLock::new();

/// The ordinal was chosen already (or the probe read the default) before this selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the GPU ordinal is {current} already; --gpu {requested} comes too late")]
pub struct AlreadySelected {
    pub current: usize,
    pub requested: usize,
}

/// Select the ordinal parbench opens. Call before anything probes the GPU; a second, different
/// selection (or one after the probe read the default) is refused.
pub fn select(ordinal: usize) -> Result<(), AlreadySelected> {
    let current = *SELECTED.get_or_init(|| ordinal);
    if current == ordinal {
        Ok(())
    } else {
        Err(AlreadySelected {
            current,
            requested: ordinal,
        })
    }
}

/// The ordinal parbench opens: the one selected, else 0 (which fixes it for the process).
pub fn selected() -> usize {
    *SELECTED.get_or_init(|| 0)
}

/// `Ok` if `ordinal` names one of the `count` devices, else the reason the GPU is unavailable:
/// "no GPU 3: this machine has 1".
pub fn check(ordinal: usize, count: usize) -> Result<(), String> {
    if ordinal < count {
        Ok(())
    } else {
        Err(format!("no GPU {ordinal}: this machine has {count}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinal_past_the_count_is_unavailable_with_the_count() {
        assert_eq!(check(0, 1), Ok(()));
        assert_eq!(check(7, 8), Ok(()));
        assert_eq!(check(1, 1).unwrap_err(), "no GPU 1: this machine has 1");
        assert_eq!(check(0, 0).unwrap_err(), "no GPU 0: this machine has 0");
    }

    /// The process-wide selection: the same ordinal again is fine, another is refused.
    #[test]
    fn the_selection_is_fixed_once() {
        let first = selected();
        assert_eq!(select(first), Ok(()));
        let other = first + 1;
        assert_eq!(
            select(other),
            Err(AlreadySelected {
                current: first,
                requested: other
            })
        );
        assert_eq!(selected(), first);
    }
}
