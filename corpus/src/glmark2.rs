//! glmark2's shader templates (Debian `glmark2-data`, `/usr/share/glmark2/shaders`) made into
//! the programs glmark2's scenes build from them.
//!
//! The templates have no `#version` and are completed at run time: glmark2 prepends a block of
//! precision macros (`HIGHP_OR_DEFAULT`, `MEDIUMP_OR_DEFAULT`) and, under `#ifdef GL_ES`, default
//! precision statements; scenes add `const` declarations (light positions and colours, material
//! colours, texture steps, convolution kernels) and fill `$TOKEN$` placeholders (`$DO_LIGHTS$`
//! with one `compute_color` call per light, `$CONVOLUTION$` with the sum of kernel taps,
//! `$MAIN$` and `$PROCESS$` with step snippets from the `*.all` files, `$NLOOPS$` with a loop
//! count or a uniform's name). [`load_dir`] reproduces that text generation from what glmark2
//! 2023.01's scene sources do (nothing of glmark2 is copied; the rules are restated here), for
//! every scene of glmark2's default benchmark list and the option values its scenes expose, and
//! then translates each shader into a versioned dialect a core-profile or GLES 3 context accepts.
//!
//! # The translation (GLSL 1.00 / 1.10 style -> [`Dialect`])
//! glmark2 itself passes the text unversioned (GLSL ES 1.00 on GLES 2, GLSL 1.10 on a desktop
//! compatibility context); neither compiles on a core-profile or GLES 3 context. The translation
//! is the one a WebGL 1 implementation makes (ANGLE's GLSL output does the same), and nothing
//! else:
//! * `#version 330 core` ([`Dialect::DesktopCore330`]) or `#version 300 es`
//!   ([`Dialect::Es300`]) is put first. `GL_ES` is then defined exactly on GLES, so glmark2's
//!   own precision block applies there and not on desktop, as in glmark2.
//! * outside comments, the identifiers `attribute` -> `in`; `varying` -> `out` in vertex shaders
//!   and `in` in fragment shaders; `texture2D` -> `texture` (whole identifiers only:
//!   `texture2DBilinear` stays); `gl_FragColor` -> `glmark2_FragColor`, a fragment output
//!   declared right after the `#version` line (`out vec4 glmark2_FragColor;`, with `mediump` on
//!   GLES, where an output needs a precision before the shader's own default precision).
//!
//! Whole sources are compared after translation: programs whose vertex and fragment sources
//! both equal an earlier one's (e.g. the `depth` pass shared by `shadow` and `refract`) are kept
//! once, under the first name.

use std::collections::HashMap;
use std::f32::consts::PI;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::{Dialect, ProgramSource};

/// The largest template file read (glmark2's largest is under 5 KiB).
pub const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

/// What [`load_dir`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glmark2Corpus {
    /// Distinct programs, in the order the scenes are listed, named
    /// `glmark2/<scene>[:option=value...]` after glmark2's benchmark syntax.
    pub programs: Vec<ProgramSource>,
    /// Template files read (`.vert`, `.frag`, `.all`).
    pub templates: usize,
    /// Scene configurations that gave a program an earlier one had already given.
    pub duplicates: usize,
}

/// Why the templates could not be made into programs.
#[derive(Debug, thiserror::Error)]
pub enum Glmark2Error {
    /// The root is not a directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// A template a scene uses is not a regular file there (missing, or a symbolic link).
    #[error("{0}: no such template file (is this glmark2's shaders directory?)")]
    MissingTemplate(PathBuf),
    /// A template could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A template is larger than [`MAX_TEMPLATE_BYTES`].
    #[error("{0}: larger than {MAX_TEMPLATE_BYTES} bytes; not a glmark2 template")]
    TooLarge(PathBuf),
    /// A template is not UTF-8.
    #[error("{0}: not UTF-8")]
    NotUtf8(PathBuf),
    /// A template lacks the placeholder its scene fills (another glmark2 version).
    #[error("template {file} has no {token} placeholder")]
    MissingToken {
        /// The template.
        file: String,
        /// The placeholder, `$...$`.
        token: String,
    },
}

/// Which shader a text is, as glmark2 infers it (`gl_FragColor` first, then `gl_Position`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Vertex,
    Fragment,
    Unknown,
}

/// A shader text being completed, with glmark2's rules for where additions go.
#[derive(Debug, Clone, Default)]
struct Source {
    text: String,
    /// `precision highp float` requested (glmark2's jellyfish fragment shader).
    high_float: bool,
}

impl Source {
    fn new(text: &str) -> Self {
        Source {
            text: text.to_string(),
            high_float: false,
        }
    }

