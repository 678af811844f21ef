//! Finding the GPU without ever failing: each CUDA library is checked before cudarc touches
//! it, and the first calls run under [`quietly`], since a missing `libcuda`, `libcublas` or
//! `libcurand` makes cudarc panic rather than return an error. The answer is cached: one probe
//! per process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaContext, DriverError};

use super::error::GpuError;
use super::libs;
use crate::device::gpu_info::{ComputeMode, GpuDevice, GpuInfo, LibraryInfo};
use crate::device::gpu_ordinal;
use crate::machine::state::gpu::uuid_string;

/// Run `f`, turning a panic into an error with its message, without printing it (cudarc
/// panics when a library or symbol is missing). The hook is process-global: probes are
/// serialized.
pub(super) fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, GpuError> {
    static PROBE_LOCK: Mutex<()> = Mutex::new(());
    let _g = PROBE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.map_err(|p| GpuError::Panicked(crate::engine::panic_message(p.as_ref())))
}

/// What [`probe`] found: the report's GPU block and, when usable, the context.
struct Probe {
    info: GpuInfo,
    ctx: Option<Arc<CudaContext>>,
    /// Every GPU the driver lists (empty when the driver could not be asked).
    gpus: Vec<GpuDevice>,
}

/// The reason a `CUDA_VISIBLE_DEVICES` value hides every GPU, if it does.
fn hidden_by_visible_devices(value: Option<&str>) -> Option<String> {
    let v = value?;
    let t = v.trim();
    (t.is_empty() || t == "-1" || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("void"))
        .then(|| format!("CUDA_VISIBLE_DEVICES is '{v}', which hides every GPU"))
}

fn probe_once() -> Probe {
    let unavailable = |reason: String| Probe {
        info: GpuInfo::unavailable(reason),
        ctx: None,
        gpus: Vec::new(),
    };
    // SAFETY: `is_culib_present` only dlopens and dlcloses the library (running its initializers).
    match quietly(|| unsafe { sys::is_culib_present() }) {
        Ok(true) => {}
        Ok(false) => return unavailable(
            "no CUDA driver library (libcuda.so.1) on the loader path: no NVIDIA driver installed"
                .into(),
        ),
        Err(p) => return unavailable(format!("loading the CUDA driver library failed: {p}")),
    }
    if let Some(reason) =
        hidden_by_visible_devices(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())
    {
        return unavailable(reason);
    }
    let ordinal = gpu_ordinal::selected();
    let gpus = match quietly(|| list(ordinal)) {
        Ok(Ok(gpus)) => gpus,
        Ok(Err(GpuError::Driver(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)))) => Vec::new(),
        Ok(Err(e)) => return unavailable(format!("listing the GPUs failed: {e}")),
        Err(p) => return unavailable(format!("listing the GPUs failed: {p}")),
    };
    let with_gpus = |reason: String| Probe {
        gpus: gpus.clone(),
        ..unavailable(reason)
    };
    if !gpus.is_empty() {
        if let Err(reason) = gpu_ordinal::check(ordinal, gpus.len()) {
            return with_gpus(reason);
        }
    }
    let unavailable = with_gpus;
    let ctx = match quietly(|| CudaContext::new(ordinal)) {
        Ok(Ok(ctx)) => ctx,
        Ok(Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE))) => {
            let why = match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(v) => {
                    format!("the CUDA driver reports no device (CUDA_VISIBLE_DEVICES is '{v}')")
                }
                Err(_) => "the CUDA driver is installed but reports no device".into(),
            };
            return unavailable(why);
        }
        Ok(Err(e)) => return unavailable(format!("CUDA initialization failed: {e}")),
        Err(p) => return unavailable(format!("CUDA initialization failed: {p}")),
    };
    // cuBLAS and cuRAND of CUDA 12 or 13, from the loader's path or found elsewhere and
    // opened by full path first (see `libs`), then checked through cudarc's own loader.
    let dirs = libs::search_dirs();
    for lib in [&libs::CUBLAS_LT, &libs::CUBLAS, &libs::CURAND] {
        if !libs::preload(lib, &dirs) {
            return unavailable(format!(
                "a GPU is present but {}",
                libs::missing_reason(lib, &dirs)
            ));
        }
    }
    // SAFETY: as above, dlopen/dlclose only.
    let blas = quietly(|| unsafe { cudarc::cublas::sys::is_culib_present() }).unwrap_or(false);
    let rand = quietly(|| unsafe { cudarc::curand::sys::is_culib_present() }).unwrap_or(false);
    if !blas || !rand {
        let which = if blas { "cuRAND" } else { "cuBLAS" };
        return unavailable(format!(
            "a GPU is present and {which} was found, but cudarc could not open it by name"
        ));
    }
    match quietly(|| describe(&ctx)) {
        Ok(Ok(mut info)) => {
            info.libraries = libraries(&info);
            Probe {
                info,
                ctx: Some(ctx),
                gpus,
            }
        }
        Ok(Err(e)) => unavailable(format!("querying the GPU failed: {e}")),
        Err(p) => unavailable(format!("querying the GPU failed: {p}")),
    }
}

