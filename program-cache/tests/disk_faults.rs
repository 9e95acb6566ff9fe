//! Damaged and foreign disk entries: never a panic, never a wrong program.
//!
//! Two sample entries — a real [`CachedProgram`] made by the machine's driver through
//! [`ProgramManager`] + [`GlBackend`], and a synthetic one (the only one without a driver) — are
//! encoded with LZ4 off and on, then damaged every way listed in [`damages`]:
//! * **every** single-bit flip of the 96-byte header (768 flips);
//! * payload bit flips: every 7th bit of the payload, plus every bit of its first and last byte;
//! * **every** truncation length `0..len`;
//! * foreign entries: another magic, format version, header length, unknown flag, non-zero
//!   reserved bytes — each with a *valid* header checksum, so the field check itself is what
//!   rejects them —, payload length fields that disagree with the file (resealed), a payload with
//!   a trailing byte or a wrong or impossible decompressed length (both checksums valid), another
//!   stamp's entry, and another key's entry under this key's file name.
//!
//! What is proven:
//! * `disk::decode` and `disk::decode_header` return an error for every case, of the kind the
//!   damage calls for (a header flip is a header checksum or magic error, a truncation inside the
//!   header is `TruncatedHeader`, ...), and never panic (each call runs under `catch_unwind`);
//!   the undamaged entry decodes to exactly the saved program.
//! * The same damaged files placed in a store are rejected, deleted and counted
//!   (`disk_counters().rejected_entries`), while one undamaged entry beside them loads: by the
//!   startup loader (`LoadReport::rejected`) when a check that needs no decoding fails, and at
//!   the key's first lookup, which returns nothing, when only decoding the body can tell (both
//!   checksums valid around a body that does not decode: [`found_at_lookup`]). A store holds one file per key, so every damaged file is made for
//!   its own key: the same program under a key that differs only in the backend identity, encoded
//!   and then damaged at the same offsets.
//! * After that the cache compiles from source on the real driver: a sample of the damaged keys
//!   (the first of every kind, every foreign case and every 97th other case) is linked through
//!   `ProgramManager` + `GlBackend` and must come out `LinkOrigin::Linked` with the reflection of
//!   a cold link, while the undamaged key is a `LinkOrigin::CacheHit`. The fresh binaries are then
//!   written back and decode intact.
//! * The decoder's LZ4 expansion bound (a declared decompressed length over 255 times the stored
//!   length is rejected before anything is allocated) never refuses a real entry: programs of
//!   zeros up to 8 MiB, the most compressible content, round-trip.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use headless_gl::{GlContext, ShaderStage};
use program_cache::disk::{self, EntryError, HEADER_LEN, inspect};
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, GlBackend, LinkOrigin,
    ProgramCache, ProgramKey, ProgramKeyInput, ProgramManager, ProgramOptions, Shader,
    backend_shader_hash, program_key,
};
use test_support::gl::context_or_skip;
use test_support::programs;
use test_support::shaders::{FS, VS, with_prelude};

/// Header field offsets (program-cache/FORMAT.md).
const VERSION_AT: usize = 8;
const HEADER_LEN_AT: usize = 10;
const FLAGS_AT: usize = 12;
const PAYLOAD_LEN_AT: usize = 64;
const RAW_LEN_AT: usize = 72;
const PAYLOAD_CRC_AT: usize = 80;
const RESERVED_AT: usize = 84;
const HEADER_CRC_AT: usize = 92;

/// One way of damaging an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    /// Flip bit `n` of the file (bit 0 = least significant bit of byte 0).
    Flip(usize),
    /// Keep the first `n` bytes.
    Truncate(usize),
    /// A field changed and the header checksum recomputed.
    Magic,
    Version(u16),
    HeaderLen(u16),
    Flags(u32),
    Reserved,
    PayloadLenPlus1,
    PayloadLenMinus1,
    /// One byte appended to the payload with both length fields and the payload CRC updated:
    /// checksums valid, content not.
    TrailingByte,
    /// The decompressed-length field off by one, header resealed.
    RawLenPlus1,
    RawLenMinus1,
    /// A decompressed length beyond what LZ4 can expand the stored bytes to (255-fold), header
    /// resealed: rejected before anything is allocated for it.
    RawLenBeyondLz4,
    /// A valid entry of another stamp.
    ForeignStamp,
    /// A valid entry of another key, under this key's file name.
    OtherKey,
}

