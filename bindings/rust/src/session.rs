//! Sessions: compile a model into a PEF, load it, run it, move tensors
//! between host and device, save and load checkpoints and safetensors files.
use crate::error::{check, cstr, report, string, Error, Result};
use crate::ops::{collect_outputs, handles, Optimizer};
use crate::options::{CompileOptions, RunOptions, TraceOptions};
use crate::sys;
use crate::tensor::Tensor;
use std::os::raw::c_void;
use std::ptr;

/// A model: inputs to outputs, built from op calls. While compiling, the
/// inputs are symbolic (shape and dtype, no data) and the ops are recorded.
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
    report(|| {
        let ins: Vec<Tensor> = (0..n_inputs).map(|i| Tensor::borrow_raw(*inputs.add(i))).collect();
        let outs = model(&ins)?;
        if outs.len() > capacity {
            return Err(Error::new(
                sys::SAMBA_ERR_INVALID_ARGUMENT,
                format!("the model returned {} outputs; at most {capacity} fit", outs.len()),
            ));
        }
        *n_outputs = outs.len();
        for (i, t) in outs.into_iter().enumerate() {
            *outputs.add(i) = t.0;
            std::mem::forget(t); // the engine takes the reference
        }
        Ok(())
    })
}

/// Which registered tensors a checkpoint or a host/device transfer covers;
/// combine with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer(pub u32);

impl Transfer {
    /// Weights (and their gradients).
    pub const PARAMETERS: Transfer = Transfer(sys::SAMBA_TRANSFER_PARAMETERS);
    /// Persistent state that is not trained.
    pub const BUFFERS: Transfer = Transfer(sys::SAMBA_TRANSFER_BUFFERS);
    /// Momentum, moments, step counters.
    pub const OPTIMIZER_STATE: Transfer = Transfer(sys::SAMBA_TRANSFER_OPTIMIZER_STATE);
    /// Everything: what a checkpoint to resume training from needs.
    pub const ALL: Transfer =
        Transfer(sys::SAMBA_TRANSFER_PARAMETERS | sys::SAMBA_TRANSFER_BUFFERS | sys::SAMBA_TRANSFER_OPTIMIZER_STATE);
}

impl std::ops::BitOr for Transfer {
    type Output = Transfer;
    fn bitor(self, other: Transfer) -> Transfer {
        Transfer(self.0 | other.0)
    }
}

/// The name lists of a loaded PEF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Names {
    SectionTypes = sys::SAMBA_NAMES_SECTION_TYPES,
    Weights = sys::SAMBA_NAMES_WEIGHTS,
    Argins = sys::SAMBA_NAMES_ARGINS,
    DropoutRateArgins = sys::SAMBA_NAMES_DROPOUT_RATE_ARGINS,
    DropoutSeedArgins = sys::SAMBA_NAMES_DROPOUT_SEED_ARGINS,
    Outputs = sys::SAMBA_NAMES_OUTPUTS,
    Inputs = sys::SAMBA_NAMES_INPUTS,
}

/// A session: a thread pool and a random seed; compiles models into PEFs,
/// loads one and runs it on the emulated device.
pub struct Session(pub(crate) *mut sys::samba_session);

// Sessions are thread-safe (samba.h): ops and runs may come from any thread.
unsafe impl Send for Session {}
unsafe impl Sync for Session {}

impl Drop for Session {
    fn drop(&mut self) {
        unsafe { sys::samba_session_release(self.0) }
    }
}

fn optimizer_handles(optimizers: &[&Optimizer]) -> Vec<*mut sys::samba_optimizer> {
    optimizers.iter().map(|o| o.0).collect()
}

impl Session {
    /// A session with `threads` threads (0: one per hardware thread) and seed 0.
    pub fn new(threads: i32) -> Result<Session> {
        Session::with_seed(threads, 0)
    }

    /// A session with `threads` threads whose random draws start from `seed`.
    pub fn with_seed(threads: i32, seed: u64) -> Result<Session> {
        let mut o = ptr::null_mut();
        check(unsafe { sys::samba_session_options_create(&mut o) })?;
        let mut s = ptr::null_mut();
        let r = check(unsafe { sys::samba_session_options_set_num_threads(o, threads) })
            .and_then(|_| check(unsafe { sys::samba_session_options_set_seed(o, seed) }))
            .and_then(|_| check(unsafe { sys::samba_session_create(o, &mut s) }));
        unsafe { sys::samba_session_options_release(o) };
        r.map(|_| Session(s))
    }

