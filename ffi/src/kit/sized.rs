//! Structs that can grow: every public config, descriptor, report and snapshot struct starts with
//! `size_t struct_size`, which the host sets to `sizeof` the struct as its header declares it.
//! This module is the one place that implements the rule (Linux's `copy_struct_from_user`):
//!
//! * **In** ([`sized_in`]): `min(struct_size, ours)` bytes are read; fields past the host's
//!   size take their defaults ([`GrowableIn::defaults`]); bytes past ours, up to the host's
//!   size, must be zero (a newer host may pass a larger struct as long as it leaves the fields
//!   this library does not know at zero, which always means "default"). A `struct_size` below
//!   the struct's first published size (0 included), above [`MAX_STRUCT_SIZE`], not a multiple
//!   of the struct's alignment (it would end inside a field, e.g. take half a pointer from the
//!   host), or with a nonzero byte past ours is `GPUSVC_UNSUPPORTED_STRUCT_SIZE`.
//! * **Out** ([`SizedOut`]): the host's `struct_size` is read and checked as for inputs when
//!   the call starts (`GPUSVC_UNSUPPORTED_STRUCT_SIZE`, nothing written); on
//!   success exactly `min(struct_size, ours)` bytes are written, never more. A report or
//!   snapshot then holds that number in `struct_size` (so a newer host learns which of its
//!   fields were filled); a struct filled by a `_defaults` function keeps the host's
//!   `struct_size`, so a field the host sets that this library does not know is refused when the
//!   struct is passed back in, never silently ignored.
//!
//! New fields are only ever appended. A struct's first published size is the end of its last
//! field in the first release that had `struct_size` ([`growable!`]'s `first` field); a struct
//! has no padding after its last field (checked at compile time), so every byte a newer
//! version appends lies past the old size.
//!
//! Structs embedded by value in other public structs, or used as elements of arrays passed with
//! a count, have no `struct_size`: their size fixes their parent's layout or the array's
//! stride, so they cannot grow in place; their parent carries the version.

use crate::kit::error::{FfiError, gpusvc_result, null_argument};

/// The largest `struct_size` accepted (the bytes past this library's size are scanned, so the
/// scan is bounded); a larger one is `GPUSVC_UNSUPPORTED_STRUCT_SIZE`.
pub(crate) const MAX_STRUCT_SIZE: usize = 4096;

/// A struct that starts with `struct_size: usize` and has no padding after its last field.
///
/// # Safety
/// Implemented only through [`growable!`], which checks at compile time that the type is
/// `#[repr(C)]`-laid-out with a `usize` `struct_size` at offset 0, that `FIRST_SIZE` is at most
/// its size, and that no padding follows its last field.
pub(crate) unsafe trait Growable: Copy {
    /// The C name, for error details.
    const NAME: &'static str;
    /// The struct's size in its first published version: a smaller `struct_size` is refused.
    const FIRST_SIZE: usize;
}

/// A [`Growable`] struct the host passes in: any bytes the host may pass make a valid value (plain
/// integers, raw pointers, `Option`s of function pointers, `bool`s documented as 0 or 1), and
/// fields the host's version lacks take [`GrowableIn::defaults`].
pub(crate) trait GrowableIn: Growable {
    /// The value of every field a host leaves out (documented on each field); `struct_size` is
    /// ignored.
    fn defaults() -> Self;
}

/// `const` helper of [`growable!`]: the offset just past a field.
pub(crate) const fn field_end<T, F>(offset: usize, _field: fn(&T) -> &F) -> usize {
    offset + size_of::<F>()
}

