//! `gpusvc_restore_ahead_*` and `gpusvc_program_manager_new_gl_restore_ahead` on the machine's
//! driver (skipped without one unless `GPUSVC_REQUIRE_GL` is set): links take the programs the
//! thread restored and get what a plain cache hit gets; a released restore-ahead hands nothing
//! over; the config's limits hold; and every export refuses NULL and misuse.

mod common;

use std::ptr;
use std::time::{Duration, Instant};

use common::*;
use gpusvc::*;

const NULL: gpusvc_result = gpusvc_result::GPUSVC_NULL_ARGUMENT;
const INVALID_HANDLE: gpusvc_result = gpusvc_result::GPUSVC_INVALID_HANDLE;

/// Distinct programs the tests link.
const PROGRAMS: usize = 12;

type Manager = *mut gpusvc_program_manager;
type Ahead = *mut gpusvc_restore_ahead;

fn new_cache() -> *mut gpusvc_program_cache {
    let config = cache_config(64 << 20);
    // SAFETY: a live config and out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_program_cache_new(&config, None, ptr::null_mut(), out)
    })
}

fn manager(ctx: *mut gpusvc_gl_context, cache: *mut gpusvc_program_cache, ahead: Ahead) -> Manager {
    // SAFETY: live handles and out slot.
    written(ptr::null_mut(), |out| unsafe {
        if ahead.is_null() {
            gpusvc_program_manager_new_gl(ctx, cache, c"ahead-test".as_ptr(), out)
        } else {
            gpusvc_program_manager_new_gl_restore_ahead(
                ctx,
                cache,
                ahead,
                c"ahead-test".as_ptr(),
                out,
            )
        }
    })
}

/// The program's (origin, active attribute count, active uniform count, a uniform's location).
type Linked = (u32, usize, usize, i32);

/// Compiles and links program `i` through `m`; what it got. The program is freed.
fn link(ctx: *mut gpusvc_gl_context, m: Manager, i: usize) -> Linked {
    let vs = glsl(
        ctx,
        &format!(
            "in vec4 a_position;\nin vec2 a_uv;\nuniform float u_scale;\nout vec2 v_uv;\n\
             void main() {{ v_uv = a_uv; gl_Position = a_position * u_scale * {}.0; }}\n",
            i + 1
        ),
    );
    let fs = glsl(
        ctx,
        "in vec2 v_uv;\nuniform vec4 u_tint;\nout vec4 o_color;\n\
         void main() { o_color = u_tint * vec4(v_uv, 0.0, 1.0); }\n",
    );
    let shader = |stage, source: &str| {
        // SAFETY: a live handle, source and out slot.
        let s = written(ptr::null_mut(), |out| unsafe {
            gpusvc_program_manager_shader_new(m, stage, source.as_ptr().cast(), source.len(), out)
        });
        let mut outcome = 99;
        // SAFETY: live handles and out slot.
        let r = unsafe { gpusvc_program_manager_compile(m, s, &mut outcome) };
        assert_eq!(r, OK);
        s
    };
    let v = shader(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs);
    let f = shader(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &fs);
    let mut p = ptr::null_mut();
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_link(m, v, f, ptr::null(), &mut p) };
    assert_eq!(r, OK, "{}", last_detail());
    let count = |kind| {
        // SAFETY: a live handle and out slot.
        written(0usize, |out| unsafe {
            gpusvc_program_manager_linked_program_variable_count(p, kind, out)
        })
    };
    let location = {
        // SAFETY: all-zero is a valid value; struct_size set below.
        let mut v: gpusvc_program_manager_active_variable = unsafe { std::mem::zeroed() };
        v.struct_size = size_of_val(&v);
        // SAFETY: a live handle and a sized output.
        let r = unsafe {
            gpusvc_program_manager_linked_program_variable(
                p,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
                0,
                &mut v,
            )
        };
        assert_eq!(r, OK, "{}", last_detail());
        v.location
    };
    let got = (
        // SAFETY: a live handle and out slot.
        written(99, |out| unsafe {
            gpusvc_program_manager_linked_program_origin(p, out)
        }),
        count(GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE),
        count(GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM),
        location,
    );
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_program_manager_linked_program_free(p), OK);
        assert_eq!(gpusvc_program_manager_shader_free(v), OK);
        assert_eq!(gpusvc_program_manager_shader_free(f), OK);
    }
    got
}

