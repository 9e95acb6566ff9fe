//! The host-GL backend of a program manager: the host's GL entry points (`gpusvc_program_manager_host_gl`),
//! checked, behind a `ProgramBackend`; the objects they make are owned by gpusvc and deleted
//! through the host's callbacks.

use std::ffi::{CString, c_char, c_void};
use std::rc::Rc;

use program_cache::{
    ActiveVariable, LinkOptions, ObjectId, ProgramBackend, ProgramBinaryData, ProgramInterface,
    ShaderStage,
};

use crate::kit::{FfiError, UserData, c_string, growable, null_argument};
use crate::program_cache::{
    gpusvc_program_cache_attribute_binding, gpusvc_program_cache_link_options, stage_out,
    transform_feedback_out,
};
use crate::program_manager::sink::{Sink, gpusvc_program_manager_host_sink};

/// The host's GL entry points, for a program manager over the host's own context (a browser's
/// command decoder, an engine's device). Object ids are the host's (GL names or anything else
/// non-zero); every callback gets `user_data` and runs on the manager's thread. The callbacks may
/// call `gpusvc_program_manager_host_sink_*` with the sink they were given; calling back into the manager or the
/// shaders being compiled or linked returns `GPUSVC_HANDLE_BUSY`. They must not unwind.
///
/// The struct is copied; the callbacks and `user_data` must stay valid until the manager and
/// every shader and linked program made through it are freed. The host sets `struct_size =
/// sizeof(struct gpusvc_program_manager_host_gl)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_manager_host_gl {
    /// `sizeof(struct gpusvc_program_manager_host_gl)`, set by the host: the library reads only
    /// that many bytes, the callbacks past it are NULL (callbacks added later are optional).
    pub struct_size: usize,
    /// Passed to every callback.
    pub user_data: *mut c_void,
    /// Compiles `source_len` bytes of `source` (NUL-terminated as well) for `stage`
    /// (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`). On success writes the shader id to `*out_shader` and returns
    /// true; on failure writes the info log to `log` (`gpusvc_program_manager_host_sink_write_text`), deletes
    /// its own object and returns false. Required.
    pub compile: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            stage: u32,
            source: *const c_char,
            source_len: usize,
            out_shader: *mut u64,
            log: *mut gpusvc_program_manager_host_sink,
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
            options: *const gpusvc_program_cache_link_options,
            out_program: *mut u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// `glGetProgramBinary`: writes the format to `*out_format`, the bytes to `out`
    /// (`gpusvc_program_manager_host_sink_write_bytes`) and returns true; or returns false (optionally with a
    /// reason as text). Required.
    pub program_binary: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            out_format: *mut u32,
            out: *mut gpusvc_program_manager_host_sink,
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
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// Pushes each active attribute of a linked program (`gpusvc_program_manager_host_sink_push_variable`).
    /// Required.
    pub active_attributes: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            out: *mut gpusvc_program_manager_host_sink,
        ),
    >,
    /// Pushes each active uniform of a linked program. Required.
    pub active_uniforms: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            out: *mut gpusvc_program_manager_host_sink,
        ),
    >,
    /// Deletes a shader object gpusvc owns and no longer needs. Optional (NULL: never called).
    pub delete_shader: Option<unsafe extern "C" fn(user_data: *mut c_void, shader: u64)>,
    /// Deletes a program object gpusvc owns (a freed `gpusvc_program_manager_linked_program`). Optional.
    pub delete_program: Option<unsafe extern "C" fn(user_data: *mut c_void, program: u64)>,
    /// Links `count` shaders (`shaders[i]` of stage `stages[i]`, a
    /// `GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` value, in pipeline order) with `options`, and
    /// `GL_PROGRAM_SEPARABLE` when `separable`: every program other than a vertex and a
    /// fragment shader linked together not separable (which `link` does): compute,
    /// tessellation, geometry, separable programs. As `link` otherwise. Optional (NULL: such
    /// programs fail to link with a log saying so).
    pub link_stages: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            shaders: *const u64,
            stages: *const u32,
            count: usize,
            options: *const gpusvc_program_cache_link_options,
            separable: bool,
            out_program: *mut u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// Parallel compile (`KHR_parallel_shader_compile`), optional: all three of
    /// `start_compile`, `compile_done` and `finish_compile`, or none (NULL: compiles wait, as
    /// through `compile`; one or two of them is `GPUSVC_INVALID_ARGUMENT`). `start_compile`
    /// takes `compile`'s arguments and returns at once: true with the shader id
    /// (`glCompileShader` issued, status not asked), or false with a log for a failure known at
    /// once (it deletes its own object then).
    pub start_compile: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            stage: u32,
            source: *const c_char,
            source_len: usize,
            out_shader: *mut u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// `GL_COMPLETION_STATUS_KHR` of a started compile.
    pub compile_done: Option<unsafe extern "C" fn(user_data: *mut c_void, shader: u64) -> bool>,
    /// `GL_COMPILE_STATUS` of a started compile (waiting if needed): true, or false with the
    /// info log written to `log` (gpusvc then deletes the shader through `delete_shader`).
    pub finish_compile: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            shader: u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// Parallel link, optional: all three of `start_link`, `link_done` and `finish_link`, or
    /// none (NULL: links wait, through `link` / `link_stages`). `start_link` takes
    /// `link_stages`' arguments (every program kind, vertex + fragment included) and returns at
    /// once: true with the program id (`glLinkProgram` issued), or false with a log.
    pub start_link: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            shaders: *const u64,
            stages: *const u32,
            count: usize,
            options: *const gpusvc_program_cache_link_options,
            separable: bool,
            out_program: *mut u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// `GL_COMPLETION_STATUS_KHR` of a started link.
    pub link_done: Option<unsafe extern "C" fn(user_data: *mut c_void, program: u64) -> bool>,
    /// `GL_LINK_STATUS` of a started link (waiting if needed): true, or false with the info log
    /// written to `log` (gpusvc then deletes the program through `delete_program`).
    pub finish_link: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            log: *mut gpusvc_program_manager_host_sink,
        ) -> bool,
    >,
    /// Reports a linked program's reflection beyond attributes and uniforms to `out`:
    /// `gpusvc_program_manager_host_sink_push_output` (fragment outputs),
    /// `_push_varying` (transform-feedback varyings, in link order), `_push_block` and
    /// `_push_block_member` (uniform and storage blocks), `_set_uniform_static_use` and
    /// `_set_compute_work_group_size`. Optional (NULL: none of it is known; the linked
    /// program's queries answer empty lists).
    pub program_interface: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            program: u64,
            out: *mut gpusvc_program_manager_host_sink,
        ),
    >,
}

