//! The derived figures `async` records, each declared once with its key in the report, its
//! unit and its direction. The engine's internals are detail (`FigureSpec::detail`): the
//! default table leaves them to `--verbose`, the JSON keeps them. The machine's own figures
//! (the cache line between cores, the channel hand-off, the driver's floor) are not here: they
//! are the process's limits, which `devices --probe` prints and the report's environment keeps.

use crate::report::{Better, FigureSpec, Unit};

const fn seconds(key: &'static str, better: Better) -> FigureSpec {
    FigureSpec::new(key, Unit::Seconds, better)
}

const fn ratio(key: &'static str, better: Better) -> FigureSpec {
    FigureSpec::new(key, Unit::Ratio, better)
}

// The book's model and the loops it describes.
pub(super) const ASYNC_SPEEDUP: FigureSpec = ratio("async_speedup", Better::Higher);
pub(super) const SYNC_PER_OP_S: FigureSpec = seconds("sync_per_op_s", Better::Neither);
pub(super) const ASYNC_PER_OP_S: FigureSpec = seconds("async_per_op_s", Better::Neither);
pub(super) const PUSH_PER_OP_S: FigureSpec = seconds("push_per_op_s", Better::Neither);
pub(super) const T1_S: FigureSpec = seconds("t1_s", Better::Neither).detail();
pub(super) const T2_S: FigureSpec = seconds("t2_s", Better::Neither).detail();
pub(super) const T3_S: FigureSpec = seconds("t3_s", Better::Neither).detail();
pub(super) const PREDICTED_SYNC_S: FigureSpec =
    seconds("predicted_sync_s", Better::Neither).detail();
pub(super) const PREDICTED_ASYNC_S: FigureSpec =
    seconds("predicted_async_s", Better::Neither).detail();
pub(super) const MEASURED_OVER_PREDICTED_SYNC_RATIO: FigureSpec =
    ratio("measured_over_predicted_sync_ratio", Better::Neither).detail();
pub(super) const MEASURED_OVER_PREDICTED_ASYNC_RATIO: FigureSpec =
    ratio("measured_over_predicted_async_ratio", Better::Neither).detail();

// The pitfall on the book's matrix products.
pub(super) const PRODUCTS_OVER_PUSH_ONLY_RATIO: FigureSpec =
    ratio("products_over_push_only_ratio", Better::Neither);

// The dependent chain.
pub(super) const CHAIN_PER_OP_S: FigureSpec = seconds("chain_per_op_s", Better::Neither);
pub(super) const CHAIN_OVER_ASYNC_RATIO: FigureSpec =
    ratio("chain_over_async_ratio", Better::Lower);

// Hand-offs between two lanes.
pub(super) const HANDOFF_P50_S: FigureSpec = seconds("handoff_p50_s", Better::Lower).detail();
pub(super) const HANDOFF_P99_S: FigureSpec = seconds("handoff_p99_s", Better::Lower).detail();
pub(super) const PING_PONG_PER_OP_S: FigureSpec =
    seconds("ping_pong_per_op_s", Better::Lower).detail();

// The GPU's own clock around each sample of the GPU variants (seconds per sample, as the
// variant's median).
#[cfg(feature = "cuda")]
pub(super) const SYNC_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("sync_gpu_s");
#[cfg(feature = "cuda")]
pub(super) const ASYNC_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("async_gpu_s");
#[cfg(feature = "cuda")]
pub(super) const CHAIN_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("chain_gpu_s");
