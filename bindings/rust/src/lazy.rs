//! Lazy parameters: placeholders filled by their materializer when first
//! needed (on the device when a PEF is loaded), from random streams keyed by
//! (seed, sn_name), so the values do not depend on when or where they are made.
use crate::error::{check, cstr, report, string, Result};
use crate::ops::{attrs_ptr, Attrs};
use crate::session::Session;
use crate::sys;
use crate::tensor::{Dtype, Tensor};
use std::os::raw::c_void;
use std::ptr;

/// What fills a parameter with its initial values.
pub struct Materializer(*mut sys::samba_materializer);

// Materializers are refcounted and immutable; a custom one's closure is
// `Send + Sync`.
unsafe impl Send for Materializer {}
unsafe impl Sync for Materializer {}

impl Drop for Materializer {
    fn drop(&mut self) {
        unsafe { sys::samba_materializer_release(self.0) }
    }
}

impl Clone for Materializer {
    fn clone(&self) -> Self {
        unsafe { sys::samba_materializer_retain(self.0) };
        Materializer(self.0)
    }
}

/// The random stream a materializer draws from (borrowed during the call).
pub struct RngStream<'a>(&'a sys::samba_rng_stream);

impl RngStream<'_> {
    /// Fills `out` with uniform values in `[low, high)`.
    pub fn uniform(&self, out: &Tensor, low: f64, high: f64) -> Result<()> {
        check(unsafe { sys::samba_rng_stream_uniform(self.0, out.0, low, high) })
    }
    /// Fills `out` with normal values.
    pub fn normal(&self, out: &Tensor, mean: f64, std: f64) -> Result<()> {
        check(unsafe { sys::samba_rng_stream_normal(self.0, out.0, mean, std) })
    }
    /// Fills `out` with integers in `[low, high)`.
    pub fn integers(&self, out: &Tensor, low: i64, high: i64) -> Result<()> {
        check(unsafe { sys::samba_rng_stream_integers(self.0, out.0, low, high) })
    }
}

type Fill = dyn Fn(&Tensor, &RngStream) -> Result<()> + Send + Sync;

unsafe extern "C" fn call_fill(
    user: *mut c_void,
    out: *mut sys::samba_tensor,
    rng: *const sys::samba_rng_stream,
) -> sys::samba_status {
    let fill = &*(user as *const Box<Fill>);
    report(|| fill(&Tensor::borrow_raw(out), &RngStream(&*rng)))
}

unsafe extern "C" fn drop_fill(user: *mut c_void) {
    drop(Box::from_raw(user as *mut Box<Fill>));
}

impl Materializer {
    /// A built-in materializer with torch.nn.init's formulas and parameter
    /// names ("uniform", "normal", "kaiming_uniform", "linear_weight",
    /// "linear_bias", ...); recorded in PEF files.
    pub fn new(kind: &str, params: Option<&Attrs>) -> Result<Materializer> {
        let k = cstr(kind)?;
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_materializer_create(k.as_ptr(), attrs_ptr(params), &mut h) })?;
        Ok(Materializer(h))
    }

    /// A materializer running `fill` on the tensor to fill (contiguous, with
    /// data) and the tensor's random stream. Not stored in PEF files.
    pub fn custom(fill: impl Fn(&Tensor, &RngStream) -> Result<()> + Send + Sync + 'static) -> Result<Materializer> {
        let user = Box::into_raw(Box::new(Box::new(fill) as Box<Fill>));
        let mut h = ptr::null_mut();
        let status = unsafe {
            sys::samba_materializer_create_custom(Some(call_fill), user as *mut c_void, Some(drop_fill), &mut h)
        };
        if status != sys::SAMBA_OK {
            unsafe { drop_fill(user as *mut c_void) };
        }
        check(status)?;
        Ok(Materializer(h))
    }

    /// The kind ("kaiming_uniform", ..., "custom").
    pub fn kind(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::samba_materializer_kind(self.0, &mut s) })?;
        Ok(unsafe { string(s) })
    }
}