    fn append(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Replaces every occurrence of `token`; the template must have one.
    fn replace(&mut self, file: &str, token: &str, with: &str) -> Result<(), Glmark2Error> {
        if !self.text.contains(token) {
            return Err(Glmark2Error::MissingToken {
                file: file.to_string(),
                token: token.to_string(),
            });
        }
        self.text = self.text.replace(token, with);
        Ok(())
    }

    /// A global declaration: after the line of the last `precision` statement (or after the
    /// `#endif` that closes the block holding it), else at the very start.
    fn add_global(&mut self, declaration: &str) {
        let at = match self.text.rfind("precision") {
            None => 0,
            Some(mut pos) => {
                let next_if = self.text[pos..].find("#if").map(|p| p + pos);
                let next_endif = self.text[pos..].find("#endif").map(|p| p + pos);
                if let Some(endif) = next_endif
                    && next_if.is_none_or(|i| endif < i)
                {
                    pos = endif;
                }
                self.text[pos..]
                    .find('\n')
                    .map_or(self.text.len(), |p| pos + p + 1)
            }
        };
        self.text.insert_str(at, declaration);
    }

    fn add_float(&mut self, name: &str, value: f32) {
        self.add_global(&format!("const float {name} = {value:.6};\n"));
    }

    fn add_vec(&mut self, name: &str, values: &[f32]) {
        let list: Vec<String> = values.iter().map(|v| format!("{v:.6}")).collect();
        let n = values.len();
        self.add_global(&format!(
            "const vec{n} {name} = vec{n}({});\n",
            list.join(", ")
        ));
    }

    fn kind(&self) -> Kind {
        if self.text.contains("gl_FragColor") {
            Kind::Fragment
        } else if self.text.contains("gl_Position") {
            Kind::Vertex
        } else {
            Kind::Unknown
        }
    }

    /// The finished text: the precision macros, the default precisions, then the text.
    fn finish(&self) -> String {
        let kind = self.kind();
        let mut out = String::from("#if defined(GL_ES)");
        if kind == Kind::Fragment {
            out.push_str(" && defined(GL_FRAGMENT_PRECISION_HIGH)");
        }
        out.push_str(
            "\n#define HIGHP_OR_DEFAULT highp\n#else\n#define HIGHP_OR_DEFAULT\n#endif\n\
             #if defined(GL_ES)\n#define MEDIUMP_OR_DEFAULT mediump\n#else\n\
             #define MEDIUMP_OR_DEFAULT\n#endif\n",
        );
        let precision = match (self.high_float, kind) {
            (true, Kind::Fragment) => {
                "#ifdef GL_FRAGMENT_PRECISION_HIGH\nprecision highp float;\n#else\n\
                 precision mediump float;\n#endif\n"
            }
            (true, _) => "precision highp float;\n",
            (false, Kind::Fragment) => "precision mediump float;\n",
            (false, _) => "",
        };
        if !precision.is_empty() {
            out.push_str("#ifdef GL_ES\n");
            out.push_str(precision);
            out.push_str("#endif\n");
        }
        out.push_str(&self.text);
        out
    }
}

/// The template files of a glmark2 shaders directory, read on first use.
struct Templates<'a> {
    root: &'a Path,
    read: HashMap<&'static str, String>,
}

impl Templates<'_> {
    fn get(&mut self, name: &'static str) -> Result<&str, Glmark2Error> {
        if !self.read.contains_key(name) {
            let text = read_template(&self.root.join(name))?;
            self.read.insert(name, text);
        }
        Ok(&self.read[name])
    }

    fn source(&mut self, name: &'static str) -> Result<Source, Glmark2Error> {
        Ok(Source::new(self.get(name)?))
    }
}

fn read_template(path: &Path) -> Result<String, Glmark2Error> {
    let io = |source| Glmark2Error::Io {
        path: path.to_path_buf(),
        source,
    };
    // Not followed: a symbolic link is not a template.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(Glmark2Error::MissingTemplate(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Glmark2Error::MissingTemplate(path.to_path_buf()));
        }
        Err(e) => return Err(io(e)),
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_TEMPLATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_TEMPLATE_BYTES {
        return Err(Glmark2Error::TooLarge(path.to_path_buf()));
    }
    String::from_utf8(bytes).map_err(|_| Glmark2Error::NotUtf8(path.to_path_buf()))
}

/// One program as glmark2 hands it to the driver (before translation).
struct Built {
    name: String,
    vertex: String,
    fragment: String,
}

/// Collects the programs of the scenes.
struct Scenes<'a> {
    t: Templates<'a>,
    out: Vec<Built>,
}

/// glmark2's default window, which sizes the screen-space steps.
const CANVAS: (f32, f32) = (800.0, 600.0);