fn start(
    ctx: *mut gpusvc_gl_context,
    cache: *mut gpusvc_program_cache,
    config: Option<&gpusvc_restore_ahead_config>,
) -> Ahead {
    let config = config.map_or(ptr::null(), |c| c as *const _);
    // SAFETY: live handles, config and out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_restore_ahead_start(ctx, cache, config, out)
    })
}

fn stats(ahead: Ahead) -> gpusvc_restore_ahead_stats_snapshot {
    let mut s = gpusvc_restore_ahead_stats_snapshot::default();
    // SAFETY: a live handle and sized output.
    assert_eq!(unsafe { gpusvc_restore_ahead_stats(ahead, &mut s) }, OK);
    s
}

fn wait_done(ahead: Ahead) {
    // SAFETY: a live handle and out slot.
    let done = written(false, |out| unsafe {
        gpusvc_restore_ahead_wait_until_done(ahead, 20_000, out)
    });
    assert!(done, "{:?}", stats(ahead));
}

/// A context, a cache holding `PROGRAMS` programs linked on the driver, and what plain cache
/// hits of them give; None (skipped) without a driver.
fn populated(
    test: &str,
) -> Option<(
    *mut gpusvc_gl_context,
    *mut gpusvc_program_cache,
    Vec<Linked>,
)> {
    let ctx = open_gl_context(test, 0)?;
    let cache = new_cache();
    let m = manager(ctx, cache, ptr::null_mut());
    for i in 0..PROGRAMS {
        let cold = link(ctx, m, i);
        assert_eq!(cold.0, GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    }
    let hits: Vec<Linked> = (0..PROGRAMS).map(|i| link(ctx, m, i)).collect();
    assert!(
        hits.iter()
            .all(|h| h.0 == GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT),
        "{hits:?}"
    );
    // SAFETY: a handle value.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    Some((ctx, cache, hits))
}

fn free_all(ctx: *mut gpusvc_gl_context, cache: *mut gpusvc_program_cache) {
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_program_cache_free(cache), OK);
        gpusvc_gl_context_free(ctx);
    }
}

#[test]
fn links_take_the_programs_restored_ahead_and_get_what_a_plain_hit_gets() {
    let test = "links_take_the_programs_restored_ahead_and_get_what_a_plain_hit_gets";
    let Some((ctx, cache, plain)) = populated(test) else {
        return;
    };
    let ahead = start(ctx, cache, None);
    wait_done(ahead);
    let s = stats(ahead);
    assert!(s.done && !s.failed, "{s:?}");
    assert_eq!(s.restored, PROGRAMS as u64, "{s:?}");
    assert_eq!(s.taken, 0, "{s:?}");
    let m = manager(ctx, cache, ahead);
    let taken: Vec<Linked> = (0..PROGRAMS).map(|i| link(ctx, m, i)).collect();
    assert_eq!(
        taken, plain,
        "a hit through the restore-ahead differs from a plain one"
    );
    let s = stats(ahead);
    assert_eq!(s.taken, PROGRAMS as u64, "{s:?}");
    assert_eq!((s.refused, s.stale, s.over_limits), (0, 0, 0), "{s:?}");
    // Stats from another thread: the handle is any-thread.
    let addr = ahead as usize;
    let from_other = std::thread::spawn(move || {
        let mut s = gpusvc_restore_ahead_stats_snapshot::default();
        // SAFETY: a live handle and sized output.
        let r = unsafe { gpusvc_restore_ahead_stats(addr as *const gpusvc_restore_ahead, &mut s) };
        (r, s.taken)
    })
    .join()
    .unwrap();
    assert_eq!(from_other, (OK, PROGRAMS as u64));
    // Freed first, while the manager still holds it: links go on, restoring themselves.
    // SAFETY: a handle value.
    assert_eq!(unsafe { gpusvc_restore_ahead_free(ahead) }, OK);
    assert_eq!(link(ctx, m, 0), plain[0]);
    // SAFETY: handle values.
    unsafe {
        assert_eq!(
            gpusvc_restore_ahead_stats(ahead, &mut gpusvc_restore_ahead_stats_snapshot::default()),
            INVALID_HANDLE
        );
        assert_eq!(gpusvc_restore_ahead_free(ahead), INVALID_HANDLE);
        assert_eq!(gpusvc_program_manager_free(m), OK);
    }
    free_all(ctx, cache);
}

