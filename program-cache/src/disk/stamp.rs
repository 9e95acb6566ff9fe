//! The compatibility stamp: everything that changes what the driver produces.

use headless_gl::DriverInfo;
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

use super::format::FORMAT_VERSION;

/// What a stored binary depends on besides its program key. A different stamp means the driver,
/// the host or our format changed: binaries from the old stamp must not be offered to the driver.
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
    /// The host's build id (browser version + build number, translator version, ...).
    pub host_build_id: String,
    /// Our entry format version.
    pub format_version: u32,
    /// `usize` width in bits.
    pub pointer_width: u32,
}

impl CompatibilityStamp {
    /// A stamp from the driver identity of a live context and the host's build id.
    pub fn from_driver(info: &DriverInfo, host_build_id: impl Into<String>) -> Self {
        CompatibilityStamp {
            gl_vendor: info.vendor.clone(),
            gl_renderer: info.renderer.clone(),
            gl_version: info.version.clone(),
            context: info.context_description(),
            vendor_id: None,
            device_id: None,
            driver_build_id: None,
            host_build_id: host_build_id.into(),
            format_version: FORMAT_VERSION,
            pointer_width: usize::BITS,
        }
    }

    /// SHA-1 over every field (length-prefixed, options tagged): what entries carry.
    pub fn hash(&self) -> [u8; 20] {
        let mut sha = Sha1::new();
        let mut text = |s: &str| {
            sha.update((s.len() as u64).to_le_bytes());
            sha.update(s.as_bytes());
        };
        text("gpusvc.stamp.v1");
        text(&hex(&self.device_hash()));
        text(&self.gl_version);
        text(self.driver_build_id.as_deref().map_or("none", |s| s));
        text(&self.host_build_id);
        sha.update(self.format_version.to_le_bytes());
        sha.finalize().into()
    }

    /// SHA-1 over what names the device and the kind of context, but not the versions: two
    /// stamps with the same device hash and different stamp hashes are the same GPU and context
    /// before and after a driver or host update, so the older store is stale.
    pub fn device_hash(&self) -> [u8; 20] {
        let mut sha = Sha1::new();
        let mut text = |s: &str| {
            sha.update((s.len() as u64).to_le_bytes());
            sha.update(s.as_bytes());
        };
        text("gpusvc.device.v1");
        text(&self.gl_vendor);
        text(&self.gl_renderer);
        text(&self.context);
        let opt = |v: Option<u32>| match v {
            Some(v) => format!("some:{v}"),
            None => "none".into(),
        };
        text(&opt(self.vendor_id));
        text(&opt(self.device_id));
        sha.update(self.pointer_width.to_le_bytes());
        sha.finalize().into()
    }

    /// The stamp's directory name: the first 8 bytes of its hash in hex.
    pub fn dir_name(&self) -> String {
        self.hash()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A human-readable description (the directory's STAMP file).
    pub fn describe(&self) -> String {
        let lines = [
            format!("format_version: {}", self.format_version),
            format!("pointer_width: {}", self.pointer_width),
            format!("gl_vendor: {}", self.gl_vendor),
            format!("gl_renderer: {}", self.gl_renderer),
            format!("gl_version: {}", self.gl_version),
            format!("context: {}", self.context),
            format!("vendor_id: {:?}", self.vendor_id),
            format!("device_id: {:?}", self.device_id),
            format!("driver_build_id: {:?}", self.driver_build_id),
            format!("host_build_id: {}", self.host_build_id),
            format!("device_hash: {}", hex(&self.device_hash())),
            format!("stamp_hash: {}", hex(&self.hash())),
        ];
        lines.join("\n") + "\n"
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