impl Scenes<'_> {
    fn push(&mut self, name: impl Into<String>, vertex: &Source, fragment: &Source) {
        self.out.push(Built {
            name: name.into(),
            vertex: vertex.finish(),
            fragment: fragment.finish(),
        });
    }

    /// A pair used as the files are, with no additions.
    fn plain(
        &mut self,
        name: &str,
        vertex: &'static str,
        fragment: &'static str,
    ) -> Result<(), Glmark2Error> {
        let v = self.t.source(vertex)?;
        let f = self.t.source(fragment)?;
        self.push(name, &v, &f);
        Ok(())
    }

    /// `light-basic.vert` with a light position and a material colour.
    fn light_basic_vertex(
        &mut self,
        file: &'static str,
        light: [f32; 4],
        diffuse: [f32; 4],
    ) -> Result<Source, Glmark2Error> {
        let mut v = self.t.source(file)?;
        if file == "light-basic-texgen.vert" {
            v.add_float("PI", PI);
        }
        v.add_vec("LightSourcePosition", &light);
        v.add_vec("MaterialDiffuse", &diffuse);
        Ok(v)
    }

    fn build(&mut self) -> Result<(), Glmark2Error> {
        let v = self.light_basic_vertex("light-basic.vert", [20.0, 20.0, 10.0, 1.0], [1.0; 4])?;
        let f = self.t.source("light-basic.frag")?;
        self.push("glmark2/build", &v, &f);
        Ok(())
    }

    fn texture(&mut self) -> Result<(), Glmark2Error> {
        for texgen in [false, true] {
            for bilinear in [false, true] {
                let file = if texgen {
                    "light-basic-texgen.vert"
                } else {
                    "light-basic.vert"
                };
                let v = self.light_basic_vertex(file, [20.0, 20.0, 10.0, 1.0], [1.0; 4])?;
                let f = if bilinear {
                    let mut f = self.t.source("light-basic-tex-bilinear.frag")?;
                    f.add_vec("TextureSize", &[512.0, 512.0]);
                    f
                } else {
                    self.t.source("light-basic-tex.frag")?
                };
                let filter = if bilinear { "linear-shader" } else { "linear" };
                self.push(
                    format!("glmark2/texture:texture-filter={filter}:texgen={texgen}"),
                    &v,
                    &f,
                );
            }
        }
        Ok(())
    }

    fn shading(&mut self) -> Result<(), Glmark2Error> {
        let light = [20.0, 20.0, 10.0, 1.0];
        let diffuse = [0.0, 0.0, 1.0, 1.0];
        let half = half_vector(light);

        let v = self.light_basic_vertex("light-basic.vert", light, diffuse)?;
        let f = self.t.source("light-basic.frag")?;
        self.push("glmark2/shading:shading=gouraud", &v, &f);

        let v = self.t.source("light-advanced.vert")?;
        let mut f = self.t.source("light-advanced.frag")?;
        f.add_vec("LightSourcePosition", &light);
        f.add_vec("LightSourceHalfVector", &half);
        self.push("glmark2/shading:shading=blinn-phong-inf", &v, &f);

        // Phong with 1 to 8 lights (glmark2's `num-lights` option; 1 is the default).
        for lights in 1..=8u32 {
            let v = self.t.source("light-phong.vert")?;
            let mut inner = self.t.source("light-phong.frag")?;
            let theta = 2.0 * PI / lights as f32;
            let phi = theta / 2.0;
            let intensity = 0.8 / lights as f32;
            let mut calls = String::from("    gl_FragColor = vec4(0.0, 0.0, 0.0, 0.0);\n");
            for l in 0..lights {
                let l_f = l as f32;
                let (sin_t, cos_t) = (theta * l_f).sin_cos();
                let (sin_p, cos_p) = (phi * l_f).sin_cos();
                inner.add_vec(
                    &format!("LightSourcePosition{l}"),
                    &[cos_p * sin_t, cos_p * cos_t, sin_p, 1.0],
                );
                inner.add_vec(
                    &format!("LightColor{l}"),
                    &[intensity, intensity, intensity, 1.0],
                );
                let _ = writeln!(
                    calls,
                    "    gl_FragColor += compute_color(LightSourcePosition{l}, LightColor{l});"
                );
            }
            inner.replace("light-phong.frag", "$DO_LIGHTS$", &calls)?;
            // The scene completes this text once, then appends it to a fresh source and adds
            // the material colour: the precision block appears twice, as in glmark2.
            let mut f = Source::default();
            f.append(&inner.finish());
            f.add_vec("MaterialDiffuse", &diffuse);
            self.push(
                format!("glmark2/shading:shading=phong:num-lights={lights}"),
                &v,
                &f,
            );
        }

        let v = self.t.source("light-phong.vert")?;
        let f = self.t.source("light-cel.frag")?;
        self.push("glmark2/shading:shading=cel", &v, &f);
        Ok(())
    }

    fn bump(&mut self) -> Result<(), Glmark2Error> {
        let light = [20.0, 20.0, 10.0, 1.0];
        let half = half_vector(light);
        for (render, stem) in [
            ("high-poly", "bump-poly"),
            ("normals", "bump-normals"),
            ("normals-tangent", "bump-normals-tangent"),
            ("height", "bump-height"),
        ] {
            let (vert, frag) = stage_files(stem);
            let v = self.t.source(vert)?;
            let mut f = self.t.source(frag)?;
            f.add_vec("LightSourcePosition", &light);
            f.add_vec("LightSourceHalfVector", &half);
            if render == "height" {
                f.add_float("TextureStepX", 1.0 / 1024.0);
                f.add_float("TextureStepY", 1.0 / 1024.0);
            }
            self.push(format!("glmark2/bump:bump-render={render}"), &v, &f);
        }
        Ok(())
    }

    fn effect2d(&mut self) -> Result<(), Glmark2Error> {
        // glmark2's two default kernels, then common ones its `kernel` option is used with.
        let kernels = [
            "0,1,0;1,-4,1;0,1,0;",
            "1,1,1,1,1;1,1,1,1,1;1,1,1,1,1;",
            "1,1,1;1,1,1;1,1,1;",
            "0,-1,0;-1,5,-1;0,-1,0;",
            "1,2,1;2,4,2;1,2,1;",
            "-1,-1,-1;-1,8,-1;-1,-1,-1;",
            "1,4,6,4,1;4,16,24,16,4;6,24,36,24,6;4,16,24,16,4;1,4,6,4,1;",
        ];
        for kernel in kernels {
            let (mut values, width, height) = parse_kernel(kernel);
            normalize_kernel(&mut values);
            let v = self.t.source("effect-2d.vert")?;
            let mut inner = self.t.source("effect-2d-convolution.frag")?;
            inner.add_float("TextureStepX", 1.0 / CANVAS.0);
            inner.add_float("TextureStepY", 1.0 / CANVAS.1);
            let mut defs = String::new();
            let mut sum = String::from("result = ");
            for (i, k) in values.iter().enumerate() {
                let _ = writeln!(defs, "const float Kernel{i} = {k:.6};");
                let x = (i % width) as i64 - (width as i64 - 1) / 2;
                let y = -((i / width) as i64 - (height as i64 - 1) / 2);
                let _ = write!(
                    sum,
                    "texture2D(Texture0, TextureCoord + vec2({:.1} * TextureStepX, {:.1} * \
                     TextureStepY)) * Kernel{i}",
                    x as f32, y as f32
                );
                if i + 1 != values.len() {
                    sum.push_str(" +\n");
                }
            }
            sum.push_str(";\n");
            inner.add_global(&defs);
            inner.replace("effect-2d-convolution.frag", "$CONVOLUTION$", &sum)?;
            let mut f = Source::default();
            f.append(&inner.finish());
            self.push(format!("glmark2/effect2d:kernel={kernel}"), &v, &f);
        }
        Ok(())
    }

    fn pulsar(&mut self) -> Result<(), Glmark2Error> {
        for light in [false, true] {
            for texture in [false, true] {
                let mut v = self.t.source(if light {
                    "pulsar-light.vert"
                } else {
                    "pulsar.vert"
                })?;
                if light {
                    v.add_vec("LightSourcePosition", &[-20.0, 20.0, -20.0, 1.0]);
                }
                let f = self.t.source(if texture {
                    "light-basic-tex.frag"
                } else {
                    "light-basic.frag"
                })?;
                self.push(
                    format!("glmark2/pulsar:quads=5:texture={texture}:light={light}"),
                    &v,
                    &f,
                );
            }
        }
        Ok(())
    }

    fn desktop(&mut self) -> Result<(), Glmark2Error> {
        self.plain(
            "glmark2/desktop:effect=shadow",
            "desktop.vert",
            "desktop.frag",
        )?;
        // Blur radius 5 is the default; separable blurs take a horizontal and a vertical pass.
        for radius in [3u32, 5, 8] {
            for direction in [Direction::Horizontal, Direction::Vertical, Direction::Both] {
                let v = self.t.source("desktop.vert")?;
                let mut f = self.t.source("desktop-blur.frag")?;
                let sigma = (radius as f32 / 3.0).max(1.0);
                for i in 0..=radius {
                    f.add_float(&format!("Kernel{i}"), gaussian(i, sigma));
                }
                let conv = blur_sum(radius, direction, "TextureStepX", "TextureStepY");
                f.replace("desktop-blur.frag", "$CONVOLUTION$", &conv)?;
                if direction != Direction::Vertical {
                    f.add_float("TextureStepX", 1.0 / CANVAS.0);
                }
                if direction != Direction::Horizontal {
                    f.add_float("TextureStepY", 1.0 / CANVAS.1);
                }
                let separable = direction != Direction::Both;
                self.push(
                    format!(
                        "glmark2/desktop:effect=blur:blur-radius={radius}:separable={separable}{}",
                        direction.suffix()
                    ),
                    &v,
                    &f,
                );
            }
        }
        Ok(())
    }

    fn terrain(&mut self) -> Result<(), Glmark2Error> {
        self.plain("glmark2/terrain", "terrain.vert", "terrain.frag")?;
        for (what, frag) in [
            ("height-map", "terrain-noise.frag"),
            ("normal-map", "terrain-normalmap.frag"),
            ("specular-map", "terrain-luminance.frag"),
            ("overlay", "terrain-overlay.frag"),
        ] {
            self.plain(
                &format!("glmark2/terrain#{what}"),
                "terrain-texture.vert",
                frag,
            )?;
        }
        // Bloom (radius 2, sigma 4) and tilt-shift (radius 4, sigma 2.7) blurs.
        let blurs = [
            (
                "bloom-h",
                2,
                4.0,
                Direction::Horizontal,
                1.0 / CANVAS.0,
                0.0,
            ),
            ("bloom-v", 2, 4.0, Direction::Vertical, 1.0 / 256.0, 0.0),
            ("tilt-h", 4, 2.7, Direction::Horizontal, 1.0 / CANVAS.0, 0.5),
            ("tilt-v", 4, 2.7, Direction::Vertical, 1.0 / CANVAS.1, 0.5),
        ];
        for (what, radius, sigma, direction, step, tilt) in blurs {
            let v = self.t.source("terrain-texture.vert")?;
            let mut f = self.t.source("terrain-blur.frag")?;
            let sigma: f32 = f32::max(sigma, 1.0);
            let values: Vec<f32> = (0..=radius).map(|i| gaussian(i, sigma)).collect();
            let mut sum: f32 = values.iter().sum();
            sum += sum - values[0];
            for (i, k) in values.iter().enumerate() {
                f.add_float(&format!("Kernel{i}"), k / sum);
            }
            f.add_float("TiltShift", tilt);
            let mut conv = String::new();
            for (axis, d) in [("X", Direction::Horizontal), ("Y", Direction::Vertical)] {
                if direction == d || direction == Direction::Both {
                    if tilt == 1.0 {
                        let _ = writeln!(conv, "const float step{axis} = TextureStep{axis};");
                    } else {
                        let _ = writeln!(
                            conv,
                            "float step{axis} = TextureStep{axis} * abs(TiltShift - \
                             TextureCoord.y) / abs(1.0 - TiltShift);"
                        );
                    }
                }
            }
            conv.push_str(&blur_sum(radius, direction, "stepX", "stepY"));
            f.replace("terrain-blur.frag", "$CONVOLUTION$", &conv)?;
            match direction {
                Direction::Horizontal => f.add_float("TextureStepX", step),
                _ => f.add_float("TextureStepY", step),
            }
            self.push(format!("glmark2/terrain#{what}"), &v, &f);
        }
        Ok(())
    }

    fn shadow_and_refract(&mut self) -> Result<(), Glmark2Error> {
        self.plain("glmark2/shadow#depth", "depth.vert", "depth.frag")?;
        let mut v = self.t.source("shadow.vert")?;
        v.add_vec("MaterialDiffuse", &[0.3, 0.3, 0.3, 1.0]);
        let f = self.t.source("shadow.frag")?;
        self.push("glmark2/shadow", &v, &f);
        let v = self.light_basic_vertex("light-basic.vert", [0.0, 3.0, 2.0, 1.0], [1.0; 4])?;
        let f = self.t.source("light-basic.frag")?;
        self.push("glmark2/shadow#ground", &v, &f);

        self.plain("glmark2/refract#depth", "depth.vert", "depth.frag")?;
        for index in [1.2f32, 1.5] {
            let v = self.t.source("light-refract.vert")?;
            let mut f = self.t.source("light-refract.frag")?;
            f.add_vec("LightColor", &[0.4, 0.4, 0.4, 1.0]);
            f.add_vec("LightSourcePosition", &[1.0, 1.0, 2.0, 1.0]);
            f.add_float("RefractiveIndex", index);
            self.push(format!("glmark2/refract:index={index}"), &v, &f);
        }
        Ok(())
    }

    fn others(&mut self) -> Result<(), Glmark2Error> {
        self.plain(
            "glmark2/buffer",
            "buffer-wireframe.vert",
            "buffer-wireframe.frag",
        )?;
        for stem in [
            "ideas-lamp-lit",
            "ideas-lamp-unlit",
            "ideas-logo",
            "ideas-logo-flat",
            "ideas-logo-shadow",
            "ideas-table",
            "ideas-paper",
            "ideas-text",
            "ideas-under-table",
        ] {
            let (vert, frag) = stage_files(stem);
            self.plain(&format!("glmark2/ideas#{}", &stem[6..]), vert, frag)?;
        }
        self.plain(
            "glmark2/jellyfish#gradient",
            "gradient.vert",
            "gradient.frag",
        )?;
        let v = self.t.source("jellyfish.vert")?;
        let mut f = self.t.source("jellyfish.frag")?;
        f.high_float = true;
        self.push("glmark2/jellyfish", &v, &f);
        self.plain(
            "glmark2/text-renderer",
            "text-renderer.vert",
            "text-renderer.frag",
        )
    }

    /// `$MAIN$` filled with `steps` copies of a snippet, completed as glmark2 completes the
    /// snippet's own source (the precision macros come along, mid-function).
    fn steps(&mut self, snippet: &'static str, steps: u32) -> Result<String, Glmark2Error> {
        let mut main = Source::default();
        for _ in 0..steps {
            main.append(self.t.get(snippet)?);
        }
        Ok(main.finish())
    }

    fn conditionals(&mut self) -> Result<(), Glmark2Error> {
        for (vs, fs) in grid_steps() {
            for (vc, fc) in [(true, true), (false, false), (true, false), (false, true)] {
                // Steps of 0 make the conditionals flag moot: keep one of each.
                if (vs == 0 && !vc) || (fs == 0 && !fc) {
                    continue;
                }
                let step = |c| {
                    if c {
                        "conditionals-step-conditional.all"
                    } else {
                        "conditionals-step-simple.all"
                    }
                };
                let mut v = self.t.source("conditionals.vert")?;
                let main = self.steps(step(vc), vs)?;
                v.replace("conditionals.vert", "$MAIN$", &main)?;
                let mut f = self.t.source("conditionals.frag")?;
                let main = self.steps(step(fc), fs)?;
                f.replace("conditionals.frag", "$MAIN$", &main)?;
                self.push(
                    format!(
                        "glmark2/conditionals:vertex-steps={vs}:fragment-steps={fs}:\
                         vertex-conditionals={vc}:fragment-conditionals={fc}"
                    ),
                    &v,
                    &f,
                );
            }
        }
        Ok(())
    }

    fn function_stage(
        &mut self,
        file: &'static str,
        steps: u32,
        function: bool,
        complexity: &str,
    ) -> Result<Source, Glmark2Error> {
        let step = if complexity == "low" {
            "function-step-low.all"
        } else {
            "function-step-medium.all"
        };
        let mut s = self.t.source(file)?;
        let main = self.steps(if function { "function-call.all" } else { step }, steps)?;
        let process = if function {
            self.t.get(step)?.to_string()
        } else {
            String::new()
        };
        s.replace(file, "$PROCESS$", &process)?;
        s.replace(file, "$MAIN$", &main)?;
        Ok(s)
    }

    fn function(&mut self) -> Result<(), Glmark2Error> {
        for (vs, fs) in grid_steps() {
            for function in [true, false] {
                for complexity in ["low", "medium"] {
                    let v = self.function_stage("function.vert", vs, function, complexity)?;
                    let f = self.function_stage("function.frag", fs, function, complexity)?;
                    self.push(
                        format!(
                            "glmark2/function:vertex-steps={vs}:fragment-steps={fs}:\
                             function={function}:complexity={complexity}"
                        ),
                        &v,
                        &f,
                    );
                }
            }
        }
        Ok(())
    }

    fn loop_stage(
        &mut self,
        file: &'static str,
        steps: u32,
        looped: bool,
        uniform: &str,
    ) -> Result<Source, Glmark2Error> {
        let mut s = self.t.source(file)?;
        let main = if looped {
            let mut body = self.t.source("loop-step-loop.all")?;
            let count = if uniform.is_empty() {
                steps.to_string()
            } else {
                uniform.to_string()
            };
            body.replace("loop-step-loop.all", "$NLOOPS$", &count)?;
            body.finish()
        } else {
            self.steps("loop-step-simple.all", steps)?
        };
        s.replace(file, "$MAIN$", &main)?;
        Ok(s)
    }

    fn loops(&mut self) -> Result<(), Glmark2Error> {
        for (vs, fs) in grid_steps() {
            for (looped, uniform) in [(false, false), (true, false), (true, true)] {
                let v = self.loop_stage(
                    "loop.vert",
                    vs,
                    looped,
                    if uniform { "VertexLoops" } else { "" },
                )?;
                let f = self.loop_stage(
                    "loop.frag",
                    fs,
                    looped,
                    if uniform { "FragmentLoops" } else { "" },
                )?;
                self.push(
                    format!(
                        "glmark2/loop:vertex-steps={vs}:fragment-steps={fs}:loop={looped}:\
                         uniform={uniform}"
                    ),
                    &v,
                    &f,
                );
            }
        }
        Ok(())
    }
}

