//! NCCL's all-reduce across the GPUs of one process, through `libnccl.so.2` opened at run time.
//!
//! Not through cudarc's `nccl` feature: cudarc 0.19's loader tries `libnccl.so`,
//! `libnccl.so.13`, `.so.12`, ... `.so.1`, never `libnccl.so.2`, the one name that pip's
//! `nvidia-nccl-cu13` / `nvidia-nccl-cu12` wheels (what PyTorch installs) and the `libnccl2`
//! package ship (`libnccl.so` comes only with the -dev package), and it panics where it finds
//! none. The seven symbols used here are opened with libloading instead: found where
//! [`libs::search_dirs`] looks (pip's `nvidia/nccl/lib` included), and a missing library is an
//! error naming what to install, never a panic. Opened on first use, so a binary without NCCL
//! builds and runs everything else.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

use super::libs::{self, CudaLib};
use super::GpuError;

type NcclResult = c_int;
type RawComm = *mut c_void;

/// `ncclFloat32` and `ncclSum` (nccl.h; the same in every NCCL 2.x).
const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

/// What to install where NCCL is missing.
pub const INSTALL_HINT: &str =
    "pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12)";

type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    *mut c_void,
) -> NcclResult;

/// The library's entry points.
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    comm_init_all: unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> NcclResult,
    comm_destroy: unsafe extern "C" fn(RawComm) -> NcclResult,
    all_reduce: AllReduce,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    /// Held so that the entry points stay valid for the process (`None` only for a test's
    /// stand-in entry points, which are the test's own functions).
    _lib: Option<libloading::Library>,
}

/// Open `lib` (by name, then by full path from `dirs`) and take NCCL's entry points from it.
fn load_from(lib: &CudaLib, dirs: &[PathBuf]) -> Result<Api, String> {
    let mut opened = None;
    for soname in lib.sonames {
        // SAFETY: opening a library runs its initializers; NCCL's only set up its own state.
        if let Ok(l) = unsafe { libloading::Library::new(*soname) } {
            opened = Some(l);
            break;
        }
    }
    if opened.is_none() {
        if let Some(path) = libs::find(lib, dirs) {
            // SAFETY: as above, by full path.
            match unsafe { libloading::Library::new(&path) } {
                Ok(l) => opened = Some(l),
                Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
            }
        }
    }
    let Some(l) = opened else {
        return Err(format!(
            "{}; or install it: {INSTALL_HINT}",
            libs::missing_reason(lib, dirs)
        ));
    };
    macro_rules! symbol {
        ($name:literal) => {
            // SAFETY: the type is the one nccl.h declares for the symbol.
            match unsafe { l.get($name.as_bytes()) } {
                Ok(s) => *s,
                Err(e) => return Err(format!("{} lacks {}: {e}", lib.name, $name)),
            }
        };
    }
    Ok(Api {
        get_version: symbol!("ncclGetVersion"),
        comm_init_all: symbol!("ncclCommInitAll"),
        comm_destroy: symbol!("ncclCommDestroy"),
        all_reduce: symbol!("ncclAllReduce"),
        group_start: symbol!("ncclGroupStart"),
        group_end: symbol!("ncclGroupEnd"),
        error_string: symbol!("ncclGetErrorString"),
        _lib: Some(l),
    })
}

/// NCCL, loaded once per process (the outcome, failure included, is kept).
fn api() -> Result<&'static Api, GpuError> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| load_from(&libs::NCCL, &libs::search_dirs()))
        .as_ref()
        .map_err(|why| GpuError::Nccl(why.clone()))
}

fn check(api: &Api, what: &str, code: NcclResult) -> Result<(), GpuError> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: ncclGetErrorString returns a static C string (or null).
    let text = unsafe {
        let p = (api.error_string)(code);
        if p.is_null() {
            "unknown error".to_string()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Err(GpuError::Nccl(format!(
        "NCCL {what}: {text} (ncclResult {code})"
    )))
}

/// The loaded NCCL's version, `2.21.5`; an error where NCCL cannot be loaded.
pub fn version() -> Result<String, GpuError> {
    let api = api()?;
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(api, "ncclGetVersion", unsafe { (api.get_version)(&mut v) })?;
    // NCCL ≥ 2.9 encodes 10000 × major + 100 × minor + patch.
    Ok(format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100))
}

