//! The program cache over piglit's GLSL corpus on the machine's real driver.
//!
//! Every sampled piglit program with one vertex and one fragment shader goes through a
//! [`ProgramManager`] (256 MiB budget, so nothing is evicted) cold, and every program that links
//! cold must then
//! * be saved (`peek` finds its key),
//! * come back from the cache into a fresh program object: new [`Shader`]s whose compiles are
//!   deferred (status hits), and a link whose origin is [`LinkOrigin::CacheHit`],
//! * report the same active attributes and uniforms as the cold program, and
//! * draw the same pixels: every active float attribute of 1 to 4 components gets deterministic
//!   data, float / `vec4` uniforms deterministic values and samplers distinct texture units, and
//!   three triangles are drawn into a 16x16 target with each program and read back. Programs with
//!   other attributes (integer, double, matrix, array, or fixed-function built-ins such as
//!   `gl_Vertex`) are counted as not drawable, never as passed.
//!
//! Programs the driver refuses to compile or link (piglit has many that are meant to fail, or
//! that need extensions the driver lacks) are counted as rejected, not failures.
//!
//! # Context
//! A desktop **compatibility** profile context ([`ApiPreference::DesktopCompatibility`]). Most
//! of piglit is GLSL 1.10 to 1.40 (or has no `#version`) and feeds `gl_Vertex`, which the GL
//! spec guarantees only in the compatibility profile. Measured on Mesa llvmpipe 22.3 (GL 4.5),
//! whose core profile is lenient, both profiles link the same programs: 285 of the default
//! 400-program sample, 800 of all 1106 distinct programs. The compatibility profile links at
//! least as many and is the one a stricter core driver cannot shrink, so the test uses it
//! (`GPUSVC_CORPUS_API=core` runs it on a core context instead, to compare).
//!
//! # Inputs
//! * `GPUSVC_PIGLIT_DIR`: piglit's `tests` directory; default `<workspace>/target/corpora/
//!   piglit/tests`, which `scripts/fetch-corpus` fills. When it is missing the test skips with a
//!   reason, or fails when `GPUSVC_REQUIRE_GL` is set.
//! * `GPUSVC_CORPUS_LIMIT`: how many programs to try (default 400, evenly spread over the sorted,
//!   de-duplicated corpus), which keeps the test under a minute on two cores. At least 200 are
//!   tried unless the limit is set lower.
//! * `GPUSVC_CORPUS_TRACE`: when set, each program's name is printed before it is tried.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use corpus::{ProgramSource, dedup_sources, load_dir, spread};
use headless_gl::glow::{self, HasContext};
use headless_gl::{
    ActiveVariable, ApiPreference, ContextOptions, GlContext, OffscreenTarget, Program, ShaderStage,
};
use program_cache::{
    CacheConfig, CompileOutcome, GlBackend, LinkOrigin, LinkedProgram, ProgramCache,
    ProgramManager, ProgramOptions, Shader,
};
use test_support::gl::{REQUIRE_GL_ENV, gl_required, open_or_skip};

const DEFAULT_LIMIT: usize = 400;
const MIN_PROGRAMS: usize = 200;
const SIZE: u32 = 16;
const VERTICES: u32 = 9;
const CLEAR: [f32; 4] = [0.1, 0.2, 0.3, 0.4];

fn piglit_dir() -> PathBuf {
    match std::env::var_os("GPUSVC_PIGLIT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/corpora/piglit/tests"),
    }
}

fn limit() -> usize {
    match std::env::var("GPUSVC_CORPUS_LIMIT") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("GPUSVC_CORPUS_LIMIT={v:?} is not a number")),
        Err(_) => DEFAULT_LIMIT,
    }
}

