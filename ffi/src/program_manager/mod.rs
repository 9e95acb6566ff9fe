//! The compile/link flow through the program cache, seen from C: `gpusvc_program_manager_*`,
//! `gpusvc_program_manager_shader_*`, `gpusvc_program_manager_linked_program_*`, and the host GL entry points
//! (`gpusvc_program_manager_host_gl`, `gpusvc_program_manager_host_sink_*`).
//!
//! A manager runs either on a `gpusvc_gl_context` (headless-gl on the machine's driver) or on
//! the host's own GL through callbacks. Managers, shaders and linked programs are bound to the
//! thread that made the manager (GL contexts are current on one thread): from any other thread
//! every call, `_free` included, returns `GPUSVC_WRONG_THREAD`.
//!
//! * this module: the C enumerations and the handle types;
//! * [`host_gl`]: the host-GL backend (`gpusvc_program_manager_host_gl`, the callbacks behind a
//!   `ProgramBackend`); [`sink`]: the sinks those callbacks write to;
//! * [`objects`]: the objects behind the handles (one `ProgramManager<DynBackend>` whichever
//!   the backend, its shaders and linked programs);
//! * [`manager`], [`shader`], [`linked`]: the exports of each handle.
//!
//! # Guarantees of the two-phase flow and every program kind (issue 16; tests in
//! `ffi/tests/program_manager_issue16_abi.rs` and `program_manager_host_stages_abi.rs`, and
//! through `gpusvc.hpp` in `cpp-tests/program_manager_parallel_test.cpp`)
//! * Links started with `gpusvc_program_manager_start_link` and polled to completion give the
//!   same programs, reflection, result codes and logs as synchronous links
//!   (`started_links_polled_to_completion_match_synchronous_links`).
//! * `gpusvc_program_manager_finish_link` consumes its pending link whenever it gets past the
//!   argument checks, so it can never be freed or finished twice; a pending link of another
//!   manager is refused and stays live (`every_new_export_refuses_null_and_misuse`).
//! * A shader list is checked (count 1 to 6, before the array is read; no NULL, no repeat, no
//!   shader of another manager) before anything is compiled or linked
//!   (`every_new_export_refuses_null_and_misuse`).
//! * A compute program linked through `gpusvc_program_manager_link_program` is restored by
//!   another manager on the same cache with the same reflection and work-group size
//!   (`a_compute_program_linked_through_link_program_comes_back_from_the_cache`), and its key
//!   equals `gpusvc_program_cache_program_key`'s for the same stages
//!   (`program_keys_from_c_match_the_managers_for_every_stage`).
//! * A failed compile or link comes back from another manager with the driver's log byte for
//!   byte, without the driver (`failed_compiles_and_links_come_back_with_the_same_log_without_the_driver`).
//! * With `cache_transform_feedback` false no transform-feedback program is stored
//!   (`the_transform_feedback_switch_keeps_such_programs_out`).
//! * Translator maps set from C (varyings, outputs, blocks, precision, static use) are stored
//!   and restored by a cache hit (`translator_maps_take_varyings_outputs_and_qualifiers`).
//! * A host-GL manager links every kind but vertex + fragment through `link_stages`, and uses
//!   the parallel callbacks only as complete groups of three
//!   (`link_stages_links_every_program_kind_but_vertex_plus_fragment`,
//!   `parallel_callbacks_come_in_groups_of_three`); what its `program_interface` callback
//!   reports reaches the linked program and again after a cache hit
//!   (`a_hosts_program_interface_reaches_the_linked_program_and_survives_the_cache`).

use std::ffi::c_char;

use program_cache::{CompileOutcome, LinkOrigin};

use crate::kit::{c_enum, growable};
use crate::program_cache::gpusvc_program_cache_link_options;

pub(crate) mod host_gl;
pub(crate) mod linked;
pub(crate) mod manager;
pub(crate) mod objects;
pub(crate) mod shader;
pub(crate) mod sink;

pub use host_gl::*;
pub use linked::*;
pub use manager::*;
pub use shader::*;
pub use sink::*;