/// A region of `f32`s on one rank's GPU, and the stream its all-reduce is ordered on.
#[derive(Clone, Copy, Debug)]
pub struct RankBuffer {
    pub ptr: u64,
    pub len: usize,
    pub stream: cudarc::driver::sys::CUstream,
}

/// One communicator per GPU of this process (`ncclCommInitAll`): rank `r` on `ordinals[r]`.
/// The same for one GPU (a one-rank communicator) as for k.
pub struct Comms {
    api: &'static Api,
    comms: Vec<RawComm>,
}

// SAFETY: NCCL's communicators may be used from any thread, one call at a time; `Comms` is not
// `Sync`, so its users serialize (a `Mutex` where shared).
unsafe impl Send for Comms {}

impl Comms {
    /// Communicators over `ordinals` (CUDA device ordinals, one rank each, in order).
    pub fn init_all(ordinals: &[usize]) -> Result<Comms, GpuError> {
        let api = api()?;
        let devs: Vec<c_int> = ordinals
            .iter()
            .map(|&o| c_int::try_from(o).map_err(|_| GpuError::TooLarge(o)))
            .collect::<Result<_, _>>()?;
        let n = c_int::try_from(devs.len()).map_err(|_| GpuError::TooLarge(devs.len()))?;
        if devs.is_empty() {
            return Err(GpuError::Nccl(
                "NCCL: a communicator needs at least one GPU".into(),
            ));
        }
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // NCCL makes its own streams and memory here, which would break a capture in progress
        // on another thread.
        let _outside = super::capture_guard::outside_captures();
        // SAFETY: `comms` holds one slot per device listed in `devs`.
        let code = unsafe { (api.comm_init_all)(comms.as_mut_ptr(), n, devs.as_ptr()) };
        check(api, "ncclCommInitAll", code)?;
        Ok(Comms { api, comms })
    }

