//! Review of issue 16 (every program kind, negative results, start/poll, deferred binary
//! reads): each test here failed before the fix committed with it (or is ignored with the bug
//! it shows).

use std::sync::Arc;

use headless_gl::{ApiPreference, ContextOptions, GlContext};
use program_cache::disk::{self, Store, StoreConfig};
use program_cache::{
    ActiveVariable, CacheConfig, CachedProgram, CompatibilityStamp, CompileOutcome, DriverIdentity,
    FailureRecord, GlBackend, LinkFailure, LinkOptions, LinkStatus, MAX_DEFERRED_BYTES,
    MAX_DEFERRED_SAVES, MAX_FAILURE_LOG, PersistConfig, PersistSink, ProgramBackend,
    ProgramBinaryData, ProgramCache, ProgramKey, ProgramManager, ProgramOptions, Shader,
    ShaderHash, ShaderStage, ShaderVariables, StageRecord, VariableInfo,
};
use test_support::fake_driver::{FakeDriver, FakeObject};
use test_support::gl::{context_or_skip, open_or_skip};
use test_support::programs::key;

fn cache() -> Arc<ProgramCache> {
    ProgramCache::builder(CacheConfig::desktop()).build()
}

fn link_failure(log: &str) -> CachedProgram {
    CachedProgram {
        failure: Some(FailureRecord {
            compile_stage: None,
            log: log.into(),
        }),
        ..CachedProgram::default()
    }
}

/// `link_status` says `Success` only for a program that linked: a recorded link failure is in
/// the store under the program's key, but the program did not link.
#[test]
fn a_recorded_link_failure_is_not_a_successful_link_status() {
    let cache = cache();
    cache
        .save(key(1), link_failure("error: no main"), None)
        .expect("a failure record is saved");
    assert!(cache.peek(&key(1)).is_some());
    assert_eq!(cache.link_status(&key(1)), LinkStatus::Unknown);
}

/// `load` looks a *program* up: a failure record has no binary to hand a driver, so a host
/// that loads by key (the Chromium flow, or the C ABI's `gpusvc_program_cache_load`) must not
/// get it as a hit (it would hand `glProgramBinary` zero bytes, and the "refusal" would count
/// against the disk store as a driver rejection).
#[test]
fn load_never_hands_out_a_failure_record_as_a_program() {
    let cache = cache();
    cache
        .save(key(2), link_failure("error: no main"), None)
        .expect("a failure record is saved");
    let before = cache.counters();
    assert!(cache.load(&key(2), None).is_none());
    let after = cache.counters();
    assert_eq!(after.hits, before.hits, "not counted as a program hit");
    // The record is still there for the manager's failure lookup.
    assert!(cache.load_failure(&key(2)).is_some());
}

/// Two live programs with one key, both with their binary read deferred: the host deletes one
/// (`forget_deferred_binary`) and asks for the other's read when idle. The other's binary must
/// still reach the cache.
#[test]
fn forgetting_one_deferred_program_keeps_the_save_of_another_with_the_same_key() {
    let cache = cache();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    let link = |m: &mut ProgramManager<FakeDriver>| {
        let mut vs = m.new_shader(ShaderStage::Vertex, "in vec4 a_position;");
        let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .expect("links")
    };
    let first = link(&mut m);
    let mut second = link(&mut m);
    assert_eq!(first.key, second.key);
    // The host deletes the first program.
    m.forget_deferred_binary(&first.key);
    drop(first);
    // Idle: the second program's binary is read now, or was read at its link.
    m.save_deferred_binary(&mut second);
    assert!(!second.binary_deferred, "no read left pending");
    assert!(
        cache.peek(&second.key).is_some(),
        "the live program's binary reached the cache"
    );
}

