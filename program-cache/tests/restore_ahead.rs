//! `RestoreAhead` on the real driver: a thread with a context in the host's share group
//! restores the cached programs before the host links them; the host's cache hits take them,
//! each the program of its own key, rendering as one linked from source; what nobody takes is
//! deleted; keys it has not reached, or that it was told to leave, are restored by the host.

use std::sync::Arc;
use std::time::Duration;

use headless_gl::glow::{self, HasContext};
use headless_gl::{DrawCall, GlContext, OffscreenTarget, Program, UniformValue, VertexAttribute};
use program_cache::{
    CacheConfig, GlBackend, LinkOrigin, LinkedProgram, ProgramCache, ProgramManager,
    ProgramOptions, RestoreAhead, RestoreAheadConfig, Shader, ShaderStage,
};
use test_support::gl::context_or_skip;

const PROGRAMS: usize = 12;

/// Program `i` paints the whole target in its own colour.
fn sources(ctx: &GlContext, i: usize) -> (String, String) {
    let prelude = ctx.info().glsl_prelude();
    (
        format!(
            "{prelude}in vec2 a_position;\nvoid main() {{ gl_Position = vec4(a_position, 0.0, 1.0); }}\n"
        ),
        format!(
            "{prelude}uniform float u_scale;\nout vec4 o_color;\n\
             void main() {{ o_color = vec4({r}.0 / 255.0, {g}.0 / 255.0, 0.5, 1.0) * u_scale; }}\n",
            r = 20 * i,
            g = 255 - 20 * i,
        ),
    )
}

fn expected(i: usize) -> [u8; 4] {
    [(20 * i) as u8, (255 - 20 * i) as u8, 128, 255]
}

fn link_all<'a>(
    manager: &mut ProgramManager<GlBackend<'a>>,
    ctx: &GlContext,
) -> Vec<LinkedProgram<Program>> {
    (0..PROGRAMS)
        .map(|i| {
            let (vs, fs) = sources(ctx, i);
            let mut vertex = Shader::new(ShaderStage::Vertex, vs);
            let mut fragment = Shader::new(ShaderStage::Fragment, fs);
            manager.compile(&mut vertex).unwrap();
            manager.compile(&mut fragment).unwrap();
            manager
                .link(&mut vertex, &mut fragment, &ProgramOptions::default())
                .expect("links")
        })
        .collect()
}

fn paint(ctx: &GlContext, target: &OffscreenTarget, program: &Program) -> [u8; 4] {
    let quad = [-1.0f32, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0];
    ctx.draw(
        target,
        &DrawCall {
            program,
            attributes: &[VertexAttribute {
                name: "a_position",
                components: 2,
                data: &quad,
            }],
            uniforms: &[("u_scale", UniformValue::Float(1.0))],
            mode: glow::TRIANGLE_STRIP,
            vertex_count: 4,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
    )
    .expect("draw");
    let pixels = ctx.read_rgba8(target).unwrap();
    [pixels[0], pixels[1], pixels[2], pixels[3]]
}

/// A context whose driver has program binaries, and a cache holding the `PROGRAMS` programs
/// (linked once, then let go).
fn warm_cache(test: &str) -> Option<(GlContext, Arc<ProgramCache>)> {
    let ctx = context_or_skip(test)?;
    if ctx.info().program_binary_formats.is_empty() {
        eprintln!("SKIP {test}: the driver lists no program binary format");
        return None;
    }
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20)).build();
    {
        let mut cold = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "restore_ahead");
        let linked = link_all(&mut cold, &ctx);
        assert!(linked.iter().all(|l| l.origin == LinkOrigin::Linked));
    }
    assert_eq!(cache.len(), PROGRAMS);
    Some((ctx, cache))
}

/// A restore-ahead started from `ctx` on `cache` that has gone through every program it will
/// restore.
fn restored_ahead(
    ctx: &GlContext,
    cache: &Arc<ProgramCache>,
    config: RestoreAheadConfig,
) -> RestoreAhead {
    let ahead = RestoreAhead::start(ctx, cache.clone(), config).unwrap();
    assert!(ahead.wait_until_done(Duration::from_secs(60)));
    ahead
}

