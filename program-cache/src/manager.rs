//! The compile/link flow through the cache: `ProgramManager`, after Chromium's
//! `gpu::gles2::ProgramManager` / `MemoryProgramCache` pair.
//!
//! * `compile`: a shader whose hash has status `Success` is not compiled: the driver compile is
//!   deferred until a link needs the shader object. A miss compiles, and records `Success` only
//!   when the driver says so.
//! * `link`: a cached binary is loaded into a new program object. If the driver refuses it, the
//!   entry is evicted and counted, deferred shaders are compiled, and the program is linked from
//!   source. A miss compiles what is deferred, links and saves the binary. The binary is read
//!   out of the driver only when the cache would keep it: under critical memory pressure, or
//!   when the backend's `GL_PROGRAM_BINARY_LENGTH` says the entry is over the budget in force,
//!   the read is skipped (counted in [`ProgramManager::binary_reads_skipped`] and as a refused
//!   save).
//!
//! Either way the caller gets the same link status, the same active attributes and uniforms and
//! a program that renders the same as an uncached compile + link.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gl_types::{ActiveVariable, LinkOptions, ProgramInterface, ShaderStage};

use crate::backend::ProgramBackend;
use crate::cache::ProgramCache;
use crate::key::{
    ProgramKey, ProgramKeyInput, ShaderHash, backend_shader_hash, compile_failure_key, program_key,
};
use crate::memory_store::PageId;
use crate::program::{
    BlockInfo, CachedProgram, FailureRecord, MAX_FAILURE_LOG, ShaderVariables, StageRecord,
    VariableInfo,
};
use crate::status::CompileStatus;

/// Where a shader stands.
#[derive(Debug)]
pub enum ShaderState<S> {
    /// Never compiled.
    NotCompiled,
    /// Compiled by the driver.
    Compiled {
        /// Hash of what was compiled.
        hash: ShaderHash,
        /// The source as compiled.
        source: String,
        /// The driver object.
        object: S,
    },
    /// Handed to the driver with [`ProgramManager::start_compile`]; its result is not asked
    /// for yet ([`ProgramManager::finish_compile`]).
    Compiling {
        /// Hash of what is compiled.
        hash: ShaderHash,
        /// The source as compiled.
        source: String,
        /// The driver object.
        object: S,
    },
    /// Known to compile; the driver compile waits until a link needs it.
    Deferred {
        /// Hash of what was "compiled".
        hash: ShaderHash,
        /// The source as "compiled", kept to compile it later.
        source: String,
    },
    /// The driver refused it.
    Failed {
        /// Hash of what was compiled.
        hash: ShaderHash,
        /// The driver's info log.
        log: String,
    },
}

/// Names one [`ProgramManager`]: unique in the process, never reused (even after the manager
/// is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProgramManagerId(u64);

/// The next [`ProgramManagerId`]. Relaxed is enough: `fetch_add` hands out each value once
/// whatever the ordering (one atomic location), and the id publishes no other memory.
static NEXT_MANAGER: AtomicU64 = AtomicU64::new(1);

/// The next deferred-read ticket ([`LinkedProgram`]'s private half of a deferred read). Relaxed
/// as for [`NEXT_MANAGER`]: each value is handed out once, and it publishes no other memory.
static NEXT_DEFERRED_TICKET: AtomicU64 = AtomicU64::new(1);

impl ProgramManagerId {
    fn next() -> Self {
        ProgramManagerId(NEXT_MANAGER.fetch_add(1, Ordering::Relaxed))
    }
}

/// A shader as the host's GL front end sees it: source, options, variables, compile state, and
/// the [`ProgramManager`] it belongs to.
///
/// A shader belongs to the manager that made it ([`ProgramManager::new_shader`]) or, made with
/// [`Shader::new`], to the first manager that compiles it. Its driver object is that manager's
/// backend's: another manager refuses it ([`ForeignShader`], [`LinkFailure::ForeignShader`]).
#[derive(Debug)]
pub struct Shader<S> {
    /// The manager it belongs to; `None` until one compiles it (made with `Shader::new`).
    manager: Option<ProgramManagerId>,
    stage: ShaderStage,
    source: String,
    compile_options: Vec<u8>,
    variables: Option<ShaderVariables>,
    state: ShaderState<S>,
}

impl<S> Shader<S> {
    /// A shader with source, not compiled yet, of no manager until one compiles it
    /// ([`ProgramManager::new_shader`] makes one that belongs to a manager from the start).
    pub fn new(stage: ShaderStage, source: impl Into<String>) -> Self {
        Shader {
            manager: None,
            stage,
            source: source.into(),
            compile_options: Vec::new(),
            variables: None,
            state: ShaderState::NotCompiled,
        }
    }

    /// The manager it belongs to (`None`: made with [`Shader::new`] and never compiled).
    pub fn manager(&self) -> Option<ProgramManagerId> {
        self.manager
    }
    /// Stage.
    pub fn stage(&self) -> ShaderStage {
        self.stage
    }
    /// Current source (what the next compile uses).
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Replaces the source; the shader's key does not change until it is compiled again.
    pub fn set_source(&mut self, source: impl Into<String>) {
        self.source = source.into();
    }
    /// Sets the compile options that change the output (translator flags, ...).
    pub fn set_compile_options(&mut self, options: impl Into<Vec<u8>>) {
        self.compile_options = options.into();
    }
    /// Sets the variable maps a translator produced; restored from the cache on a hit.
    pub fn set_variables(&mut self, variables: ShaderVariables) {
        self.variables = Some(variables);
    }
    /// The variable maps (from the translator, or restored from the cache).
    pub fn variables(&self) -> Option<&ShaderVariables> {
        self.variables.as_ref()
    }
    /// The compile state.
    pub fn state(&self) -> &ShaderState<S> {
        &self.state
    }
    /// Hash of the last compile, if any.
    pub fn compiled_hash(&self) -> Option<ShaderHash> {
        match &self.state {
            ShaderState::NotCompiled => None,
            ShaderState::Compiled { hash, .. }
            | ShaderState::Compiling { hash, .. }
            | ShaderState::Deferred { hash, .. }
            | ShaderState::Failed { hash, .. } => Some(*hash),
        }
    }
    /// `GL_COMPILE_STATUS` as the host reports it: true when compiled or deferred.
    pub fn compile_status(&self) -> bool {
        matches!(
            self.state,
            ShaderState::Compiled { .. } | ShaderState::Deferred { .. }
        )
    }
    /// True when the driver compile was skipped.
    pub fn is_deferred(&self) -> bool {
        matches!(self.state, ShaderState::Deferred { .. })
    }
    /// The info log of a failed compile.
    pub fn info_log(&self) -> Option<&str> {
        match &self.state {
            ShaderState::Failed { log, .. } => Some(log),
            _ => None,
        }
    }
    /// The driver object, when the driver compiled it (or is compiling it).
    pub fn object(&self) -> Option<&S> {
        match &self.state {
            ShaderState::Compiled { object, .. } | ShaderState::Compiling { object, .. } => {
                Some(object)
            }
            _ => None,
        }
    }
    /// True while a compile started with [`ProgramManager::start_compile`] has not been
    /// finished.
    pub fn is_compiling(&self) -> bool {
        matches!(self.state, ShaderState::Compiling { .. })
    }
}