/// `finish_compile` of a shader another manager started must not hand that manager's driver
/// object to this manager's driver: on the real driver that is a "shader of another context"
/// error, which was then cached as the shader's compile failure, so every later compile of
/// that valid source was a `KnownFailure`.
#[test]
fn finishing_another_managers_compile_caches_no_failure() {
    let test = "finishing_another_managers_compile_caches_no_failure";
    let (Some(ctx_a), Some(ctx_b)) = (context_or_skip(test), context_or_skip(test)) else {
        return;
    };
    let cache = cache();
    let mut a = ProgramManager::new(GlBackend::new(&ctx_a), cache.clone(), "review16");
    let mut b = ProgramManager::new(GlBackend::new(&ctx_b), cache.clone(), "review16");
    let source = format!(
        "{}void main() {{ gl_Position = vec4(0.0); }}\n",
        version(&ctx_a)
    );
    let mut s = a.new_shader(ShaderStage::Vertex, source.clone());
    assert_eq!(a.start_compile(&mut s).unwrap(), CompileOutcome::Pending);

    // The other manager is not asked to poll or finish it.
    assert!(b.compile_ready(&s));
    let _ = b.finish_compile(&mut s);
    assert!(
        s.is_compiling(),
        "the shader is still its manager's compile"
    );
    assert_eq!(cache.len(), 0, "no failure was recorded");

    assert_eq!(a.finish_compile(&mut s), CompileOutcome::Compiled);
    let mut c = ProgramManager::new(GlBackend::new(&ctx_a), cache.clone(), "review16");
    let mut again: Shader<headless_gl::Shader> = Shader::new(ShaderStage::Vertex, source);
    assert_ne!(c.compile(&mut again).unwrap(), CompileOutcome::KnownFailure);
}

/// The first line of a shader for `ctx`'s GLSL.
fn version(ctx: &GlContext) -> &'static str {
    match ctx.info().api {
        headless_gl::GlApi::DesktopCore => "#version 330 core\n",
        _ => "#version 300 es\n",
    }
}

/// Two managers on one cache with different backend identities (a core and a compatibility
/// context of the same driver, as a host with WebGL and legacy content has): a
/// compatibility-profile shader that the core context refuses compiles on the compatibility one. The failure recorded by
/// the core manager must not answer the compatibility manager's compile.
#[test]
fn a_compile_failure_of_one_backend_identity_does_not_refuse_the_shader_on_another() {
    let test = "a_compile_failure_of_one_backend_identity_does_not_refuse_the_shader_on_another";
    let Some(core) = open_or_skip(
        test,
        &ContextOptions {
            api: ApiPreference::DesktopCore,
            ..ContextOptions::default()
        },
    ) else {
        return;
    };
    let Some(compat) = open_or_skip(
        test,
        &ContextOptions {
            api: ApiPreference::DesktopCompatibility,
            ..ContextOptions::default()
        },
    ) else {
        return;
    };
    let cache = cache();
    let legacy = "#version 150 compatibility\nvoid main() { gl_Position = gl_Vertex; }\n";

    let mut on_core = ProgramManager::new(GlBackend::new(&core), cache.clone(), "core 4.5");
    let mut s = Shader::new(ShaderStage::Vertex, legacy);
    assert_eq!(on_core.compile(&mut s).unwrap(), CompileOutcome::Failed);
    // Cached for the core identity: answered without the driver.
    let mut s = Shader::new(ShaderStage::Vertex, legacy);
    assert_eq!(
        on_core.compile(&mut s).unwrap(),
        CompileOutcome::KnownFailure
    );

    let mut on_compat =
        ProgramManager::new(GlBackend::new(&compat), cache.clone(), "compatibility 4.5");
    let mut s = Shader::new(ShaderStage::Vertex, legacy);
    assert_eq!(
        on_compat.compile(&mut s).unwrap(),
        CompileOutcome::Compiled,
        "log: {:?}",
        s.info_log()
    );
}

/// [`FakeDriver`], except that a shader whose source starts with `FAIL <n>` fails to compile
/// with a log of exactly `n` bytes, and a link of a shader whose source starts with
/// `LINKFAIL <n>` fails with a log of `n` bytes.
/// Counts the links the driver was asked for.
#[derive(Default)]
struct Logs(FakeDriver, usize);

fn log_of(source: &str, prefix: &str) -> Option<String> {
    let n: usize = source
        .strip_prefix(prefix)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some("e".repeat(n))
}

