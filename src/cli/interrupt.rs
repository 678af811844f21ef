//! SIGINT and SIGTERM while a sweep or suite runs. A point can take minutes, so the process
//! ends at once, with the shell's code for the signal (130, 143); the finished points are in
//! the journal already, and the action registered last (the resume hint, a partial report)
//! runs first.
//!
//! The signal handler only writes the signal's number to a pipe; a thread reads it and acts,
//! so nothing but `write` runs inside the handler.

use std::sync::Mutex;

/// A signal that ends a run, by its POSIX number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signal {
    Interrupt = 2,
    Terminate = 15,
}

impl Signal {
    /// The shell's exit code for a process ended by this signal: 128 + its number.
    pub(super) fn exit_code(self) -> i32 {
        128 + self as i32
    }

    /// `SIGINT`, `SIGTERM`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

type Action = Box<dyn Fn(Signal) + Send>;

static ACTION: Mutex<Option<Action>> = Mutex::new(None);

/// On SIGINT or SIGTERM, run `action` and exit with the signal's code. A later call replaces
/// the action (a second sweep in one process, as tests run them).
pub(super) fn on_signal(action: impl Fn(Signal) + Send + 'static) {
    *ACTION.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(action));
    install();
}

fn act(signal: Signal) -> ! {
    if let Some(action) = ACTION.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        action(signal);
    }
    std::process::exit(signal.exit_code())
}

#[cfg(target_os = "linux")]
fn install() {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Once;

    static WRITE_END: AtomicI32 = AtomicI32::new(-1);
    static INSTALLED: Once = Once::new();

    extern "C" fn handler(signo: libc::c_int) {
        let byte = signo as u8;
        // SAFETY: `write` is async-signal-safe; the buffer is one byte on this stack.
        unsafe {
            libc::write(
                WRITE_END.load(Ordering::Relaxed),
                (&byte as *const u8).cast(),
                1,
            );
        }
    }

    INSTALLED.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors `pipe` writes.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return;
        }
        WRITE_END.store(fds[1], Ordering::Relaxed);
        let read_end = fds[0];
        let watcher = std::thread::Builder::new()
            .name("parbench-signals".into())
            .spawn(move || loop {
                let mut byte = 0u8;
                // SAFETY: reads one byte into `byte` from the pipe this thread owns.
                let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    act(match libc::c_int::from(byte) {
                        libc::SIGTERM => Signal::Terminate,
                        _ => Signal::Interrupt,
                    });
                }
            });
        if watcher.is_err() {
            return;
        }
        for signo in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signo, &action, std::ptr::null_mut());
            }
        }
    });
}

#[cfg(not(target_os = "linux"))]
fn install() {
    // Ctrl-C only: one handler per process (the action it runs is replaceable).
    let _ = ctrlc::set_handler(|| act(Signal::Interrupt));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
        assert_eq!(Signal::Terminate.name(), "SIGTERM");
    }
}
