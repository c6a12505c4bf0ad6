//! basin-core's build script: the rpath every crate that links libtorch embeds ([`rpath`]), and
//! `cpp/tf32.cpp`, libtorch's TF32 switches behind a C interface (`device::set_tf32`),
//! compiled against the headers of the libtorch that torch-sys links (its `libtorch_lib`).

#[path = "rpath.rs"]
mod rpath;

use std::path::PathBuf;

fn main() {
    rpath::main();
    println!("cargo:rerun-if-changed=cpp/tf32.cpp");
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        panic!("torch-sys did not say where libtorch is (DEP_TCH_LIBTORCH_LIB)");
    };
    let include = PathBuf::from(lib)
        .parent()
        .map(|root| root.join("include"))
        .expect("libtorch's lib/ has a parent");
    cc::Build::new()
        .cpp(true)
        .file("cpp/tf32.cpp")
        .include(&include)
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("basin_core_tf32");
}
