//! Opening a headless context: EGL device, display, config, context, make-current.

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_void};
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use glow::HasContext;
use glutin::api::egl::Egl;
use glutin::api::egl::context::{NotCurrentContext, PossiblyCurrentContext};
use glutin::api::egl::device::Device;
use glutin::api::egl::display::Display;
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{
    AsRawContext, ContextApi, ContextAttributesBuilder, GlProfile, RawContext, Version,
};
use glutin::display::GlDisplay;
use glutin::error::ErrorKind;
use glutin::prelude::PossiblyCurrentGlContext;

use crate::driver::{DeviceInfo, DriverInfo, GlApi, GlVersion};
use gl_types::{ShaderStage, StageMask};

/// Which API to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiPreference {
    /// Desktop GL core first, then GLES 3.x.
    #[default]
    Auto,
    /// Desktop GL core only.
    DesktopCore,
    /// Desktop GL *compatibility* profile only (opt-in, never picked by `Auto`). It accepts what
    /// core does plus legacy GLSL (`#version 110` to `140`, shaders without `#version`, built-in
    /// attributes such as `gl_Vertex`), which a core context refuses; the minimum version is
    /// [`ContextOptions::min_desktop_version`] as for core. The context's
    /// [`DriverInfo::api`](crate::DriverInfo::api) reads [`GlApi::DesktopCore`] (desktop GL);
    /// [`GlContext::profile`] tells the profiles apart.
    DesktopCompatibility,
    /// GLES 3.x only.
    Gles,
}

/// The profile a context runs, as the driver reports it (`GL_CONTEXT_PROFILE_MASK` on desktop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextProfile {
    /// Desktop GL core profile.
    Core,
    /// Desktop GL compatibility profile ([`ApiPreference::DesktopCompatibility`]).
    Compatibility,
    /// OpenGL ES (one profile).
    Es,
}

impl std::fmt::Display for ContextProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ContextProfile::Core => "core profile",
            ContextProfile::Compatibility => "compatibility profile",
            ContextProfile::Es => "ES",
        })
    }
}

/// The environment variable that picks the EGL device for [`DeviceSelection::FromEnv`] (the
/// default): `auto` (or unset, or empty), `hardware`, `software` or a device index.
pub const DEVICE_ENV: &str = "GPUSVC_EGL_DEVICE";

/// Which EGL device to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSelection {
    /// What `GPUSVC_EGL_DEVICE` says ([`DeviceSelection::from_env`]), read when the context is
    /// opened; [`DeviceSelection::PreferHardware`] when it is unset. A value that is not one of
    /// the valid forms is an error ([`DeviceSelectionError::Unparsable`]), never ignored.
    #[default]
    FromEnv,
    /// A hardware device when EGL lists one, else a software one. Devices are tried in that
    /// order until one gives a context.
    PreferHardware,
    /// Only hardware devices (those without `EGL_MESA_device_software`): an error when EGL lists
    /// none, never a silent fall back to software.
    Hardware,
    /// Only software devices (`EGL_MESA_device_software`, e.g. llvmpipe).
    Software,
    /// Only the device at this position in EGL's list.
    Index(usize),
}

impl std::fmt::Display for DeviceSelection {
    /// The `GPUSVC_EGL_DEVICE` form of the selection (`$GPUSVC_EGL_DEVICE` for
    /// [`DeviceSelection::FromEnv`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSelection::FromEnv => write!(f, "${DEVICE_ENV}"),
            DeviceSelection::PreferHardware => f.write_str("auto"),
            DeviceSelection::Hardware => f.write_str("hardware"),
            DeviceSelection::Software => f.write_str("software"),
            DeviceSelection::Index(i) => write!(f, "{i}"),
        }
    }
}

/// Why a device selection matched no device. In a [`ContextError::NoEglDevice`], whose text adds
/// the valid forms and the devices EGL lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceSelectionError {
    /// The value is none of `auto`, `hardware`, `software` or a device index.
    #[error("{value:?} is not a device selection")]
    Unparsable {
        /// The value as given (lossily decoded when it is not UTF-8).
        value: String,
    },
    /// [`DeviceSelection::Hardware`] and every device EGL lists is a software one.
    #[error("a hardware device was asked for and none of EGL's devices is one")]
    NoHardware,
    /// [`DeviceSelection::Software`] and every device EGL lists is a hardware one.
    #[error("a software device was asked for and none of EGL's devices is one")]
    NoSoftware,
    /// EGL lists no device at all.
    #[error("EGL lists no device")]
    NoDevice,
    /// [`DeviceSelection::Index`] past the end of EGL's list.
    #[error("device {index} was asked for and EGL lists {count}")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// How many devices EGL lists.
        count: usize,
    },
}

/// The valid `GPUSVC_EGL_DEVICE` forms, for error messages.
const VALID_FORMS: &str = "auto (or unset: a hardware device, else a software one), hardware, \
                           software, or a device index";

impl DeviceSelection {
    /// Parses a `GPUSVC_EGL_DEVICE` value: `auto`, `hardware`, `software` (any case, surrounding
    /// blanks ignored) or a device index. Never returns [`DeviceSelection::FromEnv`].
    pub fn parse(value: &str) -> Result<Self, DeviceSelectionError> {
        let trimmed = value.trim();
        match trimmed.to_ascii_lowercase().as_str() {
            "auto" => Ok(DeviceSelection::PreferHardware),
            "hardware" => Ok(DeviceSelection::Hardware),
            "software" => Ok(DeviceSelection::Software),
            _ if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) => trimmed
                .parse()
                .map(DeviceSelection::Index)
                .map_err(|_| DeviceSelectionError::Unparsable {
                    value: value.to_string(),
                }),
            _ => Err(DeviceSelectionError::Unparsable {
                value: value.to_string(),
            }),
        }
    }

    /// Reads `GPUSVC_EGL_DEVICE`: [`DeviceSelection::PreferHardware`] when it is unset or blank,
    /// else [`DeviceSelection::parse`] of its value (an error for anything else, a value that is
    /// not UTF-8 included).
    pub fn from_env() -> Result<Self, DeviceSelectionError> {
        match std::env::var_os(DEVICE_ENV) {
            None => Ok(DeviceSelection::PreferHardware),
            Some(raw) => match raw.to_str() {
                Some(value) if value.trim().is_empty() => Ok(DeviceSelection::PreferHardware),
                Some(value) => Self::parse(value),
                None => Err(DeviceSelectionError::Unparsable {
                    value: raw.to_string_lossy().into_owned(),
                }),
            },
        }
    }

    /// The selection in force: [`DeviceSelection::from_env`] for [`DeviceSelection::FromEnv`],
    /// else `self`.
    pub fn resolve(self) -> Result<Self, DeviceSelectionError> {
        match self {
            DeviceSelection::FromEnv => Self::from_env(),
            other => Ok(other),
        }
    }
}