#[test]
fn a_released_restore_ahead_hands_nothing_over_and_deletes_what_it_restored() {
    let test = "a_released_restore_ahead_hands_nothing_over_and_deletes_what_it_restored";
    let Some((ctx, cache, plain)) = populated(test) else {
        return;
    };
    let ahead = start(ctx, cache, None);
    wait_done(ahead);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_restore_ahead_release_unclaimed(ahead) }, OK);
    let m = manager(ctx, cache, ahead);
    let linked: Vec<Linked> = (0..PROGRAMS).map(|i| link(ctx, m, i)).collect();
    assert_eq!(linked, plain);
    let deadline = Instant::now() + Duration::from_secs(20);
    while stats(ahead).deleted_unclaimed < PROGRAMS as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = stats(ahead);
    assert_eq!(
        (s.taken, s.deleted_unclaimed),
        (0, PROGRAMS as u64),
        "{s:?}"
    );
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
        assert_eq!(gpusvc_restore_ahead_free(ahead), OK);
    }
    free_all(ctx, cache);
}

#[test]
fn the_config_limits_how_many_programs_are_restored_ahead() {
    let test = "the_config_limits_how_many_programs_are_restored_ahead";
    let Some((ctx, cache, plain)) = populated(test) else {
        return;
    };
    let mut config = gpusvc_restore_ahead_config {
        struct_size: size_of::<gpusvc_restore_ahead_config>(),
        max_programs: 0,
        max_bytes: 0,
        load_timeout_ms: 0,
    };
    // SAFETY: a live sized struct.
    let r = unsafe { gpusvc_restore_ahead_config_defaults(&mut config) };
    assert_eq!(r, OK);
    assert_eq!(
        (
            config.max_programs,
            config.max_bytes,
            config.load_timeout_ms
        ),
        (1024, 64 << 20, 10_000)
    );
    config.max_programs = 3;
    let ahead = start(ctx, cache, Some(&config));
    wait_done(ahead);
    let s = stats(ahead);
    assert_eq!(
        (s.restored, s.over_limits),
        (3, PROGRAMS as u64 - 3),
        "{s:?}"
    );
    let m = manager(ctx, cache, ahead);
    let linked: Vec<Linked> = (0..PROGRAMS).map(|i| link(ctx, m, i)).collect();
    assert_eq!(linked, plain);
    assert_eq!(stats(ahead).taken, 3);
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
        assert_eq!(gpusvc_restore_ahead_free(ahead), OK);
    }
    free_all(ctx, cache);
}