growable!(gpusvc_program_manager_host_gl {
    first: delete_program,
    last: program_interface,
    defaults: gpusvc_program_manager_host_gl {
        struct_size: 0,
        user_data: std::ptr::null_mut(),
        compile: None,
        link: None,
        program_binary: None,
        load_binary: None,
        active_attributes: None,
        active_uniforms: None,
        delete_shader: None,
        delete_program: None,
        link_stages: None,
        start_compile: None,
        compile_done: None,
        finish_compile: None,
        start_link: None,
        link_done: None,
        finish_link: None,
        program_interface: None,
    },
});

type CompileFn = unsafe extern "C" fn(
    *mut c_void,
    u32,
    *const c_char,
    usize,
    *mut u64,
    *mut gpusvc_program_manager_host_sink,
) -> bool;
type LinkStagesFn = unsafe extern "C" fn(
    *mut c_void,
    *const u64,
    *const u32,
    usize,
    *const gpusvc_program_cache_link_options,
    bool,
    *mut u64,
    *mut gpusvc_program_manager_host_sink,
) -> bool;
type DoneFn = unsafe extern "C" fn(*mut c_void, u64) -> bool;
type FinishFn =
    unsafe extern "C" fn(*mut c_void, u64, *mut gpusvc_program_manager_host_sink) -> bool;

/// The optional parallel callbacks of one kind (compile or link), all three or none.
#[derive(Debug, Clone, Copy)]
struct Parallel<S> {
    start: S,
    done: DoneFn,
    finish: FinishFn,
}

fn parallel<S>(
    start: Option<S>,
    done: Option<DoneFn>,
    finish: Option<FinishFn>,
    names: [&str; 3],
) -> Result<Option<Parallel<S>>, FfiError> {
    match (start, done, finish) {
        (None, None, None) => Ok(None),
        (Some(start), Some(done), Some(finish)) => Ok(Some(Parallel {
            start,
            done,
            finish,
        })),
        _ => Err(crate::kit::invalid_argument(format!(
            "gl->{}, gl->{} and gl->{} are given together or not at all",
            names[0], names[1], names[2]
        ))),
    }
}