/// How to open a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextOptions {
    /// API to open.
    pub api: ApiPreference,
    /// Lowest acceptable desktop GL core version (default 4.3: compute shaders, SSBOs,
    /// `GL_ARB_get_program_binary` in core).
    pub min_desktop_version: GlVersion,
    /// Lowest acceptable GLES version (default 3.0).
    pub min_gles_version: GlVersion,
    /// Which EGL device (default: what `GPUSVC_EGL_DEVICE` says, read at open).
    pub device: DeviceSelection,
}

impl Default for ContextOptions {
    /// Auto API, GL 4.3 / GLES 3.0, the device named by `GPUSVC_EGL_DEVICE` (read when the
    /// context is opened; a hardware device when there is one, else a software one, when unset).
    fn default() -> Self {
        ContextOptions {
            api: ApiPreference::Auto,
            min_desktop_version: GlVersion::new(4, 3),
            min_gles_version: GlVersion::new(3, 0),
            device: DeviceSelection::FromEnv,
        }
    }
}

/// Why a context could not be made. Each variant names what is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// `libEGL.so.1` could not be loaded.
    #[error(
        "no libEGL: libEGL.so.1 could not be loaded (install libegl1 and a vendor driver such as libegl-mesa0)"
    )]
    NoLibEgl,
    /// EGL loaded but lists no usable device (or cannot enumerate devices at all), or none that
    /// the device selection allows.
    #[error("no EGL device: {reason}")]
    NoEglDevice {
        /// What EGL said; for a selection error, also the valid forms and the devices EGL lists.
        reason: String,
        /// Set when the device selection ([`ContextOptions::device`], `GPUSVC_EGL_DEVICE`) is
        /// what matched no device.
        selection: Option<DeviceSelectionError>,
    },
    /// The device's display could not be initialized.
    #[error("EGL display on device {device} could not be initialized: {reason}")]
    DisplayInit {
        /// Device index.
        device: usize,
        /// What EGL said.
        reason: String,
    },
    /// No PBUFFER-capable config for the API.
    #[error("no matching EGL config: no PBUFFER config for {api} on device {device}")]
    NoMatchingConfig {
        /// Requested API.
        api: GlApi,
        /// Device index.
        device: usize,
    },
    /// The driver's GL version is below the minimum.
    #[error("GL version too old: {api} {found} available, {required} required")]
    VersionTooOld {
        /// Requested API.
        api: GlApi,
        /// What the driver offers.
        found: GlVersion,
        /// What was asked for.
        required: GlVersion,
    },
    /// `eglCreateContext` failed for another reason.
    #[error("creating a {api} context failed: {reason}")]
    ContextCreation {
        /// Requested API.
        api: GlApi,
        /// What EGL said.
        reason: String,
    },
    /// The context could not be made current on this thread.
    #[error("making the context current failed: {reason}")]
    MakeCurrent {
        /// What EGL said.
        reason: String,
    },
}

/// The context could not be made current before an operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the GL context could not be made current on this thread: {0}")]
pub struct NotCurrent(pub(crate) String);

pub(crate) struct Inner {
    // Field order is drop order: GL function pointers, then the context, then the display.
    gl: glow::Context,
    /// Entry points glow does not wrap, loaded from the same driver.
    pub(crate) ext: ExtFns,
    /// Always `Some` until drop takes it.
    context: Option<PossiblyCurrentContext>,
    display: Display,
    /// The share group's id: a context [`GlContext::spawn_shared`] makes has its maker's.
    pub(crate) group: u64,
    /// Contexts being made with this one's handle; drop waits for them.
    making: Arc<Making>,
    /// Contexts its [`GlContext::spawn_shared`] threads made, parked between uses; destroyed
    /// with it.
    helpers: Arc<Mutex<Helpers>>,
    /// For a context a [`GlContext::spawn_shared`] thread made: where it goes when its thread
    /// is done with it (the spawning context's helpers).
    park_in: Option<Arc<Mutex<Helpers>>>,
}

/// `glGetProgramInterfaceiv`.
type GetProgramInterfaceIv = unsafe extern "system" fn(u32, u32, u32, *mut i32);
/// `glGetProgramResourceName`.
type GetProgramResourceName = unsafe extern "system" fn(u32, u32, u32, i32, *mut i32, *mut c_char);
/// `glGetProgramResourceiv`.
type GetProgramResourceIv =
    unsafe extern "system" fn(u32, u32, u32, i32, *const u32, i32, *mut i32, *mut i32);
/// `glGetProgramiv` (glow's wrapper reads one value; `GL_COMPUTE_WORK_GROUP_SIZE` has three).
type GetProgramIv = unsafe extern "system" fn(u32, u32, *mut i32);
/// `glProgramParameteri`.
type ProgramParameterI = unsafe extern "system" fn(u32, u32, i32);
/// `glGenProgramPipelines` / `glDeleteProgramPipelines`.
type ProgramPipelines = unsafe extern "system" fn(i32, *mut u32);
/// `glBindProgramPipeline`.
type BindProgramPipeline = unsafe extern "system" fn(u32);
/// `glUseProgramStages`.
type UseProgramStages = unsafe extern "system" fn(u32, u32, u32);

