//! Lines on stderr, each written whole: the ranks of an MPI job share one terminal, and a
//! line written in pieces (`writeln!` writes each piece of its format on its own) interleaves
//! with another rank's, as `error: error: ...` followed by a line without its prefix.

use std::io::Write;

/// Write `args` and a newline to `out` in one `write_all`; a failed write is dropped (stderr
/// may be a pipe whose reader has gone).
pub(crate) fn write_line(out: &mut impl Write, args: std::fmt::Arguments) {
    let line = format!("{args}\n");
    let _ = out.write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes it is given.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_error_line_is_one_write_with_one_prefix() {
        let mut out = Writes::default();
        let line = "a --set value is bad";
        write_line(&mut out, format_args!("error: {line}"));
        assert_eq!(out.0, [b"error: a --set value is bad\n".to_vec()]);
    }
}
