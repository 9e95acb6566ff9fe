//! The compile/link flow through the program cache, seen from C: `gpusvc_program_manager_*`,
//! `gpusvc_shader_*`, `gpusvc_linked_program_*`, and the host GL entry points
//! (`gpusvc_host_gl`, `gpusvc_host_sink_*`).
//!
//! A manager runs either on a `gpusvc_gl_context` (headless-gl on the machine's driver) or on
//! the host's own GL through callbacks. Managers, shaders and linked programs are bound to the
//! thread that made the manager (GL contexts are current on one thread): from any other thread
//! every call, `_free` included, returns `GPUSVC_WRONG_THREAD`.

use std::any::Any;
use std::ffi::{CString, c_char, c_void};
use std::rc::Rc;

use headless_gl::{ActiveVariable, GlContext, LinkOptions, ShaderStage, TransformFeedbackMode};
use program_cache::{
    CompileOutcome, GlBackend, LinkFailure, LinkOrigin, LinkedProgram, ProgramBackend,
    ProgramBinaryData, ProgramKey, ProgramManager, ProgramOptions, Shader, ShaderState,
};

use crate::args::{cstr_in, invalid_argument, slice_in, source_in, write};
use crate::boundary::{FfiError, ffi_guard, null_argument, out_ptr};
use crate::gl::{gl_context, gpusvc_gl_context};
use crate::handle::{self, Kind};
use crate::program_cache::{
    CShaderVariables, GPUSVC_TRANSFORM_FEEDBACK_INTERLEAVED, GPUSVC_TRANSFORM_FEEDBACK_SEPARATE,
    VariableKind, c_string, gpusvc_attribute_binding, gpusvc_link_options, gpusvc_program_cache,
    gpusvc_sha1, gpusvc_shader_variables, gpusvc_variable_info, link_options_in,
    shader_variables_in, stage_in, stage_out, variable_kind_in,
};
use crate::result::gpusvc_result;

/// Compile outcome: the driver compiled the shader.
pub const GPUSVC_COMPILE_OUTCOME_COMPILED: u32 = 0u32;
/// Compile outcome: its compile status was known (cache hit); the driver compile is deferred
/// until a link needs the shader.
pub const GPUSVC_COMPILE_OUTCOME_DEFERRED: u32 = 1u32;
/// Compile outcome: the driver refused it; `gpusvc_shader_info_log` has the log.
pub const GPUSVC_COMPILE_OUTCOME_FAILED: u32 = 2u32;

/// Shader state: never compiled.
pub const GPUSVC_SHADER_STATE_NOT_COMPILED: u32 = 0u32;
/// Shader state: compiled by the driver.
pub const GPUSVC_SHADER_STATE_COMPILED: u32 = 1u32;
/// Shader state: known to compile; the driver compile waits until a link needs it.
pub const GPUSVC_SHADER_STATE_DEFERRED: u32 = 2u32;
/// Shader state: the driver refused it.
pub const GPUSVC_SHADER_STATE_FAILED: u32 = 3u32;

/// Link origin: restored from a cached binary.
pub const GPUSVC_LINK_ORIGIN_CACHE_HIT: u32 = 0u32;
/// Link origin: compiled and linked from source (a cache miss).
pub const GPUSVC_LINK_ORIGIN_LINKED: u32 = 1u32;
/// Link origin: the driver refused the cached binary; linked from source instead.
pub const GPUSVC_LINK_ORIGIN_RELINKED_AFTER_REJECTION: u32 = 2u32;

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
pub struct gpusvc_shader {
    _opaque: [u8; 0],
}

/// An opaque linked program: its driver object, key, origin and reflection. Freeing it deletes
/// the driver object (GL form; host form when `delete_program` is given).
#[derive(Debug)]
pub struct gpusvc_linked_program {
    _opaque: [u8; 0],
}

/// Where a host callback writes what it returns (an info log, binary bytes, active variables).
/// Valid only during the callback it was passed to, on that thread.
#[derive(Debug)]
pub struct gpusvc_host_sink {
    _opaque: [u8; 0],
}

/// One active attribute or uniform of a linked program, as the driver reports it. In results
/// `name` belongs to the handle and stays valid until it is freed; from a host callback it is
/// copied.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_active_variable {
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
}

/// Options of a link: attribute bindings and transform feedback (part of the key) and the page
/// the program is for.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_options {
    /// Bindings and transform feedback.
    pub link: gpusvc_link_options,
    /// Whether `page` is given.
    pub has_page: bool,
    /// The page / client the program is for (for GPUSVC_EVICTION_POLICY_PAGE_LRU_MRU).
    pub page: u64,
}