/// GL entry points glow 0.18 does not wrap (or wraps for one value only), each loaded only when
/// the context's version or extensions promise it, so a `Some` is callable.
#[derive(Clone, Copy)]
pub(crate) struct ExtFns {
    /// Program interface queries (GL 4.3, GLES 3.1, `GL_ARB_program_interface_query`).
    pub(crate) interface: Option<InterfaceFns>,
    /// `glGetProgramiv` (every version).
    pub(crate) get_program_iv: Option<GetProgramIv>,
    /// `glProgramParameteri` (GL 4.1, GLES 3.0, `GL_ARB_get_program_binary`).
    pub(crate) program_parameter_i: Option<ProgramParameterI>,
    /// Separate shader objects: `GL_PROGRAM_SEPARABLE` and program pipelines (GL 4.1,
    /// GLES 3.1, `GL_ARB_separate_shader_objects`).
    pub(crate) pipelines: Option<PipelineFns>,
    /// `GL_KHR_parallel_shader_compile` or `GL_ARB_parallel_shader_compile` is listed.
    pub(crate) parallel_compile: bool,
    /// The context's API.
    pub(crate) api: GlApi,
    /// The stages the context offers (vertex and fragment always; compute from GL 4.3 /
    /// GLES 3.1; geometry from GL 3.2 / GLES 3.2 or `GL_EXT_geometry_shader`; tessellation from
    /// GL 4.0 / GLES 3.2 or `GL_EXT_tessellation_shader`).
    pub(crate) stages: StageMask,
    /// `GL_LOCATION_INDEX` of fragment outputs is queryable (desktop GL, or
    /// `GL_EXT_blend_func_extended` on GLES).
    pub(crate) location_index: bool,
}

/// The program interface query entry points.
#[derive(Clone, Copy)]
pub(crate) struct InterfaceFns {
    pub(crate) get_interface_iv: GetProgramInterfaceIv,
    pub(crate) get_resource_name: GetProgramResourceName,
    pub(crate) get_resource_iv: GetProgramResourceIv,
}

/// The program pipeline entry points.
#[derive(Clone, Copy)]
pub(crate) struct PipelineFns {
    pub(crate) create: ProgramPipelines,
    pub(crate) delete: ProgramPipelines,
    pub(crate) bind: BindProgramPipeline,
    pub(crate) use_stages: UseProgramStages,
}

impl ExtFns {
    /// Loads what the context offers. `version` is the context's, `api` its API.
    fn load(display: &Display, gl: &glow::Context, api: GlApi, version: GlVersion) -> Self {
        let has = |name: &str| gl.supported_extensions().contains(name);
        let at_least = |desktop: (u8, u8), es: (u8, u8)| match api {
            GlApi::DesktopCore => version >= GlVersion::new(desktop.0, desktop.1),
            GlApi::Gles => version >= GlVersion::new(es.0, es.1),
        };
        let lookup = |name: &CStr| {
            let f = display.get_proc_address(name);
            (!f.is_null()).then_some(f)
        };
        // SAFETY: each pointer comes from the driver's own `eglGetProcAddress` for the named
        // entry point, is non-null, and is only kept when the context's version or extension
        // list promises that entry point; the function types are the GL registry's prototypes
        // (GLuint/GLenum = u32, GLint/GLsizei = i32, GLchar = c_char) with the platform's GL
        // calling convention (`system`).
        unsafe {
            let interface = if at_least((4, 3), (3, 1)) || has("GL_ARB_program_interface_query") {
                match (
                    lookup(c"glGetProgramInterfaceiv"),
                    lookup(c"glGetProgramResourceName"),
                    lookup(c"glGetProgramResourceiv"),
                ) {
                    (Some(a), Some(b), Some(c)) => Some(InterfaceFns {
                        get_interface_iv: std::mem::transmute::<*const c_void, GetProgramInterfaceIv>(
                            a,
                        ),
                        get_resource_name: std::mem::transmute::<
                            *const c_void,
                            GetProgramResourceName,
                        >(b),
                        get_resource_iv: std::mem::transmute::<*const c_void, GetProgramResourceIv>(
                            c,
                        ),
                    }),
                    _ => None,
                }
            } else {
                None
            };
            let program_parameter_i = if at_least((4, 1), (3, 0))
                || has("GL_ARB_get_program_binary")
                || has("GL_ARB_separate_shader_objects")
            {
                lookup(c"glProgramParameteri")
                    .map(|f| std::mem::transmute::<*const c_void, ProgramParameterI>(f))
            } else {
                None
            };
            let pipelines = if at_least((4, 1), (3, 1)) || has("GL_ARB_separate_shader_objects") {
                match (
                    lookup(c"glGenProgramPipelines"),
                    lookup(c"glDeleteProgramPipelines"),
                    lookup(c"glBindProgramPipeline"),
                    lookup(c"glUseProgramStages"),
                ) {
                    (Some(g), Some(d), Some(b), Some(u)) if program_parameter_i.is_some() => {
                        Some(PipelineFns {
                            create: std::mem::transmute::<*const c_void, ProgramPipelines>(g),
                            delete: std::mem::transmute::<*const c_void, ProgramPipelines>(d),
                            bind: std::mem::transmute::<*const c_void, BindProgramPipeline>(b),
                            use_stages: std::mem::transmute::<*const c_void, UseProgramStages>(u),
                        })
                    }
                    _ => None,
                }
            } else {
                None
            };
            ExtFns {
                interface,
                get_program_iv: lookup(c"glGetProgramiv")
                    .map(|f| std::mem::transmute::<*const c_void, GetProgramIv>(f)),
                program_parameter_i,
                pipelines,
                parallel_compile: has("GL_KHR_parallel_shader_compile")
                    || has("GL_ARB_parallel_shader_compile"),
                api,
                stages: {
                    let mut stages = ShaderStage::Vertex.bit().with(ShaderStage::Fragment);
                    if at_least((4, 3), (3, 1)) {
                        stages = stages.with(ShaderStage::Compute);
                    }
                    if at_least((3, 2), (3, 2))
                        || has("GL_EXT_geometry_shader")
                        || has("GL_OES_geometry_shader")
                    {
                        stages = stages.with(ShaderStage::Geometry);
                    }
                    if at_least((4, 0), (3, 2))
                        || has("GL_EXT_tessellation_shader")
                        || has("GL_OES_tessellation_shader")
                    {
                        stages = stages
                            .with(ShaderStage::TessControl)
                            .with(ShaderStage::TessEvaluation);
                    }
                    stages
                },
                location_index: api == GlApi::DesktopCore || has("GL_EXT_blend_func_extended"),
            }
        }
    }
}

impl Inner {
    fn context(&self) -> &PossiblyCurrentContext {
        self.context
            .as_ref()
            .expect("the context is only taken in drop")
    }

