//! splitmix64: the seeded, dependency-free generator of the crate's randomized tests, bench and
//! simulation (every run the same for a seed). Included with `#[path]`, so it is no part of the
//! library's API.
#![allow(dead_code)] // each includer uses some of the helpers

use std::time::Duration;

pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// Uniform in `[0, d)`.
    pub(crate) fn within(&mut self, d: Duration) -> Duration {
        Duration::from_nanos(self.next() % d.as_nanos().max(1) as u64)
    }
}
