//! piglit `.shader_test` files: parsing one, loading a tree of them.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{ComputeSource, GlslVersion, ProgramSource};

/// Why a `.shader_test` file gives no program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Skip {
    /// `[vertex shader passthrough]`: piglit supplies a vertex shader of its own, there is no source.
    PassthroughVertex,
    /// A `[compute shader]` beside graphics stages (the other section's name): neither a
    /// compute program nor a graphics one.
    OtherStage(String),
    /// An ARB assembly program (`[vertex program]` / `[fragment program]`).
    AssemblyProgram,
    /// A stage's source lives in another file (`[vertex shader file]`, ...).
    ExternalSource,
    /// More than one shader of a stage (they are linked together; a program here has one each).
    MultipleShaders {
        /// `vertex`, `fragment`, `geometry`, `tessellation control`, `tessellation evaluation`
        /// or `compute`.
        stage: &'static str,
        /// How many sections.
        count: usize,
    },
    /// No section with the stage's GLSL source.
    MissingStage(&'static str),
    /// The stage's section has only whitespace.
    EmptyStage(&'static str),
    /// `rlimit N` in `[require]`: piglit runs the file under an N-byte address-space limit
    /// because it is built to exhaust the compiler (unroll / inline explosions). Without the
    /// limit, compiling it takes the machine's memory.
    NeedsMemoryLimit(u64),
    /// A `GLSL >= ...` or `rlimit` line whose value does not parse.
    BadRequirement(String),
    /// The file is not UTF-8.
    NotUtf8,
}

impl Skip {
    /// A short fixed label per kind, for counting skips.
    pub fn label(&self) -> &'static str {
        match self {
            Skip::PassthroughVertex => "vertex shader passthrough",
            Skip::OtherStage(_) => "compute beside graphics stages",
            Skip::AssemblyProgram => "ARB assembly program",
            Skip::ExternalSource => "source in another file",
            Skip::MultipleShaders { .. } => "several shaders of one stage",
            Skip::MissingStage(_) => "no vertex or no fragment shader",
            Skip::EmptyStage(_) => "empty shader section",
            Skip::NeedsMemoryLimit(_) => "needs a memory limit (rlimit)",
            Skip::BadRequirement(_) => "unparsable GLSL requirement",
            Skip::NotUtf8 => "not UTF-8",
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::OtherStage(section) => {
                write!(f, "has a [compute shader] and a [{section}] section")
            }
            Skip::MultipleShaders { stage, count } => write!(f, "{count} {stage} shaders"),
            Skip::MissingStage(stage) => write!(f, "no [{stage} shader] section"),
            Skip::EmptyStage(stage) => write!(f, "empty [{stage} shader] section"),
            Skip::NeedsMemoryLimit(bytes) => write!(f, "runs under an rlimit of {bytes} bytes"),
            Skip::BadRequirement(line) => write!(f, "unparsable requirement {line:?}"),
            other => f.write_str(other.label()),
        }
    }
}

/// What one usable `.shader_test` file holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Parsed {
    /// A graphics program: vertex + fragment, with geometry / tessellation stages when the
    /// file has them.
    Program(ProgramSource),
    /// A compute program (`[compute shader]` and no graphics stage).
    Compute(ComputeSource),
}

/// The stages a `.shader_test` file can give, in the order [`Stages::section`] knows them.
const STAGES: [(&str, &str); 6] = [
    ("vertex shader", "vertex"),
    ("fragment shader", "fragment"),
    ("geometry shader", "geometry"),
    ("tessellation control shader", "tessellation control"),
    ("tessellation evaluation shader", "tessellation evaluation"),
    ("compute shader", "compute"),
];
const VERTEX: usize = 0;
const FRAGMENT: usize = 1;
const GEOMETRY: usize = 2;
const TESS_CONTROL: usize = 3;
const TESS_EVALUATION: usize = 4;
const COMPUTE: usize = 5;