#[derive(Debug, Default)]
struct Counts {
    tried: usize,
    linked: usize,
    cached: usize,
    loaded: usize,
    rejected_compile: usize,
    rejected_link: usize,
    binary_rejected: usize,
    drawn: usize,
    drawn_non_clear: usize,
    draw_errors: usize,
    not_drawable: BTreeMap<&'static str, usize>,
    /// Restored programs whose full driver reflection (fragment outputs, transform-feedback
    /// varyings, uniform and storage blocks with members, static use) equals the cold one's,
    /// and whose shaders got back exactly the maps the cold link stored.
    reflection_equal: usize,
    with_outputs: usize,
    with_uniform_blocks: usize,
    with_storage_blocks: usize,
    /// Maps restored to the warm shaders that name blocks or outputs.
    maps_with_blocks_or_outputs: usize,
}

#[test]
fn piglit_programs_restore_from_the_cache_identically() {
    const TEST: &str = "piglit_programs_restore_from_the_cache_identically";
    let dir = piglit_dir();
    if !dir.is_dir() {
        let reason = format!(
            "no piglit corpus at {} (run scripts/fetch-corpus, or set GPUSVC_PIGLIT_DIR)",
            dir.display()
        );
        if gl_required() {
            panic!("{TEST}: {REQUIRE_GL_ENV} is set but there is {reason}");
        }
        eprintln!("SKIP {TEST}: {reason}");
        return;
    }
    let api = match std::env::var("GPUSVC_CORPUS_API").as_deref() {
        Ok("core") => ApiPreference::DesktopCore,
        Ok("compat") | Err(_) => ApiPreference::DesktopCompatibility,
        Ok(other) => panic!("GPUSVC_CORPUS_API={other:?}: use core or compat"),
    };
    let options = ContextOptions {
        api,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip(TEST, &options) else {
        return;
    };
    eprintln!("driver: {}", ctx.info());

    let corpus = load_dir(&dir).expect("piglit corpus loads");
    let mut programs = corpus.programs;
    let duplicates = dedup_sources(&mut programs);
    let limit = limit();
    let sample = spread(&programs, limit);
    eprintln!(
        "corpus: {} files, {} vertex+fragment programs ({duplicates} duplicates dropped), \
         {} skipped; trying {} (GPUSVC_CORPUS_LIMIT={limit})",
        corpus.files,
        programs.len() + duplicates,
        corpus.skipped.len(),
        sample.len()
    );
    assert!(
        sample.len() >= MIN_PROGRAMS.min(limit),
        "only {} programs in {}",
        sample.len(),
        dir.display()
    );

    let start = Instant::now();
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20)).build();
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "corpus-test");
    let target = RawTarget::new(&ctx).expect("offscreen framebuffer");
    let mut counts = Counts::default();
    let mut failures = Vec::new();

    let trace = std::env::var_os("GPUSVC_CORPUS_TRACE").is_some();
    for program in &sample {
        if trace {
            eprintln!("trying {}", program.name);
        }
        counts.tried += 1;
        if let Err(failure) = run_one(&mut manager, &cache, program, &target, &mut counts) {
            failures.push(format!("{}: {failure}", program.name));
        }
    }

    let not_drawable: usize = counts.not_drawable.values().sum();
    eprintln!(
        "corpus counts: tried {}, linked {}, cached {}, loaded {}, rejected {} \
         (compile {}, link {}), binary rejected {}, drawn {} ({} with pixels besides the clear \
         colour), draw errors on both {}, not drawable {not_drawable} {:?}; reflection equal {} \
         (with fragment outputs {}, uniform blocks {}, storage blocks {}; restored maps naming \
         blocks or outputs {}); {:.1} s",
        counts.tried,
        counts.linked,
        counts.cached,
        counts.loaded,
        counts.rejected_compile + counts.rejected_link,
        counts.rejected_compile,
        counts.rejected_link,
        counts.binary_rejected,
        counts.drawn,
        counts.drawn_non_clear,
        counts.draw_errors,
        counts.not_drawable,
        counts.reflection_equal,
        counts.with_outputs,
        counts.with_uniform_blocks,
        counts.with_storage_blocks,
        counts.maps_with_blocks_or_outputs,
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} programs broke a cache guarantee:\n{}",
        failures.len(),
        counts.tried,
        failures.join("\n")
    );
    // Bookkeeping adds up, and the run exercised something.
    assert_eq!(
        counts.linked + counts.rejected_compile + counts.rejected_link,
        counts.tried
    );
    assert_eq!(counts.cached, counts.linked);
    assert_eq!(counts.loaded, counts.linked);
    assert_eq!(
        counts.drawn + counts.draw_errors + not_drawable,
        counts.linked
    );
    assert!(counts.linked > 0, "no piglit program linked");
    assert!(counts.drawn_non_clear > 0, "no draw changed a pixel");
    assert_eq!(counts.reflection_equal, counts.linked);
    assert!(counts.with_outputs > 0 && counts.with_uniform_blocks > 0);
    // Every linked program is cached, and so is every failure (negative results).
    let failures = cache
        .eviction_order()
        .iter()
        .filter(|k| cache.peek(k).is_some_and(|p| p.failure.is_some()))
        .count();
    assert_eq!(
        cache.len(),
        counts.linked + failures,
        "every linked program is cached"
    );
    assert!(
        failures >= counts.rejected_link,
        "every failed link is cached"
    );
    assert_eq!(cache.stats().counters.driver_rejections, 0);
}

