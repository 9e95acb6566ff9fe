//! The host-GL backend's issue-16 callbacks (`link_stages`, the parallel compile and link
//! groups) through the C ABI, on a small fake host that records what it is asked: which
//! callback links which program kind, that a started link is polled until the host says it
//! is done, that a failed finish reaches C as `GPUSVC_PROGRAM_CACHE_LINK_FAILED` with the
//! host's log (and is then answered from the cache without the host), and that the parallel
//! callbacks come in groups of three.

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::ptr;

use common::*;
use gpusvc::*;

#[derive(Default)]
struct Host {
    next_id: u64,
    stages: HashMap<u64, u32>,
    /// (callback, stages linked, separable)
    links: Vec<(&'static str, Vec<u32>, bool)>,
    /// Polls left before a started program or shader is done.
    polls_left: HashMap<u64, u32>,
    /// Programs whose finish fails.
    failing: Vec<u64>,
    started_compiles: u32,
    deleted: Vec<u64>,
    interface_results: Vec<gpusvc_result>,
    kept_sink: Option<usize>,
    /// A linked program the next `compile` callback frees (re-entering the library from
    /// inside the manager's own call), and what that free returned.
    free_in_compile: Option<usize>,
    freed_in_compile: Option<gpusvc_result>,
}

fn host(user_data: *mut c_void) -> &'static RefCell<Host> {
    // SAFETY: the tests pass a `RefCell<Host>` that outlives every manager using it.
    unsafe { &*(user_data as *const RefCell<Host>) }
}

fn new_id(h: &mut Host) -> u64 {
    h.next_id += 1;
    h.next_id
}

unsafe extern "C" fn compile(
    user_data: *mut c_void,
    stage: u32,
    _source: *const c_char,
    _len: usize,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let mut h = host(user_data).borrow_mut();
    let id = new_id(&mut h);
    h.stages.insert(id, stage);
    let free = h.free_in_compile.take();
    drop(h);
    if let Some(p) = free {
        // SAFETY: a live linked-program handle the test handed over (freed once, here); the
        // free calls `delete`, so the host state is not borrowed across it.
        let r = unsafe {
            gpusvc_program_manager_linked_program_free(
                p as *mut gpusvc_program_manager_linked_program,
            )
        };
        host(user_data).borrow_mut().freed_in_compile = Some(r);
    }
    // SAFETY: a live out slot from the library.
    unsafe { *out = id };
    true
}

unsafe extern "C" fn start_compile(
    user_data: *mut c_void,
    stage: u32,
    source: *const c_char,
    len: usize,
    out: *mut u64,
    log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    host(user_data).borrow_mut().started_compiles += 1;
    // SAFETY: forwarded.
    let ok = unsafe { compile(user_data, stage, source, len, out, log) };
    // SAFETY: written just above.
    let id = unsafe { *out };
    host(user_data).borrow_mut().polls_left.insert(id, 2);
    ok
}

unsafe extern "C" fn done(user_data: *mut c_void, id: u64) -> bool {
    let mut h = host(user_data).borrow_mut();
    let left = h.polls_left.entry(id).or_insert(0);
    if *left == 0 {
        return true;
    }
    *left -= 1;
    false
}

unsafe extern "C" fn finish(
    user_data: *mut c_void,
    id: u64,
    log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    if host(user_data).borrow().failing.contains(&id) {
        let msg = "error: the host says no";
        // SAFETY: the sink of this callback.
        unsafe { gpusvc_program_manager_host_sink_write_text(log, msg.as_ptr().cast(), msg.len()) };
        return false;
    }
    true
}

unsafe extern "C" fn link(
    user_data: *mut c_void,
    vs: u64,
    fs: u64,
    _options: *const gpusvc_program_cache_link_options,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let mut h = host(user_data).borrow_mut();
    let stages = vec![h.stages[&vs], h.stages[&fs]];
    h.links.push(("link", stages, false));
    let id = new_id(&mut h);
    // SAFETY: a live out slot.
    unsafe { *out = id };
    true
}

