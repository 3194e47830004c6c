//! Find libnemo and tell rustc how to link it.
//!
//! Order: the directory in NEMO_LIB_DIR; else the in-tree build
//! (../../build/lib from bindings/rust, i.e. the repository's build/lib);
//! else `pkg-config nemo` (an installed nemo).  The directory found is
//! written to the link search path and, as an rpath, to this crate's own
//! tests; dependents get it as DEP_NEMO_LIBDIR (the `nemo` crate's build
//! script adds the rpath to its tests and examples).
//!
//! Headers (only the layout test reads them): NEMO_INCLUDE_DIRS
//! (':'-separated); else the in-tree include/ and build/include; else
//! `pkg-config --cflags-only-I nemo`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).arg("nemo").output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn strip_flag(s: &str, flag: &str) -> Vec<String> {
    s.split_whitespace()
        .filter_map(|w| w.strip_prefix(flag).map(|x| x.to_string()))
        .filter(|x| !x.is_empty())
        .collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=NEMO_LIB_DIR");
    println!("cargo:rerun-if-env-changed=NEMO_INCLUDE_DIRS");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let repo = manifest.join("../../..");
    let in_tree_lib = repo.join("build/lib");

    let mut from_pkg_config = false;
    let lib_dir: Option<PathBuf> = if let Ok(d) = env::var("NEMO_LIB_DIR") {
        Some(PathBuf::from(d))
    } else if in_tree_lib.join("libnemo.so").exists() {
        Some(in_tree_lib)
    } else if let Some(l) = pkg_config(&["--libs-only-L"]) {
        from_pkg_config = true;
        strip_flag(&l, "-L").into_iter().next().map(PathBuf::from)
    } else {
        println!(
            "cargo:warning=libnemo not found: set NEMO_LIB_DIR, build nemo in-tree (build/lib), or install it (pkg-config nemo)"
        );
        None
    };

    if let Some(dir) = &lib_dir {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let d = dir.display();
        println!("cargo:rustc-link-search=native={}", d);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", d);
        println!("cargo:libdir={}", d);
        println!("cargo:rerun-if-changed={}", dir.join("libnemo.so").display());
    } else if from_pkg_config {
        // pkg-config knew nemo but gave no -L: it is on the default path.
    }
    println!("cargo:rustc-link-lib=dylib=nemo");

    // Headers, for tests/layout.rs.
    let includes: Vec<String> = if let Ok(v) = env::var("NEMO_INCLUDE_DIRS") {
        v.split(':').filter(|s| !s.is_empty()).map(|s| s.to_string()).collect()
    } else if repo.join("include/nemo/am.h").exists() && !from_pkg_config {
        let mut v = vec![repo.join("include")];
        // version.h is generated into <build>/include.
        if let Some(dir) = &lib_dir {
            v.push(Path::new(dir).join("../include"));
        }
        v.push(repo.join("build/include"));
        v.iter().map(|p| p.display().to_string()).collect()
    } else {
        pkg_config(&["--cflags-only-I"]).map(|s| strip_flag(&s, "-I")).unwrap_or_default()
    };
    println!("cargo:rustc-env=NEMO_SYS_INCLUDE_DIRS={}", includes.join(":"));
    println!("cargo:include={}", includes.join(":"));
}
