//! Samba from Rust: trace a model written as a closure, compile it into a
//! PEF, load it and train or run it on the emulated RDU, with the SambaFlow
//! workflow's pieces: optimizers, run options, checkpoints, lazy parameters
//! and the loader.
//!
//! Every call returns `Result<_, samba::Error>`; the error carries the
//! status name and the library's message. The raw C interface, for what the
//! safe API does not cover, is [`sys`] (the `samba-sys` crate).
//!
//! ```
//! use samba::{op1, Attrs, CompileOptions, Optimizer, RunOptions, Session, Tensor};
//!
//! // A linear layer trained with SGD on one batch.
//! let w = Tensor::from_f32(&[0.1, -0.2, 0.3, 0.0, 0.2, -0.1], &[3, 2])?;
//! w.set_name("fc.weight")?.set_requires_grad(true)?;
//! let x = Tensor::from_f32(&[1.0, 2.0, -1.0, 0.5], &[2, 2])?;
//! x.set_name("x")?;
//! let y = Tensor::from_i64(&[2, 0], &[2])?;
//! y.set_name("y")?;
//! let model = |io: &[Tensor]| -> samba::Result<Vec<Tensor>> {
//!     let logits = op1("matmul", &[&io[0], &op1("t", &[&w], None)?], None)?;
//!     Ok(vec![op1("cross_entropy", &[&logits, &io[1]], None)?])
//! };
//! let sgd = Optimizer::new("sgd", &Attrs::new()?.float("lr", 0.5)?)?;
//! sgd.add_param_group(&[&w])?;
//!
//! let session = Session::new(1)?;
//! let pef = std::env::temp_dir().join(format!("samba_doc_{}.pef", std::process::id()));
//! let pef = pef.to_str().unwrap();
//! session.compile(&model, &[&x, &y], &[&sgd], &CompileOptions::new()?.pef_path(pef)?.write_log(false)?)?;
//! let outputs = session.trace_graph(&model, &[&x, &y], &[&sgd], pef, None)?;
//! let first = session.run(&[&x, &y], &outputs, None)?[0].item()?;
//! let second = session.run(&[&x, &y], &outputs, Some(&RunOptions::new()?.hyperparam("lr", 0.1)?))?[0].item()?;
//! assert!(second < first, "a training step lowers the loss");
//! # std::fs::remove_file(pef).ok();
//! # Ok::<(), samba::Error>(())
//! ```
pub use samba_sys as sys;

mod error;
mod lazy;
mod loader;
mod ops;
mod options;
mod session;
mod tensor;

pub use error::{version, Error, Result};
pub use lazy::{Bf16Rounding, LazyParamOptions, Materializer, RngStream};
pub use loader::{Loader, LoaderOptions};
pub use ops::{op, op1, op_in, op_names, op_schema, Attrs, Optimizer};
pub use options::{CompileOptions, OutputGrad, RunOptions, TraceOptions};
pub use session::{Model, Names, Session, Transfer};
pub use tensor::{Dtype, Tensor};

// The README's example is compiled with the doctests, so it stays correct.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
