//! Safe Rust bindings to Samba (libsamba.so): tensors with owned handles,
//! eager ops, optimizers, and sessions that compile a model (a closure) into
//! a PEF, load it and run it. Every failed call is an `Err(Error)` carrying
//! the status name and the library's message.
pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// A failed call: the status (`SAMBA_ERR_SHAPE_MISMATCH`, ...) and the message.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub status: i32,
    pub status_name: String,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn check(status: sys::samba_status) -> Result<()> {
    if status == sys::SAMBA_OK {
        return Ok(());
    }
    unsafe {
        Err(Error {
            status,
            status_name: CStr::from_ptr(sys::samba_status_name(status)).to_string_lossy().into_owned(),
            message: CStr::from_ptr(sys::samba_last_error_message()).to_string_lossy().into_owned(),
        })
    }
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("names must not contain NUL bytes")
}

/// The library's version string.
pub fn version() -> String {
    unsafe { CStr::from_ptr(sys::samba_version()).to_string_lossy().into_owned() }
}

/// A tensor handle: `Clone` retains, `Drop` releases.
pub struct Tensor(*mut sys::samba_tensor);

unsafe impl Send for Tensor {}

impl Clone for Tensor {
    fn clone(&self) -> Self {
        unsafe { sys::samba_tensor_retain(self.0) };
        Tensor(self.0)
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::samba_tensor_release(self.0) }
    }
}

impl Tensor {
    /// Takes ownership of a handle a C function returned.
    ///
    /// # Safety
    /// `h` must be an owned, valid samba_tensor handle.
    pub unsafe fn from_raw(h: *mut sys::samba_tensor) -> Self {
        Tensor(h)
    }

    /// Shares a borrowed handle (retains it).
    ///
    /// # Safety
    /// `h` must be a valid samba_tensor handle.
    pub unsafe fn borrow_raw(h: *mut sys::samba_tensor) -> Self {
        sys::samba_tensor_retain(h);
        Tensor(h)
    }

    pub fn as_ptr(&self) -> *mut sys::samba_tensor {
        self.0
    }

    fn create(dtype: sys::samba_dtype, shape: &[i64]) -> Result<Tensor> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_tensor_create(dtype, shape.as_ptr(), shape.len(), &mut h) })?;
        Ok(Tensor(h))
    }

    /// A float32 tensor of `shape` holding a copy of `values`.
    pub fn from_f32(values: &[f32], shape: &[i64]) -> Result<Tensor> {
        let t = Tensor::create(sys::SAMBA_FLOAT32, shape)?;
        check(unsafe {
            sys::samba_tensor_copy_from(t.0, values.as_ptr() as *const c_void, std::mem::size_of_val(values))
        })?;
        Ok(t)
    }

    /// An int64 tensor of `shape` holding a copy of `values`.
    pub fn from_i64(values: &[i64], shape: &[i64]) -> Result<Tensor> {
        let t = Tensor::create(sys::SAMBA_INT64, shape)?;
        check(unsafe {
            sys::samba_tensor_copy_from(t.0, values.as_ptr() as *const c_void, std::mem::size_of_val(values))
        })?;
        Ok(t)
    }

    pub fn shape(&self) -> Result<Vec<i64>> {
        let mut dims = ptr::null();
        let mut n = 0usize;
        check(unsafe { sys::samba_tensor_shape(self.0, &mut dims, &mut n) })?;
        Ok(if n == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(dims, n).to_vec() } })
    }

    pub fn numel(&self) -> Result<i64> {
        let mut n = 0i64;
        check(unsafe { sys::samba_tensor_numel(self.0, &mut n) })?;
        Ok(n)
    }

    /// The values as float32 (converted by a copy).
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        let mut c = ptr::null_mut();
        check(unsafe { sys::samba_tensor_to(self.0, sys::SAMBA_FLOAT32, &mut c) })?;
        let c = Tensor(c);
        let mut out = vec![0f32; c.numel()? as usize];
        check(unsafe {
            sys::samba_tensor_copy_to(c.0, out.as_mut_ptr() as *mut c_void, std::mem::size_of_val(out.as_slice()))
        })?;
        Ok(out)
    }

    pub fn item(&self) -> Result<f64> {
        let mut v = 0f64;
        check(unsafe { sys::samba_tensor_item(self.0, &mut v) })?;
        Ok(v)
    }

    pub fn set_name(&self, name: &str) -> Result<&Self> {
        let n = cstr(name);
        check(unsafe { sys::samba_tensor_set_name(self.0, n.as_ptr()) })?;
        Ok(self)
    }

    pub fn set_requires_grad(&self, on: bool) -> Result<&Self> {
        check(unsafe { sys::samba_tensor_set_requires_grad(self.0, on as i32) })?;
        Ok(self)
    }

    /// The gradient left by `backward`, if any (the C call lends it; the
    /// returned handle holds its own reference).
    pub fn grad(&self) -> Result<Option<Tensor>> {
        let mut g = ptr::null_mut();
        check(unsafe { sys::samba_tensor_grad(self.0, &mut g) })?;
        Ok(if g.is_null() { None } else { Some(unsafe { Tensor::borrow_raw(g) }) })
    }

    pub fn backward(&self) -> Result<()> {
        check(unsafe { sys::samba_tensor_backward(self.0, ptr::null_mut(), 0) })
    }
}

