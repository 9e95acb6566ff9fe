//! Issue 12: the rules `ProgramManager::link` keeps for every caller (a shader of the wrong stage
//! is refused, as the C ABI did on its own), and the type-erased backend ([`DynBackend`]) that
//! lets one manager type run on a fake driver, the real GL driver ([`OwnedGlBackend`]) or a
//! host's entry points.

use std::sync::Arc;

use program_cache::{
    ActiveVariable, CacheConfig, CompileOutcome, DynBackend, DynObject, ForeignShader, LinkFailure,
    LinkOptions, LinkOrigin, ObjectId, ProgramBackend, ProgramBinaryData, ProgramCache,
    ProgramManager, ProgramOptions, Shader, ShaderStage, ShaderState,
};

/// A driver whose objects are numbers; records what it was asked to do.
#[derive(Debug, Default)]
struct Numbers {
    next: u64,
    calls: Vec<&'static str>,
}

#[derive(Debug, PartialEq, Eq)]
struct Object(u64);

impl ObjectId for Object {
    fn object_id(&self) -> u64 {
        self.0
    }
}

impl Numbers {
    fn object(&mut self) -> Object {
        self.next += 1;
        Object(self.next)
    }
}

impl ProgramBackend for Numbers {
    type Shader = Object;
    type Program = Object;

    fn compile(&mut self, _: ShaderStage, source: &str) -> Result<Object, String> {
        self.calls.push("compile");
        if source.contains("error") {
            return Err("0:1: error".into());
        }
        Ok(self.object())
    }
    fn link(&mut self, _: &[&Object], _: &LinkOptions) -> Result<Object, String> {
        self.calls.push("link");
        Ok(self.object())
    }
    fn program_binary(&mut self, p: &Object) -> Result<ProgramBinaryData, String> {
        self.calls.push("program_binary");
        Ok(ProgramBinaryData {
            format: 7,
            bytes: p.0.to_le_bytes().to_vec(),
        })
    }
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Object, String> {
        self.calls.push("load_binary");
        assert_eq!(binary.format, 7);
        Ok(self.object())
    }
    fn active_attributes(&mut self, _: &Object) -> Vec<ActiveVariable> {
        vec![ActiveVariable {
            name: "a_position".into(),
            gl_type: 0x8B52,
            size: 1,
            location: Some(0),
        }]
    }
    fn active_uniforms(&mut self, _: &Object) -> Vec<ActiveVariable> {
        Vec::new()
    }
}

/// Another backend type, to mix objects with.
#[derive(Debug, Default)]
struct Others(Numbers);

#[derive(Debug)]
struct Other(u64);

impl ObjectId for Other {
    fn object_id(&self) -> u64 {
        self.0
    }
}

impl ProgramBackend for Others {
    type Shader = Other;
    type Program = Other;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Other, String> {
        self.0.compile(stage, source).map(|o| Other(o.0))
    }
    fn link(&mut self, _: &[&Other], _: &LinkOptions) -> Result<Other, String> {
        Ok(Other(self.0.object().0))
    }
    fn program_binary(&mut self, _: &Other) -> Result<ProgramBinaryData, String> {
        Err("none".into())
    }
    fn load_binary(&mut self, _: &ProgramBinaryData) -> Result<Other, String> {
        Err("none".into())
    }
    fn active_attributes(&mut self, _: &Other) -> Vec<ActiveVariable> {
        Vec::new()
    }
    fn active_uniforms(&mut self, _: &Other) -> Vec<ActiveVariable> {
        Vec::new()
    }
}

const VS: &str = "in vec4 a_position; void main() { gl_Position = a_position; }";
const FS: &str = "out vec4 o; void main() { o = vec4(1.0); }";

fn cache() -> Arc<ProgramCache> {
    ProgramCache::builder(CacheConfig::desktop()).build()
}

