//! The bindings cover the C interface: every function libsamba exports is
//! declared (those of samba/experimental.h only with the `experimental`
//! feature), and calls through them reach the library.
use std::collections::BTreeSet;
use std::ffi::CStr;
use std::path::Path;
use std::process::Command;

const BINDINGS: &str = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));

fn bound_functions() -> BTreeSet<String> {
    BINDINGS.split("pub fn ").skip(1).map(|rest| rest[..rest.find('(').unwrap()].trim().to_string()).collect()
}

/// The `samba_*` functions the installed shared library exports.
fn exported_functions() -> BTreeSet<String> {
    let lib = Path::new(samba_sys::LIB_DIR).join("libsamba.so");
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("nm (binutils) runs");
    assert!(out.status.success(), "nm -D {}: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            // Names carry the symbol version: samba_add@@SAMBA_0.
            [_, "T", name] if name.starts_with("samba_") => Some(name.split('@').next().unwrap().to_string()),
            _ => None,
        })
        .collect()
}

/// Functions declared in samba/experimental.h.
fn experimental_functions() -> BTreeSet<String> {
    let header = std::fs::read_to_string(Path::new(samba_sys::INCLUDE_DIR).join("samba/experimental.h")).unwrap();
    header
        .split("SAMBA_API")
        .skip(1)
        .filter_map(|decl| {
            let name = &decl[..decl.find('(')?];
            Some(name.rsplit(|c: char| c.is_whitespace() || c == '*').next()?.to_string())
        })
        .collect()
}

#[test]
fn every_exported_function_is_bound() {
    let exported = exported_functions();
    assert!(exported.len() > 300, "expected the whole C interface to be exported, found {}", exported.len());
    let bound = bound_functions();
    let experimental = experimental_functions();
    let missing: Vec<_> = exported
        .iter()
        .filter(|name| !bound.contains(*name))
        .filter(|name| cfg!(feature = "experimental") || !experimental.contains(*name))
        .collect();
    assert!(missing.is_empty(), "exported by libsamba but not bound: {missing:?}");
    let unexported: Vec<_> = bound.difference(&exported).collect();
    assert!(unexported.is_empty(), "bound but not exported by libsamba: {unexported:?}");
}

#[test]
fn typed_op_functions_are_bound() {
    // samba/ops_generated.h: one function per registry op, with every attribute.
    let bound = bound_functions();
    for name in ["samba_conv2d", "samba_layer_norm", "samba_cross_entropy", "samba_sum_v2"] {
        assert!(bound.contains(name), "{name} is not bound");
    }
}

#[test]
fn calls_reach_the_library() {
    unsafe {
        let version = CStr::from_ptr(samba_sys::samba_version()).to_str().unwrap();
        let number = samba_sys::samba_version_number();
        assert_eq!(
            version,
            format!("{}.{}.{}", number / 10000, number / 100 % 100, number % 100),
            "samba_version and samba_version_number disagree"
        );
        assert_eq!(
            number,
            samba_sys::SAMBA_VERSION_MAJOR * 10000
                + samba_sys::SAMBA_VERSION_MINOR * 100
                + samba_sys::SAMBA_VERSION_PATCH
        );

        let mut t = std::ptr::null_mut();
        let shape = [2i64, 3];
        assert_eq!(
            samba_sys::samba_tensor_create(samba_sys::SAMBA_FLOAT32, shape.as_ptr(), 2, &mut t),
            samba_sys::SAMBA_OK
        );
        let mut n = 0i64;
        assert_eq!(samba_sys::samba_tensor_numel(t, &mut n), samba_sys::SAMBA_OK);
        assert_eq!(n, 6);
        samba_sys::samba_tensor_release(t);

        let status = samba_sys::samba_tensor_numel(std::ptr::null(), &mut n);
        assert_eq!(status, samba_sys::SAMBA_ERR_NULL_POINTER);
        let name = CStr::from_ptr(samba_sys::samba_status_name(status)).to_str().unwrap();
        assert_eq!(name, "SAMBA_ERR_NULL_POINTER");
    }
}