/// What `compile` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileOutcome {
    /// The driver compiled it.
    Compiled,
    /// Status hit: the compile is deferred.
    Deferred,
    /// The driver refused it; the log is on the shader.
    Failed,
    /// The cache holds the record of this exact shader failing to compile: the driver was not
    /// asked again, and the shader's info log is the driver's, byte for byte.
    KnownFailure,
    /// Started on the driver ([`ProgramManager::start_compile`]); finish it with
    /// [`ProgramManager::finish_compile`] (a link finishes it too).
    Pending,
}

/// Options of a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramOptions {
    /// Attribute bindings and transform feedback (all part of the key).
    pub link: LinkOptions,
    /// The page / client the program is for (for [`crate::EvictionPolicy::PageLruMru`]).
    pub page: Option<PageId>,
}

/// How a linked program came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkOrigin {
    /// Restored from a cached binary.
    CacheHit,
    /// Compiled and linked from source (a cache miss).
    Linked,
    /// The cached binary was refused by the driver; linked from source instead.
    RelinkedAfterRejection,
}

/// A linked program and its reflection.
#[derive(Debug)]
pub struct LinkedProgram<P> {
    /// The manager that linked it (whose backend owns the driver object).
    pub manager: ProgramManagerId,
    /// The driver object.
    pub program: P,
    /// Its cache key.
    pub key: ProgramKey,
    /// How it came about.
    pub origin: LinkOrigin,
    /// The stages linked, in pipeline order.
    pub stages: Vec<ShaderStage>,
    /// Active attributes, sorted by name.
    pub attributes: Vec<ActiveVariable>,
    /// Active uniforms, sorted by name.
    pub uniforms: Vec<ActiveVariable>,
    /// The rest of the driver's reflection: fragment outputs, transform-feedback varyings,
    /// uniform and storage blocks, static use, work-group size.
    pub interface: ProgramInterface,
    /// True when the program's binary was not read yet
    /// ([`ProgramManager::set_defer_binary_reads`]): [`ProgramManager::save_deferred_binary`]
    /// reads and saves it.
    pub binary_deferred: bool,
    /// The ticket of its deferred read (unique in the process; 0: none). Private, so editing
    /// the public fields (`key`, `manager`) cannot make another program's read save this
    /// program's binary, or this program's read save another's.
    deferred_ticket: u64,
}

/// A program's deferred binary read, apart from the program
/// ([`LinkedProgram::deferred_read`]): what [`ProgramManager::forget_read`] needs to drop that
/// read once the program is gone. Only a linked program makes one, so a token names exactly
/// the read its own link made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferredRead {
    manager: ProgramManagerId,
    key: ProgramKey,
    ticket: u64,
}

impl DeferredRead {
    /// The manager whose read it is.
    pub fn manager(&self) -> ProgramManagerId {
        self.manager
    }
}

impl<P> LinkedProgram<P> {
    /// The token of this program's deferred binary read, when its link deferred one that was
    /// not read or forgotten through this program since (`None` otherwise).
    pub fn deferred_read(&self) -> Option<DeferredRead> {
        (self.binary_deferred && self.deferred_ticket != 0).then_some(DeferredRead {
            manager: self.manager,
            key: self.key,
            ticket: self.deferred_ticket,
        })
    }
}

/// A shader of another [`ProgramManager`] was given to [`ProgramManager::compile`]: its
/// driver object would be another backend's. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the given shader belongs to another program manager")]
pub struct ForeignShader {
    /// The manager the shader belongs to.
    pub owner: ProgramManagerId,
}

/// Why a link failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkFailure {
    /// A shader was never compiled or failed to compile.
    #[error("{stage} shader is not compiled")]
    ShaderNotCompiled {
        /// Stage.
        stage: ShaderStage,
    },
    /// A deferred shader failed when it was finally compiled.
    #[error("deferred {stage} shader failed to compile: {log}")]
    Compile {
        /// Stage.
        stage: ShaderStage,
        /// Info log.
        log: String,
    },
    /// The driver refused to link.
    #[error("link failed: {log}")]
    Link {
        /// Info log.
        log: String,
    },
    /// A shader of another [`ProgramManager`] was passed as the vertex or the fragment shader.
    /// Checked first (the vertex shader, then the fragment one), before the stages: nothing
    /// was compiled, loaded or linked.
    #[error("the {argument} shader belongs to another program manager")]
    ForeignShader {
        /// The argument it was passed as: `Vertex` for the vertex shader, `Fragment` for the
        /// fragment one (whatever its own stage).
        argument: ShaderStage,
        /// The manager it belongs to.
        owner: ProgramManagerId,
    },
    /// A shader of another stage was passed as the vertex or the fragment shader. Checked
    /// right after [`LinkFailure::ForeignShader`]: nothing was compiled, loaded or linked.
    #[error("`{expected}` is a {found} shader")]
    WrongStage {
        /// The stage the argument is for.
        expected: ShaderStage,
        /// The stage of the shader passed.
        found: ShaderStage,
    },
    /// The shaders of [`ProgramManager::link_program`] / [`ProgramManager::start_link`] do not
    /// make a program: no shader, two of one stage, compute with another stage, or a program
    /// that is not separable without both a vertex and a fragment shader. Nothing was
    /// compiled, loaded or linked.
    #[error("these shaders do not make a program: {0}")]
    Stages(&'static str),
    /// [`ProgramManager::finish_link`] was given a link another manager started: its driver
    /// object is that manager's backend's. The pending link is dropped (its object with it);
    /// nothing was saved.
    #[error("the pending link belongs to another program manager")]
    ForeignLink {
        /// The manager that started it.
        owner: ProgramManagerId,
    },
}