/// How random values are rounded from float32 to bfloat16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Bf16Rounding {
    NearestEven = sys::SAMBA_BF16_NEAREST_EVEN,
    Truncation = sys::SAMBA_BF16_TRUNCATION,
}

/// The arguments of [`Session::enable_lazy_param`].
pub struct LazyParamOptions(*mut sys::samba_lazy_param_options);

impl Drop for LazyParamOptions {
    fn drop(&mut self) {
        unsafe { sys::samba_lazy_param_options_release(self.0) }
    }
}

impl LazyParamOptions {
    /// The defaults: the session's seed, 8 init threads, Box-Muller normals,
    /// nearest-even bf16 rounding.
    pub fn new() -> Result<Self> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_lazy_param_options_create(&mut h) })?;
        Ok(LazyParamOptions(h))
    }
    /// The seed lazy values are drawn with.
    pub fn seed(self, seed: u64) -> Result<Self> {
        check(unsafe { sys::samba_lazy_param_options_set_seed(self.0, seed) })?;
        Ok(self)
    }
    /// Threads materializing one tensor (the values do not depend on it).
    pub fn init_threads(self, threads: i32) -> Result<Self> {
        check(unsafe { sys::samba_lazy_param_options_set_init_threads(self.0, threads) })?;
        Ok(self)
    }
    /// Normal samples by inverse transform sampling instead of Box-Muller.
    pub fn inverse_transform_sampling(self, on: bool) -> Result<Self> {
        check(unsafe { sys::samba_lazy_param_options_set_inverse_transform_sampling(self.0, on as i32) })?;
        Ok(self)
    }
    /// How float32 draws become bfloat16.
    pub fn bf16_rounding(self, rounding: Bf16Rounding) -> Result<Self> {
        check(unsafe { sys::samba_lazy_param_options_set_bf16_rounding(self.0, rounding as i32) })?;
        Ok(self)
    }
}

impl Session {
    /// From now on [`Session::create_parameter`] makes placeholders, filled
    /// when a PEF is loaded (on the device) or their data is first read.
    pub fn enable_lazy_param(&self, options: Option<&LazyParamOptions>) -> Result<()> {
        check(unsafe { sys::samba_session_enable_lazy_param(self.0, options.map_or(ptr::null(), |o| o.0 as *const _)) })
    }

    /// Parameters created from now on are materialized at once.
    pub fn disable_lazy_param(&self) -> Result<()> {
        check(unsafe { sys::samba_session_disable_lazy_param(self.0) })
    }

    /// Whether the session is in lazy parameter mode.
    pub fn use_lazy_param(&self) -> Result<bool> {
        let mut v = 0;
        check(unsafe { sys::samba_session_use_lazy_param(self.0, &mut v) })?;
        Ok(v != 0)
    }

    /// A parameter named `name` whose values come from `materializer`: a
    /// placeholder in lazy mode, filled now otherwise; the same values either way.
    pub fn create_parameter(
        &self,
        name: &str,
        dtype: Dtype,
        shape: &[i64],
        materializer: &Materializer,
    ) -> Result<Tensor> {
        let n = cstr(name)?;
        let mut h = ptr::null_mut();
        check(unsafe {
            sys::samba_session_create_parameter(
                self.0,
                n.as_ptr(),
                dtype as i32,
                shape.as_ptr(),
                shape.len(),
                materializer.0,
                &mut h,
            )
        })?;
        Ok(Tensor(h))
    }

    /// The session's random draws start again from its seed's first stream.
    pub fn reset_random_generator(&self) -> Result<()> {
        check(unsafe { sys::samba_session_reset_random_generator(self.0) })
    }
}

impl Tensor {
    /// The tensor's materializer, if it has one.
    pub fn materializer(&self) -> Result<Option<Materializer>> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_tensor_materializer(self.0, &mut h) })?;
        Ok(if h.is_null() { None } else { Some(Materializer(h)) })
    }

    /// Sets the tensor's materializer (recorded in the PEF when built-in).
    pub fn set_materializer(&self, materializer: &Materializer) -> Result<()> {
        check(unsafe { sys::samba_tensor_set_materializer(self.0, materializer.0) })
    }
}