/// The host's GL entry points, for a program manager over the host's own context (a browser's
/// command decoder, an engine's device). Object ids are the host's (GL names or anything else
/// non-zero); every callback gets `user_data` and runs on the manager's thread. The callbacks may
/// call `gpusvc_host_sink_*` with the sink they were given; calling back into the manager or the
/// shaders being compiled or linked returns `GPUSVC_HANDLE_BUSY`. They must not unwind.
///
/// The struct is copied; the callbacks and `user_data` must stay valid until the manager and
/// every shader and linked program made through it are freed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_host_gl {
    /// Passed to every callback.
    pub user_data: *mut c_void,
    /// Compiles `source_len` bytes of `source` (NUL-terminated as well) for `stage`
    /// (`GPUSVC_SHADER_STAGE_*`). On success writes the shader id to `*out_shader` and returns
    /// true; on failure writes the info log to `log` (`gpusvc_host_sink_write_text`), deletes
    /// its own object and returns false. Required.
    pub compile: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            stage: u32,
            source: *const c_char,
            source_len: usize,
            out_shader: *mut u64,
            log: *mut gpusvc_host_sink,
        ) -> bool,
    >,
    /// Links a vertex and a fragment shader with `options` (binary-retrievable). On success
    /// writes the program id and returns true; on failure writes the info log and returns
    /// false. Required.
    pub link: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            vertex_shader: u64,
            fragment_shader: u64,
            options: *const gpusvc_link_options,
            out_program: *mut u64,
            log: *mut gpusvc_host_sink,
        ) -> bool,
    >,
    /// `glGetProgramBinary`: writes the format to `*out_format`, the bytes to `out`
    /// (`gpusvc_host_sink_write_bytes`) and returns true; or returns false (optionally with a
    /// reason as text). Required.
    pub program_binary: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            out_format: *mut u32,
            out: *mut gpusvc_host_sink,
        ) -> bool,
    >,
    /// `glProgramBinary` into a new program: returns its `GL_LINK_STATUS`. True: writes the
    /// program id. False (the driver refused the binary): deletes its own object, optionally
    /// writes a reason as text, and the manager compiles and links from source. Required.
    pub load_binary: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            format: u32,
            bytes: *const u8,
            len: usize,
            out_program: *mut u64,
            log: *mut gpusvc_host_sink,
        ) -> bool,
    >,
    /// Pushes each active attribute of a linked program (`gpusvc_host_sink_push_variable`).
    /// Required.
    pub active_attributes: Option<
        unsafe extern "C" fn(user_data: *mut c_void, program: u64, out: *mut gpusvc_host_sink),
    >,
    /// Pushes each active uniform of a linked program. Required.
    pub active_uniforms: Option<
        unsafe extern "C" fn(user_data: *mut c_void, program: u64, out: *mut gpusvc_host_sink),
    >,
    /// Deletes a shader object gpusvc owns and no longer needs. Optional (NULL: never called).
    pub delete_shader: Option<unsafe extern "C" fn(user_data: *mut c_void, shader: u64)>,
    /// Deletes a program object gpusvc owns (a freed `gpusvc_linked_program`). Optional.
    pub delete_program: Option<unsafe extern "C" fn(user_data: *mut c_void, program: u64)>,
}

// ---- the GL form ----

/// [`ProgramBackend`] over a GL context that the backend shares ownership of.
#[derive(Debug)]
struct OwnedGl(Rc<GlContext>);

impl ProgramBackend for OwnedGl {
    type Shader = headless_gl::Shader;
    type Program = headless_gl::Program;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        GlBackend::new(&self.0).compile(stage, source)
    }
    fn link(
        &mut self,
        vertex: &Self::Shader,
        fragment: &Self::Shader,
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        GlBackend::new(&self.0).link(vertex, fragment, options)
    }
    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        GlBackend::new(&self.0).program_binary(program)
    }
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String> {
        GlBackend::new(&self.0).load_binary(binary)
    }
    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.0).active_attributes(program)
    }
    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.0).active_uniforms(program)
    }
}

// ---- the host form ----

type SinkFn = unsafe extern "C" fn(*mut c_void, u64, *mut gpusvc_host_sink);

/// The host's callbacks, checked: the required ones are present.
#[derive(Debug)]
struct HostGl {
    user_data: *mut c_void,
    compile: unsafe extern "C" fn(
        *mut c_void,
        u32,
        *const c_char,
        usize,
        *mut u64,
        *mut gpusvc_host_sink,
    ) -> bool,
    link: unsafe extern "C" fn(
        *mut c_void,
        u64,
        u64,
        *const gpusvc_link_options,
        *mut u64,
        *mut gpusvc_host_sink,
    ) -> bool,
    program_binary: unsafe extern "C" fn(*mut c_void, u64, *mut u32, *mut gpusvc_host_sink) -> bool,
    load_binary: unsafe extern "C" fn(
        *mut c_void,
        u32,
        *const u8,
        usize,
        *mut u64,
        *mut gpusvc_host_sink,
    ) -> bool,
    active_attributes: SinkFn,
    active_uniforms: SinkFn,
    delete_shader: Option<unsafe extern "C" fn(*mut c_void, u64)>,
    delete_program: Option<unsafe extern "C" fn(*mut c_void, u64)>,
}

