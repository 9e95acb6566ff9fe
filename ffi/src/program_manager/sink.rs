//! `gpusvc_program_manager_host_sink_*`: where a host GL callback writes what it returns (an info log, binary
//! bytes, active variables). A sink is a thread-bound handle registered for one callback.

use std::ffi::c_char;

use program_cache::ActiveVariable;

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, cstr_in, ffi_guard, gpusvc_result, null_argument, sized_in, slice_in};
use crate::program_manager::gpusvc_program_manager_active_variable;

/// Where a host callback writes what it returns (an info log, binary bytes, active variables).
/// Valid only during the callback it was passed to, on that thread.
#[derive(Debug)]
pub struct gpusvc_program_manager_host_sink {
    _opaque: [u8; 0],
}

/// What a host callback wrote to its sink.
#[derive(Debug, Default)]
pub(crate) struct SinkData {
    pub(crate) text: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) variables: Vec<ActiveVariable>,
}

/// A sink registered for the length of one callback; unregistered on drop.
pub(crate) struct Sink(*mut gpusvc_program_manager_host_sink);

impl Sink {
    pub(crate) fn new() -> Self {
        Sink(handle::new_local(Kind::HostSink, SinkData::default()))
    }
    /// The handle to pass to the host's callback.
    pub(crate) fn handle(&self) -> *mut gpusvc_program_manager_host_sink {
        self.0
    }

    /// Unregisters the sink and returns what the callback wrote.
    pub(crate) fn finish(self) -> SinkData {
        let data = handle::take_local(self.0, Kind::HostSink);
        std::mem::forget(self);
        data
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _: SinkData = handle::take_local(self.0, Kind::HostSink);
    }
}

fn sink(sink: *mut gpusvc_program_manager_host_sink) -> Result<handle::Local<SinkData>, FfiError> {
    handle::local(sink, "sink", Kind::HostSink)
}

/// Appends `len` bytes of text (an info log, a reason) to a sink; invalid UTF-8 is replaced.
///
/// # Safety
/// `text` is NULL or valid for `len` bytes of reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_write_text(
    sink: *mut gpusvc_program_manager_host_sink,
    text: *const c_char,
    len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        if text.is_null() {
            return Err(null_argument("text"));
        }
        // SAFETY: forwarded from this function's contract.
        let bytes = unsafe { slice_in(text.cast::<u8>(), len, "text") }?;
        sink.borrow_mut()?
            .text
            .push_str(&String::from_utf8_lossy(bytes));
        Ok(())
    })
}

/// Appends `len` bytes (a program binary) to a sink.
///
/// # Safety
/// `bytes` is NULL or valid for `len` bytes of reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_write_bytes(
    sink: *mut gpusvc_program_manager_host_sink,
    bytes: *const u8,
    len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        if bytes.is_null() {
            return Err(null_argument("bytes"));
        }
        // SAFETY: forwarded from this function's contract.
        let bytes = unsafe { slice_in(bytes, len, "bytes") }?;
        sink.borrow_mut()?.bytes.extend_from_slice(bytes);
        Ok(())
    })
}

/// Adds one active variable to a sink (the name is copied; it must be UTF-8).
///
/// # Safety
/// `variable` is NULL or valid for reading `variable->struct_size` bytes, its name NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_push_variable(
    sink: *mut gpusvc_program_manager_host_sink,
    variable: *const gpusvc_program_manager_active_variable,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let v = unsafe { sized_in(variable, "variable") }?;
        if v.reserved != 0 {
            return Err(crate::kit::invalid_argument(
                "variable->reserved is not zero",
            ));
        }
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { cstr_in(v.name, "variable->name") }?;
        sink.borrow_mut()?.variables.push(ActiveVariable {
            name: name.to_owned(),
            gl_type: v.gl_type,
            size: v.size,
            location: v.has_location.then_some(v.location),
        });
        Ok(())
    })
}
