//! The options of compile, trace_graph and run (SambaFlow's arguments),
//! built by chaining; every setter checks its value at once.
use crate::error::{check, cstr, Result};
use crate::sys;
use crate::tensor::Tensor;
use std::ffi::CString;
use std::ptr;

macro_rules! options_handle {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $create:path, $release:path) => {
        $(#[$doc])*
        pub struct $name(pub(crate) *mut $raw);

        impl Drop for $name {
            fn drop(&mut self) {
                unsafe { $release(self.0) }
            }
        }

        impl $name {
            /// The defaults (see the C function `
            #[doc = stringify!($create)]
            /// `).
            pub fn new() -> Result<$name> {
                let mut h = ptr::null_mut();
                check(unsafe { $create(&mut h) })?;
                Ok($name(h))
            }

            fn set(self, status: sys::samba_status) -> Result<$name> {
                check(status)?;
                Ok(self)
            }
        }
    };
}

options_handle!(
    /// Options of [`crate::Session::compile`]: name, PEF path, optimization
    /// level, inference, batch sizes, mapping, losses, output gradients, ...
    ///
    /// ```
    /// let opts = samba::CompileOptions::new()?.pef_path("model.pef")?.batch_size(64)?.loss_indices(&[0])?;
    /// # Ok::<(), samba::Error>(())
    /// ```
    CompileOptions, sys::samba_compile_options, sys::samba_compile_options_create, sys::samba_compile_options_release
);

/// How the gradient fed to a model output is initialised.
#[derive(Debug, Clone, Copy)]
pub enum OutputGrad<'a> {
    /// Ones (the default).
    Ones,
    /// These values (copied).
    Custom(&'a Tensor),
    /// Left for the app to set at run time.
    Unspecified,
}

impl CompileOptions {
    /// The program's name (also the default PEF file name).
    pub fn name(self, name: &str) -> Result<Self> {
        let n = cstr(name)?;
        let s = unsafe { sys::samba_compile_options_set_name(self.0, n.as_ptr()) };
        self.set(s)
    }
    /// Where the PEF is written.
    pub fn pef_path(self, path: &str) -> Result<Self> {
        let p = cstr(path)?;
        let s = unsafe { sys::samba_compile_options_set_pef_path(self.0, p.as_ptr()) };
        self.set(s)
    }
    /// 0: one op per kernel; 1 (default): folding, CSE and fusions.
    pub fn opt_level(self, level: i32) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_opt_level(self.0, level) };
        self.set(s)
    }
    /// "none" (default) or "bf16": products in bf16 with fp32 accumulation,
    /// sensitive ops in fp32, fp32 master weights (docs/user-guide.md).
    pub fn mixed_precision(self, mode: &str) -> Result<Self> {
        let m = cstr(mode)?;
        let s = unsafe { sys::samba_compile_options_set_mixed_precision(self.0, m.as_ptr()) };
        self.set(s)
    }
    /// Forward only: no gradients and no optimizer.
    pub fn inference(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_inference(self.0, on as i32) };
        self.set(s)
    }
    /// Batch size (-b).
    pub fn batch_size(self, n: i64) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_batch_size(self.0, n) };
        self.set(s)
    }
    /// Micro-batch size (-mb): the batch streams through in micro-batches.
    pub fn micro_batch_size(self, n: i64) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_micro_batch_size(self.0, n) };
        self.set(s)
    }
    /// "section" (default) or "spatial".
    pub fn mapping(self, mapping: &str) -> Result<Self> {
        let m = cstr(mapping)?;
        let s = unsafe { sys::samba_compile_options_set_mapping(self.0, m.as_ptr()) };
        self.set(s)
    }
    /// The model outputs that are losses.
    pub fn loss_indices(self, indices: &[i64]) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_loss_indices(self.0, indices.as_ptr(), indices.len()) };
        self.set(s)
    }
    /// How output `index`'s gradient starts.
    pub fn output_grad(self, index: usize, grad: OutputGrad) -> Result<Self> {
        let (mode, values) = match grad {
            OutputGrad::Ones => (sys::SAMBA_OUTPUT_GRAD_ONES, ptr::null_mut()),
            OutputGrad::Custom(t) => (sys::SAMBA_OUTPUT_GRAD_CUSTOM, t.0),
            OutputGrad::Unspecified => (sys::SAMBA_OUTPUT_GRAD_UNSPECIFIED, ptr::null_mut()),
        };
        let s = unsafe { sys::samba_compile_options_set_output_grad(self.0, index, mode, values) };
        self.set(s)
    }
    /// Every input and output lives in host memory.
    pub fn io_host_memory(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_io_host_memory(self.0, on as i32) };
        self.set(s)
    }
    /// Gradient accumulation (a ZEROGRAD section clears the gradients).
    pub fn grad_accumulation(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_grad_accumulation(self.0, on as i32) };
        self.set(s)
    }
    /// Whether parameter values are stored in the PEF (default on).
    pub fn embed_weights(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_embed_weights(self.0, on as i32) };
        self.set(s)
    }
    /// Whether `<pef>.log` is written (default on).
    pub fn write_log(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_compile_options_set_write_log(self.0, on as i32) };
        self.set(s)
    }
    /// A key/value pair of the PEF's user metadata.
    pub fn metadata(self, key: &str, value: &str) -> Result<Self> {
        let (k, v) = (cstr(key)?, cstr(value)?);
        let s = unsafe { sys::samba_compile_options_add_metadata(self.0, k.as_ptr(), v.as_ptr()) };
        self.set(s)
    }
}