impl HostGl {
    fn new(gl: &gpusvc_host_gl) -> Result<Self, FfiError> {
        let required = |name: &str| null_argument(&format!("gl->{name}"));
        Ok(HostGl {
            user_data: gl.user_data,
            compile: gl.compile.ok_or_else(|| required("compile"))?,
            link: gl.link.ok_or_else(|| required("link"))?,
            program_binary: gl
                .program_binary
                .ok_or_else(|| required("program_binary"))?,
            load_binary: gl.load_binary.ok_or_else(|| required("load_binary"))?,
            active_attributes: gl
                .active_attributes
                .ok_or_else(|| required("active_attributes"))?,
            active_uniforms: gl
                .active_uniforms
                .ok_or_else(|| required("active_uniforms"))?,
            delete_shader: gl.delete_shader,
            delete_program: gl.delete_program,
        })
    }
}

/// What a host callback wrote to its sink.
#[derive(Debug, Default)]
struct SinkData {
    text: String,
    bytes: Vec<u8>,
    variables: Vec<ActiveVariable>,
}

/// A sink registered for the length of one callback; unregistered on drop.
struct Sink(*mut gpusvc_host_sink);

impl Sink {
    fn new() -> Self {
        Sink(handle::new_local(Kind::HostSink, SinkData::default()))
    }
    fn finish(self) -> SinkData {
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

/// A host object id that gpusvc owns: deleted through the host's callback when dropped.
#[derive(Debug)]
struct HostObject {
    id: u64,
    gl: Rc<HostGl>,
    program: bool,
}

impl Drop for HostObject {
    fn drop(&mut self) {
        let delete = if self.program {
            self.gl.delete_program
        } else {
            self.gl.delete_shader
        };
        if let Some(delete) = delete {
            // SAFETY: `gpusvc_host_gl`'s contract: the callback and user_data are valid until
            // every object made through the manager is freed, which is now.
            unsafe { delete(self.gl.user_data, self.id) };
        }
    }
}

/// [`ProgramBackend`] over the host's callbacks.
#[derive(Debug)]
struct HostBackend {
    gl: Rc<HostGl>,
}

/// `options` as C: the strings and arrays the pointers in `view` point into.
struct CLinkOptions {
    _names: Vec<CString>,
    _bindings: Vec<gpusvc_attribute_binding>,
    _varying_strings: Vec<CString>,
    _varyings: Vec<*const c_char>,
    view: gpusvc_link_options,
}

impl CLinkOptions {
    fn new(o: &LinkOptions) -> Self {
        let names: Vec<CString> = o
            .attribute_bindings
            .iter()
            .map(|b| c_string(&b.name))
            .collect();
        let bindings: Vec<gpusvc_attribute_binding> = o
            .attribute_bindings
            .iter()
            .zip(&names)
            .map(|(b, n)| gpusvc_attribute_binding {
                name: n.as_ptr(),
                location: b.location,
            })
            .collect();
        let varying_strings: Vec<CString> = o
            .transform_feedback_varyings
            .iter()
            .map(|v| c_string(v))
            .collect();
        let varyings: Vec<*const c_char> = varying_strings.iter().map(|v| v.as_ptr()).collect();
        let view = gpusvc_link_options {
            attribute_bindings: bindings.as_ptr(),
            attribute_binding_count: bindings.len(),
            transform_feedback_varyings: varyings.as_ptr(),
            transform_feedback_varying_count: varyings.len(),
            transform_feedback_mode: match o.transform_feedback_mode {
                TransformFeedbackMode::Interleaved => GPUSVC_TRANSFORM_FEEDBACK_INTERLEAVED,
                TransformFeedbackMode::Separate => GPUSVC_TRANSFORM_FEEDBACK_SEPARATE,
            },
        };
        CLinkOptions {
            _names: names,
            _bindings: bindings,
            _varying_strings: varying_strings,
            _varyings: varyings,
            view,
        }
    }
}

impl HostBackend {
    fn object(&self, id: u64, program: bool) -> HostObject {
        HostObject {
            id,
            gl: self.gl.clone(),
            program,
        }
    }

    fn variables(&self, f: SinkFn, program: &HostObject) -> Vec<ActiveVariable> {
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data (`gpusvc_host_gl`'s contract); the sink
        // handle is registered for the call.
        unsafe { f(self.gl.user_data, program.id, sink.0) };
        sink.finish().variables
    }
}

fn refusal(text: String, default: &str) -> String {
    if text.is_empty() {
        default.into()
    } else {
        text
    }
}

impl ProgramBackend for HostBackend {
    type Shader = HostObject;
    type Program = HostObject;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        let mut text = Vec::with_capacity(source.len() + 1);
        text.extend_from_slice(source.as_bytes());
        text.push(0);
        let mut id = 0u64;
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data (`gpusvc_host_gl`'s contract); `text`
        // holds `source.len()` bytes and a NUL and outlives the call; `id` is a live local.
        let ok = unsafe {
            (self.gl.compile)(
                self.gl.user_data,
                stage_out(stage),
                text.as_ptr().cast(),
                source.len(),
                &mut id,
                sink.0,
            )
        };
        let log = sink.finish().text;
        if ok {
            Ok(self.object(id, false))
        } else {
            Err(log)
        }
    }

    fn link(
        &mut self,
        vertex: &Self::Shader,
        fragment: &Self::Shader,
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        let options = CLinkOptions::new(options);
        let mut id = 0u64;
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; `options.view` points into `options`,
        // which outlives the call; `id` is a live local.
        let ok = unsafe {
            (self.gl.link)(
                self.gl.user_data,
                vertex.id,
                fragment.id,
                &options.view,
                &mut id,
                sink.0,
            )
        };
        let log = sink.finish().text;
        if ok {
            Ok(self.object(id, true))
        } else {
            Err(refusal(log, "the host refused to link the program"))
        }
    }

    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        let mut format = 0u32;
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; `format` is a live local.
        let ok =
            unsafe { (self.gl.program_binary)(self.gl.user_data, program.id, &mut format, sink.0) };
        let data = sink.finish();
        if ok {
            Ok(ProgramBinaryData {
                format,
                bytes: data.bytes,
            })
        } else {
            Err(refusal(data.text, "the host returned no program binary"))
        }
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String> {
        let mut id = 0u64;
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; the bytes outlive the call; `id` is a
        // live local.
        let ok = unsafe {
            (self.gl.load_binary)(
                self.gl.user_data,
                binary.format,
                binary.bytes.as_ptr(),
                binary.bytes.len(),
                &mut id,
                sink.0,
            )
        };
        let log = sink.finish().text;
        if ok {
            Ok(self.object(id, true))
        } else {
            Err(refusal(log, "the host refused the program binary"))
        }
    }

    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.variables(self.gl.active_attributes, program)
    }

    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.variables(self.gl.active_uniforms, program)
    }
}

fn sink(sink: *mut gpusvc_host_sink) -> Result<handle::Local<SinkData>, FfiError> {
    handle::local(sink, "sink", Kind::HostSink)
}

/// Appends `len` bytes of text (an info log, a reason) to a sink; invalid UTF-8 is replaced.
///
/// # Safety
/// `text` is NULL or valid for `len` bytes of reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_host_sink_write_text(
    sink: *mut gpusvc_host_sink,
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
pub unsafe extern "C" fn gpusvc_host_sink_write_bytes(
    sink: *mut gpusvc_host_sink,
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
/// `variable` is NULL or valid for one read, its name NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_host_sink_push_variable(
    sink: *mut gpusvc_host_sink,
    variable: *const gpusvc_active_variable,
) -> gpusvc_result {
    ffi_guard(|| {
        let sink = self::sink(sink)?;
        if variable.is_null() {
            return Err(null_argument("variable"));
        }
        // SAFETY: non-null and valid for a read (contract).
        let v = unsafe { variable.read_unaligned() };
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

// ---- managers, shaders, linked programs ----

#[derive(Debug)]
enum Manager {
    Gl(ProgramManager<OwnedGl>),
    Host(ProgramManager<HostBackend>),
}

#[derive(Debug)]
enum ShaderObject {
    Gl(Shader<headless_gl::Shader>),
    Host(Shader<HostObject>),
}

macro_rules! each_shader {
    ($obj:expr, $s:ident => $body:expr) => {
        match $obj {
            ShaderObject::Gl($s) => $body,
            ShaderObject::Host($s) => $body,
        }
    };
}

#[derive(Debug)]
struct ShaderHandle {
    /// The manager that made it (its handle's id).
    manager: usize,
    shader: ShaderObject,
    /// The variable maps as C strings, built on first read after a change.
    c_variables: Option<CShaderVariables>,
}

impl ShaderHandle {
    fn stage(&self) -> ShaderStage {
        each_shader!(&self.shader, s => s.stage())
    }

    fn c_variables(&mut self) -> &CShaderVariables {
        let shader = &self.shader;
        self.c_variables.get_or_insert_with(|| {
            each_shader!(shader, s => s
                .variables()
                .map(CShaderVariables::new)
                .unwrap_or_default())
        })
    }
}

#[derive(Debug)]
struct CActive {
    name: CString,
    gl_type: u32,
    size: i32,
    location: Option<i32>,
}

impl CActive {
    fn new(v: &ActiveVariable) -> Self {
        CActive {
            name: c_string(&v.name),
            gl_type: v.gl_type,
            size: v.size,
            location: v.location,
        }
    }
}

struct LinkedHandle {
    object: u64,
    key: ProgramKey,
    origin: LinkOrigin,
    attributes: Vec<CActive>,
    uniforms: Vec<CActive>,
    /// The driver object, deleted when the handle is freed.
    _program: Box<dyn Any>,
}

/// The id C sees for a driver program object.
trait ObjectId {
    fn object_id(&self) -> u64;
}

impl ObjectId for headless_gl::Program {
    fn object_id(&self) -> u64 {
        u64::from(self.raw().0.get())
    }
}

impl ObjectId for HostObject {
    fn object_id(&self) -> u64 {
        self.id
    }
}

impl LinkedHandle {
    fn new<P: ObjectId + 'static>(linked: LinkedProgram<P>) -> Self {
        LinkedHandle {
            object: linked.program.object_id(),
            key: linked.key,
            origin: linked.origin,
            attributes: linked.attributes.iter().map(CActive::new).collect(),
            uniforms: linked.uniforms.iter().map(CActive::new).collect(),
            _program: Box::new(linked.program),
        }
    }
}

fn manager(m: *const gpusvc_program_manager) -> Result<handle::Local<Manager>, FfiError> {
    handle::local(m, "manager", Kind::ProgramManager)
}

fn shader(s: *const gpusvc_shader, name: &str) -> Result<handle::Local<ShaderHandle>, FfiError> {
    handle::local(s, name, Kind::Shader)
}

fn linked(p: *const gpusvc_linked_program) -> Result<handle::Local<LinkedHandle>, FfiError> {
    handle::local(p, "program", Kind::LinkedProgram)
}

/// Creates a program manager over a headless GL context (`gpusvc_gl_context_open`) and a
/// cache. `backend_identity` (translator / ANGLE version; may be empty) goes into every program
/// key. Must be called on the context's thread (`GPUSVC_WRONG_THREAD` otherwise); the manager,
/// its shaders and programs are bound to that thread. The manager shares ownership of the
/// context and the cache: either may be freed first.
///
/// # Safety
/// `ctx` is NULL or a pointer from `gpusvc_gl_context_open`; `backend_identity` is NULL or a
/// NUL-terminated string; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_new_gl(
    ctx: *const gpusvc_gl_context,
    cache: *const gpusvc_program_cache,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let ctx = unsafe { gl_context(ctx) }?;
        let cache = crate::program_cache::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(backend_identity, "backend_identity") }?;
        let out = out_ptr(out, "out")?;
        let manager = Manager::Gl(ProgramManager::new(OwnedGl(ctx), cache, identity));
        let handle = handle::new_local(Kind::ProgramManager, manager);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Creates a program manager over the host's GL entry points (see `gpusvc_host_gl`; the struct
/// is copied, the required callbacks must be non-NULL) and a cache. The manager, its shaders
/// and programs are bound to the calling thread.
///
/// # Safety
/// `gl` is NULL or valid for one read, its callbacks as documented on `gpusvc_host_gl`;
/// `backend_identity` is NULL or a NUL-terminated string; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_new_host(
    gl: *const gpusvc_host_gl,
    cache: *const gpusvc_program_cache,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        if gl.is_null() {
            return Err(null_argument("gl"));
        }
        // SAFETY: non-null and valid for a read (contract).
        let gl = HostGl::new(&unsafe { gl.read_unaligned() })?;
        let cache = crate::program_cache::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(backend_identity, "backend_identity") }?;
        let out = out_ptr(out, "out")?;
        let backend = HostBackend { gl: Rc::new(gl) };
        let manager = Manager::Host(ProgramManager::new(backend, cache, identity));
        let handle = handle::new_local(Kind::ProgramManager, manager);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Frees a manager. NULL is a no-op; a freed or unknown handle is `GPUSVC_INVALID_HANDLE`; from
/// another thread `GPUSVC_WRONG_THREAD` (nothing freed). Its shaders and linked programs stay
/// valid (they cannot be compiled or linked any more) until they are freed.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_free(
    manager: *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| handle::free(manager, Kind::ProgramManager))
}