/// Runs compile and link through a [`ProgramCache`] on a [`ProgramBackend`].
///
/// Here on a tiny fake driver (objects are numbers, a "binary" is the program's number): the
/// first link compiles and links, the second manager finds the shaders' statuses and the
/// program's binary in the cache and restores the program with no compile or link.
///
/// ```
/// use program_cache::{
///     ActiveVariable, CacheConfig, CompileOutcome, LinkFailure, LinkOptions, LinkOrigin,
///     ProgramBackend, ProgramBinaryData, ProgramCache, ProgramManager, ProgramOptions, Shader,
///     ShaderStage,
/// };
///
/// #[derive(Default)]
/// struct Fake {
///     objects: u32,
///     links: u32,
/// }
///
/// impl ProgramBackend for Fake {
///     type Shader = u32;
///     type Program = u32;
///     fn compile(&mut self, _: ShaderStage, _: &str) -> Result<u32, String> {
///         self.objects += 1;
///         Ok(self.objects)
///     }
///     fn link(&mut self, _: &[&u32], _: &LinkOptions) -> Result<u32, String> {
///         self.links += 1;
///         self.objects += 1;
///         Ok(self.objects)
///     }
///     fn program_binary(&mut self, p: &u32) -> Result<ProgramBinaryData, String> {
///         Ok(ProgramBinaryData { format: 1, bytes: p.to_le_bytes().to_vec() })
///     }
///     fn load_binary(&mut self, _: &ProgramBinaryData) -> Result<u32, String> {
///         self.objects += 1;
///         Ok(self.objects)
///     }
///     fn active_attributes(&mut self, _: &u32) -> Vec<ActiveVariable> {
///         Vec::new()
///     }
///     fn active_uniforms(&mut self, _: &u32) -> Vec<ActiveVariable> {
///         Vec::new()
///     }
/// }
///
/// let cache = ProgramCache::builder(CacheConfig::desktop()).build();
/// let options = ProgramOptions::default();
/// let vs_source = "in vec4 p; void main() { gl_Position = p; }";
/// let fs_source = "out vec4 c; void main() { c = vec4(1.0); }";
///
/// let mut cold = ProgramManager::new(Fake::default(), cache.clone(), "translator 1.0");
/// let mut vs = Shader::new(ShaderStage::Vertex, vs_source);
/// let mut fs = Shader::new(ShaderStage::Fragment, fs_source);
/// assert_eq!(cold.compile(&mut vs).unwrap(), CompileOutcome::Compiled);
/// assert_eq!(cold.compile(&mut fs).unwrap(), CompileOutcome::Compiled);
/// let linked = cold.link(&mut vs, &mut fs, &options).unwrap();
/// assert_eq!(linked.origin, LinkOrigin::Linked);
///
/// // Another manager on the same cache (a restarted host, with a disk-backed cache).
/// let mut warm = ProgramManager::new(Fake::default(), cache.clone(), "translator 1.0");
/// let mut vs = Shader::new(ShaderStage::Vertex, vs_source);
/// let mut fs = Shader::new(ShaderStage::Fragment, fs_source);
/// assert_eq!(warm.compile(&mut vs).unwrap(), CompileOutcome::Deferred);
/// assert_eq!(warm.compile(&mut fs).unwrap(), CompileOutcome::Deferred);
/// let restored = warm.link(&mut vs, &mut fs, &options).unwrap();
/// assert_eq!(restored.origin, LinkOrigin::CacheHit);
/// assert_eq!(restored.key, linked.key);
/// assert_eq!((warm.backend().objects, warm.backend().links), (1, 0));
///
/// // Shaders in the wrong places are refused before the driver is asked anything.
/// assert!(warm.link(&mut fs, &mut vs, &options).is_err());
/// // So are the other manager's shaders: `vs` and `fs` belong to `warm` (it compiled them).
/// let mut cold_fs = Shader::new(ShaderStage::Fragment, fs_source);
/// cold.compile(&mut cold_fs).unwrap();
/// assert!(matches!(
///     warm.link(&mut vs, &mut cold_fs, &options),
///     Err(LinkFailure::ForeignShader { argument: ShaderStage::Fragment, .. })
/// ));
/// assert!(cold.compile(&mut vs).is_err());
/// ```
#[derive(Debug)]
pub struct ProgramManager<B> {
    id: ProgramManagerId,
    backend: B,
    cache: Arc<ProgramCache>,
    backend_identity: String,
    binary_reads_skipped: u64,
    defer_binary_reads: bool,
    /// Programs linked whose binary was not read yet, by key (at most [`MAX_DEFERRED_SAVES`],
    /// holding at most [`MAX_DEFERRED_BYTES`]).
    deferred: HashMap<ProgramKey, DeferredSave>,
    /// The `stored_size` of the entries in `deferred`.
    deferred_bytes: usize,
    transform_feedback_uncached: u64,
}

/// At most this many programs wait for [`ProgramManager::save_deferred_binary`]; a link past
/// it reads its binary at once, as without deferral.
pub const MAX_DEFERRED_SAVES: usize = 1024;

/// At most this many bytes of entries (their reflection, [`CachedProgram::stored_size`]) wait
/// for [`ProgramManager::save_deferred_binary`]; a link whose entry would pass it reads its
/// binary at once. Reflection comes from the host's translator and the driver, so a few
/// programs with huge interfaces must not hold memory the count alone would allow.
pub const MAX_DEFERRED_BYTES: usize = 16 << 20;

/// What a deferred binary read saves: the entry without its binary.
#[derive(Debug)]
struct DeferredSave {
    value: CachedProgram,
    page: Option<PageId>,
    /// Equals the waiting [`LinkedProgram`]'s `deferred_ticket`.
    ticket: u64,
}

/// A link started with [`ProgramManager::start_link`]: poll it with
/// [`ProgramManager::link_ready`], end it with [`ProgramManager::finish_link`]. Holds the
/// driver's program object; dropping it drops the object.
#[derive(Debug)]
pub struct PendingLink<P> {
    manager: ProgramManagerId,
    key: ProgramKey,
    stages: Vec<ShaderStage>,
    page: Option<PageId>,
    start: Instant,
    state: Pending<P>,
}

#[derive(Debug)]
enum Pending<P> {
    /// Restored from a cached binary: complete.
    Restored(P),
    /// On the driver. `save` is the entry to save once it linked (without its binary);
    /// `None` when the program does not go through the cache.
    Linking {
        program: P,
        origin: LinkOrigin,
        save: Option<Box<SavePlan>>,
    },
}

/// The entry to save for a link on the driver, without its binary, and the sources of the
/// stages the host gave no translator maps for (their maps come from the driver's reflection
/// once the link is done).
#[derive(Debug)]
struct SavePlan {
    value: CachedProgram,
    sources: Vec<(ShaderStage, String)>,
}

impl<P> PendingLink<P> {
    /// The program's cache key.
    pub fn key(&self) -> ProgramKey {
        self.key
    }
    /// The manager that started it: only that manager polls or finishes it.
    pub fn manager(&self) -> ProgramManagerId {
        self.manager
    }
    /// Whether the program came from the cache (complete at once).
    pub fn is_cache_hit(&self) -> bool {
        matches!(self.state, Pending::Restored(_))
    }
}

impl<B: ProgramBackend> ProgramManager<B> {
    /// A manager for `backend`; `backend_identity` (translator / ANGLE version) goes into every
    /// program key.
    pub fn new(backend: B, cache: Arc<ProgramCache>, backend_identity: impl Into<String>) -> Self {
        ProgramManager {
            id: ProgramManagerId::next(),
            backend,
            cache,
            backend_identity: backend_identity.into(),
            binary_reads_skipped: 0,
            defer_binary_reads: false,
            deferred: HashMap::new(),
            deferred_bytes: 0,
            transform_feedback_uncached: 0,
        }
    }

    /// This manager's id: what its shaders record ([`Shader::manager`]).
    pub fn id(&self) -> ProgramManagerId {
        self.id
    }

