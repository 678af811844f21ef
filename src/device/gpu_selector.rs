//! Which GPU the machine's state is read from (NVML, `crate::machine::state::gpu`): the one
//! parbench's CUDA context is on, by its UUID (else its CUDA ordinal as NVML's index). Here,
//! in the device layer, since only the device layer knows the context.

#[cfg(feature = "cuda")]
use crate::machine::state::gpu::uuid_string;
use crate::machine::state::gpu::GpuSelector;

/// The GPU parbench uses, for NVML; `None` where no GPU is usable. Probes the GPU if nothing
/// has yet.
#[cfg(feature = "cuda")]
pub fn selected() -> Option<GpuSelector> {
    let ctx = super::cuda::context()?;
    Some(match ctx.uuid() {
        Ok(uuid) => GpuSelector::Uuid(uuid_string(uuid.bytes.map(|b| b as u8))),
        Err(_) => GpuSelector::Index(u32::try_from(ctx.ordinal()).unwrap_or(0)),
    })
}

/// Without the `cuda` feature no GPU is used, so none is selected.
#[cfg(not(feature = "cuda"))]
pub fn selected() -> Option<GpuSelector> {
    None
}