/// Compile outcome: the driver compiled the shader.
pub const GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED: u32 = 0u32;
/// Compile outcome: its compile status was known (cache hit); the driver compile is deferred
/// until a link needs the shader.
pub const GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED: u32 = 1u32;
/// Compile outcome: the driver refused it; `gpusvc_program_manager_shader_info_log` has the log.
pub const GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED: u32 = 2u32;
/// Compile outcome: the cache holds the record of this exact shader failing to compile; the
/// driver was not asked again and `gpusvc_program_manager_shader_info_log` has the driver's
/// log, byte for byte.
pub const GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_KNOWN_FAILURE: u32 = 3u32;
/// Compile outcome: started on the driver without waiting (parallel compile); the result comes
/// with `gpusvc_program_manager_finish_compile` or the link.
pub const GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_PENDING: u32 = 4u32;

/// Shader state: never compiled.
pub const GPUSVC_PROGRAM_MANAGER_SHADER_STATE_NOT_COMPILED: u32 = 0u32;
/// Shader state: compiled by the driver.
pub const GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILED: u32 = 1u32;
/// Shader state: known to compile; the driver compile waits until a link needs it.
pub const GPUSVC_PROGRAM_MANAGER_SHADER_STATE_DEFERRED: u32 = 2u32;
/// Shader state: the driver refused it.
pub const GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED: u32 = 3u32;
/// Shader state: its compile was started and not finished yet.
pub const GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILING: u32 = 4u32;

/// Link origin: restored from a cached binary.
pub const GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT: u32 = 0u32;
/// Link origin: compiled and linked from source (a cache miss).
pub const GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED: u32 = 1u32;
/// Link origin: the driver refused the cached binary; linked from source instead.
pub const GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_RELINKED_AFTER_REJECTION: u32 = 2u32;

c_enum!(fn compile_outcome_in / compile_outcome_out ("GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME") -> CompileOutcome {
    GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED => CompileOutcome::Compiled,
    GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED => CompileOutcome::Deferred,
    GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED => CompileOutcome::Failed,
    GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_KNOWN_FAILURE => CompileOutcome::KnownFailure,
    GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_PENDING => CompileOutcome::Pending,
});

c_enum!(fn link_origin_in / link_origin_out ("GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN") -> LinkOrigin {
    GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT => LinkOrigin::CacheHit,
    GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED => LinkOrigin::Linked,
    GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_RELINKED_AFTER_REJECTION => LinkOrigin::RelinkedAfterRejection,
});

// ---- handles ----

/// An opaque program manager (the compile/link flow through a program cache), bound to the
/// thread that made it.
#[derive(Debug)]
pub struct gpusvc_program_manager {
    _opaque: [u8; 0],
}

/// An opaque shader of one program manager: stage, source, compile options, variable maps and
/// compile state. Bound to its manager's thread.
#[derive(Debug)]
pub struct gpusvc_program_manager_shader {
    _opaque: [u8; 0],
}

/// An opaque linked program: its driver object, key, origin and reflection. Freeing it deletes
/// the driver object (GL form; host form when `delete_program` is given) and drops its
/// deferred binary read, if it has one (see `gpusvc_program_manager_forget_deferred_binary`).
#[derive(Debug)]
pub struct gpusvc_program_manager_linked_program {
    _opaque: [u8; 0],
}

/// A link started with `gpusvc_program_manager_start_link` and not finished yet: it holds the
/// driver's program object. End it with `gpusvc_program_manager_finish_link` (which consumes
/// it) or drop it with `gpusvc_program_manager_pending_link_free`. Bound to its manager's
/// thread.
#[derive(Debug)]
pub struct gpusvc_program_manager_pending_link {
    _opaque: [u8; 0],
}

/// Block kind: uniform blocks (`GL_UNIFORM_BLOCK`).
pub const GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM: u32 = 0u32;
/// Block kind: shader storage blocks (`GL_SHADER_STORAGE_BLOCK`).
pub const GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE: u32 = 1u32;

/// Which block list: `GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Uniform,
    Storage,
}

c_enum!(fn block_kind_in("GPUSVC_PROGRAM_MANAGER_BLOCK_KIND") -> BlockKind {
    GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM => BlockKind::Uniform,
    GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE => BlockKind::Storage,
});