/// The (vertex, fragment) step counts of the grid scenes: glmark2's defaults (1, 1) and the
/// values its default benchmark list uses (0 and 5).
fn grid_steps() -> [(u32, u32); 5] {
    [(1, 1), (0, 0), (0, 5), (5, 0), (5, 5)]
}

fn stage_files(stem: &'static str) -> (&'static str, &'static str) {
    const PAIRS: &[(&str, &str, &str)] = &[
        ("bump-poly", "bump-poly.vert", "bump-poly.frag"),
        ("bump-normals", "bump-normals.vert", "bump-normals.frag"),
        (
            "bump-normals-tangent",
            "bump-normals-tangent.vert",
            "bump-normals-tangent.frag",
        ),
        ("bump-height", "bump-height.vert", "bump-height.frag"),
        (
            "ideas-lamp-lit",
            "ideas-lamp-lit.vert",
            "ideas-lamp-lit.frag",
        ),
        (
            "ideas-lamp-unlit",
            "ideas-lamp-unlit.vert",
            "ideas-lamp-unlit.frag",
        ),
        ("ideas-logo", "ideas-logo.vert", "ideas-logo.frag"),
        (
            "ideas-logo-flat",
            "ideas-logo-flat.vert",
            "ideas-logo-flat.frag",
        ),
        (
            "ideas-logo-shadow",
            "ideas-logo-shadow.vert",
            "ideas-logo-shadow.frag",
        ),
        ("ideas-table", "ideas-table.vert", "ideas-table.frag"),
        ("ideas-paper", "ideas-paper.vert", "ideas-paper.frag"),
        ("ideas-text", "ideas-text.vert", "ideas-text.frag"),
        (
            "ideas-under-table",
            "ideas-under-table.vert",
            "ideas-under-table.frag",
        ),
    ];
    let (_, v, f) = PAIRS
        .iter()
        .find(|(s, _, _)| *s == stem)
        .expect("every stem used is listed");
    (v, f)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Horizontal,
    Vertical,
    Both,
}

