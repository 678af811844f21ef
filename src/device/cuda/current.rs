//! Making a context current on a thread that may never have used it: a library user's thread,
//! or a CPU device's worker that drops the last handle of a GPU tensor. The driver calls a
//! drop makes (`cuMemFreeAsync`, `cuEventDestroy`) need a current context; cudarc's drops do
//! not bind one, and cudarc's own `bind_to_thread` first *takes* the error recorded on the
//! context, which would lose it (or hand it to whichever op binds next). This binds and
//! nothing else.

use cudarc::driver::{result, CudaContext};

/// Make `ctx` current on this thread if it is not already (one `cuCtxGetCurrent` when it
/// is). A failure cannot be acted on where this is used (in a drop): the driver call that
/// follows reports its own error onto the context.
pub(crate) fn make_current(ctx: &CudaContext) {
    let wanted = ctx.cu_ctx();
    if !matches!(result::ctx::get_current(), Ok(Some(c)) if c == wanted) {
        // SAFETY: `wanted` is a live context: `ctx` holds it for as long as it is borrowed.
        let _ = unsafe { result::ctx::set_current(wanted) };
    }
}