unsafe fn record_link(
    callback: &'static str,
    user_data: *mut c_void,
    shaders: *const u64,
    stages: *const u32,
    count: usize,
    separable: bool,
    out: *mut u64,
) -> u64 {
    // SAFETY: the library passes `count` ids and stages.
    let (ids, st) = unsafe {
        (
            std::slice::from_raw_parts(shaders, count),
            std::slice::from_raw_parts(stages, count),
        )
    };
    let mut h = host(user_data).borrow_mut();
    for (id, s) in ids.iter().zip(st) {
        assert_eq!(h.stages[id], *s, "each shader comes with its own stage");
    }
    h.links.push((callback, st.to_vec(), separable));
    let id = new_id(&mut h);
    // SAFETY: a live out slot.
    unsafe { *out = id };
    id
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn link_stages(
    user_data: *mut c_void,
    shaders: *const u64,
    stages: *const u32,
    count: usize,
    _options: *const gpusvc_program_cache_link_options,
    separable: bool,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    // SAFETY: forwarded from the library's call.
    unsafe {
        record_link(
            "link_stages",
            user_data,
            shaders,
            stages,
            count,
            separable,
            out,
        )
    };
    true
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn start_link(
    user_data: *mut c_void,
    shaders: *const u64,
    stages: *const u32,
    count: usize,
    _options: *const gpusvc_program_cache_link_options,
    separable: bool,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    // SAFETY: forwarded from the library's call.
    let id = unsafe {
        record_link(
            "start_link",
            user_data,
            shaders,
            stages,
            count,
            separable,
            out,
        )
    };
    let mut h = host(user_data).borrow_mut();
    h.polls_left.insert(id, 3);
    // A program of a geometry stage fails at its finish.
    if h.links
        .last()
        .unwrap()
        .1
        .contains(&GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY)
    {
        h.failing.push(id);
    }
    true
}

unsafe extern "C" fn binary(
    _: *mut c_void,
    program: u64,
    format: *mut u32,
    out: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let bytes = program.to_le_bytes();
    // SAFETY: live out slot and sink.
    unsafe {
        *format = 7;
        gpusvc_program_manager_host_sink_write_bytes(out, bytes.as_ptr(), bytes.len());
    }
    true
}

unsafe extern "C" fn load(
    user_data: *mut c_void,
    _: u32,
    _: *const u8,
    _: usize,
    out: *mut u64,
    _: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let id = new_id(&mut host(user_data).borrow_mut());
    // SAFETY: a live out slot.
    unsafe { *out = id };
    true
}

unsafe extern "C" fn no_variables(
    _: *mut c_void,
    _: u64,
    _: *mut gpusvc_program_manager_host_sink,
) {
}

unsafe extern "C" fn delete(user_data: *mut c_void, id: u64) {
    host(user_data).borrow_mut().deleted.push(id);
}

fn gl(state: &RefCell<Host>, parallel: bool) -> gpusvc_program_manager_host_gl {
    gpusvc_program_manager_host_gl {
        struct_size: size_of::<gpusvc_program_manager_host_gl>(),
        user_data: state as *const RefCell<Host> as *mut c_void,
        compile: Some(compile),
        link: Some(link),
        program_binary: Some(binary),
        load_binary: Some(load),
        active_attributes: Some(no_variables),
        active_uniforms: Some(no_variables),
        delete_shader: Some(delete),
        delete_program: Some(delete),
        link_stages: Some(link_stages),
        start_compile: parallel.then_some(start_compile as _),
        compile_done: parallel.then_some(done as _),
        finish_compile: parallel.then_some(finish as _),
        start_link: parallel.then_some(start_link as _),
        link_done: parallel.then_some(done as _),
        finish_link: parallel.then_some(finish as _),
        program_interface: Some(interface),
    }
}

/// Reports a fixed interface, checking the sink's refusals on the way; records the results.
unsafe extern "C" fn interface(
    user_data: *mut c_void,
    _program: u64,
    out: *mut gpusvc_program_manager_host_sink,
) {
    // SAFETY: the sink of this callback and live structs throughout.
    let results = unsafe {
        let mut v: gpusvc_program_manager_active_variable = std::mem::zeroed();
        v.struct_size = size_of_val(&v);
        v.name = c"o_color".as_ptr();
        v.gl_type = 0x8B52;
        v.size = 1;
        v.has_location = true;
        v.location = 0;
        v.location_index = 1;
        let mut b: gpusvc_program_manager_block = std::mem::zeroed();
        b.struct_size = size_of_val(&b);
        b.name = c"Data".as_ptr();
        b.binding = 3;
        b.data_size = 64;
        b.referenced_by = 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE;
        let mut m: gpusvc_program_manager_block_member = std::mem::zeroed();
        m.struct_size = size_of_val(&m);
        m.name = c"values[0]".as_ptr();
        m.gl_type = 0x1405;
        m.array_size = 0;
        m.array_stride = 4;
        let storage = GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE;
        let bad_mask = gpusvc_program_manager_block {
            referenced_by: 1 << 9,
            ..b
        };
        vec![
            gpusvc_program_manager_host_sink_push_block_member(out, storage, &m),
            gpusvc_program_manager_host_sink_push_block(out, storage, &bad_mask),
            gpusvc_program_manager_host_sink_push_block(out, 7, &b),
            gpusvc_program_manager_host_sink_push_output(out, &v),
            gpusvc_program_manager_host_sink_push_varying(out, &v),
            gpusvc_program_manager_host_sink_push_block(out, storage, &b),
            gpusvc_program_manager_host_sink_push_block_member(out, storage, &m),
            gpusvc_program_manager_host_sink_set_uniform_static_use(out, c"u_x".as_ptr(), 1 << 2),
            gpusvc_program_manager_host_sink_set_compute_work_group_size(out, 4, 4, 1),
        ]
    };
    let mut h = host(user_data).borrow_mut();
    h.interface_results = results;
    h.kept_sink = Some(out as usize);
}

fn manager(
    g: &gpusvc_program_manager_host_gl,
    cache: *mut gpusvc_program_cache,
) -> *mut gpusvc_program_manager {
    // SAFETY: live struct, cache and out slot; the host state outlives the manager.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_manager_new_host(g, cache, c"host".as_ptr(), out)
    })
}

