//! The loader: batches prepared ahead on a background thread while the
//! device runs (SambaLoader).
use crate::error::{check, cstr, report, Error, Result};
use crate::sys;
use crate::tensor::Tensor;
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;
use std::sync::Mutex;

/// Produces batch `index`: `Some(tensors)` in the order of the loader's
/// names, or `None` at the end of the data. Called on the loader's thread.
type Produce = Mutex<Box<dyn FnMut(i64) -> Result<Option<Vec<Tensor>>> + Send>>;

unsafe extern "C" fn call_produce(
    user: *mut c_void,
    index: i64,
    tensors: *mut *mut sys::samba_tensor,
    n: usize,
    end: *mut i32,
) -> sys::samba_status {
    let produce = &*(user as *const Produce);
    report(|| {
        let mut produce = produce.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match produce(index)? {
            None => *end = 1,
            Some(batch) if batch.len() != n => {
                return Err(Error::new(
                    sys::SAMBA_ERR_INVALID_ARGUMENT,
                    format!("batch {index} has {} tensors; the loader has {n} names", batch.len()),
                ));
            }
            Some(batch) => {
                for (i, t) in batch.into_iter().enumerate() {
                    *tensors.add(i) = t.0;
                    std::mem::forget(t); // the loader takes the reference
                }
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn drop_produce(user: *mut c_void) {
    drop(Box::from_raw(user as *mut Produce));
}

/// Loader settings.
#[derive(Debug, Clone, Copy)]
pub struct LoaderOptions {
    /// Batches prepared ahead (1..1024; default 2).
    pub max_prefetch: i32,
    /// How long [`Loader::next`] waits for a batch (default 60 s).
    pub timeout_ms: i64,
    /// Stop after this many batches (None: when the producer says end).
    pub num_batches: Option<i64>,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions { max_prefetch: 2, timeout_ms: 60_000, num_batches: None }
    }
}

/// Batches of named tensors, prepared ahead in pinned memory by a background
/// thread. Also an iterator over `Result<Vec<Tensor>>`.
///
/// ```
/// use samba::{Loader, LoaderOptions, Tensor};
/// let loader = Loader::new(&["x"], LoaderOptions::default(), |i| {
///     Ok(if i < 3 { Some(vec![Tensor::from_f32(&[i as f32], &[1])?]) } else { None })
/// })?;
/// let firsts: Vec<f32> = loader.map(|batch| batch.unwrap()[0].item().unwrap() as f32).collect();
/// assert_eq!(firsts, vec![0.0, 1.0, 2.0]);
/// # Ok::<(), samba::Error>(())
/// ```
pub struct Loader {
    raw: *mut sys::samba_loader,
    width: usize,
    // A producer's error stops the loader for good; the iterator ends after
    // yielding it once.
    failed: bool,
}

// One consumer at a time (the loader's own thread is the engine's).
unsafe impl Send for Loader {}

impl Drop for Loader {
    fn drop(&mut self) {
        unsafe { sys::samba_loader_release(self.raw) }
    }
}

impl Loader {
    /// Starts a loader of tensors named `names` over `produce`.
    pub fn new(
        names: &[&str],
        options: LoaderOptions,
        produce: impl FnMut(i64) -> Result<Option<Vec<Tensor>>> + Send + 'static,
    ) -> Result<Loader> {
        let owned: Vec<CString> = names.iter().map(|n| cstr(n)).collect::<Result<_>>()?;
        let ptrs: Vec<_> = owned.iter().map(|n| n.as_ptr()).collect();
        let mut opts = ptr::null_mut();
        check(unsafe { sys::samba_loader_options_create(&mut opts) })?;
        let configured = check(unsafe { sys::samba_loader_options_set_max_prefetch(opts, options.max_prefetch) })
            .and_then(|_| check(unsafe { sys::samba_loader_options_set_timeout_ms(opts, options.timeout_ms) }))
            .and_then(|_| {
                check(unsafe { sys::samba_loader_options_set_num_batches(opts, options.num_batches.unwrap_or(-1)) })
            });
        let produce: Produce = Mutex::new(Box::new(produce));
        let user = Box::into_raw(Box::new(produce));
        let mut raw = ptr::null_mut();
        let created = configured.and_then(|_| {
            check(unsafe {
                sys::samba_loader_create(
                    ptrs.as_ptr(),
                    ptrs.len(),
                    Some(call_produce),
                    user as *mut c_void,
                    Some(drop_produce),
                    opts,
                    &mut raw,
                )
            })
        });
        unsafe { sys::samba_loader_options_release(opts) };
        if created.is_err() && raw.is_null() {
            unsafe { drop_produce(user as *mut c_void) };
        }
        created.map(|_| Loader { raw, width: names.len(), failed: false })
    }

    /// The next batch, or `None` at the end of the data.
    pub fn next_batch(&mut self) -> Result<Option<Vec<Tensor>>> {
        let mut out = vec![ptr::null_mut(); self.width];
        let mut end = 0;
        check(unsafe { sys::samba_loader_next(self.raw, out.as_mut_ptr(), out.len(), &mut end) })?;
        Ok(if end != 0 { None } else { Some(out.into_iter().map(Tensor).collect()) })
    }

    /// Starts again from batch 0 (a new epoch).
    pub fn reset(&mut self) -> Result<()> {
        check(unsafe { sys::samba_loader_reset(self.raw) })
    }
}

impl Iterator for Loader {
    type Item = Result<Vec<Tensor>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let batch = self.next_batch();
        self.failed = batch.is_err();
        batch.transpose()
    }
}
