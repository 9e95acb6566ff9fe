//! The committed C header must equal a fresh cbindgen run over the crate.
//!
//! `GPUSVC_BLESS=1 cargo test -p gpusvc-ffi --test header` rewrites it after an intended ABI
//! change; review the diff and commit it with the change.

use std::path::Path;

#[test]
fn committed_header_matches_a_fresh_cbindgen_run() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml parses");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut fresh);

    let committed_path = crate_dir.join("include/gpusvc.h");
    if std::env::var_os("GPUSVC_BLESS").is_some() {
        std::fs::write(&committed_path, &fresh).expect("write ffi/include/gpusvc.h");
        return;
    }
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    if committed != fresh {
        let fresh = String::from_utf8_lossy(&fresh);
        let committed = String::from_utf8_lossy(&committed);
        let first_difference = fresh
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| fresh.lines().count().min(committed.lines().count()));
        panic!(
            "ffi/include/gpusvc.h is out of date with ffi/src (first difference at line {}:\n  \
             committed: {:?}\n  generated: {:?}).\nRegenerate with \
             `GPUSVC_BLESS=1 cargo test -p gpusvc-ffi --test header` and commit the header.",
            first_difference + 1,
            committed
                .lines()
                .nth(first_difference)
                .unwrap_or("<end of file>"),
            fresh
                .lines()
                .nth(first_difference)
                .unwrap_or("<end of file>"),
        );
    }
}