impl Direction {
    fn suffix(self) -> &'static str {
        match self {
            Direction::Horizontal => "#horizontal",
            Direction::Vertical => "#vertical",
            Direction::Both => "",
        }
    }
}

/// The Gaussian weight of tap `i`.
fn gaussian(i: u32, sigma: f32) -> f32 {
    let s2 = 2.0 * sigma * sigma;
    let i = i as f32;
    1.0 / (PI * s2).sqrt() * (-(i * i) / s2).exp()
}

/// glmark2's blur sum (`result = ` and one texture tap per kernel weight).
fn blur_sum(radius: u32, direction: Direction, step_x: &str, step_y: &str) -> String {
    let r = radius as i64;
    let mut s = String::from("result = \n");
    match direction {
        Direction::Horizontal | Direction::Vertical => {
            for offset in -r..=r {
                let at = if direction == Direction::Horizontal {
                    format!("{offset}.0 * {step_x}, 0.0")
                } else {
                    format!("0.0, {offset}.0 * {step_y}")
                };
                let _ = writeln!(
                    s,
                    "texture2D(Texture0, TextureCoord + vec2({at})) * Kernel{} +",
                    offset.abs()
                );
            }
            s.push_str("0.0 ;\n");
        }
        Direction::Both => {
            for i in -r..=r {
                for j in -r..=r {
                    let _ = writeln!(
                        s,
                        "texture2D(Texture0, TextureCoord + vec2({i}.0 * {step_x}, {j}.0 * \
                         {step_y})) * Kernel{} * Kernel{} +",
                        i.abs(),
                        j.abs()
                    );
                }
            }
            s.push_str(" 0.0;\n");
        }
    }
    s
}

