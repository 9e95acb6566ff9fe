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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gl_types::{ActiveVariable, LinkOptions, ShaderStage};

use crate::backend::ProgramBackend;
use crate::cache::ProgramCache;
use crate::key::{ProgramKey, ProgramKeyInput, ShaderHash, program_key, shader_hash};
use crate::memory_store::PageId;
use crate::program::{CachedProgram, ProgramBinaryData, ShaderVariables, VariableInfo};
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
    /// The driver object, when the driver compiled it.
    pub fn object(&self) -> Option<&S> {
        match &self.state {
            ShaderState::Compiled { object, .. } => Some(object),
            _ => None,
        }
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
    /// The driver object.
    pub program: P,
    /// Its cache key.
    pub key: ProgramKey,
    /// How it came about.
    pub origin: LinkOrigin,
    /// Active attributes, sorted by name.
    pub attributes: Vec<ActiveVariable>,
    /// Active uniforms, sorted by name.
    pub uniforms: Vec<ActiveVariable>,
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
///     fn link(&mut self, _: &u32, _: &u32, _: &LinkOptions) -> Result<u32, String> {
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

    /// The backend.
    pub fn backend(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<ProgramCache> {
        &self.cache
    }

    /// Compiles `shader`, or defers the compile on a status hit. A shader of no manager yet
    /// ([`Shader::new`]) becomes this manager's; one of another manager is refused
    /// ([`ForeignShader`], nothing changes). A failed compile is an outcome
    /// ([`CompileOutcome::Failed`]), not an error.
    pub fn compile(
        &mut self,
        shader: &mut Shader<B::Shader>,
    ) -> Result<CompileOutcome, ForeignShader> {
        match shader.manager {
            Some(owner) if owner != self.id => return Err(ForeignShader { owner }),
            Some(_) => {}
            None => shader.manager = Some(self.id),
        }
        let start = Instant::now();
        let hash = shader_hash(shader.stage, &shader.source, &shader.compile_options);
        if self.cache.shader_compile_status(&hash) == CompileStatus::Success {
            shader.state = ShaderState::Deferred {
                hash,
                source: shader.source.clone(),
            };
            self.cache.record_status_hit(start.elapsed());
            return Ok(CompileOutcome::Deferred);
        }
        let outcome = match self.backend.compile(shader.stage, &shader.source) {
            Ok(object) => {
                self.cache.shader_compile_succeeded(hash);
                shader.state = ShaderState::Compiled {
                    hash,
                    source: shader.source.clone(),
                    object,
                };
                CompileOutcome::Compiled
            }
            Err(log) => {
                shader.state = ShaderState::Failed { hash, log };
                CompileOutcome::Failed
            }
        };
        self.cache.record_status_miss(start.elapsed());
        Ok(outcome)
    }

    /// The program key `link` would use, when both shaders have been compiled.
    pub fn program_key(
        &self,
        vertex: &Shader<B::Shader>,
        fragment: &Shader<B::Shader>,
        options: &ProgramOptions,
    ) -> Option<ProgramKey> {
        Some(program_key(&ProgramKeyInput {
            vertex: vertex.compiled_hash()?,
            fragment: fragment.compiled_hash()?,
            backend_identity: &self.backend_identity,
            attribute_bindings: &options.link.attribute_bindings,
            transform_feedback_varyings: &options.link.transform_feedback_varyings,
            transform_feedback_mode: options.link.transform_feedback_mode,
        }))
    }

    /// Links `vertex` and `fragment` through the cache. Checked in this order, before anything
    /// else happens: a shader of another manager in either place (vertex first) is
    /// [`LinkFailure::ForeignShader`]; a shader of another stage is
    /// [`LinkFailure::WrongStage`]; a shader not compiled (or that failed) is
    /// [`LinkFailure::ShaderNotCompiled`].
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
        for shader in [&*vertex, &*fragment] {
            if !shader.compile_status() {
                return Err(LinkFailure::ShaderNotCompiled {
                    stage: shader.stage,
                });
            }
        }
        let key = self
            .program_key(vertex, fragment, options)
            .expect("compiled shaders have hashes");

        let start = Instant::now();
        let mut origin = LinkOrigin::Linked;
        if let Some(entry) = self.cache.load(&key, options.page) {
            match self.backend.load_binary(&entry.binary) {
                Ok(program) => {
                    self.cache.binary_accepted(&key);
                    vertex.variables = Some(entry.vertex.clone());
                    fragment.variables = Some(entry.fragment.clone());
                    let linked = self.reflect(program, key, LinkOrigin::CacheHit);
                    self.cache.record_binary_hit_time(start.elapsed());
                    return Ok(linked);
                }
                Err(reason) => {
                    tracing::info!(%key, %reason, "driver refused a cached binary; relinking");
                    self.cache.evict_rejected(&key);
                    origin = LinkOrigin::RelinkedAfterRejection;
                }
            }
        }

        let start = Instant::now();
        self.ensure_compiled(vertex)?;
        self.ensure_compiled(fragment)?;
        let (Some(vs), Some(fs)) = (vertex.object(), fragment.object()) else {
            unreachable!("ensure_compiled leaves driver objects");
        };
        let program = self
            .backend
            .link(vs, fs, &options.link)
            .map_err(|log| LinkFailure::Link { log })?;
        let linked = self.reflect(program, key, origin);
        self.save_binary(vertex, fragment, &linked, options.page);
        self.cache.record_binary_miss_time(start.elapsed());
        Ok(linked)
    }

    /// Reads the binary of a program just linked and saves it, unless the cache would refuse
    /// it: then the binary is not read at all.
    fn save_binary(
        &mut self,
        vertex: &Shader<B::Shader>,
        fragment: &Shader<B::Shader>,
        linked: &LinkedProgram<B::Program>,
        page: Option<PageId>,
    ) {
        let key = linked.key;
        let mut value = CachedProgram {
            vertex_shader: vertex.compiled_hash().expect("compiled"),
            fragment_shader: fragment.compiled_hash().expect("compiled"),
            vertex: stage_variables(vertex, linked),
            fragment: stage_variables(fragment, linked),
            binary: ProgramBinaryData {
                format: 0,
                bytes: Vec::new(),
            },
        };
        // Pressure first (free); then the entry's size from the binary length, when the backend
        // can tell it without reading the binary.
        let verdict = self.cache.would_accept(None).and_then(|()| {
            let size = self
                .backend
                .program_binary_length(&linked.program)
                .map(|len| value.stored_size() + len);
            self.cache.would_accept(size)
        });
        if let Err(e) = verdict {
            self.binary_reads_skipped += 1;
            self.cache.count_refused_save();
            tracing::debug!(%key, error = %e, "program not cached; binary not read");
            return;
        }
        match self.backend.program_binary(&linked.program) {
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
    ) -> LinkedProgram<B::Program> {
        let mut attributes = self.backend.active_attributes(&program);
        let mut uniforms = self.backend.active_uniforms(&program);
        attributes.sort();
        uniforms.sort();
        LinkedProgram {
            program,
            key,
            origin,
            attributes,
            uniforms,
        }
    }

    /// Compiles a deferred shader for real.
    fn ensure_compiled(&mut self, shader: &mut Shader<B::Shader>) -> Result<(), LinkFailure> {
        let ShaderState::Deferred { hash, source } = &shader.state else {
            return Ok(());
        };
        let (hash, source) = (*hash, source.clone());
        match self.backend.compile(shader.stage, &source) {
            Ok(object) => {
                shader.state = ShaderState::Compiled {
                    hash,
                    source,
                    object,
                };
                Ok(())
            }
            Err(log) => {
                shader.state = ShaderState::Failed {
                    hash,
                    log: log.clone(),
                };
                Err(LinkFailure::Compile {
                    stage: shader.stage,
                    log,
                })
            }
        }
    }
}

/// The variable maps stored for one stage: the translator's when the host gave them, otherwise
/// identity maps from the driver's reflection (attributes belong to the vertex stage; a uniform
/// belongs to each stage whose compiled source names it).
fn stage_variables<S, P>(shader: &Shader<S>, linked: &LinkedProgram<P>) -> ShaderVariables {
    if let Some(v) = &shader.variables {
        return v.clone();
    }
    let source = match &shader.state {
        ShaderState::Compiled { source, .. } | ShaderState::Deferred { source, .. } => source,
        _ => return ShaderVariables::default(),
    };
    let info = |v: &ActiveVariable| VariableInfo {
        name: v.name.clone(),
        mapped_name: v.name.clone(),
        gl_type: v.gl_type,
        array_size: v.size,
        location: v.location,
    };
    ShaderVariables {
        attributes: if shader.stage == ShaderStage::Vertex {
            linked.attributes.iter().map(info).collect()
        } else {
            Vec::new()
        },
        uniforms: linked
            .uniforms
            .iter()
            .filter(|u| mentions(source, base_name(&u.name)))
            .map(info)
            .collect(),
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