/// Attribute values for ops and optimizers.
pub struct Attrs(*mut sys::samba_attrs);

impl Drop for Attrs {
    fn drop(&mut self) {
        unsafe { sys::samba_attrs_release(self.0) }
    }
}

impl Attrs {
    pub fn new() -> Result<Attrs> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_attrs_create(&mut h) })?;
        Ok(Attrs(h))
    }
    pub fn float(self, name: &str, v: f64) -> Result<Attrs> {
        let n = cstr(name);
        check(unsafe { sys::samba_attrs_set_float(self.0, n.as_ptr(), v) })?;
        Ok(self)
    }
    pub fn int(self, name: &str, v: i64) -> Result<Attrs> {
        let n = cstr(name);
        check(unsafe { sys::samba_attrs_set_int(self.0, n.as_ptr(), v) })?;
        Ok(self)
    }
    pub fn ints(self, name: &str, v: &[i64]) -> Result<Attrs> {
        let n = cstr(name);
        check(unsafe { sys::samba_attrs_set_ints(self.0, n.as_ptr(), v.as_ptr(), v.len()) })?;
        Ok(self)
    }
}

/// Runs registry op `name` on `inputs` (eagerly, or recorded while compiling).
pub fn op(name: &str, inputs: &[&Tensor], attrs: Option<&Attrs>) -> Result<Vec<Tensor>> {
    let n = cstr(name);
    let ins: Vec<*mut sys::samba_tensor> = inputs.iter().map(|t| t.0).collect();
    let mut outs = vec![ptr::null_mut(); 16];
    let mut count = 0usize;
    check(unsafe {
        sys::samba_op_call(
            ptr::null_mut(),
            n.as_ptr(),
            ins.as_ptr(),
            ins.len(),
            attrs.map_or(ptr::null(), |a| a.0 as *const _),
            outs.as_mut_ptr(),
            outs.len(),
            &mut count,
        )
    })?;
    Ok(outs[..count].iter().map(|&h| Tensor(h)).collect())
}

/// Single-output form of `op`.
pub fn op1(name: &str, inputs: &[&Tensor], attrs: Option<&Attrs>) -> Result<Tensor> {
    Ok(op(name, inputs, attrs)?.remove(0))
}

/// SGD or AdamW over parameter groups.
pub struct Optimizer(*mut sys::samba_optimizer);

impl Drop for Optimizer {
    fn drop(&mut self) {
        unsafe { sys::samba_optimizer_release(self.0) }
    }
}

impl Optimizer {
    pub fn new(kind: &str, defaults: &Attrs) -> Result<Optimizer> {
        let k = cstr(kind);
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_optimizer_create(k.as_ptr(), defaults.0, &mut h) })?;
        Ok(Optimizer(h))
    }
    pub fn add_param_group(&self, params: &[&Tensor]) -> Result<()> {
        let p: Vec<*mut sys::samba_tensor> = params.iter().map(|t| t.0).collect();
        check(unsafe { sys::samba_optimizer_add_param_group(self.0, p.as_ptr(), p.len(), ptr::null()) })
    }
}

/// A model: inputs to outputs, built from `op` calls.
pub type Model<'a> = dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + 'a;

unsafe extern "C" fn call_model(
    user: *mut c_void,
    inputs: *const *mut sys::samba_tensor,
    n_inputs: usize,
    outputs: *mut *mut sys::samba_tensor,
    capacity: usize,
    n_outputs: *mut usize,
) -> sys::samba_status {
    let model = &*(user as *const &Model);
    let ins: Vec<Tensor> = (0..n_inputs).map(|i| Tensor::borrow_raw(*inputs.add(i))).collect();
    let result = catch_unwind(AssertUnwindSafe(|| model(&ins)));
    let fail = |status: i32, message: &str| {
        let m = cstr(&message.replace('\0', " "));
        sys::samba_set_error_message(status, m.as_ptr());
        status
    };
    match result {
        Ok(Ok(outs)) => {
            if outs.len() > capacity {
                return fail(sys::SAMBA_ERR_INVALID_ARGUMENT, "the model returned too many outputs");
            }
            let n = outs.len();
            for (i, t) in outs.into_iter().enumerate() {
                *outputs.add(i) = t.0;
                std::mem::forget(t); // the engine takes the reference
            }
            *n_outputs = n;
            sys::SAMBA_OK
        }
        Ok(Err(e)) => fail(e.status, &e.message),
        Err(_) => fail(sys::SAMBA_ERR_INVALID_ARGUMENT, "the model panicked"),
    }
}