/// Creates a shader of `manager` with a stage (`GPUSVC_SHADER_STAGE_*`) and `source_len` bytes
/// of UTF-8 source (non-empty; copied). It is not compiled yet.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_new(
    manager: *const gpusvc_program_manager,
    stage: u32,
    source: *const c_char,
    source_len: usize,
    out: *mut *mut gpusvc_shader,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let stage = stage_in(stage)?;
        // SAFETY: forwarded from this function's contract.
        let source = unsafe { source_in(source, source_len) }?;
        let out = out_ptr(out, "out")?;
        let shader = match &*m.borrow()? {
            Manager::Gl(_) => ShaderObject::Gl(Shader::new(stage, source)),
            Manager::Host(_) => ShaderObject::Host(Shader::new(stage, source)),
        };
        let handle = handle::new_local(
            Kind::Shader,
            ShaderHandle {
                manager: manager.addr(),
                shader,
                c_variables: None,
            },
        );
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Frees a shader (and the driver object it holds). NULL is a no-op; a freed or unknown handle
/// is `GPUSVC_INVALID_HANDLE`; from another thread `GPUSVC_WRONG_THREAD`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_free(shader: *mut gpusvc_shader) -> gpusvc_result {
    ffi_guard(|| handle::free(shader, Kind::Shader))
}

