//! A recording fake driver for unit tests of the cache's pure logic. Every behaviour tested with
//! it is also proven on the real driver in `gl_flow.rs`.

#![allow(dead_code, unreachable_pub)]

use headless_gl::{ActiveVariable, LinkOptions, ShaderStage};
use program_cache::{
    CachedProgram, ProgramBackend, ProgramBinaryData, ProgramKey, ShaderHash, ShaderVariables,
    VariableInfo,
};

/// One call the fake driver received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Compile(ShaderStage, String),
    Link(u32, u32),
    GetBinary(u32),
    LoadBinary(Vec<u8>),
}

/// A fake shader / program: an id plus the sources it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeObject {
    pub id: u32,
    pub source: String,
}

/// Compiles anything without "ERROR" in it; links anything; the binary is the two sources and
/// the bindings; loading a binary works unless `reject_loads` is set.
#[derive(Debug, Default)]
pub struct FakeDriver {
    pub calls: Vec<Call>,
    pub reject_loads: bool,
    next_id: u32,
}

impl FakeDriver {
    fn id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    pub fn count(&self, f: impl Fn(&Call) -> bool) -> usize {
        self.calls.iter().filter(|c| f(c)).count()
    }
    pub fn compiles(&self) -> usize {
        self.count(|c| matches!(c, Call::Compile(..)))
    }
    pub fn links(&self) -> usize {
        self.count(|c| matches!(c, Call::Link(..)))
    }
    pub fn loads(&self) -> usize {
        self.count(|c| matches!(c, Call::LoadBinary(..)))
    }
    pub fn binaries(&self) -> usize {
        self.count(|c| matches!(c, Call::GetBinary(..)))
    }
}

fn variables(source: &str) -> Vec<ActiveVariable> {
    // "in vec4 a_x;" style declarations become active variables.
    source
        .split(';')
        .filter_map(|decl| {
            let words: Vec<&str> = decl.split_whitespace().collect();
            match words.as_slice() {
                ["in", "vec4", name] => Some(ActiveVariable {
                    name: name.to_string(),
                    gl_type: 0x8B52,
                    size: 1,
                    location: Some(0),
                }),
                _ => None,
            }
        })
        .collect()
}

impl ProgramBackend for FakeDriver {
    type Shader = FakeObject;
    type Program = FakeObject;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<FakeObject, String> {
        self.calls.push(Call::Compile(stage, source.to_string()));
        if source.contains("ERROR") {
            return Err(format!("0:1(1): error: syntax error in {stage} shader"));
        }
        Ok(FakeObject {
            id: self.id(),
            source: source.to_string(),
        })
    }

    fn link(
        &mut self,
        vertex: &FakeObject,
        fragment: &FakeObject,
        options: &LinkOptions,
    ) -> Result<FakeObject, String> {
        self.calls.push(Call::Link(vertex.id, fragment.id));
        Ok(FakeObject {
            id: self.id(),
            source: format!(
                "{}\n--\n{}\n--\n{:?}",
                vertex.source, fragment.source, options.attribute_bindings
            ),
        })
    }

    fn program_binary(&mut self, program: &FakeObject) -> Result<ProgramBinaryData, String> {
        self.calls.push(Call::GetBinary(program.id));
        Ok(ProgramBinaryData {
            format: 0xFA4E,
            bytes: program.source.as_bytes().to_vec(),
        })
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<FakeObject, String> {
        self.calls.push(Call::LoadBinary(binary.bytes.clone()));
        if self.reject_loads {
            return Err("binary rejected".into());
        }
        Ok(FakeObject {
            id: self.id(),
            source: String::from_utf8_lossy(&binary.bytes).into_owned(),
        })
    }

    fn active_attributes(&mut self, program: &FakeObject) -> Vec<ActiveVariable> {
        variables(program.source.split("\n--\n").next().unwrap_or(""))
    }

    fn active_uniforms(&mut self, _program: &FakeObject) -> Vec<ActiveVariable> {
        Vec::new()
    }
}

/// A key made from a number.
pub fn key(n: u8) -> ProgramKey {
    ProgramKey([n; 20])
}

/// A shader hash made from a number.
pub fn shader(n: u8) -> ShaderHash {
    ShaderHash([n; 20])
}

/// A program of `binary_len` bytes using shaders `vs` and `fs`.
pub fn program(vs: u8, fs: u8, binary_len: usize) -> CachedProgram {
    CachedProgram {
        vertex_shader: shader(vs),
        fragment_shader: shader(fs),
        vertex: ShaderVariables {
            attributes: vec![VariableInfo {
                name: "a_position".into(),
                mapped_name: "_u1".into(),
                gl_type: 0x8B52,
                array_size: 1,
                location: Some(0),
            }],
            uniforms: Vec::new(),
        },
        fragment: ShaderVariables::default(),
        binary: ProgramBinaryData {
            format: 1,
            bytes: vec![vs ^ fs; binary_len],
        },
    }
}

/// Gives the calling thread (and the threads it starts afterwards) a private mount namespace in
/// which `/` no longer propagates mounts, for tests that mount something (root only). `Err` with
/// the reason when that is not allowed here.
pub fn private_mount_namespace() -> Result<(), String> {
    let errno = || std::io::Error::last_os_error();
    // SAFETY: unshare takes no pointers; CLONE_NEWNS gives this thread a private copy of the
    // mounts.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!("unshare(CLONE_NEWNS): {}", errno()));
    }
    let root = std::ffi::CString::new("/").unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call; null source, type and data are
    // allowed for a propagation change.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("making / private: {}", errno()));
    }
    Ok(())
}