/// `a,b;c,d;` -> values in row order, width, height.
fn parse_kernel(text: &str) -> (Vec<f32>, usize, usize) {
    let rows: Vec<Vec<f32>> = text
        .split(';')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            r.split(',')
                .map(|v| v.trim().parse().expect("the kernels listed here parse"))
                .collect()
        })
        .collect();
    let width = rows[0].len();
    let height = rows.len();
    (rows.concat(), width, height)
}

/// glmark2's `normalize=true`: divide by the sum, or by the sum of the positive weights when
/// the weights sum to zero.
fn normalize_kernel(kernel: &mut [f32]) {
    let mut sum: f32 = kernel.iter().sum();
    if sum.abs() < 1e-8 {
        sum = kernel.iter().filter(|k| **k > 0.0).sum();
    }
    if sum != 0.0 {
        for k in kernel.iter_mut() {
            *k /= sum;
        }
    }
}

/// normalize(normalize(light.xyz) + (0, 0, 1)).
fn half_vector(light: [f32; 4]) -> [f32; 3] {
    let norm = |v: [f32; 3]| {
        let len = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        [v[0] / len, v[1] / len, v[2] / len]
    };
    let l = norm([light[0], light[1], light[2]]);
    norm([l[0], l[1], l[2] + 1.0])
}

