//! A stream's poller: the thread that waits for each op's completion event and then completes
//! the op, so no lane worker ever blocks on the GPU.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::error::GpuError;
use super::events::CompletionEvent;

/// Work handed to a poller: the event to wait for, then what to do (complete the op, drop the
/// buffers it kept alive).
pub(super) struct Pending {
    pub(super) event: CompletionEvent,
    pub(super) stream: Arc<CudaStream>,
    pub(super) then: Box<dyn FnOnce(Result<(), GpuError>) + Send>,
}

/// One thread per stream that waits for events in order and fires completions. Events of one
/// stream complete in the order they were recorded, so a FIFO is exact.
pub(super) struct Poller {
    pub(super) tx: crossbeam_channel::Sender<Pending>,
}

impl Poller {
    pub(super) fn start(name: String, ctx: Arc<CudaContext>) -> std::io::Result<Poller> {
        let (tx, rx) = crossbeam_channel::unbounded::<Pending>();
        std::thread::Builder::new().name(name).spawn(move || {
            // Event waits need the context current on this thread; if binding fails, each
            // wait reports its own error below.
            super::make_current(&ctx);
            for p in rx {
                // `synchronize` can fail *without waiting* (cudarc reports an error an earlier
                // drop recorded): then wait on the stream itself before releasing any buffer.
                let r = match p.event.synchronize() {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        let _ = p.stream.synchronize();
                        Err(GpuError::from(e))
                    }
                };
                // A panicking completion must not take the poller (and every later op) down.
                let then = p.then;
                let _ = catch_unwind(AssertUnwindSafe(move || then(r)));
            }
        })?;
        Ok(Poller { tx })
    }
}