fn shader(
    m: *mut gpusvc_program_manager,
    stage: u32,
    source: &str,
) -> *mut gpusvc_program_manager_shader {
    // SAFETY: live handle, source and out slot.
    let s = written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_manager_shader_new(m, stage, source.as_ptr().cast(), source.len(), out)
    });
    // SAFETY: live handles and out slot.
    written(0, |out| unsafe {
        gpusvc_program_manager_start_compile(m, s, out)
    });
    s
}

fn new_cache() -> *mut gpusvc_program_cache {
    let c = cache_config(1 << 20);
    // SAFETY: a live config and out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_cache_new(&c, None, ptr::null_mut(), out)
    })
}

/// Frees `shaders`, then the manager, then the cache, each free `GPUSVC_OK`.
fn free_all(
    shaders: &[*mut gpusvc_program_manager_shader],
    m: *mut gpusvc_program_manager,
    cache: *mut gpusvc_program_cache,
) {
    for &s in shaders {
        // SAFETY: live handles (the caller's, freed once).
        assert_eq!(unsafe { gpusvc_program_manager_shader_free(s) }, OK);
    }
    // SAFETY: live handles (the caller's, freed once).
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
        assert_eq!(gpusvc_program_cache_free(cache), OK);
    }
}

fn link_program(
    m: *mut gpusvc_program_manager,
    shaders: &[*mut gpusvc_program_manager_shader],
    separable: bool,
) -> gpusvc_result {
    let list: Vec<_> = shaders.iter().map(|s| s.cast_const()).collect();
    // SAFETY: all-zero is a valid options struct (NULL arrays with 0 counts).
    let mut o: gpusvc_program_manager_program_options = unsafe { std::mem::zeroed() };
    o.struct_size = size_of_val(&o);
    o.separable = separable;
    let mut out = ptr::null_mut();
    // SAFETY: live handles, array, options and out slot.
    let r =
        unsafe { gpusvc_program_manager_link_program(m, list.as_ptr(), list.len(), &o, &mut out) };
    if r == OK {
        // SAFETY: a live handle.
        let r = unsafe { gpusvc_program_manager_linked_program_free(out) };
        assert_eq!(r, OK);
    }
    r
}

const V: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX;
const F: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT;
const C: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE;
const G: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY;