#[test]
fn every_restore_ahead_export_refuses_null_and_misuse() {
    // Without a driver: the handle-free refusals.
    // SAFETY: NULL and dangling-free arguments only; nothing is dereferenced.
    unsafe {
        assert_eq!(gpusvc_restore_ahead_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_restore_ahead_config_defaults(ptr::null_mut()), NULL);
        assert_eq!(
            gpusvc_restore_ahead_stats(
                ptr::null(),
                &mut gpusvc_restore_ahead_stats_snapshot::default()
            ),
            NULL
        );
        assert_eq!(gpusvc_restore_ahead_release_unclaimed(ptr::null()), NULL);
        let mut done = true;
        assert_eq!(
            gpusvc_restore_ahead_wait_until_done(ptr::null(), 0, &mut done),
            NULL
        );
        assert!(done, "written on failure");
        let mut small = gpusvc_restore_ahead_config {
            struct_size: 4,
            max_programs: 0,
            max_bytes: 0,
            load_timeout_ms: 0,
        };
        assert_eq!(
            gpusvc_restore_ahead_config_defaults(&mut small),
            gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE
        );
    }
    let Some(ctx) = open_gl_context("every_restore_ahead_export_refuses_null_and_misuse", 0) else {
        return;
    };
    let cache = new_cache();
    let mut out: Ahead = ptr::null_mut();
    // SAFETY: live or NULL handles and out slots.
    unsafe {
        assert_eq!(
            gpusvc_restore_ahead_start(ptr::null(), cache, ptr::null(), &mut out),
            NULL
        );
        assert_eq!(
            gpusvc_restore_ahead_start(ctx, ptr::null(), ptr::null(), &mut out),
            NULL
        );
        assert_eq!(
            gpusvc_restore_ahead_start(ctx, cache, ptr::null(), ptr::null_mut()),
            NULL
        );
        // A cache handle where a context belongs, and the other way round.
        assert_eq!(
            gpusvc_restore_ahead_start(cache.cast(), cache, ptr::null(), &mut out),
            INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_restore_ahead_start(ctx, ctx.cast(), ptr::null(), &mut out),
            INVALID_HANDLE
        );
        let small = gpusvc_restore_ahead_config {
            struct_size: 4,
            max_programs: 1,
            max_bytes: 1,
            load_timeout_ms: 1,
        };
        assert_eq!(
            gpusvc_restore_ahead_start(ctx, cache, &small, &mut out),
            gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE
        );
    }
    assert!(out.is_null(), "nothing written on failure");
    // From another thread than the context's.
    let (ctx_addr, cache_addr) = (ctx as usize, cache as usize);
    let other = std::thread::spawn(move || {
        let mut out: Ahead = ptr::null_mut();
        // SAFETY: handle values (the registry checks them); a live out slot.
        let r = unsafe {
            gpusvc_restore_ahead_start(
                ctx_addr as *const gpusvc_gl_context,
                cache_addr as *const gpusvc_program_cache,
                ptr::null(),
                &mut out,
            )
        };
        (r, out.is_null())
    })
    .join()
    .unwrap();
    assert_eq!(other, (gpusvc_result::GPUSVC_WRONG_THREAD, true));
    let ahead = start(ctx, cache, None);
    // SAFETY: live or NULL handles and out slots.
    unsafe {
        assert_eq!(gpusvc_restore_ahead_stats(ahead, ptr::null_mut()), NULL);
        assert_eq!(
            gpusvc_restore_ahead_wait_until_done(ahead, 0, ptr::null_mut()),
            NULL
        );
        // The wrong kind of handle.
        assert_eq!(
            gpusvc_restore_ahead_stats(
                cache.cast(),
                &mut gpusvc_restore_ahead_stats_snapshot::default()
            ),
            INVALID_HANDLE
        );
        let mut m = ptr::null_mut();
        assert_eq!(
            gpusvc_program_manager_new_gl_restore_ahead(
                ctx,
                cache,
                ptr::null(),
                c"x".as_ptr(),
                &mut m
            ),
            NULL
        );
        assert_eq!(
            gpusvc_program_manager_new_gl_restore_ahead(
                ctx,
                cache,
                cache.cast(),
                c"x".as_ptr(),
                &mut m
            ),
            INVALID_HANDLE
        );
        assert!(m.is_null(), "nothing written on failure");
    }
    // Over another cache (whose clears it would not see), or another context's share group
    // (whose links could adopt nothing it restored): refused.
    let other_cache = new_cache();
    let other_ctx = open_gl_context("every_restore_ahead_export_refuses_null_and_misuse", 0)
        .expect("a second context where the first opened");
    let mut m = ptr::null_mut();
    // SAFETY: live handles and out slot.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_new_gl_restore_ahead(
                ctx,
                other_cache,
                ahead,
                c"x".as_ptr(),
                &mut m
            ),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(last_detail().contains("another cache"), "{}", last_detail());
        assert_eq!(
            gpusvc_program_manager_new_gl_restore_ahead(
                other_ctx,
                cache,
                ahead,
                c"x".as_ptr(),
                &mut m
            ),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(last_detail().contains("share group"), "{}", last_detail());
        assert!(m.is_null(), "nothing written on failure");
        assert_eq!(gpusvc_restore_ahead_free(ahead), OK);
    }
    free_all(other_ctx, other_cache);
    free_all(ctx, cache);
}
