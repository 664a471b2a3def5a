//! Host tensors with owned handles.
use crate::error::{check, cstr, string, Result};
use crate::sys;
use std::os::raw::c_void;
use std::ptr;

/// A tensor's element type (torch's dtype of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Dtype {
    Float32 = sys::SAMBA_FLOAT32,
    Bfloat16 = sys::SAMBA_BFLOAT16,
    Float16 = sys::SAMBA_FLOAT16,
    Float64 = sys::SAMBA_FLOAT64,
    Int64 = sys::SAMBA_INT64,
    Int32 = sys::SAMBA_INT32,
    Int16 = sys::SAMBA_INT16,
    Int8 = sys::SAMBA_INT8,
    Uint8 = sys::SAMBA_UINT8,
    Bool = sys::SAMBA_BOOL,
}

impl Dtype {
    const ALL: [Dtype; 10] = [
        Dtype::Float32,
        Dtype::Bfloat16,
        Dtype::Float16,
        Dtype::Float64,
        Dtype::Int64,
        Dtype::Int32,
        Dtype::Int16,
        Dtype::Int8,
        Dtype::Uint8,
        Dtype::Bool,
    ];

    pub(crate) fn from_code(code: sys::samba_dtype) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| *d as i32 == code)
    }

    /// The library's name of the dtype ("float32").
    pub fn name(self) -> String {
        unsafe { string(sys::samba_dtype_name(self as i32)) }
    }
}

/// A tensor handle: `Clone` shares the tensor (retains it), `Drop` releases
/// it.
///
/// ```
/// use samba::Tensor;
/// let t = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// assert_eq!(t.shape()?, vec![2, 2]);
/// let doubled = samba::op1("add", &[&t, &t], None)?;
/// assert_eq!(doubled.to_vec_f32()?, vec![2.0, 4.0, 6.0, 8.0]);
/// # Ok::<(), samba::Error>(())
/// ```
pub struct Tensor(pub(crate) *mut sys::samba_tensor);

// The engine's tensors are refcounted atomically and may move between
// threads; samba.h states which concurrent uses are safe.
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

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name().unwrap_or_default())
            .field("shape", &self.shape().ok())
            .finish()
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

    /// The handle, for calls through [`crate::sys`]; it stays owned by `self`.
    pub fn as_ptr(&self) -> *mut sys::samba_tensor {
        self.0
    }

    /// A contiguous tensor of zeros.
    pub fn zeros(dtype: Dtype, shape: &[i64]) -> Result<Tensor> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::samba_tensor_create(dtype as i32, shape.as_ptr(), shape.len(), &mut h) })?;
        Ok(Tensor(h))
    }

    fn filled<T>(dtype: Dtype, values: &[T], shape: &[i64]) -> Result<Tensor> {
        let t = Tensor::zeros(dtype, shape)?;
        check(unsafe {
            sys::samba_tensor_copy_from(t.0, values.as_ptr() as *const c_void, std::mem::size_of_val(values))
        })?;
        Ok(t)
    }

    /// A float32 tensor of `shape` holding a copy of `values`.
    pub fn from_f32(values: &[f32], shape: &[i64]) -> Result<Tensor> {
        Tensor::filled(Dtype::Float32, values, shape)
    }

    /// An int64 tensor of `shape` holding a copy of `values`.
    pub fn from_i64(values: &[i64], shape: &[i64]) -> Result<Tensor> {
        Tensor::filled(Dtype::Int64, values, shape)
    }

    /// The dims.
    pub fn shape(&self) -> Result<Vec<i64>> {
        let mut dims = ptr::null();
        let mut n = 0usize;
        check(unsafe { sys::samba_tensor_shape(self.0, &mut dims, &mut n) })?;
        Ok(if n == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(dims, n).to_vec() } })
    }

    /// The element type.
    pub fn dtype(&self) -> Result<Dtype> {
        let mut d = 0;
        check(unsafe { sys::samba_tensor_dtype(self.0, &mut d) })?;
        Ok(Dtype::from_code(d).expect("the library returns only the dtypes of samba.h"))
    }

    /// The element count.
    pub fn numel(&self) -> Result<i64> {
        let mut n = 0i64;
        check(unsafe { sys::samba_tensor_numel(self.0, &mut n) })?;
        Ok(n)
    }

    fn converted<T: Default + Clone>(&self, dtype: Dtype) -> Result<Vec<T>> {
        let mut c = ptr::null_mut();
        check(unsafe { sys::samba_tensor_to(self.0, dtype as i32, &mut c) })?;
        let c = Tensor(c);
        let mut out = vec![T::default(); c.numel()? as usize];
        check(unsafe {
            sys::samba_tensor_copy_to(c.0, out.as_mut_ptr() as *mut c_void, std::mem::size_of_val(out.as_slice()))
        })?;
        Ok(out)
    }

    /// The values as float32 (converted by a copy), in C order.
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        self.converted(Dtype::Float32)
    }

    /// The values as int64 (converted by a copy), in C order.
    pub fn to_vec_i64(&self) -> Result<Vec<i64>> {
        self.converted(Dtype::Int64)
    }

    /// The single element of a one-element tensor.
    pub fn item(&self) -> Result<f64> {
        let mut v = 0f64;
        check(unsafe { sys::samba_tensor_item(self.0, &mut v) })?;
        Ok(v)
    }

    /// The sn_name ("" when unnamed).
    pub fn name(&self) -> Result<String> {
        let mut s = ptr::null();
        check(unsafe { sys::samba_tensor_name(self.0, &mut s) })?;
        Ok(unsafe { string(s) })
    }

    /// Sets the sn_name, which matches the tensor to the PEF's tensors.
    pub fn set_name(&self, name: &str) -> Result<&Self> {
        let n = cstr(name)?;
        check(unsafe { sys::samba_tensor_set_name(self.0, n.as_ptr()) })?;
        Ok(self)
    }

    /// Whether autograd records ops on this tensor (a trainable parameter).
    pub fn set_requires_grad(&self, on: bool) -> Result<&Self> {
        check(unsafe { sys::samba_tensor_set_requires_grad(self.0, on as i32) })?;
        Ok(self)
    }

    /// The gradient left by `backward`, if any.
    pub fn grad(&self) -> Result<Option<Tensor>> {
        let mut g = ptr::null_mut();
        check(unsafe { sys::samba_tensor_grad(self.0, &mut g) })?;
        // The C call lends the gradient; the handle returned holds its own reference.
        Ok(if g.is_null() { None } else { Some(unsafe { Tensor::borrow_raw(g) }) })
    }

    /// Accumulates the gradient of this one-element tensor into every leaf
    /// that requires grad.
    pub fn backward(&self) -> Result<()> {
        check(unsafe { sys::samba_tensor_backward(self.0, ptr::null_mut(), 0) })
    }

    /// Whether the tensor has data (false for a lazy parameter's placeholder).
    pub fn has_data(&self) -> Result<bool> {
        let mut v = 0;
        check(unsafe { sys::samba_tensor_has_data(self.0, &mut v) })?;
        Ok(v != 0)
    }

    /// Gives a lazy placeholder its data from its materializer (materialize_).
    pub fn materialize(&self) -> Result<()> {
        check(unsafe { sys::samba_tensor_materialize_(self.0) })
    }
}
