//! The compatibility stamp: everything that changes what the driver produces, and the `STAMP`
//! file that names a store folder as ours.

#[cfg(feature = "gl")]
use headless_gl::DriverInfo;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use super::format::FORMAT_VERSION;

/// What a stored binary depends on besides its program key. A different stamp means the driver,
/// the host or our format changed: binaries from the old stamp must not be offered to the driver.
///
/// Make one with [`CompatibilityStamp::new`] (or `from_driver`): it fills the two fields that
/// belong to this build, `format_version` and `pointer_width`, which a host never chooses. The
/// fields are public to be read (and for stamps parsed back from a store); a stamp written as a
/// struct literal must set those two to [`FORMAT_VERSION`] and `usize::BITS`: both go into the
/// stamp's hash, so another value names another store than the one a stamp from `new` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompatibilityStamp {
    /// `GL_VENDOR`.
    pub gl_vendor: String,
    /// `GL_RENDERER`.
    pub gl_renderer: String,
    /// `GL_VERSION` (carries the driver version).
    pub gl_version: String,
    /// The kind of context ("OpenGL core profile", "OpenGL ES", ...): binaries of one profile are
    /// not offered to another.
    pub context: String,
    /// PCI vendor id, when the host knows it.
    pub vendor_id: Option<u32>,
    /// PCI device id, when the host knows it.
    pub device_id: Option<u32>,
    /// Driver build id (e.g. Mesa's build-id note or NVIDIA's driver version), when known.
    pub driver_build_id: Option<String>,
    /// The host *product*: which embedder or browser channel this is ("chrome-stable",
    /// "my-engine"). Two products sharing one folder never treat each other's stores as stale.
    pub host_product: String,
    /// The host's version (browser version + build number, translator version, ...). A store
    /// of the same product and device with an older (or the same) version and another stamp is
    /// stale.
    pub host_version: String,
    /// Our entry format version: [`FORMAT_VERSION`], filled by [`CompatibilityStamp::new`].
    pub format_version: u32,
    /// `usize` width in bits: `usize::BITS`, filled by [`CompatibilityStamp::new`].
    pub pointer_width: u32,
}

/// The driver and device half of a [`CompatibilityStamp`]: what a host reads from its GL
/// context (`glGetString`) and knows about its device. [`CompatibilityStamp::new`] adds the
/// host's product and version and fills the format fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverIdentity {
    /// `GL_VENDOR`.
    pub gl_vendor: String,
    /// `GL_RENDERER`.
    pub gl_renderer: String,
    /// `GL_VERSION` (carries the driver version).
    pub gl_version: String,
    /// The kind of context ("OpenGL core profile", "OpenGL ES", ...); empty when unknown.
    pub context: String,
    /// PCI vendor id, when the host knows it.
    pub vendor_id: Option<u32>,
    /// PCI device id, when the host knows it.
    pub device_id: Option<u32>,
    /// Driver build id (e.g. Mesa's build-id note or NVIDIA's driver version), when known.
    pub driver_build_id: Option<String>,
}

fn sha_text(sha: &mut Sha1, s: &str) {
    sha.update((s.len() as u64).to_le_bytes());
    sha.update(s.as_bytes());
}

impl CompatibilityStamp {
    /// A stamp for `driver` and the host's product and version, with the format fields filled
    /// here: this build's entry format version ([`FORMAT_VERSION`]) and pointer width. A host
    /// never sets those itself.
    pub fn new(
        driver: DriverIdentity,
        host_product: impl Into<String>,
        host_version: impl Into<String>,
    ) -> Self {
        let DriverIdentity {
            gl_vendor,
            gl_renderer,
            gl_version,
            context,
            vendor_id,
            device_id,
            driver_build_id,
        } = driver;
        CompatibilityStamp {
            gl_vendor,
            gl_renderer,
            gl_version,
            context,
            vendor_id,
            device_id,
            driver_build_id,
            host_product: host_product.into(),
            host_version: host_version.into(),
            format_version: FORMAT_VERSION,
            pointer_width: usize::BITS,
        }
    }

    /// A stamp from the driver identity of a live context and the host's product and version.
    #[cfg(feature = "gl")]
    pub fn from_driver(
        info: &DriverInfo,
        host_product: impl Into<String>,
        host_version: impl Into<String>,
    ) -> Self {
        let driver = DriverIdentity {
            gl_vendor: info.vendor.clone(),
            gl_renderer: info.renderer.clone(),
            gl_version: info.version.clone(),
            context: info.context_description(),
            ..DriverIdentity::default()
        };
        Self::new(driver, host_product, host_version)
    }

