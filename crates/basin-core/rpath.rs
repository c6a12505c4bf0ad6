//! The build script of every crate that links libtorch (`build = "../basin-core/rpath.rs"`;
//! basin-core's own `build.rs`, basin-cli's and basin-dist's include it).
//!
//! torch-sys sets no rpath, so test binaries and `cargo run` would not find `libtorch_cpu.so`.
//! We embed the library directory of the libtorch in use (`LIBTORCH`, which
//! `.cargo/config.toml` points at the `.torch` link made by `cargo xtask setup`).

/// Embeds the libtorch `lib/` as rpath (basin-dist's build script calls it too).
pub fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Some(root) = std::env::var_os("LIBTORCH") else {
        return;
    };
    // Kept as given (not resolved): when `cargo xtask setup` re-points the `.torch` link,
    // binaries already built follow it.
    let lib = std::path::Path::new(&root).join("lib");
    if lib.join("libtorch_cpu.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    } else {
        println!(
            "cargo:warning=LIBTORCH={} has no lib/libtorch_cpu.so; run `cargo xtask setup`",
            root.to_string_lossy()
        );
    }
}
