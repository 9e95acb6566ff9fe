//! The committed C header must equal a fresh cbindgen run over the crate, and its version macros
//! must be the package's version, the one `gpusvc_version()` returns.
//!
//! `GPUSVC_BLESS=1 cargo test -p gpusvc-ffi --test header` rewrites it after an intended ABI
//! change (or a version bump); review the diff and commit it with the change.

use std::ffi::CStr;
use std::path::Path;

/// The `GPUSVC_VERSION_*` macros for this package version, placed after the includes. They
/// come from Cargo's package version at generation time, so bumping the version without
/// re-blessing makes the drift test below fail.
fn version_macros() -> String {
    format!(
        "/* The library version this header was generated with; equal to what gpusvc_version()\n \
         * returns (\"MAJOR.MINOR.PATCH\"). */\n\
         #define GPUSVC_VERSION_MAJOR {}\n\
         #define GPUSVC_VERSION_MINOR {}\n\
         #define GPUSVC_VERSION_PATCH {}\n\
         #define GPUSVC_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION"),
    )
}

#[test]
fn committed_header_matches_a_fresh_cbindgen_run() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml parses");
    config.after_includes = Some(version_macros());
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

/// The value of `#define NAME value` in the header text.
fn define<'a>(header: &'a str, name: &str) -> &'a str {
    let prefix = format!("#define {name} ");
    let mut found = header
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()));
    let value = found
        .next()
        .unwrap_or_else(|| panic!("no {name} in gpusvc.h"));
    assert!(found.next().is_none(), "{name} is defined twice");
    value.trim()
}

#[test]
fn the_committed_headers_version_macros_are_what_gpusvc_version_returns() {
    if std::env::var_os("GPUSVC_BLESS").is_some() {
        return; // the header is being rewritten by the test above
    }
    let header =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/gpusvc.h"))
            .expect("read ffi/include/gpusvc.h");
    // SAFETY: a static NUL-terminated string (gpusvc_version's contract).
    let version = unsafe { CStr::from_ptr(gpusvc::gpusvc_version()) }
        .to_str()
        .unwrap();
    let parts = [
        define(&header, "GPUSVC_VERSION_MAJOR"),
        define(&header, "GPUSVC_VERSION_MINOR"),
        define(&header, "GPUSVC_VERSION_PATCH"),
    ];
    for p in parts {
        assert!(p.parse::<u32>().is_ok(), "{p:?} is not a number");
    }
    assert_eq!(parts.join("."), version);
    assert_eq!(
        define(&header, "GPUSVC_VERSION_STRING"),
        format!("\"{version}\"")
    );
}
