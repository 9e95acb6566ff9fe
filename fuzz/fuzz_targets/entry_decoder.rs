//! Arbitrary bytes as a disk entry: `decode_header` and `decode` must return (an error or a
//! program), never panic, never allocate beyond the checked lengths; what decodes must re-encode
//! to an entry that decodes to the same program.
//!
//! Against a fixed stamp nearly every input stops at the stamp check, so each input is also
//! decoded against the stamp and key its own header names: with the header checksum solved (the
//! seeds in `fuzz/seeds/entry_decoder` are valid entries, and libFuzzer's compare tracing finds
//! CRC values) the payload checks, LZ4 and postcard are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use program_cache::disk::{self, FLAG_LZ4};

fuzz_target!(|data: &[u8]| {
    let header = disk::decode_header(data);
    let _ = disk::decode(data, &[0x5C; 20], None);
    let Ok(header) = header else { return };
    let Ok((again, program)) = disk::decode(data, &header.stamp_hash, Some(&header.key)) else {
        return;
    };
    assert_eq!(again, header, "decode agrees with decode_header");
    let reencoded = disk::encode(
        &header.key,
        &program,
        &header.stamp_hash,
        header.created_ms,
        header.flags & FLAG_LZ4 != 0,
    );
    let (_, round_trip) = disk::decode(&reencoded, &header.stamp_hash, Some(&header.key))
        .expect("a re-encoded entry decodes");
    assert_eq!(round_trip, program, "the re-encoded entry decodes to the same program");
});