/// New vertex and fragment shaders of `vs` and `fs`, compiled in `m`; both compiles must end
/// in `outcome`.
fn compile_pair<B: ProgramBackend>(
    m: &mut ProgramManager<B>,
    vs: impl Into<String>,
    fs: impl Into<String>,
    outcome: CompileOutcome,
) -> [Shader<B::Shader>; 2] {
    let mut vs = Shader::new(ShaderStage::Vertex, vs);
    let mut fs = Shader::new(ShaderStage::Fragment, fs);
    assert_eq!(m.compile(&mut vs).unwrap(), outcome);
    assert_eq!(m.compile(&mut fs).unwrap(), outcome);
    [vs, fs]
}

#[test]
fn link_refuses_a_shader_of_the_wrong_stage_before_anything_else() {
    let mut m = ProgramManager::new(Numbers::default(), cache(), "wrong-stage");
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, FS);
    let mut cs = Shader::new(ShaderStage::Compute, "void main() {}");
    for s in [&mut vs, &mut fs, &mut cs] {
        assert_eq!(m.compile(s).unwrap(), CompileOutcome::Compiled);
    }
    let before = m.backend().calls.len();
    let o = ProgramOptions::default();
    // A fragment shader as the vertex one, and the other way round (the C ABI's message).
    let e = m.link(&mut fs, &mut vs, &o).unwrap_err();
    assert_eq!(
        e,
        LinkFailure::WrongStage {
            expected: ShaderStage::Vertex,
            found: ShaderStage::Fragment,
        }
    );
    assert_eq!(e.to_string(), "`vertex` is a fragment shader");
    let e = m.link(&mut vs, &mut cs, &o).unwrap_err();
    assert_eq!(
        e,
        LinkFailure::WrongStage {
            expected: ShaderStage::Fragment,
            found: ShaderStage::Compute,
        }
    );
    // Checked before the compile status: an uncompiled shader of the wrong stage is a stage
    // error too.
    let mut fresh = Shader::new(ShaderStage::Fragment, FS);
    assert!(matches!(
        m.link(&mut fresh, &mut fs, &o),
        Err(LinkFailure::WrongStage { .. })
    ));
    assert_eq!(
        m.backend().calls.len(),
        before,
        "the driver was not asked anything"
    );
    assert_eq!(m.cache().len(), 0);
    // The right order links.
    let linked = m.link(&mut vs, &mut fs, &o).unwrap();
    assert_eq!(linked.origin, LinkOrigin::Linked);
}

