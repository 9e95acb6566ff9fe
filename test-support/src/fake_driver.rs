//! A recording fake driver for tests of the program cache's pure logic (every behaviour tested
//! with it is also proven on the real driver in program-cache's `gl_flow.rs`), and [`Counting`],
//! a wrapper that counts the binary reads and length queries of any backend.

use program_cache::{ActiveVariable, LinkOptions, ProgramBackend, ProgramBinaryData, ShaderStage};

/// One call the fake driver received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A compile of this stage and source.
    Compile(ShaderStage, String),
    /// A link of these two shader ids.
    Link(u32, u32),
    /// A binary read of this program id.
    GetBinary(u32),
    /// A binary load of these bytes.
    LoadBinary(Vec<u8>),
}

/// A fake shader / program: an id plus the sources it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeObject {
    /// Unique among the objects of one driver.
    pub id: u32,
    /// A shader's source; a program's two sources and its attribute bindings.
    pub source: String,
}

/// Compiles anything without "ERROR" in it; links anything; the binary is the two sources and
/// the bindings. The knobs:
/// * `reject_loads`: every binary load fails (a driver that refuses its own binaries);
/// * `report_binary_length`: `GL_PROGRAM_BINARY_LENGTH` is answered with the length of the
///   binary [`ProgramBackend::program_binary`] would return (off: the backend cannot tell).
///
/// Length queries are not recorded in `calls`; wrap the driver in [`Counting`] to count them.
#[derive(Debug, Default)]
pub struct FakeDriver {
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Refuse every binary load.
    pub reject_loads: bool,
    /// Answer binary length queries.
    pub report_binary_length: bool,
    next_id: u32,
}

impl FakeDriver {
    /// A driver that answers binary length queries.
    pub fn with_binary_length() -> Self {
        FakeDriver {
            report_binary_length: true,
            ..FakeDriver::default()
        }
    }

    fn id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// How many calls match `f`.
    pub fn count(&self, f: impl Fn(&Call) -> bool) -> usize {
        self.calls.iter().filter(|c| f(c)).count()
    }
    /// How many compiles.
    pub fn compiles(&self) -> usize {
        self.count(|c| matches!(c, Call::Compile(..)))
    }
    /// How many links.
    pub fn links(&self) -> usize {
        self.count(|c| matches!(c, Call::Link(..)))
    }
    /// How many binary loads.
    pub fn loads(&self) -> usize {
        self.count(|c| matches!(c, Call::LoadBinary(..)))
    }
    /// How many binary reads.
    pub fn binaries(&self) -> usize {
        self.count(|c| matches!(c, Call::GetBinary(..)))
    }
}