    /// Makes the context current on this thread when it is not, and hands out the GL functions.
    pub(crate) fn gl(&self) -> Result<&glow::Context, NotCurrent> {
        let context = self.context();
        // Before `is_current`, which binds this context's client API on the thread.
        note_host_current(self.display.egl());
        if !context.is_current() {
            context
                .make_current_surfaceless()
                .map_err(|e| NotCurrent(e.to_string()))?;
        }
        Ok(&self.gl)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A thread making a context in this one's share group needs its handle until then.
        self.making.wait();
        // The helpers parked here go with this context; one still in use is destroyed when its
        // thread is done with it.
        let parked = {
            let mut helpers = self.helpers.lock().unwrap_or_else(|e| e.into_inner());
            helpers.closed = true;
            std::mem::take(&mut helpers.parked)
        };
        drop(parked);
        // EGL defers destroying a context that is current until it is released; a thread that
        // exits with it still current never releases it and its whole driver state leaks. So
        // release it first when it is current here.
        note_host_current(self.display.egl());
        if let Some(park_in) = &self.park_in
            && let Some(context) = self.context.take()
        {
            // A helper, dropped on its own thread: released and parked for the next thread,
            // unless the spawning context is gone (then destroyed here). Releasing goes through
            // this thread's current context, so when another one is current here, ours is made
            // current for the release and the other made current again after.
            let _keep = (!context.is_current()).then(|| {
                let keep = KeepHostCurrent::new();
                note_host_current(self.display.egl());
                keep
            });
            let released = if context.is_current() {
                Ok(())
            } else {
                context.make_current_surfaceless()
            };
            match released.and_then(|()| context.make_not_current()) {
                Ok(context) => {
                    let mut helpers = park_in.lock().unwrap_or_else(|e| e.into_inner());
                    if !helpers.closed {
                        helpers.parked.push(context);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "releasing a helper GL context failed"),
            }
            return;
        }
        if let Some(context) = self.context.take()
            && context.is_current()
            && let Err(e) = context.make_not_current()
        {
            tracing::warn!(error = %e, "releasing the GL context before destroying it failed");
        }
    }
}

const EGL_DRAW: i32 = 0x3059;
const EGL_READ: i32 = 0x305A;

/// What is current on a thread as far as EGL says: the bound client API, the display, the draw
/// and read surfaces and the context (null pointers for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EglCurrent {
    api: u32,
    display: *const c_void,
    draw: *const c_void,
    read: *const c_void,
    context: *const c_void,
}

impl EglCurrent {
    fn read(egl: &Egl) -> Self {
        // SAFETY: queries of the calling thread's EGL state, valid at any time on an EGL that
        // glutin loaded (and never unloads).
        unsafe {
            EglCurrent {
                api: egl.QueryAPI(),
                display: egl.GetCurrentDisplay(),
                draw: egl.GetCurrentSurface(EGL_DRAW),
                read: egl.GetCurrentSurface(EGL_READ),
                context: egl.GetCurrentContext(),
            }
        }
    }
}

/// The state a [`KeepHostCurrent`] restores: what was current before this crate first made one
/// of its contexts current inside the scope.
#[derive(Clone, Copy)]
struct Saved {
    egl: &'static Egl,
    before: EglCurrent,
}

thread_local! {
    /// How many [`KeepHostCurrent`] scopes are open on this thread.
    static KEEP_DEPTH: Cell<usize> = const { Cell::new(0) };
    /// What to restore when the outermost scope ends.
    static SAVED: Cell<Option<Saved>> = const { Cell::new(None) };
}

/// Called before this crate makes one of its contexts current on this thread: inside a
/// [`KeepHostCurrent`] scope, the first call records what is current now.
fn note_host_current(egl: &'static Egl) {
    if KEEP_DEPTH.get() > 0 && SAVED.get().is_none() {
        SAVED.set(Some(Saved {
            egl,
            before: EglCurrent::read(egl),
        }));
    }
}

/// Keeps the calling thread's EGL state for a host that has its own context: while a scope
/// lives, the first time this crate makes one of its contexts current on the thread (opening
/// one, [`GlContext::gl`], any object's operation or drop) it records what was current then
/// (client API, display, draw and read surfaces, context); when the outermost scope on the
/// thread ends, that is made current again — or nothing, when nothing was current — whether
/// the work in between succeeded or failed. Scopes nest (only the outermost restores) and
/// cost nothing when no context of ours was made current. A restore EGL refuses is logged
/// (`headless_gl::context`, warn) and leaves our context released when nothing was current.
///
/// Without a scope a context stays current after an operation, as the crate docs say.
#[derive(Debug)]
pub struct KeepHostCurrent {
    /// Thread-bound: the state is the thread's.
    _thread: PhantomData<*const ()>,
}

impl KeepHostCurrent {
    /// Opens a scope on the calling thread.
    #[allow(clippy::new_without_default, reason = "a scope is opened explicitly")]
    pub fn new() -> Self {
        KEEP_DEPTH.set(KEEP_DEPTH.get() + 1);
        KeepHostCurrent {
            _thread: PhantomData,
        }
    }
}

impl Drop for KeepHostCurrent {
    fn drop(&mut self) {
        let depth = KEEP_DEPTH.get() - 1;
        KEEP_DEPTH.set(depth);
        if depth > 0 {
            return;
        }
        let Some(Saved { egl, before }) = SAVED.take() else {
            return;
        };
        let now = EglCurrent::read(egl);
        if now == before {
            return;
        }
        // SAFETY: EGL calls on this thread with handles EGL itself reported as current: the
        // host's (alive while current, and the host's to keep alive until it is made current
        // again, as it would be had we not run) or ours (`now`, alive while current).
        let restored = unsafe {
            if before.context.is_null() {
                // Nothing was current: release what is (under its own client API), then bind
                // the API that was bound.
                (now.context.is_null()
                    || egl.MakeCurrent(
                        now.display,
                        std::ptr::null(),
                        std::ptr::null(),
                        std::ptr::null(),
                    ) != 0)
                    && (before.api == 0 || egl.BindAPI(before.api) != 0)
            } else {
                // The host's API first: a context is made current under the bound API.
                (before.api == 0 || egl.BindAPI(before.api) != 0)
                    && egl.MakeCurrent(before.display, before.draw, before.read, before.context)
                        != 0
            }
        };
        if !restored {
            // SAFETY: a query of this thread's last EGL error.
            let error = unsafe { egl.GetError() };
            tracing::warn!(
                error = format_args!("{error:#x}"),
                "restoring the EGL context that was current before failed"
            );
        }
    }
}