    /// A shader with source, not compiled yet, that belongs to this manager: another manager
    /// refuses it even before it is compiled.
    pub fn new_shader(&self, stage: ShaderStage, source: impl Into<String>) -> Shader<B::Shader> {
        Shader {
            manager: Some(self.id),
            ..Shader::new(stage, source)
        }
    }

    /// Links whose program binary was not read out of the driver because the cache would have
    /// refused to save it (critical memory pressure, or an entry over the budget in force).
    pub fn binary_reads_skipped(&self) -> u64 {
        self.binary_reads_skipped
    }

    /// Links of programs with transform-feedback varyings that bypassed the cache because it
    /// keeps them out ([`crate::ProgramCacheBuilder::cache_transform_feedback`]).
    pub fn transform_feedback_links_uncached(&self) -> u64 {
        self.transform_feedback_uncached
    }

    /// Whether a link that misses the cache leaves the binary in the driver until
    /// [`ProgramManager::save_deferred_binary`] (a host calls it when its context is idle),
    /// instead of reading it when the link finishes (the default). At most
    /// [`MAX_DEFERRED_SAVES`] programs holding at most [`MAX_DEFERRED_BYTES`] wait; past that a
    /// link reads its binary at once, as does a link whose key already waits (another live
    /// program of the same shaders).
    pub fn set_defer_binary_reads(&mut self, on: bool) {
        self.defer_binary_reads = on;
    }

    /// How many linked programs wait for their binary to be read.
    pub fn deferred_binaries(&self) -> usize {
        self.deferred.len()
    }

    /// The bytes the programs waiting for their binary read hold (their entries without the
    /// binary; at most [`MAX_DEFERRED_BYTES`]).
    pub fn deferred_bytes(&self) -> usize {
        self.deferred_bytes
    }

    /// Takes `key`'s waiting read out of `deferred`, keeping `deferred_bytes` in step.
    fn take_deferred(&mut self, key: &ProgramKey) -> Option<DeferredSave> {
        let taken = self.deferred.remove(key)?;
        self.deferred_bytes -= taken.value.stored_size();
        Some(taken)
    }

    /// Reads and saves the binary of `linked` if it was deferred
    /// ([`LinkedProgram::binary_deferred`]); returns whether it was read. A program another
    /// manager linked, or one whose public `key` or `manager` was edited, is left alone (false):
    /// a binary is only ever saved under the key of the link that made it.
    pub fn save_deferred_binary(&mut self, linked: &mut LinkedProgram<B::Program>) -> bool {
        if !self.waits_for(linked) {
            return false;
        }
        let Some(pending) = self.take_deferred(&linked.key) else {
            return false;
        };
        linked.binary_deferred = false;
        self.save_binary(linked.key, pending.value, &linked.program, pending.page);
        true
    }

    /// Forgets the deferred binary read of `key` (the host deleted the program). This drops
    /// whichever read waits under `key`, which may be another live program's (one of the same
    /// shaders): a host that deletes a program calls [`ProgramManager::forget_deferred_read`].
    pub fn forget_deferred_binary(&mut self, key: &ProgramKey) -> bool {
        self.take_deferred(key).is_some()
    }

    /// Forgets the deferred binary read of `linked` (the host deletes it) and clears its
    /// [`LinkedProgram::binary_deferred`]; returns whether it had one. Only the read its own
    /// link made is dropped: a program whose binary was read at once, or whose read was saved
    /// or forgotten already, leaves another program's read of the same key waiting.
    pub fn forget_deferred_read(&mut self, linked: &mut LinkedProgram<B::Program>) -> bool {
        if !self.waits_for(linked) {
            return false;
        }
        linked.binary_deferred = false;
        self.take_deferred(&linked.key).is_some()
    }

    /// Forgets the deferred read `read` names ([`LinkedProgram::deferred_read`], taken before
    /// the program went); returns whether it was still waiting. For a host that lets a program
    /// go where it cannot reach the manager (inside one of the manager's own callbacks): it
    /// keeps the token and hands it over later. Like [`ProgramManager::forget_deferred_read`],
    /// only that program's own read is dropped: a read already saved or forgotten, or a newer
    /// program's read of the same key, is left alone, and a token of another manager is
    /// refused (false).
    pub fn forget_read(&mut self, read: DeferredRead) -> bool {
        self.read_waits(&read) && self.take_deferred(&read.key).is_some()
    }

    /// Whether the read waiting under `linked`'s key is the one `linked`'s own link made (its
    /// manager, flag and ticket agree): edited public fields, a read saved or forgotten, or
    /// another program's read of the same key all answer false.
    fn waits_for(&self, linked: &LinkedProgram<B::Program>) -> bool {
        linked
            .deferred_read()
            .is_some_and(|read| self.read_waits(&read))
    }

    /// Whether `read` is this manager's and still waits (its ticket is the one under its key).
    fn read_waits(&self, read: &DeferredRead) -> bool {
        read.manager == self.id
            && self.deferred.get(&read.key).map(|d| d.ticket) == Some(read.ticket)
    }

