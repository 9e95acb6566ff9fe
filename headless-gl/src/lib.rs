//! Headless OpenGL / OpenGL ES contexts on the machine's own EGL driver.
//!
//! `headless-gl` opens a GL context with no window and no display server: it enumerates EGL devices
//! (`EGL_EXT_device_enumeration`), opens the EGL *device platform* on the chosen one, picks a
//! PBUFFER-capable config, creates a desktop GL core (>= 4.3 by default) or GLES 3.x context and makes
//! it current without a surface. A desktop *compatibility* profile context, which also accepts
//! legacy GLSL (`#version 110` to `140`), is opt-in ([`ApiPreference::DesktopCompatibility`]). All rendering goes to offscreen framebuffers. On a machine without a
//! GPU this is Mesa's llvmpipe; on a machine with one (NVIDIA's EGL, Mesa's hardware drivers) a
//! hardware device is preferred over a software one. `GPUSVC_EGL_DEVICE` (`auto`, `hardware`,
//! `software` or a device index; [`DeviceSelection`]) forces a device: a value that is none of
//! these or matches no device is a [`ContextError::NoEglDevice`] that lists the valid forms and
//! the devices EGL found, never a silent fall back to another device.
//!
//! On top of the context it offers what a GPU-process service needs to prove behaviour on a real
//! driver: the driver identity ([`DriverInfo`]), compile and link from source with the driver's info
//! log on failure — synchronously or in two phases (`start_*`, `*_completion`, `finish_*`) that
//! let a driver with `KHR_parallel_shader_compile` work in the background — for every program
//! kind (vertex, tessellation, geometry and fragment stages, compute, separable programs,
//! transform feedback), program binaries out of and into the driver (a binary the driver refuses
//! is a typed [`BinaryError::Rejected`], never a crash), reflection of active attributes and
//! uniforms and of the rest of the program interface ([`GlContext::program_interface`]: fragment
//! outputs, transform-feedback varyings, uniform and storage blocks with their members, static
//! use, work-group size), and running programs with read-back: drawing into an offscreen
//! framebuffer (also through tessellation, a program pipeline or with transform-feedback
//! capture) and compute dispatches over shader storage buffers.
//!
//! # Guarantees
//! * Every GL object ([`Shader`], [`Program`], [`OffscreenTarget`]) is owned by the context that
//!   made it and is deleted when dropped, with its context made current first. Passing an object to
//!   another context's method is an error ([`ForeignObject`]), not a silent use of a wrong name.
//! * Before each operation the context makes itself current on the calling thread, so several
//!   contexts on one thread do not step on each other.
//! * Inside a [`KeepHostCurrent`] scope, whatever EGL context, surfaces, display and client API
//!   were current on the thread before this crate first made one of its contexts current there
//!   are current again when the outermost scope ends, failures included; nothing current before
//!   means nothing current after (tests `the_host_context_is_current_again_after_a_scope`,
//!   `with_nothing_current_before_nothing_is_current_after` in `tests/host_current.rs`).
//! * The two-phase calls give what the synchronous ones give: a link started with
//!   [`GlContext::start_link_program`] and finished with [`GlContext::finish_link_program`]
//!   after polling [`GlContext::program_completion`] has the same result, info log and
//!   reflection as [`GlContext::link_program`] of the same shaders; likewise for compiles (test
//!   `started_links_finish_with_the_results_and_logs_of_synchronous_ones` in
//!   `tests/parallel_link.rs`). Without the extension they work, synchronously.
//! * A program loaded from its own binary runs like the program linked from source (same
//!   pixels, buffers, captures) and has the same [`GlContext::program_interface`], stages and
//!   `GL_PROGRAM_SEPARABLE` included, for compute, geometry, tessellation, separable and
//!   transform-feedback programs on desktop GL and GLES (tests in `tests/program_kinds.rs`;
//!   the stages of a loaded program are inferred, see [`GlContext::load_program_binary`]).
//! * A thread [`GlContext::spawn_shared`] starts has a context in the caller's share group,
//!   made on that thread (dropping the caller's context meanwhile waits until it is made:
//!   `dropping_the_spawning_context_at_once_still_lets_the_thread_make_its_context`). A program
//!   it links or loads from a binary and hands over ([`GlContext::hand_over`]: a fence after it,
//!   flushed) draws in the caller's context once adopted ([`GlContext::adopt`]: `glWaitSync`, no
//!   wait on the calling thread; the fence is deleted), and the adopted program is deleted with
//!   its new owner (`tests/shared_context.rs`). A program never crosses share groups: handing
//!   over another context's program, or adopting one of another group, gives it back with
//!   [`ForeignObject`] (`programs_do_not_cross_share_groups`). Such threads' contexts are kept
//!   for the next such thread and destroyed only with the spawning context, so thread after
//!   thread can hand programs over while the spawning context draws
//!   (`thread_after_thread_hands_programs_the_host_draws_with_while_they_run`: Mesa 22.3
//!   llvmpipe crashed in that draw when they were destroyed at once). A thread name with a NUL
//!   byte is an error, not a panic.
//! * Nothing here panics on driver output: bad binaries, failing compiles, missing extensions and
//!   unsupported versions all come back as error values that say what is missing.
//!
//! # Errors
//! Each operation has its own error enum ([`ContextError`], [`ShaderError`], [`LinkError`],
//! [`BinaryError`], [`DrawError`]); all implement [`std::error::Error`] and carry the driver's info
//! log where the driver gives one.
//!
//! # Thread safety
//! A [`GlContext`] is `!Send` and `!Sync`: an EGL context is current on at most one thread, so a
//! context and its objects live on the thread that opened them. Any number of threads may each open
//! their own context at the same time, or run one [`GlContext::spawn_shared`] made; a
//! [`HandedProgram`] is `Send` and is how a program moves between them.
//!
//! # Test support
//! The workspace's GL test policy (a fresh `MESA_SHADER_CACHE_DIR` per test process; skip with a
//! reason when no driver is present, fail when `GPUSVC_REQUIRE_GL` is set) lives in the
//! unpublished `gpusvc-test-support` crate (`test_support::gl`).

mod context;
mod draw;
mod driver;
mod program;
mod reflect;

pub use context::{
    ApiPreference, ContextError, ContextOptions, ContextProfile, DEVICE_ENV, DeviceSelection,
    DeviceSelectionError, GlContext, KeepHostCurrent, NotCurrent,
};
pub use draw::{
    DrawCall, DrawError, OffscreenTarget, StorageBuffer, UniformValue, VertexAttribute,
};
pub use driver::{DeviceInfo, DriverInfo, GlApi, GlVersion};
pub use program::{
    ActiveVariable, AttributeBinding, BinaryError, BlockMember, BuildError, ForeignObject,
    HandOverError, HandedProgram, InterfaceBlock, LinkError, LinkOptions, Program, ProgramBinary,
    ProgramInterface, ProgramOutput, ReflectError, Shader, ShaderError, ShaderStage, StageMask,
    TransformFeedbackMode, Varying,
};

/// The `glow` crate this crate is built on, re-exported so callers use the same version for the
/// escape hatch [`GlContext::gl`].
pub use glow;