/// Replaces the source (`glShaderSource`): non-empty UTF-8, copied. The shader's hash does not
/// change until it is compiled again.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_set_source(
    shader: *const gpusvc_shader,
    source: *const c_char,
    source_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        // SAFETY: forwarded from this function's contract.
        let source = unsafe { source_in(source, source_len) }?;
        each_shader!(&mut s.borrow_mut()?.shader, s => s.set_source(source));
        Ok(())
    })
}

/// Sets the compile options that change the compiled output (translator flags, ...; opaque
/// bytes, part of the shader hash; `options` may be NULL when `options_len` is 0).
///
/// # Safety
/// `options` is NULL or valid for `options_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_set_compile_options(
    shader: *const gpusvc_shader,
    options: *const u8,
    options_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { slice_in(options, options_len, "options") }?;
        each_shader!(&mut s.borrow_mut()?.shader, s => s.set_compile_options(options));
        Ok(())
    })
}

/// Sets the variable maps a translator produced for this shader (copied). They are stored with
/// the program and restored on a cache hit.
///
/// # Safety
/// `variables` is NULL or valid for one read, its pointers as documented on
/// `gpusvc_shader_variables`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_set_variables(
    shader: *const gpusvc_shader,
    variables: *const gpusvc_shader_variables,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        if variables.is_null() {
            return Err(null_argument("variables"));
        }
        // SAFETY: non-null and valid for a read (contract).
        let v = unsafe { shader_variables_in(&variables.read_unaligned()) }?;
        let mut s = s.borrow_mut()?;
        each_shader!(&mut s.shader, s => s.set_variables(v));
        s.c_variables = None;
        Ok(())
    })
}

