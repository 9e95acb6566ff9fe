//! `gpusvc vcache plot`: two plots, each as SVG and PNG (`plotters`):
//!
//! * `vcache-staircase.{svg,png}`: `k` triangles `0 1 2` in one draw for `k` = 1..=K;
//!   invocations against index count, measured on this driver (points) and simulated by the
//!   fitted model, its runners-up from the model file and classic models (lines).
//! * `vcache-optimizers.{svg,png}`: ACMR of each mesh under the fitted model for the input
//!   order, meshoptimizer's `optimize_vertex_cache`, Tipsify and ours (`vertex_cache::optimize`).
//!
//! **Text in PNGs.** The bitmap backend draws text with `ab_glyph` from a TrueType font read at
//! run time: `$GPUSVC_PLOT_FONT` when set, else the first of DejaVu Sans (Debian
//! `fonts-dejavu-core`), Liberation Sans, FreeSans or Noto Sans found under /usr/share/fonts. No
//! system font library (fontconfig, freetype) is used. With no font found, both plots are drawn
//! without text (axes, points, lines and bars only) and a note says so on stderr. SVGs carry
//! their text as SVG text, drawn by the viewer; the font is only used to measure it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use vertex_cache::battery::Probe;
use vertex_cache::measure::{DrawOptions, Measurer};
use vertex_cache::optimize_with_report;
use vertex_cache::{Mesh, Model};

use super::model_file::{ModelFile, default_path};
use super::{ModelArg, VcacheError, f3, load_mesh, open_context, print, view};

/// `gpusvc vcache plot`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct PlotArgs {
    /// Folder for the four files (created when missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) out: PathBuf,
    /// The fitted model: a text form or @FILE. Default: the model file `gpusvc vcache fit`
    /// saves by default ($XDG_CACHE_HOME/gpusvc/vcache/model.txt, else
    /// ~/.cache/gpusvc/vcache/model.txt); its runners-up are drawn too.
    #[arg(long, value_name = "M")]
    pub(crate) model: Option<ModelArg>,
    /// A mesh for the optimizer plot (repeat for more). Default: the fetched corpus meshes
    /// that are present (teapot, bunny, dragon res4) and a shuffled 64x64 grid.
    #[arg(long = "mesh", value_name = "MESH")]
    pub(crate) meshes: Vec<PathBuf>,
    /// The staircase goes up to this many triangles.
    #[arg(long, default_value_t = 400, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub(crate) staircase: u32,
}

/// Models drawn beside the fitted one on the staircase, when they parse.
const CLASSIC: [&str; 3] = ["fifo:16", "nvidia:96,32,0", "amd:384,16"];
/// Runners-up from the model file drawn on the staircase.
const RUNNERS_UP: usize = 3;
const SIZE: (u32, u32) = (960, 560);

/// Font files tried for PNG text, in order.
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Registers a font for plotters' `sans-serif`; returns its path, or `None` (draw no text).
fn register_font() -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os("GPUSVC_PLOT_FONT") {
        Some(p) if !p.is_empty() => vec![PathBuf::from(p)],
        _ => FONTS.iter().map(PathBuf::from).collect(),
    };
    for path in candidates {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        // plotters keeps fonts for the life of the process: the bytes are leaked once.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
            return Some(path);
        }
    }
    None
}

/// The fitted model and the others to draw.
fn models(arg: Option<&ModelArg>) -> Result<(Model, Vec<Model>), VcacheError> {
    let file = match arg {
        Some(ModelArg::Text(_)) => None,
        Some(ModelArg::File(p)) => Some(ModelFile::read(p)?),
        None => {
            let path = default_path().filter(|p| p.exists()).ok_or_else(|| {
                VcacheError::Other(
                    "no fitted model: run `gpusvc vcache fit` first, or give --model".into(),
                )
            })?;
            Some(ModelFile::read(&path)?)
        }
    };
    let fitted = match (arg, &file) {
        (Some(a @ ModelArg::Text(_)), _) => a.resolve()?,
        (_, Some(f)) => f.model,
        (_, None) => unreachable!("a file or a text"),
    };
    let mut others: Vec<Model> = Vec::new();
    if let Some(f) = &file {
        others.extend(f.runners_up.iter().take(RUNNERS_UP).map(|r| r.0));
    }
    others.extend(CLASSIC.iter().filter_map(|t| t.parse::<Model>().ok()));
    let mut seen = vec![fitted];
    others.retain(|m| {
        let new = !seen.contains(m);
        seen.push(*m);
        new
    });
    Ok((fitted, others))
}