#[test]
fn link_stages_links_every_program_kind_but_vertex_plus_fragment() {
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    let m = manager(&gl(&state, false), cache);
    let (vs, fs, cs, gs) = (
        shader(m, V, "v"),
        shader(m, F, "f"),
        shader(m, C, "c"),
        shader(m, G, "g"),
    );
    assert_eq!(link_program(m, &[fs, vs], false), OK, "{}", last_detail());
    assert_eq!(link_program(m, &[cs], false), OK, "{}", last_detail());
    assert_eq!(
        link_program(m, &[gs, fs, vs], false),
        OK,
        "{}",
        last_detail()
    );
    assert_eq!(link_program(m, &[vs], true), OK, "{}", last_detail());
    assert_eq!(link_program(m, &[vs, fs], true), OK, "{}", last_detail());
    assert_eq!(
        state.borrow().links,
        [
            ("link", vec![V, F], false),
            ("link_stages", vec![C], false),
            ("link_stages", vec![V, G, F], false),
            ("link_stages", vec![V], true),
            ("link_stages", vec![V, F], true),
        ]
    );
    assert_eq!(
        state.borrow().started_compiles,
        0,
        "no parallel callbacks: synchronous"
    );
    free_all(&[vs, fs, cs, gs], m, cache);

    // Without link_stages, only vertex + fragment links; the rest fails with a log saying so.
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    let mut g = gl(&state, false);
    g.link_stages = None;
    let m = manager(&g, cache);
    let cs = shader(m, C, "c");
    assert_eq!(
        link_program(m, &[cs], false),
        gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED
    );
    assert!(
        last_detail().contains("no link_stages callback"),
        "{}",
        last_detail()
    );
    // Not the host driver's verdict on the program: no failure record is cached.
    // SAFETY: a live cache and a sized out struct.
    let stats = unsafe {
        let mut stats: gpusvc_program_cache_stats_snapshot = std::mem::zeroed();
        stats.struct_size = size_of::<gpusvc_program_cache_stats_snapshot>();
        assert_eq!(gpusvc_program_cache_stats(cache, &mut stats), OK);
        stats
    };
    assert_eq!(
        stats.entries, 0,
        "a missing callback is not cached as a failed link"
    );
    free_all(&[cs], m, cache);
}

#[test]
fn parallel_callbacks_are_polled_and_a_failed_finish_is_a_cached_link_failure() {
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    let m = manager(&gl(&state, true), cache);
    let (vs, fs, gs) = (shader(m, V, "v"), shader(m, F, "f"), shader(m, G, "g"));
    assert_eq!(state.borrow().started_compiles, 3);
    let mut ready = true;
    // SAFETY: live handles and out slot.
    unsafe {
        assert_eq!(gpusvc_program_manager_compile_ready(m, vs, &mut ready), OK);
    }
    assert!(!ready, "the host said not yet");
    let start = |shaders: &[*mut gpusvc_program_manager_shader]| {
        let list: Vec<_> = shaders.iter().map(|s| s.cast_const()).collect();
        let mut p = ptr::null_mut();
        // SAFETY: live handles, array and out slot.
        let r = unsafe {
            gpusvc_program_manager_start_link(m, list.as_ptr(), list.len(), ptr::null(), &mut p)
        };
        (r, p)
    };
    let (r, good) = start(&[vs, fs]);
    assert_eq!(r, OK, "{}", last_detail());
    let (r, bad) = start(&[vs, gs, fs]);
    assert_eq!(r, OK, "{}", last_detail());
    let mut polls = 0;
    loop {
        let mut a = false;
        let mut b = false;
        // SAFETY: live handles and out slots.
        unsafe {
            assert_eq!(gpusvc_program_manager_link_ready(m, good, &mut a), OK);
            assert_eq!(gpusvc_program_manager_link_ready(m, bad, &mut b), OK);
        }
        if a && b {
            break;
        }
        polls += 1;
    }
    assert_eq!(polls, 3, "done after the host's three not-yet answers");
    let mut out = ptr::null_mut();
    // SAFETY: live handles and out slot.
    unsafe {
        assert_eq!(gpusvc_program_manager_finish_link(m, good, &mut out), OK);
        assert_eq!(gpusvc_program_manager_linked_program_free(out), OK);
        out = ptr::null_mut();
        assert_eq!(
            gpusvc_program_manager_finish_link(m, bad, &mut out),
            gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED
        );
    }
    assert!(out.is_null());
    let log = last_detail();
    assert!(log.contains("error: the host says no"), "{log}");
    let links_before = state.borrow().links.len();
    // The same program again: refused from the cache with the same log, the host not asked.
    let (r, p) = start(&[vs, gs, fs]);
    assert_eq!(r, gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED);
    assert!(p.is_null());
    assert_eq!(last_detail(), log);
    assert_eq!(state.borrow().links.len(), links_before);
    assert_eq!(state.borrow().links[0].0, "start_link");
    free_all(&[vs, fs, gs], m, cache);
}

