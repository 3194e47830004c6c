//! Put libnemo's directory (found by nemo-sys's build script, which
//! passes it as DEP_NEMO_LIBDIR) in the rpath of this crate's tests,
//! examples and binaries, so they run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_NEMO_LIBDIR");
    if let Ok(dir) = std::env::var("DEP_NEMO_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