/// A uniform block or shader storage block of a linked program, as the driver reports it. The
/// name belongs to the program's handle and stays valid until it is freed. The host sets
/// `struct_size = sizeof(struct gpusvc_program_manager_block)`; only that many bytes are
/// written and `struct_size` becomes the bytes written.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_block {
    /// `sizeof(struct gpusvc_program_manager_block)`, set by the host.
    pub struct_size: usize,
    /// Name (`Block` or `Block[2]`), UTF-8, NUL-terminated.
    pub name: *const c_char,
    /// `GL_BUFFER_BINDING`.
    pub binding: i32,
    /// `GL_BUFFER_DATA_SIZE` in bytes.
    pub data_size: i32,
    /// The stages that statically use it (`GL_REFERENCED_BY_*_SHADER`): bit
    /// `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` per stage.
    pub referenced_by: u32,
    /// Zero (and must be zero when passed in).
    pub reserved: u32,
    /// Members (`gpusvc_program_manager_linked_program_block_member`), sorted by name.
    pub member_count: usize,
}

growable!(gpusvc_program_manager_block {
    first: member_count,
    last: member_count,
    defaults: gpusvc_program_manager_block {
        struct_size: 0,
        name: std::ptr::null(),
        binding: 0,
        data_size: 0,
        referenced_by: 0,
        reserved: 0,
        member_count: 0,
    },
});

/// One member of a uniform or storage block (`GL_UNIFORM` / `GL_BUFFER_VARIABLE`). The name
/// belongs to the program's handle. The host sets `struct_size = sizeof(struct
/// gpusvc_program_manager_block_member)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_block_member {
    /// `sizeof(struct gpusvc_program_manager_block_member)`, set by the host.
    pub struct_size: usize,
    /// Name (`Block.member` or `member`), UTF-8, NUL-terminated.
    pub name: *const c_char,
    /// GL type enum.
    pub gl_type: u32,
    /// `GL_ARRAY_SIZE` (0 for an unsized trailing array).
    pub array_size: i32,
    /// `GL_OFFSET` in bytes.
    pub offset: i32,
    /// `GL_ARRAY_STRIDE`.
    pub array_stride: i32,
    /// `GL_MATRIX_STRIDE`.
    pub matrix_stride: i32,
    /// `GL_IS_ROW_MAJOR`.
    pub row_major: bool,
    /// Zero.
    pub reserved: [u8; 3],
}

growable!(gpusvc_program_manager_block_member {
    first: reserved,
    last: reserved,
    defaults: gpusvc_program_manager_block_member {
        struct_size: 0,
        name: std::ptr::null(),
        gl_type: 0,
        array_size: 1,
        offset: 0,
        array_stride: 0,
        matrix_stride: 0,
        row_major: false,
        reserved: [0; 3],
    },
});

/// A uniform or storage block of a shader's variable maps, as a translator reports it
/// (`gpusvc_program_manager_shader_set_blocks`, `gpusvc_program_manager_shader_block`). In
/// arguments the names must be non-NULL UTF-8 and `members` valid for `member_count` entries;
/// in results every pointer points into the shader's handle and stays valid until it is freed,
/// given new variables, or linked. No `struct_size`: an element of arrays passed with a count.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_shader_block_info {
    /// Block name in the application's source.
    pub name: *const c_char,
    /// Name in the translated source.
    pub mapped_name: *const c_char,
    /// `binding` layout qualifier (or `GL_BUFFER_BINDING`).
    pub binding: i32,
    /// `GL_BUFFER_DATA_SIZE` in bytes (0 when not known).
    pub data_size: i32,
    /// Whether the shader statically uses it.
    pub static_use: bool,
    /// Must be zero.
    pub reserved: [u8; 7],
    /// Members (their `location` is the byte offset; may be NULL when `member_count` is 0).
    pub members: *const crate::program_cache::gpusvc_program_cache_variable_info,
    /// Number of members.
    pub member_count: usize,
}

