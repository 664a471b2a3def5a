//! Failed calls as values, and the conversions every wrapper shares.
use crate::sys;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A failed call: the status (`SAMBA_ERR_SHAPE_MISMATCH`, ...) and the
/// library's message, which names what was wrong and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    /// The `SAMBA_ERR_*` code.
    pub status: i32,
    /// The code's name, as `samba_status_name` gives it.
    pub status_name: String,
    /// What went wrong.
    pub message: String,
}

impl Error {
    /// An error to return from a model, materializer or loader callback: the
    /// call that invoked the callback fails with this status and message.
    pub fn new(status: i32, message: impl Into<String>) -> Error {
        Error { status, status_name: status_name(status), message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name, self.message)
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

fn status_name(status: i32) -> String {
    unsafe { string(sys::samba_status_name(status)) }
}

/// Copies a borrowed C string ("" for NULL).
pub(crate) unsafe fn string(s: *const c_char) -> String {
    if s.is_null() {
        String::new()
    } else {
        CStr::from_ptr(s).to_string_lossy().into_owned()
    }
}

pub(crate) fn check(status: sys::samba_status) -> Result<()> {
    if status == sys::SAMBA_OK {
        return Ok(());
    }
    Err(Error { status, status_name: status_name(status), message: unsafe { string(sys::samba_last_error_message()) } })
}

/// A C string of a name or path; Rust strings with a NUL byte cannot cross
/// the C interface and are refused as an invalid argument.
pub(crate) fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::SAMBA_ERR_INVALID_ARGUMENT, format!("{s:?} contains a NUL byte")))
}

/// Runs a callback's body for C: its error, or a panic, becomes the status
/// the callback returns and the message the failing Samba call reports.
pub(crate) fn report(body: impl FnOnce() -> Result<()>) -> sys::samba_status {
    let (status, message) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return sys::SAMBA_OK,
        Ok(Err(e)) => (if e.status == sys::SAMBA_OK { sys::SAMBA_ERR_INVALID_ARGUMENT } else { e.status }, e.message),
        Err(panic) => {
            let what =
                panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned());
            (sys::SAMBA_ERR_INVALID_ARGUMENT, format!("the Rust callback panicked: {}", what.unwrap_or_default()))
        }
    };
    let message = CString::new(message.replace('\0', " ")).expect("NUL bytes were replaced");
    unsafe { sys::samba_set_error_message(status, message.as_ptr()) };
    status
}

/// The library's version ("0.1.0").
pub fn version() -> String {
    unsafe { string(sys::samba_version()) }
}