/// A session: compile models into PEFs, load and run them.
pub struct Session(*mut sys::samba_session);

impl Drop for Session {
    fn drop(&mut self) {
        unsafe { sys::samba_session_release(self.0) }
    }
}

impl Session {
    /// A session with `threads` threads (0: one per hardware thread).
    pub fn new(threads: i32) -> Result<Session> {
        let mut o = ptr::null_mut();
        check(unsafe { sys::samba_session_options_create(&mut o) })?;
        let r = check(unsafe { sys::samba_session_options_set_num_threads(o, threads) });
        let mut s = ptr::null_mut();
        let r = r.and_then(|_| check(unsafe { sys::samba_session_create(o, &mut s) }));
        unsafe { sys::samba_session_options_release(o) };
        r.map(|_| Session(s))
    }

    /// Traces `model` on `inputs` with `optimizers` and writes the PEF to `pef_path`.
    pub fn compile(
        &self,
        model: &Model,
        inputs: &[&Tensor],
        optimizers: &[&Optimizer],
        pef_path: &str,
        loss_indices: &[i64],
    ) -> Result<()> {
        let mut co = ptr::null_mut();
        check(unsafe { sys::samba_compile_options_create(&mut co) })?;
        let path = cstr(pef_path);
        let ins: Vec<*mut sys::samba_tensor> = inputs.iter().map(|t| t.0).collect();
        let opts: Vec<*mut sys::samba_optimizer> = optimizers.iter().map(|o| o.0).collect();
        let user: *const &Model = &model;
        let r = check(unsafe { sys::samba_compile_options_set_pef_path(co, path.as_ptr()) })
            .and_then(|_| {
                check(unsafe { sys::samba_compile_options_set_loss_indices(co, loss_indices.as_ptr(), loss_indices.len()) })
            })
            .and_then(|_| {
                check(unsafe {
                    sys::samba_session_compile(
                        self.0,
                        call_model,
                        user as *mut c_void,
                        ins.as_ptr(),
                        ins.len(),
                        opts.as_ptr(),
                        opts.len(),
                        co,
                    )
                })
            });
        unsafe { sys::samba_compile_options_release(co) };
        r
    }

    /// Loads the PEF after checking `model` against it; returns the model's outputs.
    pub fn trace_graph(
        &self,
        model: &Model,
        inputs: &[&Tensor],
        optimizers: &[&Optimizer],
        pef_path: &str,
    ) -> Result<Vec<Tensor>> {
        let path = cstr(pef_path);
        let ins: Vec<*mut sys::samba_tensor> = inputs.iter().map(|t| t.0).collect();
        let opts: Vec<*mut sys::samba_optimizer> = optimizers.iter().map(|o| o.0).collect();
        let user: *const &Model = &model;
        let mut outs = vec![ptr::null_mut(); 64];
        let mut n = 0usize;
        check(unsafe {
            sys::samba_session_trace_graph(
                self.0,
                Some(call_model),
                user as *mut c_void,
                ins.as_ptr(),
                ins.len(),
                opts.as_ptr(),
                opts.len(),
                path.as_ptr(),
                ptr::null(),
                outs.as_mut_ptr(),
                outs.len(),
                &mut n,
            )
        })?;
        Ok(outs[..n].iter().map(|&h| Tensor(h)).collect())
    }

    /// Runs the whole schedule with `inputs` (hyperparameters set first) and
    /// returns the values of `outputs`.
    pub fn run(&self, inputs: &[&Tensor], outputs: &[Tensor], hyperparams: &[(&str, f64)]) -> Result<Vec<Tensor>> {
        let mut ro = ptr::null_mut();
        check(unsafe { sys::samba_run_options_create(&mut ro) })?;
        let mut r = Ok(());
        for (name, v) in hyperparams {
            let n = cstr(name);
            r = r.and_then(|_| check(unsafe { sys::samba_run_options_set_hyperparam(ro, n.as_ptr(), *v) }));
        }
        let ins: Vec<*mut sys::samba_tensor> = inputs.iter().map(|t| t.0).collect();
        let want: Vec<*mut sys::samba_tensor> = outputs.iter().map(|t| t.0).collect();
        let mut outs = vec![ptr::null_mut(); 64];
        let mut n = 0usize;
        let r = r.and_then(|_| {
            check(unsafe {
                sys::samba_session_run(
                    self.0,
                    ins.as_ptr(),
                    ins.len(),
                    want.as_ptr(),
                    want.len(),
                    ro,
                    outs.as_mut_ptr(),
                    outs.len(),
                    &mut n,
                )
            })
        });
        unsafe { sys::samba_run_options_release(ro) };
        r.map(|_| outs[..n].iter().map(|&h| Tensor(h)).collect())
    }

    /// The device value of `t` (sn_data).
    pub fn sn_data(&self, t: &Tensor) -> Result<Tensor> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::samba_tensor_sn_data(self.0, t.0, &mut v) })?;
        Ok(Tensor(v))
    }
}