/// What a translator reports about a variable of a shader's maps besides
/// `gpusvc_program_cache_variable_info` (which has no `struct_size`, being an element of arrays
/// and embedded in other structs, so it cannot grow). The host sets `struct_size =
/// sizeof(struct gpusvc_program_manager_variable_qualifiers)`, both to pass one and to have one
/// filled.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_variable_qualifiers {
    /// `sizeof(struct gpusvc_program_manager_variable_qualifiers)`, set by the host.
    pub struct_size: usize,
    /// Precision qualifier as a GL enum (`GL_LOW_FLOAT` 0x8DF0 ... `GL_HIGH_INT` 0x8DF5), 0
    /// when none.
    pub precision: u32,
    /// Whether the shader statically uses the variable.
    pub static_use: bool,
    /// Must be zero.
    pub reserved: [u8; 3],
}

growable!(gpusvc_program_manager_variable_qualifiers {
    first: reserved,
    last: reserved,
    defaults: gpusvc_program_manager_variable_qualifiers {
        struct_size: 0,
        precision: 0,
        static_use: false,
        reserved: [0; 3],
    },
});

/// One active attribute or uniform of a linked program, as the driver reports it. In results
/// `name` belongs to the handle and stays valid until it is freed; from a host callback it is
/// copied. The host sets `struct_size = sizeof(struct gpusvc_program_manager_active_variable)`
/// both when it passes one (`gpusvc_program_manager_host_sink_push_variable`) and when one is
/// filled (`gpusvc_program_manager_linked_program_variable`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_active_variable {
    /// `sizeof(struct gpusvc_program_manager_active_variable)`, set by the host: passed in,
    /// only that many bytes are read (fields past it take their defaults); filled, only that
    /// many bytes are written and this is set to the bytes written.
    pub struct_size: usize,
    /// Name (`u_array[0]` for arrays), UTF-8, NUL-terminated.
    pub name: *const c_char,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub size: i32,
    /// Whether `location` is meaningful.
    pub has_location: bool,
    /// Location.
    pub location: i32,
    /// A fragment output's `GL_LOCATION_INDEX` (dual-source blending); -1 for other variables
    /// and when the driver has none (also when passed in with a `struct_size` that stops
    /// before it).
    pub location_index: i32,
    /// Must be zero.
    pub reserved: u32,
}

growable!(gpusvc_program_manager_active_variable {
    first: location,
    last: reserved,
    defaults: gpusvc_program_manager_active_variable {
        struct_size: 0,
        name: std::ptr::null(),
        gl_type: 0,
        size: 1,
        has_location: false,
        location: -1,
        location_index: -1,
        reserved: 0,
    },
});

/// Options of a link: attribute bindings and transform feedback (part of the key) and the page
/// the program is for. The host sets `struct_size = sizeof(struct
/// gpusvc_program_manager_program_options)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_program_options {
    /// `sizeof(struct gpusvc_program_manager_program_options)`, set by the host: the library
    /// reads only that many bytes, the fields past it take their defaults.
    pub struct_size: usize,
    /// Bindings and transform feedback.
    pub link: gpusvc_program_cache_link_options,
    /// Whether `page` is given.
    pub has_page: bool,
    /// The page / client the program is for (for GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU).
    pub page: u64,
    /// `GL_PROGRAM_SEPARABLE` set before linking (a program for a program pipeline; part of
    /// the key). A separable program may have any graphics stages; one that is not needs a
    /// vertex and a fragment shader (or a compute shader alone). False when the host's
    /// `struct_size` stops before it. (`gpusvc_program_cache_link_options` has no
    /// `struct_size`, being embedded by value here and in
    /// `gpusvc_program_cache_program_key_input`, so it cannot grow; the flag lives here.)
    pub separable: bool,
    /// Must be zero (else `GPUSVC_INVALID_ARGUMENT`): keeps the struct free of padding after
    /// its last field, so a field added later lies past today's size.
    pub reserved: [u8; 7],
}

growable!(gpusvc_program_manager_program_options {
    first: page,
    last: reserved,
    defaults: gpusvc_program_manager_program_options {
        struct_size: 0,
        link: crate::program_cache::NO_LINK_OPTIONS,
        has_page: false,
        page: 0,
        separable: false,
        reserved: [0; 7],
    },
});