impl Damage {
    fn kind(self) -> &'static str {
        match self {
            Damage::Flip(bit) if bit < HEADER_LEN * 8 => "header bit flip",
            Damage::Flip(_) => "payload bit flip",
            Damage::Truncate(n) if n < HEADER_LEN => "truncation inside the header",
            Damage::Truncate(_) => "truncation inside the payload",
            _ => "foreign or resealed",
        }
    }
}

/// Every damage of the task for an entry of `len` bytes.
fn damages(len: usize) -> Vec<Damage> {
    let mut out: Vec<Damage> = (0..HEADER_LEN * 8).map(Damage::Flip).collect();
    let payload_bits = HEADER_LEN * 8..len * 8;
    let mut flips: Vec<usize> = payload_bits.clone().step_by(7).collect();
    flips.extend(HEADER_LEN * 8..HEADER_LEN * 8 + 8);
    flips.extend(len * 8 - 8..len * 8);
    flips.sort_unstable();
    flips.dedup();
    out.extend(flips.into_iter().map(Damage::Flip));
    out.extend((0..len).map(Damage::Truncate));
    out.extend([
        Damage::Magic,
        Damage::Version(0),
        Damage::Version(1),
        Damage::Version(disk::FORMAT_VERSION as u16 + 1),
        Damage::Version(u16::MAX),
        Damage::HeaderLen(128),
        Damage::HeaderLen(0),
        Damage::Flags(2),
        Damage::Flags(1 << 31),
        Damage::Reserved,
        Damage::PayloadLenPlus1,
        Damage::PayloadLenMinus1,
        Damage::TrailingByte,
        Damage::RawLenPlus1,
        Damage::RawLenMinus1,
        Damage::RawLenBeyondLz4,
        Damage::ForeignStamp,
        Damage::OtherKey,
    ]);
    out
}