/// The `ProgramBackend` methods a wrapper of a `FakeDriver` (field 0) forwards unchanged:
/// binaries and reflection.
macro_rules! forward_binaries_and_reflection_to_0 {
    () => {
        fn program_binary(&mut self, p: &FakeObject) -> Result<ProgramBinaryData, String> {
            self.0.program_binary(p)
        }
        fn load_binary(&mut self, b: &ProgramBinaryData) -> Result<FakeObject, String> {
            self.0.load_binary(b)
        }
        fn active_attributes(&mut self, p: &FakeObject) -> Vec<ActiveVariable> {
            self.0.active_attributes(p)
        }
        fn active_uniforms(&mut self, p: &FakeObject) -> Vec<ActiveVariable> {
            self.0.active_uniforms(p)
        }
    };
}

impl ProgramBackend for Logs {
    type Shader = FakeObject;
    type Program = FakeObject;
    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<FakeObject, String> {
        match log_of(source, "FAIL ") {
            Some(log) => Err(log),
            None => self.0.compile(stage, source),
        }
    }
    fn link(&mut self, shaders: &[&FakeObject], o: &LinkOptions) -> Result<FakeObject, String> {
        self.1 += 1;
        match shaders.iter().find_map(|s| log_of(&s.source, "LINKFAIL ")) {
            Some(log) => Err(log),
            None => self.0.link(shaders, o),
        }
    }
    forward_binaries_and_reflection_to_0!();
}

/// The guarantee "a log over `MAX_FAILURE_LOG` is not cached", at its boundary, for compiles
/// and links: a log of exactly the bound is cached and handed back byte for byte (an empty log
/// too); one byte more is not cached, and the driver is asked again.
#[test]
fn failure_logs_are_cached_up_to_the_bound_and_not_past_it() {
    let cache = cache();
    let mut m = ProgramManager::new(Logs::default(), cache.clone(), "review16");
    let compile_twice = |m: &mut ProgramManager<Logs>, source: &str| {
        let mut first = m.new_shader(ShaderStage::Fragment, source);
        let mut second = m.new_shader(ShaderStage::Fragment, source);
        let outcomes = (
            m.compile(&mut first).unwrap(),
            m.compile(&mut second).unwrap(),
        );
        assert_eq!(first.info_log(), second.info_log());
        (outcomes, second.info_log().map(str::len))
    };
    for n in [0, MAX_FAILURE_LOG] {
        let (outcomes, len) = compile_twice(&mut m, &format!("FAIL {n}"));
        assert_eq!(
            outcomes,
            (CompileOutcome::Failed, CompileOutcome::KnownFailure)
        );
        assert_eq!(len, Some(n));
    }
    let (outcomes, len) = compile_twice(&mut m, &format!("FAIL {}", MAX_FAILURE_LOG + 1));
    assert_eq!(outcomes, (CompileOutcome::Failed, CompileOutcome::Failed));
    assert_eq!(len, Some(MAX_FAILURE_LOG + 1));

    let link_twice = |m: &mut ProgramManager<Logs>, n: usize| {
        let mut logs = Vec::new();
        for _ in 0..2 {
            let mut vs = m.new_shader(ShaderStage::Vertex, format!("LINKFAIL {n}"));
            let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
            m.compile(&mut vs).unwrap();
            m.compile(&mut fs).unwrap();
            match m.link(&mut vs, &mut fs, &ProgramOptions::default()) {
                Err(LinkFailure::Link { log }) => logs.push(log.len()),
                other => panic!("expected a link failure, got {other:?}"),
            }
        }
        logs
    };
    let links = |m: &mut ProgramManager<Logs>| m.backend().1;
    for n in [0, MAX_FAILURE_LOG] {
        let before = links(&mut m);
        assert_eq!(link_twice(&mut m, n), vec![n, n]);
        assert_eq!(
            links(&mut m) - before,
            1,
            "the second is answered by the cache"
        );
    }
    let before = links(&mut m);
    let n = MAX_FAILURE_LOG + 1;
    assert_eq!(link_twice(&mut m, n), vec![n, n]);
    assert_eq!(links(&mut m) - before, 2, "not cached: linked twice");
}