/// Which stage a text is, for the translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Vertex,
    Fragment,
}

/// The fragment output that stands for `gl_FragColor`.
pub const FRAG_COLOR: &str = "glmark2_FragColor";

/// Translates one completed glmark2 shader into `dialect` (see the module docs).
fn translate(text: &str, stage: Stage, dialect: Dialect) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(match dialect {
        Dialect::DesktopCore330 => "#version 330 core\n",
        Dialect::Es300 => "#version 300 es\n",
    });
    if stage == Stage::Fragment {
        match dialect {
            Dialect::DesktopCore330 => out.push_str("out vec4 "),
            Dialect::Es300 => out.push_str("out mediump vec4 "),
        }
        out.push_str(FRAG_COLOR);
        out.push_str(";\n");
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            i += end;
        } else if let Some(comment) = rest.strip_prefix("/*") {
            let end = comment.find("*/").map_or(rest.len(), |p| p + 4);
            out.push_str(&rest[..end]);
            i += end;
        } else if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            out.push_str(match (word, stage) {
                ("attribute", _) => "in",
                ("varying", Stage::Vertex) => "out",
                ("varying", Stage::Fragment) => "in",
                ("texture2D", _) => "texture",
                ("gl_FragColor", _) => FRAG_COLOR,
                _ => word,
            });
            i += end;
        } else if bytes[i].is_ascii_digit() {
            // A number (`1e5`, `2.0f`): copied whole, so its letters are not identifiers.
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
                .unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            i += end;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Makes glmark2's programs from its shaders directory (`.../glmark2/shaders`, e.g.
/// `target/corpora/glmark2/shaders` after `scripts/fetch-corpus glmark2`), in `dialect`.
///
/// Deterministic: the same templates give the same programs in the same order. Reads only the
/// template files the scenes name (regular files, not symbolic links, at most
/// [`MAX_TEMPLATE_BYTES`] each).
pub fn load_dir(root: &Path, dialect: Dialect) -> Result<Glmark2Corpus, Glmark2Error> {
    if !root.is_dir() {
        return Err(Glmark2Error::NotADirectory(root.to_path_buf()));
    }
    let mut scenes = Scenes {
        t: Templates {
            root,
            read: HashMap::new(),
        },
        out: Vec::new(),
    };
    scenes.build()?;
    scenes.texture()?;
    scenes.shading()?;
    scenes.bump()?;
    scenes.effect2d()?;
    scenes.pulsar()?;
    scenes.desktop()?;
    scenes.others()?;
    scenes.terrain()?;
    scenes.shadow_and_refract()?;
    scenes.conditionals()?;
    scenes.function()?;
    scenes.loops()?;

    let templates = scenes.t.read.len();
    let built = scenes.out.len();
    let mut seen = std::collections::HashSet::new();
    let mut programs = Vec::new();
    for b in scenes.out {
        let vertex = translate(&b.vertex, Stage::Vertex, dialect);
        let fragment = translate(&b.fragment, Stage::Fragment, dialect);
        if seen.insert((vertex.clone(), fragment.clone())) {
            programs.push(ProgramSource {
                name: b.name,
                vertex,
                fragment,
                glsl: Some(dialect.version()),
                es: dialect == Dialect::Es300,
                ..ProgramSource::default()
            });
        }
    }
    Ok(Glmark2Corpus {
        duplicates: built - programs.len(),
        programs,
        templates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translation_maps_whole_identifiers_outside_comments() {
        let vertex = "attribute vec3 position; // attribute varying\nvarying vec2 uv;\n\
                      /* varying\ntexture2D */ vec4 t = texture2D(s, uv) + texture2DBilinear(s);\n\
                      float x = 1e5; vec2 attribute_x;\n";
        let out = translate(vertex, Stage::Vertex, Dialect::DesktopCore330);
        assert_eq!(
            out,
            "#version 330 core\nin vec3 position; // attribute varying\nout vec2 uv;\n\
             /* varying\ntexture2D */ vec4 t = texture(s, uv) + texture2DBilinear(s);\n\
             float x = 1e5; vec2 attribute_x;\n"
        );
        let fragment = "varying vec2 uv;\nvoid main() { gl_FragColor = vec4(uv, 0.0, 1.0); }\n";
        assert_eq!(
            translate(fragment, Stage::Fragment, Dialect::Es300),
            "#version 300 es\nout mediump vec4 glmark2_FragColor;\nin vec2 uv;\n\
             void main() { glmark2_FragColor = vec4(uv, 0.0, 1.0); }\n"
        );
        assert!(
            translate(fragment, Stage::Fragment, Dialect::DesktopCore330)
                .starts_with("#version 330 core\nout vec4 glmark2_FragColor;\n")
        );
    }

    #[test]
    fn globals_go_after_the_last_precision_block_else_first() {
        let mut s = Source::new("uniform float a;\n");
        s.add_float("A", 1.0);
        s.add_vec("B", &[0.5, 2.0]);
        // Each addition goes to the very start: the later one comes first.
        assert_eq!(
            s.text,
            "const vec2 B = vec2(0.500000, 2.000000);\nconst float A = 1.000000;\nuniform float a;\n"
        );
        let mut s = Source::new(
            "#ifdef GL_ES\nprecision mediump float;\n#endif\n#if X\n#endif\nvoid main() {}\n",
        );
        s.add_float("K", 0.25);
        assert_eq!(
            s.text,
            "#ifdef GL_ES\nprecision mediump float;\n#endif\nconst float K = 0.250000;\n\
             #if X\n#endif\nvoid main() {}\n"
        );
        // A precision statement outside a block: the next line.
        let mut s = Source::new("precision highp float;\nvoid main() {}\n");
        s.add_float("K", 1.0);
        assert_eq!(
            s.text,
            "precision highp float;\nconst float K = 1.000000;\nvoid main() {}\n"
        );
    }

    #[test]
    fn finish_adds_the_precision_block_glmark2_adds() {
        let v = Source::new("void main() { gl_Position = vec4(0.0); }\n").finish();
        assert!(v.starts_with("#if defined(GL_ES)\n#define HIGHP_OR_DEFAULT highp\n"));
        assert!(!v.contains("precision"), "{v}");
        let f = Source::new("void main() { gl_FragColor = vec4(0.0); }\n").finish();
        assert!(f.starts_with("#if defined(GL_ES) && defined(GL_FRAGMENT_PRECISION_HIGH)\n"));
        assert!(f.contains("#ifdef GL_ES\nprecision mediump float;\n#endif\nvoid main()"));
        let mut high = Source::new("void main() { gl_FragColor = vec4(0.0); }\n");
        high.high_float = true;
        assert!(high.finish().contains(
            "#ifdef GL_ES\n#ifdef GL_FRAGMENT_PRECISION_HIGH\nprecision highp float;\n#else\n\
             precision mediump float;\n#endif\n#endif\n"
        ));
        // A snippet (neither stage): macros only.
        let snippet = Source::new("d = 1.0;\n").finish();
        assert!(snippet.starts_with("#if defined(GL_ES)\n#define HIGHP"));
        assert!(snippet.ends_with("#endif\nd = 1.0;\n"));
    }

    #[test]
    fn kernels_blurs_and_vectors_follow_glmark2s_arithmetic() {
        let (mut k, w, h) = parse_kernel("0,1,0;1,-4,1;0,1,0;");
        assert_eq!((w, h), (3, 3));
        normalize_kernel(&mut k);
        // Zero-sum: divided by the sum of the positive weights.
        assert_eq!(k, [0.0, 0.25, 0.0, 0.25, -1.0, 0.25, 0.0, 0.25, 0.0]);
        let (mut k, _, _) = parse_kernel("1,1;1,1;");
        normalize_kernel(&mut k);
        assert_eq!(k, [0.25; 4]);
        let sum = blur_sum(1, Direction::Horizontal, "sx", "sy");
        assert_eq!(
            sum,
            "result = \ntexture2D(Texture0, TextureCoord + vec2(-1.0 * sx, 0.0)) * Kernel1 +\n\
             texture2D(Texture0, TextureCoord + vec2(0.0 * sx, 0.0)) * Kernel0 +\n\
             texture2D(Texture0, TextureCoord + vec2(1.0 * sx, 0.0)) * Kernel1 +\n0.0 ;\n"
        );
        assert_eq!(
            blur_sum(2, Direction::Both, "x", "y")
                .matches("texture2D")
                .count(),
            25
        );
        let g0 = gaussian(0, 1.0);
        assert!((g0 - 1.0 / (2.0 * PI).sqrt()).abs() < 1e-6);
        let h = half_vector([0.0, 0.0, 5.0, 1.0]);
        assert_eq!(h, [0.0, 0.0, 1.0]);
    }

    #[test]
    fn a_missing_directory_or_template_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            load_dir(&dir.path().join("nope"), Dialect::DesktopCore330),
            Err(Glmark2Error::NotADirectory(_))
        ));
        let err = load_dir(dir.path(), Dialect::DesktopCore330).unwrap_err();
        assert!(
            matches!(&err, Glmark2Error::MissingTemplate(p) if p.ends_with("light-basic.vert")),
            "{err}"
        );
    }

    #[test]
    fn unusable_template_files_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_template(&path),
            Err(Glmark2Error::NotUtf8(_))
        ));
        std::fs::write(&path, vec![b' '; MAX_TEMPLATE_BYTES as usize + 1]).unwrap();
        assert!(matches!(
            read_template(&path),
            Err(Glmark2Error::TooLarge(_))
        ));
        std::fs::write(&path, vec![b' '; MAX_TEMPLATE_BYTES as usize]).unwrap();
        assert_eq!(
            read_template(&path).unwrap().len(),
            MAX_TEMPLATE_BYTES as usize
        );
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert!(matches!(
            read_template(&dir.path().join("d")),
            Err(Glmark2Error::MissingTemplate(_))
        ));
        #[cfg(unix)]
        {
            let link = dir.path().join("l");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            assert!(matches!(
                read_template(&link),
                Err(Glmark2Error::MissingTemplate(_))
            ));
        }
        let mut s = Source::new("no token here");
        let err = s.replace("x.frag", "$MAIN$", "").unwrap_err();
        assert_eq!(err.to_string(), "template x.frag has no $MAIN$ placeholder");
    }
}