type SinkFn = unsafe extern "C" fn(*mut c_void, u64, *mut gpusvc_program_manager_host_sink);

/// The host's callbacks, checked: the required ones are present.
#[derive(Debug)]
pub(crate) struct HostGl {
    user_data: UserData,
    compile: unsafe extern "C" fn(
        *mut c_void,
        u32,
        *const c_char,
        usize,
        *mut u64,
        *mut gpusvc_program_manager_host_sink,
    ) -> bool,
    link: unsafe extern "C" fn(
        *mut c_void,
        u64,
        u64,
        *const gpusvc_program_cache_link_options,
        *mut u64,
        *mut gpusvc_program_manager_host_sink,
    ) -> bool,
    program_binary: unsafe extern "C" fn(
        *mut c_void,
        u64,
        *mut u32,
        *mut gpusvc_program_manager_host_sink,
    ) -> bool,
    load_binary: unsafe extern "C" fn(
        *mut c_void,
        u32,
        *const u8,
        usize,
        *mut u64,
        *mut gpusvc_program_manager_host_sink,
    ) -> bool,
    active_attributes: SinkFn,
    active_uniforms: SinkFn,
    delete_shader: Option<unsafe extern "C" fn(*mut c_void, u64)>,
    delete_program: Option<unsafe extern "C" fn(*mut c_void, u64)>,
    link_stages: Option<LinkStagesFn>,
    parallel_compile: Option<Parallel<CompileFn>>,
    parallel_link: Option<Parallel<LinkStagesFn>>,
    program_interface: Option<SinkFn>,
}

impl HostGl {
    pub(crate) fn new(gl: &gpusvc_program_manager_host_gl) -> Result<Self, FfiError> {
        let required = |name: &str| null_argument(&format!("gl->{name}"));
        Ok(HostGl {
            user_data: UserData::new(gl.user_data),
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
            link_stages: gl.link_stages,
            program_interface: gl.program_interface,
            parallel_compile: parallel(
                gl.start_compile,
                gl.compile_done,
                gl.finish_compile,
                ["start_compile", "compile_done", "finish_compile"],
            )?,
            parallel_link: parallel(
                gl.start_link,
                gl.link_done,
                gl.finish_link,
                ["start_link", "link_done", "finish_link"],
            )?,
        })
    }
}

/// A host object id that gpusvc owns: deleted through the host's callback when dropped.
#[derive(Debug)]
pub(crate) struct HostObject {
    id: u64,
    gl: Rc<HostGl>,
    program: bool,
    /// A shader's stage (for the stage arrays of `link_stages` / `start_link`).
    stage: Option<ShaderStage>,
}

impl ObjectId for HostObject {
    /// The host's id (what `gpusvc_program_manager_linked_program_object` returns).
    fn object_id(&self) -> u64 {
        self.id
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        let delete = if self.program {
            self.gl.delete_program
        } else {
            self.gl.delete_shader
        };
        if let Some(delete) = delete {
            // SAFETY: `gpusvc_program_manager_host_gl`'s contract: the callback and user_data are valid until
            // every object made through the manager is freed, which is now.
            unsafe { delete(self.gl.user_data.get(), self.id) };
        }
    }
}

/// [`ProgramBackend`] over the host's callbacks.
#[derive(Debug)]
pub(crate) struct HostBackend {
    gl: Rc<HostGl>,
    /// Whether the last compile or link error came from the host's driver (a callback that
    /// returned false with its log), not from this backend (a callback the host did not give).
    verdict: bool,
}

impl HostBackend {
    pub(crate) fn new(gl: HostGl) -> Self {
        HostBackend {
            gl: Rc::new(gl),
            verdict: true,
        }
    }
}

/// `options` as C: the strings and arrays the pointers in `view` point into.
struct CLinkOptions {
    _names: Vec<CString>,
    _bindings: Vec<gpusvc_program_cache_attribute_binding>,
    _varying_strings: Vec<CString>,
    _varyings: Vec<*const c_char>,
    view: gpusvc_program_cache_link_options,
}

