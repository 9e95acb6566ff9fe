//! glmark2's programs, as `corpus::glmark2::load_dir` makes them, compile and link on the real
//! driver in both dialects. Needs `scripts/fetch-corpus glmark2` (target/corpora/glmark2); without
//! it the tests print a note and pass, unless `GPUSVC_REQUIRE_CORPUS=1` makes that a failure.

use std::path::PathBuf;

use corpus::Dialect;
use corpus::glmark2::{self, Glmark2Corpus};
use headless_gl::{ApiPreference, ContextOptions, GlContext, LinkOptions, ShaderStage};

fn shaders_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GPUSVC_GLMARK2_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/corpora/glmark2/shaders"),
        PathBuf::from,
    );
    if dir.is_dir() {
        return Some(dir);
    }
    let note = format!(
        "no glmark2 shaders at {} (run scripts/fetch-corpus glmark2)",
        dir.display()
    );
    assert!(
        std::env::var_os("GPUSVC_REQUIRE_CORPUS").is_none(),
        "{note}"
    );
    eprintln!("note: {note}; skipped");
    None
}

/// Compiles and links every program; returns the failures with their logs.
fn failures(ctx: &GlContext, corpus: &Glmark2Corpus) -> Vec<String> {
    let mut failed = Vec::new();
    for p in &corpus.programs {
        let vs = ctx.compile_shader(ShaderStage::Vertex, &p.vertex);
        let fs = ctx.compile_shader(ShaderStage::Fragment, &p.fragment);
        match (vs, fs) {
            (Ok(vs), Ok(fs)) => {
                if let Err(e) = ctx.link_program(&[&vs, &fs], &LinkOptions::default()) {
                    failed.push(format!("{}: link: {e}", p.name));
                }
            }
            (vs, fs) => {
                for e in [vs.err(), fs.err()].into_iter().flatten() {
                    failed.push(format!("{}: {e}", p.name));
                }
            }
        }
    }
    failed
}

fn check(api: ApiPreference, dialect: Dialect) {
    let Some(dir) = shaders_dir() else { return };
    let ctx = GlContext::open(&ContextOptions {
        api,
        ..ContextOptions::default()
    })
    .expect("a GL context on this machine's driver");
    let corpus = glmark2::load_dir(&dir, dialect).expect("glmark2 templates load");
    let failed = failures(&ctx, &corpus);
    eprintln!(
        "{dialect:?} on {}: {} programs from {} templates ({} duplicate configurations), {} failed",
        ctx.info(),
        corpus.programs.len(),
        corpus.templates,
        corpus.duplicates,
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(corpus.programs.len() >= 100, "{}", corpus.programs.len());
}

#[test]
fn every_glmark2_program_links_on_desktop_core() {
    check(ApiPreference::DesktopCore, Dialect::DesktopCore330);
}

#[test]
fn every_glmark2_program_links_on_gles3() {
    check(ApiPreference::Gles, Dialect::Es300);
}

#[test]
fn programs_are_distinct_deterministic_and_named_after_scenes() {
    let Some(dir) = shaders_dir() else { return };
    let corpus = glmark2::load_dir(&dir, Dialect::DesktopCore330).unwrap();
    assert_eq!(
        glmark2::load_dir(&dir, Dialect::DesktopCore330).unwrap(),
        corpus
    );
    let mut pairs = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for p in &corpus.programs {
        assert!(pairs.insert((&p.vertex, &p.fragment)), "{} repeats", p.name);
        assert!(names.insert(&p.name), "{} named twice", p.name);
        assert!(p.name.starts_with("glmark2/"), "{}", p.name);
        for source in [&p.vertex, &p.fragment] {
            assert!(source.starts_with("#version 330 core\n"), "{}", p.name);
            assert!(!source.contains('$'), "{}: a placeholder is left", p.name);
        }
    }
    // Every template file the package ships is used by some scene.
    let shipped = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".vert") || n.ends_with(".frag") || n.ends_with(".all"))
        .count();
    assert_eq!(corpus.templates, shipped);
    let es = glmark2::load_dir(&dir, Dialect::Es300).unwrap();
    assert_eq!(es.programs.len(), corpus.programs.len());
    assert!(
        es.programs
            .iter()
            .all(|p| p.es && p.vertex.starts_with("#version 300 es\n"))
    );
}

#[test]
fn a_template_without_its_placeholder_is_refused() {
    let Some(dir) = shaders_dir() else { return };
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    assert!(glmark2::load_dir(copy.path(), Dialect::DesktopCore330).is_ok());
    let phong = copy.path().join("light-phong.frag");
    let text = std::fs::read_to_string(&phong).unwrap();
    std::fs::write(&phong, text.replace("$DO_LIGHTS$", "")).unwrap();
    let err = glmark2::load_dir(copy.path(), Dialect::DesktopCore330).unwrap_err();
    assert_eq!(
        err.to_string(),
        "template light-phong.frag has no $DO_LIGHTS$ placeholder"
    );
}