    /// SHA-1 over every field (length-prefixed, options tagged): what entries carry.
    pub fn hash(&self) -> [u8; 20] {
        let mut sha = Sha1::new();
        sha_text(&mut sha, "gpusvc.stamp.v2");
        sha_text(&mut sha, &hex(&self.device_hash()));
        sha_text(&mut sha, &self.gl_version);
        sha_text(&mut sha, &opt_text(self.driver_build_id.as_deref()));
        sha_text(&mut sha, &self.host_product);
        sha_text(&mut sha, &self.host_version);
        sha.update(self.format_version.to_le_bytes());
        sha.finalize().into()
    }

    /// SHA-1 over what names the device and the kind of context, but not the versions: two
    /// stamps with the same device hash and different stamp hashes are the same GPU and context
    /// before and after a driver or host update.
    pub fn device_hash(&self) -> [u8; 20] {
        let mut sha = Sha1::new();
        sha_text(&mut sha, "gpusvc.device.v1");
        sha_text(&mut sha, &self.gl_vendor);
        sha_text(&mut sha, &self.gl_renderer);
        sha_text(&mut sha, &self.context);
        sha_text(&mut sha, &opt_text(self.vendor_id));
        sha_text(&mut sha, &opt_text(self.device_id));
        sha.update(self.pointer_width.to_le_bytes());
        sha.finalize().into()
    }

    /// The stamp's directory name: the first 8 bytes of its hash in hex (16 digits).
    pub fn dir_name(&self) -> String {
        hex(&self.hash()[..8])
    }

    /// The `STAMP` file's text: one `field: value` line per field (values escaped: `\\`, `\n`,
    /// `\r`), then both hashes. [`CompatibilityStamp::parse`] reads it back.
    pub fn describe(&self) -> String {
        let lines = [
            format!("stamp_format: {STAMP_FORMAT}"),
            format!("format_version: {}", self.format_version),
            format!("pointer_width: {}", self.pointer_width),
            format!("gl_vendor: {}", escape(&self.gl_vendor)),
            format!("gl_renderer: {}", escape(&self.gl_renderer)),
            format!("gl_version: {}", escape(&self.gl_version)),
            format!("context: {}", escape(&self.context)),
            format!("vendor_id: {}", opt_text(self.vendor_id)),
            format!("device_id: {}", opt_text(self.device_id)),
            format!(
                "driver_build_id: {}",
                escape(&opt_text(self.driver_build_id.as_deref()))
            ),
            format!("host_product: {}", escape(&self.host_product)),
            format!("host_version: {}", escape(&self.host_version)),
            format!("device_hash: {}", hex(&self.device_hash())),
            format!("stamp_hash: {}", hex(&self.hash())),
        ];
        lines.join("\n") + "\n"
    }

    /// Parses a `STAMP` file written by [`CompatibilityStamp::describe`]; `None` unless every
    /// field is present and well-formed and both hash lines equal the hashes of the fields.
    pub fn parse(text: &str) -> Option<Self> {
        let f = Fields::new(text)?;
        if f.get("stamp_format")? != STAMP_FORMAT.to_string() {
            return None;
        }
        let stamp = CompatibilityStamp {
            gl_vendor: f.text("gl_vendor")?,
            gl_renderer: f.text("gl_renderer")?,
            gl_version: f.text("gl_version")?,
            context: f.text("context")?,
            vendor_id: parse_opt(f.get("vendor_id")?)?,
            device_id: parse_opt(f.get("device_id")?)?,
            driver_build_id: parse_opt(&f.text("driver_build_id")?)?,
            host_product: f.text("host_product")?,
            host_version: f.text("host_version")?,
            format_version: f.get("format_version")?.parse().ok()?,
            pointer_width: f.get("pointer_width")?.parse().ok()?,
        };
        (f.get("device_hash")? == hex(&stamp.device_hash())
            && f.get("stamp_hash")? == hex(&stamp.hash()))
        .then_some(stamp)
    }
}

/// Version of the `STAMP` file's layout (2: host product and version; 1: one host build id).
const STAMP_FORMAT: u32 = 2;

/// What a store folder's `STAMP` file proves about it, for garbage collection and inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreStamp {
    /// The full stamp hash, recomputed from the fields (so it matches the file's hash line).
    pub(crate) hash: [u8; 20],
    /// The device hash, recomputed.
    pub(crate) device_hash: [u8; 20],
    /// Host product and version (`None` for a layout-1 stamp, which had one build id).
    pub(crate) host: Option<(String, String)>,
}