/// "in vec4 a_x;" style declarations become active variables.
fn variables(source: &str) -> Vec<ActiveVariable> {
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
        shaders: &[&FakeObject],
        options: &LinkOptions,
    ) -> Result<FakeObject, String> {
        let (Some(first), Some(last)) = (shaders.first(), shaders.last()) else {
            return Err("no shaders".into());
        };
        self.calls.push(Call::Link(first.id, last.id));
        let sources: Vec<&str> = shaders.iter().map(|s| s.source.as_str()).collect();
        Ok(FakeObject {
            id: self.id(),
            source: format!(
                "{}\n--\n{:?}",
                sources.join("\n--\n"),
                options.attribute_bindings
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

    fn program_binary_length(&mut self, program: &FakeObject) -> Option<usize> {
        self.report_binary_length.then_some(program.source.len())
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

/// Any backend, counting the binaries read out of it and the binary length queries it gets.
#[derive(Debug, Default)]
pub struct Counting<B> {
    /// The backend every call goes to.
    pub inner: B,
    /// Calls of [`ProgramBackend::program_binary`].
    pub reads: usize,
    /// Calls of [`ProgramBackend::program_binary_length`].
    pub length_queries: usize,
    /// Compiles handed to the driver (`compile` and `start_compile`).
    pub compiles: usize,
    /// Links handed to the driver (`link` and `start_link`).
    pub links: usize,
    /// Binaries loaded ([`ProgramBackend::load_binary`]).
    pub loads: usize,
}

impl<B> Counting<B> {
    /// `inner`, with both counts at zero.
    pub fn new(inner: B) -> Self {
        Counting {
            inner,
            reads: 0,
            length_queries: 0,
            compiles: 0,
            links: 0,
            loads: 0,
        }
    }
}

impl<B: ProgramBackend> ProgramBackend for Counting<B> {
    type Shader = B::Shader;
    type Program = B::Program;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<B::Shader, String> {
        self.compiles += 1;
        self.inner.compile(stage, source)
    }
    fn link(
        &mut self,
        shaders: &[&B::Shader],
        options: &LinkOptions,
    ) -> Result<B::Program, String> {
        self.links += 1;
        self.inner.link(shaders, options)
    }
    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<B::Shader, String> {
        self.compiles += 1;
        self.inner.start_compile(stage, source)
    }
    fn compile_done(&mut self, shader: &B::Shader) -> bool {
        self.inner.compile_done(shader)
    }
    fn finish_compile(&mut self, shader: B::Shader) -> Result<B::Shader, String> {
        self.inner.finish_compile(shader)
    }
    fn start_link(
        &mut self,
        shaders: &[&B::Shader],
        options: &LinkOptions,
    ) -> Result<B::Program, String> {
        self.links += 1;
        self.inner.start_link(shaders, options)
    }
    fn link_done(&mut self, program: &B::Program) -> bool {
        self.inner.link_done(program)
    }
    fn finish_link(&mut self, program: B::Program) -> Result<B::Program, String> {
        self.inner.finish_link(program)
    }
    fn program_interface(&mut self, program: &B::Program) -> program_cache::ProgramInterface {
        self.inner.program_interface(program)
    }
    fn last_failure_is_verdict(&self) -> bool {
        self.inner.last_failure_is_verdict()
    }
    fn program_binary(&mut self, program: &B::Program) -> Result<ProgramBinaryData, String> {
        self.reads += 1;
        self.inner.program_binary(program)
    }
    fn program_binary_length(&mut self, program: &B::Program) -> Option<usize> {
        self.length_queries += 1;
        self.inner.program_binary_length(program)
    }
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<B::Program, String> {
        self.loads += 1;
        self.inner.load_binary(binary)
    }
    fn load_cached_binary(
        &mut self,
        key: &program_cache::ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<B::Program, String> {
        self.loads += 1;
        self.inner.load_cached_binary(key, binary)
    }
    fn active_attributes(&mut self, program: &B::Program) -> Vec<ActiveVariable> {
        self.inner.active_attributes(program)
    }
    fn active_uniforms(&mut self, program: &B::Program) -> Vec<ActiveVariable> {
        self.inner.active_uniforms(program)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linked(
        d: &mut impl ProgramBackend<Shader = FakeObject, Program = FakeObject>,
    ) -> FakeObject {
        let vs = d
            .compile(ShaderStage::Vertex, "in vec4 a_position;")
            .unwrap();
        let fs = d.compile(ShaderStage::Fragment, "void main() {}").unwrap();
        d.link(&[&vs, &fs], &LinkOptions::default()).unwrap()
    }

    #[test]
    fn the_fake_records_every_call_and_fails_what_it_is_told_to() {
        let mut d = FakeDriver::default();
        let err = d.compile(ShaderStage::Vertex, "ERROR").unwrap_err();
        assert!(err.contains("syntax error in"), "{err}");
        let program = linked(&mut d);
        assert_eq!(d.active_attributes(&program)[0].name, "a_position");
        let binary = d.program_binary(&program).unwrap();
        assert_eq!(binary.bytes, program.source.as_bytes());
        assert_eq!(d.load_binary(&binary).unwrap().source, program.source);
        assert_eq!(
            (d.compiles(), d.links(), d.binaries(), d.loads()),
            (3, 1, 1, 1)
        );
        d.reject_loads = true;
        assert_eq!(d.load_binary(&binary), Err("binary rejected".to_string()));
    }

    #[test]
    fn the_binary_length_is_answered_only_when_asked_for() {
        let mut d = FakeDriver::default();
        let program = linked(&mut d);
        assert_eq!(d.program_binary_length(&program), None);
        let mut d = FakeDriver::with_binary_length();
        let program = linked(&mut d);
        let len = d.program_binary(&program).unwrap().bytes.len();
        assert_eq!(d.program_binary_length(&program), Some(len));
    }

    #[test]
    fn counting_counts_reads_and_length_queries_and_forwards_the_rest() {
        let mut c = Counting::new(FakeDriver::with_binary_length());
        let program = linked(&mut c);
        assert!(c.program_binary_length(&program).is_some());
        c.program_binary(&program).unwrap();
        c.program_binary(&program).unwrap();
        assert_eq!((c.reads, c.length_queries), (2, 1));
        assert_eq!((c.inner.links(), c.inner.binaries()), (1, 2));
    }
}
