//! A CUDA graph of tensor ops: MXNet's cached op on a GPU.

use std::sync::Arc;

use super::storage::{read, write, Storage};
use super::{gpu, Map, Tensor, TensorError};
use crate::device::cuda::GpuError;
use crate::device::DeviceKind;
use crate::engine::Var;

/// A dense-ReLU stack (`h = relu(h · W + b)` per layer) captured from the GPU as one CUDA graph
/// and replayed by one engine op that launches it: MXNet's cached op after `hybridize()`, on a
/// GPU. The graph reads the input and parameter buffers it was captured with and writes one
/// output tensor in place, so every replay returns that tensor (the engine orders its readers
/// and the next replay through its var).
pub struct CapturedGraph {
    state: Arc<std::sync::Mutex<Option<gpu::GraphState>>>,
    reads: Vec<Tensor>,
    output: Tensor,
    dev: Arc<gpu::CudaDevice>,
}

impl Tensor {
    /// Capture `relu(... relu(self · W₁ + b₁) ... · Wₗ + bₗ)` on this tensor's GPU. The capture
    /// is an op on the compute lane: it runs the stack once (which also leaves its output in the
    /// returned graph's output tensor), then captures the same launches.
    pub fn capture_dense_relu(
        &self,
        layers: &[(Tensor, Tensor)],
    ) -> Result<CapturedGraph, TensorError> {
        let DeviceKind::Cuda(dev) = &self.place.device.kind else {
            return Err(TensorError::Device(format!(
                "a CUDA graph needs a GPU tensor, not one on {}",
                self.place.device.name
            )));
        };
        let mut dims = Vec::new();
        let (m, mut k) = match &self.place.shape[..] {
            [m, k] => (*m, *k),
            s => {
                return Err(TensorError::Shape(format!(
                    "the graph's input must be 2-D, not {s:?}"
                )))
            }
        };
        for (w, b) in layers {
            match (&w.place.shape[..], &b.place.shape[..]) {
                ([wk, n], [1, bn]) if *wk == k && bn == n => {
                    dims.push((m, k, *n));
                    k = *n;
                }
                (ws, bs) => {
                    return Err(TensorError::Shape(format!(
                        "layer {ws:?} + {bs:?} does not follow a {m}×{k} input"
                    )))
                }
            }
        }
        let output = Tensor::pending(&self.place.engine, &self.place.device, &[m, k]);
        let mut reads = vec![self.clone()];
        for (w, b) in layers {
            reads.extend([w.clone(), b.clone()]);
        }
        let state = Arc::new(std::sync::Mutex::new(None));
        let (slot_state, buffers, dst) = (
            state.clone(),
            reads.iter().map(|t| t.data.clone()).collect::<Vec<_>>(),
            output.data.clone(),
        );
        let mem = self.place.device.memory.clone();
        let vars: Vec<&Var> = reads.iter().map(|t| t.var()).collect();
        gpu::push(
            &self.place.engine,
            self.place.device.compute,
            "capture graph",
            &vars,
            &[output.var()],
            dev,
            gpu::Stream::Compute,
            move |d| {
                let mut slot = write(&dst)?;
                let inputs = buffers
                    .iter()
                    .map(|b| read(b).and_then(|s| s.cuda()))
                    .collect::<Result<Vec<_>, _>>()?;
                // Every buffer the graph touches exists before the capture starts.
                let mut steps = Vec::new();
                for &(m, _, n) in &dims {
                    steps.push([
                        gpu::alloc(d, m * n, &mem)?,
                        gpu::alloc(d, m * n, &mem)?,
                        gpu::alloc(d, m * n, &mem)?,
                    ]);
                }
                let mut forward = |d: &gpu::CudaDevice| -> Result<(), GpuError> {
                    for (l, &(m, k, n)) in dims.iter().enumerate() {
                        let (w, b) = (&inputs[1 + 2 * l], &inputs[2 + 2 * l]);
                        let (done, rest) = steps.split_at_mut(l);
                        let h = match done.last() {
                            Some([_, _, y]) => &y.0,
                            None => &inputs[0].slice,
                        };
                        let [z, a, y] = &mut rest[0];
                        d.matmul(h, &w.slice, &mut z.0, (m, k, n))?;
                        d.add_row(&z.0, &b.slice, &mut a.0, (m, n))?;
                        d.map(Map::Relu, &a.0, &mut y.0)?;
                    }
                    Ok(())
                };
                // Once for real: the output's first value, and cuBLAS's lazy set-up kept out of
                // the capture.
                forward(d)?;
                let graph = d.capture(|d| forward(d))?;
                let mut buffers = Vec::new();
                for step in steps {
                    for b in step {
                        buffers.push(gpu::finish(d, b)?);
                    }
                }
                let out = buffers.last().cloned().ok_or(GpuError::NoLayers)?;
                *slot = Storage::Cuda(out.clone());
                drop(slot);
                let mut keep: Vec<_> = inputs;
                keep.extend(buffers);
                *slot_state
                    .lock()
                    .map_err(|_| GpuError::Poisoned("graph state"))? = Some(gpu::GraphState {
                    graph,
                    output: out,
                    _keep: keep,
                });
                Ok(())
            },
        );
        Ok(CapturedGraph {
            state,
            reads,
            output,
            dev: dev.clone(),
        })
    }
}

impl CapturedGraph {
    /// Push one replay: one engine op that launches the whole graph. Returns the output tensor.
    pub fn replay(&self) -> Tensor {
        let state = self.state.clone();
        let vars: Vec<&Var> = self.reads.iter().map(|t| t.var()).collect();
        gpu::push(
            &self.output.place.engine,
            self.output.place.device.compute,
            "replay graph",
            &vars,
            &[self.output.var()],
            &self.dev,
            gpu::Stream::Compute,
            move |d| {
                let guard = state
                    .lock()
                    .map_err(|_| GpuError::Poisoned("graph state"))?;
                let st = guard.as_ref().ok_or(GpuError::NotCaptured)?;
                st.graph.launch()?;
                st.output.rewritten(d)?;
                Ok(())
            },
        );
        self.output.clone()
    }
}
