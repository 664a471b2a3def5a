//! Op attributes, op calls and optimizers.
use crate::error::{check, cstr, string, Error, Result};
use crate::tensor::{Dtype, Tensor};
use crate::{sys, Session};
use std::ptr;

/// Named attribute values for ops, optimizers and materializers, built by
/// chaining:
///
/// ```
/// let attrs = samba::Attrs::new()?.float("lr", 0.1)?.ints("normalized_shape", &[16])?;
/// # Ok::<(), samba::Error>(())
/// ```
pub struct Attrs(pub(crate) *mut sys::samba_attrs);

impl Drop for Attrs {
    fn drop(&mut self) {
        unsafe { sys::samba_attrs_release(self.0) }
    }
}

macro_rules! attr_setter {
    ($(#[$doc:meta])* $name:ident, $ty:ty, |$a:ident, $n:ident, $v:ident| $call:expr) => {
        $(#[$doc])*
        pub fn $name(self, name: &str, value: $ty) -> Result<Attrs> {
            let ($a, $n, $v) = (self.0, cstr(name)?, value);
            check(unsafe { $call })?;
            Ok(self)
        }
    };
}

impl Attrs {
    /// An empty set.
    pub fn new() -> Result<Attrs> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_attrs_create(&mut h) })?;
        Ok(Attrs(h))
    }
    attr_setter!(/// A float attribute.
        float, f64, |a, n, v| sys::samba_attrs_set_float(a, n.as_ptr(), v));
    attr_setter!(/// An integer attribute.
        int, i64, |a, n, v| sys::samba_attrs_set_int(a, n.as_ptr(), v));
    attr_setter!(/// A boolean attribute.
        bool, bool, |a, n, v| sys::samba_attrs_set_bool(a, n.as_ptr(), v as i32));
    attr_setter!(/// A dtype attribute.
        dtype, Dtype, |a, n, v| sys::samba_attrs_set_dtype(a, n.as_ptr(), v as i32));
    attr_setter!(/// A list of integers (dims, a shape).
        ints, &[i64], |a, n, v| sys::samba_attrs_set_ints(a, n.as_ptr(), v.as_ptr(), v.len()));
    attr_setter!(/// A list of floats.
        floats, &[f64], |a, n, v| sys::samba_attrs_set_floats(a, n.as_ptr(), v.as_ptr(), v.len()));

    /// A string attribute.
    pub fn string(self, name: &str, value: &str) -> Result<Attrs> {
        let (n, v) = (cstr(name)?, cstr(value)?);
        check(unsafe { sys::samba_attrs_set_string(self.0, n.as_ptr(), v.as_ptr()) })?;
        Ok(self)
    }
}

pub(crate) fn handles(tensors: &[&Tensor]) -> Vec<*mut sys::samba_tensor> {
    tensors.iter().map(|t| t.0).collect()
}

pub(crate) fn attrs_ptr(attrs: Option<&Attrs>) -> *const sys::samba_attrs {
    attrs.map_or(ptr::null(), |a| a.0 as *const _)
}

/// Calls a C function that writes owned tensors to a buffer of `capacity`,
/// growing it when the function says it needs more (OUT_OF_RANGE).
pub(crate) fn collect_outputs(
    mut call: impl FnMut(*mut *mut sys::samba_tensor, usize, &mut usize) -> sys::samba_status,
) -> Result<Vec<Tensor>> {
    let mut capacity = 16;
    loop {
        let mut outs = vec![ptr::null_mut(); capacity];
        let mut n = 0usize;
        let status = call(outs.as_mut_ptr(), capacity, &mut n);
        if status == sys::SAMBA_ERR_OUT_OF_RANGE && n > capacity {
            capacity = n;
            continue;
        }
        check(status)?;
        return Ok(outs[..n].iter().map(|&h| Tensor(h)).collect());
    }
}

/// Runs registry op `name` on `inputs` (eagerly, or recorded while a model
/// is being compiled), on the default thread pool.
pub fn op(name: &str, inputs: &[&Tensor], attrs: Option<&Attrs>) -> Result<Vec<Tensor>> {
    op_in(None, name, inputs, attrs)
}