fn reseal(bytes: &mut [u8]) {
    let crc = crc32c(&bytes[..HEADER_CRC_AT]);
    bytes[HEADER_CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// CRC32C (Castagnoli), bitwise: the tests do not depend on the crate the format uses.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// The entry of `program` under `key`, damaged by `damage`.
fn damaged(
    damage: Damage,
    key: &ProgramKey,
    program: &CachedProgram,
    stamp: &[u8; 20],
    lz4: bool,
) -> Vec<u8> {
    let mut b = disk::encode(key, program, stamp, 1_700_000_000_000, lz4);
    match damage {
        Damage::Flip(bit) => b[bit / 8] ^= 1 << (bit % 8),
        Damage::Truncate(n) => b.truncate(n),
        Damage::Magic => {
            b[..8].copy_from_slice(b"GPUSVCPX");
            reseal(&mut b);
        }
        Damage::Version(v) => {
            b[VERSION_AT..VERSION_AT + 2].copy_from_slice(&v.to_le_bytes());
            reseal(&mut b);
        }
        Damage::HeaderLen(v) => {
            b[HEADER_LEN_AT..HEADER_LEN_AT + 2].copy_from_slice(&v.to_le_bytes());
            reseal(&mut b);
        }
        Damage::Flags(f) => {
            let flags = u32::from_le_bytes(b[FLAGS_AT..FLAGS_AT + 4].try_into().unwrap()) | f;
            b[FLAGS_AT..FLAGS_AT + 4].copy_from_slice(&flags.to_le_bytes());
            reseal(&mut b);
        }
        Damage::Reserved => {
            b[RESERVED_AT + 3] = 0x5A;
            reseal(&mut b);
        }
        Damage::PayloadLenPlus1 | Damage::PayloadLenMinus1 => {
            let len = get_u64(&b, PAYLOAD_LEN_AT);
            let len = if damage == Damage::PayloadLenPlus1 {
                len + 1
            } else {
                len - 1
            };
            put_u64(&mut b, PAYLOAD_LEN_AT, len);
            reseal(&mut b);
        }
        Damage::TrailingByte => {
            b.push(0);
            let payload_len = (b.len() - HEADER_LEN) as u64;
            put_u64(&mut b, PAYLOAD_LEN_AT, payload_len);
            if !lz4 {
                put_u64(&mut b, RAW_LEN_AT, payload_len);
            }
            let crc = crc32c(&b[HEADER_LEN..]);
            b[PAYLOAD_CRC_AT..PAYLOAD_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
            reseal(&mut b);
        }
        Damage::RawLenPlus1 | Damage::RawLenMinus1 => {
            let raw = get_u64(&b, RAW_LEN_AT);
            let raw = if damage == Damage::RawLenPlus1 {
                raw + 1
            } else {
                raw - 1
            };
            put_u64(&mut b, RAW_LEN_AT, raw);
            reseal(&mut b);
        }
        Damage::RawLenBeyondLz4 => {
            let stored = get_u64(&b, PAYLOAD_LEN_AT);
            put_u64(&mut b, RAW_LEN_AT, stored * 255 + 1);
            reseal(&mut b);
        }
        Damage::ForeignStamp => {
            let mut other = *stamp;
            other[0] ^= 0xFF;
            b = disk::encode(key, program, &other, 1_700_000_000_000, lz4);
        }
        Damage::OtherKey => {
            let mut other = *key;
            other.0[19] ^= 1;
            b = disk::encode(&other, program, stamp, 1_700_000_000_000, lz4);
        }
    }
    b
}

/// Whether every check the startup loader runs without decoding the body passes for `damage`
/// (checksums valid around a body that does not decode): then the entry is rejected at its
/// first lookup instead of at load.
fn found_at_lookup(damage: Damage, lz4: bool) -> bool {
    match damage {
        Damage::TrailingByte => true,
        Damage::RawLenPlus1 | Damage::RawLenMinus1 => lz4,
        _ => false,
    }
}

/// Whether `error` is what `damage` must produce.
fn expected_error(damage: Damage, error: &EntryError, lz4: bool) -> bool {
    use EntryError as E;
    match damage {
        Damage::Flip(bit) if bit < 64 => matches!(error, E::BadMagic),
        Damage::Flip(bit) if bit < HEADER_LEN * 8 => matches!(error, E::HeaderChecksum),
        Damage::Flip(_) => matches!(error, E::PayloadChecksum),
        Damage::Truncate(n) if n < HEADER_LEN => *error == E::TruncatedHeader(n),
        Damage::Truncate(_) => matches!(error, E::PayloadLength { .. }),
        Damage::Magic => matches!(error, E::BadMagic),
        Damage::Version(v) => *error == E::Version(v),
        Damage::HeaderLen(v) => *error == E::HeaderLen(v),
        Damage::Flags(_) | Damage::Reserved => matches!(error, E::Flags(_)),
        Damage::PayloadLenPlus1 | Damage::PayloadLenMinus1 => {
            matches!(error, E::PayloadLength { .. })
        }
        // Uncompressed: postcard leaves a byte over. LZ4: the block no longer decompresses to the
        // declared length (or decodes to the same program and leaves a byte over).
        Damage::TrailingByte if lz4 => matches!(error, E::Decompress(_) | E::Decode(_)),
        Damage::TrailingByte => matches!(error, E::Decode(_)),
        Damage::RawLenPlus1 | Damage::RawLenMinus1 | Damage::RawLenBeyondLz4 => {
            matches!(error, E::Decompress(_))
        }
        Damage::ForeignStamp => matches!(error, E::ForeignStamp),
        Damage::OtherKey => matches!(error, E::KeyMismatch),
    }
}

fn error_name(e: &EntryError) -> String {
    let text = format!("{e:?}");
    text.split(['(', ' ', '{']).next().unwrap_or("").to_string()
}

/// Runs every damage of one entry through `decode_header` and `decode` (with and without the
/// expected key) under `catch_unwind`. Returns the number of cases; panics with every failure.
fn check_decode(label: &str, key: &ProgramKey, program: &CachedProgram, lz4: bool) -> usize {
    let stamp = [0x5Cu8; 20];
    let good = disk::encode(key, program, &stamp, 1_700_000_000_000, lz4);
    let (_, decoded) = disk::decode(&good, &stamp, Some(key)).expect("the undamaged entry decodes");
    assert_eq!(
        &decoded, program,
        "{label}: the undamaged entry round-trips"
    );

    let cases = damages(good.len());
    let mut failures = Vec::new();
    let mut by_error: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for &damage in &cases {
        let bytes = damaged(damage, key, program, &stamp, lz4);
        assert_ne!(bytes, good, "{label}: {damage:?} changed nothing");
        *by_kind.entry(damage.kind()).or_default() += 1;
        let result = catch_unwind(AssertUnwindSafe(|| {
            let _ = disk::decode_header(&bytes);
            let with_key = disk::decode(&bytes, &stamp, Some(key));
            let without_key = disk::decode(&bytes, &stamp, None);
            (with_key, without_key)
        }));
        let (with_key, without_key) = match result {
            Ok(r) => r,
            Err(_) => {
                failures.push(format!("{damage:?}: decode panicked"));
                continue;
            }
        };
        match with_key {
            Ok((_, p)) if p == *program => {
                failures.push(format!("{damage:?}: accepted (the saved program)"))
            }
            Ok(_) => failures.push(format!("{damage:?}: accepted a WRONG program")),
            Err(e) => {
                if !expected_error(damage, &e, lz4) {
                    failures.push(format!("{damage:?}: unexpected error {e:?}"));
                }
                *by_error.entry(error_name(&e)).or_default() += 1;
            }
        }
        // Without an expected key only the other key's (valid) entry may decode, and then to
        // exactly the saved program.
        match without_key {
            Ok((header, p)) if damage == Damage::OtherKey => {
                if p != *program || header.key == *key {
                    failures.push(format!("{damage:?}: decoded to something else"));
                }
            }
            Ok(_) => failures.push(format!("{damage:?}: accepted without the key check")),
            Err(_) => {}
        }
    }
    eprintln!(
        "{label} (lz4 {lz4}, entry {} bytes): {} damaged entries, {:?}; errors {:?}",
        good.len(),
        cases.len(),
        by_kind,
        by_error
    );
    assert!(
        failures.is_empty(),
        "{label}: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    cases.len()
}

#[test]
fn every_damaged_synthetic_entry_is_rejected_by_decode() {
    let mut program = programs::program(3, 4, 2500);
    // A binary that does not compress to nothing, and variables on both stages.
    for (i, b) in program.binary.bytes.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
    }
    program.fragment.uniforms = program.vertex.attributes.clone();
    for lz4 in [false, true] {
        check_decode("synthetic program", &programs::key(7), &program, lz4);
    }
}

/// The LZ4 expansion bound the decoder checks never refuses a real entry: programs of zeros (the
/// most compressible content) of many sizes round-trip with LZ4 on.
#[test]
fn the_most_compressible_entries_still_decode() {
    let mut best = 0.0f64;
    for len in [1usize, 15, 16, 300, 4096, 65_535, 65_536, 1 << 20, 8 << 20] {
        let mut program = programs::program(1, 1, len);
        program.vertex.attributes.clear();
        let entry = disk::encode(&programs::key(1), &program, &[1; 20], 0, true);
        let (header, decoded) = disk::decode(&entry, &[1; 20], Some(&programs::key(1)))
            .unwrap_or_else(|e| panic!("{len} zero bytes: {e}"));
        assert_eq!(decoded, program);
        best = best.max(header.raw_len as f64 / header.payload_len as f64);
    }
    eprintln!("highest LZ4 expansion seen: {best:.1}-fold (the decoder allows 255)");
    assert!(best > 200.0, "the check was not approached: {best:.1}");
}

type Manager<'a> = ProgramManager<GlBackend<'a>>;

/// The key `ProgramManager` uses for VS/FS with `identity`.
fn key_for(ctx: &GlContext, identity: &str) -> ProgramKey {
    let options = ProgramOptions::default();
    program_key(&ProgramKeyInput {
        vertex: backend_shader_hash(ShaderStage::Vertex, &with_prelude(ctx, VS), &[], identity),
        fragment: backend_shader_hash(ShaderStage::Fragment, &with_prelude(ctx, FS), &[], identity),
        backend_identity: identity,
        attribute_bindings: &options.link.attribute_bindings,
        transform_feedback_varyings: &options.link.transform_feedback_varyings,
        transform_feedback_mode: options.link.transform_feedback_mode,
        other_stages: &[],
        separable: false,
    })
}

/// Compiles and links VS/FS through `manager` with new shader objects.
fn link(
    manager: &mut Manager<'_>,
    ctx: &GlContext,
) -> program_cache::LinkedProgram<headless_gl::Program> {
    let mut vs = Shader::new(ShaderStage::Vertex, with_prelude(ctx, VS));
    let mut fs = Shader::new(ShaderStage::Fragment, with_prelude(ctx, FS));
    manager.compile(&mut vs).unwrap();
    manager.compile(&mut fs).unwrap();
    manager
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .expect("VS/FS link")
}

/// A real cached program: VS/FS linked by the driver through the manager, as the cache stores it.
fn real_program(ctx: &GlContext) -> (ProgramKey, CachedProgram) {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut manager = ProgramManager::new(GlBackend::new(ctx), cache.clone(), "disk_faults");
    let linked = link(&mut manager, ctx);
    assert_eq!(linked.origin, LinkOrigin::Linked);
    let program = cache.peek(&linked.key).expect("the binary was cached");
    assert!(!program.binary.bytes.is_empty());
    (linked.key, (*program).clone())
}

#[test]
fn every_damaged_real_entry_is_rejected_by_decode() {
    let Some(ctx) = context_or_skip("every_damaged_real_entry_is_rejected_by_decode") else {
        return;
    };
    eprintln!("driver: {}", ctx.info());
    let (key, program) = real_program(&ctx);
    for lz4 in [false, true] {
        check_decode("real program", &key, &program, lz4);
    }
}

#[test]
fn damaged_entries_in_a_store_are_rejected_deleted_counted_and_compiled_from_source() {
    const TEST: &str =
        "damaged_entries_in_a_store_are_rejected_deleted_counted_and_compiled_from_source";
    let Some(ctx) = context_or_skip(TEST) else {
        return;
    };
    eprintln!("driver: {}", ctx.info());
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "disk_faults", "1");
    let (_, program) = real_program(&ctx);
    // The reflection of a cold link, to compare every relink with.
    let reference = {
        let cache = ProgramCache::builder(CacheConfig::desktop()).build();
        let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache, "reference");
        let linked = link(&mut manager, &ctx);
        (linked.attributes, linked.uniforms)
    };

    for lz4 in [false, true] {
        let start = Instant::now();
        let root = tempfile::tempdir().unwrap();
        let mut config = DiskConfig::new(root.path(), stamp.clone());
        config.compress = lz4;
        config.budget_bytes = Some(1 << 30);
        let open = || {
            let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20))
                .disk(config.clone())
                .build();
            let report = cache
                .wait_until_loaded(Duration::from_secs(120))
                .expect("the startup load finishes");
            (cache, report)
        };
        // Creates the store's folders.
        drop(open());
        let entries = root.path().join(stamp.dir_name()).join("entries");
        assert!(entries.is_dir(), "{} exists", entries.display());

        let entry_len = disk::encode(&key_for(&ctx, "x"), &program, &[0; 20], 0, lz4).len();
        let cases = damages(entry_len);
        let identity = |i: usize| format!("disk_faults lz4={lz4} case {i}");
        for (i, &damage) in cases.iter().enumerate() {
            let key = key_for(&ctx, &identity(i));
            let bytes = damaged(damage, &key, &program, &stamp.hash(), lz4);
            std::fs::write(entries.join(key.to_hex()), bytes).unwrap();
        }
        let good_key = key_for(&ctx, &format!("disk_faults lz4={lz4} undamaged"));
        std::fs::write(
            entries.join(good_key.to_hex()),
            disk::encode(&good_key, &program, &stamp.hash(), 0, lz4),
        )
        .unwrap();

        let (cache, report) = open();
        let counters = cache.disk_counters().unwrap();
        let at_lookup: Vec<usize> = (0..cases.len())
            .filter(|&i| found_at_lookup(cases[i], lz4))
            .collect();
        eprintln!(
            "store (lz4 {lz4}): {} damaged entries + 1 undamaged: load report {report:?}, \
             counters rejected {} loaded {}; {} to be rejected at their first lookup",
            cases.len(),
            counters.rejected_entries,
            counters.loaded,
            at_lookup.len()
        );
        assert_eq!(report.rejected, cases.len() - at_lookup.len());
        assert_eq!(counters.rejected_entries, report.rejected as u64);
        let loaded = 1 + at_lookup.len();
        assert_eq!((report.loaded, counters.loaded), (loaded, loaded as u64));
        // Their first lookup rejects the rest: nothing is returned, the files are deleted.
        for &i in &at_lookup {
            let key = key_for(&ctx, &identity(i));
            assert!(cache.peek(&key).is_none(), "case {i} ({:?})", cases[i]);
            assert!(
                cache.load(&key, None).is_none(),
                "case {i} ({:?})",
                cases[i]
            );
        }
        cache.flush_disk();
        let counters = cache.disk_counters().unwrap();
        assert_eq!(counters.rejected_entries, cases.len() as u64);
        assert_eq!(cache.len(), 1, "only the undamaged entry is in memory");
        let left: Vec<_> = std::fs::read_dir(&entries)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [good_key.to_hex()], "every damaged file is deleted");

        // The cache compiles from source now: a sample of the damaged keys relinks on the
        // driver, the undamaged one is a binary hit.
        let mut sample: Vec<usize> = Vec::new();
        let mut seen_kinds = Vec::new();
        for (i, damage) in cases.iter().enumerate() {
            let first_of_kind = !seen_kinds.contains(&damage.kind());
            if first_of_kind {
                seen_kinds.push(damage.kind());
            }
            let foreign = !matches!(damage, Damage::Flip(_) | Damage::Truncate(_));
            if first_of_kind || foreign || i % 97 == 0 {
                sample.push(i);
            }
        }
        for &i in &sample {
            let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), identity(i));
            let linked = link(&mut manager, &ctx);
            assert_eq!(linked.key, key_for(&ctx, &identity(i)));
            assert_eq!(
                linked.origin,
                LinkOrigin::Linked,
                "case {i} ({:?}) must compile from source",
                cases[i]
            );
            assert_eq!(
                (&linked.attributes, &linked.uniforms),
                (&reference.0, &reference.1)
            );
        }
        let mut manager = ProgramManager::new(
            GlBackend::new(&ctx),
            cache.clone(),
            format!("disk_faults lz4={lz4} undamaged"),
        );
        let hit = link(&mut manager, &ctx);
        assert_eq!(
            hit.origin,
            LinkOrigin::CacheHit,
            "the undamaged entry loads"
        );
        assert_eq!(
            (&hit.attributes, &hit.uniforms),
            (&reference.0, &reference.1)
        );
        assert_eq!(cache.stats().counters.driver_rejections, 0);

        // The relinked programs were written back, intact.
        cache.flush_disk();
        let counters = cache.disk_counters().unwrap();
        assert_eq!(counters.writes, sample.len() as u64);
        let store = &inspect::scan(root.path()).unwrap()[0];
        assert_eq!(store.entries.len(), sample.len() + 1);
        assert!(store.corrupt().next().is_none());
        eprintln!(
            "store (lz4 {lz4}): {} damaged keys relinked from source (LinkOrigin::Linked), \
             undamaged key a CacheHit, {} fresh entries written back intact; {:.1} s",
            sample.len(),
            counters.writes,
            start.elapsed().as_secs_f64()
        );
    }
}