impl CLinkOptions {
    fn new(o: &LinkOptions) -> Self {
        let names: Vec<CString> = o
            .attribute_bindings
            .iter()
            .map(|b| c_string(&b.name))
            .collect();
        let bindings: Vec<gpusvc_program_cache_attribute_binding> = o
            .attribute_bindings
            .iter()
            .zip(&names)
            .map(|(b, n)| gpusvc_program_cache_attribute_binding {
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
        let view = gpusvc_program_cache_link_options {
            attribute_bindings: bindings.as_ptr(),
            attribute_binding_count: bindings.len(),
            transform_feedback_varyings: varyings.as_ptr(),
            transform_feedback_varying_count: varyings.len(),
            transform_feedback_mode: transform_feedback_out(o.transform_feedback_mode),
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
            stage: None,
        }
    }

    /// Runs a compile-like callback (`compile` or `start_compile`) for `stage`.
    fn compile_with(
        &self,
        f: CompileFn,
        stage: ShaderStage,
        source: &str,
    ) -> Result<HostObject, String> {
        let mut text = Vec::with_capacity(source.len() + 1);
        text.extend_from_slice(source.as_bytes());
        text.push(0);
        self.make(false, |user_data, id, log| {
            // SAFETY: the host's callback with its user_data (`gpusvc_program_manager_host_gl`'s
            // contract); `text` holds `source.len()` bytes and a NUL and outlives the call.
            unsafe {
                f(
                    user_data,
                    stage_out(stage),
                    text.as_ptr().cast(),
                    source.len(),
                    id,
                    log,
                )
            }
        })
        .map(|mut o| {
            o.stage = Some(stage);
            o
        })
    }

    /// Runs a `link_stages`-like callback on `shaders` (their stages from their compile).
    fn link_with(
        &self,
        f: LinkStagesFn,
        shaders: &[&HostObject],
        options: &LinkOptions,
    ) -> Result<HostObject, String> {
        let ids: Vec<u64> = shaders.iter().map(|s| s.id).collect();
        let stages = shaders
            .iter()
            .map(|s| s.stage.map(stage_out))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| "a shader of the link was not made by this backend".to_owned())?;
        let separable = options.separable;
        let options = CLinkOptions::new(options);
        self.make(true, |user_data, id, log| {
            // SAFETY: the host's callback with its user_data; `ids`, `stages` (both `count`
            // long) and `options.view` (pointing into `options`) outlive the call.
            unsafe {
                f(
                    user_data,
                    ids.as_ptr(),
                    stages.as_ptr(),
                    ids.len(),
                    &options.view,
                    separable,
                    id,
                    log,
                )
            }
        })
    }

    /// Whether a started compile or link of `object` is done: the host's `done` callback when
    /// it gave the parallel callbacks of that kind (`parallel`), else true at once.
    fn started_done<S>(&self, parallel: Option<Parallel<S>>, object: &HostObject) -> bool {
        match parallel {
            // SAFETY: the host's callback with its user_data.
            Some(p) => unsafe { (p.done)(self.gl.user_data.get(), object.id) },
            None => true,
        }
    }

    /// Ends a started compile or link of `object`: through the host's `finish` callback when it
    /// gave the parallel callbacks of that kind (`parallel`; a failure is its log, or `refused`
    /// when the log is empty), else the object as it is.
    fn finish_started<S>(
        &self,
        parallel: Option<Parallel<S>>,
        object: HostObject,
        refused: &str,
    ) -> Result<HostObject, String> {
        match parallel {
            Some(p) => self
                .finish_with(p.finish, object)
                .map_err(|log| refusal(log, refused)),
            None => Ok(object),
        }
    }

    /// Runs a `finish_*` callback on an object: the object back, or the log (the object is
    /// dropped, so deleted through the host's delete callback).
    fn finish_with(&self, f: FinishFn, object: HostObject) -> Result<HostObject, String> {
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; the sink is registered for the call.
        let ok = unsafe { f(self.gl.user_data.get(), object.id, sink.handle()) };
        let log = sink.finish().text;
        if ok { Ok(object) } else { Err(log) }
    }

    /// Runs a host callback that makes an object: `call` gets the user data, the id to write
    /// (a live local) and the sink (registered for the call). When it returns true, the object
    /// it wrote the id of (a program when `program`, else a shader); otherwise the text it
    /// wrote to the sink.
    fn make(
        &self,
        program: bool,
        call: impl FnOnce(*mut c_void, &mut u64, *mut gpusvc_program_manager_host_sink) -> bool,
    ) -> Result<HostObject, String> {
        let mut id = 0u64;
        let sink = Sink::new();
        let ok = call(self.gl.user_data.get(), &mut id, sink.handle());
        let log = sink.finish().text;
        if ok {
            Ok(self.object(id, program))
        } else {
            Err(log)
        }
    }

    fn variables(&self, f: SinkFn, program: &HostObject) -> Vec<ActiveVariable> {
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data (`gpusvc_program_manager_host_gl`'s contract); the sink
        // handle is registered for the call.
        unsafe { f(self.gl.user_data.get(), program.id, sink.handle()) };
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

    fn last_failure_is_verdict(&self) -> bool {
        self.verdict
    }

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        self.compile_with(self.gl.compile, stage, source)
    }

    fn link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        self.verdict = true;
        if let [vertex, fragment] = shaders
            && vertex.stage == Some(ShaderStage::Vertex)
            && fragment.stage == Some(ShaderStage::Fragment)
            && !options.separable
        {
            let c_options = CLinkOptions::new(options);
            return self
                .make(true, |user_data, id, log| {
                    // SAFETY: the host's callback with its user_data; `c_options.view` points
                    // into `c_options`, which outlives the call.
                    unsafe {
                        (self.gl.link)(user_data, vertex.id, fragment.id, &c_options.view, id, log)
                    }
                })
                .map_err(|log| refusal(log, "the host refused to link the program"));
        }
        let Some(link_stages) = self.gl.link_stages else {
            // Not the driver's verdict on the program: never cached as a failed link.
            self.verdict = false;
            return Err(
                "the host gave no link_stages callback: only a vertex and a fragment \
                        shader can be linked (not separable)"
                    .into(),
            );
        };
        self.link_with(link_stages, shaders, options)
            .map_err(|log| refusal(log, "the host refused to link the program"))
    }

    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        match self.gl.parallel_compile {
            Some(p) => self.compile_with(p.start, stage, source),
            None => self.compile(stage, source),
        }
    }