options_handle!(
    /// Options of [`crate::Session::trace_graph`] (utils.trace_graph's
    /// arguments).
    TraceOptions, sys::samba_trace_options, sys::samba_trace_options_create, sys::samba_trace_options_release
);

impl TraceOptions {
    /// Whether output gradients are initialised on the device (default on).
    pub fn init_output_grads(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_trace_options_set_init_output_grads(self.0, on as i32) };
        self.set(s)
    }
    /// Leaves the gradient of output `output_name` at zero for the app.
    pub fn unspecified_grad(self, output_name: &str) -> Result<Self> {
        let n = cstr(output_name)?;
        let s = unsafe { sys::samba_trace_options_add_unspecified_grad(self.0, n.as_ptr()) };
        self.set(s)
    }
    /// The gradient of output `output_name` starts as `values`.
    pub fn custom_grad(self, output_name: &str, values: &Tensor) -> Result<Self> {
        let n = cstr(output_name)?;
        let s = unsafe { sys::samba_trace_options_set_custom_grad(self.0, n.as_ptr(), values.0) };
        self.set(s)
    }
    /// Whether weights, buffers and output gradients go to the device
    /// (default on).
    pub fn transfer_device(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_trace_options_set_transfer_device(self.0, on as i32) };
        self.set(s)
    }
    /// "normal", "inorder" or "optimal": the data-parallel mode of later runs.
    pub fn data_parallel_mode(self, mode: &str) -> Result<Self> {
        let m = cstr(mode)?;
        let s = unsafe { sys::samba_trace_options_set_data_parallel_mode(self.0, m.as_ptr()) };
        self.set(s)
    }
}

options_handle!(
    /// Options of [`crate::Session::run`]: which sections run, hyperparameters,
    /// train or evaluation, output gradients, data parallelism.
    ///
    /// ```
    /// let opts = samba::RunOptions::new()?.section_types(&["FWD"])?.train(false)?.hyperparam("lr", 0.01)?;
    /// # Ok::<(), samba::Error>(())
    /// ```
    RunOptions, sys::samba_run_options, sys::samba_run_options_create, sys::samba_run_options_release
);

impl RunOptions {
    /// Runs every section of these types, in this order ("FWD", "BCKWD", "OPT").
    pub fn section_types(self, types: &[&str]) -> Result<Self> {
        let owned: Vec<CString> = types.iter().map(|t| cstr(t)).collect::<Result<_>>()?;
        let ptrs: Vec<_> = owned.iter().map(|t| t.as_ptr()).collect();
        let s = unsafe { sys::samba_run_options_set_section_types(self.0, ptrs.as_ptr(), ptrs.len()) };
        self.set(s)
    }
    /// Runs these sections, in this order.
    pub fn section_ids(self, ids: &[i32]) -> Result<Self> {
        let s = unsafe { sys::samba_run_options_set_section_ids(self.0, ids.as_ptr(), ids.len()) };
        self.set(s)
    }
    /// Runs the calls with ids in `from..until` (-1 leaves a bound open).
    pub fn call_range(self, from_call: i64, until_call: i64) -> Result<Self> {
        let s = unsafe { sys::samba_run_options_set_call_range(self.0, from_call, until_call) };
        self.set(s)
    }
    /// Runs only this graph's sections ("" clears it).
    pub fn graph_name(self, name: &str) -> Result<Self> {
        let n = cstr(name)?;
        let s = unsafe { sys::samba_run_options_set_graph_name(self.0, n.as_ptr()) };
        self.set(s)
    }
    /// Sets argin `name` (lr, momentum, ...) for this run and the ones after it.
    pub fn hyperparam(self, name: &str, value: f64) -> Result<Self> {
        let n = cstr(name)?;
        let s = unsafe { sys::samba_run_options_set_hyperparam(self.0, n.as_ptr(), value) };
        self.set(s)
    }
    /// Removes every hyperparameter set so far.
    pub fn clear_hyperparams(self) -> Result<Self> {
        let s = unsafe { sys::samba_run_options_clear_hyperparams(self.0) };
        self.set(s)
    }
    /// false: evaluation mode (dropout off for the run).
    pub fn train(self, on: bool) -> Result<Self> {
        let s = unsafe { sys::samba_run_options_set_train(self.0, on as i32) };
        self.set(s)
    }
    /// Per model output, the gradient BCKWD starts from (None keeps the device's).
    pub fn grad_of_outputs(self, grads: &[Option<&Tensor>]) -> Result<Self> {
        let g: Vec<_> = grads.iter().map(|t| t.map_or(ptr::null_mut(), |t| t.0)).collect();
        let s = unsafe { sys::samba_run_options_set_grad_of_outputs(self.0, g.as_ptr(), g.len()) };
        self.set(s)
    }
    /// Data parallelism: the run all-reduces the gradients of a PEF compiled
    /// for data parallel over the ranks of an mpirun job; mode "normal",
    /// "inorder" or "optimal" (docs/distributed-runtime.md).
    pub fn data_parallel(self, on: bool, reduce_on_rdu: bool, mode: &str) -> Result<Self> {
        let m = cstr(mode)?;
        let s =
            unsafe { sys::samba_run_options_set_data_parallel(self.0, on as i32, reduce_on_rdu as i32, m.as_ptr()) };
        self.set(s)
    }
}
