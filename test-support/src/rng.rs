//! Deterministic generators with no dependency: [`Rng`] (xorshift64*) for choosing actions in a
//! test, [`XorShift`] (plain xorshift64) for the seeded traces of the eviction-policy tests and
//! examples.

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

/// Plain xorshift64 (13, 7, 17), the state used as given: the generator the eviction-policy
/// tests and the policy examples build their traces with (so their seeds keep their traces).
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// An index in `0..n` (`n` > 0) with weight 1 / (index + 1): Zipf-like popularity.
    pub fn zipf(&mut self, n: usize) -> usize {
        let total: f64 = (1..=n).map(|s| 1.0 / s as f64).sum();
        let mut pick = (self.below(1 << 30) as f64 / (1u64 << 30) as f64) * total;
        for s in 0..n {
            pick -= 1.0 / (s + 1) as f64;
            if pick <= 0.0 {
                return s;
            }
        }
        n - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_plain_xorshift64_and_zipf_favours_low_indices() {
        let mut r = XorShift(1);
        // 1 ^ 1 << 13 = 0x2001; ^ >> 7 = 0x2041; ^ << 17 = 0x4082_2041.
        assert_eq!(r.next(), 0x4082_2041);
        let mut r = XorShift(0x5EED);
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            counts[r.zipf(4)] += 1;
        }
        assert!(counts.windows(2).all(|w| w[0] > w[1]), "{counts:?}");
        assert!((0..1000).all(|_| r.below(7) < 7));
    }

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