type Manager<'a> = ProgramManager<GlBackend<'a>>;

/// Cold compile + link, then the cache checks for one program. `Err` is a broken guarantee.
fn run_one(
    manager: &mut Manager<'_>,
    cache: &ProgramCache,
    program: &ProgramSource,
    target: &RawTarget<'_>,
    counts: &mut Counts,
) -> Result<(), String> {
    let options = ProgramOptions::default();
    let mut vertex = Shader::new(ShaderStage::Vertex, program.vertex.as_str());
    let mut fragment = Shader::new(ShaderStage::Fragment, program.fragment.as_str());
    let vs = manager.compile(&mut vertex).unwrap();
    let fs = manager.compile(&mut fragment).unwrap();
    if vs == CompileOutcome::Failed || fs == CompileOutcome::Failed {
        counts.rejected_compile += 1;
        return Ok(());
    }
    let cold = match manager.link(&mut vertex, &mut fragment, &options) {
        Ok(cold) => cold,
        Err(_) => {
            counts.rejected_link += 1;
            return Ok(());
        }
    };
    counts.linked += 1;
    if cold.origin != LinkOrigin::Linked {
        return Err(format!("cold link origin {:?}", cold.origin));
    }
    if cache.peek(&cold.key).is_none() {
        return Err("linked cold but not saved".into());
    }
    counts.cached += 1;

    let mut vertex = Shader::new(ShaderStage::Vertex, program.vertex.as_str());
    let mut fragment = Shader::new(ShaderStage::Fragment, program.fragment.as_str());
    let outcomes = (
        manager.compile(&mut vertex).unwrap(),
        manager.compile(&mut fragment).unwrap(),
    );
    if outcomes != (CompileOutcome::Deferred, CompileOutcome::Deferred) {
        return Err(format!("warm compiles were {outcomes:?}, not deferred"));
    }
    let warm = manager
        .link(&mut vertex, &mut fragment, &options)
        .map_err(|e| format!("warm link failed: {e}"))?;
    match warm.origin {
        LinkOrigin::CacheHit => counts.loaded += 1,
        LinkOrigin::RelinkedAfterRejection => {
            counts.binary_rejected += 1;
            return Err("the driver rejected its own binary".into());
        }
        LinkOrigin::Linked => return Err("warm link missed the cache".into()),
    }
    if warm.key != cold.key {
        return Err("warm key differs".into());
    }
    if warm.attributes != cold.attributes {
        return Err(format!(
            "attributes differ: cold {:?}, warm {:?}",
            cold.attributes, warm.attributes
        ));
    }
    if warm.uniforms != cold.uniforms {
        return Err(format!(
            "uniforms differ: cold {:?}, warm {:?}",
            cold.uniforms, warm.uniforms
        ));
    }
    if warm.interface != cold.interface {
        return Err(format!(
            "reflection differs: cold {:?}, warm {:?}",
            cold.interface, warm.interface
        ));
    }
    let stored = cache.peek(&cold.key).ok_or("the entry left the cache")?;
    if vertex.variables() != Some(&stored.vertex) || fragment.variables() != Some(&stored.fragment)
    {
        return Err("the warm shaders did not get back the stored maps".into());
    }
    let i = &cold.interface;
    counts.reflection_equal += 1;
    counts.with_outputs += usize::from(!i.outputs.is_empty());
    counts.with_uniform_blocks += usize::from(!i.uniform_blocks.is_empty());
    counts.with_storage_blocks += usize::from(!i.storage_blocks.is_empty());
    let names = |v: &program_cache::ShaderVariables| {
        !v.outputs.is_empty() || !v.uniform_blocks.is_empty() || !v.storage_blocks.is_empty()
    };
    counts.maps_with_blocks_or_outputs +=
        usize::from(names(&stored.vertex) || names(&stored.fragment));

    let inputs = match DrawInputs::for_program(&cold) {
        Ok(inputs) => inputs,
        Err(why) => {
            *counts.not_drawable.entry(why).or_default() += 1;
            return Ok(());
        }
    };
    let pixels_cold = target.draw(&cold.program, &inputs);
    let pixels_warm = target.draw(&warm.program, &inputs);
    match (pixels_cold, pixels_warm) {
        (Ok(a), Ok(b)) if a == b => {
            counts.drawn += 1;
            let clear = CLEAR.map(|c| (c * 255.0).round() as u8);
            if a.chunks_exact(4).any(|p| p != clear) {
                counts.drawn_non_clear += 1;
            }
            Ok(())
        }
        (Ok(a), Ok(b)) => {
            let differing = a
                .chunks_exact(4)
                .zip(b.chunks_exact(4))
                .filter(|(x, y)| x != y);
            Err(format!(
                "cold and cached programs draw different pixels ({} of {} differ)",
                differing.count(),
                SIZE * SIZE
            ))
        }
        // The same GL error with both programs (e.g. a draw that needs state piglit's [test]
        // section sets up) says nothing against the cache.
        (Err(a), Err(b)) if a == b => {
            counts.draw_errors += 1;
            Ok(())
        }
        (a, b) => Err(format!(
            "draws disagree: cold {:?}, warm {:?}",
            a.err(),
            b.err()
        )),
    }
}

