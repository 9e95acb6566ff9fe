//! The piglit loader on the real corpus (`scripts/fetch-corpus piglit`, target/corpora/piglit):
//! how many files load per kind, and that the compute and multi-stage programs it finds are
//! real ones (the compute programs compile on the machine's driver in the main). Without the
//! corpus the tests print a note and pass, unless `GPUSVC_REQUIRE_CORPUS=1`.

use std::path::PathBuf;

use corpus::{LoadedCorpus, load_dir};
use headless_gl::{ApiPreference, ContextOptions, GlContext, ShaderStage};

fn piglit() -> Option<LoadedCorpus> {
    let dir = std::env::var_os("GPUSVC_PIGLIT_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/corpora/piglit/tests"),
        PathBuf::from,
    );
    if !dir.is_dir() {
        let note = format!(
            "no piglit corpus at {} (run scripts/fetch-corpus piglit)",
            dir.display()
        );
        assert!(
            std::env::var_os("GPUSVC_REQUIRE_CORPUS").is_none(),
            "{note}"
        );
        eprintln!("note: {note}; skipped");
        return None;
    }
    Some(load_dir(&dir).expect("the piglit tree loads"))
}

#[test]
fn every_kind_loads_from_the_real_corpus() {
    let Some(corpus) = piglit() else { return };
    let count =
        |f: fn(&corpus::ProgramSource) -> bool| corpus.staged.iter().filter(|p| f(p)).count();
    eprintln!(
        "piglit: {} files: {} vertex+fragment, {} with more stages ({} geometry, {} tessellation \
         control, {} tessellation evaluation), {} compute, {} skipped: {:?}",
        corpus.files,
        corpus.programs.len(),
        corpus.staged.len(),
        count(|p| p.geometry.is_some()),
        count(|p| p.tess_control.is_some()),
        count(|p| p.tess_evaluation.is_some()),
        corpus.compute.len(),
        corpus.skipped.len(),
        corpus.skip_counts()
    );
    assert_eq!(
        corpus.files,
        corpus.programs.len() + corpus.staged.len() + corpus.compute.len() + corpus.skipped.len()
    );
    assert!(corpus.programs.iter().all(|p| !p.has_other_stages()));
    assert!(corpus.staged.iter().all(|p| p.has_other_stages()));
    // Each stage's text is a shader: it has a main().
    for p in &corpus.staged {
        for stage in [&p.geometry, &p.tess_control, &p.tess_evaluation]
            .into_iter()
            .flatten()
        {
            assert!(stage.contains("main"), "{}: {stage:?}", p.name);
        }
    }
    assert!(count(|p| p.geometry.is_some()) > 0);
    assert!(count(|p| p.tess_control.is_some()) > 0);
    assert!(count(|p| p.tess_evaluation.is_some()) > 0);
    assert!(!corpus.compute.is_empty());
    assert!(corpus.compute.iter().all(|c| c.compute.contains("main")));
}

#[test]
fn desktop_compute_programs_compile_on_the_driver() {
    let Some(corpus) = piglit() else { return };
    let ctx = GlContext::open(&ContextOptions {
        api: ApiPreference::DesktopCore,
        ..ContextOptions::default()
    })
    .expect("a desktop GL context");
    let desktop: Vec<_> = corpus.compute.iter().filter(|c| !c.es).collect();
    let compiled = desktop
        .iter()
        .filter(|c| ctx.compile_shader(ShaderStage::Compute, &c.compute).is_ok())
        .count();
    eprintln!(
        "piglit compute: {compiled} of {} desktop compute shaders compile on {}",
        desktop.len(),
        ctx.info()
    );
    // Some are meant to fail (negative tests); most are real programs.
    assert!(
        compiled * 2 > desktop.len(),
        "{compiled} of {}",
        desktop.len()
    );
}
