//! xorshift64*: enough randomness for choosing actions in a test, deterministic, no dependency.

/// The generator; the field is its state (never 0, or it stays 0).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// A generator whose state is `seed` spread over all bits (never 0).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers_and_below_stays_below() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next()
            })
            .collect();
        let mut r = Rng::new(7);
        assert_eq!(a, (0..8).map(|_| r.next()).collect::<Vec<_>>());
        assert!(a.windows(2).all(|w| w[0] != w[1]));
        assert!((0..1000).all(|_| r.below(10) < 10));
        assert_ne!(Rng::new(0).0, 0);
    }
}