/// Parses one `.shader_test` file. `name` becomes the program's name.
///
/// A section starts at a line that begins with `[` and ends with `]` (piglit's own rule); text
/// before the first section is a free-form preamble. The sections read are `[require]` and the
/// six GLSL stages (`[vertex shader]`, `[fragment shader]`, `[geometry shader]`,
/// `[tessellation control shader]`, `[tessellation evaluation shader]`, `[compute shader]`);
/// others are ignored unless they make the file unusable (see [`Skip`]); SPIR-V variants
/// (`[vertex shader spirv]`) are alternatives piglit uses only with `-spirv` and are ignored.
/// A file with a compute stage and no graphics stage is a [`Parsed::Compute`]; otherwise it
/// needs exactly one vertex and one fragment shader, and at most one of each other stage.
pub fn parse_shader_test(name: &str, text: &str) -> Result<Parsed, Skip> {
    let mut stages: [Vec<String>; 6] = Default::default();
    let mut require = String::new();
    let mut unusable: Option<Skip> = None;
    // What the lines of the current section go into.
    enum Into {
        Nothing,
        Require,
        Stage(usize),
    }
    let mut into = Into::Nothing;

    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            let section = trimmed[1..trimmed.len() - 1].trim();
            into = Into::Nothing;
            let problem = match section {
                "require" => {
                    into = Into::Require;
                    None
                }
                "vertex shader passthrough" => Some(Skip::PassthroughVertex),
                "vertex program" | "fragment program" => Some(Skip::AssemblyProgram),
                s if s.ends_with(" shader file") => Some(Skip::ExternalSource),
                s => {
                    if let Some(stage) = STAGES.iter().position(|(header, _)| *header == s) {
                        stages[stage].push(String::new());
                        into = Into::Stage(stage);
                    }
                    None
                }
            };
            // Stage problems outrank the rest: report the first one found.
            if let Some(problem) = problem {
                unusable.get_or_insert(problem);
            }
            continue;
        }
        match into {
            Into::Nothing => {}
            Into::Require => require.push_str(line),
            Into::Stage(stage) => stages[stage]
                .last_mut()
                .expect("pushed at the header")
                .push_str(line),
        }
    }
    if let Some(skip) = unusable {
        return Err(skip);
    }
    let [
        vertex,
        fragment,
        geometry,
        tess_control,
        tess_evaluation,
        compute,
    ] = stages;
    if !compute.is_empty() {
        let graphics = [
            &vertex,
            &fragment,
            &geometry,
            &tess_control,
            &tess_evaluation,
        ];
        if let Some(other) = graphics.iter().position(|s| !s.is_empty()) {
            return Err(Skip::OtherStage(STAGES[other].0.to_string()));
        }
        let compute = single(STAGES[COMPUTE].1, compute)?;
        let (glsl, es, extensions) = parse_require(&require)?;
        return Ok(Parsed::Compute(ComputeSource {
            name: name.to_string(),
            compute,
            glsl,
            es,
            extensions,
        }));
    }
    let vertex = single(STAGES[VERTEX].1, vertex)?;
    let fragment = single(STAGES[FRAGMENT].1, fragment)?;
    let geometry = optional(STAGES[GEOMETRY].1, geometry)?;
    let tess_control = optional(STAGES[TESS_CONTROL].1, tess_control)?;
    let tess_evaluation = optional(STAGES[TESS_EVALUATION].1, tess_evaluation)?;
    let (glsl, es, extensions) = parse_require(&require)?;
    Ok(Parsed::Program(ProgramSource {
        name: name.to_string(),
        vertex,
        fragment,
        geometry,
        tess_control,
        tess_evaluation,
        glsl,
        es,
        extensions,
    }))
}

fn single(stage: &'static str, mut sources: Vec<String>) -> Result<String, Skip> {
    match sources.len() {
        0 => Err(Skip::MissingStage(stage)),
        1 => {
            let source = sources.pop().expect("one source");
            if source.trim().is_empty() {
                Err(Skip::EmptyStage(stage))
            } else {
                Ok(source)
            }
        }
        count => Err(Skip::MultipleShaders { stage, count }),
    }
}

/// A stage a program may lack: none, or exactly one non-empty section.
fn optional(stage: &'static str, sources: Vec<String>) -> Result<Option<String>, Skip> {
    if sources.is_empty() {
        Ok(None)
    } else {
        single(stage, sources).map(Some)
    }
}

