//! A child process run to completion within a time limit, its output read on threads so that
//! a full pipe cannot stall it (the MPI tests: `mpirun`, and jobs across simulated hosts).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Run `cmd` to completion within `secs`: exit code, stdout, stderr and the time taken. Past
/// the limit `stop` ends the child, which is then waited for, and the test fails saying that
/// `what` hung.
pub fn run_within(
    mut cmd: Command,
    secs: u64,
    what: &str,
    stop: impl FnOnce(&mut Child),
) -> (Option<i32>, String, String, Duration) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }),
    );
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            stop(&mut child);
            let _ = child.wait();
            panic!("{what} hung for {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.code(),
        readers.0.join().unwrap(),
        readers.1.join().unwrap(),
        start.elapsed(),
    )
}