/// Built-in inputs that need no vertex data.
const SYSTEM_VALUES: [&str; 5] = [
    "gl_VertexID",
    "gl_InstanceID",
    "gl_DrawID",
    "gl_BaseVertex",
    "gl_BaseInstance",
];

const SAMPLER_TYPES: &[u32] = &[
    glow::SAMPLER_1D,
    glow::SAMPLER_2D,
    glow::SAMPLER_3D,
    glow::SAMPLER_CUBE,
    glow::SAMPLER_1D_SHADOW,
    glow::SAMPLER_2D_SHADOW,
    glow::SAMPLER_2D_RECT,
    glow::SAMPLER_2D_RECT_SHADOW,
    glow::SAMPLER_1D_ARRAY,
    glow::SAMPLER_2D_ARRAY,
    glow::SAMPLER_BUFFER,
    glow::SAMPLER_1D_ARRAY_SHADOW,
    glow::SAMPLER_2D_ARRAY_SHADOW,
    glow::SAMPLER_CUBE_SHADOW,
    glow::SAMPLER_CUBE_MAP_ARRAY,
    glow::SAMPLER_CUBE_MAP_ARRAY_SHADOW,
    glow::SAMPLER_2D_MULTISAMPLE,
    glow::SAMPLER_2D_MULTISAMPLE_ARRAY,
    glow::INT_SAMPLER_1D,
    glow::INT_SAMPLER_2D,
    glow::INT_SAMPLER_3D,
    glow::INT_SAMPLER_CUBE,
    glow::INT_SAMPLER_2D_RECT,
    glow::INT_SAMPLER_1D_ARRAY,
    glow::INT_SAMPLER_2D_ARRAY,
    glow::INT_SAMPLER_BUFFER,
    glow::INT_SAMPLER_CUBE_MAP_ARRAY,
    glow::INT_SAMPLER_2D_MULTISAMPLE,
    glow::INT_SAMPLER_2D_MULTISAMPLE_ARRAY,
    glow::UNSIGNED_INT_SAMPLER_1D,
    glow::UNSIGNED_INT_SAMPLER_2D,
    glow::UNSIGNED_INT_SAMPLER_3D,
    glow::UNSIGNED_INT_SAMPLER_CUBE,
    glow::UNSIGNED_INT_SAMPLER_2D_RECT,
    glow::UNSIGNED_INT_SAMPLER_1D_ARRAY,
    glow::UNSIGNED_INT_SAMPLER_2D_ARRAY,
    glow::UNSIGNED_INT_SAMPLER_BUFFER,
    glow::UNSIGNED_INT_SAMPLER_CUBE_MAP_ARRAY,
    glow::UNSIGNED_INT_SAMPLER_2D_MULTISAMPLE,
    glow::UNSIGNED_INT_SAMPLER_2D_MULTISAMPLE_ARRAY,
];

