//! What the host side reads from parbench's CUDA sources (`cuda/kernels/*.cu`), compiled with
//! or without the `cuda` feature, so that host code and tests can hold their constants to the
//! kernels' own.

/// The value of `#define NAME <integer>` in a CUDA source; `None` when it is not defined there
/// or not as an integer.
pub fn define(source: &str, name: &str) -> Option<usize> {
    source.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("#define") && words.next() == Some(name))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_integer_define_and_nothing_else() {
        let source = "// #define A 1\n#define LOSS_THREADS 256\n#define NAME x\n#define LOSS 3\n";
        assert_eq!(define(source, "LOSS_THREADS"), Some(256));
        assert_eq!(define(source, "LOSS"), Some(3));
        assert_eq!(define(source, "A"), None);
        assert_eq!(define(source, "NAME"), None);
        assert_eq!(define(source, "MISSING"), None);
    }
}
