//! Gives the cdylib the SONAME `libgpusvc.so.<major>` (`libgpusvc.so.0` for every 0.x release:
//! the ABI grows by appending, see CHANGELOG.md). Without a SONAME a consumer that links the
//! shared library records the absolute build path instead of the library's name; with it the
//! consumer records `libgpusvc.so.0`, which installs as the chain
//! `libgpusvc.so.0.1.0` <- `libgpusvc.so.0` <- `libgpusvc.so` (cmake/gpusvc.cmake's install
//! rules make it, and the import step makes it in the host's build folder).
//!
//! rustc's own version script for a cdylib already exports only the `#[no_mangle]` functions
//! (`gpusvc_*`); cmake/tests/package.sh checks that with `nm -D` and the SONAME with
//! `readelf -d`.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgpusvc.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
