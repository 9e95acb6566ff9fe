//! `gpusvc_program_manager_host_sink_*`: where a host GL callback writes what it returns (an info log, binary
//! bytes, active variables). A sink is a thread-bound handle registered for one callback.

use std::ffi::c_char;

use program_cache::{
    ActiveVariable, BlockMember, InterfaceBlock, ProgramInterface, ProgramOutput, ShaderStage,
    StageMask, Varying,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, cstr_in, ffi_guard, gpusvc_result, null_argument, sized_in, slice_in};
use crate::program_cache::stage_in;
use crate::program_manager::{
    BlockKind, block_kind_in, gpusvc_program_manager_active_variable, gpusvc_program_manager_block,
    gpusvc_program_manager_block_member,
};

/// The most entries one list of a program's interface may get from a host (outputs,
/// varyings, blocks, members of one block, static-use records): more is
/// `GPUSVC_INVALID_ARGUMENT` (bounded memory whatever the host does).
pub const GPUSVC_PROGRAM_MANAGER_HOST_SINK_MAX_ENTRIES: usize = 65_536;

fn bounded<T>(list: &[T], what: &str) -> Result<(), FfiError> {
    if list.len() >= GPUSVC_PROGRAM_MANAGER_HOST_SINK_MAX_ENTRIES {
        return Err(crate::kit::invalid_argument(format!(
            "more than {GPUSVC_PROGRAM_MANAGER_HOST_SINK_MAX_ENTRIES} {what}"
        )));
    }
    Ok(())
}

/// A C stage mask (bit `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`) as a `StageMask`; a bit of
/// no stage is `GPUSVC_INVALID_ARGUMENT`.
fn stage_mask_in(mask: u32) -> Result<StageMask, FfiError> {
    let mut out = StageMask::default();
    for bit in 0..32 {
        if mask & (1 << bit) != 0 {
            let stage: ShaderStage = stage_in(bit)?;
            out = out.with(stage);
        }
    }
    Ok(out)
}

/// Reads a variable a host pushes (the name copied, UTF-8; `reserved` zero).
///
/// # Safety
/// `variable` is NULL or valid for reading `variable->struct_size` bytes, its name NULL or
/// NUL-terminated.
unsafe fn pushed_variable(
    variable: *const gpusvc_program_manager_active_variable,
) -> Result<(String, gpusvc_program_manager_active_variable), FfiError> {
    // SAFETY: forwarded from this function's contract.
    let v = unsafe { sized_in(variable, "variable") }?;
    if v.reserved != 0 {
        return Err(crate::kit::invalid_argument(
            "variable->reserved is not zero",
        ));
    }
    // SAFETY: forwarded from this function's contract.
    let name = unsafe { cstr_in(v.name, "variable->name") }?.to_owned();
    Ok((name, v))
}

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
    pub(crate) interface: ProgramInterface,
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

/// Adds a fragment output (`GL_PROGRAM_OUTPUT`) to a `program_interface` sink: name, type,
/// array size, location (`has_location` false: -1) and `location_index`.
///
/// # Safety
/// As `gpusvc_program_manager_host_sink_push_variable`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_push_output(
    sink: *mut gpusvc_program_manager_host_sink,
    variable: *const gpusvc_program_manager_active_variable,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        push_interface_variable(
            sink,
            variable,
            "outputs",
            |i| &mut i.outputs,
            |name, v| ProgramOutput {
                name,
                gl_type: v.gl_type,
                size: v.size,
                location: if v.has_location { v.location } else { -1 },
                index: v.location_index,
            },
        )
    }
}

/// Adds a transform-feedback varying (in link order) to a `program_interface` sink: name,
/// type, array size (the location fields are ignored).
///
/// # Safety
/// As `gpusvc_program_manager_host_sink_push_variable`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_push_varying(
    sink: *mut gpusvc_program_manager_host_sink,
    variable: *const gpusvc_program_manager_active_variable,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        push_interface_variable(
            sink,
            variable,
            "varyings",
            |i| &mut i.varyings,
            |name, v| Varying {
                name,
                gl_type: v.gl_type,
                size: v.size,
            },
        )
    }
}

