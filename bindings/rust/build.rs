// Links libsamba: from SAMBA_LIB_DIR when set (a build tree or an install
// prefix's lib directory), else from the system library path.
fn main() {
    println!("cargo:rerun-if-env-changed=SAMBA_LIB_DIR");
    if let Ok(dir) = std::env::var("SAMBA_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        // Tests and examples find the library where it was linked from.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:rustc-link-lib=dylib=samba");
}