/// One staircase series: (index count, invocations) per step.
type Series = Vec<(u32, u64)>;

/// One mesh's ACMR for input, meshopt, Tipsify, ours.
#[derive(Debug, Clone)]
struct MeshRow {
    name: String,
    acmr: [f64; 4],
}

const ORDERS: [&str; 4] = ["input", "meshopt", "Tipsify", "ours"];

fn row(name: String, mesh: &Mesh<'_>, model: &Model) -> MeshRow {
    let r = optimize_with_report(mesh, model);
    let t = mesh.triangles() as f64;
    let inv = |c| {
        r.invocations
            .iter()
            .find(|(x, _)| *x == c)
            .map_or(0, |p| p.1)
    };
    use vertex_cache::Choice;
    // The result itself (a refined order may beat every candidate as it was).
    let ours = Mesh::new(&r.indices, mesh.vertex_count()).map_or(0, |m| model.invocations(&m));
    MeshRow {
        name,
        acmr: [
            inv(Choice::Input) as f64 / t,
            inv(Choice::Meshopt) as f64 / t,
            inv(Choice::Tipsify) as f64 / t,
            ours as f64 / t,
        ],
    }
}

fn mesh_rows(args: &PlotArgs, model: &Model) -> Result<Vec<MeshRow>, VcacheError> {
    let mut rows = Vec::new();
    if args.meshes.is_empty() {
        for name in ["teapot", "bunny", "dragon-res4"] {
            if let Some(p) = mesh_io::corpus::path(name).filter(|p| p.exists()) {
                let mesh = load_mesh(&p)?;
                rows.push(row(name.to_owned(), &view(&mesh), model));
            }
        }
        let grid = Probe::grid(64, 64).shuffled(1);
        rows.push(row("grid 64x64 shuffled".into(), &grid.mesh(), model));
    } else {
        for p in &args.meshes {
            let mesh = load_mesh(p)?;
            let name = p
                .file_name()
                .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into());
            rows.push(row(name, &view(&mesh), model));
        }
    }
    Ok(rows)
}

