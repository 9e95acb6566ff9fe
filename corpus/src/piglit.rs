//! piglit `.shader_test` files: parsing one, loading a tree of them.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{GlslVersion, ProgramSource};

/// Why a `.shader_test` file gives no vertex + fragment program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Skip {
    /// `[vertex shader passthrough]`: piglit supplies a vertex shader of its own, there is no source.
    PassthroughVertex,
    /// A geometry, tessellation or compute stage (the section's name).
    OtherStage(String),
    /// An ARB assembly program (`[vertex program]` / `[fragment program]`).
    AssemblyProgram,
    /// A stage's source lives in another file (`[vertex shader file]`, ...).
    ExternalSource,
    /// More than one shader of a stage (they are linked together; a program here has one each).
    MultipleShaders {
        /// `vertex` or `fragment`.
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
            Skip::OtherStage(_) => "geometry/tessellation/compute stage",
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
            Skip::OtherStage(section) => write!(f, "has a [{section}] section"),
            Skip::MultipleShaders { stage, count } => write!(f, "{count} {stage} shaders"),
            Skip::MissingStage(stage) => write!(f, "no [{stage} shader] section"),
            Skip::EmptyStage(stage) => write!(f, "empty [{stage} shader] section"),
            Skip::NeedsMemoryLimit(bytes) => write!(f, "runs under an rlimit of {bytes} bytes"),
            Skip::BadRequirement(line) => write!(f, "unparsable requirement {line:?}"),
            other => f.write_str(other.label()),
        }
    }
}

/// Parses one `.shader_test` file. `name` becomes [`ProgramSource::name`].
///
/// A section starts at a line that begins with `[` and ends with `]` (piglit's own rule); text
/// before the first section is a free-form preamble. Sections other than `[require]`,
/// `[vertex shader]` and `[fragment shader]` are ignored unless they make the file unusable
/// (see [`Skip`]); SPIR-V variants (`[vertex shader spirv]`) are alternatives piglit uses only
/// with `-spirv` and are ignored.
pub fn parse_shader_test(name: &str, text: &str) -> Result<ProgramSource, Skip> {
    let mut vertex: Vec<String> = Vec::new();
    let mut fragment: Vec<String> = Vec::new();
    let mut require = String::new();
    let mut unusable: Option<Skip> = None;
    // What the lines of the current section go into.
    enum Into {
        Nothing,
        Require,
        Vertex,
        Fragment,
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
                "vertex shader" => {
                    vertex.push(String::new());
                    into = Into::Vertex;
                    None
                }
                "fragment shader" => {
                    fragment.push(String::new());
                    into = Into::Fragment;
                    None
                }
                "vertex shader passthrough" => Some(Skip::PassthroughVertex),
                "vertex program" | "fragment program" => Some(Skip::AssemblyProgram),
                "vertex shader file" | "fragment shader file" => Some(Skip::ExternalSource),
                s if s.starts_with("geometry shader")
                    || s.starts_with("tessellation")
                    || s.starts_with("compute shader") =>
                {
                    Some(Skip::OtherStage(s.to_string()))
                }
                _ => None,
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
            Into::Vertex => vertex
                .last_mut()
                .expect("pushed at the header")
                .push_str(line),
            Into::Fragment => fragment
                .last_mut()
                .expect("pushed at the header")
                .push_str(line),
        }
    }
    if let Some(skip) = unusable {
        return Err(skip);
    }
    let vertex = single("vertex", vertex)?;
    let fragment = single("fragment", fragment)?;
    let (glsl, es, extensions) = parse_require(&require)?;
    Ok(ProgramSource {
        name: name.to_string(),
        vertex,
        fragment,
        glsl,
        es,
        extensions,
    })
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
    /// Programs, in name order.
    pub programs: Vec<ProgramSource>,
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
            Ok(program) => corpus.programs.push(program),
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

    #[test]
    fn parses_require_and_both_stages_verbatim() {
        let p = parse_shader_test("spec/x.shader_test", BASIC).unwrap();
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
        let p = parse_shader_test("es", text).unwrap();
        assert_eq!(p.glsl, Some(GlslVersion::new(3, 0)));
        assert_eq!(p.glsl.unwrap().number(), 300);
        assert!(p.es);
        let text = "[require]\nGL ES >= 3.0\n[vertex shader]\nv\n[fragment shader]\nf\n";
        let p = parse_shader_test("gles", text).unwrap();
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
                "[vertex shader]\nv\n[geometry shader]\ng\n[fragment shader]\nf\n",
                Skip::OtherStage("geometry shader".into()),
            ),
            (
                "[vertex shader]\nv\n[tessellation control shader]\nt\n[fragment shader]\nf\n",
                Skip::OtherStage("tessellation control shader".into()),
            ),
            (
                "[compute shader]\nc\n",
                Skip::OtherStage("compute shader".into()),
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
    fn spirv_alternatives_and_crlf_headers_are_tolerated() {
        let text = "[require]\r\nGLSL >= 4.50\r\n[vertex shader spirv]\r\n; asm\r\n\
                    [vertex shader]\r\nv\r\n[fragment shader]\r\nf\r\n";
        let p = parse_shader_test("t", text).unwrap();
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
        write("c.shader_test.orig", program("orig").as_bytes());

        let corpus = load_dir(root).unwrap();
        assert_eq!(corpus.files, 5);
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