/// Issue 12 review: a shader belongs to one manager (the one that made it with `new_shader`, or
/// the first that compiled it), and another manager refuses it — also one over a backend of
/// the same type, whose objects the backend itself could not tell apart (the C ABI checked
/// this on its own). At link the owner is checked first, vertex shader first, then the
/// stages; nothing reaches the driver or the cache.
fn another_managers_shaders_are_refused<B>(m1: &mut ProgramManager<B>, m2: &mut ProgramManager<B>)
where
    B: ProgramBackend,
    B::Program: std::fmt::Debug,
{
    assert_ne!(m1.id(), m2.id());
    let [mut vs1, mut fs1] = compile_pair(m1, VS, FS, CompileOutcome::Compiled);
    let [mut vs2, mut fs2] = compile_pair(m2, VS, FS, CompileOutcome::Deferred);
    assert_eq!(
        vs1.manager(),
        Some(m1.id()),
        "the first manager that compiled it"
    );
    assert_eq!(fs2.manager(), Some(m2.id()));
    let o = ProgramOptions::default();
    let foreign = |argument| LinkFailure::ForeignShader {
        argument,
        owner: m1.id(),
    };
    let e = m2.link(&mut vs1, &mut fs2, &o).unwrap_err();
    assert_eq!(e, foreign(ShaderStage::Vertex));
    assert_eq!(
        e.to_string(),
        "the vertex shader belongs to another program manager"
    );
    let e = m2.link(&mut vs2, &mut fs1, &o).unwrap_err();
    assert_eq!(e, foreign(ShaderStage::Fragment));
    assert_eq!(
        e.to_string(),
        "the fragment shader belongs to another program manager"
    );
    // Before the stages: a foreign fragment shader as the vertex one is foreign first, and so
    // is a foreign vertex shader as the fragment one behind an own shader of the wrong stage.
    assert_eq!(
        m2.link(&mut fs1, &mut vs2, &o).unwrap_err(),
        foreign(ShaderStage::Vertex)
    );
    assert_eq!(
        m2.link(&mut fs2, &mut vs1, &o).unwrap_err(),
        foreign(ShaderStage::Fragment)
    );
    // Compiling another manager's shader is refused and changes nothing.
    let e = m2.compile(&mut vs1).unwrap_err();
    assert_eq!(e, ForeignShader { owner: m1.id() });
    assert_eq!(
        e.to_string(),
        "the given shader belongs to another program manager"
    );
    assert!(vs1.object().is_some() && !vs1.is_deferred());
    assert_eq!(vs1.manager(), Some(m1.id()));
    let seen = |s: &Shader<_>| {
        (
            s.compiled_hash(),
            s.is_deferred(),
            s.object().is_some(),
            s.manager(),
        )
    };
    let before = seen(&fs1);
    assert_eq!(m2.compile(&mut fs1), Err(ForeignShader { owner: m1.id() }));
    assert_eq!(seen(&fs1), before);
    // A shader made by a manager is its own before any compile: refused before the compile
    // status is read.
    let mut made = m1.new_shader(ShaderStage::Vertex, VS);
    assert_eq!(made.manager(), Some(m1.id()));
    assert_eq!(
        m2.link(&mut made, &mut fs2, &o).unwrap_err(),
        foreign(ShaderStage::Vertex)
    );
    assert!(m2.compile(&mut made).is_err());
    assert!(matches!(made.state(), ShaderState::NotCompiled));
    // A shader of no manager yet becomes the first compiler's.
    let mut loose = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(loose.manager(), None);
    assert_eq!(m2.compile(&mut loose), Ok(CompileOutcome::Deferred));
    assert_eq!(loose.manager(), Some(m2.id()));
    assert_eq!(m2.cache().len(), 0, "nothing was linked");
    // Each links its own.
    assert_eq!(
        m1.link(&mut vs1, &mut fs1, &o).unwrap().origin,
        LinkOrigin::Linked
    );
    assert_eq!(
        m2.link(&mut loose, &mut fs2, &o).unwrap().origin,
        LinkOrigin::CacheHit
    );
}

#[test]
fn a_manager_refuses_the_shaders_of_another_manager_of_the_same_backend_type() {
    let cache = cache();
    let mut m1 = ProgramManager::new(Numbers::default(), cache.clone(), "own");
    let mut m2 = ProgramManager::new(Numbers::default(), cache.clone(), "own");
    another_managers_shaders_are_refused(&mut m1, &mut m2);
    assert_eq!(
        m2.backend().calls,
        ["load_binary"],
        "the refused calls asked the driver nothing"
    );

    let cache = self::cache();
    let mut d1 = ProgramManager::new(DynBackend::new(Numbers::default()), cache.clone(), "dyn");
    let mut d2 = ProgramManager::new(DynBackend::new(Numbers::default()), cache, "dyn");
    another_managers_shaders_are_refused(&mut d1, &mut d2);
}

#[test]
fn a_manager_over_the_erased_backend_caches_like_one_over_the_backend_itself() {
    let cache = cache();
    let mut m: ProgramManager<DynBackend<'_>> =
        ProgramManager::new(DynBackend::new(Numbers::default()), cache.clone(), "dyn");
    let [mut vs, mut fs] = compile_pair(&mut m, VS, FS, CompileOutcome::Compiled);
    assert_eq!(vs.object().map(DynObject::id), Some(1));
    let first = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    assert_eq!(first.origin, LinkOrigin::Linked);
    assert_eq!(first.program.id(), 3);
    assert_eq!(first.program.object_id(), 3);
    assert_eq!(first.program.downcast_ref::<Object>(), Some(&Object(3)));
    assert_eq!(first.attributes[0].name, "a_position");
    assert_eq!(cache.len(), 1);

    // A second manager (another backend instance) over the same cache: a status hit defers the
    // compiles, the link is a binary load.
    let mut m2 = ProgramManager::new(DynBackend::new(Numbers::default()), cache.clone(), "dyn");
    let [mut vs2, mut fs2] = compile_pair(&mut m2, VS, FS, CompileOutcome::Deferred);
    let hit = m2
        .link(&mut vs2, &mut fs2, &ProgramOptions::default())
        .unwrap();
    assert_eq!(hit.origin, LinkOrigin::CacheHit);
    assert_eq!(hit.key, first.key);
    assert_eq!(hit.attributes, first.attributes);
    let program: Object = hit.program.downcast().unwrap();
    assert_eq!(program, Object(1), "the second backend's first object");
    assert!(format!("{:?}", m2.backend()).contains("Numbers"));
}

