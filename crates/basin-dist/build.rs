//! Compiles `src/shim.cpp`, the one C++ file of basin: a C interface to libtorch's c10d
//! (`TCPStore`, `ProcessGroupGloo`) against the headers of the libtorch in use (`LIBTORCH`).
//!
//! `ProcessGroupGloo.hpp` includes gloo's own headers, which the libtorch wheel lacks; Debian's
//! `libgloo-dev` has them (`cargo xtask setup` installs it where it can). They are looked for in
//! `BASIN_GLOO_INCLUDE`, then `/usr/include` and `/usr/local/include`. Without them the crate
//! still builds, with no backend: creating a process group then says how to get one.

#[path = "../basin-core/rpath.rs"]
mod rpath;

use std::path::{Path, PathBuf};

fn gloo_include() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("BASIN_GLOO_INCLUDE") {
        dirs.push(d.into());
    }
    dirs.extend(["/usr/include", "/usr/local/include"].map(PathBuf::from));
    dirs.into_iter()
        .find(|d| d.join("gloo/algorithm.h").exists())
}

fn main() {
    rpath::main();
    println!("cargo:rerun-if-changed=src/shim.cpp");
    println!("cargo:rerun-if-env-changed=BASIN_GLOO_INCLUDE");
    println!("cargo:rustc-check-cfg=cfg(basin_gloo)");
    let Some(libtorch) = std::env::var_os("LIBTORCH") else {
        println!("cargo:warning=LIBTORCH is not set: basin-dist builds without a backend");
        return;
    };
    let libtorch = Path::new(&libtorch);
    let Some(gloo) = gloo_include() else {
        println!(
            "cargo:warning=gloo headers not found (BASIN_GLOO_INCLUDE, /usr/include/gloo): \
             basin-dist builds without the Gloo backend; `apt-get install libgloo-dev` \
             (or `cargo xtask setup`) and rebuild (`cargo clean -p basin-dist`)"
        );
        return;
    };
    println!(
        "cargo:rerun-if-changed={}",
        gloo.join("gloo/algorithm.h").display()
    );
    cc::Build::new()
        .cpp(true)
        .file("src/shim.cpp")
        .include(libtorch.join("include"))
        .include(libtorch.join("include/torch/csrc/api/include"))
        .include(gloo)
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DUSE_C10D_GLOO")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("basin_dist_shim");
    println!("cargo:rustc-cfg=basin_gloo");
}