#[test]
fn parallel_callbacks_come_in_groups_of_three() {
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    for which in 0..6 {
        let mut g = gl(&state, true);
        match which {
            0 => g.start_compile = None,
            1 => g.compile_done = None,
            2 => g.finish_compile = None,
            3 => g.start_link = None,
            4 => g.link_done = None,
            _ => g.finish_link = None,
        }
        let mut m = ptr::null_mut();
        // SAFETY: live struct, cache and out slot.
        let r = unsafe { gpusvc_program_manager_new_host(&g, cache, c"x".as_ptr(), &mut m) };
        assert_eq!(r, gpusvc_result::GPUSVC_INVALID_ARGUMENT, "case {which}");
        assert!(m.is_null());
        assert!(
            last_detail().contains("together or not at all"),
            "{}",
            last_detail()
        );
    }
    // An old host's struct (up to delete_program): no new callbacks, synchronous.
    let mut g = gl(&state, true);
    g.struct_size = std::mem::offset_of!(gpusvc_program_manager_host_gl, link_stages);
    let m = manager(&g, cache);
    let s = shader(m, V, "v");
    assert_eq!(state.borrow().started_compiles, 0);
    free_all(&[s], m, cache);
}

#[test]
fn a_hosts_program_interface_reaches_the_linked_program_and_survives_the_cache() {
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    let g = gl(&state, false);
    let read = |m: *mut gpusvc_program_manager| {
        let cs = shader(m, C, "c");
        let list = [cs.cast_const()];
        let mut p = ptr::null_mut();
        // SAFETY: live handles, array and out slot.
        let r = unsafe {
            gpusvc_program_manager_link_program(m, list.as_ptr(), 1, ptr::null(), &mut p)
        };
        assert_eq!(r, OK, "{}", last_detail());
        let mut origin = 9;
        let mut size = [0u32; 3];
        let mut n = 0usize;
        // SAFETY: all-zero is a valid value.
        let mut b: gpusvc_program_manager_block = unsafe { std::mem::zeroed() };
        b.struct_size = size_of_val(&b);
        // SAFETY: live handle and out slots.
        let (outputs, varyings) = unsafe {
            assert_eq!(
                gpusvc_program_manager_linked_program_origin(p, &mut origin),
                OK
            );
            assert_eq!(
                gpusvc_program_manager_linked_program_compute_work_group_size(p, size.as_mut_ptr()),
                OK
            );
            assert_eq!(
                gpusvc_program_manager_linked_program_block(
                    p,
                    GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE,
                    0,
                    &mut b
                ),
                OK
            );
            let count = |kind| {
                let mut n = 0;
                assert_eq!(
                    gpusvc_program_manager_linked_program_variable_count(p, kind, &mut n),
                    OK
                );
                n
            };
            assert_eq!(
                gpusvc_program_manager_linked_program_block_count(
                    p,
                    GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM,
                    &mut n
                ),
                OK
            );
            (
                count(GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT),
                count(GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING),
            )
        };
        // SAFETY: the name belongs to the live handle.
        let name = unsafe { std::ffi::CStr::from_ptr(b.name) }.to_owned();
        let summary = (
            size,
            name,
            b.binding,
            b.data_size,
            b.referenced_by,
            b.member_count,
            n,
            outputs,
            varyings,
        );
        // SAFETY: live handles.
        unsafe {
            assert_eq!(gpusvc_program_manager_linked_program_free(p), OK);
            assert_eq!(gpusvc_program_manager_shader_free(cs), OK);
        }
        (origin, summary)
    };
    let m = manager(&g, cache);
    let (origin, cold) = read(m);
    assert_eq!(origin, GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    assert_eq!(
        cold,
        ([4, 4, 1], c"Data".to_owned(), 3, 64, 1 << C, 1, 0, 1, 1)
    );
    let invalid = gpusvc_result::GPUSVC_INVALID_ARGUMENT;
    assert_eq!(
        state.borrow().interface_results,
        [invalid, invalid, invalid, OK, OK, OK, OK, OK, OK],
        "member before its block, a mask bit of no stage, an unknown block kind"
    );
    // The sink is dead once the callback returned.
    let kept = state.borrow().kept_sink.unwrap() as *mut gpusvc_program_manager_host_sink;
    // SAFETY: a stale handle value, which the library must refuse.
    let r = unsafe { gpusvc_program_manager_host_sink_set_compute_work_group_size(kept, 1, 1, 1) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_HANDLE);
    // A second manager restores it from the cache; the host reflects the loaded program.
    let m2 = manager(&g, cache);
    let (origin, warm) = read(m2);
    assert_eq!(origin, GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    assert_eq!(warm, cold);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
        assert_eq!(gpusvc_program_manager_free(m2), OK);
        assert_eq!(gpusvc_program_cache_free(cache), OK);
    }
}

/// A linked program whose binary read waits, freed from inside a host callback of its own
/// manager's call (the manager is busy then): its read is forgotten by the manager's next
/// call, not kept until the manager is freed, and its binary is never read.
#[test]
fn a_program_freed_inside_its_managers_callback_gives_its_deferred_read_back() {
    let state = RefCell::new(Host::default());
    let cache = new_cache();
    let m = manager(&gl(&state, false), cache);
    // SAFETY: a live handle.
    let r = unsafe { gpusvc_program_manager_set_defer_binary_reads(m, true) };
    assert_eq!(r, OK);
    let (vs, fs, vs2) = (shader(m, V, "v"), shader(m, F, "f"), shader(m, V, "v2"));
    let link = |shaders: &[*mut gpusvc_program_manager_shader]| {
        let list: Vec<_> = shaders.iter().map(|s| s.cast_const()).collect();
        // SAFETY: all-zero is a valid options struct (NULL arrays with 0 counts).
        let mut o: gpusvc_program_manager_program_options = unsafe { std::mem::zeroed() };
        o.struct_size = size_of_val(&o);
        // SAFETY: live handles, array, options and out slot.
        written(ptr::null_mut(), |out| unsafe {
            gpusvc_program_manager_link_program(m, list.as_ptr(), list.len(), &o, out)
        })
    };
    let waiting = || {
        // SAFETY: a live handle and out slots.
        unsafe {
            (
                written(9, |o| gpusvc_program_manager_deferred_binaries(m, o)),
                written(9, |o| gpusvc_program_manager_deferred_bytes(m, o)),
            )
        }
    };
    let freed = link(&[vs, fs]);
    let kept = link(&[vs2, fs]);
    let before = waiting();
    state.borrow_mut().free_in_compile = Some(freed as usize);
    let s = shader(m, V, "a source never compiled: the driver compiles it");
    let after = waiting();
    // SAFETY: live handles and out slot.
    let saved = written(false, |o| unsafe {
        gpusvc_program_manager_save_deferred_binary(m, kept, o)
    });
    let at_end = waiting();
    // SAFETY: a live handle, freed once.
    let r = unsafe { gpusvc_program_manager_linked_program_free(kept) };
    assert_eq!(r, OK);
    // SAFETY: a live cache and a sized out struct.
    let entries = unsafe {
        let mut stats: gpusvc_program_cache_stats_snapshot = std::mem::zeroed();
        stats.struct_size = size_of::<gpusvc_program_cache_stats_snapshot>();
        assert_eq!(gpusvc_program_cache_stats(cache, &mut stats), OK);
        stats.entries
    };
    // Everything is freed before the checks: a failed check must not leave the manager (and
    // its callbacks into `state`) alive past this frame.
    free_all(&[vs, fs, vs2, s], m, cache);
    assert_eq!(
        state.borrow().freed_in_compile,
        Some(OK),
        "freed inside the call"
    );
    assert_eq!(before.0, 2);
    assert_eq!(after.0, 1, "the freed program's read is forgotten");
    assert!(after.1 < before.1 && after.1 > 0, "{after:?} of {before:?}");
    assert!(saved);
    assert_eq!(at_end, (0, 0));
    assert_eq!(
        entries, 1,
        "only the kept program's binary was read and saved"
    );
}
