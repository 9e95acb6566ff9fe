//! Gives the cdylib the SONAME `libgpusvc.so`; without it a consumer that links the shared
//! library records the absolute build path instead of the library's name.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgpusvc.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
