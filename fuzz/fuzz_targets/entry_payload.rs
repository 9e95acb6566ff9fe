//! Arbitrary bytes wrapped into an entry with valid checksums and lengths, so that what is fuzzed
//! is the payload path — the summary, LZ4 decompression and the postcard decode of
//! `CachedProgram` — rather than the checksums. A payload (format 2) is a summary (memory size
//! u32, shader count u8, that many 20-byte hashes; never compressed) followed by the body. The
//! first byte picks the wrapping:
//! * `0`: the rest is the payload, stored uncompressed;
//! * `1`: the rest is the payload; its body (after the summary its count byte declares) is
//!   stored LZ4-compressed (a valid block); a summary that does not fit is stored as in `0`;
//! * `2..`: the next four bytes are the declared decompressed length (little-endian), the rest
//!   is stored as the payload with arbitrary block bytes after the summary.
//!
//! `decode` must never panic. In modes 0 and 1 every length and checksum is right, so the only
//! admissible error is a postcard decode error; whatever decodes must re-encode (LZ4 off and on)
//! to entries that decode to the same program.
#![no_main]

use libfuzzer_sys::fuzz_target;
use program_cache::disk::{self, EntryError, FLAG_LZ4, FORMAT_VERSION, HEADER_LEN, MAGIC};
use program_cache::ProgramKey;

const STAMP: [u8; 20] = [0x5C; 20];
const KEY: ProgramKey = ProgramKey([0x10; 20]);

/// An entry with valid header and payload checksums around `payload`.
fn seal(flags: u32, payload: &[u8], raw_len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
    out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&STAMP);
    out.extend_from_slice(&KEY.0);
    out.extend_from_slice(&1_700_000_000_000u64.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&raw_len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let entry = match mode {
        0 => seal(0, rest, rest.len() as u64),
        1 => {
            // The summary's length as its count byte declares it; when that does not fit the
            // payload is stored as it is (the summary check refuses it either way).
            let summary = rest
                .get(4)
                .map(|&count| 5 + 20 * usize::from(count))
                .filter(|&n| n <= rest.len());
            match summary {
                Some(n) => {
                    let (head, body) = rest.split_at(n);
                    let mut payload = head.to_vec();
                    payload.extend_from_slice(&lz4_flex::block::compress(body));
                    seal(FLAG_LZ4, &payload, rest.len() as u64)
                }
                None => seal(0, rest, rest.len() as u64),
            }
        }
        _ => {
            let Some((len, block)) = rest.split_first_chunk::<4>() else {
                return;
            };
            seal(FLAG_LZ4, block, u64::from(u32::from_le_bytes(*len)))
        }
    };
    match disk::decode(&entry, &STAMP, Some(&KEY)) {
        Ok((_, program)) => {
            for lz4 in [false, true] {
                let again = disk::encode(&KEY, &program, &STAMP, 0, lz4);
                let (_, round_trip) =
                    disk::decode(&again, &STAMP, Some(&KEY)).expect("a re-encoded entry decodes");
                assert_eq!(round_trip, program);
            }
        }
        Err(EntryError::Decode(_)) => {}
        Err(e) => assert!(mode > 1, "mode {mode}: a well-formed wrapping was rejected: {e}"),
    }
});