/// A uniform value set before the draw.
#[derive(Debug, Clone, Copy)]
enum Value {
    Float(f32),
    Vec4([f32; 4]),
    Int(i32),
}

/// Deterministic attribute data and uniform values for one program.
struct DrawInputs {
    /// Name, location, components, data.
    attributes: Vec<(String, u32, i32, Vec<f32>)>,
    uniforms: Vec<(String, Value)>,
}

impl DrawInputs {
    /// The inputs for `linked`, or why it cannot be drawn with float attributes.
    fn for_program(linked: &LinkedProgram<Program>) -> Result<Self, &'static str> {
        let mut attributes = Vec::new();
        for a in &linked.attributes {
            if SYSTEM_VALUES.contains(&a.name.as_str()) {
                continue;
            }
            // Compatibility contexts alias gl_Vertex with generic attribute 0; the other
            // fixed-function inputs (gl_Color, gl_MultiTexCoord0, ...) need the legacy array
            // entry points, which this test does not have.
            let location = match (a.name.as_str(), a.location) {
                ("gl_Vertex", _) => 0,
                (name, _) if name.starts_with("gl_") => {
                    return Err("fixed-function built-in attribute other than gl_Vertex");
                }
                (_, Some(location)) => location as u32,
                (_, None) => return Err("attribute without a location"),
            };
            if a.size != 1 {
                return Err("array attribute");
            }
            let components = match a.gl_type {
                glow::FLOAT => 1,
                glow::FLOAT_VEC2 => 2,
                glow::FLOAT_VEC3 => 3,
                glow::FLOAT_VEC4 => 4,
                glow::FLOAT_MAT2
                | glow::FLOAT_MAT3
                | glow::FLOAT_MAT4
                | glow::FLOAT_MAT2x3
                | glow::FLOAT_MAT2x4
                | glow::FLOAT_MAT3x2
                | glow::FLOAT_MAT3x4
                | glow::FLOAT_MAT4x2
                | glow::FLOAT_MAT4x3 => return Err("matrix attribute"),
                _ => return Err("non-float attribute"),
            };
            let seed = fnv(&a.name);
            let data = (0..VERTICES as usize * components)
                .map(|i| unit(seed, i as u64) * 2.0 - 1.0)
                .collect();
            attributes.push((a.name.clone(), location, components as i32, data));
        }
        let mut locations: Vec<u32> = attributes.iter().map(|a| a.1).collect();
        locations.sort_unstable();
        if locations.windows(2).any(|w| w[0] == w[1]) {
            return Err("attribute aliasing gl_Vertex at location 0");
        }
        let mut uniforms = Vec::new();
        let mut unit_index = 0;
        for u in &linked.uniforms {
            for element in element_names(u) {
                let seed = fnv(&element);
                let value = |k: u64| 0.25 + 0.75 * unit(seed, k);
                match u.gl_type {
                    glow::FLOAT => uniforms.push((element, Value::Float(value(0)))),
                    glow::FLOAT_VEC4 => uniforms.push((
                        element,
                        Value::Vec4([value(0), value(1), value(2), value(3)]),
                    )),
                    t if SAMPLER_TYPES.contains(&t) => {
                        uniforms.push((element, Value::Int(unit_index)));
                        unit_index += 1;
                    }
                    _ => {}
                }
            }
        }
        Ok(DrawInputs {
            attributes,
            uniforms,
        })
    }
}

