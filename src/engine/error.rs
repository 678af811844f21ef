//! Errors of the engine.
//!
//! An op's error is stored on the vars it writes ("poison") and handed, unchanged, to every op
//! downstream and to every wait that observes those vars: the user sees the root cause, not a
//! chain of "skipped because ..." messages.

use std::fmt;

/// What an op body returns when it fails. Any `std::error::Error` converts into it with `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    message: String,
}

impl OpError {
    pub fn msg(message: impl fmt::Display) -> Self {
        OpError {
            message: message.to_string(),
        }
    }

    /// The message, without the op's name.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for OpError {
    fn from(e: E) -> Self {
        OpError::msg(e)
    }
}

/// An error observed through `wait_to_read`, `wait_all` or a skipped op.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The op's body returned an error.
    #[error("op '{op}' failed: {message}")]
    OpFailed { op: String, message: String },
    /// The op's body panicked; the panic was caught and the engine is still usable.
    #[error("op '{op}' panicked: {message}")]
    OpPanicked { op: String, message: String },
    /// An asynchronous op dropped its completion handle without completing.
    #[error("op '{op}' dropped its completion handle without completing")]
    CompletionDropped { op: String },
    /// `wait_to_read`/`wait_all` was called from inside an op, where it could only deadlock.
    #[error("wait called from inside an op (it would deadlock the worker)")]
    WaitInsideOp,
    /// A device failed to synchronize its streams during `wait_all`.
    #[error("device synchronization failed: {0}")]
    DeviceSync(String),
}

impl EngineError {
    /// [`OpPanicked`](Self::OpPanicked) for the op named `op`.
    pub(crate) fn panicked(op: &str, message: impl Into<String>) -> EngineError {
        let (op, message) = (op.to_string(), message.into());
        EngineError::OpPanicked { op, message }
    }
}

/// Turn a caught panic payload into a message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().copied();
    let text = text.or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    text.unwrap_or("non-string panic payload").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_error_converts_from_std_errors() {
        fn parse(s: &str) -> Result<i32, OpError> {
            Ok(s.parse::<i32>()?)
        }
        let e = parse("x").unwrap_err();
        assert!(e.message().contains("invalid digit"), "{e}");
    }

    #[test]
    fn engine_error_names_the_op() {
        let e = EngineError::OpFailed {
            op: "matmul".into(),
            message: "boom".into(),
        };
        assert_eq!(e.to_string(), "op 'matmul' failed: boom");
    }

    #[test]
    fn panic_payloads_become_messages() {
        let p = std::panic::catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "static");
        let p = std::panic::catch_unwind(|| panic!("formatted {}", 7)).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "formatted 7");
    }
}
