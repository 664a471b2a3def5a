// Finds libsamba through pkg-config and generates the bindings from the
// headers installed beside it, so they always match the library linked:
// samba/ops_generated.h is produced from the op registry when the library is
// built, and changes whenever an op is added.
use std::env;
use std::path::PathBuf;
use std::process::exit;

// Bindings of one ABI major version; 0.x versions may break between minors.
const SAMBA_VERSIONS: std::ops::Range<&str> = "0.1.0".."0.2.0";

fn main() {
    let library = match pkg_config::Config::new().range_version(SAMBA_VERSIONS).probe("samba") {
        Ok(library) => library,
        Err(e) => fail(&format!(
            "libsamba {}..{} was not found through pkg-config:\n{e}\n\n\
             Install Samba from its source tree (`make install`, or \
             `cmake --install build --prefix DIR`); for a prefix pkg-config does not search, set \
             PKG_CONFIG_PATH=DIR/lib/pkgconfig. The pkg-config program is Debian's package `pkg-config`.",
            SAMBA_VERSIONS.start, SAMBA_VERSIONS.end
        )),
    };
    let header_dir = library.include_paths.iter().find(|dir| dir.join("samba.h").is_file()).unwrap_or_else(|| {
        fail(&format!(
            "pkg-config's samba.pc names include directories {:?}, none of which has samba.h",
            library.include_paths
        ))
    });
    let lib_dir = library.link_paths.first().cloned().unwrap_or_default();

    // Dependents (the safe `samba` crate) read these as DEP_SAMBA_INCLUDE and
    // DEP_SAMBA_LIBDIR, e.g. to give their own binaries an rpath.
    println!("cargo:include={}", header_dir.display());
    println!("cargo:libdir={}", lib_dir.display());
    // This crate's own tests run against a prefix outside the loader's path.
    if !lib_dir.as_os_str().is_empty() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    }
    println!("cargo:rustc-env=SAMBA_SYS_INCLUDE_DIR={}", header_dir.display());
    println!("cargo:rustc-env=SAMBA_SYS_LIB_DIR={}", lib_dir.display());
    println!("cargo:rerun-if-changed=wrapper.h");

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(library.include_paths.iter().map(|dir| format!("-I{}", dir.display())))
        // The headers' comments are plain C comments; this makes them rustdoc.
        .clang_arg("-fparse-all-comments")
        .allowlist_function("samba_.*")
        .allowlist_type("samba_.*")
        .allowlist_var("SAMBA_.*")
        .parse_callbacks(Box::new(MacroTypes))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .prepend_enum_name(false);
    if env::var_os("CARGO_FEATURE_EXPERIMENTAL").is_some() {
        builder = builder.clang_arg("-DSAMBA_EXPERIMENTAL");
    }
    // bindgen panics when libclang cannot be loaded; say which package has it.
    let generated =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate())).unwrap_or_else(|_| {
            fail("bindgen could not run libclang: install Debian's `libclang-dev` (or set LIBCLANG_PATH)")
        });
    let bindings =
        generated.unwrap_or_else(|e| fail(&format!("bindgen failed on {}/samba.h: {e}", header_dir.display())));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bindings.rs");
    bindings.write_to_file(&out).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", out.display())));
}

fn fail(message: &str) -> ! {
    eprintln!("error: samba-sys: {message}");
    exit(1);
}

/// Gives each `#define` constant the type of the C typedef it is a value of,
/// instead of bindgen's default u32, so `SAMBA_OK` is a `samba_status`.
#[derive(Debug)]
struct MacroTypes;

impl bindgen::callbacks::ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        if name.starts_with("SAMBA_TRANSFER_") {
            Some(IntKind::U32) // samba_transfer_kinds
        } else if name.starts_with("SAMBA_") {
            Some(IntKind::I32) // samba_status, samba_dtype, samba_log_level, ...
        } else {
            None
        }
    }
}
