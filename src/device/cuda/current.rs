//! Making a context current on a thread that may never have used it: a library user's thread,
//! or a CPU device's worker that drops the last handle of a GPU tensor. The driver calls a
//! drop makes (`cuMemFreeAsync`, `cuEventDestroy`) need a current context; cudarc's drops do
//! not bind one, and cudarc's own `bind_to_thread` first *takes* the error recorded on the
//! context, which would lose it (or hand it to whichever op binds next). This binds and
//! nothing else.

use std::cell::Cell;

use cudarc::driver::{result, sys, CudaContext};

thread_local! {
    /// The context an engine op running on this thread bound at its start, under
    /// `PARBENCH_GPU_OPS=one-bind` (null outside such an op): the calls inside the op need
    /// not ask the driver again.
    static OP_BOUND: Cell<sys::CUcontext> = const { Cell::new(std::ptr::null_mut()) };
}

/// Whether this thread runs an op that bound `ctx` at its start (and nothing bound another
/// context since).
pub(crate) fn bound_for_op(ctx: &CudaContext) -> bool {
    OP_BOUND.with(|b| b.get() == ctx.cu_ctx())
}

/// While it lives, this thread's op has `ctx` bound (see [`bound_for_op`]).
pub(crate) struct OpBinding(());

impl OpBinding {
    /// Call right after binding `ctx` at an op's start.
    pub(crate) fn enter(ctx: &CudaContext) -> OpBinding {
        OP_BOUND.with(|b| b.set(ctx.cu_ctx()));
        OpBinding(())
    }
}

impl Drop for OpBinding {
    fn drop(&mut self) {
        OP_BOUND.with(|b| b.set(std::ptr::null_mut()));
    }
}

/// Make `ctx` current on this thread if it is not already (one `cuCtxGetCurrent` when it
/// is). A failure cannot be acted on where this is used (in a drop): the driver call that
/// follows reports its own error onto the context.
pub(crate) fn make_current(ctx: &CudaContext) {
    if bound_for_op(ctx) {
        return;
    }
    let wanted = ctx.cu_ctx();
    if !matches!(result::ctx::get_current(), Ok(Some(c)) if c == wanted) {
        // SAFETY: `wanted` is a live context: `ctx` holds it for as long as it is borrowed.
        let _ = unsafe { result::ctx::set_current(wanted) };
        // Another context is current now: an op's binding no longer holds.
        OP_BOUND.with(|b| b.set(std::ptr::null_mut()));
    }
}