/// A headless GL context, current on the thread that opened it. See the crate docs.
pub struct GlContext {
    pub(crate) inner: Rc<Inner>,
    info: DriverInfo,
}

impl std::fmt::Debug for GlContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlContext")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl GlContext {
    /// Opens a context with [`ContextOptions::default`].
    pub fn open_default() -> Result<Self, ContextError> {
        Self::open(&ContextOptions::default())
    }

    /// Opens a context on the machine's EGL driver, on the device [`ContextOptions::device`]
    /// selects. A selection that matches no device (an unparsable `GPUSVC_EGL_DEVICE`,
    /// `hardware` on a machine with only software devices, an index past the end) is a
    /// [`ContextError::NoEglDevice`] naming the valid forms and the devices EGL lists.
    pub fn open(options: &ContextOptions) -> Result<Self, ContextError> {
        // The selection is read first, so that a bad value is reported even without EGL.
        let selection = options.device.resolve();
        let devices = query_devices();
        let selection = match selection {
            Ok(selection) => selection,
            Err(e) => return Err(selection_error(options.device, e, devices.as_deref())),
        };
        let devices = devices?;
        let software: Vec<bool> = devices.iter().map(is_software).collect();
        let order = device_order(&software, selection)
            .map_err(|e| selection_error(options.device, e, Ok(&devices)))?;
        let mut first_error = None;
        for index in order {
            match open_on_device(&devices, index, options) {
                Ok(ctx) => return Ok(ctx),
                Err(e) => {
                    tracing::debug!(device = index, error = %e, "EGL device gave no context");
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.expect("device_order returns at least one device"))
    }

    /// The driver's identity.
    pub fn info(&self) -> &DriverInfo {
        &self.info
    }

    /// The profile the driver gave: core, compatibility (only when
    /// [`ApiPreference::DesktopCompatibility`] asked for it) or ES.
    pub fn profile(&self) -> ContextProfile {
        self.info.profile
    }

    /// The raw GL functions, with this context made current on the calling thread. For what this
    /// crate does not wrap; objects made through it are the caller's to delete.
    pub fn gl(&self) -> Result<&glow::Context, NotCurrent> {
        self.inner.gl()
    }

    /// Whether this context is the one current on the calling thread (`eglGetCurrentContext`;
    /// like every EGL query of glutin's, it binds this context's client API on the thread).
    pub fn is_current(&self) -> bool {
        self.inner.context().is_current()
    }

    /// Spawns a thread named `name` with a context of its own in this context's share group
    /// (programs, shaders, buffers, textures and sync objects are visible in both), on the
    /// same display, config, API and version, current on that thread; `f` runs there with it,
    /// or with why it could not be made. The context is made on the new thread, so the calling
    /// thread pays only for the spawn; until it is made, dropping this context waits for it
    /// (eglCreateContext needs this context's handle; nothing but that call runs first).
    ///
    /// The thread's context is kept when the thread is done with it, current nowhere, and the
    /// next `spawn_shared` thread of this context reuses it (with the GL state the previous one
    /// left); kept contexts are destroyed with this context. (Destroying them earlier crashed
    /// Mesa 22.3 llvmpipe in this context's next draw with a program a later thread made.)
    ///
    /// An object one context changes is complete for the other only once the changer's
    /// commands are (`glFinish`, or a fence the other waits on), as GL says of share groups:
    /// [`GlContext::hand_over`] and [`GlContext::adopt`] move a program that way.
    ///
    /// `Err` when the thread cannot be spawned, or `name` has a NUL byte.
    pub fn spawn_shared<F, T>(&self, name: &str, f: F) -> std::io::Result<JoinHandle<T>>
    where
        F: FnOnce(Result<GlContext, ContextError>) -> T + Send + 'static,
        T: Send + 'static,
    {
        if name.contains('\0') {
            // std would panic on it at the spawn.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a thread name may not contain a NUL byte",
            ));
        }
        let RawContext::Egl(raw) = self.inner.context().raw_context();
        let seed = ShareSeed {
            display: self.inner.display.clone(),
            share: RawShare(raw),
            info: self.info.clone(),
            group: self.inner.group,
            making: MakingGuard::begin(&self.inner.making),
            helpers: self.inner.helpers.clone(),
        };
        // A failed spawn drops the closure, and with it the seed's guard.
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || f(seed.open()))
    }

    /// This context's share group, as an id unique in the process: equal for the contexts
    /// [`GlContext::spawn_shared`] makes from it (and from those), different for any other.
    pub fn share_group(&self) -> u64 {
        self.inner.group
    }

    pub(crate) fn owns(&self, inner: &Rc<Inner>) -> bool {
        Rc::ptr_eq(&self.inner, inner)
    }
}

/// What a thread spawned by [`GlContext::spawn_shared`] makes its context from.
struct ShareSeed {
    display: Display,
    share: RawShare,
    info: DriverInfo,
    group: u64,
    /// Held until the context is made: the context shared with waits for it before it goes.
    making: MakingGuard,
    /// The spawning context's parked helper contexts: one is reused when there is one, and the
    /// new context goes back there when its thread is done with it.
    helpers: Arc<Mutex<Helpers>>,
}

impl ShareSeed {
    /// Makes the context (in the seed's share group) and makes it current on this thread.
    fn open(self) -> Result<GlContext, ContextError> {
        let ShareSeed {
            display,
            share,
            info,
            group,
            making,
            helpers,
        } = self;
        let api = info.api;
        let parked = helpers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .parked
            .pop();
        let made = match parked {
            Some(parked) => Ok(parked),
            None => find_config(&display, api, info.device.index).and_then(|config| {
                let attributes =
                    context_attributes(api, info.profile, Some(info.version_numbers), Some(share));
                // SAFETY: the attributes carry no raw window handle; `config` belongs to
                // `display`; the context shared with is alive (it waits for `making` before it
                // is destroyed).
                unsafe { display.create_context(&config, &attributes) }.map_err(|e| {
                    ContextError::ContextCreation {
                        api,
                        reason: e.to_string(),
                    }
                })
            }),
        };
        // The shared-with handle is no longer needed.
        drop(making);
        let current = made?
            .make_current_surfaceless()
            .map_err(|e| ContextError::MakeCurrent {
                reason: e.to_string(),
            })?;
        let (current, gl) = load_gl(&display, current);
        let ext = ExtFns::load(&display, &gl, api, info.version_numbers);
        Ok(GlContext {
            inner: Rc::new(Inner {
                gl,
                ext,
                context: Some(current),
                display,
                group,
                making: Arc::default(),
                helpers: Arc::default(),
                park_in: Some(helpers),
            }),
            info,
        })
    }
}