fn describe(ctx: &Arc<CudaContext>) -> Result<GpuInfo, DriverError> {
    let name = ctx.name()?;
    let memory = ctx.total_mem()?;
    let (major, minor) = ctx.compute_capability()?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: a plain out-parameter query; the library is loaded (the context exists).
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    let cuda = libs::cuda_version(version);
    let driver = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| driver_release(&t))
        .unwrap_or_else(|| "unknown".into());
    Ok(GpuInfo::detected(
        name,
        driver,
        cuda,
        memory as u64,
        format!("{major}.{minor}"),
    ))
}

/// Every device the driver lists, with the attributes `devices` shows; `selected` marks the
/// ordinal parbench opens. Runs under [`quietly`] (a missing symbol panics in cudarc).
fn list(selected: usize) -> Result<Vec<GpuDevice>, GpuError> {
    use cudarc::driver::result::{self, device};
    result::init()?;
    let count = device::get_count()?;
    (0..count)
        .map(|ordinal| {
            let dev = device::get(ordinal)?;
            let index = usize::try_from(ordinal).unwrap_or(0);
            describe_device(dev, index, index == selected)
        })
        .collect()
}

/// One device's attributes; an attribute the driver refuses or gives as 0 is absent (clock
/// rates are deprecated in CUDA 13 and may go).
fn describe_device(
    dev: sys::CUdevice,
    ordinal: usize,
    selected: bool,
) -> Result<GpuDevice, GpuError> {
    use cudarc::driver::result::device;
    use sys::CUdevice_attribute as A;
    let attr = |a: A| -> Option<i32> {
        // SAFETY: `dev` comes from `cuDeviceGet` after `cuInit`; an out-parameter query.
        unsafe { device::get_attribute(dev, a) }.ok()
    };
    let positive = |a: A| {
        attr(a)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v > 0)
    };
    let name = device::get_name(dev)?;
    // SAFETY: as above.
    let memory = unsafe { device::total_mem(dev) }?;
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).unwrap_or(0);
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).unwrap_or(0);
    let uuid = device::get_uuid(dev)
        .ok()
        .map(|u| uuid_string(u.bytes.map(|b| b as u8)));
    let mig = GpuDevice::is_mig(&name, uuid.as_deref());
    Ok(GpuDevice {
        ordinal,
        selected,
        uuid,
        pci_bus_id: pci_bus_id(dev),
        memory_bytes: memory as u64,
        compute_capability: format!("{major}.{minor}"),
        sm_count: positive(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        // Both rates are in kHz.
        max_sm_clock_mhz: positive(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).map(|k| k / 1000),
        memory_clock_mhz: positive(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).map(|k| k / 1000),
        memory_bus_width_bits: positive(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        l2_cache_bytes: positive(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).map(u64::from),
        copy_engines: attr(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)
            .and_then(|v| u32::try_from(v).ok()),
        compute_mode: attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE).and_then(ComputeMode::from_code),
        name,
        mig,
    })
}

