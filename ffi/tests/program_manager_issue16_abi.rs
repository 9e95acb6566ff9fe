//! Issue 16 through the C ABI: parallel compile and link (`gpusvc_program_manager_start_*`,
//! `_ready`, `_finish_*`, pending links), `link_program` for any program kind, deferred binary
//! reads, the transform-feedback switch, cached failures and the new reflection, on the
//! machine's driver (skipped without one unless `GPUSVC_REQUIRE_GL` is set), and every new
//! export's refusal of NULL and misuse.

mod common;

use std::ffi::{CStr, c_char};
use std::ptr;

use common::*;
use gpusvc::*;

const INVALID: gpusvc_result = gpusvc_result::GPUSVC_INVALID_ARGUMENT;
const NULL: gpusvc_result = gpusvc_result::GPUSVC_NULL_ARGUMENT;
const INVALID_HANDLE: gpusvc_result = gpusvc_result::GPUSVC_INVALID_HANDLE;

type Shader = *mut gpusvc_program_manager_shader;
type Linked = *mut gpusvc_program_manager_linked_program;
type Pending = *mut gpusvc_program_manager_pending_link;

const VS: &str = "#version 450 core\nin vec4 a_position;\nuniform float u_scale;\n\
                  out vec4 v_color;\nvoid main() { v_color = vec4(u_scale); \
                  gl_Position = a_position * u_scale; }\n";
const FS: &str = "#version 450 core\nin vec4 v_color;\nuniform vec4 u_tint;\n\
                  layout(location = 0) out vec4 o_color;\n\
                  layout(std140, binding = 2) uniform Params { vec4 p_offset; mat4 p_m; };\n\
                  void main() { o_color = v_color * u_tint + p_offset; }\n";
const CS: &str = "#version 450 core\nlayout(local_size_x = 4, local_size_y = 2) in;\n\
                  layout(std430, binding = 3) buffer Data { uint values[]; };\n\
                  void main() { values[gl_GlobalInvocationID.x] = gl_GlobalInvocationID.x; }\n";

fn new_cache(config: gpusvc_program_cache_config) -> *mut gpusvc_program_cache {
    // SAFETY: a live config and out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_cache_new(&config, None, ptr::null_mut(), out)
    })
}

fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a handle value; the registry checks it.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

fn stats(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_stats_snapshot {
    let mut s = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and sized output.
    assert_eq!(unsafe { gpusvc_program_cache_stats(cache, &mut s) }, OK);
    s
}

/// A GL manager over a fresh context and `cache`, or None (skipped).
fn gl_manager(test: &str, cache: *mut gpusvc_program_cache) -> Option<*mut gpusvc_program_manager> {
    let ctx = open_gl_context(test, 0)?;
    let m = written(ptr::null_mut(), |out| {
        // SAFETY: live handles and out slot.
        unsafe { gpusvc_program_manager_new_gl(ctx, cache, c"issue16".as_ptr(), out) }
    });
    // SAFETY: the manager keeps the context.
    unsafe { gpusvc_gl_context_free(ctx) };
    Some(m)
}

fn free_manager(m: *mut gpusvc_program_manager) {
    // SAFETY: a handle value.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
}

fn shader(m: *mut gpusvc_program_manager, stage: u32, source: &str) -> Shader {
    // SAFETY: a live handle, source and out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_manager_shader_new(m, stage, source.as_ptr().cast(), source.len(), out)
    })
}

fn free_shader(s: Shader) {
    // SAFETY: a handle value.
    assert_eq!(unsafe { gpusvc_program_manager_shader_free(s) }, OK);
}

fn free_linked(p: Linked) {
    // SAFETY: a handle value.
    assert_eq!(unsafe { gpusvc_program_manager_linked_program_free(p) }, OK);
}

fn compile(m: *mut gpusvc_program_manager, s: Shader) -> u32 {
    // SAFETY: live handles and out slot.
    written(99, |out| unsafe {
        gpusvc_program_manager_compile(m, s, out)
    })
}

fn info_log(s: Shader) -> String {
    let mut buf = vec![0 as c_char; 1 << 16];
    let mut n = 0;
    // SAFETY: a live handle and buffer.
    let r =
        unsafe { gpusvc_program_manager_shader_info_log(s, buf.as_mut_ptr(), buf.len(), &mut n) };
    assert_eq!(r, OK);
    // SAFETY: NUL-terminated on success.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn link_program(
    m: *mut gpusvc_program_manager,
    shaders: &[Shader],
    options: Option<&gpusvc_program_manager_program_options>,
) -> Result<Linked, (gpusvc_result, String)> {
    let list: Vec<*const gpusvc_program_manager_shader> =
        shaders.iter().map(|&s| s.cast_const()).collect();
    let mut out = ptr::null_mut();
    let o = options.map_or(ptr::null(), |o| o as *const _);
    // SAFETY: live handles, array, options and out slot.
    let r =
        unsafe { gpusvc_program_manager_link_program(m, list.as_ptr(), list.len(), o, &mut out) };
    if r == OK {
        Ok(out)
    } else {
        assert!(out.is_null(), "nothing written on failure");
        Err((r, last_detail()))
    }
}

fn start_link(
    m: *mut gpusvc_program_manager,
    shaders: &[Shader],
) -> Result<Pending, gpusvc_result> {
    let list: Vec<*const gpusvc_program_manager_shader> =
        shaders.iter().map(|&s| s.cast_const()).collect();
    let mut out = ptr::null_mut();
    // SAFETY: live handles, array and out slot.
    let r = unsafe {
        gpusvc_program_manager_start_link(m, list.as_ptr(), list.len(), ptr::null(), &mut out)
    };
    if r == OK { Ok(out) } else { Err(r) }
}

fn ready(m: *mut gpusvc_program_manager, p: Pending) -> bool {
    // SAFETY: live handles and out slot.
    written(false, |out| unsafe {
        gpusvc_program_manager_link_ready(m, p, out)
    })
}

fn finish(m: *mut gpusvc_program_manager, p: Pending) -> Result<Linked, (gpusvc_result, String)> {
    let mut out = ptr::null_mut();
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_finish_link(m, p, &mut out) };
    if r == OK {
        Ok(out)
    } else {
        Err((r, last_detail()))
    }
}

fn origin(p: Linked) -> u32 {
    // SAFETY: a live handle and out slot.
    written(99, |out| unsafe {
        gpusvc_program_manager_linked_program_origin(p, out)
    })
}

fn stages(p: Linked) -> u32 {
    // SAFETY: a live handle and out slot.
    written(0, |out| unsafe {
        gpusvc_program_manager_linked_program_stages(p, out)
    })
}

