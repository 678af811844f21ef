//! The MLP training kernels (`kernels/mlp.cu`, loaded from `kernels/mlp.ptx` like the
//! element-wise ones) and what a training step needs around them: regions of device buffers,
//! cuBLAS products with transposes on them, and copies, fills and reads of them. Every call
//! goes to the stream this thread launches on (the compute stream, or a capture's side
//! stream), so a step can be captured as a CUDA graph ([`CudaDevice::capture`]).
//!
//! The caller (`data-parallel --device cuda`) owns the buffers and keeps them alive as long as
//! any work enqueued on their regions may run: the calls here are `unsafe` for that reason
//! alone; lengths are checked.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaSlice, DevicePtr, LaunchConfig};

use super::ops::{grid, load_ptx};
use super::{CudaDevice, GpuError};

/// The PTX of `kernels/mlp.cu` (ISA 7.5, sm_75, as `elementwise.ptx`).
pub const MLP_PTX: &str = include_str!("kernels/mlp.ptx");

/// Threads of `record_loss`'s one block (`LOSS_THREADS` in mlp.cu; a test holds them equal).
const LOSS_THREADS: u32 = 256;

/// The loaded MLP kernels of one context.
pub struct MlpKernels {
    /// `ManuallyDrop`: the module unloads when the last function drops, which must not
    /// happen while another thread captures a graph (see `Drop`).
    functions: std::mem::ManuallyDrop<MlpFunctions>,
}

/// The kernels of `kernels/mlp.cu`, by name.
pub struct MlpFunctions {
    gather_batch: CudaFunction,
    bias_act: CudaFunction,
    softmax_xent: CudaFunction,
    record_loss: CudaFunction,
    relu_backward: CudaFunction,
    column_sum: CudaFunction,
    sgd: CudaFunction,
}

impl std::ops::Deref for MlpKernels {
    type Target = MlpFunctions;
    fn deref(&self) -> &MlpFunctions {
        &self.functions
    }
}

impl Drop for MlpKernels {
    fn drop(&mut self) {
        // Unloading a module breaks a capture in progress on another thread.
        let _outside = super::capture_guard::outside_captures();
        // SAFETY: dropped exactly once, here; `self` is not used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.functions) };
    }
}

impl MlpKernels {
    /// Load the PTX into `ctx` (the driver compiles it for the GPU at hand).
    pub fn load(ctx: &Arc<CudaContext>) -> Result<MlpKernels, GpuError> {
        // Loading a module breaks a capture in progress on another thread.
        let _outside = super::capture_guard::outside_captures();
        let get = load_ptx(ctx, MLP_PTX)?;
        let functions = MlpFunctions {
            gather_batch: get("gather_batch")?,
            bias_act: get("bias_act")?,
            softmax_xent: get("softmax_xent")?,
            record_loss: get("record_loss")?,
            relu_backward: get("relu_backward")?,
            column_sum: get("column_sum")?,
            sgd: get("sgd")?,
        };
        Ok(MlpKernels {
            functions: std::mem::ManuallyDrop::new(functions),
        })
    }
}

/// `len` floats at a device address: part of a buffer its owner keeps alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub ptr: sys::CUdeviceptr,
    pub len: usize,
}

impl Region {
    /// `len` floats of `buf` from `offset`; an error past its end.
    pub fn of(
        device: &CudaDevice,
        buf: &CudaSlice<f32>,
        offset: usize,
        len: usize,
    ) -> Result<Region, GpuError> {
        // Event tracking is off (see `device::cuda`): the guard records nothing.
        let (ptr, _guard) = buf.device_ptr(&device.compute);
        Region {
            ptr,
            len: buf.len(),
        }
        .part(offset, len)
    }

    /// `len` floats of this region from `offset`; an error past its end.
    pub fn part(self, offset: usize, len: usize) -> Result<Region, GpuError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(Region {
                ptr: self.ptr + 4 * offset as u64,
                len,
            }),
            _ => Err(GpuError::Lengths(format!(
                "region of {len} from {offset} past a buffer of {}",
                self.len
            ))),
        }
    }
}