    /// Enqueue `ncclAllReduce` (sum, float32, in place) of rank `r`'s `bufs[r]` on its stream,
    /// every rank in one group (one thread drives all the GPUs).
    ///
    /// Outside graph captures (`capture_guard`), as every call that may synchronize: NCCL may
    /// set up a connection, register memory or launch on its own streams at a group's end,
    /// which would invalidate a capture in progress on another thread (the cuRAND failure
    /// class: `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`). It waits for such a capture instead.
    ///
    /// # Safety
    /// Each `bufs[r]` addresses `len` live floats on rank `r`'s GPU, all the same `len`, and
    /// stays alive until the reduction has run on its stream.
    pub unsafe fn all_reduce_sum(&self, bufs: &[RankBuffer]) -> Result<(), GpuError> {
        if bufs.len() != self.comms.len() || bufs.windows(2).any(|w| w[0].len != w[1].len) {
            return Err(GpuError::Lengths(format!(
                "all-reduce of {} buffers of unequal or wrong count over {} ranks",
                bufs.len(),
                self.comms.len()
            )));
        }
        let api = self.api;
        let _outside = super::capture_guard::outside_captures();
        // SAFETY: per this function's contract; the group is always closed.
        unsafe {
            check(api, "ncclGroupStart", (api.group_start)())?;
            let mut first = Ok(());
            for (b, &comm) in bufs.iter().zip(&self.comms) {
                let p = b.ptr as *mut c_void;
                let code = (api.all_reduce)(
                    p,
                    p,
                    b.len,
                    NCCL_FLOAT32,
                    NCCL_SUM,
                    comm,
                    b.stream as *mut c_void,
                );
                if first.is_ok() {
                    first = check(api, "ncclAllReduce", code);
                }
            }
            let end = check(api, "ncclGroupEnd", (api.group_end)());
            first.and(end)
        }
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        // Destroying a communicator frees its streams and memory: not during another's capture.
        let _outside = super::capture_guard::outside_captures();
        for &c in &self.comms {
            // SAFETY: each communicator was created by `init_all` and is destroyed once.
            let _ = unsafe { (self.api.comm_destroy)(c) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_nccl_is_an_error_naming_what_to_install() {
        let nowhere = CudaLib {
            name: "NCCL",
            sonames: &["libparbench-no-nccl.so.2"],
            prefix: "libparbench-no-nccl.so",
        };
        let why = load_from(&nowhere, &[]).err().expect("nothing to load");
        assert!(why.contains("pip install nvidia-nccl-cu13"), "{why}");
        assert!(why.contains("libparbench-no-nccl.so.2"), "{why}");
        assert!(!why.contains('\n'));
        // A file by that name that is not a library: an error, not a panic.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("libparbench-no-nccl.so.2"), b"").unwrap();
        let why = load_from(&nowhere, &[d.path().to_path_buf()])
            .err()
            .expect("not a library");
        assert!(why.starts_with("cannot open"), "{why}");
    }

    /// Stand-in entry points: the all-reduce notes whether a graph capture could start while
    /// it runs (it must not: it holds the capture guard).
    mod stand_in {
        use super::*;
        use std::sync::atomic::{AtomicUsize, Ordering};

        pub static CALLS: AtomicUsize = AtomicUsize::new(0);
        pub static UNGUARDED: AtomicUsize = AtomicUsize::new(0);

        unsafe extern "C" fn ok0() -> NcclResult {
            0
        }
        unsafe extern "C" fn version(v: *mut c_int) -> NcclResult {
            // SAFETY: the caller passes one int to write.
            unsafe { *v = 22_005 };
            0
        }
        unsafe extern "C" fn init_all(_: *mut RawComm, _: c_int, _: *const c_int) -> NcclResult {
            0
        }
        unsafe extern "C" fn destroy(_: RawComm) -> NcclResult {
            0
        }
        unsafe extern "C" fn error_string(_: NcclResult) -> *const c_char {
            c"stand-in".as_ptr()
        }
        unsafe extern "C" fn all_reduce(
            _: *const c_void,
            _: *mut c_void,
            _: usize,
            _: c_int,
            _: c_int,
            _: RawComm,
            _: *mut c_void,
        ) -> NcclResult {
            if !crate::device::cuda::capture_guard::held_outside_captures() {
                UNGUARDED.fetch_add(1, Ordering::SeqCst);
            }
            CALLS.fetch_add(1, Ordering::SeqCst);
            0
        }

        pub fn comms(ranks: usize) -> Comms {
            let api: &'static Api = Box::leak(Box::new(Api {
                get_version: version,
                comm_init_all: init_all,
                comm_destroy: destroy,
                all_reduce,
                group_start: ok0,
                group_end: ok0,
                error_string,
                _lib: None,
            }));
            Comms {
                api,
                comms: vec![std::ptr::null_mut(); ranks],
            }
        }
    }

    #[test]
    fn the_all_reduce_waits_for_a_capture_in_progress_and_holds_the_guard() {
        use std::sync::atomic::Ordering;
        use std::time::Duration;
        let bufs = |lens: [usize; 2]| {
            lens.map(|len| RankBuffer {
                ptr: 0,
                len,
                stream: std::ptr::null_mut(),
            })
        };
        let capture = crate::device::cuda::capture_guard::capturing();
        let reduce = std::thread::spawn(move || {
            // SAFETY: the stand-in's all-reduce touches no memory.
            unsafe { stand_in::comms(2).all_reduce_sum(&bufs([4, 4])) }.is_ok()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            stand_in::CALLS.load(Ordering::SeqCst),
            0,
            "the all-reduce ran during a capture"
        );
        drop(capture);
        assert!(reduce.join().unwrap(), "the stand-in all-reduce succeeds");
        assert_eq!(stand_in::CALLS.load(Ordering::SeqCst), 2, "one call a rank");
        assert_eq!(stand_in::UNGUARDED.load(Ordering::SeqCst), 0);
        // Unequal lengths are refused before anything is enqueued.
        // SAFETY: as above.
        let uneven = unsafe { stand_in::comms(2).all_reduce_sum(&bufs([4, 3])) };
        assert!(matches!(uneven, Err(GpuError::Lengths(_))), "{uneven:?}");
        assert_eq!(stand_in::CALLS.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn nccl_here_loads_or_says_why_without_a_panic() {
        // Whatever this machine has: no panic, and an absent NCCL names the wheel.
        match version() {
            Ok(v) => assert!(v.starts_with("2."), "{v}"),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("NCCL") && text.contains("nvidia-nccl"),
                    "{text}"
                );
            }
        }
    }
}