/// Every variable of `kind`: (name, type, size, location, location index).
fn variables(p: Linked, kind: u32) -> Vec<(String, u32, i32, i32, i32)> {
    // SAFETY: a live handle and out slot.
    let n = written(0, |out| unsafe {
        gpusvc_program_manager_linked_program_variable_count(p, kind, out)
    });
    (0..n)
        .map(|i| {
            // SAFETY: all-zero is a valid value; struct_size set.
            let mut v: gpusvc_program_manager_active_variable = unsafe { std::mem::zeroed() };
            v.struct_size = size_of_val(&v);
            // SAFETY: live handle and sized output.
            let r = unsafe { gpusvc_program_manager_linked_program_variable(p, kind, i, &mut v) };
            assert_eq!(r, OK);
            // SAFETY: the name belongs to the live handle.
            let name = unsafe { CStr::from_ptr(v.name) }
                .to_string_lossy()
                .into_owned();
            (name, v.gl_type, v.size, v.location, v.location_index)
        })
        .collect()
}

/// Every block of `kind` with its members: (name, binding, size, referenced_by, members).
#[allow(clippy::type_complexity)]
fn blocks(
    p: Linked,
    kind: u32,
) -> Vec<(
    String,
    i32,
    i32,
    u32,
    Vec<(String, u32, i32, i32, i32, i32, bool)>,
)> {
    // SAFETY: a live handle and out slot.
    let n = written(0, |out| unsafe {
        gpusvc_program_manager_linked_program_block_count(p, kind, out)
    });
    (0..n)
        .map(|i| {
            // SAFETY: all-zero is a valid value.
            let mut b: gpusvc_program_manager_block = unsafe { std::mem::zeroed() };
            b.struct_size = size_of_val(&b);
            // SAFETY: live handle and sized output.
            let r = unsafe { gpusvc_program_manager_linked_program_block(p, kind, i, &mut b) };
            assert_eq!(r, OK);
            let members = (0..b.member_count)
                .map(|j| {
                    // SAFETY: all-zero is a valid value.
                    let mut m: gpusvc_program_manager_block_member = unsafe { std::mem::zeroed() };
                    m.struct_size = size_of_val(&m);
                    // SAFETY: live handle and sized output.
                    let r = unsafe {
                        gpusvc_program_manager_linked_program_block_member(p, kind, i, j, &mut m)
                    };
                    assert_eq!(r, OK);
                    // SAFETY: the name belongs to the live handle.
                    let name = unsafe { CStr::from_ptr(m.name) }
                        .to_string_lossy()
                        .into_owned();
                    (
                        name,
                        m.gl_type,
                        m.array_size,
                        m.offset,
                        m.array_stride,
                        m.matrix_stride,
                        m.row_major,
                    )
                })
                .collect();
            // SAFETY: the name belongs to the live handle.
            let name = unsafe { CStr::from_ptr(b.name) }
                .to_string_lossy()
                .into_owned();
            (name, b.binding, b.data_size, b.referenced_by, members)
        })
        .collect()
}

/// Everything C can read about a linked program but its object id and origin.
#[allow(clippy::type_complexity)]
fn reflection(p: Linked) -> (u32, Vec<Vec<(String, u32, i32, i32, i32)>>, String) {
    let lists = [
        GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
        GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
        GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING,
        GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT,
    ]
    .map(|k| variables(p, k))
    .to_vec();
    let b = format!(
        "{:?} {:?}",
        blocks(p, GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM),
        blocks(p, GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE)
    );
    (stages(p), lists, b)
}

fn vs_variant(i: usize) -> String {
    VS.replace("u_scale; }", &format!("u_scale * {}.0; }}", i + 1))
}

#[test]
fn started_links_polled_to_completion_match_synchronous_links() {
    const TEST: &str = "started_links_polled_to_completion_match_synchronous_links";
    let sync_cache = new_cache(cache_config(1 << 24));
    let Some(sync) = gl_manager(TEST, sync_cache) else {
        free_cache(sync_cache);
        return;
    };
    let par_cache = new_cache(cache_config(1 << 24));
    let par = gl_manager(TEST, par_cache).expect("a second context");
    const N: usize = 12;
    // Program 5 fails to link: its vertex shader writes no v_color the fragment reads... as
    // an output of another type.
    let bad_vs = "#version 450 core\nout ivec2 v_color;\nvoid main() { v_color = ivec2(1); \
                  gl_Position = vec4(0.0); }\n";
    let source = |i: usize| {
        if i == 5 {
            bad_vs.to_owned()
        } else {
            vs_variant(i)
        }
    };

    // Synchronous: compile, link.
    let mut expected = Vec::new();
    let mut keep = Vec::new();
    for i in 0..N {
        let (vs, fs) = (
            shader(sync, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &source(i)),
            shader(sync, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
        );
        assert_eq!(
            compile(sync, vs),
            GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
        );
        compile(sync, fs);
        expected.push(link_program(sync, &[fs, vs], None).map(|p| {
            let r = (origin(p), reflection(p));
            keep.push(p);
            r
        }));
        free_shader(vs);
        free_shader(fs);
    }
    assert!(expected[5].is_err() && expected.iter().filter(|e| e.is_ok()).count() == N - 1);

    // Parallel: start every compile, then every link, then poll them all to completion.
    let shaders: Vec<(Shader, Shader)> = (0..N)
        .map(|i| {
            let vs = shader(par, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &source(i));
            let fs = shader(par, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS);
            for s in [vs, fs] {
                // SAFETY: live handles and out slot.
                let o = written(99, |out| unsafe {
                    gpusvc_program_manager_start_compile(par, s, out)
                });
                assert!(
                    o == GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_PENDING
                        || o == GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED,
                    "{o}"
                );
            }
            (vs, fs)
        })
        .collect();
    let mut pending: Vec<Option<Pending>> = Vec::new();
    #[allow(clippy::type_complexity)]
    let mut got: Vec<Option<Result<(u32, _), (gpusvc_result, String)>>> =
        (0..N).map(|_| None).collect();
    for (i, &(vs, fs)) in shaders.iter().enumerate() {
        match start_link(par, &[vs, fs]) {
            Ok(p) => pending.push(Some(p)),
            Err(r) => {
                got[i] = Some(Err((r, last_detail())));
                pending.push(None);
            }
        }
    }
    let mut polls = 0;
    while got.iter().any(Option::is_none) {
        polls += 1;
        assert!(polls < 100_000, "links never completed");
        for i in 0..N {
            if let Some(p) = pending[i]
                && ready(par, p)
            {
                pending[i] = None;
                got[i] = Some(finish(par, p).map(|l| {
                    let r = (origin(l), reflection(l));
                    keep.push(l);
                    r
                }));
            }
        }
    }
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        let g = g.as_ref().unwrap();
        match (e, g) {
            (Ok(e), Ok(g)) => assert_eq!(e, g, "program {i}"),
            (Err(e), Err(g)) => assert_eq!(e, g, "program {i}: same code and log"),
            _ => panic!("program {i}: {e:?} vs {g:?}"),
        }
    }
    // The reflection went past attributes and uniforms.
    let (mask, lists, b) = &expected[0].as_ref().unwrap().1;
    assert_eq!(
        *mask,
        (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX)
            | (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT)
    );
    assert_eq!(lists[3].len(), 1, "{lists:?}");
    assert_eq!((lists[3][0].0.as_str(), lists[3][0].3), ("o_color", 0));
    assert!(b.contains("Params") && b.contains("p_offset"), "{b}");
    let fragment_bit = 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT;
    assert!(
        b.contains(&format!("(\"Params\", 2, 80, {fragment_bit}, ")),
        "{b}"
    );
    for p in keep {
        free_linked(p);
    }
    for (vs, fs) in shaders {
        free_shader(vs);
        free_shader(fs);
    }
    free_manager(sync);
    free_manager(par);
    free_cache(sync_cache);
    free_cache(par_cache);
}

