//! Where the book's figures come from: each section of the chapter that prints figures, as a
//! [`Source`] naming its edition, section and seed text (`shared/seeds/`). Each scenario
//! declares its own figures beside it (`const BOOK: &[BookFigure]`) from these sources.

use std::borrow::Cow;

use crate::report::{BookFigure, Edition, Source};

const fn source(edition: Edition, section: &'static str, seed: &'static str) -> Source {
    Source {
        edition,
        section: Cow::Borrowed(section),
        seed: Cow::Borrowed(seed),
    }
}

/// TF 2 edition, §8.1 hybrid imperative and symbolic programming.
pub const TF2_HYBRIDIZE: Source = source(Edition::Tf2, "§8.1", "002_060b86b87e5e03ba.txt");

/// TF 2 edition, §8.2.4: asynchronous computation's effect on memory.
pub const TF2_ASYNC_MEMORY: Source = source(Edition::Tf2, "§8.2.4", "002_060b86b87e5e03ba.txt");

/// MXNet edition, automatic parallelism: its exercises (the text numbers no section).
pub const MXNET_PARALLEL_EXERCISES: Source = source(
    Edition::Mxnet,
    "automatic parallelism, exercises",
    "001_e9cb5bc0ce821b47.txt",
);

/// TF 1 text, §9.2 (data-parallel training, synchronous and asynchronous updates) and §9.3
/// (several GPUs).
pub const TF1_DATA_PARALLEL: Source = source(Edition::Tf1, "§9.2–9.3", "004_72e7045bb5a6f219.txt");

/// TF 2 edition, §8.2 asynchronous computation: `y = x + 1`, 1000 times.
pub const TF2_ASYNC: Source = source(Edition::Tf2, "§8.2", "002_060b86b87e5e03ba.txt");

/// TF 2 edition, §8.3.1: CPU and GPU in parallel.
pub const TF2_CPU_GPU: Source = source(Edition::Tf2, "§8.3.1", "000_48c684e6be24c8a6.txt");

/// TF 2 edition, §8.3.2: computation and communication in parallel.
pub const TF2_RUN_COPY: Source = source(Edition::Tf2, "§8.3.2", "000_48c684e6be24c8a6.txt");

/// PyTorch edition, asynchronous computation (the text numbers no section): NumPy against
/// torch on a GPU, with and without `torch.cuda.synchronize`.
pub const PYTORCH_ASYNC: Source = source(
    Edition::Pytorch,
    "asynchronous computation",
    "003_6ef06c15b3dc9776.txt",
);

/// The hardware as the TF 2 edition states it: `tf.device('/GPU:0')`, no model named.
pub const A_GPU: Option<&str> = Some("a GPU (model not stated)");
/// The CPU, no model named.
pub const A_CPU: Option<&str> = Some("the CPU (model not stated)");

/// TF 2 edition, §8.3.1: the CPU's half of the experiment, also `matmul`'s yardstick.
pub const TF2_CPU_PRODUCTS: BookFigure = BookFigure::seconds(
    "10 products of 2000² on the CPU",
    1.2657,
    TF2_CPU_GPU,
    A_CPU,
)
.products(10, 2000);

/// PyTorch edition: NumPy's products, beside torch's (`async`) and as a rate (`matmul`).
pub const NUMPY_PRODUCTS: BookFigure = BookFigure::seconds(
    "NumPy: 10 × (randn + product) of 1000²",
    0.2660,
    PYTORCH_ASYNC,
    A_CPU,
)
.products(10, 1000);
