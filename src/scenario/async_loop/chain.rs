//! `chain`: N dependent ops, each reading the previous y, against the independent async ops,
//! and what the book's phases mean on a GPU.

use super::figures::*;
use super::{median_of, Timed};
use crate::device::{Device, GpuOrder};
use crate::report::RunRecord;
use crate::tensor::Tensor;
use crate::units::human_time;

/// `y = y + 1`, `n` times from `x`, pushed at once: each op reads the previous one's output.
pub(super) fn add_chain(x: &Tensor, n: u64) -> Tensor {
    let mut y = x.clone();
    for _ in 0..n {
        y = y.add_scalar(1.0);
    }
    y
}

/// The dependent chain against independent ops, and what the phases mean on a GPU.
pub(super) fn derive_chain(run: &mut RunRecord, device: &Device, n: u64) {
    let chain = median_of(run, Timed::Chain);
    let async_time = median_of(run, Timed::Async);
    let ratio = chain / async_time;
    run.record(CHAIN_PER_OP_S, chain / n as f64);
    run.record(CHAIN_OVER_ASYNC_RATIO, ratio);
    let e = &mut run.explanation;
    e.push(format!(
        "a chain of {n} dependent ops (each reads the previous y) took {} per op, {ratio:.2}× the independent \
         async ops: {}.",
        human_time(chain / n as f64),
        match device.gpu_order() {
            Some(GpuOrder::Stream) => {
                "on the GPU a dependent kernel is enqueued right behind its producer and the stream keeps \
                 them in order (--gpu-order stream), so the order costs no host round trip"
            }
            Some(GpuOrder::Host) => {
                "the engine waits for the GPU to finish each producer before the next op is enqueued \
                 (--gpu-order host): a host round trip per op"
            }
            None => "each op can only start once its producer has finished, so the engine hands the chain from op to op",
        }
    ));
    if device.gpu_order() == Some(GpuOrder::Stream) {
        e.push(
            "on the GPU in stream order, t2 is the time to enqueue the kernel on the compute lane; the GPU's own work and \
             the event that reports it fall into t3."
                .into(),
        );
    }
}