/// The shader's stage (`GPUSVC_SHADER_STAGE_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_stage(
    shader: *const gpusvc_shader,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let out = out_ptr(out, "out")?;
        let stage = stage_out(s.borrow()?.stage());
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, stage) };
        Ok(())
    })
}

/// The shader's state (`GPUSVC_SHADER_STATE_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_state(
    shader: *const gpusvc_shader,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let out = out_ptr(out, "out")?;
        let state = each_shader!(&s.borrow()?.shader, s => match s.state() {
            ShaderState::NotCompiled => GPUSVC_SHADER_STATE_NOT_COMPILED,
            ShaderState::Compiled { .. } => GPUSVC_SHADER_STATE_COMPILED,
            ShaderState::Deferred { .. } => GPUSVC_SHADER_STATE_DEFERRED,
            ShaderState::Failed { .. } => GPUSVC_SHADER_STATE_FAILED,
        });
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, state) };
        Ok(())
    })
}

/// `GL_COMPILE_STATUS` as the host reports it: true when compiled or deferred.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_compile_status(
    shader: *const gpusvc_shader,
    out: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let out = out_ptr(out, "out")?;
        let status = each_shader!(&s.borrow()?.shader, s => s.compile_status());
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, status) };
        Ok(())
    })
}

/// The hash of the shader's last compile (compiled, deferred or failed);
/// `GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED` before the first compile.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_compiled_hash(
    shader: *const gpusvc_shader,
    out: *mut gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let out = out_ptr(out, "out")?;
        let hash = each_shader!(&s.borrow()?.shader, s => s.compiled_hash()).ok_or_else(|| {
            FfiError::new(
                gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED,
                "the shader was never compiled",
            )
        })?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, hash.into()) };
        Ok(())
    })
}