impl StoreStamp {
    /// Parses a `STAMP` file of either layout and checks it: every field present, hash lines
    /// equal to the recomputed hashes. `None` otherwise.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if let Some(s) = CompatibilityStamp::parse(text) {
            return Some(StoreStamp {
                hash: s.hash(),
                device_hash: s.device_hash(),
                host: Some((s.host_product, s.host_version)),
            });
        }
        parse_layout_1(text)
    }

    /// The folder name this stamp's store has.
    pub(crate) fn dir_name(&self) -> String {
        hex(&self.hash[..8])
    }
}

/// A layout-1 `STAMP` (format 0.1 of this crate: `host_build_id`, Rust-debug options).
fn parse_layout_1(text: &str) -> Option<StoreStamp> {
    let f = Fields::new(text)?;
    if f.get("stamp_format").is_some() {
        return None;
    }
    let stamp = CompatibilityStamp {
        gl_vendor: f.get("gl_vendor")?.to_owned(),
        gl_renderer: f.get("gl_renderer")?.to_owned(),
        gl_version: f.get("gl_version")?.to_owned(),
        context: f.get("context")?.to_owned(),
        vendor_id: parse_debug_opt_u32(f.get("vendor_id")?)?,
        device_id: parse_debug_opt_u32(f.get("device_id")?)?,
        driver_build_id: None,
        host_product: String::new(),
        host_version: String::new(),
        format_version: f.get("format_version")?.parse().ok()?,
        pointer_width: f.get("pointer_width")?.parse().ok()?,
    };
    let driver_build_id = parse_debug_opt_string(f.get("driver_build_id")?)?;
    let host_build_id = f.get("host_build_id")?;
    let device_hash = stamp.device_hash();
    let mut sha = Sha1::new();
    sha_text(&mut sha, "gpusvc.stamp.v1");
    sha_text(&mut sha, &hex(&device_hash));
    sha_text(&mut sha, &stamp.gl_version);
    sha_text(&mut sha, driver_build_id.as_deref().unwrap_or("none"));
    sha_text(&mut sha, host_build_id);
    sha.update(stamp.format_version.to_le_bytes());
    let hash: [u8; 20] = sha.finalize().into();
    (f.get("device_hash")? == hex(&device_hash) && f.get("stamp_hash")? == hex(&hash)).then_some(
        StoreStamp {
            hash,
            device_hash,
            host: None,
        },
    )
}

/// `field: value` lines; a field given twice makes the file malformed.
struct Fields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Fields<'a> {
    fn new(text: &'a str) -> Option<Self> {
        let mut fields: Vec<(&str, &str)> = Vec::new();
        for line in text.lines() {
            let (k, v) = line.split_once(": ")?;
            if fields.iter().any(|(key, _)| *key == k) {
                return None;
            }
            fields.push((k, v));
        }
        Some(Fields(fields))
    }
    fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
    fn text(&self, key: &str) -> Option<String> {
        unescape(self.get(key)?)
    }
}

/// An option as the stamp writes it: `some:VALUE` or `none`.
fn opt_text(v: Option<impl std::fmt::Display>) -> String {
    match v {
        Some(v) => format!("some:{v}"),
        None => "none".into(),
    }
}

/// Reads back what [`opt_text`] wrote (for `String`, any text after `some:`).
fn parse_opt<T: std::str::FromStr>(v: &str) -> Option<Option<T>> {
    if v == "none" {
        return Some(None);
    }
    Some(Some(v.strip_prefix("some:")?.parse().ok()?))
}

fn parse_debug_opt_u32(v: &str) -> Option<Option<u32>> {
    if v == "None" {
        return Some(None);
    }
    Some(Some(
        v.strip_prefix("Some(")?.strip_suffix(')')?.parse().ok()?,
    ))
}

/// `None` / `Some("...")` as Rust's `Debug` writes an `Option<String>`.
fn parse_debug_opt_string(v: &str) -> Option<Option<String>> {
    if v == "None" {
        return Some(None);
    }
    let inner = v.strip_prefix("Some(\"")?.strip_suffix("\")")?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            '0' => out.push('\0'),
            c @ ('\\' | '"' | '\'') => out.push(c),
            'u' => {
                let rest: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let code = u32::from_str_radix(rest.strip_prefix('{')?, 16).ok()?;
                out.push(char::from_u32(code)?);
            }
            _ => return None,
        }
    }
    Some(Some(out))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    Some(out)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two version strings by their runs of digits as numbers and the rest as text