pub(crate) fn run(args: &PlotArgs) -> Result<(), VcacheError> {
    let (fitted, others) = models(args.model.as_ref())?;
    let meshes = mesh_rows(args, &fitted)?;
    let ctx = open_context()?;
    let measurer = Measurer::new(&ctx).map_err(|e| VcacheError::Other(e.to_string()))?;
    let mut measured: Series = Vec::new();
    let mut simulated: Vec<(Model, Series)> = std::iter::once(fitted)
        .chain(others.iter().copied())
        .map(|m| (m, Vec::new()))
        .collect();
    for k in 1..=args.staircase {
        let probe = Probe::staircase(k);
        let mesh = probe.mesh();
        let m = measurer
            .measure(&mesh, DrawOptions::default())
            .map_err(|e| VcacheError::Other(format!("staircase {k}: {e}")))?;
        measured.push((3 * k, m.total()));
        for (model, series) in &mut simulated {
            series.push((3 * k, model.invocations(&mesh)));
        }
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| VcacheError::Other(format!("cannot create {}: {e}", args.out.display())))?;
    let font = register_font();
    let text = font.is_some();
    if !text {
        eprintln!(
            "gpusvc vcache plot: no TrueType font found (tried $GPUSVC_PLOT_FONT or {}): plots \
             are drawn without text",
            FONTS.join(", ")
        );
    }
    let driver = ctx.info().renderer.clone();
    let staircase = Staircase {
        driver: &driver,
        measured: &measured,
        simulated: &simulated,
        text,
    };
    let bars = Bars {
        model: fitted,
        rows: &meshes,
        text,
    };
    let mut written = Vec::new();
    for (name, draw) in [
        ("vcache-staircase", &staircase as &dyn Plot),
        ("vcache-optimizers", &bars as &dyn Plot),
    ] {
        let svg = args.out.join(format!("{name}.svg"));
        let png = args.out.join(format!("{name}.png"));
        draw.draw_svg(&svg)?;
        draw.draw_png(&png)?;
        written.push(svg);
        written.push(png);
    }
    let mut s = String::new();
    let _ = writeln!(s, "driver: {}", ctx.info());
    let _ = writeln!(s, "fitted model: {fitted}");
    let _ = writeln!(
        s,
        "staircase: 1..={} triangles; measured invocations at the end {}",
        args.staircase,
        measured.last().map_or(0, |p| p.1)
    );
    for (model, series) in &simulated {
        let mismatching = series
            .iter()
            .zip(&measured)
            .filter(|(a, b)| a.1 != b.1)
            .count();
        let _ = writeln!(
            s,
            "  {:<40} differs from the measurement at {mismatching} of {} steps",
            model.to_string(),
            measured.len()
        );
    }
    let _ = writeln!(s, "ACMR under {fitted}:");
    let _ = writeln!(
        s,
        "  {:<24}{:>10}{:>10}{:>10}{:>10}",
        "mesh", ORDERS[0], ORDERS[1], ORDERS[2], ORDERS[3]
    );
    for r in &meshes {
        let _ = writeln!(
            s,
            "  {:<24}{:>10}{:>10}{:>10}{:>10}",
            r.name,
            f3(r.acmr[0]),
            f3(r.acmr[1]),
            f3(r.acmr[2]),
            f3(r.acmr[3])
        );
    }
    match &font {
        Some(f) => {
            let _ = writeln!(s, "PNG text font: {}", f.display());
        }
        None => {
            let _ = writeln!(s, "PNG text font: none found (plots have no text)");
        }
    }
    for w in &written {
        let _ = writeln!(s, "wrote {}", w.display());
    }
    print(&s)
}

/// A plot drawn on any plotters backend.
trait Plot {
    fn draw_svg(&self, path: &Path) -> Result<(), VcacheError>;
    fn draw_png(&self, path: &Path) -> Result<(), VcacheError>;
}

fn plot_error(path: &Path, e: impl std::fmt::Display) -> VcacheError {
    VcacheError::Other(format!("cannot draw {}: {e}", path.display()))
}

macro_rules! backends {
    ($t:ty) => {
        impl Plot for $t {
            fn draw_svg(&self, path: &Path) -> Result<(), VcacheError> {
                let root = SVGBackend::new(path, SIZE).into_drawing_area();
                self.render(&root).map_err(|e| plot_error(path, e))?;
                root.present().map_err(|e| plot_error(path, e))
            }
            fn draw_png(&self, path: &Path) -> Result<(), VcacheError> {
                let root = BitMapBackend::new(path, SIZE).into_drawing_area();
                self.render(&root).map_err(|e| plot_error(path, e))?;
                root.present().map_err(|e| plot_error(path, e))
            }
        }
    };
}

/// Colors for series, fitted model first.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0xe3, 0x77, 0xc2),
];

struct Staircase<'a> {
    driver: &'a str,
    measured: &'a Series,
    simulated: &'a [(Model, Series)],
    text: bool,
}