/// A warm pass through `ahead` on `ctx`: every program is a cache hit and paints its own
/// colour (the program taken is its own key's, as linked from source). Returns the programs.
fn warm_pass_hits(
    ctx: &GlContext,
    cache: &Arc<ProgramCache>,
    ahead: &RestoreAhead,
) -> Vec<LinkedProgram<Program>> {
    let mut warm = ProgramManager::new(
        GlBackend::with_restore_ahead(ctx, ahead),
        cache.clone(),
        "restore_ahead",
    );
    let linked = link_all(&mut warm, ctx);
    let target = ctx.offscreen_target(4, 4).unwrap();
    for (i, l) in linked.iter().enumerate() {
        assert_eq!(l.origin, LinkOrigin::CacheHit, "program {i}");
        assert_eq!(paint(ctx, &target, &l.program), expected(i), "program {i}");
        assert!(
            l.uniforms.iter().any(|u| u.name == "u_scale"),
            "program {i}"
        );
    }
    linked
}

/// Waits (at most 2 s) until the thread has deleted every program it restored: it looks at the
/// cache every 250 ms.
fn settle_deleted(ahead: &RestoreAhead) {
    for _ in 0..100 {
        if ahead.stats().deleted_unclaimed == PROGRAMS as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many program names in `1..=limit` are programs (the share group's live programs).
fn live_programs(ctx: &GlContext, limit: u32) -> usize {
    let gl = ctx.gl().unwrap();
    (1..=limit)
        .filter(|&n| {
            let name = glow::NativeProgram(std::num::NonZeroU32::new(n).unwrap());
            // SAFETY: a state query on the current context; any name may be asked about.
            unsafe { gl.is_program(name) }
        })
        .count()
}

#[test]
fn a_host_takes_the_programs_restored_ahead_each_of_its_own_key() {
    let Some((ctx, cache)) =
        warm_cache("a_host_takes_the_programs_restored_ahead_each_of_its_own_key")
    else {
        return;
    };
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    assert_eq!(
        ahead.stats().restored,
        PROGRAMS as u64,
        "{:?}",
        ahead.stats()
    );
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    let stats = ahead.finish();
    assert_eq!(stats.taken, PROGRAMS as u64, "{stats:?}");
    assert_eq!(stats.deleted_unclaimed, 0, "{stats:?}");
    assert_eq!(stats.error, None);
}

#[test]
fn programs_nobody_takes_are_deleted_when_the_restore_ahead_stops() {
    let Some((ctx, cache)) =
        warm_cache("programs_nobody_takes_are_deleted_when_the_restore_ahead_stops")
    else {
        return;
    };
    let before = live_programs(&ctx, 4096);
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    // glIsProgram answers for the share group: the restored programs are there.
    assert_eq!(live_programs(&ctx, 4096), before + PROGRAMS);
    let stats = ahead.finish();
    assert_eq!((stats.restored, stats.taken), (PROGRAMS as u64, 0));
    assert_eq!(stats.deleted_unclaimed, PROGRAMS as u64, "{stats:?}");
    assert_eq!(
        live_programs(&ctx, 4096),
        before,
        "every unclaimed program is deleted"
    );
    // Dropping one that is still restoring stops it too, and leaves nothing behind.
    let ahead = RestoreAhead::start(&ctx, cache.clone(), RestoreAheadConfig::default()).unwrap();
    drop(ahead);
    assert_eq!(live_programs(&ctx, 4096), before);
}

#[test]
fn keys_past_the_limits_or_after_a_release_are_the_hosts_to_restore() {
    let Some((ctx, cache)) =
        warm_cache("keys_past_the_limits_or_after_a_release_are_the_hosts_to_restore")
    else {
        return;
    };
    let config = RestoreAheadConfig {
        max_programs: 3,
        ..RestoreAheadConfig::default()
    };
    let ahead = restored_ahead(&ctx, &cache, config);
    let stats = ahead.stats();
    assert_eq!(
        (stats.restored, stats.over_limits),
        (3, PROGRAMS as u64 - 3),
        "{stats:?}"
    );
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    assert_eq!(ahead.finish().taken, 3);

    // Released before the host asks: the host restores every program itself.
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    ahead.release_unclaimed();
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    let stats = ahead.finish();
    assert_eq!(stats.taken, 0, "{stats:?}");
    assert_eq!(stats.deleted_unclaimed, PROGRAMS as u64, "{stats:?}");
}

#[test]
fn a_program_another_share_group_cannot_adopt_goes_back_and_is_deleted() {
    let Some((ctx, cache)) =
        warm_cache("a_program_another_share_group_cannot_adopt_goes_back_and_is_deleted")
    else {
        return;
    };
    let before = live_programs(&ctx, 4096);
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    // A host on a context of another share group (a mistake): every hit's adoption is refused,
    // the program goes back to the thread, and the host restores the binary itself.
    let other = GlContext::open_default().unwrap();
    // Which a host can tell beforehand (the C ABI refuses such a manager).
    assert!(ahead.serves(&ctx) && !ahead.serves(&other));
    assert!(Arc::ptr_eq(ahead.cache(), &cache));
    {
        let mut warm = ProgramManager::new(
            GlBackend::with_restore_ahead(&other, &ahead),
            cache.clone(),
            "restore_ahead",
        );
        let linked = link_all(&mut warm, &other);
        let target = other.offscreen_target(4, 4).unwrap();
        for (i, l) in linked.iter().enumerate() {
            assert_eq!(l.origin, LinkOrigin::CacheHit, "program {i}");
            assert_eq!(
                paint(&other, &target, &l.program),
                expected(i),
                "program {i}"
            );
        }
    }
    let stats = ahead.finish();
    assert_eq!(stats.taken, 0, "{stats:?}");
    assert_eq!(stats.deleted_unclaimed, PROGRAMS as u64, "{stats:?}");
    assert_eq!(
        live_programs(&ctx, 4096),
        before,
        "nothing leaked in the thread's group"
    );
}

#[test]
fn a_key_the_host_asks_for_before_the_thread_reaches_it_is_left_to_the_host() {
    let Some((ctx, cache)) =
        warm_cache("a_key_the_host_asks_for_before_the_thread_reaches_it_is_left_to_the_host")
    else {
        return;
    };
    // The key the thread would restore last; asked for while the thread is still making its
    // context (milliseconds), so the host gets nothing and the thread leaves it.
    let last = *cache.eviction_order().last().unwrap();
    let ahead = RestoreAhead::start(&ctx, cache.clone(), RestoreAheadConfig::default()).unwrap();
    assert!(ahead.take(&last).is_none());
    assert!(ahead.wait_until_done(Duration::from_secs(60)));
    assert_eq!(
        ahead.stats().restored,
        PROGRAMS as u64 - 1,
        "{:?}",
        ahead.stats()
    );
    assert!(ahead.take(&last).is_none(), "still the host's");
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    let stats = ahead.finish();
    assert_eq!(
        (stats.taken, stats.waited),
        (PROGRAMS as u64 - 1, 0),
        "{stats:?}"
    );
}

#[test]
fn restore_ahead_after_restore_ahead_on_one_context_draws_every_time() {
    let Some((ctx, cache)) =
        warm_cache("restore_ahead_after_restore_ahead_on_one_context_draws_every_time")
    else {
        return;
    };
    let before = live_programs(&ctx, 4096);
    // A host that restarts its restore-ahead (a second cache, a restart after a clear): each
    // round takes every program, draws with them while the thread runs, lets them go and
    // finishes it. On Mesa 22.3 llvmpipe the second round's draws crashed (SIGSEGV) before the
    // threads' contexts were kept for reuse (found by review).
    for round in 0..6 {
        let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
        drop(warm_pass_hits(&ctx, &cache, &ahead));
        let stats = ahead.finish();
        assert_eq!(stats.taken, PROGRAMS as u64, "round {round}: {stats:?}");
    }
    assert_eq!(live_programs(&ctx, 4096), before);
}

#[test]
fn critical_memory_pressure_or_a_clear_deletes_what_waits_and_hands_out_nothing_older() {
    let Some((ctx, cache)) = warm_cache(
        "critical_memory_pressure_or_a_clear_deletes_what_waits_and_hands_out_nothing_older",
    ) else {
        return;
    };
    let before = live_programs(&ctx, 4096);
    // Critical pressure empties the cache: the restored programs go too, without a release.
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    cache.set_memory_pressure(program_cache::MemoryPressure::Critical);
    settle_deleted(&ahead);
    assert_eq!(live_programs(&ctx, 4096), before, "{:?}", ahead.stats());
    let stats = ahead.finish();
    assert_eq!(
        (stats.stale, stats.deleted_unclaimed),
        (PROGRAMS as u64, PROGRAMS as u64)
    );
    cache.set_memory_pressure(program_cache::MemoryPressure::None);

    // A clear: the programs restored before it are never handed out, even for keys the cache
    // holds again (relinked from source and saved after the clear).
    {
        let mut cold = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "restore_ahead");
        drop(link_all(&mut cold, &ctx));
    }
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    cache.clear();
    // Deleted without the host asking for any of them.
    settle_deleted(&ahead);
    assert_eq!(live_programs(&ctx, 4096), before, "{:?}", ahead.stats());
    {
        let mut relink = ProgramManager::new(
            GlBackend::with_restore_ahead(&ctx, &ahead),
            cache.clone(),
            "restore_ahead",
        );
        let linked = link_all(&mut relink, &ctx);
        assert!(linked.iter().all(|l| l.origin == LinkOrigin::Linked));
    }
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    let stats = ahead.finish();
    assert_eq!(stats.taken, 0, "{stats:?}");
    assert_eq!(stats.deleted_unclaimed, PROGRAMS as u64, "{stats:?}");
    assert_eq!(live_programs(&ctx, 4096), before);
}

#[test]
fn a_pulse_of_critical_memory_pressure_too_short_to_be_polled_still_drops_what_waits() {
    let Some((ctx, cache)) = warm_cache(
        "a_pulse_of_critical_memory_pressure_too_short_to_be_polled_still_drops_what_waits",
    ) else {
        return;
    };
    let before = live_programs(&ctx, 4096);
    let ahead = restored_ahead(&ctx, &cache, RestoreAheadConfig::default());
    // Critical and back before the thread looks again (it looks every 250 ms): the cache lets
    // its programs go, and so must the restore-ahead.
    cache.set_memory_pressure(program_cache::MemoryPressure::Critical);
    cache.set_memory_pressure(program_cache::MemoryPressure::None);
    // Relinked from source (the pulse emptied the cache): nothing restored before it comes.
    {
        let mut relink = ProgramManager::new(
            GlBackend::with_restore_ahead(&ctx, &ahead),
            cache.clone(),
            "restore_ahead",
        );
        let linked = link_all(&mut relink, &ctx);
        assert!(linked.iter().all(|l| l.origin == LinkOrigin::Linked));
    }
    // Now cache hits again: still nothing from before the pulse.
    drop(warm_pass_hits(&ctx, &cache, &ahead));
    settle_deleted(&ahead);
    let stats = ahead.finish();
    assert_eq!(stats.taken, 0, "{stats:?}");
    assert_eq!(stats.deleted_unclaimed, PROGRAMS as u64, "{stats:?}");
    assert_eq!(live_programs(&ctx, 4096), before, "{stats:?}");
}

#[test]
fn the_limits_count_only_what_the_thread_left_alone() {
    let Some((ctx, cache)) = warm_cache("the_limits_count_only_what_the_thread_left_alone") else {
        return;
    };
    // The first key the thread goes to. Asked for at once, it is either the host's (asked
    // before the thread reached it) or restored and taken; both ways the count is exact.
    let first = cache.eviction_order()[0];
    let config = RestoreAheadConfig {
        max_programs: 3,
        ..RestoreAheadConfig::default()
    };
    let ahead = RestoreAhead::start(&ctx, cache.clone(), config).unwrap();
    let taken = ahead.take(&first);
    let hosts = taken.is_none();
    if let Some(handed) = taken {
        ahead.give_back(&first, handed);
    }
    assert!(ahead.wait_until_done(Duration::from_secs(60)));
    let stats = ahead.finish();
    // 3 restored; the key the host claimed first is not left alone for the limits.
    let left_alone = PROGRAMS as u64 - 3 - u64::from(hosts);
    assert_eq!(
        (stats.restored, stats.over_limits),
        (3, left_alone),
        "host claimed the first key: {hosts}; {stats:?}"
    );
}