type Requirements = (Option<GlslVersion>, bool, Vec<String>);

/// `GLSL >= 1.50`, `GLSL ES >= 3.00`, `GL ES >= 3.0`, `GL_ARB_foo`; `#` starts a comment.
fn parse_require(section: &str) -> Result<Requirements, Skip> {
    let mut glsl = None;
    let mut es = false;
    let mut extensions = Vec::new();
    for line in section.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["GLSL", "ES", ">=", version] | ["GLSL", ">=", version] => {
                let parsed =
                    GlslVersion::parse(version).ok_or_else(|| Skip::BadRequirement(line.into()))?;
                glsl = Some(parsed);
                es |= words[1] == "ES";
            }
            ["GL", "ES", ..] => es = true,
            ["rlimit", bytes] => {
                let bytes = bytes
                    .parse()
                    .map_err(|_| Skip::BadRequirement(line.into()))?;
                return Err(Skip::NeedsMemoryLimit(bytes));
            }
            [extension] if extension.starts_with("GL_") => extensions.push(extension.to_string()),
            _ => {}
        }
    }
    Ok((glsl, es, extensions))
}

/// A file that gave no program, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    /// Path relative to the loaded root, `/`-separated.
    pub name: String,
    /// Why.
    pub reason: Skip,
}

/// What [`load_dir`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedCorpus {
    /// `.shader_test` files read.
    pub files: usize,
    /// Vertex + fragment programs (no other stage), in name order.
    pub programs: Vec<ProgramSource>,
    /// Programs with a geometry or tessellation stage besides vertex + fragment, in name
    /// order. Kept apart from [`LoadedCorpus::programs`] so that callers that compile only the
    /// vertex and fragment stages never see them.
    pub staged: Vec<ProgramSource>,
    /// Compute programs, in name order.
    pub compute: Vec<ComputeSource>,
    /// Files that gave no program, in name order.
    pub skipped: Vec<SkippedFile>,
}