/// The device's PCI address, "0000:19:00.0", from `cuDeviceGetPCIBusId`.
fn pci_bus_id(dev: sys::CUdevice) -> Option<String> {
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `buf`, which lives
    // across the call; `dev` comes from `cuDeviceGet`.
    unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as std::ffi::c_int, dev) }
        .result()
        .ok()?;
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let id = String::from_utf8_lossy(&bytes).into_owned();
    (!id.is_empty()).then_some(id)
}

/// The driver's and the toolkit libraries' versions, and the file each was loaded from.
fn libraries(info: &GpuInfo) -> Vec<LibraryInfo> {
    use cudarc::cublas::sys::{cublasGetProperty, libraryPropertyType};
    let path = |prefix: &str| {
        libs::loaded_path(prefix).map_or_else(|| "?".into(), |p| p.display().to_string())
    };
    let blas_version = quietly(|| {
        let part = |t: libraryPropertyType| {
            let mut v: std::ffi::c_int = 0;
            // SAFETY: an out-parameter query of the loaded library's version.
            let ok = unsafe { cublasGetProperty(t, &mut v) }
                == cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
            ok.then_some(v)
        };
        match (
            part(libraryPropertyType::MAJOR_VERSION),
            part(libraryPropertyType::MINOR_VERSION),
            part(libraryPropertyType::PATCH_LEVEL),
        ) {
            (Some(a), Some(b), Some(c)) => format!("{a}.{b}.{c}"),
            _ => "?".into(),
        }
    })
    .unwrap_or_else(|_| "?".into());
    let rand_version = quietly(|| {
        let mut v: std::ffi::c_int = 0;
        // SAFETY: an out-parameter query of the loaded library's version.
        let ok = unsafe { cudarc::curand::sys::curandGetVersion(&mut v) }
            == cudarc::curand::sys::curandStatus_t::CURAND_STATUS_SUCCESS;
        if ok {
            libs::curand_version(v)
        } else {
            "?".into()
        }
    })
    .unwrap_or_else(|_| "?".into());
    vec![
        LibraryInfo {
            name: "CUDA driver".into(),
            version: format!(
                "{} (supports CUDA {})",
                info.driver.as_deref().unwrap_or("?"),
                info.cuda.as_deref().unwrap_or("?")
            ),
            path: path("libcuda.so"),
        },
        LibraryInfo {
            name: "cuBLAS".into(),
            version: blas_version,
            path: path("libcublas.so"),
        },
        LibraryInfo {
            name: "cuRAND".into(),
            version: rand_version,
            path: path("libcurand.so"),
        },
    ]
}

/// The driver release (`550.54.15`) from `/proc/driver/nvidia/version`.
fn driver_release(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    let after = line.split("Kernel Module").nth(1)?;
    // "Kernel Module  550.54.15" or "Open Kernel Module for x86_64  550.54.15": the first
    // token that starts with a digit.
    after
        .split_whitespace()
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

fn probed() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(probe_once)
}

/// Probe once per process: the GPU block of the report. After a sticky fault the GPU is
/// unavailable, with the fault as the reason.
pub fn probe() -> GpuInfo {
    let mut info = probed().info.clone();
    if let Some(why) = super::fault::poisoned() {
        info.available = false;
        info.reason = Some(why.into());
    }
    info
}

/// Every GPU the driver lists (from the same single probe).
pub fn gpus() -> Vec<GpuDevice> {
    probed().gpus.clone()
}