/// The body of the exports that push a variable onto a `program_interface` list: reads the
/// pushed variable, then adds the entry `make` builds from its name and fields to the list that
/// `list` picks (at most `GPUSVC_PROGRAM_MANAGER_HOST_SINK_MAX_ENTRIES`, `what` in the error).
///
/// # Safety
/// As `gpusvc_program_manager_host_sink_push_variable`.
unsafe fn push_interface_variable<T>(
    sink: *mut gpusvc_program_manager_host_sink,
    variable: *const gpusvc_program_manager_active_variable,
    what: &str,
    list: impl FnOnce(&mut ProgramInterface) -> &mut Vec<T>,
    make: impl FnOnce(String, &gpusvc_program_manager_active_variable) -> T,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        // SAFETY: forwarded from this function's contract.
        let (name, v) = unsafe { pushed_variable(variable) }?;
        let mut data = sink.borrow_mut()?;
        let list = list(&mut data.interface);
        bounded(list, what)?;
        list.push(make(name, &v));
        Ok(())
    })
}

fn blocks_of(i: &mut ProgramInterface, kind: BlockKind) -> &mut Vec<InterfaceBlock> {
    match kind {
        BlockKind::Uniform => &mut i.uniform_blocks,
        BlockKind::Storage => &mut i.storage_blocks,
    }
}

/// Adds a block of `kind` (`GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*`) to a `program_interface`
/// sink: name, binding, data size and `referenced_by` (bit `1 << ..._SHADER_STAGE_*`);
/// `member_count` is ignored: members follow with
/// `gpusvc_program_manager_host_sink_push_block_member`.
///
/// # Safety
/// `block` is NULL or valid for reading `block->struct_size` bytes, its name NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_push_block(
    sink: *mut gpusvc_program_manager_host_sink,
    kind: u32,
    block: *const gpusvc_program_manager_block,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        let kind = block_kind_in(kind)?;
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let b = unsafe { sized_in(block, "block") }?;
        if b.reserved != 0 {
            return Err(crate::kit::invalid_argument("block->reserved is not zero"));
        }
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { cstr_in(b.name, "block->name") }?.to_owned();
        let referenced_by = stage_mask_in(b.referenced_by)?;
        let mut data = sink.borrow_mut()?;
        let list = blocks_of(&mut data.interface, kind);
        bounded(list, "blocks")?;
        list.push(InterfaceBlock {
            name,
            binding: b.binding,
            data_size: b.data_size,
            members: Vec::new(),
            referenced_by,
        });
        Ok(())
    })
}

/// Adds a member to the last block of `kind` pushed to a `program_interface` sink (none yet:
/// `GPUSVC_INVALID_ARGUMENT`).
///
/// # Safety
/// `member` is NULL or valid for reading `member->struct_size` bytes, its name NULL or
/// NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_push_block_member(
    sink: *mut gpusvc_program_manager_host_sink,
    kind: u32,
    member: *const gpusvc_program_manager_block_member,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        let kind = block_kind_in(kind)?;
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let m = unsafe { sized_in(member, "member") }?;
        if m.reserved != [0; 3] {
            return Err(crate::kit::invalid_argument("member->reserved is not zero"));
        }
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { cstr_in(m.name, "member->name") }?.to_owned();
        let mut data = sink.borrow_mut()?;
        let block = blocks_of(&mut data.interface, kind)
            .last_mut()
            .ok_or_else(|| crate::kit::invalid_argument("no block of this kind was pushed"))?;
        bounded(&block.members, "members")?;
        block.members.push(BlockMember {
            name,
            gl_type: m.gl_type,
            size: m.array_size,
            offset: m.offset,
            array_stride: m.array_stride,
            matrix_stride: m.matrix_stride,
            row_major: m.row_major,
        });
        Ok(())
    })
}

/// Records the stages (bit `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`) that statically use the
/// uniform `name` (as the host reported it through `active_uniforms`) in a `program_interface`
/// sink.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_set_uniform_static_use(
    sink: *mut gpusvc_program_manager_host_sink,
    name: *const c_char,
    stages: u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { cstr_in(name, "name") }?.to_owned();
        let mask = stage_mask_in(stages)?;
        let mut data = sink.borrow_mut()?;
        let list = &mut data.interface.uniform_static_use;
        bounded(list, "static-use records")?;
        match list.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = mask,
            None => list.push((name, mask)),
        }
        Ok(())
    })
}

/// Records `GL_COMPUTE_WORK_GROUP_SIZE` in a `program_interface` sink.
///
/// # Safety
/// None beyond passing a sink handle given to the callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_host_sink_set_compute_work_group_size(
    sink: *mut gpusvc_program_manager_host_sink,
    x: u32,
    y: u32,
    z: u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        sink.borrow_mut()?.interface.compute_work_group_size = Some([x, y, z]);
        Ok(())
    })
}
