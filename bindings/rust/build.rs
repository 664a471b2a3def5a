// Gives this crate's tests, examples and doctests an rpath to the libsamba
// pkg-config found (samba-sys passes its directory on), so they run against
// an install in any prefix without LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_SAMBA_LIBDIR") {
        if !dir.is_empty() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