/// The info log of a failed compile (empty otherwise). `*out_len` gets its length in bytes, NUL
/// excluded. With `buf` NULL and `len` 0 nothing else happens (a size query); otherwise `len`
/// must exceed the length (room for the NUL; else `GPUSVC_INSUFFICIENT_SIZE`, nothing written)
/// and the log is copied NUL-terminated.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_info_log(
    shader: *const gpusvc_shader,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let out_len = out_ptr(out_len, "out_len")?;
        let s = s.borrow()?;
        let log = each_shader!(&s.shader, s => s.info_log()).unwrap_or("");
        if !(buf.is_null() && len == 0) {
            let buf = out_ptr(buf, "buf")?;
            if len <= log.len() {
                return Err(FfiError::new(
                    gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
                    format!("the log has {} bytes plus a NUL, room for {len}", log.len()),
                ));
            }
            // SAFETY: `buf` is non-null and valid for `len > log.len()` bytes (contract); the
            // source is our own string.
            unsafe {
                std::ptr::copy_nonoverlapping(log.as_ptr(), buf.cast::<u8>(), log.len());
                *buf.add(log.len()) = 0;
            }
        }
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_len, log.len()) };
        Ok(())
    })
}

/// How many variables of `kind` (`GPUSVC_VARIABLE_KIND_*`) the shader's variable maps hold
/// (those set by `gpusvc_shader_set_variables` or restored by a cache hit; 0 when none).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_variable_count(
    shader: *const gpusvc_shader,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { s.borrow_mut()?.c_variables().count_out(kind, out) };
        Ok(())
    })
}

/// Variable `index` of `kind` in the shader's maps. The strings in `*out` belong to the shader
/// and stay valid until it is freed, given new variables, or linked.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_shader_variable(
    shader: *const gpusvc_shader,
    kind: u32,
    index: usize,
    out: *mut gpusvc_variable_info,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { s.borrow_mut()?.c_variables().entry_out(kind, index, out) }
    })
}

fn not_this_manager(what: &str) -> FfiError {
    invalid_argument(format!(
        "the {what} shader belongs to another program manager"
    ))
}

/// Compiles a shader (`glCompileShader` through the cache): when its compile status is known
/// the driver compile is deferred (`GPUSVC_COMPILE_OUTCOME_DEFERRED`); otherwise the driver
/// compiles it and, only when it succeeds, the status is recorded. A failed compile is an
/// outcome (`GPUSVC_COMPILE_OUTCOME_FAILED`, log in `gpusvc_shader_info_log`), not an error.
///
/// # Safety
/// `out_outcome` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_compile(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_shader,
    out_outcome: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::shader(shader, "shader")?;
        let out_outcome = out_ptr(out_outcome, "out_outcome")?;
        let mut m = m.borrow_mut()?;
        let mut s = s.borrow_mut()?;
        if s.manager != manager.addr() {
            return Err(not_this_manager("given"));
        }
        s.c_variables = None;
        let outcome = match (&mut *m, &mut s.shader) {
            (Manager::Gl(m), ShaderObject::Gl(s)) => m.compile(s),
            (Manager::Host(m), ShaderObject::Host(s)) => m.compile(s),
            _ => return Err(not_this_manager("given")),
        };
        let outcome = match outcome {
            CompileOutcome::Compiled => GPUSVC_COMPILE_OUTCOME_COMPILED,
            CompileOutcome::Deferred => GPUSVC_COMPILE_OUTCOME_DEFERRED,
            CompileOutcome::Failed => GPUSVC_COMPILE_OUTCOME_FAILED,
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_outcome, outcome) };
        Ok(())
    })
}