/// The contexts [`GlContext::spawn_shared`] threads made in a context's share group, parked
/// (current nowhere) once their threads are done, for the next such thread. They are destroyed
/// only with the spawning context, never earlier: on Mesa 22.3 llvmpipe, destroying such a
/// context after the spawning one drew with (and deleted) a program it made, then drawing with
/// a program a new such context made, crashed the spawning context's thread in the driver
/// (`thread_after_thread_hands_programs_the_host_draws_with_while_they_run`). A reused context
/// keeps whatever GL state its previous thread left.
#[derive(Default)]
pub(crate) struct Helpers {
    parked: Vec<NotCurrentContext>,
    /// Set when the spawning context is gone: a context coming back is destroyed instead.
    closed: bool,
}

/// A context's raw EGL handle, to share with on another thread.
#[derive(Clone, Copy)]
struct RawShare(*const c_void);

// SAFETY: an EGLContext handle is an identifier EGL accepts on any thread; the context it names
// outlives every use ([`MakingGuard`]).
unsafe impl Send for RawShare {}

impl AsRawContext for RawShare {
    fn raw_context(&self) -> RawContext {
        RawContext::Egl(self.0)
    }
}

/// How many contexts are being made in a context's share group on other threads.
#[derive(Debug, Default)]
pub(crate) struct Making {
    count: Mutex<usize>,
    done: Condvar,
}