#[test]
fn objects_of_another_backend_type_are_refused_not_misused() {
    let mut numbers = DynBackend::new(Numbers::default());
    let mut others = DynBackend::new(Others::default());
    let vs = numbers.compile(ShaderStage::Vertex, VS).unwrap();
    let fs = numbers.compile(ShaderStage::Fragment, FS).unwrap();
    let e = others
        .link(&[&vs, &fs], &LinkOptions::default())
        .unwrap_err();
    assert!(e.contains("another backend"), "{e}");
    let p = numbers.link(&[&vs, &fs], &LinkOptions::default()).unwrap();
    assert!(others.program_binary(&p).is_err());
    assert_eq!(others.program_binary_length(&p), None);
    assert!(others.active_attributes(&p).is_empty());
    assert_eq!(numbers.active_attributes(&p).len(), 1);
    let p = p.downcast::<Other>().unwrap_err();
    assert_eq!(p.id(), 3, "given back whole");
}

/// The erased backend over the real driver: [`OwnedGlBackend`] owns its context, the objects
/// are headless-gl's (their ids are the GL names), a binary read from the driver restores the
/// program through the cache.
#[cfg(feature = "gl")]
#[test]
fn a_manager_over_the_erased_gl_backend_runs_on_the_driver() {
    use program_cache::OwnedGlBackend;
    use std::rc::Rc;

    let Some(ctx) = test_support::gl::context_or_skip("dyn_backend::gl") else {
        return;
    };
    let ctx = Rc::new(ctx);
    let prelude = ctx.info().glsl_prelude();
    let vs_src =
        format!("{prelude}in vec4 a_position;\nvoid main() {{ gl_Position = a_position; }}\n");
    let fs_src =
        format!("{prelude}uniform vec4 u_tint;\nout vec4 o;\nvoid main() {{ o = u_tint; }}\n");
    let cache = cache();
    let mut m = ProgramManager::new(
        DynBackend::new(OwnedGlBackend::new(ctx.clone())),
        cache.clone(),
        "dyn-gl",
    );
    let [mut vs, mut fs] = compile_pair(
        &mut m,
        vs_src.clone(),
        fs_src.clone(),
        CompileOutcome::Compiled,
    );
    let linked = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    assert_eq!(linked.origin, LinkOrigin::Linked);
    let gl_program = linked
        .program
        .downcast_ref::<headless_gl::Program>()
        .expect("a headless-gl program");
    assert_eq!(linked.program.id(), u64::from(gl_program.raw().0.get()));
    assert_ne!(linked.program.id(), 0);
    assert!(linked.uniforms.iter().any(|u| u.name == "u_tint"));
    assert_eq!(cache.len(), 1, "the binary was read and cached");

    // The manager owns a share of the context: it works after the caller's other handle goes.
    let mut m2 = ProgramManager::new(
        DynBackend::new(OwnedGlBackend::new(ctx.clone())),
        cache.clone(),
        "dyn-gl",
    );
    drop(ctx);
    let [mut vs2, mut fs2] = compile_pair(&mut m2, vs_src, fs_src, CompileOutcome::Deferred);
    let hit = m2
        .link(&mut vs2, &mut fs2, &ProgramOptions::default())
        .unwrap();
    assert_eq!(hit.origin, LinkOrigin::CacheHit);
    assert_eq!(hit.uniforms, linked.uniforms);
    assert_eq!(hit.attributes, linked.attributes);
    assert_ne!(
        hit.program.id(),
        linked.program.id(),
        "a new program object"
    );
    // The length query goes through the erasure to the driver.
    assert!(m2.backend().program_binary_length(&hit.program).is_some());
}