fn link_failure(e: &LinkFailure) -> FfiError {
    let code = match e {
        LinkFailure::ShaderNotCompiled { .. } => {
            gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED
        }
        LinkFailure::Compile { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_COMPILE_FAILED,
        LinkFailure::Link { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED,
    };
    FfiError::new(code, e.to_string())
}

/// Reads link options from C (NULL: no bindings, no transform feedback, no page).
///
/// # Safety
/// `options` is NULL or valid for one read, its pointers as documented.
unsafe fn program_options_in(
    options: *const gpusvc_program_options,
) -> Result<ProgramOptions, FfiError> {
    if options.is_null() {
        return Ok(ProgramOptions::default());
    }
    // SAFETY: non-null and valid for a read (contract).
    let o = unsafe { options.read_unaligned() };
    Ok(ProgramOptions {
        // SAFETY: forwarded from this function's contract.
        link: unsafe { link_options_in(&o.link) }?,
        page: o.has_page.then_some(o.page),
    })
}

/// Links a vertex and a fragment shader of `manager` through the cache (`glLinkProgram`):
/// a cached binary is loaded (`GPUSVC_LINK_ORIGIN_CACHE_HIT`, the shaders' variable maps are
/// restored, nothing is compiled, linked or saved); a binary the driver refuses is evicted and
/// the program is built from source (`..._RELINKED_AFTER_REJECTION`); a miss compiles what was
/// deferred, links and saves the binary (`..._LINKED`). `options` may be NULL (no bindings, no
/// transform feedback, no page).
///
/// Errors: `GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED`, `..._COMPILE_FAILED` (a deferred shader
/// failed), `..._LINK_FAILED`, with the driver's log in `gpusvc_last_error_detail`.
///
/// # Safety
/// `options` is NULL or valid for one read, its pointers as documented on its fields; `out` is
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_link(
    manager: *const gpusvc_program_manager,
    vertex: *const gpusvc_shader,
    fragment: *const gpusvc_shader,
    options: *const gpusvc_program_options,
    out: *mut *mut gpusvc_linked_program,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let vs = self::shader(vertex, "vertex")?;
        let fs = self::shader(fragment, "fragment")?;
        if vertex.addr() == fragment.addr() {
            return Err(invalid_argument("vertex and fragment are the same shader"));
        }
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { program_options_in(options) }?;
        let out = out_ptr(out, "out")?;
        let mut m = m.borrow_mut()?;
        let mut vs = vs.borrow_mut()?;
        let mut fs = fs.borrow_mut()?;
        if vs.manager != manager.addr() {
            return Err(not_this_manager("vertex"));
        }
        if fs.manager != manager.addr() {
            return Err(not_this_manager("fragment"));
        }
        if vs.stage() != ShaderStage::Vertex {
            return Err(invalid_argument(format!(
                "`vertex` is a {} shader",
                vs.stage()
            )));
        }
        if fs.stage() != ShaderStage::Fragment {
            return Err(invalid_argument(format!(
                "`fragment` is a {} shader",
                fs.stage()
            )));
        }
        vs.c_variables = None;
        fs.c_variables = None;
        let linked = match (&mut *m, &mut vs.shader, &mut fs.shader) {
            (Manager::Gl(m), ShaderObject::Gl(v), ShaderObject::Gl(f)) => m
                .link(v, f, &options)
                .map(LinkedHandle::new)
                .map_err(|e| link_failure(&e))?,
            (Manager::Host(m), ShaderObject::Host(v), ShaderObject::Host(f)) => m
                .link(v, f, &options)
                .map(LinkedHandle::new)
                .map_err(|e| link_failure(&e))?,
            _ => return Err(not_this_manager("given")),
        };
        let handle = handle::new_local(Kind::LinkedProgram, linked);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Frees a linked program and deletes its driver object (GL form; host form when
/// `delete_program` is given). NULL is a no-op; a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`; from another thread `GPUSVC_WRONG_THREAD`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_free(
    program: *mut gpusvc_linked_program,
) -> gpusvc_result {
    ffi_guard(|| handle::free(program, Kind::LinkedProgram))
}

/// The program object: its GL name (GL form) or the host's program id (host form).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_object(
    program: *const gpusvc_linked_program,
    out: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let out = out_ptr(out, "out")?;
        let object = p.borrow()?.object;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, object) };
        Ok(())
    })
}

/// How the program came about (`GPUSVC_LINK_ORIGIN_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_origin(
    program: *const gpusvc_linked_program,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let out = out_ptr(out, "out")?;
        let origin = match p.borrow()?.origin {
            LinkOrigin::CacheHit => GPUSVC_LINK_ORIGIN_CACHE_HIT,
            LinkOrigin::Linked => GPUSVC_LINK_ORIGIN_LINKED,
            LinkOrigin::RelinkedAfterRejection => GPUSVC_LINK_ORIGIN_RELINKED_AFTER_REJECTION,
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, origin) };
        Ok(())
    })
}

/// The program's cache key.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_key(
    program: *const gpusvc_linked_program,
    out: *mut gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let out = out_ptr(out, "out")?;
        let key = p.borrow()?.key;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, key.into()) };
        Ok(())
    })
}

fn active_list(p: &LinkedHandle, kind: VariableKind) -> &[CActive] {
    match kind {
        VariableKind::Attribute => &p.attributes,
        VariableKind::Uniform => &p.uniforms,
    }
}

/// How many active variables of `kind` (`GPUSVC_VARIABLE_KIND_*`) the program has.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_variable_count(
    program: *const gpusvc_linked_program,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        let n = active_list(&*p.borrow()?, kind).len();
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, n) };
        Ok(())
    })
}

/// Active variable `index` of `kind`, sorted by name. The name in `*out` belongs to the handle
/// and stays valid until it is freed. An index past the end is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_linked_program_variable(
    program: *const gpusvc_linked_program,
    kind: u32,
    index: usize,
    out: *mut gpusvc_active_variable,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        let p = p.borrow()?;
        let list = active_list(&p, kind);
        let v = list.get(index).ok_or_else(|| {
            invalid_argument(format!(
                "index {index} is past the {} variables",
                list.len()
            ))
        })?;
        let value = gpusvc_active_variable {
            name: v.name.as_ptr(),
            gl_type: v.gl_type,
            size: v.size,
            has_location: v.location.is_some(),
            location: v.location.unwrap_or(-1),
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, value) };
        Ok(())
    })
}