/// Declares a struct [`Growable`] (and [`GrowableIn`] with `defaults`):
/// `growable!(gpusvc_x { first: last_field_of_v1, last: last_field_now })` or
/// `growable!(gpusvc_x { first: .., last: .., defaults: expr })`.
macro_rules! growable {
    ($t:ident { first: $first:ident, last: $last:ident $(,)? }) => {
        // SAFETY: the layout facts the trait requires are checked at compile time just below.
        unsafe impl $crate::kit::sized::Growable for $t {
            const NAME: &'static str = stringify!($t);
            const FIRST_SIZE: usize =
                $crate::kit::sized::field_end(::std::mem::offset_of!($t, $first), |s: &$t| {
                    &s.$first
                });
        }
        const _: () = {
            let _: fn(&$t) -> &usize = |s: &$t| &s.struct_size;
            assert!(::std::mem::offset_of!($t, struct_size) == 0);
            assert!(
                $crate::kit::sized::field_end(::std::mem::offset_of!($t, $last), |s: &$t| &s.$last)
                    == ::std::mem::size_of::<$t>(),
                concat!(
                    stringify!($t),
                    ": padding after the last field (make it explicit)"
                )
            );
            assert!(
                <$t as $crate::kit::sized::Growable>::FIRST_SIZE <= ::std::mem::size_of::<$t>()
            );
            assert!(
                <$t as $crate::kit::sized::Growable>::FIRST_SIZE
                    .is_multiple_of(::std::mem::align_of::<$t>()),
                concat!(
                    stringify!($t),
                    ": the first published size is not a multiple of the alignment"
                )
            );
            assert!(::std::mem::size_of::<$t>() <= $crate::kit::sized::MAX_STRUCT_SIZE);
        };
    };
    ($t:ident { first: $first:ident, last: $last:ident, defaults: $defaults:expr $(,)? }) => {
        $crate::kit::sized::growable!($t {
            first: $first,
            last: $last
        });
        impl $crate::kit::sized::GrowableIn for $t {
            fn defaults() -> Self {
                $defaults
            }
        }
    };
}
pub(crate) use growable;

/// `Default` for a growable struct of plain numbers: all zeros with `struct_size` set to its
/// size, ready to be passed to the export that reads or fills it (Rust hosts and tests).
macro_rules! sized_default {
    ($t:ident) => {
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: only used on structs whose fields are integers, floats, `bool`s or
                // structs or arrays of those, for which all-zero bytes are a valid value.
                let mut v: Self = unsafe { ::std::mem::zeroed() };
                v.struct_size = ::std::mem::size_of::<Self>();
                v
            }
        }
    };
}
pub(crate) use sized_default;

fn unsupported(detail: String) -> FfiError {
    FfiError::new(gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE, detail)
}

/// Checks a host's `struct_size` for `T`: at least the first published size, at most
/// [`MAX_STRUCT_SIZE`].
fn check_size<T: Growable>(size: usize, name: &str) -> Result<(), FfiError> {
    if size < T::FIRST_SIZE {
        return Err(unsupported(format!(
            "`{name}`: struct_size {size} is below {}'s first published size {} (set struct_size \
             = sizeof(struct {}))",
            T::NAME,
            T::FIRST_SIZE,
            T::NAME
        )));
    }
    if size > MAX_STRUCT_SIZE {
        return Err(unsupported(format!(
            "`{name}`: struct_size {size} is absurd (more than {MAX_STRUCT_SIZE} bytes)"
        )));
    }
    // Every `sizeof` of a version is a multiple of the struct's alignment; any other size ends
    // inside a field (a pointer read half from the host, half from its default).
    if !size.is_multiple_of(align_of::<T>()) {
        return Err(unsupported(format!(
            "`{name}`: struct_size {size} is not a multiple of {}'s alignment {}, so no \
             version of it has that size (set struct_size = sizeof(struct {}))",
            T::NAME,
            align_of::<T>(),
            T::NAME
        )));
    }
    Ok(())
}

/// Reads the `struct_size` at the start of the host's struct.
///
/// # Safety
/// `ptr` is non-NULL and valid for reading a `size_t` at its start.
unsafe fn host_size<T>(ptr: *const T) -> usize {
    // SAFETY: the struct starts with its `size_t struct_size` (contract); unaligned-safe.
    unsafe { ptr.cast::<usize>().read_unaligned() }
}

/// Copies a growable struct in by the rule above; NULL is `GPUSVC_NULL_ARGUMENT` for `name`.
///
/// # Safety
/// `ptr` is NULL or valid for reading `struct_size` bytes (the first of which hold
/// `struct_size` itself), for the duration of the call.
pub(crate) unsafe fn sized_in<T: GrowableIn>(ptr: *const T, name: &str) -> Result<T, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let raw = unsafe { sized_raw_in(ptr, name) }?;
    // SAFETY: every byte pattern the host may pass is a valid `T` (`GrowableIn`'s contract), and
    // the bytes past the host's size are the defaults', so `raw` holds a valid `T`.
    Ok(unsafe { raw.assume_init() })
}

