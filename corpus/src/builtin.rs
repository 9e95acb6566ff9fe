//! The built-in corpus: distinct programs generated in code.

use std::fmt::Write as _;

use crate::{GlslVersion, ProgramSource};

/// How many programs [`builtin`] generates.
pub const BUILTIN_PROGRAMS: usize = 48;

/// The GLSL dialect the built-in programs are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// `#version 330 core` (desktop GL 3.3+, core or compatibility profile).
    DesktopCore330,
    /// `#version 300 es` with highp default precisions (GLES 3.0+).
    Es300,
}

impl Dialect {
    /// The lines every source starts with.
    pub fn prelude(self) -> &'static str {
        match self {
            Dialect::DesktopCore330 => "#version 330 core\n",
            Dialect::Es300 => "#version 300 es\nprecision highp float;\nprecision highp int;\n",
        }
    }

    /// The GLSL version of the dialect (3.30 or 3.00).
    pub fn version(self) -> GlslVersion {
        match self {
            Dialect::DesktopCore330 => GlslVersion::new(3, 30),
            Dialect::Es300 => GlslVersion::new(3, 0),
        }
    }
}

/// Fragment-shader looks, one per program in turn.
const PATTERNS: [&str; 6] = ["gradient", "checker", "wave", "invert", "loop", "radial"];

/// [`BUILTIN_PROGRAMS`] distinct programs named `builtin/NN-<look>`. Program `i` has a position
/// of 2 to 4 components, `i % 4` more float attributes of 1 to 4 components, the uniforms
/// `u_scale` and `u_tint`, and depending on `i` a `mat4`, a `vec2` array indexed by
/// `gl_VertexID`, a `float` array summed in a loop and a struct uniform. Every attribute and
/// uniform is used, so all of them are active. Each source carries its index as a constant, so no
/// two programs (or shaders) are the same and every compile is a first one for the driver.
pub fn builtin(dialect: Dialect) -> Vec<ProgramSource> {
    (0..BUILTIN_PROGRAMS)
        .map(|i| ProgramSource {
            name: format!("builtin/{i:02}-{}", PATTERNS[(i / 2) % PATTERNS.len()]),
            vertex: vertex_shader(dialect, i),
            fragment: fragment_shader(dialect, i),
            glsl: Some(dialect.version()),
            es: dialect == Dialect::Es300,
            ..ProgramSource::default()
        })
        .collect()
}

/// `vecN` (or `float`) as a `vec4`.
fn widen(name: &str, components: usize) -> String {
    match components {
        1 => format!("vec4({name})"),
        2 => format!("vec4({name}, 0.5, 1.0)"),
        3 => format!("vec4({name}, 1.0)"),
        _ => name.to_string(),
    }
}

fn glsl_type(components: usize) -> String {
    if components == 1 {
        "float".into()
    } else {
        format!("vec{components}")
    }
}

fn vertex_shader(dialect: Dialect, i: usize) -> String {
    let position = 2 + i % 3;
    let extra = i % 4;
    let transform = i.is_multiple_of(3);
    let offsets = (i % 4 == 3).then_some(2 + i % 3);

    let mut s = String::from(dialect.prelude());
    let _ = writeln!(s, "in {} a_position;", glsl_type(position));
    for j in 0..extra {
        let _ = writeln!(s, "in {} a_attr{j};", glsl_type(1 + (i + j) % 4));
    }
    s.push_str("uniform float u_scale;\n");
    if transform {
        s.push_str("uniform mat4 u_transform;\n");
    }
    if let Some(n) = offsets {
        let _ = writeln!(s, "uniform vec2 u_offsets[{n}];");
    }
    s.push_str("out vec4 v_color;\nout vec2 v_uv;\n");
    let _ = writeln!(s, "const float k_seed = {i}.0;");
    s.push_str("void main() {\n");
    let _ = writeln!(s, "    vec4 p = {};", widen("a_position", position));
    s.push_str("    vec4 color = vec4(k_seed / 64.0, 0.5, 0.25, 1.0);\n");
    for j in 0..extra {
        let _ = writeln!(
            s,
            "    color += 0.5 * {};",
            widen(&format!("a_attr{j}"), 1 + (i + j) % 4)
        );
    }
    if transform {
        s.push_str("    p = u_transform * p;\n");
    }
    if let Some(n) = offsets {
        let _ = writeln!(s, "    p.xy += u_offsets[gl_VertexID % {n}];");
    }
    s.push_str("    v_color = clamp(color, 0.0, 1.0);\n");
    s.push_str("    v_uv = p.xy * 0.5 + 0.5;\n");
    s.push_str("    gl_Position = vec4(p.xyz * u_scale, p.w);\n}\n");
    s
}

