//! Issue 11, item 4, on the process's main thread (its stack is the `ulimit -s` one, 8 MiB on a
//! default Linux): a million releases chained through callbacks complete. A test of its own
//! without the harness, whose tests run on spawned 2 MiB threads (`callback_queue.rs`).

mod common;

fn main() {
    let (steps, took) = common::chain(common::CHAIN);
    assert_eq!(steps as u64, common::CHAIN);
    println!(
        "{} chained releases on the main thread: {took:?}",
        common::CHAIN
    );
}
