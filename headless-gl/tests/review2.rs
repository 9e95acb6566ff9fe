//! Review probe (issue 15, second review): what `KeepHostCurrent` costs per call on the real
//! driver. One cheap GL query (`glGetError`) through `GlContext::gl` in a loop, two ways:
//! ours stays current (no scope: the cost without the restore), and inside a scope with a host
//! context current (ours made current, the host's made current again each time). Prints the
//! times; asserts only that the host's context is current after the scoped calls.

use std::time::Instant;

use headless_gl::{GlContext, KeepHostCurrent, glow::HasContext};
use test_support::gl::context_or_skip;

const N: u32 = 2000;

fn query(ctx: &GlContext) {
    let gl = ctx.gl().unwrap();
    // SAFETY: a query on the context `gl` made current.
    unsafe { gl.get_error() };
}

#[test]
fn the_cost_of_keeping_the_host_context_per_call() {
    let Some(ours) = context_or_skip("the_cost_of_keeping_the_host_context_per_call") else {
        return;
    };
    // No scope: ours stays current.
    query(&ours);
    let t = Instant::now();
    for _ in 0..N {
        query(&ours);
    }
    let plain = t.elapsed() / N;

    let host = GlContext::open_default().expect("a second context opens");
    query(&host);
    let t = Instant::now();
    for _ in 0..N {
        let _k = KeepHostCurrent::new();
        query(&ours);
    }
    let with_host = t.elapsed() / N;
    assert!(host.is_current(), "the host's context is current again");
    assert!(!ours.is_current());
    eprintln!(
        "per call: ours kept current {plain:?}; scoped with a host context current {with_host:?}"
    );
}