/// At most `MAX_DEFERRED_SAVES` programs wait for their binary read; the next link reads its
/// binary at once, and a forgotten read is never done.
#[test]
fn deferred_reads_are_bounded_and_forgotten_ones_never_happen() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    let mut programs = Vec::new();
    for i in 0..=MAX_DEFERRED_SAVES {
        let mut vs = m.new_shader(ShaderStage::Vertex, format!("in vec4 a_{i};"));
        let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        programs.push(
            m.link(&mut vs, &mut fs, &ProgramOptions::default())
                .unwrap(),
        );
    }
    assert_eq!(m.deferred_binaries(), MAX_DEFERRED_SAVES);
    let last = programs.last().unwrap();
    assert!(!last.binary_deferred);
    assert_eq!(
        m.backend().binaries(),
        1,
        "only the one past the bound was read"
    );
    assert_eq!(cache.len(), 1);

    assert!(m.forget_deferred_binary(&programs[0].key));
    assert!(!m.save_deferred_binary(&mut programs[0]));
    assert!(m.save_deferred_binary(&mut programs[1]));
    assert_eq!(m.backend().binaries(), 2);
    assert!(cache.peek(&programs[1].key).is_some());
    assert!(cache.peek(&programs[0].key).is_none());
    assert_eq!(m.deferred_binaries(), MAX_DEFERRED_SAVES - 2);
}

/// `LinkedProgram`'s fields are public: a host that edits `key` (or `manager`) cannot make a
/// deferred read save one program's binary under another program's key.
#[test]
fn an_edited_linked_program_never_files_its_binary_under_another_key() {
    let cache = cache();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    let mut link = |i: usize| {
        let mut vs = m.new_shader(ShaderStage::Vertex, format!("in vec4 a_{i};"));
        let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap()
    };
    let (mut a, mut b) = (link(0), link(1));
    assert!(a.binary_deferred && b.binary_deferred);
    let a_key = a.key;
    a.key = b.key;
    assert!(!m.save_deferred_binary(&mut a), "b's read is not a's");
    assert!(cache.peek(&b.key).is_none());
    assert_eq!(m.backend().binaries(), 0);
    assert!(m.save_deferred_binary(&mut b));
    a.key = a_key;
    assert!(m.save_deferred_binary(&mut a));
    let binary_of = |k| cache.peek(k).unwrap().binary.bytes.clone();
    assert_ne!(binary_of(&a.key), binary_of(&b.key));
    assert_eq!(m.backend().binaries(), 2);
}

/// The programs waiting for their binary read hold at most `MAX_DEFERRED_BYTES` of entries:
/// programs with huge interfaces (the host's translator maps) stop waiting long before the
/// count bound, the next one reads its binary at once, and saving or forgetting a waiting read
/// gives its bytes back.
#[test]
fn deferred_reads_are_bounded_in_bytes() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    // About 4.3 MB of reflection per program: three wait, a fourth would pass 16 MiB.
    let uniforms: Vec<VariableInfo> = (0..20_000)
        .map(|i| VariableInfo {
            name: format!("u{i:0>200}"),
            ..VariableInfo::default()
        })
        .collect();
    let link = |m: &mut ProgramManager<FakeDriver>, i: usize| {
        let mut vs = m.new_shader(ShaderStage::Vertex, format!("in vec4 a_{i};"));
        vs.set_variables(ShaderVariables {
            uniforms: uniforms.clone(),
            ..ShaderVariables::default()
        });
        let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap()
    };
    let mut programs: Vec<_> = (0..4).map(|i| link(&mut m, i)).collect();
    let waiting: Vec<bool> = programs.iter().map(|p| p.binary_deferred).collect();
    assert_eq!(waiting, [true, true, true, false]);
    assert_eq!(m.deferred_binaries(), 3);
    let held = m.deferred_bytes();
    assert!(
        held > 3 * 4_000_000 && held <= MAX_DEFERRED_BYTES,
        "{held} bytes wait"
    );
    assert_eq!(m.backend().binaries(), 1, "the fourth was read at once");

    assert!(m.save_deferred_binary(&mut programs[0]));
    assert_eq!(m.deferred_bytes(), held / 3 * 2);
    assert!(link(&mut m, 4).binary_deferred, "room again");
    assert!(m.forget_deferred_binary(&programs[1].key));
    assert!(m.forget_deferred_binary(&programs[2].key));
    assert_eq!(m.deferred_binaries(), 1);
    assert_eq!(m.deferred_bytes(), held / 3);
}