/// One launch of an MLP kernel (mlp.cu says what each computes).
#[derive(Clone, Copy, Debug)]
pub enum MlpLaunch {
    GatherBatch {
        x: Region,
        y: Region,
        step: Region,
        xb: Region,
        yb: Region,
        inputs: usize,
    },
    BiasAct {
        z: Region,
        b: Region,
        relu: bool,
    },
    SoftmaxXent {
        logits: Region,
        labels: Region,
        delta: Region,
        row_loss: Region,
        classes: usize,
        scale: f32,
    },
    RecordLoss {
        row_loss: Region,
        scale: f32,
        step: Region,
        losses: Region,
    },
    ReluBackward {
        delta: Region,
        act: Region,
    },
    ColumnSum {
        x: Region,
        out: Region,
    },
    Sgd {
        w: Region,
        g: Region,
        lr: f32,
    },
}

fn lengths(what: &str, ok: bool) -> Result<(), GpuError> {
    if ok {
        Ok(())
    } else {
        Err(GpuError::Lengths(format!("{what}: regions of other sizes")))
    }
}

/// A kernel parameter: the address of the value.
fn param<T>(value: &T) -> *mut c_void {
    (value as *const T).cast_mut().cast()
}

impl CudaDevice {
    /// Enqueue one MLP kernel, after checking that its regions' lengths fit together.
    ///
    /// # Safety
    /// Every region addresses live device memory of this context, which stays alive until
    /// the work is done; no other work writes it meanwhile.
    pub unsafe fn launch_mlp(&self, k: &MlpKernels, launch: MlpLaunch) -> Result<(), GpuError> {
        self.bind()?;
        let u = |v: usize| v as u64;
        match launch {
            MlpLaunch::GatherBatch {
                x,
                y,
                step,
                xb,
                yb,
                inputs,
            } => {
                lengths(
                    "gather_batch",
                    inputs > 0
                        && y.len > 0
                        && x.len == y.len * inputs
                        && xb.len == yb.len * inputs
                        && step.len == 1,
                )?;
                let (samples, batch, inputs) = (u(y.len), u(yb.len), u(inputs));
                let mut p = [
                    param(&x.ptr),
                    param(&y.ptr),
                    param(&step.ptr),
                    param(&xb.ptr),
                    param(&yb.ptr),
                    param(&samples),
                    param(&batch),
                    param(&inputs),
                ];
                self.launch_raw(&k.gather_batch, grid(batch * inputs), &mut p)
            }
            MlpLaunch::BiasAct { z, b, relu } => {
                lengths("bias_act", b.len > 0 && z.len % b.len == 0)?;
                let (rows, cols, relu) = (u(z.len / b.len), u(b.len), i32::from(relu));
                let mut p = [
                    param(&z.ptr),
                    param(&b.ptr),
                    param(&rows),
                    param(&cols),
                    param(&relu),
                ];
                self.launch_raw(&k.bias_act, grid(rows * cols), &mut p)
            }
            MlpLaunch::SoftmaxXent {
                logits,
                labels,
                delta,
                row_loss,
                classes,
                scale,
            } => {
                lengths(
                    "softmax_xent",
                    logits.len == labels.len * classes
                        && delta.len == logits.len
                        && row_loss.len == labels.len,
                )?;
                let (rows, classes) = (u(labels.len), u(classes));
                let mut p = [
                    param(&logits.ptr),
                    param(&labels.ptr),
                    param(&delta.ptr),
                    param(&row_loss.ptr),
                    param(&rows),
                    param(&classes),
                    param(&scale),
                ];
                self.launch_raw(&k.softmax_xent, grid(rows), &mut p)
            }
            MlpLaunch::RecordLoss {
                row_loss,
                scale,
                step,
                losses,
            } => {
                lengths("record_loss", step.len == 1)?;
                let (rows, capacity) = (u(row_loss.len), u(losses.len));
                let mut p = [
                    param(&row_loss.ptr),
                    param(&rows),
                    param(&scale),
                    param(&step.ptr),
                    param(&losses.ptr),
                    param(&capacity),
                ];
                let one_block = LaunchConfig {
                    grid_dim: (1, 1, 1),
                    block_dim: (LOSS_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                self.launch_raw(&k.record_loss, one_block, &mut p)
            }
            MlpLaunch::ReluBackward { delta, act } => {
                lengths("relu_backward", delta.len == act.len)?;
                let n = u(delta.len);
                let mut p = [param(&delta.ptr), param(&act.ptr), param(&n)];
                self.launch_raw(&k.relu_backward, grid(n), &mut p)
            }
            MlpLaunch::ColumnSum { x, out } => {
                lengths("column_sum", out.len > 0 && x.len % out.len == 0)?;
                let (rows, cols) = (u(x.len / out.len), u(out.len));
                let mut p = [param(&x.ptr), param(&out.ptr), param(&rows), param(&cols)];
                self.launch_raw(&k.column_sum, grid(cols), &mut p)
            }
            MlpLaunch::Sgd { w, g, lr } => {
                lengths("sgd", w.len == g.len)?;
                let n = u(w.len);
                let mut p = [param(&w.ptr), param(&g.ptr), param(&lr), param(&n)];
                self.launch_raw(&k.sgd, grid(n), &mut p)
            }
        }
    }

    /// Launch `func` on this thread's launch stream, straight through `cuLaunchKernel` (no
    /// context bind and no check of the context's error slot: [`launch_mlp`](Self::launch_mlp)
    /// bound the context).
    ///
    /// # Safety
    /// `params` matches the kernel's parameters (one pointer to a live value of each
    /// parameter's type, in order) and the memory they address is as large as it reads and
    /// writes; the context is bound.
    unsafe fn launch_raw(
        &self,
        func: &CudaFunction,
        cfg: LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        self.with_launch_stream(|stream| {
            // SAFETY: per this function's contract.
            unsafe {
                cudarc::driver::result::launch_kernel(
                    func.cu_function(),
                    cfg.grid_dim,
                    cfg.block_dim,
                    cfg.shared_mem_bytes,
                    stream.cu_stream(),
                    params,
                )
            }?;
            Ok(())
        })
    }

    /// Enqueue row-major `c = op(a) · op(b)` in fp32 (cuBLAS sgemm; the handle's math mode is
    /// the default, without TF32), each operand given as its region, its stored
    /// `(rows, cols)` and whether the product takes its transpose.
    ///
    /// cuBLAS is column-major, where a row-major matrix is its transpose: `cᵀ = op(b)ᵀ ·
    /// op(a)ᵀ`, with `b` first, its leading dimension its stored columns, and each operand
    /// transposed where the row-major product transposes it.
    ///
    /// # Safety
    /// As [`launch_mlp`](Self::launch_mlp).
    pub unsafe fn gemm_regions(
        &self,
        (a, (ar, ac), ta): (Region, (usize, usize), bool),
        (b, (br, bc), tb): (Region, (usize, usize), bool),
        c: Region,
    ) -> Result<(), GpuError> {
        let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
        let (k2, n) = if tb { (bc, br) } else { (br, bc) };
        if k != k2 || a.len != ar * ac || b.len != br * bc || c.len != m * n {
            return Err(GpuError::Lengths(format!(
                "product of {ar}×{ac}{} and {br}×{bc}{} into {} values",
                if ta { "ᵀ" } else { "" },
                if tb { "ᵀ" } else { "" },
                c.len
            )));
        }
        let dim = |v: usize| i32::try_from(v).map_err(|_| GpuError::TooLarge(v));
        let (mi, ki, ni) = (dim(m)?, dim(k)?, dim(n)?);
        let (lda, ldb) = (dim(bc.max(1))?, dim(ac.max(1))?);
        let op = |t: bool| {
            if t {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            }
        };
        self.bind()?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let mut blas = self
            .blas
            .lock()
            .map_err(|_| GpuError::Poisoned("cuBLAS handle"))?;
        let capturing =
            self.with_launch_stream(|s| (!Arc::ptr_eq(s, &self.compute)).then(|| s.clone()));
        let gemm = |handle| {
            // SAFETY: the regions hold the operands' sizes (checked above) per this function's
            // contract; the leading dimensions are the stored column counts.
            unsafe {
                cudarc::cublas::result::sgemm(
                    handle,
                    op(tb),
                    op(ta),
                    ni,
                    mi,
                    ki,
                    &alpha,
                    b.ptr as *const f32,
                    lda,
                    a.ptr as *const f32,
                    ldb,
                    &beta,
                    c.ptr as *mut f32,
                    ni,
                )
            }
        };
        let Some(side) = capturing else {
            return gemm(*blas.handle()).map_err(GpuError::Sgemm);
        };
        // Capturing: the product goes to the capture's side stream, and the handle goes back
        // to the compute stream before the lock is released (as `matmul` does).
        // SAFETY: both streams belong to the handle's context.
        let r = unsafe { blas.set_stream(side) }.and_then(|()| gemm(*blas.handle()));
        // SAFETY: as above.
        let back = unsafe { blas.set_stream(self.compute.clone()) };
        r.and(back).map_err(GpuError::Sgemm)
    }

    /// Enqueue a device-to-device copy of `src` into `dst` (of one length).
    ///
    /// # Safety
    /// As [`launch_mlp`](Self::launch_mlp).
    pub unsafe fn copy_region(&self, src: Region, dst: Region) -> Result<(), GpuError> {
        if src.len != dst.len {
            return Err(GpuError::Lengths(format!(
                "copy of {} values into {}",
                src.len, dst.len
            )));
        }
        self.bind()?;
        self.with_launch_stream(|s| {
            // SAFETY: per this function's contract; the lengths match.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst.ptr,
                    src.ptr,
                    4 * src.len,
                    s.cu_stream(),
                )
            }?;
            Ok(())
        })
    }