impl LoadedCorpus {
    /// How many files each kind of [`Skip`] took out, most first (ties by label).
    pub fn skip_counts(&self) -> Vec<(&'static str, usize)> {
        let mut counts = std::collections::BTreeMap::new();
        for s in &self.skipped {
            *counts.entry(s.reason.label()).or_insert(0usize) += 1;
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        counts
    }
}

/// Why a tree could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The root is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// A directory or file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Loads every `*.shader_test` file below `root` (recursively, symbolic links not followed),
/// in byte order of the relative paths.
pub fn load_dir(root: &Path) -> Result<LoadedCorpus, LoadError> {
    if !root.is_dir() {
        return Err(LoadError::NotADirectory(root.to_path_buf()));
    }
    let mut files = Vec::new();
    collect(root, "", &mut files)?;
    files.sort();
    let mut corpus = LoadedCorpus::default();
    for name in files {
        let path = root.join(&name);
        let bytes = std::fs::read(&path).map_err(|source| LoadError::Io { path, source })?;
        corpus.files += 1;
        let parsed = match String::from_utf8(bytes) {
            Ok(text) => parse_shader_test(&name, &text),
            Err(_) => Err(Skip::NotUtf8),
        };
        match parsed {
            Ok(Parsed::Program(program)) if program.has_other_stages() => {
                corpus.staged.push(program)
            }
            Ok(Parsed::Program(program)) => corpus.programs.push(program),
            Ok(Parsed::Compute(program)) => corpus.compute.push(program),
            Err(reason) => corpus.skipped.push(SkippedFile { name, reason }),
        }
    }
    Ok(corpus)
}

/// Adds the relative names of the `.shader_test` files below `dir` (named `prefix`).
fn collect(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        // `DirEntry::file_type` does not follow symbolic links: links are neither files nor
        // directories here, so they are skipped.
        let kind = entry.file_type().map_err(io)?;
        let Ok(file_name) = entry.file_name().into_string() else {
            continue; // a non-UTF-8 name cannot become a program name
        };
        let name = if prefix.is_empty() {
            file_name.clone()
        } else {
            format!("{prefix}/{file_name}")
        };
        if kind.is_dir() {
            collect(&entry.path(), &name, out)?;
        } else if kind.is_file() && file_name.ends_with(".shader_test") {
            out.push(name);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASIC: &str = "\
# a preamble comment
[require]
GLSL >= 1.30   # comment
GL_ARB_explicit_attrib_location
GL_MAX_VARYING_COMPONENTS >= 64

[vertex shader]
#version 130
in vec4 piglit_vertex;
void main() { gl_Position = piglit_vertex; }

[fragment shader]
#version 130
void main() { gl_FragColor = vec4(1.0); }

[test]
draw rect -1 -1 2 2
probe all rgba 1.0 1.0 1.0 1.0
";

    /// The graphics program a file gives (panics on a skip or a compute program).
    fn graphics(name: &str, text: &str) -> ProgramSource {
        match parse_shader_test(name, text) {
            Ok(Parsed::Program(p)) => p,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn parses_require_and_both_stages_verbatim() {
        let p = graphics("spec/x.shader_test", BASIC);
        assert_eq!(p.name, "spec/x.shader_test");
        assert_eq!(
            p.vertex,
            "#version 130\nin vec4 piglit_vertex;\nvoid main() { gl_Position = piglit_vertex; }\n\n"
        );
        assert_eq!(
            p.fragment,
            "#version 130\nvoid main() { gl_FragColor = vec4(1.0); }\n\n"
        );
        assert_eq!(p.glsl, Some(GlslVersion::new(1, 30)));
        assert!(!p.es);
        assert_eq!(p.extensions, ["GL_ARB_explicit_attrib_location"]);
    }

    #[test]
    fn glsl_es_requirement_sets_es() {
        let text = "[require]\nGLSL ES >= 3.00\n[vertex shader]\nv\n[fragment shader]\nf\n";
        let p = graphics("es", text);
        assert_eq!(p.glsl, Some(GlslVersion::new(3, 0)));
        assert_eq!(p.glsl.unwrap().number(), 300);
        assert!(p.es);
        let text = "[require]\nGL ES >= 3.0\n[vertex shader]\nv\n[fragment shader]\nf\n";
        let p = graphics("gles", text);
        assert!(p.es);
        assert_eq!(p.glsl, None);
    }

    #[test]
    fn versions_parse_with_one_or_two_minor_digits() {
        assert_eq!(GlslVersion::parse("1.50"), Some(GlslVersion::new(1, 50)));
        assert_eq!(GlslVersion::parse("4.5"), Some(GlslVersion::new(4, 50)));
        assert_eq!(GlslVersion::parse("3.1").unwrap().number(), 310);
        assert_eq!(GlslVersion::parse("1.00").unwrap().number(), 100);
        assert_eq!(GlslVersion::new(1, 10).to_string(), "1.10");
        for bad in ["", "1", "1.", ".5", "1.500", "a.bc", "1.-5", "300"] {
            assert_eq!(GlslVersion::parse(bad), None, "{bad:?}");
        }
        let text = "[require]\nGLSL >= one\n[vertex shader]\nv\n[fragment shader]\nf\n";
        assert_eq!(
            parse_shader_test("bad", text),
            Err(Skip::BadRequirement("GLSL >= one".into()))
        );
    }

    #[test]
    fn unusable_files_say_why() {
        let cases: &[(&str, Skip)] = &[
            (
                "[vertex shader passthrough]\n[fragment shader]\nf\n",
                Skip::PassthroughVertex,
            ),
            (
                "[vertex shader]\nv\n[compute shader]\nc\n[fragment shader]\nf\n",
                Skip::OtherStage("vertex shader".into()),
            ),
            (
                "[compute shader]\nc\n[geometry shader]\ng\n",
                Skip::OtherStage("geometry shader".into()),
            ),
            (
                "[compute shader]\nc\n[compute shader]\nd\n",
                Skip::MultipleShaders {
                    stage: "compute",
                    count: 2,
                },
            ),
            ("[compute shader]\n \n", Skip::EmptyStage("compute")),
            (
                "[vertex shader]\nv\n[geometry shader]\ng\n[geometry shader]\nh\n\
                 [fragment shader]\nf\n",
                Skip::MultipleShaders {
                    stage: "geometry",
                    count: 2,
                },
            ),
            (
                "[vertex shader]\nv\n[tessellation control shader]\n\n[fragment shader]\nf\n",
                Skip::EmptyStage("tessellation control"),
            ),
            (
                "[vertex shader passthrough]\n[geometry shader]\ng\n[fragment shader]\nf\n",
                Skip::PassthroughVertex,
            ),
            (
                "[geometry shader]\ng\n[fragment shader]\nf\n",
                Skip::MissingStage("vertex"),
            ),
            (
                "[vertex shader]\nv\n[tessellation evaluation shader]\nt\n",
                Skip::MissingStage("fragment"),
            ),
            (
                "[vertex shader]\nv\n[geometry shader file]\ng.geom\n[fragment shader]\nf\n",
                Skip::ExternalSource,
            ),
            (
                "[vertex program]\n!!ARBvp1.0\n[fragment shader]\nf\n",
                Skip::AssemblyProgram,
            ),
            (
                "[vertex shader file]\nx.vert\n[fragment shader]\nf\n",
                Skip::ExternalSource,
            ),
            (
                "[vertex shader]\nv\n[test]\n",
                Skip::MissingStage("fragment"),
            ),
            ("[fragment shader]\nf\n", Skip::MissingStage("vertex")),
            (
                "[vertex shader]\nv\n[fragment shader]\nf\n[fragment shader]\ng\n",
                Skip::MultipleShaders {
                    stage: "fragment",
                    count: 2,
                },
            ),
            (
                "[vertex shader]\n  \n\n[fragment shader]\nf\n",
                Skip::EmptyStage("vertex"),
            ),
            (
                "[require]\nrlimit 268435456\n[vertex shader]\nv\n[fragment shader]\nf\n",
                Skip::NeedsMemoryLimit(268_435_456),
            ),
            // Only a SPIR-V vertex stage: no GLSL to compile.
            (
                "[vertex shader spirv]\n; SPIR-V\n[fragment shader]\nf\n",
                Skip::MissingStage("vertex"),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                parse_shader_test("t", text).as_ref(),
                Err(expected),
                "{text:?}"
            );
            assert!(!expected.to_string().is_empty());
        }
    }

    #[test]
    fn geometry_and_tessellation_stages_are_read_verbatim() {
        let text = "[require]\nGLSL >= 4.00\n[vertex shader]\nv\n\
                    [tessellation control shader]\ntc\n[tessellation evaluation shader]\nte\n\
                    [geometry shader]\ng 1\ng 2\n[geometry layout]\ninput(triangles)\n\
                    [fragment shader]\nf\n[test]\ndraw arrays GL_PATCHES 0 3\n";
        let p = graphics("tess", text);
        assert_eq!(p.vertex, "v\n");
        assert_eq!(p.fragment, "f\n");
        assert_eq!(p.geometry.as_deref(), Some("g 1\ng 2\n"));
        assert_eq!(p.tess_control.as_deref(), Some("tc\n"));
        assert_eq!(p.tess_evaluation.as_deref(), Some("te\n"));
        assert!(p.has_other_stages());
        assert_eq!(p.glsl, Some(GlslVersion::new(4, 0)));

        let only_geometry = graphics(
            "geom",
            "[vertex shader]\nv\n[geometry shader]\ng\n[fragment shader]\nf\n",
        );
        assert_eq!(only_geometry.geometry.as_deref(), Some("g\n"));
        assert_eq!(only_geometry.tess_control, None);
        assert_eq!(only_geometry.tess_evaluation, None);

        let plain = graphics("vf", "[vertex shader]\nv\n[fragment shader]\nf\n");
        assert!(!plain.has_other_stages());
    }

    #[test]
    fn compute_files_are_compute_programs() {
        let text = "[require]\nGL ES >= 3.1\nGLSL ES >= 3.10\nGL_ARB_compute_shader\n\
                    [compute shader]\n#version 310 es\nlayout(local_size_x = 1) in;\n\
                    void main() {}\n[compute shader spirv]\n; asm\n[test]\ncompute 1 1 1\n";
        let Ok(Parsed::Compute(c)) = parse_shader_test("spec/c.shader_test", text) else {
            panic!("not a compute program");
        };
        assert_eq!(c.name, "spec/c.shader_test");
        assert_eq!(
            c.compute,
            "#version 310 es\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
        );
        assert_eq!(c.glsl, Some(GlslVersion::new(3, 10)));
        assert!(c.es);
        assert_eq!(c.extensions, ["GL_ARB_compute_shader"]);
    }

    #[test]
    fn spirv_alternatives_and_crlf_headers_are_tolerated() {
        let text = "[require]\r\nGLSL >= 4.50\r\n[vertex shader spirv]\r\n; asm\r\n\
                    [vertex shader]\r\nv\r\n[fragment shader]\r\nf\r\n";
        let p = graphics("t", text);
        assert_eq!(p.vertex, "v\r\n");
        assert_eq!(p.fragment, "f\r\n");
        assert_eq!(p.glsl, Some(GlslVersion::new(4, 50)));
    }

    #[test]
    fn loads_a_tree_in_sorted_order_and_reports_skips() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, bytes: &[u8]| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        };
        let program = |tag: &str| {
            format!("[require]\nGLSL >= 1.10\n[vertex shader]\n// {tag}\n[fragment shader]\nf\n")
        };
        write("b/z.shader_test", program("bz").as_bytes());
        write("a.shader_test", program("a").as_bytes());
        write("b/a/deep.shader_test", program("deep").as_bytes());
        write("b/skip.shader_test", b"[vertex shader passthrough]\n");
        write("b/binary.shader_test", &[0xff, 0xfe, b'[']);
        write("b/notes.txt", b"[vertex shader]\nv\n[fragment shader]\nf\n");
        write(
            "g.shader_test",
            b"[vertex shader]\nv\n[geometry shader]\ng\n[fragment shader]\nf\n",
        );
        write("b/c.shader_test", b"[compute shader]\nc\n");
        write("c.shader_test.orig", program("orig").as_bytes());

        let corpus = load_dir(root).unwrap();
        assert_eq!(corpus.files, 7);
        let staged: Vec<_> = corpus.staged.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(staged, ["g.shader_test"]);
        let compute: Vec<_> = corpus.compute.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(compute, ["b/c.shader_test"]);
        let names: Vec<_> = corpus.programs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["a.shader_test", "b/a/deep.shader_test", "b/z.shader_test"]
        );
        assert_eq!(corpus.programs[2].vertex, "// bz\n");
        let skipped: Vec<_> = corpus
            .skipped
            .iter()
            .map(|s| (s.name.as_str(), &s.reason))
            .collect();
        assert_eq!(
            skipped,
            [
                ("b/binary.shader_test", &Skip::NotUtf8),
                ("b/skip.shader_test", &Skip::PassthroughVertex)
            ]
        );
        assert_eq!(
            corpus.skip_counts(),
            [("not UTF-8", 1), ("vertex shader passthrough", 1)]
        );
        // Loading again gives the same result.
        assert_eq!(load_dir(root).unwrap(), corpus);

        assert!(matches!(
            load_dir(&root.join("a.shader_test")),
            Err(LoadError::NotADirectory(_))
        ));
        assert!(matches!(
            load_dir(&root.join("missing")),
            Err(LoadError::NotADirectory(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(
            root.join("d/p.shader_test"),
            "[vertex shader]\nv\n[fragment shader]\nf\n",
        )
        .unwrap();
        // A cycle back to the root, and a link to a file: both ignored.
        std::os::unix::fs::symlink(root, root.join("d/loop")).unwrap();
        std::os::unix::fs::symlink(root.join("d/p.shader_test"), root.join("l.shader_test"))
            .unwrap();
        let corpus = load_dir(root).unwrap();
        assert_eq!(corpus.files, 1);
        assert_eq!(corpus.programs[0].name, "d/p.shader_test");
    }
}