/// ("120.0.6099.71" > "120.0.6099.9"; "1.10" > "1.9").
pub(crate) fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    /// A run of digits (as a number, leading zeros dropped) or of other characters.
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            let boundary =
                i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit();
            if boundary {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for ((da, sa), (db, sb)) in pa.iter().zip(pb.iter()) {
        let ord = if *da && *db {
            let (ta, tb) = (sa.trim_start_matches('0'), sb.trim_start_matches('0'));
            ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb))
        } else {
            sa.cmp(sb)
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> CompatibilityStamp {
        CompatibilityStamp {
            gl_vendor: "V\\endor".into(),
            gl_renderer: "R: x\nnext".into(),
            gl_version: "4.5 (Core Profile) Mesa 22.3.6".into(),
            context: "OpenGL core profile".into(),
            vendor_id: Some(0x10de),
            device_id: None,
            driver_build_id: Some("abc\r".into()),
            host_product: "chrome".into(),
            host_version: "120.0.1".into(),
            format_version: FORMAT_VERSION,
            pointer_width: 64,
        }
    }

    #[test]
    fn a_stamp_file_parses_back_to_the_same_stamp_and_nothing_else_does() {
        let s = stamp();
        assert_eq!(CompatibilityStamp::parse(&s.describe()), Some(s.clone()));
        // Any edited field breaks the hash check.
        let edited = s.describe().replace("chrome", "chromf");
        assert_eq!(CompatibilityStamp::parse(&edited), None);
        assert_eq!(CompatibilityStamp::parse("stamp_format: 2\n"), None);
        assert_eq!(CompatibilityStamp::parse(""), None);
        let twice = s.describe() + "gl_vendor: x\n";
        assert_eq!(CompatibilityStamp::parse(&twice), None);
    }

    #[test]
    fn a_layout_1_stamp_file_is_recognised_with_its_own_hash() {
        // As the previous layout wrote it: host_build_id, Rust-debug options, the v1 hash tag.
        let mut v1 = stamp();
        // Layout-1 stores were written by format version 1.
        v1.format_version = 1;
        v1.gl_vendor = "V".into();
        v1.gl_renderer = "R".into();
        let device = hex(&v1.device_hash());
        let mut sha = Sha1::new();
        sha_text(&mut sha, "gpusvc.stamp.v1");
        sha_text(&mut sha, &device);
        sha_text(&mut sha, &v1.gl_version);
        sha_text(&mut sha, "none");
        sha_text(&mut sha, "host 1");
        sha.update(v1.format_version.to_le_bytes());
        let hash: [u8; 20] = sha.finalize().into();
        let text = |device: &str| {
            format!(
                "format_version: 1\npointer_width: 64\ngl_vendor: V\ngl_renderer: R\n\
                 gl_version: {}\ncontext: OpenGL core profile\nvendor_id: Some(4318)\n\
                 device_id: None\ndriver_build_id: None\nhost_build_id: host 1\n\
                 device_hash: {device}\nstamp_hash: {}\n",
                v1.gl_version,
                hex(&hash)
            )
        };
        let parsed = StoreStamp::parse(&text(&device)).expect("layout 1 parses");
        assert_eq!(parsed.hash, hash);
        assert_eq!(parsed.device_hash, v1.device_hash());
        assert_eq!(parsed.host, None);
        // A wrong device hash line: not ours.
        assert_eq!(StoreStamp::parse(&text("00")), None);
    }

    #[test]
    fn new_fills_the_format_fields_from_this_build() {
        let driver = DriverIdentity {
            gl_vendor: "V\\endor".into(),
            gl_renderer: "R: x\nnext".into(),
            gl_version: "4.5 (Core Profile) Mesa 22.3.6".into(),
            context: "OpenGL core profile".into(),
            vendor_id: Some(0x10de),
            device_id: None,
            driver_build_id: Some("abc\r".into()),
        };
        let made = CompatibilityStamp::new(driver, "chrome", "120.0.1");
        assert_eq!(made.format_version, FORMAT_VERSION);
        assert_eq!(made.pointer_width, usize::BITS);
        assert_eq!(
            made,
            CompatibilityStamp {
                pointer_width: usize::BITS,
                ..stamp()
            }
        );
        // The defaults: no ids, no build id, empty context.
        let bare = CompatibilityStamp::new(DriverIdentity::default(), "p", "1");
        assert_eq!((bare.vendor_id, bare.device_id), (None, None));
        assert_eq!(bare.driver_build_id, None);
        assert_eq!(bare.format_version, FORMAT_VERSION);
    }

    #[test]
    fn versions_compare_by_number() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("120.0.6099.71", "120.0.6099.9"), Greater);
        assert_eq!(compare_versions("1.9", "1.10"), Less);
        assert_eq!(compare_versions("2", "2"), Equal);
        assert_eq!(compare_versions("2.0", "2"), Greater);
        assert_eq!(compare_versions("1.0-beta", "1.0-alpha"), Greater);
        assert_eq!(compare_versions("007", "7"), Equal);
    }
}