fn fragment_shader(dialect: Dialect, i: usize) -> String {
    let weights = i.is_multiple_of(2).then_some(2 + i % 5);
    let light = i.is_multiple_of(5);

    let mut s = String::from(dialect.prelude());
    s.push_str("in vec4 v_color;\nin vec2 v_uv;\nuniform vec4 u_tint;\n");
    if let Some(n) = weights {
        let _ = writeln!(s, "uniform float u_weights[{n}];");
    }
    if light {
        s.push_str("struct Light { vec3 dir; float power; };\nuniform Light u_light;\n");
    }
    s.push_str("out vec4 o_color;\n");
    let _ = writeln!(s, "const float k_seed = {i}.0;");
    s.push_str("void main() {\n    vec4 c = v_color * u_tint;\n");
    s.push_str(match PATTERNS[(i / 2) % PATTERNS.len()] {
        "gradient" => "    c.rgb *= v_uv.x;\n",
        "checker" => "    c.rgb *= mod(floor(v_uv.x * 8.0) + floor(v_uv.y * 8.0), 2.0);\n",
        "wave" => "    c.rgb *= 0.5 + 0.5 * sin(v_uv.x * 6.2831 + k_seed);\n",
        "invert" => "    c.rgb = mix(c.rgb, vec3(1.0) - c.rgb, smoothstep(0.2, 0.8, v_uv.y));\n",
        "loop" => {
            "    float acc = 0.0;\n    for (int k = 0; k < 4; ++k) acc += fract(v_uv.x * float(k + 1));\n    c.rgb *= acc * 0.25;\n"
        }
        _ => "    c.rgb *= length(v_uv - vec2(0.5));\n",
    });
    if let Some(n) = weights {
        let _ = writeln!(
            s,
            "    float w = 0.0;\n    for (int k = 0; k < {n}; ++k) w += u_weights[k];\n    c.rgb *= w;"
        );
    }
    if light {
        s.push_str(
            "    c.rgb *= max(dot(normalize(u_light.dir), vec3(0.0, 0.0, 1.0)), 0.0) * u_light.power;\n",
        );
    }
    s.push_str("    o_color = vec4(c.rgb + vec3(k_seed / 1024.0), c.a);\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn programs_and_shaders_are_all_distinct() {
        for dialect in [Dialect::DesktopCore330, Dialect::Es300] {
            let programs = builtin(dialect);
            assert_eq!(programs.len(), BUILTIN_PROGRAMS);
            let names: HashSet<_> = programs.iter().map(|p| &p.name).collect();
            let vertex: HashSet<_> = programs.iter().map(|p| &p.vertex).collect();
            let fragment: HashSet<_> = programs.iter().map(|p| &p.fragment).collect();
            assert_eq!(names.len(), BUILTIN_PROGRAMS);
            assert_eq!(vertex.len(), BUILTIN_PROGRAMS);
            assert_eq!(fragment.len(), BUILTIN_PROGRAMS);
            for p in &programs {
                assert!(p.vertex.starts_with(dialect.prelude()), "{}", p.name);
                assert!(p.fragment.starts_with(dialect.prelude()), "{}", p.name);
                assert_eq!(p.es, dialect == Dialect::Es300);
                assert_eq!(p.glsl, Some(dialect.version()));
            }
        }
        assert_eq!(builtin(Dialect::Es300), builtin(Dialect::Es300));
    }

    #[test]
    fn every_declared_attribute_and_uniform_is_used() {
        let programs = builtin(Dialect::DesktopCore330);
        let mut attribute_counts = HashSet::new();
        let mut component_counts = HashSet::new();
        for p in &programs {
            for source in [&p.vertex, &p.fragment] {
                let declared = source.lines().filter_map(|l| {
                    let l = l.trim_end_matches(';');
                    let rest = l
                        .strip_prefix("in ")
                        .or_else(|| l.strip_prefix("uniform "))?;
                    let name = rest.split_whitespace().nth(1)?;
                    Some(name.split('[').next().unwrap_or(name).to_string())
                });
                for name in declared {
                    let uses = source.matches(name.as_str()).count();
                    assert!(uses >= 2, "{}: {name} declared but not used", p.name);
                }
            }
            let attributes: Vec<_> = p.vertex.lines().filter(|l| l.starts_with("in ")).collect();
            attribute_counts.insert(attributes.len());
            for a in attributes {
                component_counts.insert(a.split_whitespace().nth(1).unwrap().to_string());
            }
        }
        // The corpus varies: 1 to 4 attributes, every float type from float to vec4.
        assert_eq!(attribute_counts, HashSet::from([1, 2, 3, 4]));
        let types: HashSet<String> = ["float", "vec2", "vec3", "vec4"].map(String::from).into();
        assert_eq!(component_counts, types);
        assert!(programs.iter().any(|p| p.vertex.contains("uniform mat4")));
        assert!(programs.iter().any(|p| p.vertex.contains("u_offsets[")));
        assert!(programs.iter().any(|p| p.fragment.contains("u_weights[")));
        assert!(programs.iter().any(|p| p.fragment.contains("struct Light")));
    }
}