impl Making {
    /// Waits until no context is being made with this one's handle.
    fn wait(&self) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *count > 0 {
            count = self.done.wait(count).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One context being made (counted in [`Making`] while it lives).
struct MakingGuard(Arc<Making>);

impl MakingGuard {
    fn begin(making: &Arc<Making>) -> Self {
        *making.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        MakingGuard(making.clone())
    }
}

impl Drop for MakingGuard {
    fn drop(&mut self) {
        let mut count = self.0.count.lock().unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        if *count == 0 {
            self.0.done.notify_all();
        }
    }
}

/// A fresh share-group id.
fn next_group() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// EGL's devices, at least one.
fn query_devices() -> Result<Vec<Device>, ContextError> {
    let devices: Vec<Device> = match Device::query_devices() {
        Ok(devices) => devices.collect(),
        Err(e) if matches!(e.error_kind(), ErrorKind::NotFound) => {
            return Err(ContextError::NoLibEgl);
        }
        Err(e) => {
            return Err(ContextError::NoEglDevice {
                reason: format!("EGL cannot enumerate devices: {e}"),
                selection: None,
            });
        }
    };
    if devices.is_empty() {
        return Err(ContextError::NoEglDevice {
            reason: "eglQueryDevicesEXT listed no device".into(),
            selection: None,
        });
    }
    Ok(devices)
}

fn is_software(device: &Device) -> bool {
    device.extensions().contains("EGL_MESA_device_software")
}

/// `0: software` / `1: hardware, NVIDIA, /dev/dri/renderD128`, for error messages.
fn describe_device(index: usize, device: &Device) -> String {
    let mut text = format!(
        "{index}: {}",
        if is_software(device) {
            "software"
        } else {
            "hardware"
        }
    );
    for part in [device.vendor(), device.name()].into_iter().flatten() {
        text.push_str(&format!(", {part}"));
    }
    if let Some(node) = device
        .drm_render_device_node_path()
        .or_else(|| device.drm_device_node_path())
    {
        text.push_str(&format!(", {}", node.display()));
    }
    text
}

/// The [`ContextError`] for a selection that matched no device: the reason, where the selection
/// came from, the valid forms (for a value that names no device) and the devices EGL lists.
fn selection_error(
    asked: DeviceSelection,
    error: DeviceSelectionError,
    devices: Result<&[Device], &ContextError>,
) -> ContextError {
    let origin = match (asked, &error) {
        (DeviceSelection::FromEnv, DeviceSelectionError::Unparsable { .. }) => {
            format!("{DEVICE_ENV}: ")
        }
        (DeviceSelection::FromEnv, _) => match DeviceSelection::from_env() {
            Ok(selection) => format!("{DEVICE_ENV}={selection}: "),
            Err(_) => format!("{DEVICE_ENV}: "),
        },
        _ => String::new(),
    };
    let count = devices.map_or(0, <[Device]>::len);
    let valid = match &error {
        DeviceSelectionError::Unparsable { .. } | DeviceSelectionError::IndexOutOfRange { .. } => {
            match count {
                0 => format!("; valid forms: {VALID_FORMS}"),
                n => format!("; valid forms: {VALID_FORMS} (0 to {})", n - 1),
            }
        }
        _ => String::new(),
    };
    let listing = match devices {
        Ok(devices) => {
            let described: Vec<String> = devices
                .iter()
                .enumerate()
                .map(|(i, d)| describe_device(i, d))
                .collect();
            format!(
                "EGL lists {} device{}: {}",
                devices.len(),
                if devices.len() == 1 { "" } else { "s" },
                described.join("; ")
            )
        }
        Err(e) => format!("EGL lists no device ({e})"),
    };
    ContextError::NoEglDevice {
        reason: format!("{origin}{error}{valid}; {listing}"),
        selection: Some(error),
    }
}

/// Indices of the devices to try, best first, given which devices are software ones. Never
/// empty on success. `selection` is already resolved (not [`DeviceSelection::FromEnv`]).
fn device_order(
    software: &[bool],
    selection: DeviceSelection,
) -> Result<Vec<usize>, DeviceSelectionError> {
    let indices =
        |want_software: bool| (0..software.len()).filter(move |&i| software[i] == want_software);
    let order: Vec<usize> = match selection {
        DeviceSelection::FromEnv | DeviceSelection::PreferHardware => {
            indices(false).chain(indices(true)).collect()
        }
        DeviceSelection::Hardware => indices(false).collect(),
        DeviceSelection::Software => indices(true).collect(),
        DeviceSelection::Index(index) if index < software.len() => vec![index],
        DeviceSelection::Index(index) => {
            return Err(DeviceSelectionError::IndexOutOfRange {
                index,
                count: software.len(),
            });
        }
    };
    match (order.is_empty(), selection) {
        (false, _) => Ok(order),
        (true, DeviceSelection::Hardware) => Err(DeviceSelectionError::NoHardware),
        (true, DeviceSelection::Software) => Err(DeviceSelectionError::NoSoftware),
        (true, _) => Err(DeviceSelectionError::NoDevice),
    }
}

fn open_on_device(
    devices: &[Device],
    index: usize,
    options: &ContextOptions,
) -> Result<GlContext, ContextError> {
    let device = &devices[index];
    // SAFETY: `device` comes from `Device::query_devices` and outlives this call; no native
    // display handle is passed, so there is no foreign handle whose lifetime we must uphold.
    let display =
        unsafe { Display::with_device(device, None) }.map_err(|e| ContextError::DisplayInit {
            device: index,
            reason: e.to_string(),
        })?;
    // Everything below may make a context of ours current.
    note_host_current(display.egl());
    let profiles: &[ContextProfile] = match options.api {
        ApiPreference::Auto => &[ContextProfile::Core, ContextProfile::Es],
        ApiPreference::DesktopCore => &[ContextProfile::Core],
        ApiPreference::DesktopCompatibility => &[ContextProfile::Compatibility],
        ApiPreference::Gles => &[ContextProfile::Es],
    };
    let mut first_error = None;
    for &profile in profiles {
        let api = api_of(profile);
        let min = match api {
            GlApi::DesktopCore => options.min_desktop_version,
            GlApi::Gles => options.min_gles_version,
        };
        match create_current(&display, index, profile, min) {
            Ok((context, gl)) => {
                let info = read_driver_info(&gl, api, profile, device_info(devices, index));
                let ext = ExtFns::load(&display, &gl, api, info.version_numbers);
                return Ok(GlContext {
                    inner: Rc::new(Inner {
                        gl,
                        ext,
                        context: Some(context),
                        display,
                        group: next_group(),
                        making: Arc::default(),
                        helpers: Arc::default(),
                        park_in: None,
                    }),
                    info,
                });
            }
            Err(e) => {
                tracing::debug!(device = index, %profile, error = %e, "API gave no context");
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.expect("at least one API is tried"))
}

fn api_of(profile: ContextProfile) -> GlApi {
    match profile {
        ContextProfile::Core | ContextProfile::Compatibility => GlApi::DesktopCore,
        ContextProfile::Es => GlApi::Gles,
    }
}

fn context_api(api: GlApi, version: Option<GlVersion>) -> ContextApi {
    let version = version.map(|v| Version::new(v.major, v.minor));
    match api {
        GlApi::DesktopCore => ContextApi::OpenGl(version),
        GlApi::Gles => ContextApi::Gles(version),
    }
}

/// Creates a context of `profile` with at least `min`, current and loaded.
fn create_current(
    display: &Display,
    device: usize,
    profile: ContextProfile,
    min: GlVersion,
) -> Result<(PossiblyCurrentContext, glow::Context), ContextError> {
    let api = api_of(profile);
    let config = find_config(display, api, device)?;
    let attributes = |version| context_attributes(api, profile, version, None);
    // SAFETY: the attributes carry no raw window handle; `config` belongs to `display`.
    let created = unsafe { display.create_context(&config, &attributes(Some(min))) };
    let not_current = match created {
        Ok(ctx) => ctx,
        Err(e) => {
            // Learn what the driver does offer, to say "too old" rather than "failed".
            let fallback = match profile {
                ContextProfile::Core => GlVersion::new(3, 2),
                ContextProfile::Compatibility => GlVersion::new(3, 0),
                ContextProfile::Es => GlVersion::new(2, 0),
            };
            // SAFETY: as above.
            let probe = unsafe { display.create_context(&config, &attributes(Some(fallback))) };
            if let Some(found) = probe
                .ok()
                .and_then(|ctx| ctx.make_current_surfaceless().ok())
                .map(|ctx| load_gl(display, ctx).1)
                .map(|gl| version_numbers(&gl))
                && found < min
            {
                return Err(ContextError::VersionTooOld {
                    api,
                    found,
                    required: min,
                });
            }
            return Err(ContextError::ContextCreation {
                api,
                reason: e.to_string(),
            });
        }
    };
    let current =
        not_current
            .make_current_surfaceless()
            .map_err(|e| ContextError::MakeCurrent {
                reason: e.to_string(),
            })?;
    let (current, gl) = load_gl(display, current);
    let found = version_numbers(&gl);
    if found < min {
        return Err(ContextError::VersionTooOld {
            api,
            found,
            required: min,
        });
    }
    if profile == ContextProfile::Compatibility {
        // SAFETY: a state query on the context that was just made current on this thread.
        let mask = unsafe { gl.get_parameter_i32(glow::CONTEXT_PROFILE_MASK) } as u32;
        if mask & glow::CONTEXT_COMPATIBILITY_PROFILE_BIT == 0 {
            return Err(ContextError::ContextCreation {
                api,
                reason: format!(
                    "a compatibility profile was asked for, the driver gave profile mask {mask:#x}"
                ),
            });
        }
    }
    Ok((current, gl))
}

/// The display's first PBUFFER config for `api`.
fn find_config(
    display: &Display,
    api: GlApi,
    device: usize,
) -> Result<glutin::api::egl::config::Config, ContextError> {
    let template = ConfigTemplateBuilder::new()
        .with_surface_type(ConfigSurfaceTypes::PBUFFER)
        .with_api(match api {
            GlApi::DesktopCore => Api::OPENGL,
            GlApi::Gles => Api::GLES3,
        })
        .build();
    // SAFETY: the template has no native window handle; the display is alive for the call.
    unsafe { display.find_configs(template) }
        .ok()
        .and_then(|mut configs| configs.next())
        .ok_or(ContextError::NoMatchingConfig { api, device })
}

/// The attributes of a context of `api` and `profile` (at least `version` when given), in the
/// share group of `share` when given.
fn context_attributes(
    api: GlApi,
    profile: ContextProfile,
    version: Option<GlVersion>,
    share: Option<RawShare>,
) -> glutin::context::ContextAttributes {
    let mut builder = ContextAttributesBuilder::new();
    if let Some(share) = share {
        builder = builder.with_sharing(&share);
    }
    builder
        .with_context_api(context_api(api, version))
        .with_profile(match profile {
            ContextProfile::Compatibility => GlProfile::Compatibility,
            // EGL ignores the profile of a GLES context.
            ContextProfile::Core | ContextProfile::Es => GlProfile::Core,
        })
        .build(None)
}

fn load_gl(
    display: &Display,
    current: PossiblyCurrentContext,
) -> (PossiblyCurrentContext, glow::Context) {
    // SAFETY: the context is current on this thread and the loader returns function pointers of
    // the display's driver, which stays loaded for the life of the process (glutin never unloads
    // libEGL).
    let gl = unsafe {
        glow::Context::from_loader_function_cstr(|name: &CStr| {
            display.get_proc_address(name).cast()
        })
    };
    (current, gl)
}

fn version_numbers(gl: &glow::Context) -> GlVersion {
    // SAFETY: plain state queries on the current context.
    let (major, minor) = unsafe {
        (
            gl.get_parameter_i32(glow::MAJOR_VERSION),
            gl.get_parameter_i32(glow::MINOR_VERSION),
        )
    };
    GlVersion::new(
        u8::try_from(major).unwrap_or(0),
        u8::try_from(minor).unwrap_or(0),
    )
}

fn device_info(devices: &[Device], index: usize) -> DeviceInfo {
    let device = &devices[index];
    let mut extensions: Vec<String> = device.extensions().iter().map(|s| s.to_string()).collect();
    extensions.sort();
    DeviceInfo {
        index,
        device_count: devices.len(),
        software: is_software(device),
        drm_node: device
            .drm_render_device_node_path()
            .or_else(|| device.drm_device_node_path())
            .map(|p| p.display().to_string()),
        extensions,
    }
}

fn read_driver_info(
    gl: &glow::Context,
    api: GlApi,
    profile: ContextProfile,
    device: DeviceInfo,
) -> DriverInfo {
    // SAFETY: state queries on the context that was just made current on this thread; the
    // slice passed for the formats is sized by GL_NUM_PROGRAM_BINARY_FORMATS.
    unsafe {
        let count = gl
            .get_parameter_i32(glow::NUM_PROGRAM_BINARY_FORMATS)
            .max(0);
        let mut formats = vec![0i32; count as usize];
        if count > 0 {
            gl.get_parameter_i32_slice(glow::PROGRAM_BINARY_FORMATS, &mut formats);
        }
        DriverInfo {
            api,
            profile,
            version_numbers: version_numbers(gl),
            vendor: gl.get_parameter_string(glow::VENDOR),
            renderer: gl.get_parameter_string(glow::RENDERER),
            version: gl.get_parameter_string(glow::VERSION),
            glsl_version: gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION),
            program_binary_formats: formats.into_iter().map(|f| f as u32).collect(),
            device,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_env_values_parse_to_selections() {
        assert_eq!(
            DeviceSelection::parse("auto"),
            Ok(DeviceSelection::PreferHardware)
        );
        assert_eq!(
            DeviceSelection::parse("hardware"),
            Ok(DeviceSelection::Hardware)
        );
        assert_eq!(
            DeviceSelection::parse(" Software\n"),
            Ok(DeviceSelection::Software)
        );
        assert_eq!(DeviceSelection::parse("0"), Ok(DeviceSelection::Index(0)));
        assert_eq!(
            DeviceSelection::parse(" 12 "),
            Ok(DeviceSelection::Index(12))
        );
        for bad in [
            "banana",
            "",
            "hw",
            "-1",
            "+1",
            "1.0",
            "0x1",
            "99999999999999999999999",
        ] {
            assert_eq!(
                DeviceSelection::parse(bad),
                Err(DeviceSelectionError::Unparsable { value: bad.into() }),
                "{bad:?}"
            );
        }
        // Every selection's display form parses back to it.
        for selection in [
            DeviceSelection::PreferHardware,
            DeviceSelection::Hardware,
            DeviceSelection::Software,
            DeviceSelection::Index(3),
        ] {
            assert_eq!(
                DeviceSelection::parse(&selection.to_string()),
                Ok(selection)
            );
        }
    }

    #[test]
    fn hardware_and_software_selections_never_fall_back() {
        let only_software = [true];
        assert_eq!(
            device_order(&only_software, DeviceSelection::Hardware),
            Err(DeviceSelectionError::NoHardware)
        );
        assert_eq!(
            device_order(&only_software, DeviceSelection::PreferHardware),
            Ok(vec![0])
        );
        assert_eq!(
            device_order(&[false, false], DeviceSelection::Software),
            Err(DeviceSelectionError::NoSoftware)
        );
        let mixed = [true, false, true, false];
        assert_eq!(
            device_order(&mixed, DeviceSelection::Hardware),
            Ok(vec![1, 3])
        );
        assert_eq!(
            device_order(&mixed, DeviceSelection::Software),
            Ok(vec![0, 2])
        );
        assert_eq!(
            device_order(&mixed, DeviceSelection::PreferHardware),
            Ok(vec![1, 3, 0, 2])
        );
        assert_eq!(device_order(&mixed, DeviceSelection::Index(2)), Ok(vec![2]));
        assert_eq!(
            device_order(&mixed, DeviceSelection::Index(4)),
            Err(DeviceSelectionError::IndexOutOfRange { index: 4, count: 4 })
        );
        assert_eq!(
            device_order(&[], DeviceSelection::PreferHardware),
            Err(DeviceSelectionError::NoDevice)
        );
    }

    #[test]
    fn a_selection_error_names_the_value_the_valid_forms_and_what_egl_lists() {
        let banana = DeviceSelectionError::Unparsable {
            value: "banana".into(),
        };
        let e = selection_error(
            DeviceSelection::FromEnv,
            banana.clone(),
            Err(&ContextError::NoLibEgl),
        );
        let text = e.to_string();
        for part in [
            "no EGL device: GPUSVC_EGL_DEVICE: \"banana\" is not a device selection",
            "valid forms: auto",
            "hardware, software, or a device index",
            "EGL lists no device (no libEGL",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
        assert!(matches!(
            e,
            ContextError::NoEglDevice {
                selection: Some(ref s),
                ..
            } if *s == banana
        ));
        // An explicit option is not attributed to the variable.
        let e = selection_error(
            DeviceSelection::Index(7),
            DeviceSelectionError::IndexOutOfRange { index: 7, count: 0 },
            Err(&ContextError::NoLibEgl),
        );
        assert!(!e.to_string().contains(DEVICE_ENV), "{e}");
        assert!(e.to_string().contains("device 7 was asked for"), "{e}");
    }
}