/// A format-2 entry that is not well formed (a failure with a binary, a failure log over the
/// bound, more other stages than a program has) is refused by `save`, by `insert_entry` and by
/// `Store::put`; a well-formed failure record (log at the bound) passes all three.
#[test]
fn malformed_entries_are_refused_everywhere_and_failure_records_pass() {
    let stamp = CompatibilityStamp::new(
        DriverIdentity {
            gl_vendor: "Test".into(),
            gl_renderer: "review16".into(),
            gl_version: "4.6 test".into(),
            context: "OpenGL core profile".into(),
            vendor_id: None,
            device_id: None,
            driver_build_id: None,
        },
        "review16",
        "1",
    );
    struct Quiet;
    impl PersistSink for Quiet {
        fn entry_saved(&self, _: &ProgramKey, _: &[u8]) {}
        fn entry_used(&self, _: &ProgramKey) {}
        fn entry_rejected(&self, _: &ProgramKey) {}
        fn store_rejected(&self) {}
    }
    let cache = ProgramCache::builder(CacheConfig::desktop())
        .persist(PersistConfig::new(stamp.clone(), Arc::new(Quiet)))
        .build();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreConfig::new(dir.path(), stamp.clone())).unwrap();

    let binary = ProgramBinaryData {
        format: 1,
        bytes: vec![1, 2, 3],
    };
    let with_binary = CachedProgram {
        binary: binary.clone(),
        ..link_failure("log")
    };
    let long_log = link_failure(&"e".repeat(MAX_FAILURE_LOG + 1));
    let stage = StageRecord {
        stage: ShaderStage::Geometry.gl_enum(),
        shader: ShaderHash([9; 20]),
        variables: ShaderVariables::default(),
    };
    let many_stages = CachedProgram {
        binary,
        other_stages: vec![stage; 9],
        ..CachedProgram::default()
    };
    for (n, bad) in [with_binary, long_log, many_stages].into_iter().enumerate() {
        let k = key(10 + n as u8);
        assert!(!bad.is_well_formed());
        assert!(cache.save(k, bad.clone(), None).is_err(), "save of {n}");
        let bytes = disk::encode(&k, &bad, &stamp.hash(), 0, n % 2 == 0);
        assert!(cache.insert_entry(&bytes).is_err(), "insert_entry of {n}");
        assert!(store.put(&bytes).is_err(), "put of {n}");
    }
    assert_eq!(cache.len(), 0);
    assert_eq!(store.entries().count(), 0);

    let good = link_failure(&"e".repeat(MAX_FAILURE_LOG));
    assert!(good.is_well_formed());
    let bytes = disk::encode(&key(20), &good, &stamp.hash(), 0, true);
    assert_eq!(cache.insert_entry(&bytes).unwrap(), key(20));
    assert!(store.put(&bytes).is_ok());
    assert_eq!(
        cache.load_failure(&key(20)).and_then(|p| p.failure.clone()),
        good.failure
    );
}

/// [`FakeDriver`] whose first compile fails the way `GlBackend` reports a failure that is not
/// the driver's verdict on the source (`ShaderError::Create` / `NotCurrent` become their
/// `to_string()`: a lost context, an out-of-memory `glCreateShader`).
#[derive(Default)]
struct FirstCompileLost(FakeDriver, bool);

impl ProgramBackend for FirstCompileLost {
    type Shader = FakeObject;
    type Program = FakeObject;
    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<FakeObject, String> {
        if !std::mem::replace(&mut self.1, true) {
            return Err("glCreateShader failed: GL_CONTEXT_LOST".into());
        }
        self.0.compile(stage, source)
    }
    fn last_failure_is_verdict(&self) -> bool {
        // Only the first compile fails, and not as the driver's verdict on the source.
        false
    }
    fn link(&mut self, shaders: &[&FakeObject], o: &LinkOptions) -> Result<FakeObject, String> {
        self.0.link(shaders, o)
    }
    forward_binaries_and_reflection_to_0!();
}