    /// The raw handle, for calls through [`crate::sys`].
    pub fn as_ptr(&self) -> *mut sys::samba_session {
        self.0
    }

    /// Traces `model` on symbolic stand-ins for `inputs`, adds the backward
    /// graph and the `optimizers`' updates, and writes the PEF where
    /// `options` say.
    pub fn compile(
        &self,
        model: &Model,
        inputs: &[&Tensor],
        optimizers: &[&Optimizer],
        options: &CompileOptions,
    ) -> Result<()> {
        let ins = handles(inputs);
        let opts = optimizer_handles(optimizers);
        let user: *const &Model = &model;
        check(unsafe {
            sys::samba_session_compile(
                self.0,
                Some(call_model),
                user as *mut c_void,
                ins.as_ptr(),
                ins.len(),
                opts.as_ptr(),
                opts.len(),
                options.0,
            )
        })
    }

    /// utils.trace_graph: loads the PEF at `pef_path` after checking `model`
    /// against it, copies the host tensors' values to the device, and
    /// returns the model's outputs (symbolic tensors to pass to [`Session::run`]).
    pub fn trace_graph(
        &self,
        model: &Model,
        inputs: &[&Tensor],
        optimizers: &[&Optimizer],
        pef_path: &str,
        options: Option<&TraceOptions>,
    ) -> Result<Vec<Tensor>> {
        let path = cstr(pef_path)?;
        let ins = handles(inputs);
        let opts = optimizer_handles(optimizers);
        let user: *const &Model = &model;
        let trace = options.map_or(ptr::null(), |o| o.0 as *const _);
        collect_outputs(|outs, capacity, n| unsafe {
            sys::samba_session_trace_graph(
                self.0,
                Some(call_model),
                user as *mut c_void,
                ins.as_ptr(),
                ins.len(),
                opts.as_ptr(),
                opts.len(),
                path.as_ptr(),
                trace,
                outs,
                capacity,
                n,
            )
        })
    }

    /// Loads the PEF at `path` without a model (pure inference).
    pub fn load_pef(&self, path: &str) -> Result<()> {
        let p = cstr(path)?;
        check(unsafe { sys::samba_session_load_pef(self.0, p.as_ptr()) })
    }

    /// Copies `inputs` (matched by sn_name) to the device, runs the sections
    /// `options` select (None: the whole schedule) and returns the device
    /// values of `outputs` (empty: every output of the graphs whose FWD ran).
    pub fn run(&self, inputs: &[&Tensor], outputs: &[Tensor], options: Option<&RunOptions>) -> Result<Vec<Tensor>> {
        let ins = handles(inputs);
        let want: Vec<_> = outputs.iter().map(|t| t.0).collect();
        let opts = options.map_or(ptr::null(), |o| o.0 as *const _);
        collect_outputs(|outs, capacity, n| unsafe {
            sys::samba_session_run(self.0, ins.as_ptr(), ins.len(), want.as_ptr(), want.len(), opts, outs, capacity, n)
        })
    }

    /// The names of list `kind` of the loaded PEF.
    pub fn names(&self, kind: Names) -> Result<Vec<String>> {
        let mut n = 0usize;
        check(unsafe { sys::samba_session_name_count(self.0, kind as i32, &mut n) })?;
        (0..n)
            .map(|i| {
                let mut s = ptr::null();
                check(unsafe { sys::samba_session_name_at(self.0, kind as i32, i, &mut s) })?;
                Ok(unsafe { string(s) })
            })
            .collect()
    }

    /// The current value of argin `name` (lr, momentum, ...).
    pub fn argin(&self, name: &str) -> Result<f64> {
        let n = cstr(name)?;
        let mut v = 0f64;
        check(unsafe { sys::samba_session_argin(self.0, n.as_ptr(), &mut v) })?;
        Ok(v)
    }

    /// Sets argin `name` for the runs that follow.
    pub fn set_argin(&self, name: &str, value: f64) -> Result<()> {
        let n = cstr(name)?;
        check(unsafe { sys::samba_session_set_argin(self.0, n.as_ptr(), value) })
    }