/// A 16x16 RGBA8 target (headless-gl's) and a renderer over the raw GL functions. The test
/// draws through `GlContext::gl` rather than `GlContext::draw` so it can feed `gl_Vertex` through
/// generic attribute 0; objects made here are deleted here.
struct RawTarget<'a> {
    ctx: &'a GlContext,
    target: OffscreenTarget,
}

fn drain_errors(gl: &glow::Context) {
    // SAFETY: glGetError on the current context.
    while unsafe { gl.get_error() } != glow::NO_ERROR {}
}

fn gl_error(gl: &glow::Context, what: &str) -> Result<(), String> {
    // SAFETY: glGetError on the current context.
    match unsafe { gl.get_error() } {
        glow::NO_ERROR => Ok(()),
        code => Err(format!("GL error {code:#x} in {what}")),
    }
}

impl<'a> RawTarget<'a> {
    fn new(ctx: &'a GlContext) -> Result<Self, String> {
        let target = ctx
            .offscreen_target(SIZE, SIZE)
            .map_err(|e| e.to_string())?;
        Ok(RawTarget { ctx, target })
    }

    /// Clears, draws `VERTICES` vertices as triangles with `program`, reads the pixels back
    /// (`GlContext::read_rgba8`).
    fn draw(&self, program: &Program, inputs: &DrawInputs) -> Result<Vec<u8>, String> {
        let gl = self.ctx.gl().map_err(|e| e.to_string())?;
        // SAFETY: the context is current and made `program` and the framebuffer; every buffer
        // holds `components * VERTICES` floats, so the draw reads only uploaded data; names
        // passed to GL come from the driver's reflection and contain no NUL. Temporary objects
        // are deleted before returning.
        unsafe {
            drain_errors(gl);
            let vao = gl.create_vertex_array()?;
            let mut buffers = Vec::new();
            let result = (|| {
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(self.target.framebuffer()));
                gl.viewport(0, 0, SIZE as i32, SIZE as i32);
                let [r, g, b, a] = CLEAR;
                gl.clear_color(r, g, b, a);
                gl.clear(glow::COLOR_BUFFER_BIT);
                gl.use_program(Some(program.raw()));
                gl.bind_vertex_array(Some(vao));
                for (_, location, components, data) in &inputs.attributes {
                    let vbo = gl.create_buffer()?;
                    buffers.push(vbo);
                    let bytes: Vec<u8> = data.iter().flat_map(|f| f.to_ne_bytes()).collect();
                    gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
                    gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &bytes, glow::STATIC_DRAW);
                    gl.enable_vertex_attrib_array(*location);
                    gl.vertex_attrib_pointer_f32(*location, *components, glow::FLOAT, false, 0, 0);
                }
                for (name, value) in &inputs.uniforms {
                    let Some(location) = gl.get_uniform_location(program.raw(), name) else {
                        continue;
                    };
                    match *value {
                        Value::Float(x) => gl.uniform_1_f32(Some(&location), x),
                        Value::Vec4([x, y, z, w]) => gl.uniform_4_f32(Some(&location), x, y, z, w),
                        Value::Int(x) => gl.uniform_1_i32(Some(&location), x),
                    }
                }
                gl_error(gl, "draw setup")?;
                gl.draw_arrays(glow::TRIANGLES, 0, VERTICES as i32);
                gl_error(gl, "glDrawArrays")
            })();
            gl.bind_vertex_array(None);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            gl.use_program(None);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            for vbo in buffers {
                gl.delete_buffer(vbo);
            }
            gl.delete_vertex_array(vao);
            result?;
        }
        self.ctx.read_rgba8(&self.target).map_err(|e| e.to_string())
    }
}