#[test]
fn a_compute_program_linked_through_link_program_comes_back_from_the_cache() {
    const TEST: &str = "a_compute_program_linked_through_link_program_comes_back_from_the_cache";
    let cache = new_cache(cache_config(1 << 22));
    let Some(cold) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let cs = shader(cold, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE, CS);
    assert_eq!(
        compile(cold, cs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    let p = link_program(cold, &[cs], None).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    assert_eq!(stages(p), 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE);
    let mut size = [0u32; 3];
    // SAFETY: live handle and three slots.
    let r = unsafe {
        gpusvc_program_manager_linked_program_compute_work_group_size(p, size.as_mut_ptr())
    };
    assert_eq!((r, size), (OK, [4, 2, 1]));
    let storage = blocks(p, GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE);
    assert_eq!(storage.len(), 1, "{storage:?}");
    assert_eq!((storage[0].0.as_str(), storage[0].1), ("Data", 3));
    // (llvmpipe reports no GL_REFERENCED_BY_COMPUTE_SHADER for it: `referenced_by` is what
    // the driver says, checked for a fragment-stage block in the parallel-link test.)
    assert_eq!(storage[0].4[0].0, "values[0]", "{storage:?}");
    let cold_reflection = reflection(p);
    // The cached entry has the compute stage and its (driver-reflected) maps.
    // SAFETY: live handles and out slots.
    unsafe {
        let key = written(gpusvc_program_cache_sha1::default(), |o| {
            gpusvc_program_manager_linked_program_key(p, o)
        });
        let e = written(ptr::null_mut(), |o| {
            gpusvc_program_cache_peek(cache, &key, o)
        });
        assert_eq!(
            written(0, |o| gpusvc_program_cache_entry_stages(e, o)),
            1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE
        );
        let mut n = 9usize;
        let r = gpusvc_program_cache_entry_variable_count(
            e,
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE,
            GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
            &mut n,
        );
        assert_eq!(r, OK, "{}", last_detail());
        let r = gpusvc_program_cache_entry_variable_count(
            e,
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY,
            GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
            &mut n,
        );
        assert_eq!(r, INVALID);
        assert!(
            last_detail().contains("no geometry stage"),
            "{}",
            last_detail()
        );
        assert_eq!(gpusvc_program_cache_entry_free(e), OK);
    }

    let warm = gl_manager(TEST, cache).expect("a second context");
    let cs2 = shader(warm, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE, CS);
    assert_eq!(
        compile(warm, cs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    let hit = link_program(warm, &[cs2], None).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    assert_eq!(reflection(hit), cold_reflection);
    let mut size2 = [0u32; 3];
    // SAFETY: live handle and three slots.
    let r = unsafe {
        gpusvc_program_manager_linked_program_compute_work_group_size(hit, size2.as_mut_ptr())
    };
    assert_eq!((r, size2), (OK, [4, 2, 1]));
    assert_eq!(stats(cache).counters.hits, 1);
    // A graphics program has no work-group size: refused, nothing written.
    for p in [p, hit] {
        free_linked(p);
    }
    free_shader(cs);
    free_shader(cs2);
    free_manager(cold);
    free_manager(warm);
    free_cache(cache);
}

#[test]
fn failed_compiles_and_links_come_back_with_the_same_log_without_the_driver() {
    const TEST: &str = "failed_compiles_and_links_come_back_with_the_same_log_without_the_driver";
    let cache = new_cache(cache_config(1 << 22));
    let Some(cold) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let broken = "#version 450 core\nvoid main() { gl_Position = undefined_thing; }\n";
    let bad_link_vs = "#version 450 core\nout ivec2 v_color;\nvoid main() { v_color = ivec2(1); \
                       gl_Position = vec4(0.0); }\n";
    let s = shader(cold, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, broken);
    assert_eq!(
        compile(cold, s),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED
    );
    let compile_log = info_log(s);
    assert!(!compile_log.is_empty());
    let (vs, fs) = (
        shader(cold, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, bad_link_vs),
        shader(cold, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
    );
    compile(cold, vs);
    compile(cold, fs);
    let link_err = link_program(cold, &[vs, fs], None).unwrap_err();
    assert_eq!(link_err.0, gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED);

    let warm = gl_manager(TEST, cache).expect("a second context");
    let s2 = shader(warm, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, broken);
    assert_eq!(
        compile(warm, s2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_KNOWN_FAILURE
    );
    assert_eq!(info_log(s2), compile_log, "byte-identical compile log");
    let (vs2, fs2) = (
        shader(warm, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, bad_link_vs),
        shader(warm, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
    );
    // The shaders of a failed link keep their compile statuses: deferred, no driver compile.
    assert_eq!(
        compile(warm, vs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    assert_eq!(
        compile(warm, fs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    let before = stats(cache).failure_hits;
    assert_eq!(start_link(warm, &[vs2, fs2]).unwrap_err(), link_err.0);
    assert_eq!(last_detail(), link_err.1, "byte-identical link log");
    assert!(stats(cache).failure_hits > before);
    for sh in [s, vs, fs, s2, vs2, fs2] {
        free_shader(sh);
    }
    free_manager(cold);
    free_manager(warm);
    free_cache(cache);
}

#[test]
fn the_transform_feedback_switch_keeps_such_programs_out() {
    const TEST: &str = "the_transform_feedback_switch_keeps_such_programs_out";
    let mut config = cache_config(1 << 22);
    assert!(config.cache_transform_feedback, "on by default");
    config.cache_transform_feedback = false;
    let cache = new_cache(config);
    // The switch reads back.
    // SAFETY: all-zero is a valid config; struct_size set.
    let mut current: gpusvc_program_cache_config = unsafe { std::mem::zeroed() };
    current.struct_size = size_of_val(&current);
    // SAFETY: live handle and sized output.
    let r = unsafe { gpusvc_program_cache_current_config(cache, &mut current) };
    assert_eq!(r, OK);
    assert!(!current.cache_transform_feedback);
    let Some(m) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let vs_src = "#version 450 core\nin vec4 a_position;\nout vec4 v_out;\n\
                  void main() { v_out = a_position * 2.0; gl_Position = a_position; }\n";
    let fs_src = "#version 450 core\nout vec4 o;\nvoid main() { o = vec4(1.0); }\n";
    let varyings = [c"v_out".as_ptr()];
    let mut options = gpusvc_program_manager_program_options {
        struct_size: size_of::<gpusvc_program_manager_program_options>(),
        link: gpusvc_program_cache_link_options {
            attribute_bindings: ptr::null(),
            attribute_binding_count: 0,
            transform_feedback_varyings: varyings.as_ptr(),
            transform_feedback_varying_count: 1,
            transform_feedback_mode: GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED,
        },
        has_page: false,
        page: 0,
        separable: false,
        reserved: [0; 7],
    };
    for round in 0..2 {
        let (vs, fs) = (
            shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, vs_src),
            shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, fs_src),
        );
        compile(m, vs);
        compile(m, fs);
        let p = link_program(m, &[vs, fs], Some(&options)).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            origin(p),
            GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED,
            "round {round}"
        );
        let tf = variables(p, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING);
        assert_eq!(
            tf.iter().map(|v| v.0.as_str()).collect::<Vec<_>>(),
            ["v_out"]
        );
        free_linked(p);
        free_shader(vs);
        free_shader(fs);
    }
    assert_eq!(
        stats(cache).entries,
        0,
        "no transform-feedback program stored"
    );
    // Bad reserved bytes are refused.
    options.reserved[6] = 1;
    let (vs, fs) = (
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, vs_src),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, fs_src),
    );
    assert_eq!(
        link_program(m, &[vs, fs], Some(&options)).unwrap_err().0,
        INVALID
    );
    free_shader(vs);
    free_shader(fs);
    free_manager(m);
    free_cache(cache);
}

/// A GL manager that defers binary reads, on a new cache, with `VS` and `FS` compiled; `None`
/// (the test skips) without a driver.
fn deferring_manager(
    test: &str,
) -> Option<(
    *mut gpusvc_program_cache,
    *mut gpusvc_program_manager,
    Shader,
    Shader,
)> {
    let cache = new_cache(cache_config(1 << 22));
    let Some(m) = gl_manager(test, cache) else {
        free_cache(cache);
        return None;
    };
    // SAFETY: a live handle.
    let r = unsafe { gpusvc_program_manager_set_defer_binary_reads(m, true) };
    assert_eq!(r, OK);
    let (vs, fs) = (
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
    );
    compile(m, vs);
    compile(m, fs);
    Some((cache, m, vs, fs))
}

#[test]
fn deferred_binary_reads_save_when_asked() {
    const TEST: &str = "deferred_binary_reads_save_when_asked";
    let Some((cache, m, vs, fs)) = deferring_manager(TEST) else {
        return;
    };
    let p = link_program(m, &[vs, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    // SAFETY: live handles and out slots.
    unsafe {
        assert!(written(false, |o| {
            gpusvc_program_manager_linked_program_binary_deferred(p, o)
        }));
        assert_eq!(
            written(0, |o| gpusvc_program_manager_deferred_binaries(m, o)),
            1
        );
        assert!(written(0, |o| gpusvc_program_manager_deferred_bytes(m, o)) > 0);
        assert_eq!(stats(cache).entries, 0, "nothing read yet");
        assert!(written(false, |o| {
            gpusvc_program_manager_save_deferred_binary(m, p, o)
        }));
        assert!(!written(true, |o| {
            gpusvc_program_manager_linked_program_binary_deferred(p, o)
        }));
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_binaries(m, o)),
            0
        );
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_bytes(m, o)),
            0
        );
        assert_eq!(stats(cache).entries, 1);
        // Twice: nothing left to read.
        assert!(!written(true, |o| {
            gpusvc_program_manager_save_deferred_binary(m, p, o)
        }));
        assert!(!written(true, |o| {
            gpusvc_program_manager_forget_deferred_binary(m, p, o)
        }));
    }
    // A deferred read forgotten: nothing saved, nothing waiting.
    let vs2 = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs_variant(7));
    compile(m, vs2);
    let q = link_program(m, &[vs2, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    // SAFETY: live handles and out slots; NULLs are refused.
    unsafe {
        assert_eq!(
            written(0, |o| gpusvc_program_manager_deferred_binaries(m, o)),
            1
        );
        assert_eq!(
            gpusvc_program_manager_forget_deferred_binary(m, ptr::null(), &mut false),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_forget_deferred_binary(m, q, ptr::null_mut()),
            NULL
        );
        assert!(written(false, |o| {
            gpusvc_program_manager_forget_deferred_binary(m, q, o)
        }));
        assert!(!written(true, |o| {
            gpusvc_program_manager_linked_program_binary_deferred(q, o)
        }));
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_binaries(m, o)),
            0
        );
        assert!(!written(true, |o| {
            gpusvc_program_manager_save_deferred_binary(m, q, o)
        }));
    }
    assert_eq!(
        stats(cache).entries,
        1,
        "the forgotten program was not saved"
    );
    free_linked(q);
    free_shader(vs2);
    free_linked(p);
    free_shader(vs);
    free_shader(fs);
    free_manager(m);
    free_cache(cache);
}

/// Two live programs of the same shaders: the first waits for its binary read, the second
/// (linked while the first waits) was read at once. Forgetting the second before freeing it
/// drops nothing: the first keeps its read (and its bytes) and saves it.
/// Freeing a linked program whose binary read waits gives the read back (its slot and bytes),
/// and only its own: another program's read of the same shaders keeps waiting. A program freed
/// after its manager is freed too, without touching the manager.
#[test]
fn freeing_a_program_drops_only_its_own_deferred_read() {
    const TEST: &str = "freeing_a_program_drops_only_its_own_deferred_read";
    let Some((cache, m, vs, fs)) = deferring_manager(TEST) else {
        return;
    };
    let vs2 = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs_variant(3));
    compile(m, vs2);
    let a = link_program(m, &[vs, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    let b = link_program(m, &[vs, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    let c = link_program(m, &[vs2, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    let waiting = || {
        // SAFETY: a live handle and out slots.
        unsafe {
            (
                written(9, |o| gpusvc_program_manager_deferred_binaries(m, o)),
                written(9, |o| gpusvc_program_manager_deferred_bytes(m, o)),
            )
        }
    };
    let (count, bytes) = waiting();
    assert_eq!(count, 2, "a and c wait; b (same key as a) was read at once");
    free_linked(b);
    assert_eq!(waiting(), (2, bytes), "b had no read: a's stays");
    free_linked(a);
    let (count, after_a) = waiting();
    assert_eq!(count, 1);
    assert!(after_a < bytes && after_a > 0);
    assert_eq!(
        stats(cache).entries,
        1,
        "b's binary only: a's was never read"
    );
    free_shader(vs);
    free_shader(vs2);
    free_shader(fs);
    free_manager(m);
    // The manager is gone: freeing c touches nothing of it.
    free_linked(c);
    free_cache(cache);
}

#[test]
fn forgetting_one_program_keeps_another_programs_deferred_read() {
    const TEST: &str = "forgetting_one_program_keeps_another_programs_deferred_read";
    let Some((cache, m, vs, fs)) = deferring_manager(TEST) else {
        return;
    };
    let a = link_program(m, &[vs, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    let b = link_program(m, &[vs, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    // SAFETY: live handles and out slots.
    unsafe {
        assert!(written(false, |o| {
            gpusvc_program_manager_linked_program_binary_deferred(a, o)
        }));
        assert!(!written(true, |o| {
            gpusvc_program_manager_linked_program_binary_deferred(b, o)
        }));
        let held = written(0, |o| gpusvc_program_manager_deferred_bytes(m, o));
        assert!(held > 0);
        assert!(
            !written(true, |o| {
                gpusvc_program_manager_forget_deferred_binary(m, b, o)
            }),
            "b had no read waiting"
        );
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_binaries(m, o)),
            1
        );
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_bytes(m, o)),
            held
        );
        free_linked(b);
        assert!(
            written(false, |o| {
                gpusvc_program_manager_save_deferred_binary(m, a, o)
            }),
            "a's read is still waiting"
        );
        assert_eq!(
            written(9, |o| gpusvc_program_manager_deferred_bytes(m, o)),
            0
        );
    }
    free_linked(a);
    free_shader(vs);
    free_shader(fs);
    free_manager(m);
    free_cache(cache);
}

#[test]
fn every_new_export_refuses_null_and_misuse() {
    const TEST: &str = "every_new_export_refuses_null_and_misuse";
    let cache = new_cache(cache_config(1 << 22));
    let Some(m) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let other = gl_manager(TEST, cache).expect("a second context");
    let (vs, fs) = (
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
    );
    let foreign = shader(other, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS);
    let mut outcome = 77u32;
    let mut flag = true;
    let mut count = 77usize;
    let mut linked: Linked = ptr::null_mut();
    let mut pend: Pending = ptr::null_mut();
    let list = [vs.cast_const(), fs.cast_const()];
    // SAFETY: every pointer is NULL, a handle value or a live slot; the library checks them.
    unsafe {
        // Compile in two phases.
        assert_eq!(
            gpusvc_program_manager_start_compile(ptr::null(), vs, &mut outcome),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_start_compile(m, ptr::null(), &mut outcome),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_start_compile(m, vs, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_start_compile(m, foreign, &mut outcome),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_compile_ready(m, ptr::null(), &mut flag),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_compile_ready(m, vs, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_compile_ready(m, foreign, &mut flag),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_finish_compile(ptr::null(), vs, &mut outcome),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_finish_compile(m, vs, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_finish_compile(m, foreign, &mut outcome),
            INVALID
        );
        assert_eq!((outcome, flag), (77, true), "nothing written on failure");
        // A shader never compiled: ready, and reported as not compiled (FAILED).
        assert_eq!(gpusvc_program_manager_compile_ready(m, vs, &mut flag), OK);
        assert!(flag);
        assert_eq!(
            gpusvc_program_manager_finish_compile(m, vs, &mut outcome),
            OK
        );
        assert_eq!(outcome, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
        for s in [vs, fs] {
            assert_eq!(gpusvc_program_manager_start_compile(m, s, &mut outcome), OK);
            assert_eq!(
                gpusvc_program_manager_finish_compile(m, s, &mut outcome),
                OK
            );
            assert_eq!(outcome, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
        }

        // Links: NULL, counts, repeats, foreign shaders, options.
        for start in [false, true] {
            let call = |mgr: *const gpusvc_program_manager,
                        shaders: *const *const gpusvc_program_manager_shader,
                        n: usize,
                        linked: &mut Linked,
                        pend: &mut Pending| {
                if start {
                    gpusvc_program_manager_start_link(mgr, shaders, n, ptr::null(), pend)
                } else {
                    gpusvc_program_manager_link_program(mgr, shaders, n, ptr::null(), linked)
                }
            };
            assert_eq!(
                call(ptr::null(), list.as_ptr(), 2, &mut linked, &mut pend),
                NULL
            );
            assert_eq!(call(m, ptr::null(), 2, &mut linked, &mut pend), NULL);
            assert_eq!(call(m, ptr::null(), 0, &mut linked, &mut pend), INVALID);
            assert_eq!(call(m, list.as_ptr(), 0, &mut linked, &mut pend), INVALID);
            // Huge counts are refused before the array is read.
            for n in [7, 1 << 40, usize::MAX] {
                assert_eq!(
                    call(m, list.as_ptr(), n, &mut linked, &mut pend),
                    INVALID,
                    "{n}"
                );
            }
            assert!(
                last_detail().contains("more than the 6 stages"),
                "{}",
                last_detail()
            );
            let twice = [vs.cast_const(), vs.cast_const()];
            assert_eq!(call(m, twice.as_ptr(), 2, &mut linked, &mut pend), INVALID);
            let with_null = [vs.cast_const(), ptr::null()];
            assert_eq!(call(m, with_null.as_ptr(), 2, &mut linked, &mut pend), NULL);
            let with_foreign = [foreign.cast_const(), fs.cast_const()];
            assert_eq!(
                call(m, with_foreign.as_ptr(), 2, &mut linked, &mut pend),
                INVALID
            );
            // Not a program: a vertex shader alone (not separable).
            assert_eq!(call(m, list.as_ptr(), 1, &mut linked, &mut pend), INVALID);
            assert!(
                last_detail().contains("do not make a program"),
                "{}",
                last_detail()
            );
            assert!(
                linked.is_null() && pend.is_null(),
                "nothing written on failure"
            );
        }
        let mut out_null_pending =
            gpusvc_program_manager_start_link(m, list.as_ptr(), 2, ptr::null(), ptr::null_mut());
        assert_eq!(out_null_pending, NULL);
        out_null_pending =
            gpusvc_program_manager_link_program(m, list.as_ptr(), 2, ptr::null(), ptr::null_mut());
        assert_eq!(out_null_pending, NULL);

        // A pending link: another manager's refused (and it stays live), NULLs refused.
        let p = start_link(m, &[vs, fs]).unwrap();
        assert_eq!(
            gpusvc_program_manager_link_ready(other, p, &mut flag),
            INVALID
        );
        assert!(last_detail().contains("another program manager"));
        assert_eq!(
            gpusvc_program_manager_link_ready(m, ptr::null(), &mut flag),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_link_ready(m, p, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_finish_link(other, p, &mut linked),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_finish_link(m, ptr::null_mut(), &mut linked),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_finish_link(m, p, ptr::null_mut()),
            NULL
        );
        assert!(linked.is_null());
        // Still live: finish it; then it is consumed.
        let l = finish(m, p).unwrap();
        assert_eq!(gpusvc_program_manager_pending_link_free(p), INVALID_HANDLE);
        assert_eq!(
            gpusvc_program_manager_finish_link(m, p, &mut linked),
            INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_manager_link_ready(m, p, &mut flag),
            INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_manager_pending_link_free(ptr::null_mut()),
            OK
        );
        // A pending link dropped without finishing.
        let p2 = start_link(m, &[vs, fs]).unwrap();
        // Bound to its manager's thread: another thread can neither poll nor free it.
        let addr = p2 as usize;
        let (polled, freed) = std::thread::spawn(move || {
            let p = addr as *mut gpusvc_program_manager_pending_link;
            let mut ready = false;
            // A handle of another thread, which the library must refuse (inside the outer
            // unsafe block).
            {
                (
                    gpusvc_program_manager_link_ready(ptr::null(), p, &mut ready),
                    gpusvc_program_manager_pending_link_free(p),
                )
            }
        })
        .join()
        .unwrap();
        assert_eq!(polled, NULL, "the manager argument is checked first");
        assert_eq!(freed, gpusvc_result::GPUSVC_WRONG_THREAD);
        assert_eq!(gpusvc_program_manager_pending_link_free(p2), OK);
        assert_eq!(gpusvc_program_manager_pending_link_free(p2), INVALID_HANDLE);
        // A handle of another kind.
        assert_eq!(
            gpusvc_program_manager_link_ready(m, l.cast(), &mut flag),
            INVALID_HANDLE
        );

        // Deferred binaries.
        assert_eq!(
            gpusvc_program_manager_set_defer_binary_reads(ptr::null(), true),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_deferred_binaries(ptr::null(), &mut count),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_deferred_binaries(m, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_deferred_bytes(ptr::null(), &mut count),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_deferred_bytes(m, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_save_deferred_binary(m, ptr::null(), &mut flag),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_save_deferred_binary(m, l, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_save_deferred_binary(other, l, &mut flag),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_forget_deferred_binary(other, l, &mut flag),
            INVALID
        );
        assert_eq!(count, 77);

        // Reflection queries.
        assert_eq!(
            gpusvc_program_manager_linked_program_stages(ptr::null(), &mut outcome),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_stages(l, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_binary_deferred(l, ptr::null_mut()),
            NULL
        );
        let mut size = [9u32; 3];
        assert_eq!(
            gpusvc_program_manager_linked_program_compute_work_group_size(l, size.as_mut_ptr()),
            INVALID,
            "not a compute program"
        );
        assert_eq!(size, [9; 3]);
        assert_eq!(
            gpusvc_program_manager_linked_program_compute_work_group_size(l, ptr::null_mut()),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_block_count(l, 2, &mut count),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_variable_count(l, 4, &mut count),
            INVALID
        );
        let mut b: gpusvc_program_manager_block = std::mem::zeroed();
        b.struct_size = size_of_val(&b);
        assert_eq!(
            gpusvc_program_manager_linked_program_block(l, 0, 99, &mut b),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_block(l, 0, 0, ptr::null_mut()),
            NULL
        );
        b.struct_size = 8;
        assert_eq!(
            gpusvc_program_manager_linked_program_block(l, 0, 0, &mut b),
            gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE
        );
        let mut mem: gpusvc_program_manager_block_member = std::mem::zeroed();
        mem.struct_size = size_of_val(&mem);
        assert_eq!(
            gpusvc_program_manager_linked_program_block_member(l, 0, 0, 999, &mut mem),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_uniform_static_use(l, 999, &mut outcome),
            INVALID
        );
        free_linked(l);
    }
    for s in [vs, fs, foreign] {
        free_shader(s);
    }
    free_manager(m);
    free_manager(other);
    free_cache(cache);
}

#[test]
fn translator_maps_take_varyings_outputs_and_qualifiers() {
    const TEST: &str = "translator_maps_take_varyings_outputs_and_qualifiers";
    let cache = new_cache(cache_config(1 << 22));
    let Some(m) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let s = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS);
    let out_var = gpusvc_program_cache_variable_info {
        name: c"o_color".as_ptr(),
        mapped_name: c"_uo_color".as_ptr(),
        gl_type: 0x8B52,
        array_size: 1,
        has_location: true,
        location: 0,
    };
    let q = gpusvc_program_manager_variable_qualifiers {
        struct_size: size_of::<gpusvc_program_manager_variable_qualifiers>(),
        precision: 0x8DF2,
        static_use: true,
        reserved: [0; 3],
    };
    // SAFETY: live handle, list and structs; NULLs and bad values are the library's to refuse.
    unsafe {
        let kind = GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT;
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_list(s, kind, ptr::null(), 1),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_list(s, 9, &out_var, 1),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_qualifiers(s, kind, 0, &q),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_list(s, kind, &out_var, 1),
            OK
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_qualifiers(s, kind, 0, ptr::null()),
            NULL
        );
        let bad = gpusvc_program_manager_variable_qualifiers {
            reserved: [0, 1, 0],
            ..q
        };
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_qualifiers(s, kind, 0, &bad),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_variable_qualifiers(s, kind, 0, &q),
            OK
        );
        assert_eq!(
            written(0, |o| gpusvc_program_manager_shader_variable_count(
                s, kind, o
            )),
            1
        );
        let mut v: gpusvc_program_cache_variable_info = std::mem::zeroed();
        assert_eq!(
            gpusvc_program_manager_shader_variable(s, kind, 0, &mut v),
            OK
        );
        assert_eq!(CStr::from_ptr(v.mapped_name), c"_uo_color");
        let mut got: gpusvc_program_manager_variable_qualifiers = std::mem::zeroed();
        got.struct_size = size_of_val(&got);
        assert_eq!(
            gpusvc_program_manager_shader_variable_qualifiers(s, kind, 0, &mut got),
            OK
        );
        assert_eq!((got.precision, got.static_use), (0x8DF2, true));
        assert_eq!(
            gpusvc_program_manager_shader_variable_qualifiers(s, kind, 1, &mut got),
            INVALID
        );
        // The other lists are untouched (empty).
        assert_eq!(
            written(9, |o| gpusvc_program_manager_shader_variable_count(
                s,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING,
                o
            )),
            0
        );
    }
    // Blocks: set with members, read back, stored with the program and restored by a second
    // manager's cache hit.
    let members = [
        gpusvc_program_cache_variable_info {
            name: c"p_offset".as_ptr(),
            mapped_name: c"_up_offset".as_ptr(),
            gl_type: 0x8B52,
            array_size: 1,
            has_location: true,
            location: 0,
        },
        gpusvc_program_cache_variable_info {
            name: c"p_m".as_ptr(),
            mapped_name: c"_up_m".as_ptr(),
            gl_type: 0x8B5C,
            array_size: 1,
            has_location: true,
            location: 16,
        },
    ];
    let block = gpusvc_program_manager_shader_block_info {
        name: c"Params".as_ptr(),
        mapped_name: c"_uParams".as_ptr(),
        binding: 2,
        data_size: 80,
        static_use: true,
        reserved: [0; 7],
        members: members.as_ptr(),
        member_count: 2,
    };
    let read_blocks = |s: Shader| -> Vec<String> {
        // SAFETY: live handle and out slots; the strings belong to the shader.
        unsafe {
            let n = written(0, |o| {
                gpusvc_program_manager_shader_block_count(
                    s,
                    GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM,
                    o,
                )
            });
            (0..n)
                .map(|i| {
                    let mut b: gpusvc_program_manager_shader_block_info = std::mem::zeroed();
                    let r = gpusvc_program_manager_shader_block(
                        s,
                        GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM,
                        i,
                        &mut b,
                    );
                    assert_eq!(r, OK);
                    let members: Vec<String> = (0..b.member_count)
                        .map(|j| {
                            let m = &*b.members.add(j);
                            format!(
                                "{}={} {:#x} @{}",
                                CStr::from_ptr(m.name).to_string_lossy(),
                                CStr::from_ptr(m.mapped_name).to_string_lossy(),
                                m.gl_type,
                                m.location
                            )
                        })
                        .collect();
                    format!(
                        "{}={} b{} s{} {} {members:?}",
                        CStr::from_ptr(b.name).to_string_lossy(),
                        CStr::from_ptr(b.mapped_name).to_string_lossy(),
                        b.binding,
                        b.data_size,
                        b.static_use
                    )
                })
                .collect()
        }
    };
    // SAFETY: live handle and list; bad values are the library's to refuse.
    unsafe {
        let bad = gpusvc_program_manager_shader_block_info {
            reserved: [1; 7],
            ..block
        };
        assert_eq!(
            gpusvc_program_manager_shader_set_blocks(s, 0, &bad, 1),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_blocks(s, 2, &block, 1),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_blocks(s, 0, ptr::null(), 1),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_shader_set_blocks(s, 0, &block, 1),
            OK
        );
        let mut b: gpusvc_program_manager_shader_block_info = std::mem::zeroed();
        assert_eq!(
            gpusvc_program_manager_shader_block(s, 0, 1, &mut b),
            INVALID
        );
        assert_eq!(
            gpusvc_program_manager_shader_block(s, 0, 0, ptr::null_mut()),
            NULL
        );
    }
    let before = read_blocks(s);
    assert_eq!(
        before,
        [
            "Params=_uParams b2 s80 true [\"p_offset=_up_offset 0x8b52 @0\", \"p_m=_up_m 0x8b5c @16\"]"
        ]
    );
    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS);
    compile(m, vs);
    compile(m, s);
    let p = link_program(m, &[vs, s], None).unwrap_or_else(|e| panic!("{e:?}"));
    free_linked(p);
    let m2 = gl_manager(TEST, cache).expect("a second context");
    let (vs2, fs2) = (
        shader(m2, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS),
        shader(m2, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS),
    );
    assert_eq!(
        compile(m2, vs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    assert_eq!(
        compile(m2, fs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    let hit = link_program(m2, &[vs2, fs2], None).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    assert_eq!(read_blocks(fs2), before, "blocks restored");
    // SAFETY: live handle and out slot.
    let mut got: gpusvc_program_manager_variable_qualifiers = unsafe { std::mem::zeroed() };
    got.struct_size = size_of_val(&got);
    // SAFETY: live handle and sized output.
    let r = unsafe {
        gpusvc_program_manager_shader_variable_qualifiers(
            fs2,
            GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT,
            0,
            &mut got,
        )
    };
    assert_eq!(r, OK);
    assert_eq!(
        (got.precision, got.static_use),
        (0x8DF2, true),
        "qualifiers restored"
    );
    free_linked(hit);
    for sh in [s, vs, vs2, fs2] {
        free_shader(sh);
    }
    free_manager(m);
    free_manager(m2);
    free_cache(cache);
}

#[test]
fn old_hosts_structs_get_the_defaults_of_the_appended_fields() {
    const TEST: &str = "old_hosts_structs_get_the_defaults_of_the_appended_fields";
    let cache = new_cache(cache_config(1 << 22));
    let Some(m) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let vs_src = "#version 450 core\nvoid main() { gl_Position = vec4(0.0); }\n";
    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, vs_src);
    compile(m, vs);
    // Options of a host from before `separable`: the bytes where it lies now say "true", but
    // past the host's struct_size: not read, so a vertex shader alone is not a program.
    // SAFETY: all-zero is a valid options struct.
    let mut o: gpusvc_program_manager_program_options = unsafe { std::mem::zeroed() };
    o.struct_size = std::mem::offset_of!(gpusvc_program_manager_program_options, separable);
    o.separable = true;
    let link = |o: &gpusvc_program_manager_program_options| {
        let list = [vs.cast_const()];
        let mut out = ptr::null_mut();
        // SAFETY: live handles, array, options and out slot.
        let r = unsafe { gpusvc_program_manager_link_program(m, list.as_ptr(), 1, o, &mut out) };
        (r, out)
    };
    let (r, out) = link(&o);
    assert_eq!(r, INVALID, "{}", last_detail());
    assert!(out.is_null());
    // Today's size: separable, so it links.
    o.struct_size = size_of::<gpusvc_program_manager_program_options>();
    let (r, p) = link(&o);
    assert_eq!(r, OK, "{}", last_detail());
    assert_eq!(stages(p), 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX);

    // An old host's active variable: the bytes past `location` are left alone.
    #[repr(C)]
    struct OldThenCanary {
        v: gpusvc_program_manager_active_variable,
    }
    let fs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, FS);
    let vs2 = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS);
    compile(m, fs);
    compile(m, vs2);
    let q = link_program(m, &[vs2, fs], None).unwrap_or_else(|e| panic!("{e:?}"));
    // SAFETY: all-zero is a valid value.
    let mut old: OldThenCanary = unsafe { std::mem::zeroed() };
    old.v.struct_size =
        std::mem::offset_of!(gpusvc_program_manager_active_variable, location_index);
    old.v.location_index = 0x5a5a;
    old.v.reserved = 0x5a5a;
    // SAFETY: live handle; `old` holds more than `struct_size` bytes.
    let r = unsafe {
        gpusvc_program_manager_linked_program_variable(
            q,
            GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT,
            0,
            &mut old.v,
        )
    };
    assert_eq!(r, OK);
    assert_eq!(
        (old.v.location, old.v.location_index, old.v.reserved),
        (0, 0x5a5a, 0x5a5a)
    );
    assert_eq!(
        old.v.struct_size,
        std::mem::offset_of!(gpusvc_program_manager_active_variable, location_index)
    );
    free_linked(p);
    free_linked(q);
    for s in [vs, fs, vs2] {
        free_shader(s);
    }
    free_manager(m);
    free_cache(cache);
}

fn compiled_hash(s: Shader) -> gpusvc_program_cache_sha1 {
    // SAFETY: live handle and out slot.
    written(gpusvc_program_cache_sha1::default(), |o| unsafe {
        gpusvc_program_manager_shader_compiled_hash(s, o)
    })
}

#[test]
fn program_keys_from_c_match_the_managers_for_every_stage() {
    const TEST: &str = "program_keys_from_c_match_the_managers_for_every_stage";
    let cache = new_cache(cache_config(1 << 22));
    let Some(m) = gl_manager(TEST, cache) else {
        free_cache(cache);
        return;
    };
    let gs_src = "#version 450 core\nlayout(triangles) in;\nlayout(triangle_strip, max_vertices = 3) out;\n\
                  in vec4 v_color[];\nout vec4 g_color;\nvoid main() { for (int i = 0; i < 3; ++i) { \
                  g_color = v_color[i]; gl_Position = gl_in[i].gl_Position; EmitVertex(); } }\n";
    let fs_src = "#version 450 core\nin vec4 g_color;\nout vec4 o;\nvoid main() { o = g_color; }\n";
    let (vs, gs, fs, cs) = (
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, VS),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY, gs_src),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, fs_src),
        shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE, CS),
    );
    for s in [vs, gs, fs, cs] {
        assert_eq!(
            compile(m, s),
            GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED,
            "{}",
            info_log(s)
        );
    }
    let key_of = |p: Linked| {
        // SAFETY: live handle and out slot.
        written(gpusvc_program_cache_sha1::default(), |o| unsafe {
            gpusvc_program_manager_linked_program_key(p, o)
        })
    };
    let graphics = link_program(m, &[fs, gs, vs], None).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        stages(graphics),
        (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX)
            | (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY)
            | (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT)
    );
    let compute = link_program(m, &[cs], None).unwrap_or_else(|e| panic!("{e:?}"));
    let (graphics_key, compute_key) = (key_of(graphics), key_of(compute));

    let c_key = |input: &gpusvc_program_cache_program_key_input| {
        let mut out = gpusvc_program_cache_sha1 { bytes: [7; 20] };
        // SAFETY: live input and out slot.
        let r = unsafe { gpusvc_program_cache_program_key(input, &mut out) };
        (r, out)
    };
    let geometry = [gpusvc_program_cache_stage_hash {
        stage: GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY,
        hash: compiled_hash(gs),
    }];
    let mut input = gpusvc_program_cache_program_key_input {
        struct_size: size_of::<gpusvc_program_cache_program_key_input>(),
        vertex: compiled_hash(vs),
        fragment: compiled_hash(fs),
        backend_identity: c"issue16".as_ptr(),
        link: gpusvc_program_cache_link_options {
            attribute_bindings: ptr::null(),
            attribute_binding_count: 0,
            transform_feedback_varyings: ptr::null(),
            transform_feedback_varying_count: 0,
            transform_feedback_mode: GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED,
        },
        other_stages: geometry.as_ptr(),
        other_stage_count: 1,
        separable: false,
        reserved: [0; 7],
    };
    assert_eq!(c_key(&input), (OK, graphics_key));
    // Separable is part of the key.
    input.separable = true;
    assert_ne!(c_key(&input).1, graphics_key);
    input.separable = false;
    // An old host's struct (before the other stages): the key of vertex + fragment alone.
    let old = gpusvc_program_cache_program_key_input {
        struct_size: std::mem::offset_of!(gpusvc_program_cache_program_key_input, other_stages),
        ..input
    };
    let (r, old_key) = c_key(&old);
    assert_eq!(r, OK);
    assert_ne!(old_key, graphics_key);
    let plain = gpusvc_program_cache_program_key_input {
        other_stage_count: 0,
        ..input
    };
    assert_eq!(c_key(&plain), (OK, old_key));

    // Compute alone: all-zero vertex and fragment hashes.
    let compute_stage = [gpusvc_program_cache_stage_hash {
        stage: GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE,
        hash: compiled_hash(cs),
    }];
    let c = gpusvc_program_cache_program_key_input {
        vertex: gpusvc_program_cache_sha1::default(),
        fragment: gpusvc_program_cache_sha1::default(),
        other_stages: compute_stage.as_ptr(),
        ..input
    };
    assert_eq!(c_key(&c), (OK, compute_key));

    // Refusals, nothing written.
    let twice = [geometry[0], geometry[0]];
    let vertex_in_others = [gpusvc_program_cache_stage_hash {
        stage: GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
        hash: compiled_hash(vs),
    }];
    for (bad, what) in [
        (
            gpusvc_program_cache_program_key_input {
                other_stages: twice.as_ptr(),
                other_stage_count: 2,
                ..input
            },
            "twice",
        ),
        (
            gpusvc_program_cache_program_key_input {
                other_stages: vertex_in_others.as_ptr(),
                ..input
            },
            "vertex",
        ),
        (
            gpusvc_program_cache_program_key_input {
                reserved: [0, 0, 0, 0, 0, 0, 1],
                ..input
            },
            "reserved",
        ),
        (
            gpusvc_program_cache_program_key_input {
                other_stages: ptr::null(),
                ..input
            },
            "null",
        ),
    ] {
        let (r, out) = c_key(&bad);
        assert!(r == INVALID || r == NULL, "{what}: {r:?}");
        assert_eq!(out.bytes, [7; 20], "{what}: nothing written");
    }
    free_linked(graphics);
    free_linked(compute);
    for s in [vs, gs, fs, cs] {
        free_shader(s);
    }
    free_manager(m);
    free_cache(cache);
}