/// An entry whose checksums all hold around a body that does not decode passes every check the
/// startup loader runs (it loads, undecoded); the manager's own link is its first lookup, which
/// refuses it: counted, deleted from disk, never handed to the driver, and the program is
/// compiled and linked from source, then written back intact and hit by the next cache.
#[test]
fn a_body_found_damaged_at_its_first_lookup_relinks_from_source_through_the_manager() {
    const TEST: &str =
        "a_body_found_damaged_at_its_first_lookup_relinks_from_source_through_the_manager";
    let Some(ctx) = context_or_skip(TEST) else {
        return;
    };
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "disk_faults", "1");
    let (_, program) = real_program(&ctx);
    let reference = {
        let cache = ProgramCache::builder(CacheConfig::desktop()).build();
        let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache, "reference");
        let linked = link(&mut manager, &ctx);
        (linked.attributes, linked.uniforms)
    };
    for (lz4, damage) in [(true, Damage::RawLenPlus1), (false, Damage::TrailingByte)] {
        let root = tempfile::tempdir().unwrap();
        let mut config = DiskConfig::new(root.path(), stamp.clone());
        config.compress = lz4;
        let open = || {
            let cache = ProgramCache::builder(CacheConfig::desktop())
                .disk(config.clone())
                .build();
            let report = cache
                .wait_until_loaded(Duration::from_secs(120))
                .expect("the startup load finishes");
            (cache, report)
        };
        drop(open());
        let identity = format!("first lookup lz4={lz4}");
        let key = key_for(&ctx, &identity);
        let entries = root.path().join(stamp.dir_name()).join("entries");
        let bytes = damaged(damage, &key, &program, &stamp.hash(), lz4);
        assert!(disk::check_packed(&bytes, &stamp.hash(), Some(&key)).is_ok());
        std::fs::write(entries.join(key.to_hex()), &bytes).unwrap();

        let (cache, report) = open();
        assert_eq!((report.loaded, report.rejected), (1, 0), "lz4 {lz4}");
        assert_eq!(cache.len(), 1);

        let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), &identity);
        let linked = link(&mut manager, &ctx);
        assert_eq!(linked.key, key);
        assert_eq!(linked.origin, LinkOrigin::Linked, "lz4 {lz4}: from source");
        assert_eq!(
            (&linked.attributes, &linked.uniforms),
            (&reference.0, &reference.1)
        );
        let c = cache.stats().counters;
        assert_eq!(
            (c.hits, c.driver_rejections),
            (0, 0),
            "never handed to the driver"
        );
        assert_eq!(cache.disk_counters().unwrap().rejected_entries, 1);

        // The damaged file was deleted, and the relinked program written in its place.
        cache.flush_disk();
        let written = std::fs::read(entries.join(key.to_hex())).unwrap();
        assert_ne!(written, bytes);
        let (_, decoded) = disk::decode(&written, &stamp.hash(), Some(&key)).unwrap();
        // The relinked entry is this manager's: its shaders are hashed with its identity.
        assert_eq!(
            decoded.vertex_shader,
            backend_shader_hash(ShaderStage::Vertex, &with_prelude(&ctx, VS), &[], &identity)
        );
        drop((manager, cache));
        let (cache, report) = open();
        assert_eq!((report.loaded, report.rejected), (1, 0));
        let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), &identity);
        assert_eq!(link(&mut manager, &ctx).origin, LinkOrigin::CacheHit);
        assert_eq!(cache.disk_counters().unwrap().rejected_entries, 0);
        eprintln!(
            "lz4 {lz4}: {damage:?} loaded undecoded, refused at the manager's lookup, relinked"
        );
    }
}
