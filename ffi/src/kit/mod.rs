//! The plumbing every service module of the C ABI uses, and nothing else:
//!
//! * [`error`]: `gpusvc_result` (codes, numbers, messages), `FfiError`, the panic boundary
//!   `ffi_guard` and the per-thread error detail;
//! * [`args`]: arguments in (structs, slices, text), checked;
//! * [`out`]: results out (`Out<T>` for one output pointer, `answer_into` for an export that
//!   answers through one, lists and text into caller buffers);
//! * [`handle`]: the registry of live handles (never reused; shared or thread-bound by kind);
//! * [`host`]: host callbacks (`UserData`, `HostFn`, the free-time `Gate`);
//! * [`sized`]: structs that can grow (`struct_size` first; in, out and `_defaults`);
//! * [`c_enum!`]: the strict decoder of each enumeration that arrives as `uint32_t`.
//!
//! The kit depends on no service module.

pub(crate) mod args;
pub(crate) mod error;
pub(crate) mod handle;
pub(crate) mod host;
mod macros;
pub(crate) mod out;
pub(crate) mod sized;

pub(crate) use args::{cstr_in, slice_in, source_in, struct_in, text_in};
pub(crate) use error::{FfiError, ffi_guard, gpusvc_result, invalid_argument, null_argument};
pub(crate) use host::{Gate, GatedFn, HostFn, UserData};
pub(crate) use macros::c_enum;
pub(crate) use out::{Out, answer_into, c_string, list_out, text_out, truncated_text_out};
pub(crate) use sized::{SizedOut, answer_sized_into, growable, sized_default, sized_in};