backends!(Staircase<'_>);

impl Staircase<'_> {
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let x_max = self.measured.last().map_or(3, |p| p.0);
        let y_max = self
            .simulated
            .iter()
            .flat_map(|(_, s)| s.iter())
            .chain(self.measured.iter())
            .map(|p| p.1)
            .max()
            .unwrap_or(3);
        let mut builder = ChartBuilder::on(root);
        builder.margin(16);
        if self.text {
            builder
                .caption(
                    format!("Staircase: k triangles 0 1 2 in one draw ({})", self.driver),
                    ("sans-serif", 20),
                )
                .x_label_area_size(44)
                .y_label_area_size(60);
        } else {
            builder.x_label_area_size(8).y_label_area_size(8);
        }
        let mut chart = builder
            .build_cartesian_2d(0u32..x_max + x_max / 50 + 1, 0u64..y_max + y_max / 10 + 1)
            .map_err(e)?;
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(WHITE.mix(0.0));
        if self.text {
            mesh.x_desc("indices in the draw (3k)")
                .y_desc("vertex-shader invocations")
                .label_style(("sans-serif", 14));
        } else {
            // No font: no tick labels (the axes' labels are their only text).
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(e)?;
        // Measured as points (every step up to 300 steps, then a sample plus every change),
        // then the models as lines over them, the fitted one first and thicker.
        let every = self.measured.len().div_ceil(300).max(1);
        let shown: Vec<(u32, u64)> = self
            .measured
            .iter()
            .enumerate()
            .filter(|&(i, p)| {
                i % every == 0
                    || i == 0
                    || self.measured[i - 1].1 != p.1
                    || i + 1 == self.measured.len()
            })
            .map(|(_, &p)| p)
            .collect();
        let measured = chart
            .draw_series(shown.iter().map(|&p| Circle::new(p, 2, BLACK.filled())))
            .map_err(e)?;
        if self.text {
            measured
                .label("measured on this driver")
                .legend(|(x, y)| Circle::new((x + 9, y), 3, BLACK.filled()));
        }
        for (i, (model, series)) in self.simulated.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let width = if i == 0 { 3 } else { 1 };
            let label = if i == 0 {
                format!("{model} (fitted)")
            } else {
                model.to_string()
            };
            let drawn = chart
                .draw_series(LineSeries::new(steps(series), color.stroke_width(width)))
                .map_err(e)?;
            if self.text {
                drawn.label(label).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
                });
            }
        }
        if self.text {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .label_font(("sans-serif", 14))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        Ok(())
    }
}

/// The corners of a step series: the first and last points and both ends of every change (the
/// line through them is the line through all points).
fn steps(series: &Series) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    for (i, &p) in series.iter().enumerate() {
        let changes_next = series.get(i + 1).is_some_and(|n| n.1 != p.1);
        let changed = i > 0 && series[i - 1].1 != p.1;
        if i == 0 || i + 1 == series.len() || changes_next || changed {
            out.push(p);
        }
    }
    out
}

struct Bars<'a> {
    model: Model,
    rows: &'a [MeshRow],
    text: bool,
}

backends!(Bars<'_>);

impl Bars<'_> {
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let n = self.rows.len().max(1);
        let y_max = self
            .rows
            .iter()
            .flat_map(|r| r.acmr)
            .fold(0.0f64, f64::max)
            .max(0.5);
        let mut builder = ChartBuilder::on(root);
        builder.margin(16);
        if self.text {
            builder
                .caption(
                    format!(
                        "ACMR per mesh and order under {} (lower is better)",
                        self.model
                    ),
                    ("sans-serif", 20),
                )
                .x_label_area_size(40)
                .y_label_area_size(60);
        } else {
            builder.x_label_area_size(8).y_label_area_size(8);
        }
        let mut chart = builder
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..y_max * 1.25)
            .map_err(e)?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .x_labels(0);
        if self.text {
            mesh.y_desc("ACMR (invocations per triangle)")
                .label_style(("sans-serif", 14));
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(e)?;
        let width = 0.8 / ORDERS.len() as f64;
        for (j, order) in ORDERS.iter().enumerate() {
            let color = PALETTE[(j + 1) % PALETTE.len()];
            let color = if j == ORDERS.len() - 1 {
                PALETTE[0]
            } else {
                color
            };
            let drawn = chart
                .draw_series(self.rows.iter().enumerate().map(|(i, r)| {
                    let x0 = i as f64 - 0.4 + j as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.9, r.acmr[j])], color.filled())
                }))
                .map_err(e)?;
            if self.text {
                drawn.label(*order).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            }
        }
        if self.text {
            // Mesh names under their groups, placed in pixels (plotters' custom key points
            // have no formatter for f64 axes).
            let style = TextStyle::from(("sans-serif", 14).into_font())
                .pos(Pos::new(HPos::Center, VPos::Top));
            for (i, r) in self.rows.iter().enumerate() {
                let (x, y) = chart.backend_coord(&(i as f64, 0.0));
                root.draw(&Text::new(r.name.clone(), (x, y + 8), style.clone()))
                    .map_err(e)?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .label_font(("sans-serif", 14))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        Ok(())
    }
}