    /// The device value of `t` (sn_data), as a new host tensor.
    pub fn sn_data(&self, t: &Tensor) -> Result<Tensor> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::samba_tensor_sn_data(self.0, t.0, &mut v) })?;
        Ok(Tensor(v))
    }

    /// The device gradient of `t` (sn_grad), as a new host tensor.
    pub fn sn_grad(&self, t: &Tensor) -> Result<Tensor> {
        let mut v = ptr::null_mut();
        check(unsafe { sys::samba_tensor_sn_grad(self.0, t.0, &mut v) })?;
        Ok(Tensor(v))
    }

    /// Copies `values` to the device value of `t`.
    pub fn set_sn_data(&self, t: &Tensor, values: &Tensor) -> Result<()> {
        check(unsafe { sys::samba_tensor_set_sn_data(self.0, t.0, values.0) })
    }

    /// Copies the device values of the registered tensors of `what` to their
    /// host tensors (to_cpu).
    pub fn to_cpu(&self, what: Transfer) -> Result<()> {
        check(unsafe { sys::samba_session_to_cpu(self.0, what.0) })
    }

    /// Copies the host values of the registered tensors of `what` to the
    /// device (to_rdu).
    pub fn to_rdu(&self, what: Transfer) -> Result<()> {
        check(unsafe { sys::samba_session_to_rdu(self.0, what.0) })
    }

    /// Saves the device values of the tensors of `what` to a checkpoint at
    /// `path` (compressed, checksummed, written atomically).
    pub fn save_checkpoint(&self, path: &str, what: Transfer) -> Result<()> {
        let p = cstr(path)?;
        check(unsafe { sys::samba_session_save_checkpoint(self.0, p.as_ptr(), what.0) })
    }

    /// Loads a checkpoint into the device tensors of the same names; the
    /// whole file is verified before any tensor changes. With `strict`, the
    /// file and the PEF must hold the same tensors of `what`.
    pub fn load_checkpoint(&self, path: &str, what: Transfer, strict: bool) -> Result<()> {
        let p = cstr(path)?;
        check(unsafe { sys::samba_session_load_checkpoint(self.0, p.as_ptr(), what.0, strict as i32) })
    }

    /// Saves the device values of the tensors of `what` (gradients excluded)
    /// to `path` in the Hugging Face safetensors format, which
    /// `safetensors.torch.load_file` reads; optimizer state is named
    /// `<parameter>.<state>`. For full training state, `save_checkpoint`.
    pub fn save_safetensors(&self, path: &str, what: Transfer) -> Result<()> {
        let p = cstr(path)?;
        check(unsafe { sys::samba_session_save_safetensors(self.0, p.as_ptr(), what.0) })
    }

    /// Loads a safetensors file (a Hugging Face `save_pretrained` output, or
    /// `save_safetensors`') into the device tensors of `what`, matched by
    /// name after `map`: each rule `(from, to)` replaces a leading `from` of
    /// a file tensor's name by `to` (`("transformer.", "")` strips a prefix);
    /// a rule naming the whole name wins, then the longest. Values are
    /// converted to each target's dtype. With `strict`, every file tensor
    /// needs a target and every selected tensor must be in the file. The
    /// whole file is checked before any tensor changes.
    pub fn load_safetensors(&self, path: &str, what: Transfer, map: &[(&str, &str)], strict: bool) -> Result<()> {
        let p = cstr(path)?;
        let from = map.iter().map(|(f, _)| cstr(f)).collect::<Result<Vec<_>>>()?;
        let to = map.iter().map(|(_, t)| cstr(t)).collect::<Result<Vec<_>>>()?;
        let from_ptrs: Vec<_> = from.iter().map(|c| c.as_ptr()).collect();
        let to_ptrs: Vec<_> = to.iter().map(|c| c.as_ptr()).collect();
        check(unsafe {
            sys::samba_session_load_safetensors(
                self.0,
                p.as_ptr(),
                what.0,
                if map.is_empty() { ptr::null() } else { from_ptrs.as_ptr() },
                if map.is_empty() { ptr::null() } else { to_ptrs.as_ptr() },
                map.len(),
                strict as i32,
            )
        })
    }
}
