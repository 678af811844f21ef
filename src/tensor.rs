//! A lazy tensor front end over the engine.
//!
//! Every operation pushes an op and returns a new [`Tensor`] at once; the data is computed when
//! the engine gets to it. Reading the values back ([`Tensor::to_vec`]) is the only blocking
//! call, exactly like MXNet's `NDArray` and the book's `y.wait_to_read()`.
//!
//! The buffer sits behind an `RwLock` only to make the sharing safe in Rust's terms: the
//! engine already orders every access through the tensor's [`Var`], so the lock is never
//! contended.

use std::sync::{Arc, RwLock};

use ndarray::{ArrayD, Ix2, IxDyn};

use crate::device::{cpu, Device};
use crate::engine::{Engine, EngineError, OpError, Var};

/// Errors of the tensor front end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorError {
    /// Shapes that cannot be combined; caught at push time, before anything runs.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// An op upstream failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

type Buffer = Arc<RwLock<ArrayD<f32>>>;

/// A handle to a tensor on a device. Cloning shares the same data.
#[derive(Clone)]
pub struct Tensor {
    engine: Engine,
    device: Arc<Device>,
    var: Var,
    data: Buffer,
    shape: Arc<[usize]>,
}

fn read(buf: &Buffer) -> Result<std::sync::RwLockReadGuard<'_, ArrayD<f32>>, OpError> {
    buf.read()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}

fn write(buf: &Buffer) -> Result<std::sync::RwLockWriteGuard<'_, ArrayD<f32>>, OpError> {
    buf.write()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}

impl Tensor {
    /// A tensor whose value will be written by the op the caller pushes next.
    fn pending(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Tensor {
        Tensor {
            engine: engine.clone(),
            device: device.clone(),
            var: Var::new(),
            data: Arc::new(RwLock::new(ArrayD::zeros(IxDyn(&[0])))),
            shape: shape.into(),
        }
    }

    fn produce(
        engine: &Engine,
        device: &Arc<Device>,
        name: &'static str,
        shape: &[usize],
        f: impl FnOnce() -> ArrayD<f32> + Send + 'static,
    ) -> Tensor {
        let out = Tensor::pending(engine, device, shape);
        let dst = out.data.clone();
        engine.push(name, device.compute, &[], &[&out.var], move || {
            *write(&dst)? = f();
            Ok(())
        });
        out
    }

    /// All ones.
    pub fn ones(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Tensor {
        let s = shape.to_vec();
        Tensor::produce(engine, device, "ones", shape, move || {
            ArrayD::ones(IxDyn(&s))
        })
    }

    /// Uniform in [0, 1), reproducible from `seed` whatever the thread count.
    pub fn uniform(engine: &Engine, device: &Arc<Device>, shape: &[usize], seed: u64) -> Tensor {
        let s = shape.to_vec();
        Tensor::produce(engine, device, "uniform", shape, move || {
            cpu::uniform(&s, seed)
        })
    }

    /// `self + s`, element-wise.
    pub fn add_scalar(&self, s: f32) -> Tensor {
        let out = Tensor::pending(&self.engine, &self.device, &self.shape);
        let (src, dst) = (self.data.clone(), out.data.clone());
        self.engine.push(
            "add_scalar",
            self.device.compute,
            &[&self.var],
            &[&out.var],
            move || {
                let y = cpu::add_scalar(&*read(&src)?, s);
                *write(&dst)? = y;
                Ok(())
            },
        );
        out
    }

    /// Matrix product of two 2-D tensors, on `self`'s device.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor, TensorError> {
        let (a, b) = (&self.shape[..], &rhs.shape[..]);
        if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
            return Err(TensorError::Shape(format!(
                "cannot multiply {a:?} by {b:?}"
            )));
        }
        let out = Tensor::pending(&self.engine, &self.device, &[a[0], b[1]]);
        let (x, y, dst) = (self.data.clone(), rhs.data.clone(), out.data.clone());
        self.engine.push(
            "matmul",
            self.device.compute,
            &[&self.var, &rhs.var],
            &[&out.var],
            move || {
                let c = {
                    let (x, y) = (read(&x)?, read(&y)?);
                    let x = x.view().into_dimensionality::<Ix2>()?;
                    let y = y.view().into_dimensionality::<Ix2>()?;
                    cpu::matmul(x, y).into_dyn()
                };
                *write(&dst)? = c;
                Ok(())
            },
        );
        Ok(out)
    }

    /// Block until the value is computed (the book's `wait_to_read`).
    pub fn wait_to_read(&self) -> Result<(), EngineError> {
        self.engine.wait_to_read(&self.var)
    }

    /// Wait for the value and copy it out, row-major.
    pub fn to_vec(&self) -> Result<Vec<f32>, TensorError> {
        self.wait_to_read()?;
        let data = self
            .data
            .read()
            .map_err(|_| TensorError::Shape("tensor buffer poisoned by an earlier panic".into()))?;
        Ok(data.iter().copied().collect())
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The var the engine tracks this tensor's buffer by.
    pub fn var(&self) -> &Var {
        &self.var
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Runtime, RuntimeOptions};

    fn rt() -> Runtime {
        Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap()
    }

    #[test]
    fn add_scalar_chain_computes_in_order() {
        let rt = rt();
        let d = &rt.devices[0];
        let mut y = Tensor::ones(&rt.engine, d, &[1, 2]);
        for _ in 0..100 {
            y = y.add_scalar(1.0);
        }
        assert_eq!(y.to_vec().unwrap(), vec![101.0, 101.0]);
    }

    #[test]
    fn matmul_matches_a_naive_product() {
        let rt = rt();
        let d = &rt.devices[0];
        let a = Tensor::uniform(&rt.engine, d, &[3, 5], 1);
        let b = Tensor::uniform(&rt.engine, d, &[5, 7], 2);
        let c = a.matmul(&b).unwrap();
        let (av, bv, cv) = (
            a.to_vec().unwrap(),
            b.to_vec().unwrap(),
            c.to_vec().unwrap(),
        );
        assert_eq!(c.shape(), &[3, 7]);
        for i in 0..3 {
            for j in 0..7 {
                let want: f32 = (0..5).map(|k| av[i * 5 + k] * bv[k * 7 + j]).sum();
                assert!((cv[i * 7 + j] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn matmul_rejects_bad_shapes_at_push() {
        let rt = rt();
        let d = &rt.devices[0];
        let a = Tensor::ones(&rt.engine, d, &[3, 5]);
        assert!(matches!(a.matmul(&a), Err(TensorError::Shape(_))));
    }
}