/// [`sized_in`] for a struct whose fields are then read one by one as plain bytes (a `bool`
/// that C may set to any byte): the host's bytes over the defaults', not yet a `T`.
///
/// # Safety
/// As [`sized_in`].
pub(crate) unsafe fn sized_raw_in<T: GrowableIn>(
    ptr: *const T,
    name: &str,
) -> Result<std::mem::MaybeUninit<T>, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null and starts with `struct_size` (contract).
    let size = unsafe { host_size(ptr) };
    check_size::<T>(size, name)?;
    let ours = size_of::<T>();
    let bytes = ptr.cast::<u8>();
    if size > ours {
        // SAFETY: the host's struct is valid for `size` bytes of reads (contract).
        let extra = unsafe { std::slice::from_raw_parts(bytes.add(ours), size - ours) };
        if let Some(i) = extra.iter().position(|&b| b != 0) {
            return Err(unsupported(format!(
                "`{name}`: byte {} of the {size}-byte {} is not zero, but this library's struct \
                 has {ours} bytes: a field this version ({}) does not know is set",
                ours + i,
                T::NAME,
                env!("CARGO_PKG_VERSION"),
            )));
        }
    }
    let mut defaults = T::defaults();
    set_struct_size(&mut defaults, ours);
    let mut value = std::mem::MaybeUninit::new(defaults);
    // SAFETY: `min(size, ours)` bytes are readable at `ptr` (contract) and writable in `value`;
    // the two cannot overlap (`value` is our local). The first `size_of::<usize>()` bytes are
    // `struct_size`, which is restored to ours below when the host's copy overwrote it.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes, value.as_mut_ptr().cast::<u8>(), size.min(ours));
        value.as_mut_ptr().cast::<usize>().write(ours);
    }
    Ok(value)
}

/// Sets the `struct_size` of a growable struct.
fn set_struct_size<T: Growable>(value: &mut T, size: usize) {
    // SAFETY: `Growable` types have a `usize` `struct_size` at offset 0 (checked by
    // `growable!`), so this is a write of that field through a properly aligned pointer.
    unsafe { (value as *mut T).cast::<usize>().write(size) }
}

/// A growable output struct, checked when the call starts (NULL: `GPUSVC_NULL_ARGUMENT`; a
/// `struct_size` below the first published size: `GPUSVC_UNSUPPORTED_STRUCT_SIZE`) and written
/// at most once, on success, with exactly `min(struct_size, ours)` bytes.
#[derive(Debug)]
pub(crate) struct SizedOut<T> {
    ptr: *mut T,
    host_size: usize,
}

impl<T: Growable> SizedOut<T> {
    /// Checks an output struct before any work is done.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for reading and writing `struct_size` bytes (its `struct_size`
    /// set by the host) for as long as the `SizedOut` lives (within the call).
    pub(crate) unsafe fn new(ptr: *mut T, name: &str) -> Result<Self, FfiError> {
        if ptr.is_null() {
            return Err(null_argument(name));
        }
        // SAFETY: non-null and starts with `struct_size` (contract).
        let host_size = unsafe { host_size(ptr) };
        // Outputs past MAX_STRUCT_SIZE are harmless (never scanned), but refused alike.
        check_size::<T>(host_size, name)?;
        Ok(SizedOut { ptr, host_size })
    }

    /// The number of bytes a write copies: `min(struct_size, ours)`.
    pub(crate) fn len(&self) -> usize {
        self.host_size.min(size_of::<T>())
    }

    /// Writes a report or snapshot: `min(struct_size, ours)` bytes, `struct_size` set to that
    /// number.
    pub(crate) fn write(self, mut value: T) {
        let n = self.len();
        set_struct_size(&mut value, n);
        self.copy(&value, n);
    }

    /// Writes a struct filled with defaults (a `_defaults` function): `min(struct_size, ours)`
    /// bytes, the host's `struct_size` kept.
    pub(crate) fn write_keeping_size(self, mut value: T) {
        let n = self.len();
        set_struct_size(&mut value, self.host_size);
        self.copy(&value, n);
    }

    fn copy(&self, value: &T, n: usize) {
        // SAFETY: the host's struct is valid for `host_size >= n` bytes of writes (`new`'s
        // contract), our value for `size_of::<T>() >= n` reads; a local cannot overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (value as *const T).cast::<u8>(),
                self.ptr.cast::<u8>(),
                n,
            );
        }
    }
}