/// The probed context, if a usable GPU was found and no fault has made it unusable.
pub fn context() -> Option<Arc<CudaContext>> {
    if super::fault::poisoned().is_some() {
        return None;
    }
    probed().ctx.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_explains_absence() {
        let info = probe();
        if !info.available {
            let reason = info.reason.expect("an unavailable GPU has a reason");
            assert!(!reason.is_empty());
        }
        // A second probe gives the same answer (cached, no second load attempt).
        assert_eq!(probe(), probe());
    }

    /// Every device the driver counts is listed once, in ordinal order, with the attributes
    /// every CUDA GPU has; the selected one is the device the probe opened.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_every_device_is_listed_with_its_attributes() {
        let info = probe();
        assert!(
            info.available,
            "this test needs a GPU, and there is no usable GPU: {}",
            info.reason.unwrap_or_default()
        );
        let count = quietly(CudaContext::device_count)
            .expect("the driver loads")
            .expect("the driver counts its devices");
        let listed = gpus();
        assert_eq!(
            listed.len(),
            usize::try_from(count).unwrap_or(0),
            "{listed:?}"
        );
        let ordinal = gpu_ordinal::selected();
        for (i, g) in listed.iter().enumerate() {
            assert_eq!(g.ordinal, i);
            assert_eq!(g.selected, i == ordinal, "{g:?}");
            assert!(!g.name.is_empty() && g.memory_bytes > 0, "{g:?}");
            let (major, minor) = g.compute_capability.split_once('.').expect("major.minor");
            assert!(major.parse::<u32>().is_ok_and(|m| m >= 5), "{g:?}");
            assert!(minor.parse::<u32>().is_ok(), "{g:?}");
            assert!(g.sm_count.is_some_and(|n| n > 0), "{g:?}");
            assert!(g.memory_bus_width_bits.is_some_and(|b| b >= 32), "{g:?}");
            assert!(g.l2_cache_bytes.is_some_and(|b| b >= 1 << 20), "{g:?}");
            assert!(g.copy_engines.is_some_and(|c| c >= 1), "{g:?}");
            assert!(g.compute_mode.is_some(), "{g:?}");
            let pci = g.pci_bus_id.as_deref().expect("a PCI bus id");
            assert_eq!(pci.split([':', '.']).count(), 4, "{pci}");
            let uuid = g.uuid.as_deref().expect("a UUID");
            assert!(
                uuid.starts_with("GPU-") || uuid.starts_with("MIG-"),
                "{uuid}"
            );
            assert_eq!(g.mig, GpuDevice::is_mig(&g.name, Some(uuid)));
            if let Some(mhz) = g.max_sm_clock_mhz {
                assert!((300..=5000).contains(&mhz), "{g:?}");
            }
            assert!(g.line().contains(&g.name));
        }
        let opened = &listed[ordinal];
        assert_eq!(Some(&opened.name), info.name.as_ref());
        assert_eq!(Some(opened.memory_bytes), info.memory_bytes);
        assert_eq!(
            Some(&opened.compute_capability),
            info.compute_capability.as_ref()
        );
        let ctx = context().expect("the probed context");
        assert_eq!(ctx.ordinal(), ordinal);
    }

    #[test]
    fn quietly_turns_panics_into_errors() {
        assert!(matches!(quietly(|| 1), Ok(1)));
        let e = quietly(|| -> i32 { panic!("no libcuda") }).unwrap_err();
        assert_eq!(e.to_string(), "no libcuda");
    }

    #[test]
    fn visible_devices_that_hide_every_gpu_are_named() {
        assert_eq!(
            hidden_by_visible_devices(Some("")).as_deref(),
            Some("CUDA_VISIBLE_DEVICES is '', which hides every GPU")
        );
        assert!(hidden_by_visible_devices(Some("-1")).is_some());
        assert!(hidden_by_visible_devices(Some("0")).is_none());
        assert!(hidden_by_visible_devices(Some("GPU-1234")).is_none());
        assert!(hidden_by_visible_devices(None).is_none());
    }

    #[test]
    fn driver_version_is_read_from_the_kernel_module_line() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: gcc";
        assert_eq!(driver_release(text).as_deref(), Some("550.54.15"));
        assert_eq!(driver_release("garbage"), None);
        let open =
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build";
        assert_eq!(driver_release(open).as_deref(), Some("560.35.03"));
    }
}
