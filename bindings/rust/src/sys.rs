//! The C ABI of include/samba.h, as far as this crate uses it.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type samba_status = i32;
pub type samba_dtype = i32;

pub const SAMBA_OK: samba_status = 0;
pub const SAMBA_ERR_INVALID_ARGUMENT: samba_status = 1;
pub const SAMBA_FLOAT32: samba_dtype = 0;
pub const SAMBA_INT64: samba_dtype = 4;

#[repr(C)]
pub struct samba_tensor {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_session {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_attrs {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_optimizer {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_compile_options {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_run_options {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_session_options {
    _p: [u8; 0],
}
#[repr(C)]
pub struct samba_trace_options {
    _p: [u8; 0],
}

pub type samba_model_fn = unsafe extern "C" fn(
    user_data: *mut c_void,
    inputs: *const *mut samba_tensor,
    n_inputs: usize,
    outputs: *mut *mut samba_tensor,
    capacity: usize,
    n_outputs: *mut usize,
) -> samba_status;

extern "C" {
    pub fn samba_last_error_message() -> *const c_char;
    pub fn samba_status_name(status: samba_status) -> *const c_char;
    pub fn samba_set_error_message(code: samba_status, message: *const c_char) -> samba_status;
    pub fn samba_version() -> *const c_char;

    pub fn samba_tensor_create(dtype: samba_dtype, shape: *const i64, ndim: usize, out: *mut *mut samba_tensor) -> samba_status;
    pub fn samba_tensor_retain(t: *mut samba_tensor) -> samba_status;
    pub fn samba_tensor_release(t: *mut samba_tensor);
    pub fn samba_tensor_copy_from(t: *mut samba_tensor, src: *const c_void, nbytes: usize) -> samba_status;
    pub fn samba_tensor_copy_to(t: *const samba_tensor, dst: *mut c_void, nbytes: usize) -> samba_status;
    pub fn samba_tensor_to(t: *mut samba_tensor, dtype: samba_dtype, out: *mut *mut samba_tensor) -> samba_status;
    pub fn samba_tensor_numel(t: *const samba_tensor, out: *mut i64) -> samba_status;
    pub fn samba_tensor_shape(t: *const samba_tensor, dims: *mut *const i64, ndim: *mut usize) -> samba_status;
    pub fn samba_tensor_item(t: *const samba_tensor, out: *mut f64) -> samba_status;
    pub fn samba_tensor_set_name(t: *mut samba_tensor, name: *const c_char) -> samba_status;
    pub fn samba_tensor_set_requires_grad(t: *mut samba_tensor, requires_grad: i32) -> samba_status;
    pub fn samba_tensor_grad(t: *const samba_tensor, out: *mut *mut samba_tensor) -> samba_status;
    pub fn samba_tensor_backward(t: *mut samba_tensor, grad: *mut samba_tensor, retain_graph: i32) -> samba_status;
    pub fn samba_tensor_sn_data(s: *mut samba_session, t: *const samba_tensor, out: *mut *mut samba_tensor) -> samba_status;

    pub fn samba_attrs_create(out: *mut *mut samba_attrs) -> samba_status;
    pub fn samba_attrs_set_float(a: *mut samba_attrs, name: *const c_char, value: f64) -> samba_status;
    pub fn samba_attrs_set_int(a: *mut samba_attrs, name: *const c_char, value: i64) -> samba_status;
    pub fn samba_attrs_set_ints(a: *mut samba_attrs, name: *const c_char, values: *const i64, n: usize) -> samba_status;
    pub fn samba_attrs_release(a: *mut samba_attrs);

    pub fn samba_op_call(
        s: *mut samba_session,
        name: *const c_char,
        inputs: *const *mut samba_tensor,
        n_inputs: usize,
        attrs: *const samba_attrs,
        outputs: *mut *mut samba_tensor,
        capacity: usize,
        n_outputs: *mut usize,
    ) -> samba_status;

    pub fn samba_optimizer_create(kind: *const c_char, defaults: *const samba_attrs, out: *mut *mut samba_optimizer) -> samba_status;
    pub fn samba_optimizer_add_param_group(
        opt: *mut samba_optimizer,
        params: *const *mut samba_tensor,
        n: usize,
        hyper: *const samba_attrs,
    ) -> samba_status;
    pub fn samba_optimizer_release(opt: *mut samba_optimizer);

    pub fn samba_session_options_create(out: *mut *mut samba_session_options) -> samba_status;
    pub fn samba_session_options_set_num_threads(o: *mut samba_session_options, threads: i32) -> samba_status;
    pub fn samba_session_options_release(o: *mut samba_session_options);
    pub fn samba_session_create(opts: *const samba_session_options, out: *mut *mut samba_session) -> samba_status;
    pub fn samba_session_release(s: *mut samba_session);

    pub fn samba_compile_options_create(out: *mut *mut samba_compile_options) -> samba_status;
    pub fn samba_compile_options_set_pef_path(o: *mut samba_compile_options, path: *const c_char) -> samba_status;
    pub fn samba_compile_options_set_loss_indices(o: *mut samba_compile_options, idx: *const i64, n: usize) -> samba_status;
    pub fn samba_compile_options_release(o: *mut samba_compile_options);

    pub fn samba_session_compile(
        s: *mut samba_session,
        model: samba_model_fn,
        user_data: *mut c_void,
        inputs: *const *mut samba_tensor,
        n_inputs: usize,
        optimizers: *const *mut samba_optimizer,
        n_optimizers: usize,
        opts: *const samba_compile_options,
    ) -> samba_status;
    pub fn samba_session_trace_graph(
        s: *mut samba_session,
        model: Option<samba_model_fn>,
        user_data: *mut c_void,
        inputs: *const *mut samba_tensor,
        n_inputs: usize,
        optimizers: *const *mut samba_optimizer,
        n_optimizers: usize,
        pef_path: *const c_char,
        opts: *const samba_trace_options,
        outputs: *mut *mut samba_tensor,
        capacity: usize,
        n_outputs: *mut usize,
    ) -> samba_status;
    pub fn samba_run_options_create(out: *mut *mut samba_run_options) -> samba_status;
    pub fn samba_run_options_set_hyperparam(o: *mut samba_run_options, name: *const c_char, value: f64) -> samba_status;
    pub fn samba_run_options_release(o: *mut samba_run_options);
    pub fn samba_session_run(
        s: *mut samba_session,
        inputs: *const *mut samba_tensor,
        n_inputs: usize,
        output_tensors: *const *mut samba_tensor,
        n_output_tensors: usize,
        opts: *const samba_run_options,
        outputs: *mut *mut samba_tensor,
        capacity: usize,
        n_outputs: *mut usize,
    ) -> samba_status;
}