    /// The backend.
    pub fn backend(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<ProgramCache> {
        &self.cache
    }

    /// Takes `shader` for this manager, or refuses one of another.
    fn adopt(&self, shader: &mut Shader<B::Shader>) -> Result<(), ForeignShader> {
        match shader.manager {
            Some(owner) if owner != self.id => Err(ForeignShader { owner }),
            Some(_) => Ok(()),
            None => {
                shader.manager = Some(self.id);
                Ok(())
            }
        }
    }

    /// What the cache knows of `shader`'s source: a status hit defers the compile, a failure
    /// record fails it with the recorded log. `None`: ask the driver.
    fn known_outcome(
        &mut self,
        shader: &mut Shader<B::Shader>,
        hash: ShaderHash,
        start: Instant,
    ) -> Option<CompileOutcome> {
        if self.cache.shader_compile_status(&hash) == CompileStatus::Success {
            shader.state = ShaderState::Deferred {
                hash,
                source: shader.source.clone(),
            };
            self.cache.record_status_hit(start.elapsed());
            return Some(CompileOutcome::Deferred);
        }
        let record = self
            .cache
            .load_failure(&compile_failure_key(&hash, &self.backend_identity))?;
        let log = record.failure.as_ref()?.log.clone();
        shader.state = ShaderState::Failed { hash, log };
        self.cache.record_status_hit(start.elapsed());
        Some(CompileOutcome::KnownFailure)
    }

    /// What [`ProgramManager::compile`] and [`ProgramManager::start_compile`] do first: adopts
    /// `shader` (one of another manager is refused), then answers from the cache when it can (a
    /// status hit or a known failure: `Break`); otherwise `Continue` with the shader's hash and
    /// when the call started, for the driver.
    fn compile_from_cache(
        &mut self,
        shader: &mut Shader<B::Shader>,
    ) -> Result<ControlFlow<CompileOutcome, (ShaderHash, Instant)>, ForeignShader> {
        self.adopt(shader)?;
        let start = Instant::now();
        let hash = backend_shader_hash(
            shader.stage,
            &shader.source,
            &shader.compile_options,
            &self.backend_identity,
        );
        Ok(match self.known_outcome(shader, hash, start) {
            Some(known) => ControlFlow::Break(known),
            None => ControlFlow::Continue((hash, start)),
        })
    }

    /// Records the driver's verdict on a compile.
    fn compile_result(
        &mut self,
        shader: &mut Shader<B::Shader>,
        hash: ShaderHash,
        source: String,
        result: Result<B::Shader, String>,
    ) -> CompileOutcome {
        match result {
            Ok(object) => {
                self.cache.shader_compile_succeeded(hash);
                shader.state = ShaderState::Compiled {
                    hash,
                    source,
                    object,
                };
                CompileOutcome::Compiled
            }
            Err(log) => {
                if self.backend.last_failure_is_verdict() {
                    self.save_compile_failure(hash, shader.stage, &log);
                }
                shader.state = ShaderState::Failed { hash, log };
                CompileOutcome::Failed
            }
        }
    }

    /// Compiles `shader`, or defers the compile on a status hit, or fails it at once when the
    /// cache holds the record of this exact shader failing ([`CompileOutcome::KnownFailure`],
    /// with the driver's log). A shader of no manager yet ([`Shader::new`]) becomes this
    /// manager's; one of another manager is refused ([`ForeignShader`], nothing changes). A
    /// failed compile is an outcome ([`CompileOutcome::Failed`]), not an error; it is cached.
    pub fn compile(
        &mut self,
        shader: &mut Shader<B::Shader>,
    ) -> Result<CompileOutcome, ForeignShader> {
        let (hash, start) = match self.compile_from_cache(shader)? {
            ControlFlow::Break(known) => return Ok(known),
            ControlFlow::Continue(miss) => miss,
        };
        let result = self.backend.compile(shader.stage, &shader.source);
        let source = shader.source.clone();
        let outcome = self.compile_result(shader, hash, source, result);
        self.cache.record_status_miss(start.elapsed());
        Ok(outcome)
    }

    /// [`ProgramManager::compile`] without waiting for the driver
    /// (`KHR_parallel_shader_compile`): a status hit or a known failure is answered at once; a
    /// miss starts the driver compile and returns [`CompileOutcome::Pending`]. Poll with
    /// [`ProgramManager::compile_ready`]; [`ProgramManager::finish_compile`] (or a link) gives
    /// the result. Without the extension the backend compiles synchronously and the same calls
    /// work.
    pub fn start_compile(
        &mut self,
        shader: &mut Shader<B::Shader>,
    ) -> Result<CompileOutcome, ForeignShader> {
        let (hash, start) = match self.compile_from_cache(shader)? {
            ControlFlow::Break(known) => return Ok(known),
            ControlFlow::Continue(miss) => miss,
        };
        let source = shader.source.clone();
        match self.backend.start_compile(shader.stage, &source) {
            Ok(object) => {
                shader.state = ShaderState::Compiling {
                    hash,
                    source,
                    object,
                };
                Ok(CompileOutcome::Pending)
            }
            Err(log) => {
                let outcome = self.compile_result(shader, hash, source, Err(log));
                self.cache.record_status_miss(start.elapsed());
                Ok(outcome)
            }
        }
    }

    /// Whether the compile of `shader` has finished (true unless it is
    /// [`ShaderState::Compiling`] and the driver is still at it). A shader of another manager
    /// is not asked of this manager's driver: true, and [`ProgramManager::finish_compile`]
    /// leaves it alone.
    pub fn compile_ready(&mut self, shader: &Shader<B::Shader>) -> bool {
        if shader.manager.is_some_and(|m| m != self.id) {
            return true;
        }
        match &shader.state {
            ShaderState::Compiling { object, .. } => self.backend.compile_done(object),
            _ => true,
        }
    }

    /// Ends a compile started with [`ProgramManager::start_compile`] (waiting for the driver
    /// when needed) and returns its outcome; a shader that is not compiling keeps its state and
    /// reports it. A shader of another manager is left alone (its driver object is that
    /// manager's backend's; nothing is recorded): [`CompileOutcome::Pending`] while that
    /// manager's compile runs, else its state as above.
    pub fn finish_compile(&mut self, shader: &mut Shader<B::Shader>) -> CompileOutcome {
        if shader.manager.is_some_and(|m| m != self.id) {
            return state_outcome(&shader.state);
        }
        let state = std::mem::replace(&mut shader.state, ShaderState::NotCompiled);
        match state {
            ShaderState::Compiling {
                hash,
                source,
                object,
            } => {
                let start = Instant::now();
                let result = self.backend.finish_compile(object);
                let outcome = self.compile_result(shader, hash, source, result);
                self.cache.record_status_miss(start.elapsed());
                outcome
            }
            other => {
                let outcome = state_outcome(&other);
                shader.state = other;
                outcome
            }
        }
    }

    /// The program key `link` would use, when both shaders have been compiled.
    pub fn program_key(
        &self,
        vertex: &Shader<B::Shader>,
        fragment: &Shader<B::Shader>,
        options: &ProgramOptions,
    ) -> Option<ProgramKey> {
        self.key_of(&[vertex, fragment], options)
    }

    /// The program key of shaders in pipeline order, when each has been compiled.
    fn key_of(
        &self,
        shaders: &[&Shader<B::Shader>],
        options: &ProgramOptions,
    ) -> Option<ProgramKey> {
        let mut vertex = ShaderHash::NONE;
        let mut fragment = ShaderHash::NONE;
        let mut others = Vec::new();
        for s in shaders {
            let hash = s.compiled_hash()?;
            match s.stage {
                ShaderStage::Vertex => vertex = hash,
                ShaderStage::Fragment => fragment = hash,
                stage => others.push((stage, hash)),
            }
        }
        Some(program_key(&ProgramKeyInput {
            vertex,
            fragment,
            backend_identity: &self.backend_identity,
            attribute_bindings: &options.link.attribute_bindings,
            transform_feedback_varyings: &options.link.transform_feedback_varyings,
            transform_feedback_mode: options.link.transform_feedback_mode,
            other_stages: &others,
            separable: options.link.separable,
        }))
    }

    /// Links `vertex` and `fragment` through the cache. Checked in this order, before anything
    /// else happens: a shader of another manager in either place (vertex first) is
    /// [`LinkFailure::ForeignShader`]; a shader of another stage is
    /// [`LinkFailure::WrongStage`]; a shader not compiled (or that failed) is
    /// [`LinkFailure::ShaderNotCompiled`]. A link the cache knows to fail fails at once with
    /// the driver's log ([`LinkFailure::Link`]).
    pub fn link(
        &mut self,
        vertex: &mut Shader<B::Shader>,
        fragment: &mut Shader<B::Shader>,
        options: &ProgramOptions,
    ) -> Result<LinkedProgram<B::Program>, LinkFailure> {
        for (shader, argument) in [
            (&*vertex, ShaderStage::Vertex),
            (&*fragment, ShaderStage::Fragment),
        ] {
            // A shader of no manager was never compiled: refused below as not compiled.
            if let Some(owner) = shader.manager.filter(|&m| m != self.id) {
                return Err(LinkFailure::ForeignShader { argument, owner });
            }
        }
        for (shader, expected) in [
            (&*vertex, ShaderStage::Vertex),
            (&*fragment, ShaderStage::Fragment),
        ] {
            if shader.stage != expected {
                return Err(LinkFailure::WrongStage {
                    expected,
                    found: shader.stage,
                });
            }
        }
        self.link_program(&mut [vertex, fragment], options)
    }

    /// Links any program kind through the cache: a vertex and a fragment shader with optional
    /// tessellation and geometry stages, a compute shader alone, or (with
    /// `options.link.separable`) any graphics stages for a program pipeline. The shaders may
    /// come in any order. Checked before anything else happens, in this order: a shader of
    /// another manager ([`LinkFailure::ForeignShader`], `argument` is its stage), shaders that
    /// do not make a program ([`LinkFailure::Stages`]), a shader not compiled or failed
    /// ([`LinkFailure::ShaderNotCompiled`]). Waits for the driver; see
    /// [`ProgramManager::start_link`] for the form that does not.
    pub fn link_program(
        &mut self,
        shaders: &mut [&mut Shader<B::Shader>],
        options: &ProgramOptions,
    ) -> Result<LinkedProgram<B::Program>, LinkFailure> {
        let pending = self.start_link(shaders, options)?;
        self.finish_link(pending)
    }

    /// Starts a link and returns without waiting for the driver
    /// (`KHR_parallel_shader_compile`): a cache hit is complete at once (the binary is loaded);
    /// a link the cache knows to fail returns [`LinkFailure::Link`] with the driver's log at
    /// once; otherwise deferred shaders are compiled, the shaders' pending compiles finished,
    /// and the driver link started. Poll with [`ProgramManager::link_ready`], end with
    /// [`ProgramManager::finish_link`]. The checks are those of
    /// [`ProgramManager::link_program`].
    pub fn start_link(
        &mut self,
        shaders: &mut [&mut Shader<B::Shader>],
        options: &ProgramOptions,
    ) -> Result<PendingLink<B::Program>, LinkFailure> {
        for shader in shaders.iter() {
            if let Some(owner) = shader.manager.filter(|&m| m != self.id) {
                return Err(LinkFailure::ForeignShader {
                    argument: shader.stage,
                    owner,
                });
            }
        }
        shaders.sort_by_key(|s| stage_order(s.stage));
        check_stages(shaders.iter().map(|s| s.stage), options.link.separable)?;
        for shader in shaders.iter_mut() {
            if shader.is_compiling() {
                self.finish_compile(shader);
            }
            if !shader.compile_status() {
                return Err(LinkFailure::ShaderNotCompiled {
                    stage: shader.stage,
                });
            }
        }
        let key = {
            let refs: Vec<&Shader<B::Shader>> = shaders.iter().map(|s| &**s).collect();
            self.key_of(&refs, options)
                .expect("compiled shaders have hashes")
        };
        let stages: Vec<ShaderStage> = shaders.iter().map(|s| s.stage).collect();
        let cacheable = self.cache.caches_transform_feedback()
            || options.link.transform_feedback_varyings.is_empty();
        if !cacheable {
            self.transform_feedback_uncached += 1;
        }

        let start = Instant::now();
        let mut origin = LinkOrigin::Linked;
        if cacheable {
            if let Some(record) = self.cache.load_failure(&key) {
                let log = record
                    .failure
                    .as_ref()
                    .map(|f| f.log.clone())
                    .unwrap_or_default();
                return Err(LinkFailure::Link { log });
            }
            if let Some(entry) = self.cache.load(&key, options.page) {
                match self.backend.load_cached_binary(&key, &entry.binary) {
                    Ok(program) => {
                        self.cache.binary_accepted(&key);
                        for shader in shaders.iter_mut() {
                            if let Some(v) = entry.stage_variables(shader.stage.gl_enum()) {
                                shader.variables = Some(v.clone());
                            }
                        }
                        return Ok(PendingLink {
                            manager: self.id,
                            key,
                            stages,
                            page: options.page,
                            start,
                            state: Pending::Restored(program),
                        });
                    }
                    Err(reason) => {
                        tracing::info!(%key, %reason, "driver refused a cached binary; relinking");
                        self.cache.evict_rejected(&key);
                        origin = LinkOrigin::RelinkedAfterRejection;
                    }
                }
            }
        }

        let start = Instant::now();
        self.ensure_compiled(shaders)?;
        let objects: Vec<&B::Shader> = shaders
            .iter()
            .map(|s| s.object().expect("ensure_compiled leaves driver objects"))
            .collect();
        let started = self.backend.start_link(&objects, &options.link);
        let save = cacheable.then(|| Box::new(save_plan(shaders)));
        match started {
            Ok(program) => Ok(PendingLink {
                manager: self.id,
                key,
                stages,
                page: options.page,
                start,
                state: Pending::Linking {
                    program,
                    origin,
                    save,
                },
            }),
            Err(log) => {
                if let Some(plan) = save.filter(|_| self.backend.last_failure_is_verdict()) {
                    self.save_link_failure(key, plan.value, &log);
                }
                Err(LinkFailure::Link { log })
            }
        }
    }

    /// Whether a started link has finished on the driver (a cache hit: at once). A link
    /// another manager started is not asked of this manager's driver: true, and
    /// [`ProgramManager::finish_link`] refuses it.
    pub fn link_ready(&mut self, pending: &PendingLink<B::Program>) -> bool {
        if pending.manager != self.id {
            return true;
        }
        match &pending.state {
            Pending::Restored(_) => true,
            Pending::Linking { program, .. } => self.backend.link_done(program),
        }
    }

    /// Ends a started link (waiting for the driver when needed): reflects the program, and
    /// on a cache miss reads and saves its binary (now, or later with
    /// [`ProgramManager::set_defer_binary_reads`]) or records the failure with the driver's
    /// log, so a warm start fails it at once with the same log.
    pub fn finish_link(
        &mut self,
        pending: PendingLink<B::Program>,
    ) -> Result<LinkedProgram<B::Program>, LinkFailure> {
        if pending.manager != self.id {
            return Err(LinkFailure::ForeignLink {
                owner: pending.manager,
            });
        }
        let PendingLink {
            manager: _,
            key,
            stages,
            page,
            start,
            state,
        } = pending;
        match state {
            Pending::Restored(program) => {
                let linked = self.reflect(program, key, LinkOrigin::CacheHit, stages);
                self.cache.record_binary_hit_time(start.elapsed());
                Ok(linked)
            }
            Pending::Linking {
                program,
                origin,
                save,
            } => {
                let program = match self.backend.finish_link(program) {
                    Ok(program) => program,
                    Err(log) => {
                        if let Some(plan) = save.filter(|_| self.backend.last_failure_is_verdict())
                        {
                            self.save_link_failure(key, plan.value, &log);
                        }
                        return Err(LinkFailure::Link { log });
                    }
                };
                let mut linked = self.reflect(program, key, origin, stages);
                if let Some(plan) = save {
                    let value = with_driver_variables(*plan, &linked);
                    // A key already waiting (another live program of the same shaders) is
                    // read now: one deferred save per key, so forgetting that other program
                    // cannot drop this one's save.
                    let size = value.stored_size();
                    if self.defer_binary_reads
                        && self.deferred.len() < MAX_DEFERRED_SAVES
                        && self.deferred_bytes + size <= MAX_DEFERRED_BYTES
                        && !self.deferred.contains_key(&key)
                    {
                        let ticket = NEXT_DEFERRED_TICKET.fetch_add(1, Ordering::Relaxed);
                        self.deferred_bytes += size;
                        self.deferred.insert(
                            key,
                            DeferredSave {
                                value,
                                page,
                                ticket,
                            },
                        );
                        linked.binary_deferred = true;
                        linked.deferred_ticket = ticket;
                    } else {
                        self.save_binary(key, value, &linked.program, page);
                    }
                }
                self.cache.record_binary_miss_time(start.elapsed());
                Ok(linked)
            }
        }
    }

    /// Records a failed link under `key` (the shaders' statuses stay referenced by it).
    fn save_link_failure(&mut self, key: ProgramKey, mut value: CachedProgram, log: &str) {
        if log.len() > MAX_FAILURE_LOG {
            return;
        }
        value.failure = Some(FailureRecord {
            compile_stage: None,
            log: log.to_owned(),
        });
        if let Err(e) = self.cache.save(key, value, None) {
            tracing::debug!(%key, error = %e, "link failure not cached");
        }
    }

    /// Records that the shader `hash` failed to compile.
    fn save_compile_failure(&mut self, hash: ShaderHash, stage: ShaderStage, log: &str) {
        if log.len() > MAX_FAILURE_LOG {
            return;
        }
        let key = compile_failure_key(&hash, &self.backend_identity);
        let value = CachedProgram {
            failure: Some(FailureRecord {
                compile_stage: Some(stage.gl_enum()),
                log: log.to_owned(),
            }),
            ..CachedProgram::default()
        };
        if let Err(e) = self.cache.save(key, value, None) {
            tracing::debug!(%key, error = %e, "compile failure not cached");
        }
    }

    /// Reads the binary of a linked program and saves it with `value`, unless the cache would
    /// refuse it: then the binary is not read at all.
    fn save_binary(
        &mut self,
        key: ProgramKey,
        mut value: CachedProgram,
        program: &B::Program,
        page: Option<PageId>,
    ) {
        // Pressure first (free); then the entry's size from the binary length, when the backend
        // can tell it without reading the binary.
        let verdict = self.cache.would_accept(None).and_then(|()| {
            let size = self
                .backend
                .program_binary_length(program)
                .map(|len| value.stored_size() + len);
            self.cache.would_accept(size)
        });
        if let Err(e) = verdict {
            self.binary_reads_skipped += 1;
            self.cache.count_refused_save();
            tracing::debug!(%key, error = %e, "program not cached; binary not read");
            return;
        }
        match self.backend.program_binary(program) {
            Ok(binary) => {
                value.binary = binary;
                if let Err(e) = self.cache.save(key, value, page) {
                    tracing::debug!(%key, error = %e, "program not cached");
                }
            }
            Err(e) => tracing::debug!(%key, error = %e, "no program binary to cache"),
        }
    }

    fn reflect(
        &mut self,
        program: B::Program,
        key: ProgramKey,
        origin: LinkOrigin,
        stages: Vec<ShaderStage>,
    ) -> LinkedProgram<B::Program> {
        let mut attributes = self.backend.active_attributes(&program);
        let mut uniforms = self.backend.active_uniforms(&program);
        let interface = self.backend.program_interface(&program);
        attributes.sort();
        uniforms.sort();
        LinkedProgram {
            manager: self.id,
            program,
            key,
            origin,
            stages,
            attributes,
            uniforms,
            interface,
            binary_deferred: false,
            deferred_ticket: 0,
        }
    }

    /// Compiles the deferred shaders for real: every compile is started before the first is
    /// finished, so a driver with parallel compile runs them together.
    fn ensure_compiled(
        &mut self,
        shaders: &mut [&mut Shader<B::Shader>],
    ) -> Result<(), LinkFailure> {
        for shader in shaders.iter_mut() {
            let ShaderState::Deferred { hash, source } = &shader.state else {
                continue;
            };
            let (hash, source) = (*hash, source.clone());
            match self.backend.start_compile(shader.stage, &source) {
                Ok(object) => {
                    shader.state = ShaderState::Compiling {
                        hash,
                        source,
                        object,
                    }
                }
                Err(log) => return Err(self.deferred_failed(shader, hash, log)),
            }
        }
        for shader in shaders.iter_mut() {
            let state = std::mem::replace(&mut shader.state, ShaderState::NotCompiled);
            let ShaderState::Compiling {
                hash,
                source,
                object,
            } = state
            else {
                shader.state = state;
                continue;
            };
            match self.backend.finish_compile(object) {
                Ok(object) => {
                    shader.state = ShaderState::Compiled {
                        hash,
                        source,
                        object,
                    }
                }
                Err(log) => return Err(self.deferred_failed(shader, hash, log)),
            }
        }
        Ok(())
    }

    /// A deferred shader failed when compiled at last (the driver changed under its status).
    fn deferred_failed(
        &mut self,
        shader: &mut Shader<B::Shader>,
        hash: ShaderHash,
        log: String,
    ) -> LinkFailure {
        shader.state = ShaderState::Failed {
            hash,
            log: log.clone(),
        };
        LinkFailure::Compile {
            stage: shader.stage,
            log,
        }
    }
}

/// What [`ProgramManager::finish_compile`] reports for a shader it does not finish.
fn state_outcome<S>(state: &ShaderState<S>) -> CompileOutcome {
    match state {
        ShaderState::Compiling { .. } => CompileOutcome::Pending,
        ShaderState::Compiled { .. } => CompileOutcome::Compiled,
        ShaderState::Deferred { .. } => CompileOutcome::Deferred,
        ShaderState::NotCompiled | ShaderState::Failed { .. } => CompileOutcome::Failed,
    }
}

/// A stage's place in the pipeline.
fn stage_order(stage: ShaderStage) -> usize {
    ShaderStage::ALL
        .iter()
        .position(|&s| s == stage)
        .unwrap_or(usize::MAX)
}

/// Whether stages (in pipeline order) make a program.
fn check_stages(
    stages: impl Iterator<Item = ShaderStage> + Clone,
    separable: bool,
) -> Result<(), LinkFailure> {
    let mut seen = gl_types::StageMask::default();
    for stage in stages.clone() {
        if seen.contains(stage) {
            return Err(LinkFailure::Stages("two shaders of one stage"));
        }
        seen = seen.with(stage);
    }
    if seen == gl_types::StageMask::default() {
        return Err(LinkFailure::Stages("no shader"));
    }
    if seen.contains(ShaderStage::Compute) {
        return if seen == ShaderStage::Compute.bit() {
            Ok(())
        } else {
            Err(LinkFailure::Stages("a compute shader links alone"))
        };
    }
    let graphics = seen.contains(ShaderStage::Vertex) && seen.contains(ShaderStage::Fragment);
    if !separable && !graphics {
        return Err(LinkFailure::Stages(
            "a program that is not separable needs a vertex and a fragment shader",
        ));
    }
    Ok(())
}

/// The entry for `shaders` (in pipeline order) without its binary: hashes and the translator's
/// variable maps, and the sources of the stages without them.
fn save_plan<S>(shaders: &[&mut Shader<S>]) -> SavePlan {
    let mut value = CachedProgram::default();
    let mut sources = Vec::new();
    for shader in shaders {
        let hash = shader.compiled_hash().expect("compiled");
        let variables = match &shader.variables {
            Some(v) => v.clone(),
            None => {
                if let ShaderState::Compiled { source, .. } | ShaderState::Deferred { source, .. } =
                    &shader.state
                {
                    sources.push((shader.stage, source.clone()));
                }
                ShaderVariables::default()
            }
        };
        match shader.stage {
            ShaderStage::Vertex => {
                value.vertex_shader = hash;
                value.vertex = variables;
            }
            ShaderStage::Fragment => {
                value.fragment_shader = hash;
                value.fragment = variables;
            }
            stage => value.other_stages.push(StageRecord {
                stage: stage.gl_enum(),
                shader: hash,
                variables,
            }),
        }
    }
    SavePlan { value, sources }
}

/// The plan's entry with identity maps from the driver's reflection for the stages the host
/// gave no translator maps for.
fn with_driver_variables<P>(plan: SavePlan, linked: &LinkedProgram<P>) -> CachedProgram {
    let SavePlan { mut value, sources } = plan;
    let last_pre_raster = linked
        .stages
        .iter()
        .copied()
        .rfind(|s| !matches!(s, ShaderStage::Fragment | ShaderStage::Compute));
    for (stage, source) in sources {
        let variables = driver_variables(stage, &source, linked, last_pre_raster == Some(stage));
        match stage {
            ShaderStage::Vertex => value.vertex = variables,
            ShaderStage::Fragment => value.fragment = variables,
            other => {
                if let Some(r) = value
                    .other_stages
                    .iter_mut()
                    .find(|r| r.stage == other.gl_enum())
                {
                    r.variables = variables;
                }
            }
        }
    }
    value
}

/// The variable maps stored for one stage without translator maps: identity maps from the
/// driver's reflection. Attributes belong to the vertex stage; a uniform to each stage the
/// driver says statically uses it (or, when the driver cannot say, whose source names it);
/// fragment outputs to the fragment stage; transform-feedback varyings to the last stage
/// before rasterization; a block to each stage that references it.
fn driver_variables<P>(
    stage: ShaderStage,
    source: &str,
    linked: &LinkedProgram<P>,
    last_pre_raster: bool,
) -> ShaderVariables {
    let info = |v: &ActiveVariable| VariableInfo {
        name: v.name.clone(),
        mapped_name: v.name.clone(),
        gl_type: v.gl_type,
        array_size: v.size,
        location: v.location,
        precision: 0,
        static_use: true,
    };
    let interface = &linked.interface;
    // A stage mask the driver left empty says nothing (llvmpipe reports no
    // GL_REFERENCED_BY_COMPUTE_SHADER for a compute program's blocks); in a one-stage program
    // everything belongs to that stage.
    let single_stage = linked.stages.len() == 1;
    let referenced = |mask: gl_types::StageMask| {
        mask.contains(stage) || (single_stage && mask == gl_types::StageMask::default())
    };
    let uses = |name: &str| match interface
        .uniform_static_use
        .binary_search_by(|(n, _)| n.as_str().cmp(name))
    {
        Ok(i) => referenced(interface.uniform_static_use[i].1),
        Err(_) => mentions(source, base_name(name)),
    };
    let block = |b: &gl_types::InterfaceBlock| BlockInfo {
        name: b.name.clone(),
        mapped_name: b.name.clone(),
        binding: b.binding,
        data_size: b.data_size,
        static_use: true,
        members: b
            .members
            .iter()
            .map(|m| VariableInfo {
                name: m.name.clone(),
                mapped_name: m.name.clone(),
                gl_type: m.gl_type,
                array_size: m.size,
                location: Some(m.offset),
                precision: 0,
                static_use: true,
            })
            .collect(),
    };
    let blocks = |list: &[gl_types::InterfaceBlock]| {
        list.iter()
            .filter(|b| referenced(b.referenced_by))
            .map(block)
            .collect()
    };
    ShaderVariables {
        attributes: if stage == ShaderStage::Vertex {
            linked.attributes.iter().map(info).collect()
        } else {
            Vec::new()
        },
        uniforms: linked
            .uniforms
            .iter()
            .filter(|u| uses(&u.name))
            .map(info)
            .collect(),
        varyings: if last_pre_raster {
            interface
                .varyings
                .iter()
                .map(|v| VariableInfo {
                    name: v.name.clone(),
                    mapped_name: v.name.clone(),
                    gl_type: v.gl_type,
                    array_size: v.size,
                    location: None,
                    precision: 0,
                    static_use: true,
                })
                .collect()
        } else {
            Vec::new()
        },
        outputs: if stage == ShaderStage::Fragment {
            interface
                .outputs
                .iter()
                .map(|o| VariableInfo {
                    name: o.name.clone(),
                    mapped_name: o.name.clone(),
                    gl_type: o.gl_type,
                    array_size: o.size,
                    location: Some(o.location),
                    precision: 0,
                    static_use: true,
                })
                .collect()
        } else {
            Vec::new()
        },
        uniform_blocks: blocks(&interface.uniform_blocks),
        storage_blocks: blocks(&interface.storage_blocks),
    }
}

/// `u_light[0].color` -> `u_light`.
fn base_name(name: &str) -> &str {
    name.split(['[', '.']).next().unwrap_or(name)
}

/// True when `ident` occurs in `source` as a whole identifier.
fn mentions(source: &str, ident: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    !ident.is_empty()
        && source.match_indices(ident).any(|(i, _)| {
            let before = source[..i].chars().next_back();
            let after = source[i + ident.len()..].chars().next();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_match_whole_words_only() {
        assert!(mentions("uniform vec4 u_tint;", "u_tint"));
        assert!(!mentions("uniform vec4 u_tint2;", "u_tint"));
        assert!(!mentions("uniform vec4 xu_tint;", "u_tint"));
        assert_eq!(base_name("u_light[0].color"), "u_light");
        assert_eq!(base_name("block.member"), "block");
    }
}