/// `u` for a plain uniform; `u[0]`, `u[1]`, ... for an array the driver reports as `u[0]`.
fn element_names(u: &ActiveVariable) -> Vec<String> {
    match u.name.strip_suffix("[0]") {
        Some(base) if u.size > 1 => (0..u.size).map(|i| format!("{base}[{i}]")).collect(),
        _ => vec![u.name.clone()],
    }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A deterministic number in [0, 1) from a seed and an index (splitmix64).
fn unit(seed: u64, index: u64) -> f32 {
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

/// The built-in corpus (48 programs, desktop core 3.30 dialect) through the same checks as
/// piglit: every program links, is cached, comes back from its binary with equal reflection and
/// the stored maps, and draws the same pixels.
#[test]
fn builtin_programs_restore_from_the_cache_identically() {
    const TEST: &str = "builtin_programs_restore_from_the_cache_identically";
    let options = ContextOptions {
        api: ApiPreference::DesktopCore,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip(TEST, &options) else {
        return;
    };
    let programs = corpus::builtin(corpus::Dialect::DesktopCore330);
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20)).build();
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "corpus-test");
    let target = RawTarget::new(&ctx).expect("offscreen framebuffer");
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    for program in &programs {
        counts.tried += 1;
        if let Err(failure) = run_one(&mut manager, &cache, program, &target, &mut counts) {
            failures.push(format!("{}: {failure}", program.name));
        }
    }
    eprintln!(
        "builtin counts: tried {}, linked {}, loaded {}, reflection equal {} (with fragment \
         outputs {}, uniform blocks {}, storage blocks {}), drawn {}",
        counts.tried,
        counts.linked,
        counts.loaded,
        counts.reflection_equal,
        counts.with_outputs,
        counts.with_uniform_blocks,
        counts.with_storage_blocks,
        counts.drawn
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        counts.linked,
        programs.len(),
        "every built-in program links"
    );
    assert_eq!(counts.reflection_equal, counts.linked);
    assert_eq!(counts.with_outputs, counts.linked);
}