/// [`crate::kit::answer_into`] for a growable output struct.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `struct_size` bytes during the call.
pub(crate) unsafe fn answer_sized_into<A, T: Growable>(
    args: impl FnOnce() -> Result<A, FfiError>,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(A) -> Result<T, FfiError>,
) -> gpusvc_result {
    crate::kit::ffi_guard(|| {
        let args = args()?;
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { SizedOut::new(out, out_name) }?;
        out.write(answer(args)?);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 2 of a test struct: `b` was appended to version 1 (`struct_size`, `a`).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct gpusvc_test_v2 {
        struct_size: usize,
        a: u64,
        b: u64,
    }
    growable!(gpusvc_test_v2 {
        first: a,
        last: b,
        defaults: gpusvc_test_v2 {
            struct_size: 0,
            a: 1,
            b: 2,
        }
    });

    fn words(w: &[u64]) -> Vec<u64> {
        w.to_vec()
    }

    fn read(w: &[u64]) -> Result<gpusvc_test_v2, FfiError> {
        // SAFETY: `w` is a live buffer of `w[0]` bytes at least in every call below.
        unsafe { sized_in(w.as_ptr().cast::<gpusvc_test_v2>(), "t") }
    }

    fn code(r: Result<gpusvc_test_v2, FfiError>) -> gpusvc_result {
        r.unwrap_err().code()
    }

    #[test]
    fn inputs_follow_the_rule() {
        assert_eq!(gpusvc_test_v2::FIRST_SIZE, 16);
        // The same version.
        let v = read(&words(&[24, 10, 20])).unwrap();
        assert_eq!((v.struct_size, v.a, v.b), (24, 10, 20));
        // An old host: `b` takes its default.
        let v = read(&words(&[16, 10, 99])).unwrap();
        assert_eq!((v.a, v.b), (10, 2));
        // A newer host with its new field zero, then set.
        let v = read(&words(&[32, 10, 20, 0])).unwrap();
        assert_eq!((v.a, v.b), (10, 20));
        let e = read(&words(&[32, 10, 20, 1 << 8])).unwrap_err();
        assert_eq!(e.code(), gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE);
        assert!(format!("{e:?}").contains("byte 25 of the 32-byte"), "{e:?}");
        // Too small, 0, absurd.
        for size in [0, 8, 15, 20] {
            assert_eq!(
                code(read(&words(&[size, 10, 20]))),
                gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE
            );
        }
        assert_eq!(
            code(read(&words(&[MAX_STRUCT_SIZE as u64 + 1, 10, 20]))),
            gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE
        );
        // SAFETY: NULL is checked first.
        let e = unsafe { sized_in::<gpusvc_test_v2>(std::ptr::null(), "t") }.unwrap_err();
        assert_eq!(e.code(), gpusvc_result::GPUSVC_NULL_ARGUMENT);
    }

    #[test]
    fn outputs_write_exactly_the_hosts_size() {
        let value = gpusvc_test_v2 {
            struct_size: 0,
            a: 7,
            b: 8,
        };
        for (size, want) in [
            (16u64, [16, 7, 0xee, 0xee]),
            (24, [24, 7, 8, 0xee]),
            (32, [24, 7, 8, 0xee]),
        ] {
            let mut buf = [size, 0xee, 0xee, 0xee];
            // SAFETY: `buf` has room for 32 bytes, at least `size`.
            let out =
                unsafe { SizedOut::new(buf.as_mut_ptr().cast::<gpusvc_test_v2>(), "o") }.unwrap();
            out.write(value);
            assert_eq!(buf, want, "struct_size {size}");
        }
        let mut buf = [32u64, 0xee, 0xee, 0xee];
        // SAFETY: as above.
        let out = unsafe { SizedOut::new(buf.as_mut_ptr().cast::<gpusvc_test_v2>(), "o") }.unwrap();
        out.write_keeping_size(value);
        assert_eq!(buf, [32, 7, 8, 0xee]);
        for size in [0u64, 15] {
            let mut buf = [size, 0xee, 0xee, 0xee];
            // SAFETY: as above.
            let e = unsafe { SizedOut::new(buf.as_mut_ptr().cast::<gpusvc_test_v2>(), "o") }
                .unwrap_err();
            assert_eq!(e.code(), gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE);
            assert_eq!(buf, [size, 0xee, 0xee, 0xee]);
        }
    }
}