    /// Enqueue a fill of `dst` with the 32 bits of `value` (a memset).
    ///
    /// # Safety
    /// As [`launch_mlp`](Self::launch_mlp).
    pub unsafe fn fill_region(&self, dst: Region, value: f32) -> Result<(), GpuError> {
        self.bind()?;
        self.with_launch_stream(|s| {
            // SAFETY: per this function's contract: `dst` addresses `len` 4-byte values.
            unsafe { sys::cuMemsetD32Async(dst.ptr, value.to_bits(), dst.len, s.cu_stream()) }
                .result()?;
            Ok(())
        })
    }

    /// Enqueue an upload of `src` into `dst` (of one length) on the compute stream and wait
    /// for it (from pageable memory: the driver stages it).
    ///
    /// # Safety
    /// As [`launch_mlp`](Self::launch_mlp).
    pub unsafe fn upload_region(&self, src: &[f32], dst: Region) -> Result<(), GpuError> {
        if src.len() != dst.len {
            return Err(GpuError::Lengths(format!(
                "upload of {} values into {}",
                src.len(),
                dst.len
            )));
        }
        self.bind()?;
        // SAFETY: per this function's contract; the lengths match, and the host slice
        // outlives the copy (the stream is synchronized before returning).
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dst.ptr, src, self.compute.cu_stream())
        }?;
        self.compute.synchronize()?;
        Ok(())
    }

    /// Read `src` back after the work enqueued so far on the compute stream (blocking: the
    /// copy is enqueued there and the stream synchronized).
    ///
    /// # Safety
    /// As [`launch_mlp`](Self::launch_mlp).
    pub unsafe fn read_region(&self, src: Region) -> Result<Vec<f32>, GpuError> {
        self.bind()?;
        let mut host = vec![0f32; src.len];
        // SAFETY: per this function's contract; `host` holds `len` floats and lives until the
        // stream is synchronized below.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(
                &mut host[..],
                src.ptr,
                self.compute.cu_stream(),
            )
        }?;
        self.compute.synchronize()?;
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_block_has_the_kernels_thread_count() {
        let source = include_str!("kernels/mlp.cu");
        assert_eq!(
            crate::device::cuda_source::define(source, "LOSS_THREADS"),
            Some(LOSS_THREADS as usize)
        );
    }

    #[test]
    fn the_ptx_declares_every_mlp_kernel_with_its_parameters() {
        super::super::ops::assert_declares(
            MLP_PTX,
            &[
                ("gather_batch", 8),
                ("bias_act", 5),
                ("softmax_xent", 7),
                ("record_loss", 6),
                ("relu_backward", 3),
                ("column_sum", 4),
                ("sgd", 4),
            ],
        );
        // The update is a rounded product then a rounded difference, as on the host.
        let sgd = &MLP_PTX[MLP_PTX.find(".entry sgd(").expect("sgd")..];
        assert!(sgd.contains("mul.rn.f32") && sgd.contains("sub.rn.f32"));
        assert!(!sgd[..sgd.find("ret;").expect("ret")].contains("fma"));
    }
}