/// A compile that failed for a reason other than the source (the context was lost, the object
/// could not be created) is no negative result: the next compile of that source must go to the
/// driver. It was: every `Err` of a `ProgramBackend` was taken as the driver's verdict and
/// cached (and persisted), so a transient failure refused a valid shader until the record was
/// evicted; `ProgramBackend::last_failure_is_verdict` now tells them apart.
#[test]
fn a_failure_that_is_not_the_drivers_verdict_is_not_cached() {
    let cache = cache();
    let mut m = ProgramManager::new(FirstCompileLost::default(), cache.clone(), "review16");
    let mut first = m.new_shader(ShaderStage::Vertex, "in vec4 a_position;");
    assert_eq!(m.compile(&mut first).unwrap(), CompileOutcome::Failed);
    let mut again = m.new_shader(ShaderStage::Vertex, "in vec4 a_position;");
    assert_eq!(m.compile(&mut again).unwrap(), CompileOutcome::Compiled);
}

/// The other order of `a_compile_failure_of_one_backend_identity_...`: the compatibility
/// manager compiles the shader first. Its status is the compatibility backend's only
/// (`backend_shader_hash`), so the core manager does not answer `Deferred` from it: it asks
/// its own driver. (What that driver answers is the driver's business: Mesa's own shader cache
/// keys "this source compiled" by the source alone, so llvmpipe's core context reports the
/// shader compiled, and refuses it only at link.) Each backend then answers from the cache with
/// its own verdict.
#[test]
fn a_shader_compiled_on_another_backend_is_not_deferred_where_it_fails() {
    let test = "a_shader_compiled_on_another_backend_is_not_deferred_where_it_fails";
    let open = |api| {
        open_or_skip(
            test,
            &ContextOptions {
                api,
                ..ContextOptions::default()
            },
        )
    };
    let (Some(core), Some(compat)) = (
        open(ApiPreference::DesktopCore),
        open(ApiPreference::DesktopCompatibility),
    ) else {
        return;
    };
    let cache = cache();
    // Not the source of `a_compile_failure_of_one_backend_identity_...`: Mesa's own cache would
    // carry this test's compatibility compile over to that test's core compile in one process.
    let source = "#version 150 compatibility\nvoid main() { gl_Position = gl_Vertex * 2.0; }\n";
    let mut on_compat =
        ProgramManager::new(GlBackend::new(&compat), cache.clone(), "compatibility 4.5");
    let mut s = Shader::new(ShaderStage::Vertex, source);
    assert_eq!(on_compat.compile(&mut s).unwrap(), CompileOutcome::Compiled);
    let mut on_core = ProgramManager::new(GlBackend::new(&core), cache.clone(), "core 4.5");
    let mut s = Shader::new(ShaderStage::Vertex, source);
    let on_core_first = on_core.compile(&mut s).unwrap();
    assert!(
        matches!(
            on_core_first,
            CompileOutcome::Compiled | CompileOutcome::Failed
        ),
        "the core backend took the compatibility backend's status: {on_core_first:?}"
    );
    let c = cache.counters();
    assert_eq!(
        (c.status_hits, c.status_misses),
        (0, 2),
        "both asked their driver"
    );
    // Each backend's own verdict, from the cache.
    let mut s = Shader::new(ShaderStage::Vertex, source);
    let again = on_core.compile(&mut s).unwrap();
    let expected = match on_core_first {
        CompileOutcome::Compiled => CompileOutcome::Deferred,
        _ => CompileOutcome::KnownFailure,
    };
    assert_eq!(again, expected);
    let mut s = Shader::new(ShaderStage::Vertex, source);
    assert_eq!(on_compat.compile(&mut s).unwrap(), CompileOutcome::Deferred);
    assert_eq!(cache.counters().status_hits, 2);
}