    fn compile_done(&mut self, shader: &Self::Shader) -> bool {
        self.started_done(self.gl.parallel_compile, shader)
    }

    fn finish_compile(&mut self, shader: Self::Shader) -> Result<Self::Shader, String> {
        self.finish_started(
            self.gl.parallel_compile,
            shader,
            "the host reported a failed compile",
        )
    }

    fn start_link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        match self.gl.parallel_link {
            Some(p) => self
                .link_with(p.start, shaders, options)
                .map_err(|log| refusal(log, "the host refused to link the program")),
            None => self.link(shaders, options),
        }
    }

    fn link_done(&mut self, program: &Self::Program) -> bool {
        self.started_done(self.gl.parallel_link, program)
    }

    fn finish_link(&mut self, program: Self::Program) -> Result<Self::Program, String> {
        self.finish_started(
            self.gl.parallel_link,
            program,
            "the host refused to link the program",
        )
    }

    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        let mut format = 0u32;
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; `format` is a live local.
        let ok = unsafe {
            (self.gl.program_binary)(
                self.gl.user_data.get(),
                program.id,
                &mut format,
                sink.handle(),
            )
        };
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
        self.make(true, |user_data, id, log| {
            // SAFETY: the host's callback with its user_data; the bytes outlive the call.
            unsafe {
                (self.gl.load_binary)(
                    user_data,
                    binary.format,
                    binary.bytes.as_ptr(),
                    binary.bytes.len(),
                    id,
                    log,
                )
            }
        })
        .map_err(|log| refusal(log, "the host refused the program binary"))
    }

    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.variables(self.gl.active_attributes, program)
    }

    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.variables(self.gl.active_uniforms, program)
    }

    fn program_interface(&mut self, program: &Self::Program) -> ProgramInterface {
        let Some(f) = self.gl.program_interface else {
            return ProgramInterface::default();
        };
        let sink = Sink::new();
        // SAFETY: the host's callback with its user_data; the sink is registered for the call.
        unsafe { f(self.gl.user_data.get(), program.id, sink.handle()) };
        sink.finish().interface
    }
}