/// [`op`] on `session`'s thread pool.
pub fn op_in(session: Option<&Session>, name: &str, inputs: &[&Tensor], attrs: Option<&Attrs>) -> Result<Vec<Tensor>> {
    let n = cstr(name)?;
    let ins = handles(inputs);
    let s = session.map_or(ptr::null_mut(), |s| s.0);
    collect_outputs(|outs, capacity, count| unsafe {
        sys::samba_op_call(s, n.as_ptr(), ins.as_ptr(), ins.len(), attrs_ptr(attrs), outs, capacity, count)
    })
}

/// The single-output form of [`op`].
pub fn op1(name: &str, inputs: &[&Tensor], attrs: Option<&Attrs>) -> Result<Tensor> {
    let mut outs = op(name, inputs, attrs)?;
    if outs.len() != 1 {
        return Err(Error::new(
            sys::SAMBA_ERR_INVALID_ARGUMENT,
            format!("op {name} gave {} outputs; op1 takes ops with one", outs.len()),
        ));
    }
    Ok(outs.remove(0))
}

fn parse_schema(what: &str, text: *const std::os::raw::c_char) -> Result<serde_json::Value> {
    serde_json::from_str(&unsafe { string(text) })
        .map_err(|e| Error::new(sys::SAMBA_ERR_INTERNAL, format!("the library's schema of {what} is not JSON: {e}")))
}

/// The names of every registry op, sorted.
pub fn op_names() -> Result<Vec<String>> {
    (0..unsafe { sys::samba_op_count() })
        .map(|i| {
            let mut s = ptr::null();
            check(unsafe { sys::samba_op_name(i, &mut s) })?;
            Ok(unsafe { string(s) })
        })
        .collect()
}

/// The schema of op `name`: its inputs, outputs and attributes with their
/// types, defaults and documentation.
///
/// ```
/// let schema = samba::op_schema("layer_norm")?;
/// assert!(schema["attrs"].as_array().unwrap().iter().any(|a| a["name"] == "normalized_shape"));
/// # Ok::<(), samba::Error>(())
/// ```
pub fn op_schema(name: &str) -> Result<serde_json::Value> {
    let n = cstr(name)?;
    let mut text = ptr::null();
    check(unsafe { sys::samba_op_schema_json(n.as_ptr(), &mut text) })?;
    parse_schema(name, text)
}

/// SGD or AdamW over parameter groups.
pub struct Optimizer(pub(crate) *mut sys::samba_optimizer);

impl Drop for Optimizer {
    fn drop(&mut self) {
        unsafe { sys::samba_optimizer_release(self.0) }
    }
}

impl Optimizer {
    /// An optimizer of `kind` ("sgd" or "adamw") with `defaults` for every
    /// group (see [`Optimizer::schema`] for the names).
    pub fn new(kind: &str, defaults: &Attrs) -> Result<Optimizer> {
        let k = cstr(kind)?;
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_optimizer_create(k.as_ptr(), defaults.0, &mut h) })?;
        Ok(Optimizer(h))
    }

    /// The hyperparameters of `kind`: name, type, default, range, whether
    /// run options may change it, documentation.
    pub fn schema(kind: &str) -> Result<serde_json::Value> {
        let k = cstr(kind)?;
        let mut text = ptr::null();
        check(unsafe { sys::samba_optimizer_schema_json(k.as_ptr(), &mut text) })?;
        parse_schema(kind, text)
    }

    /// Adds a group of parameters (tensors that require grad) with the
    /// optimizer's defaults.
    pub fn add_param_group(&self, params: &[&Tensor]) -> Result<()> {
        self.add_param_group_with(params, None)
    }

    /// Adds a group with hyperparameter overrides.
    pub fn add_param_group_with(&self, params: &[&Tensor], hyper: Option<&Attrs>) -> Result<()> {
        let p = handles(params);
        check(unsafe { sys::samba_optimizer_add_param_group(self.0, p.as_ptr(), p.len(), attrs_ptr(hyper)) })
    }

    /// The prefix of this optimizer's argin names ("enc." gives "enc.lr").
    pub fn set_argin_prefix(&self, prefix: &str) -> Result<()> {
        let p = cstr(prefix)?;
        check(unsafe { sys::samba_optimizer_set_argin_prefix(self.0, p.as_ptr()) })
    }

    /// One eager update of every parameter that has a gradient.
    pub fn step(&self, session: Option<&Session>) -> Result<()> {
        check(unsafe { sys::samba_optimizer_step(session.map_or(ptr::null_mut(), |s| s.0), self.0) })
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&self) -> Result<()> {
        check(unsafe { sys::samba_optimizer_zero_grad(self.0) })
    }
}