/// Piglit's programs with geometry or tessellation stages and its compute programs (every one
/// of them) through the cache on the real driver: each program that links cold is saved, comes
/// back from its binary through a second set of shaders (compiles deferred, origin
/// [`LinkOrigin::CacheHit`]) with the same key, stages and full reflection, and its shaders get
/// back the stored maps; a program the driver refuses is cached as a failure and refused again
/// with the same log without the driver.
#[test]
fn piglit_compute_and_multi_stage_programs_restore_from_the_cache() {
    const TEST: &str = "piglit_compute_and_multi_stage_programs_restore_from_the_cache";
    let dir = piglit_dir();
    if !dir.is_dir() {
        let reason = format!("no piglit corpus at {}", dir.display());
        if gl_required() {
            panic!("{TEST}: {REQUIRE_GL_ENV} is set but there is {reason}");
        }
        eprintln!("SKIP {TEST}: {reason}");
        return;
    }
    let options = ContextOptions {
        api: ApiPreference::DesktopCompatibility,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip(TEST, &options) else {
        return;
    };
    let corpus = load_dir(&dir).expect("piglit corpus loads");
    /// A program as its stages' sources.
    type Stages = Vec<(ShaderStage, String)>;
    let mut sets: Vec<(&str, Vec<Stages>)> = Vec::new();
    sets.push((
        "geometry/tessellation",
        corpus
            .staged
            .iter()
            .map(|p| {
                let mut stages = vec![(ShaderStage::Vertex, p.vertex.clone())];
                for (stage, source) in [
                    (ShaderStage::TessControl, &p.tess_control),
                    (ShaderStage::TessEvaluation, &p.tess_evaluation),
                    (ShaderStage::Geometry, &p.geometry),
                ] {
                    if let Some(source) = source {
                        stages.push((stage, source.clone()));
                    }
                }
                stages.push((ShaderStage::Fragment, p.fragment.clone()));
                stages
            })
            .collect(),
    ));
    sets.push((
        "compute",
        corpus
            .compute
            .iter()
            .map(|c| vec![(ShaderStage::Compute, c.compute.clone())])
            .collect(),
    ));
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20)).build();
    let mut failures = Vec::new();
    let mut refused_total = 0;
    for (label, programs) in &sets {
        let (mut linked, mut restored, mut refused, mut refused_again) = (0, 0, 0, 0);
        for (n, stages) in programs.iter().enumerate() {
            let run = |manager: &mut Manager<'_>| {
                let mut shaders: Vec<Shader<headless_gl::Shader>> = stages
                    .iter()
                    .map(|(stage, source)| Shader::new(*stage, source.as_str()))
                    .collect();
                let outcomes: Vec<CompileOutcome> = shaders
                    .iter_mut()
                    .map(|s| manager.compile(s).unwrap())
                    .collect();
                let failed = shaders.iter().find_map(|s| s.info_log().map(str::to_owned));
                let mut refs: Vec<&mut Shader<headless_gl::Shader>> = shaders.iter_mut().collect();
                let result = match failed {
                    Some(log) => Err(log),
                    None => manager
                        .link_program(&mut refs, &ProgramOptions::default())
                        .map_err(|e| match e {
                            program_cache::LinkFailure::Link { log } => log,
                            other => other.to_string(),
                        }),
                };
                let maps: Vec<_> = shaders.iter().map(|s| s.variables().cloned()).collect();
                (result, outcomes, maps)
            };
            let mut cold_manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "t");
            let (cold, _, _) = run(&mut cold_manager);
            let mut warm_manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "t");
            let (warm, outcomes, maps) = run(&mut warm_manager);
            match (cold, warm) {
                (Ok(cold), Ok(warm)) => {
                    linked += 1;
                    let stored = cache.peek(&cold.key);
                    let ok = warm.origin == LinkOrigin::CacheHit
                        && outcomes.iter().all(|o| *o == CompileOutcome::Deferred)
                        && warm.key == cold.key
                        && warm.stages == cold.stages
                        && warm.attributes == cold.attributes
                        && warm.uniforms == cold.uniforms
                        && warm.interface == cold.interface
                        && stored.as_ref().is_some_and(|s| {
                            stages.iter().zip(&maps).all(|((stage, _), m)| {
                                m.as_ref() == s.stage_variables(stage.gl_enum())
                            })
                        });
                    if ok {
                        restored += 1;
                    } else {
                        failures.push(format!("{label} #{n}: not restored identically"));
                    }
                }
                (Err(cold), Err(warm)) => {
                    refused += 1;
                    if cold == warm {
                        refused_again += 1;
                    } else {
                        failures.push(format!("{label} #{n}: another log the second time"));
                    }
                }
                (cold, warm) => failures.push(format!(
                    "{label} #{n}: cold {:?} but warm {:?}",
                    cold.is_ok(),
                    warm.is_ok()
                )),
            }
        }
        eprintln!(
            "{label}: {} programs, linked {linked}, restored identically {restored}, refused \
             {refused} (refused again from the cache with the same log {refused_again})",
            programs.len()
        );
        assert!(linked > 0, "no {label} program linked");
        refused_total += refused;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Each second refusal came from a failure record, not from the driver (cold runs hit
    // records too: piglit files share failing shaders).
    assert!(cache.counters().failure_hits >= refused_total as u64);
}
